import Foundation
import GRDB
import NotedCore

/// A record of any collection as this device holds it.
public struct StoredRecord: Sendable, Hashable, Identifiable {
    public var collection: String
    /// A lower-case UUID.
    public var id: String
    /// Every field of the collection's schema: the local value, or the field's default.
    public var fields: [String: JSONValue]
    /// The server revision the local state is based on; 0 until the server first acknowledged it.
    public var rev: Int64
    public var createdAt: Date
    /// When the record last changed, locally or on the server.
    public var updatedAt: Date
    /// True while local edits are not yet acknowledged by the server.
    public var pending: Bool
    /// Why the server refused the last change for good; the edit stays on this device until
    /// it is edited into shape or discarded.
    public var refusal: String?
    /// Text fields of the last merge that could not place all of this device's edit (the
    /// intended version is a conflict revision in the record's history).
    public var conflicts: [String]
    /// The shared space the record is in (protocol 2, docs/protocol.md "Spaces"); nil for the
    /// user's personal space.
    public var space: String? = nil
}

/// Which records `LocalStore.records(_:matching:)` returns, and in what order.
public struct RecordQuery: Sendable, Hashable {
    public enum Order: Sendable, Hashable {
        /// The most recently updated first.
        case updatedAt
        /// By an `indexed` scalar.
        case field(String, descending: Bool)
        /// The best matches of `search` first (ignored without a search).
        case relevance
        /// The latest first by a date field holding milliseconds since 1970 (as the notes'
        /// `created` and `modified`), the record's own date where the field is null.
        case date(String, else: RecordDate)
    }

    /// The dates every record has.
    public enum RecordDate: String, Sendable, Hashable {
        case createdAt, updatedAt
    }

    /// Fields that must equal a value (`indexed` scalars), all of them.
    public var equal: [String: JSONValue]
    /// Set fields that must hold an element.
    public var contains: [String: String]
    /// Words that must all occur (as word prefixes) in the `searchable` text fields.
    public var search: String?
    public var order: [Order]
    public var limit: Int?
    /// The space whose records are wanted: nil for every space, `.personal` or one shared space.
    public var space: SpaceScope?

    /// One space: the user's personal space, or a shared one by id.
    public enum SpaceScope: Sendable, Hashable {
        case personal
        case shared(String)
    }

    public init(
        equal: [String: JSONValue] = [:], contains: [String: String] = [:], search: String? = nil,
        order: [Order] = [.updatedAt], limit: Int? = nil, space: SpaceScope? = nil
    ) {
        self.space = space
        self.equal = equal
        self.contains = contains
        self.search = search
        self.order = order
        self.limit = limit
    }
}

/// One local transaction: the funnel every local edit goes through. Edits to several records
/// of several collections are stored together or not at all; each record then reaches the
/// server as its own change, exactly once.
public struct LocalTransaction {
    let db: Database
    let store: LocalStore
    let parser: ChangeParser
    let now: Date
    /// What the transaction did, for events: (collection, id).
    var changed: [(String, String)] = []
    var added: Set<String> = []
    var removed: [(String, String)] = []

    /// Creates a record; fields not given read as their defaults.
    @discardableResult
    /// - Parameter space: a shared space the user may write in (nil: the personal space).
    public mutating func create(
        _ collection: String, fields: [String: JSONValue], id: String = UUID().uuidString.lowercased(),
        space: String? = nil
    ) throws -> StoredRecord {
        guard UUIDText.isCanonical(id) else {
            throw NotedClientError(.invalidInput, "a record id must be a lower-case UUID")
        }
        let schema = try self.schema(collection)
        guard try RecordRow.find(db, id: id) == nil else {
            throw NotedClientError(.invalidInput, "a record \(id) exists already")
        }
        try validate(fields, collection)
        if let space { try LocalStore.checkWritable(db, space: space) }
        var row = RecordRow(id: id, collection: collection, local: schema.completed(fields), now: now)
        try row.insertNew(db)
        if let space {
            try db.execute(sql: "UPDATE record SET space = ? WHERE rowKey = ?", arguments: [space, row.rowKey])
            row.space = space
        }
        changed.append((collection, id))
        added.insert(id)
        return StoredRecord(row, schema: schema)
    }

