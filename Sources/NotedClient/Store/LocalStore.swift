import Foundation
import GRDB
import NotedCore

/// The local database of a client: notes, their shadows and outbox state, the sync cursor.
///
/// Every write goes through one transaction funnel: a local edit and its outbox state are
/// written together, so no acknowledged or unacknowledged edit can be half-stored.
///
/// ```swift
/// let store = try LocalStore.open(path: "/path/noted.sqlite")
/// let note = try await store.create(NoteFields(title: "Groceries"))
/// ```
public struct LocalStore: Sendable {
    let writer: any DatabaseWriter
    /// The collections this store keeps and syncs: `notes` and those the app declared.
    public let schemas: SchemaRegistry
    let maths: [String: RecordMath]
    /// On while a page of records is stored: the search index's insert trigger stands aside and
    /// the page's new records are indexed in one statement at its end (``storePage``).
    let searchIndexDeferred = SearchIndexDeferral()
    let searchTexts: SearchText
    static let collection = "notes"

    /// The field arithmetic of a collection (a collection no longer declared has no fields).
    func recordMath(_ collection: String) -> RecordMath {
        maths[collection] ?? RecordMath(schema: CollectionSchema(name: collection, fields: [:]))
    }

    /// The page size of a new database file, in bytes. With SQLite's 4 KiB, a note of 2 KB took
    /// a page of its own, half of it empty: 10,000 such notes made a 53 MB file, 30 MB with 16 KiB
    /// pages (docs/benchmarks.md, "Initial sync: a third of the bytes").
    static let pageSize = 16_384

    /// Opens (creating when needed) the database in a file, with WAL and full synchronous commits.
    /// - Parameter collections: the app's collections besides `notes` (docs/collections.md).
    public static func open(path: String, collections: [CollectionSchema] = []) throws -> LocalStore {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            // Takes effect on a new database only: an existing one keeps its page size.
            try db.execute(sql: "PRAGMA page_size = \(pageSize)")
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        configuration.busyMode = .timeout(10)
        do {
            let pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets the writer to `synchronous = NORMAL` when it enables WAL, after
            // `prepareDatabase`: set FULL again, or a local edit is not on disk when it returns.
            try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
            return try LocalStore(pool, collections: collections)
        } catch let error as DatabaseError {
            throw NotedClientError(
                .storage, "cannot open the local database at \(path): \(error.message ?? "\(error.resultCode)")")
        }
    }

    /// An in-memory database, for tests and previews.
    public static func inMemory(collections: [CollectionSchema] = []) throws -> LocalStore {
        try LocalStore(DatabaseQueue(), collections: collections)
    }

    /// Wraps a database writer and migrates its schema.
    public init(_ writer: any DatabaseWriter, collections: [CollectionSchema] = []) throws {
        self.writer = writer
        schemas = SchemaRegistry([.notes] + collections)
        maths = schemas.schemas.mapValues { RecordMath(schema: $0) }
        searchTexts = SearchText(schemas)
        // The search index's triggers call these on the writer's connection, where every write runs.
        let searchText = Self.searchText(searchTexts)
        let deferral = searchIndexDeferred
        let pageSearchText = Self.pageSearchText(searchTexts, deferral)
        try writer.writeWithoutTransaction { db in
            db.add(function: searchText)
            db.add(function: pageSearchText)
            // Named by the v9 trigger, which v10 replaced (a database is migrated through it).
            db.add(
                function: DatabaseFunction("noted_search_index_deferred", argumentCount: 0, pure: false) { _ in
                    deferral.isOn
                })
            db.add(
                function: DatabaseFunction("noted_search_index_pending", argumentCount: 1, pure: false) { values in
                    deferral.isPending(Int64.fromDatabaseValue(values[0]) ?? 0)
                })
        }
        try Self.migrator.migrate(writer)
        try reindexIfSearchableChanged()
        try pullAgainForNewCollections()
    }

    /// Pages and broadcasts of collections a store does not declare are skipped: when an app
    /// declares a new collection, the next pull starts again from 0 so that its records arrive.
    private func pullAgainForNewCollections() throws {
        let names = schemas.schemas.keys.sorted()
        try writer.write { db in
            let known = Set((try meta(db, "collections") ?? "notes").split(separator: ",").map(String.init))
            if !Set(names).isSubset(of: known) { try setMeta(db, "cursor", nil) }
            try setMeta(db, "collections", names.joined(separator: ","))
        }
    }

