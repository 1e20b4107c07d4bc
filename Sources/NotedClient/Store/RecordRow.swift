import Foundation
import GRDB
import NotedCore

/// One record in the local database: what the user sees, the server state it is based on, and
/// where it stands in sync (`state`, see `SyncState`).
struct RecordRow: Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "record"

    var rowKey: Int64?
    var id: String
    var collection: String
    /// JSON object: the fields as the user sees them.
    var local: String
    /// JSON object: the server's fields at `rev`; nil before the first acknowledgement.
    /// Stored as `RecordRow.sameAsLocal` when it is the same text as `local` (every synced
    /// record without local edits): otherwise each such record held its fields twice, and an
    /// initial sync wrote them twice (issue 18).
    var shadow: String?
    var rev: Int64
    var createdAt: Date
    var updatedAt: Date
    /// Stored in the `sync` column: NULL when synced, else the state as JSON.
    var state: SyncState
    /// The shared space the record is in (nil: the personal space). Read only: written by
    /// ``LocalStore`` statements of its own (`UPDATE record SET space`), never by `update`.
    var space: String?

    enum Columns {
        static let rowKey = Column("rowKey")
        static let id = Column("id")
        static let local = Column("local")
        static let rev = Column("rev")
        static let updatedAt = Column("updatedAt")
        static let sync = Column("sync")
    }

    init(row: Row) throws {
        rowKey = row["rowKey"]
        id = row["id"]
        collection = row["collection"]
        local = row["local"]
        let shadow: String? = row["shadow"]
        self.shadow = shadow == Self.sameAsLocal ? local : shadow
        rev = row["rev"]
        createdAt = row["createdAt"]
        updatedAt = row["updatedAt"]
        space = row.hasColumn("space") ? row["space"] : nil
        if let text: String = row["sync"] {
            state = try SyncState(json: (try? JSONValue.parse(text)) ?? .null)
        } else {
            state = .synced
        }
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["rowKey"] = rowKey
        for (name, value) in zip(Self.storedColumns, storedValues) {
            container[name] = value
        }
    }

    /// The columns written besides `rowKey`, in the order of `storedValues`.
    private static let storedColumns = ["id", "collection", "local", "shadow", "rev", "createdAt", "updatedAt", "sync"]

    private var storedValues: [(any DatabaseValueConvertible)?] {
        [
            id, collection, local, shadow == local ? Self.sameAsLocal : shadow, rev, createdAt, updatedAt,
            state == .synced ? nil : state.json.jsonString,
        ]
    }

    /// Inserts a new record through one cached statement. GRDB's `insert` builds its statement's
    /// SQL and a persistence container for each record: 10 % of an initial sync of 10,000 notes.
    mutating func insertNew(_ db: Database) throws {
        precondition(rowKey == nil, "a new record has no rowKey yet")
        try db.cachedStatement(sql: Self.insertSQL).execute(arguments: StatementArguments(storedValues))
        rowKey = db.lastInsertedRowID
    }

    private static let insertSQL =
        "INSERT INTO record (\(storedColumns.joined(separator: ", "))) VALUES ("
        + Array(repeating: "?", count: storedColumns.count).joined(separator: ", ") + ")"

    /// The `shadow` column's value for "the same text as `local`": not a JSON object, so never
    /// a shadow of its own.
    static let sameAsLocal = "="

    /// SQL: the record is not being purged (so the user sees it).
    static let visible = "(record.syncFlags & \(SyncState.purgingFlag)) = 0"
    /// SQL: the record is pending (`SyncState.pending`). The `syncFlags` column (generated from
    /// `sync`, indexed) answers it from the index: reading `sync` meant reading the whole row
    /// (it comes after the fields), for every row, on every sync step.
    static let pending = "record.syncFlags <> 0"
    /// SQL: the record has a change in flight.
    static let inflight = "record.syncFlags <> 0 AND (record.syncFlags & \(SyncState.inflightFlag)) <> 0"

    /// The record with this id, through a cached statement (read on every sync message).
    static func find(_ db: Database, id: String) throws -> RecordRow? {
        try RecordRow.fetchOne(db.cachedStatement(sql: "SELECT * FROM record WHERE id = ?"), arguments: [id])
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        rowKey = inserted.rowID
    }

    init(id: String, collection: String, local: [String: JSONValue], now: Date) {
        self.id = id
        self.collection = collection
        self.local = JSONValue.object(local).jsonString
        self.shadow = nil
        self.rev = 0
        self.state = .created
        self.createdAt = now
        self.updatedAt = now
    }

    var localFields: [String: JSONValue] {
        get { Self.decode(local) ?? [:] }
        set { local = JSONValue.object(newValue).jsonString }
    }

    var shadowFields: [String: JSONValue] {
        get { shadow.flatMap(Self.decode) ?? [:] }
        set { shadow = JSONValue.object(newValue).jsonString }
    }

    var hasInflight: Bool { state.inflight != nil }
    var pending: Bool { state.pending }

    static func decode(_ text: String) -> [String: JSONValue]? {
        (try? JSONValue.parse(text))?.objectValue
    }
}
