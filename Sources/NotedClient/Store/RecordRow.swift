import Foundation
import GRDB
import NotedCore

/// One record in the local database: what the user sees, the server state it is based on, and
/// the outbox state.
///
/// The outbox is not a separate queue: a record is pending while it is `dirty` (edits not yet
/// put in a change), has an in-flight change (sent or about to be sent, resent unchanged until
/// answered), or waits for a purge.
struct RecordRow: Codable, Sendable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "record"

    var rowKey: Int64?
    var id: String
    var collection: String
    /// JSON object: the fields as the user sees them.
    var local: String
    /// JSON object: the server's fields at `rev`; nil before the first acknowledgement.
    var shadow: String?
    var rev: Int64
    /// Local edits not yet captured in a change.
    var dirty: Bool
    /// The user purged the record; the delete is pending.
    var localDeleted: Bool
    /// The next change sends text fields with `set` (after `base_unavailable` or `invalid_delta`).
    var textAsSet: Bool
    /// Why the server refused the last change for good (the edit stays local).
    var syncError: String?
    var createdAt: Date
    var updatedAt: Date
    var inflightCcid: String?
    var inflightBaseRev: Int64?
    /// The exact change JSON, resent unchanged.
    var inflightBody: String?
    /// The fields the in-flight change produces when applied exactly.
    var inflightSent: String?
    /// The newest server state seen while a change was in flight.
    var stash: String?
    var stashRev: Int64?
    var stashUpdatedAt: Date?
    /// Comma-separated text fields of the last merge that could not place all of our edit; the
    /// intended version is in the server's history as a conflict revision.
    var conflicts: String?
    /// With `textAsSet`: the older revision the next change names as its `baseRev`, so that the
    /// server treats its `set`s as stale and keeps the text they replace as a conflict revision
    /// (after a merged ack that the user's later edits could not be rebased onto).
    var setBaseRev: Int64?
    /// A snapshot pull (which carries no tombstones) ended at this `seq` without naming the
    /// record while a change to it was in flight: if that change's ack has a `seq` up to here,
    /// the change was applied before the snapshot and the record purged since.
    var absentAtSeq: Int64?

    enum Columns {
        static let rowKey = Column(CodingKeys.rowKey)
        static let id = Column(CodingKeys.id)
        static let local = Column(CodingKeys.local)
        static let rev = Column(CodingKeys.rev)
        static let dirty = Column(CodingKeys.dirty)
        static let localDeleted = Column(CodingKeys.localDeleted)
        static let updatedAt = Column(CodingKeys.updatedAt)
        static let inflightCcid = Column(CodingKeys.inflightCcid)
        static let syncError = Column(CodingKeys.syncError)
        static let conflicts = Column(CodingKeys.conflicts)
    }

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
        self.dirty = true
        self.localDeleted = false
        self.textAsSet = false
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

    var hasInflight: Bool { inflightCcid != nil }
    var pending: Bool { dirty || inflightCcid != nil || localDeleted }

    mutating func clearInflight() {
        inflightCcid = nil
        inflightBaseRev = nil
        inflightBody = nil
        inflightSent = nil
        absentAtSeq = nil
    }

    mutating func clearStash() {
        stash = nil
        stashRev = nil
        stashUpdatedAt = nil
    }

    static func decode(_ text: String) -> [String: JSONValue]? {
        (try? JSONValue.parse(text))?.objectValue
    }

    var note: Note {
        let fields = NoteFields(json: localFields)
        return Note(
            id: id, title: fields.title, body: fields.body, tags: fields.tags, folder: fields.folder,
            pinned: fields.pinned, trashed: fields.trashed, rev: rev, createdAt: createdAt, updatedAt: updatedAt,
            pending: pending)
    }
}