    /// The full-text index holds what was `searchable` when each record was written: when the
    /// app's schemas mark other fields now, every record is indexed again.
    private func reindexIfSearchableChanged() throws {
        let searchable = JSONValue.object(
            schemas.schemas.mapValues { schema in
                .array(schema.fields.filter(\.value.searchable).keys.sorted().map(JSONValue.string))
            }
        ).jsonString
        try writer.write { db in
            guard try meta(db, "searchable") != searchable else { return }
            try db.execute(
                sql: """
                    INSERT INTO record_fts(record_fts) VALUES ('delete-all');
                    INSERT INTO record_fts(rowid, content) SELECT rowKey, noted_search_text(collection, local) FROM record;
                    """)
            try setMeta(db, "searchable", searchable)
        }
    }

    /// `noted_search_text(collection, local)`: the record's `searchable` text fields, for the
    /// full-text index.
    static func searchText(_ text: SearchText) -> DatabaseFunction {
        DatabaseFunction("noted_search_text", argumentCount: 2, pure: true) { values in
            guard let collection = String.fromDatabaseValue(values[0]), let local = String.fromDatabaseValue(values[1])
            else { return "" }
            return text.of(collection: collection, local: local)
        }
    }

    /// `noted_page_search_text(rowKey, collection, local)`: what `noted_search_text` gives, taken
    /// from the text the page being stored already computed for the row (`SearchIndexDeferral`),
    /// so that each new record's JSON is not parsed again to index it.
    static func pageSearchText(_ text: SearchText, _ deferral: SearchIndexDeferral) -> DatabaseFunction {
        DatabaseFunction("noted_page_search_text", argumentCount: 3, pure: false) { values in
            guard let collection = String.fromDatabaseValue(values[1]), let local = String.fromDatabaseValue(values[2])
            else { return "" }
            // Kept for this very text only: a row changed again within the page is parsed.
            if let rowKey = Int64.fromDatabaseValue(values[0]), let kept = deferral.text(of: rowKey),
                kept.local == local
            {
                return kept.text
            }
            return text.of(collection: collection, local: local)
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "record") { t in
                t.primaryKey("rowKey", .integer)
                t.column("id", .text).notNull().unique()
                t.column("collection", .text).notNull()
                t.column("local", .text).notNull()
                t.column("shadow", .text)
                t.column("rev", .integer).notNull().defaults(to: 0)
                t.column("dirty", .boolean).notNull().defaults(to: false)
                t.column("localDeleted", .boolean).notNull().defaults(to: false)
                t.column("textAsSet", .boolean).notNull().defaults(to: false)
                t.column("syncError", .text)
                t.column("createdAt", .datetime).notNull()
                t.column("updatedAt", .datetime).notNull()
                t.column("inflightCcid", .text)
                t.column("inflightBaseRev", .integer)
                t.column("inflightBody", .text)
                t.column("inflightSent", .text)
                t.column("stash", .text)
                t.column("stashRev", .integer)
                t.column("stashUpdatedAt", .datetime)
            }
            try db.create(table: "meta") { t in
                t.primaryKey("key", .text)
                t.column("value", .text).notNull()
            }
            // Full-text index over title and body, kept in step with `record` by triggers so it
            // is written in the same transaction as the edit.
            try db.execute(
                sql: """
                    CREATE VIRTUAL TABLE note_fts USING fts5(title, body, tokenize = 'unicode61 remove_diacritics 2');
                    CREATE TRIGGER record_fts_insert AFTER INSERT ON record BEGIN
                      INSERT INTO note_fts(rowid, title, body)
                      VALUES (new.rowKey, json_extract(new.local, '$.title'), json_extract(new.local, '$.body'));
                    END;
                    CREATE TRIGGER record_fts_delete AFTER DELETE ON record BEGIN
                      DELETE FROM note_fts WHERE rowid = old.rowKey;
                    END;
                    CREATE TRIGGER record_fts_update AFTER UPDATE OF local ON record BEGIN
                      UPDATE note_fts SET title = json_extract(new.local, '$.title'), body = json_extract(new.local, '$.body')
                      WHERE rowid = new.rowKey;
                    END;
                    """)
        }
        migrator.registerMigration("v2: conflicts") { db in
            try db.alter(table: "record") { t in
                // Text fields where the server could not place all of this device's edit.
                t.add(column: "conflicts", .text)
            }
        }
        migrator.registerMigration("v3: tombstones") { db in
            // Ids purged for good (here or elsewhere): a late broadcast or page never brings them back.
            try db.create(table: "tombstone") { t in
                t.primaryKey("id", .text)
            }
        }
        migrator.registerMigration("v4: stale set resends, snapshot purges") { db in
            try db.alter(table: "record") { t in
                t.add(column: "setBaseRev", .integer)
                t.add(column: "absentAtSeq", .integer)
            }
        }
        migrator.registerMigration("v5: one sync state per record") { db in
            try migrateToSyncState(db)
        }
        migrator.registerMigration("v6: search over every collection") { db in
            // The searchable fields of each record's collection, instead of the notes' title and body.
            try db.execute(
                sql: """
                    DROP TRIGGER record_fts_insert;
                    DROP TRIGGER record_fts_delete;
                    DROP TRIGGER record_fts_update;
                    DROP TABLE note_fts;
                    CREATE VIRTUAL TABLE record_fts USING fts5(content, tokenize = 'unicode61 remove_diacritics 2');
                    INSERT INTO record_fts(rowid, content) SELECT rowKey, noted_search_text(collection, local) FROM record;
                    CREATE TRIGGER record_fts_insert AFTER INSERT ON record BEGIN
                      INSERT INTO record_fts(rowid, content) VALUES (new.rowKey, noted_search_text(new.collection, new.local));
                    END;
                    CREATE TRIGGER record_fts_delete AFTER DELETE ON record BEGIN
                      DELETE FROM record_fts WHERE rowid = old.rowKey;
                    END;
                    CREATE TRIGGER record_fts_update AFTER UPDATE OF local ON record BEGIN
                      UPDATE record_fts SET content = noted_search_text(new.collection, new.local) WHERE rowid = new.rowKey;
                    END;
                    CREATE INDEX record_by_collection ON record(collection, updatedAt);
                    """)
        }
        migrator.registerMigration("v7: sync flags") { db in
            // The pending state's flags, computed from `sync` by SQLite itself (a generated
            // column, so nothing can write one without the other) and indexed (see
            // `RecordRow.pending`). The index holds what the outbox filters on (collection,
            // id), so that skipping the changes already sent reads no record: they are long
            // (the fields, twice, and the change in flight) and each read walked their pages.
            try db.execute(
                sql: """
                    ALTER TABLE record ADD COLUMN syncFlags INTEGER GENERATED ALWAYS AS (
                        CASE WHEN sync IS NULL THEN 0 ELSE
                            (CASE WHEN json_extract(sync, '$.edited') THEN \(SyncState.editedFlag) ELSE 0 END)
                          | (CASE WHEN json_extract(sync, '$.purging') THEN \(SyncState.purgingFlag) ELSE 0 END)
                          | (CASE WHEN json_extract(sync, '$.inflight') IS NOT NULL THEN \(SyncState.inflightFlag) ELSE 0 END)
                        END) VIRTUAL;
                    CREATE INDEX record_by_sync_flags ON record(syncFlags, rowKey, collection, id) WHERE syncFlags <> 0;
                    """)
            // A record is written whole (every column), so the search index was rebuilt for it
            // on every acknowledgement too: now only when its text changed.
            try db.execute(
                sql: """
                    DROP TRIGGER record_fts_update;
                    CREATE TRIGGER record_fts_update AFTER UPDATE OF local ON record WHEN old.local IS NOT new.local BEGIN
                      UPDATE record_fts SET content = noted_search_text(new.collection, new.local) WHERE rowid = new.rowKey;
                    END;
                    """)
        }
        migrator.registerMigration("v8: attachments") { db in
            // Files of attachments: those added here until the server has them (`pending` 1),
            // those the server refused for good (`pending` 2, why in `refusal`), and those
            // fetched from the server (0), kept for offline use.
            try db.execute(
                sql: """
                    CREATE TABLE blob (
                        sha256 TEXT PRIMARY KEY,
                        size INTEGER NOT NULL,
                        type TEXT NOT NULL,
                        data BLOB NOT NULL,
                        pending INTEGER NOT NULL,
                        usedAt INTEGER NOT NULL,
                        refusal TEXT
                    );
                    CREATE INDEX blob_by_pending ON blob(pending) WHERE pending;
                    """)
        }
        migrator.registerMigration("v9: search index written per page") { db in
            // FTS5 writes what it has gathered to a new segment at every statement savepoint,
            // so a record inserted by its own statement, through the trigger, cost a segment of
            // its own and the merges after it: most of an initial sync's time (issue 18). While a
            // page is stored the trigger stands aside and the page's new records are indexed
            // by one statement (`LocalStore.storePage`).
            try db.execute(
                sql: """
                    DROP TRIGGER record_fts_insert;
                    CREATE TRIGGER record_fts_insert AFTER INSERT ON record WHEN NOT noted_search_index_deferred() BEGIN
                      INSERT INTO record_fts(rowid, content) VALUES (new.rowKey, noted_search_text(new.collection, new.local));
                    END;
                    """)
        }
        migrator.registerMigration("v10: search index without a copy of the text") { db in
            // The index kept its own copy of every record's searchable text, which nothing reads
            // (search asks for matching rowids and bm25 only): as much again as the records
            // themselves, written at every sync. A contentless index is told what a row held
            // when the row leaves it ('delete' with the old values, which
            // `noted_search_text(collection, local)` gives again), so the update and delete
            // triggers pass the old text. A row inserted while a page is stored is not in the
            // index until the page's end (`noted_search_index_pending`): its triggers stand aside.
            try db.execute(
                sql: """
                    DROP TRIGGER record_fts_insert;
                    DROP TRIGGER record_fts_delete;
                    DROP TRIGGER record_fts_update;
                    DROP TABLE record_fts;
                    CREATE VIRTUAL TABLE record_fts USING fts5(content, content = '', tokenize = 'unicode61 remove_diacritics 2');
                    INSERT INTO record_fts(rowid, content) SELECT rowKey, noted_search_text(collection, local) FROM record;
                    CREATE TRIGGER record_fts_insert AFTER INSERT ON record WHEN NOT noted_search_index_pending(new.rowKey) BEGIN
                      INSERT INTO record_fts(rowid, content) VALUES (new.rowKey, noted_search_text(new.collection, new.local));
                    END;
                    CREATE TRIGGER record_fts_delete AFTER DELETE ON record WHEN NOT noted_search_index_pending(old.rowKey) BEGIN
                      INSERT INTO record_fts(record_fts, rowid, content) VALUES ('delete', old.rowKey, noted_search_text(old.collection, old.local));
                    END;
                    CREATE TRIGGER record_fts_update AFTER UPDATE OF local ON record
                    WHEN old.local IS NOT new.local AND NOT noted_search_index_pending(old.rowKey) BEGIN
                      INSERT INTO record_fts(record_fts, rowid, content) VALUES ('delete', old.rowKey, noted_search_text(old.collection, old.local));
                      INSERT INTO record_fts(rowid, content) VALUES (new.rowKey, noted_search_text(new.collection, new.local));
                    END;
                    """)
        }
        migrator.registerMigration("v11: spaces") { db in
            // Protocol 2 (docs/protocol.md, "Spaces"): a record of a shared space names it; the
            // spaces the user is a member of, each with its own pull cursor.
            try db.execute(
                sql: """
                    ALTER TABLE record ADD COLUMN space TEXT;
                    CREATE INDEX record_by_space ON record(space) WHERE space IS NOT NULL;
                    CREATE TABLE space (
                      id TEXT PRIMARY KEY,
                      name TEXT NOT NULL,
                      role TEXT NOT NULL,
                      owner TEXT NOT NULL DEFAULT '',
                      seq INTEGER NOT NULL DEFAULT 0,
                      cursor INTEGER NOT NULL DEFAULT 0
                    ) WITHOUT ROWID;
                    """)
        }
        return migrator
    }

    /// The v4 columns that together were a record's sync state, folded into one `sync` value.
    /// Reads the old columns by name, never through `RecordRow`, so that it keeps reading what
    /// v4 wrote whatever `RecordRow` becomes.
    static func migrateToSyncState(_ db: Database) throws {
        try db.alter(table: "record") { t in t.add(column: "sync", .text) }
        let rows = try Row.fetchAll(
            db,
            sql: """
                SELECT rowKey, rev, local, dirty, localDeleted, textAsSet, syncError, inflightCcid, inflightBaseRev, inflightBody,
                       inflightSent, stash, stashRev, stashUpdatedAt, conflicts, setBaseRev, absentAtSeq
                FROM record
                WHERE dirty OR localDeleted OR textAsSet OR syncError IS NOT NULL OR inflightCcid IS NOT NULL OR conflicts IS NOT NULL
                """)
        for row in rows {
            let state = v4SyncState(row)
            try db.execute(
                sql: "UPDATE record SET sync = ? WHERE rowKey = ?",
                arguments: [state == .synced ? nil : state.json.jsonString, row["rowKey"] as Int64])
        }
        try db.alter(table: "record") { t in
            for column in [
                "dirty", "localDeleted", "textAsSet", "syncError", "inflightCcid", "inflightBaseRev", "inflightBody",
                "inflightSent", "stash", "stashRev", "stashUpdatedAt", "conflicts", "setBaseRev", "absentAtSeq",
            ] {
                t.drop(column: column)
            }
        }
    }

    static func v4SyncState(_ row: Row) -> SyncState {
        func object(_ text: String?) -> [String: JSONValue]? {
            text.flatMap { (try? JSONValue.parse($0))?.objectValue }
        }
        var state = SyncState()
        state.edited = row["dirty"]
        state.purging = row["localDeleted"]
        if row["textAsSet"] as Bool { state.next = .set(baseRev: row["setBaseRev"]) }
        state.refusal = row["syncError"]
        state.conflicts = (row["conflicts"] as String?)?.split(separator: ",").map(String.init) ?? []
        if let ccid: String = row["inflightCcid"] {
            let body: String? = row["inflightBody"]
            let isPurge = body.flatMap { try? JSONValue.parse($0) }?["op"]?.stringValue == "delete"
            var change = SyncState.Inflight(
                ccid: ccid, baseRev: row["inflightBaseRev"] ?? row["rev"], body: body ?? "",
                sent: isPurge ? nil : object(row["inflightSent"]) ?? object(row["local"]) ?? [:])
            if let stashRev: Int64 = row["stashRev"] {
                change.newest = SyncState.Newest(
                    fields: object(row["stash"]), rev: stashRev, updatedAt: row["stashUpdatedAt"] ?? Date())
            }
            change.absentAtSeq = row["absentAtSeq"]
            if body != nil {
                state.inflight = change
            } else {
                // v4 could never resend a change without its body; send the edits afresh.
                state.edited = true
            }
        }
        return state
    }

    // MARK: Meta

    func meta(_ db: Database, _ key: String) throws -> String? {
        try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key])
    }

    func setMeta(_ db: Database, _ key: String, _ value: String?) throws {
        if let value {
            try db.execute(
                sql: "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [key, value])
        } else {
            try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key])
        }
    }

    /// A stored setting (sync cursor, device id, last sync time...).
    public func meta(_ key: String) async throws -> String? {
        try await writer.read { db in try meta(db, key) }
    }

    public func setMeta(_ key: String, _ value: String?) async throws {
        try await writer.write { db in try setMeta(db, key, value) }
    }

    /// This installation's device id, created on first use.
    public func deviceID() async throws -> String {
        try await writer.write { db in
            if let id = try meta(db, "device") { return id }
            let id = UUID().uuidString.lowercased()
            try setMeta(db, "device", id)
            return id
        }
    }
}