    /// Changes a record's fields; stores nothing when `edit` changes nothing.
    @discardableResult
    public mutating func update(_ collection: String, id: String, _ edit: (inout [String: JSONValue]) throws -> Void)
        throws -> StoredRecord
    {
        let schema = try self.schema(collection)
        guard var row = try RecordRow.find(db, id: id), row.collection == collection, !row.state.purging else {
            throw NotedClientError(.notFound, "no \(collection) record \(id)")
        }
        var fields = schema.completed(row.localFields)
        let before = fields
        try edit(&fields)
        fields = schema.completed(fields)
        guard fields != before else { return StoredRecord(row, schema: schema) }
        // Only what the edit changed is checked, as the server checks only the ops it gets: a
        // field a newer schema added (written by another device) does not block edits here.
        try validate(fields.filter { before[$0.key] != $0.value }, collection)
        row.localFields = fields
        row.state.edit()
        row.updatedAt = now
        try row.update(db)
        changed.append((collection, id))
        return StoredRecord(row, schema: schema)
    }

    /// Deletes a record for good, on the server too once synced; a record never synced just
    /// disappears.
    public mutating func purge(_ collection: String, id: String) throws {
        guard var row = try RecordRow.find(db, id: id), row.collection == collection, !row.state.purging else {
            throw NotedClientError(.notFound, "no \(collection) record \(id)")
        }
        if row.rev == 0 && !row.hasInflight {
            try row.delete(db)
        } else {
            row.state.purge()
            try row.update(db)
        }
        removed.append((collection, id))
    }

    /// The record with this id in `collection`, nil when there is none.
    public func get(_ collection: String, id: String) throws -> StoredRecord? {
        let schema = try self.schema(collection)
        guard let row = try RecordRow.find(db, id: id), row.collection == collection, !row.state.purging else {
            return nil
        }
        return StoredRecord(row, schema: schema)
    }

    private func schema(_ collection: String) throws -> CollectionSchema {
        guard let schema = store.schemas[collection] else {
            throw NotedClientError(.invalidInput, "collection \"\(collection)\" is not declared in this store")
        }
        return schema
    }

    /// The rules of the server (ChangeParser), with the limits it last advertised: an edit the
    /// server would refuse is refused here, before it is stored.
    private func validate(_ fields: [String: JSONValue], _ collection: String) throws {
        for name in fields.keys.sorted() {
            do {
                try parser.validate(value: fields[name] ?? .null, field: name, in: collection)
            } catch {
                throw NotedClientError(.invalidInput, "\(collection): \(error.message)")
            }
        }
    }
}

extension StoredRecord {
    /// The record as a note (meaningful for the `notes` collection).
    var note: Note {
        let fields = NoteFields(json: fields)
        return Note(
            id: id, title: fields.title, body: fields.body, tags: fields.tags, folder: fields.folder,
            pinned: fields.pinned,
            trashed: fields.trashed, rev: rev, createdAt: fields.created ?? createdAt,
            updatedAt: fields.modified ?? updatedAt,
            created: fields.created, modified: fields.modified, attachments: fields.attachments, pending: pending,
            refusal: refusal, space: space)
    }

    init(_ row: RecordRow, schema: CollectionSchema) {
        self.init(
            collection: row.collection, id: row.id, fields: schema.completed(row.localFields), rev: row.rev,
            createdAt: row.createdAt, updatedAt: row.updatedAt, pending: row.pending, refusal: row.state.refusal,
            conflicts: row.state.conflicts, space: row.space)
    }
}

extension LocalStore {
    /// Runs `body` as one transaction: every edit in it is stored, or none.
    public func transaction<T: Sendable>(now: Date = Date(), _ body: @Sendable (inout LocalTransaction) throws -> T)
        async throws -> (value: T, effect: StoreEffect)
    {
        try await writer.write { db in
            var transaction = LocalTransaction(
                db: db, store: self, parser: ChangeParser(schemas: schemas, limits: try limits(db)), now: now)
            let value = try body(&transaction)
            var effect = StoreEffect()
            // Each record once; one created and purged in the same transaction was never there.
            let removed = Set(transaction.removed.map(\.1))
            var seen: Set<String> = []
            for (collection, id) in transaction.changed where seen.insert(id).inserted {
                if transaction.added.contains(id) {
                    if !removed.contains(id) { effect.add(id, in: collection) }
                } else if !removed.contains(id) {
                    effect.change(id, in: collection)
                }
            }
            for (collection, id) in transaction.removed where !transaction.added.contains(id) {
                effect.remove(id, in: collection)
            }
            return (value, effect)
        }
    }

    /// One record, nil when there is none in `collection`.
    public func record(_ collection: String, id: String) async throws -> StoredRecord? {
        guard let schema = schemas[collection] else { return nil }
        return try await writer.read { db in
            guard let row = try RecordRow.find(db, id: id), row.collection == collection, !row.state.purging else {
                return nil
            }
            return StoredRecord(row, schema: schema)
        }
    }

