import Foundation
import GRDB
import NotedCore

/// Which notes `list` returns.
public struct NoteFilter: Sendable, Hashable {
    public var folder: String?
    public var tag: String?
    /// False: notes outside the trash; true: only notes in the trash.
    public var trashed: Bool

    public init(folder: String? = nil, tag: String? = nil, trashed: Bool = false) {
        self.folder = folder
        self.tag = tag
        self.trashed = trashed
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
    public func create(_ fields: NoteFields, id: String = UUID().uuidString.lowercased(), now: Date = Date()) async throws -> Note {
        guard UUIDText.isCanonical(id) else { throw NotedClientError(.invalidInput, "a note id must be a lower-case UUID") }
        return try await writer.write { db in
            try validate(fields, limits: limits(db))
            var row = RecordRow(id: id, collection: Self.collection, local: fields.json, now: now)
            try row.insert(db)
            return row.note
        }
    }

    /// Changes a note's fields in one transaction with its outbox state; returns the new note.
    @discardableResult
    public func update(_ id: String, now: Date = Date(), _ edit: @Sendable (inout NoteFields) throws -> Void) async throws -> Note {
        try await writer.write { db in
            guard var row = try RecordRow.find(db, id: id), !row.state.purging else {
                throw NotedClientError(.notFound, "no note \(id)")
            }
            var fields = NoteFields(json: row.localFields)
            let before = fields
            try edit(&fields)
            guard fields != before else { return row.note }
            try validate(fields, limits: limits(db))
            row.localFields = fields.json
            row.state.edit()
            row.updatedAt = now
            try row.update(db)
            return row.note
        }
    }

    /// Purges a note for good (on the server too once synced); a note never synced just disappears.
    public func purge(_ id: String) async throws {
        try await writer.write { db in
            guard var row = try RecordRow.find(db, id: id), !row.state.purging else {
                throw NotedClientError(.notFound, "no note \(id)")
            }
            if row.rev == 0 && !row.hasInflight {
                try row.delete(db)
            } else {
                row.state.purge()
                try row.update(db)
            }
        }
    }

    /// The note with this id, nil when there is none.
    public func note(_ id: String) async throws -> Note? {
        try await writer.read { db in
            try RecordRow.find(db, id: id).flatMap { $0.state.purging ? nil : $0.note }
        }
    }

    /// The full id of the one note whose id starts with `prefix`.
    public func resolve(prefix: String) async throws -> String {
        let prefix = prefix.lowercased()
        guard !prefix.isEmpty, prefix.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw NotedClientError(.invalidInput, "\"\(prefix)\" is not a note id or id prefix")
        }
        let matches = try await writer.read { db in
            try String.fetchAll(db, sql: "SELECT id FROM record WHERE \(RecordRow.visible) AND substr(id, 1, ?) = ? LIMIT 2", arguments: [prefix.count, prefix])
        }
        switch matches.count {
        case 0: throw NotedClientError(.notFound, "no note has an id starting with \(prefix)")
        case 1: return matches[0]
        default: throw NotedClientError(.ambiguous, "more than one note has an id starting with \(prefix); give more characters")
        }
    }

    /// Notes matching `filter`: pinned first, then the most recently updated.
    public func list(_ filter: NoteFilter = NoteFilter()) async throws -> [Note] {
        try await writer.read { db in try Self.fetchList(db, filter) }
    }

    static func fetchList(_ db: Database, _ filter: NoteFilter) throws -> [Note] {
            var sql = "SELECT * FROM record WHERE \(RecordRow.visible) AND collection = ? AND coalesce(json_extract(local, '$.trashed'), 0) = ?"
            var arguments: StatementArguments = [Self.collection, filter.trashed]
            if let folder = filter.folder {
                sql += " AND json_extract(local, '$.folder') = ?"
                arguments += [folder]
            }
            if let tag = filter.tag {
                sql += " AND EXISTS (SELECT 1 FROM json_each(record.local, '$.tags') WHERE value = ?)"
                arguments += [tag]
            }
            sql += " ORDER BY coalesce(json_extract(local, '$.pinned'), 0) DESC, updatedAt DESC, id"
            return try RecordRow.fetchAll(db, sql: sql, arguments: arguments).map(\.note)
    }

    /// Notes whose title or body contain every word of `query` (prefix match), best first;
    /// notes in the trash are left out.
    public func search(_ query: String) async throws -> [Note] {
        let words = query.split(whereSeparator: { $0.isWhitespace || $0.isPunctuation && $0 != "_" })
        guard !words.isEmpty else { return [] }
        // Each word becomes a quoted FTS5 string with a prefix star: no user text is FTS syntax.
        let match = words.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"*" }.joined(separator: " ")
        return try await writer.read { db in
            try RecordRow.fetchAll(db, sql: """
                SELECT record.* FROM note_fts JOIN record ON record.rowKey = note_fts.rowid
                WHERE note_fts MATCH ? AND \(RecordRow.visible)
                  AND coalesce(json_extract(record.local, '$.trashed'), 0) = 0
                ORDER BY bm25(note_fts, 2.0, 1.0), record.updatedAt DESC
                """, arguments: [match]).map(\.note)
        }
    }

    /// How many notes have local changes the server has not acknowledged.
    public func pendingCount() async throws -> Int {
        try await writer.read { db in
            // A cached statement: this runs after every sync step, and preparing a query-interface
            // request each time (GRDB's authorizer) cost more than the query.
            try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM record WHERE \(RecordRow.pending)")) ?? 0
        }
    }

    /// Notes whose last change the server refused for good, with the reason.
    public func syncErrors() async throws -> [(id: String, message: String)] {
        try await writer.read { db in
            try RecordRow.filter(sql: "json_extract(sync, '$.refusal') IS NOT NULL").fetchAll(db).map { ($0.id, $0.state.refusal ?? "") }
        }
    }

    func validate(_ fields: NoteFields, limits: Limits) throws {
        for (name, text) in [("title", fields.title), ("body", fields.body)] where text.utf16.count > limits.maxTextLength {
            throw NotedClientError(.invalidInput, "the \(name) is longer than \(limits.maxTextLength) UTF-16 code units")
        }
        guard fields.tags.count <= limits.maxTags else {
            throw NotedClientError(.invalidInput, "a note has at most \(limits.maxTags) tags")
        }
        guard Set(fields.tags).count == fields.tags.count else {
            throw NotedClientError(.invalidInput, "a tag appears twice")
        }
        for tag in fields.tags {
            guard !tag.isEmpty, tag.utf16.count <= limits.maxTagLength else {
                throw NotedClientError(.invalidInput, "a tag must be 1 to \(limits.maxTagLength) UTF-16 code units")
            }
        }
        if let folder = fields.folder, folder.utf16.count > limits.maxTextLength {
            throw NotedClientError(.invalidInput, "the folder name is too long")
        }
    }
}
