import Foundation
import GRDB
import NotedCore

/// Which notes `list` returns.
public struct NoteFilter: Sendable, Hashable {
    public var folder: String?
    public var tag: String?
    /// False: notes outside the trash; true: only notes in the trash.
    public var trashed: Bool
    /// After the pinned notes, the latest changed first (`updated`) or the latest written
    /// first (`created`); dates brought by an import count as the note's.
    public var order: Order
    /// Only the notes of one space (nil: of every space).
    public var space: RecordQuery.SpaceScope?

    public enum Order: String, Sendable, Hashable, CaseIterable {
        case updated, created
    }

    public init(
        folder: String? = nil, tag: String? = nil, trashed: Bool = false, order: Order = .updated,
        space: RecordQuery.SpaceScope? = nil
    ) {
        self.space = space
        self.folder = folder
        self.tag = tag
        self.trashed = trashed
        self.order = order
    }
}

extension LocalStore {
    /// The limits local edits are checked against: the last ones a server advertised in
    /// `welcome`, else the protocol's defaults.
    func limits(_ db: Database) throws -> Limits {
        guard let text = try meta(db, "limits"), let value = try? JSONValue.parse(text) else { return Limits() }
        return Limits(json: value)
    }

    /// Creates a note; it is pending until the server acknowledges it.
    @discardableResult
    /// - Parameter space: a shared space the user may write in (nil: the personal space).
    public func create(
        _ fields: NoteFields, id: String = UUID().uuidString.lowercased(), now: Date = Date(), space: String? = nil
    ) async throws -> Note {
        try await transaction(now: now) { try $0.create(Self.collection, fields: fields.json, id: id, space: space) }
            .value.note
    }

    /// Changes a note's fields in one transaction with its outbox state; returns the new note.
    @discardableResult
    public func update(_ id: String, now: Date = Date(), _ edit: @Sendable (inout NoteFields) throws -> Void)
        async throws -> Note
    {
        try await transaction(now: now) { transaction in
            try transaction.update(Self.collection, id: id) { json in
                let before = NoteFields(json: json)
                var fields = before
                try edit(&fields)
                // The imported modification date stands until the content is edited here; then
                // the record's own date is the note's.
                if fields.modified == before.modified, !fields.sameContent(as: before) { fields.modified = nil }
                json = fields.json
            }
        }.value.note
    }

    /// Purges a note for good (on the server too once synced); a note never synced just disappears.
    public func purge(_ id: String) async throws {
        _ = try await transaction { try $0.purge(Self.collection, id: id) }
    }

    /// The note with this id, nil when there is none.
    public func note(_ id: String) async throws -> Note? {
        try await record(Self.collection, id: id)?.note
    }

    /// The full id of the one note whose id starts with `prefix`.
    public func resolve(prefix: String) async throws -> String {
        let prefix = prefix.lowercased()
        guard !prefix.isEmpty, prefix.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw NotedClientError(.invalidInput, "\"\(prefix)\" is not a note id or id prefix")
        }
        let matches = try await writer.read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT id FROM record WHERE collection = ? AND \(RecordRow.visible) AND substr(id, 1, ?) = ? LIMIT 2
                    """, arguments: [Self.collection, prefix.count, prefix])
        }
        switch matches.count {
        case 0: throw NotedClientError(.notFound, "no note has an id starting with \(prefix)")
        case 1: return matches[0]
        default:
            throw NotedClientError(
                .ambiguous, "more than one note has an id starting with \(prefix); give more characters")
        }
    }

    /// Notes matching `filter`: pinned first, then the most recently updated.
    public func list(_ filter: NoteFilter = NoteFilter()) async throws -> [Note] {
        try await records(Self.collection, matching: Self.notesQuery(filter)).map(\.note)
    }

    static func notesQuery(_ filter: NoteFilter) -> RecordQuery {
        let date: RecordQuery.Order =
            switch filter.order {
            case .updated: .date("modified", else: .updatedAt)
            case .created: .date("created", else: .createdAt)
            }
        var query = RecordQuery(
            equal: ["trashed": .bool(filter.trashed)], order: [.field("pinned", descending: true), date])
        if let folder = filter.folder { query.equal["folder"] = .string(folder) }
        if let tag = filter.tag { query.contains["tags"] = tag }
        query.space = filter.space
        return query
    }

    /// Notes whose title or body contain every word of `query` (prefix match), best first;
    /// notes in the trash are left out.
    public func search(_ query: String) async throws -> [Note] {
        try await records(
            Self.collection,
            matching: RecordQuery(equal: ["trashed": false], search: query, order: [.relevance, .updatedAt])
        )
        .map(\.note)
    }

    /// How many notes have local changes the server has not acknowledged.
    public func pendingCount() async throws -> Int {
        try await writer.read { db in
            // A cached statement: this runs after every sync step, and preparing a query-interface
            // request each time (GRDB's authorizer) cost more than the query.
            try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM record WHERE \(RecordRow.pending)")) ?? 0
        }
    }

    /// Records of every collection whose edits have not reached the server: pending ones and
    /// refused ones (with the refusal), in the order they were made. What signing out would
    /// leave behind on this device only.
    public func unsynced() async throws -> [StoredRecord] {
        let schemas = self.schemas
        return try await writer.read { db in
            try RecordRow.filter(sql: "(\(RecordRow.pending)) OR json_extract(record.sync, '$.refusal') IS NOT NULL")
                .order(sql: "rowKey").fetchAll(db)
                .compactMap { row in schemas[row.collection].map { StoredRecord(row, schema: $0) } }
        }
    }

    /// Notes whose last change the server refused for good, with the reason.
    public func syncErrors() async throws -> [(id: String, message: String)] {
        try await writer.read { db in
            try RecordRow.filter(sql: "json_extract(sync, '$.refusal') IS NOT NULL").fetchAll(db).map {
                ($0.id, $0.state.refusal ?? "")
            }
        }
    }
}