    /// The records of `collection` that match `query`, in its order.
    public func records(_ collection: String, matching query: RecordQuery = RecordQuery()) async throws
        -> [StoredRecord]
    {
        let schema = try declared(collection)
        return try await writer.read { db in try Self.fetch(db, collection, schema: schema, query) }
    }

    func declared(_ collection: String) throws -> CollectionSchema {
        guard let schema = schemas[collection] else {
            throw NotedClientError(.invalidInput, "collection \"\(collection)\" is not declared in this store")
        }
        return schema
    }

    static func fetch(_ db: Database, _ collection: String, schema: CollectionSchema, _ query: RecordQuery) throws
        -> [StoredRecord]
    {
        let (sql, arguments) = try Self.sql(collection, schema: schema, query)
        return try RecordRow.fetchAll(db, sql: sql, arguments: arguments).map { StoredRecord($0, schema: schema) }
    }

    static func sql(_ collection: String, schema: CollectionSchema, _ query: RecordQuery) throws -> (
        String, StatementArguments
    ) {
        var sql = "SELECT record.* FROM record"
        var conditions = ["record.collection = ?", RecordRow.visible]
        var arguments: StatementArguments = [collection]
        if let match = query.search.flatMap(ftsMatch) {
            sql += " JOIN record_fts ON record_fts.rowid = record.rowKey"
            conditions.append("record_fts MATCH ?")
            arguments += [match]
        } else if query.search != nil {
            return ("SELECT * FROM record WHERE 0", [])
        }
        switch query.space {
        case nil: break
        case .personal: conditions.append("record.space IS NULL")
        case .shared(let id):
            conditions.append("record.space = ?")
            arguments += [id]
        }
        for (field, value) in query.equal.sorted(by: { $0.key < $1.key }) {
            let spec = try self.field(field, of: schema, kind: .scalar)
            // A record without the field (written before the field existed) reads as its default.
            let missing = value.sameValue(as: spec.defaultValue) ? " OR json_type(record.local, ?) IS NULL" : ""
            conditions.append("(json_extract(record.local, ?) IS ?\(missing))")
            arguments += ["$." + field, sqlValue(value)]
            if !missing.isEmpty { arguments += ["$." + field] }
        }
        for (field, element) in query.contains.sorted(by: { $0.key < $1.key }) {
            _ = try self.field(field, of: schema, kind: .set)
            conditions.append("EXISTS (SELECT 1 FROM json_each(record.local, ?) WHERE value = ?)")
            arguments += ["$." + field, element]
        }
        sql += " WHERE " + conditions.joined(separator: " AND ")
        var orderings: [String] = []
        for order in query.order {
            switch order {
            case .updatedAt:
                orderings.append("record.updatedAt DESC")
            case .relevance:
                if query.search != nil { orderings.append("bm25(record_fts)") }
            case .date(let name, let fallback):
                _ = try self.field(name, of: schema, kind: .scalar)
                // SQLite keeps the record's dates as UTC text; julianday() reads them.
                orderings.append(
                    "coalesce(json_extract(record.local, '$.\(name)'), (julianday(record.\(fallback.rawValue)) - 2440587.5) * 86400000.0) DESC"
                )
            case .field(let name, let descending):
                let spec = try self.field(name, of: schema, kind: .scalar)
                orderings.append("coalesce(json_extract(record.local, '$.\(name)'), ?) \(descending ? "DESC" : "ASC")")
                arguments += [sqlValue(spec.defaultValue)]
            }
        }
        sql += " ORDER BY " + (orderings + ["record.id"]).joined(separator: ", ")
        if let limit = query.limit {
            sql += " LIMIT ?"
            arguments += [limit]
        }
        return (sql, arguments)
    }

    /// A JSON scalar as SQLite's `json_extract` gives it back (booleans as 1 and 0).
    private static func sqlValue(_ value: JSONValue) -> (any DatabaseValueConvertible)? {
        switch value {
        case .string(let text): text
        case .int(let number): number
        case .double(let number): number
        case .bool(let flag): flag ? 1 : 0
        case .null, .array, .object: nil
        }
    }

    private static func field(_ name: String, of schema: CollectionSchema, kind: FieldKind) throws -> FieldSpec {
        guard let spec = schema.fields[name], spec.kind == kind else {
            throw NotedClientError(.invalidInput, "\(schema.name) has no \(kind.rawValue) field \"\(name)\"")
        }
        return spec
    }

    /// Each word as a quoted FTS5 prefix string: no user text is FTS syntax. Nil: no words.
    static func ftsMatch(_ query: String) -> String? {
        let words = query.split(whereSeparator: { $0.isWhitespace || $0.isPunctuation && $0 != "_" })
        guard !words.isEmpty else { return nil }
        return words.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"*" }.joined(separator: " ")
    }
}