/// Whether the search index's triggers stand aside for rows a page inserts
/// (``LocalStore/storePage(records:cursor:)``), read by the SQL functions
/// `noted_search_index_pending(rowKey)` and `noted_search_index_deferred()` on the writer's
/// connection.
final class SearchIndexDeferral: @unchecked Sendable {
    private let lock = NSLock()
    /// Rows with a key above it are not yet in the index; nil: every row is.
    private var floor: Int64?
    /// The searchable text of rows the page inserted, by key, as the page computed it, with
    /// the `local` it was computed from.
    private var texts: [Int64: (local: String, text: String)] = [:]

    var isOn: Bool { lock.withLock { floor != nil } }

    func isPending(_ rowKey: Int64) -> Bool {
        lock.withLock { floor.map { rowKey > $0 } ?? false }
    }

    /// Runs `body` with the triggers standing aside for rows inserted with keys above `floor`,
    /// which the caller indexes afterwards.
    func whileDeferred<T>(above floor: Int64, _ body: () throws -> T) rethrows -> T {
        lock.withLock { self.floor = floor }
        defer {
            lock.withLock {
                self.floor = nil
                texts = [:]
            }
        }
        return try body()
    }

    /// Keeps the searchable text of a row inserted while deferred, computed from its `local`,
    /// for the page's index statement.
    func keep(_ text: String, from local: String, of rowKey: Int64) {
        lock.withLock { if floor != nil { texts[rowKey] = (local, text) } }
    }

    func text(of rowKey: Int64) -> (local: String, text: String)? {
        lock.withLock { texts[rowKey] }
    }
}

/// A record's searchable text (what the full-text index holds for it): its collection's
/// `searchable` text fields, in name order, one per line. The field names are sorted once per
/// collection, not for each record.
struct SearchText: Sendable {
    private let fields: [String: [String]]

    init(_ schemas: SchemaRegistry) {
        fields = schemas.schemas.mapValues { $0.fields.filter(\.value.searchable).keys.sorted() }
    }

    func of(collection: String, fields values: [String: JSONValue]) -> String {
        guard let names = fields[collection] else { return "" }
        return names.compactMap { values[$0]?.stringValue }.joined(separator: "\n")
    }

    func of(collection: String, local: String) -> String {
        guard fields[collection] != nil, let values = (try? JSONValue.parse(local))?.objectValue else { return "" }
        return of(collection: collection, fields: values)
    }
}
