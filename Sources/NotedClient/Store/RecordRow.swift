import Foundation
import GRDB
import NotedCore

/// One record in the local database: what the user sees, the server state it is based on, and
/// where it stands in sync (`state`, see `SyncState`).
struct RecordRow: Sendable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "record"

    var rowKey: Int64?
    var id: String
    var collection: String
    /// JSON object: the fields as the user sees them.
    var local: String
    /// JSON object: the server's fields at `rev`; nil before the first acknowledgement.
    var shadow: String?
    var rev: Int64
    var createdAt: Date
    var updatedAt: Date
    /// Stored in the `sync` column: NULL when synced, else the state as JSON.
    var state: SyncState

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
        shadow = row["shadow"]
        rev = row["rev"]
        createdAt = row["createdAt"]
        updatedAt = row["updatedAt"]
        if let text: String = row["sync"] {
            state = try SyncState(json: (try? JSONValue.parse(text)) ?? .null)
        } else {
            state = .synced
        }
    }

    func encode(to container: inout PersistenceContainer) throws {
        container["rowKey"] = rowKey
        container["id"] = id
        container["collection"] = collection
        container["local"] = local
        container["shadow"] = shadow
        container["rev"] = rev
        container["createdAt"] = createdAt
        container["updatedAt"] = updatedAt
        container["sync"] = state == .synced ? nil : state.json.jsonString
    }

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
