import Foundation
import GRDB
import NIOConcurrencyHelpers
import NotedCore

/// The embedded backend: one SQLite file through GRDB, WAL journal with `synchronous=FULL`.
public struct SQLiteStore: NotedStore {
    let pool: DatabasePool
    let processor: ChangeProcessor
    let commits: SQLiteGroupCommit
    /// Blob bytes: the `blobs` directory beside the database file.
    let blobFiles: BlobFiles
    /// Per user: putting a blob file in place and the collector's removal never interleave.
    let blobLocks = KeyedAsyncLock()

    /// Opens (creating when needed) the database file at `path`.
    public init(
        path: String, schemas: SchemaRegistry = .v1, limits: Limits, conflictRevisionsKept: Int = 1000,
        quota: StorageQuota = .unlimited
    ) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        self.pool = try DatabasePool(path: path, configuration: configuration)
        // GRDB switches a pool's writer to `synchronous = NORMAL` after `prepareDatabase` when it
        // enables WAL: set FULL again on the writer, or commits (acks) are not fsynced.
        try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
        self.processor = ChangeProcessor(
            schemas: schemas, merger: FieldMerger(limits: limits), conflictRevisionsKept: conflictRevisionsKept,
            quota: quota)
        self.commits = SQLiteGroupCommit(pool: pool)
        self.blobFiles = BlobFiles(
            root: ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent("blobs"))
    }

    public func migrate() async throws {
        try await migrate(upTo: nil)
    }

    /// Runs the migrations, all of them or those up to and including `last` (tests make the
    /// database an earlier version left).
    func migrate(upTo last: String?) async throws {
        var migrator = DatabaseMigrator()
        // In the order they were written: a database is at some prefix of this list.
        Self.registerInitialMigration(&migrator)
        Self.registerOAuthMigration(&migrator)
        Self.registerCollectionsMigration(&migrator)
        Self.registerQuotaMigration(&migrator)
        Self.registerAccountAdminMigration(&migrator)
        Self.registerBlobsMigration(&migrator)
        Self.registerHistoryMigration(&migrator)
        Self.registerHistoryBytesMigration(&migrator)
        Self.registerBlobChargeMigration(&migrator)
        Self.registerSpacesMigration(&migrator)
        migrator.registerMigration("revision-author") { db in
            try db.execute(sql: "ALTER TABLE revisions ADD COLUMN author TEXT")
        }
        if let last {
            try migrator.migrate(pool, upTo: last)
        } else {
            try migrator.migrate(pool)
        }
    }

    /// The first schema ("v1"): accounts, records, revisions, `ccid` results, refresh tokens, signing keys.
    static func registerInitialMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v1") { db in
            try db.execute(sql: initialSchema)
        }
    }

    static let initialSchema = """
        CREATE TABLE users (
            id TEXT PRIMARY KEY,
            username TEXT NOT NULL,
            username_key TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE TABLE user_seq (
            user_id TEXT PRIMARY KEY REFERENCES users(id),
            seq INTEGER NOT NULL DEFAULT 0,
            purged_seq INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE records (
            user_id TEXT NOT NULL,
            collection TEXT NOT NULL,
            id TEXT NOT NULL,
            rev INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            deleted INTEGER NOT NULL,
            fields TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, collection, id)
        );
        CREATE INDEX records_by_seq ON records(user_id, seq);
        CREATE TABLE revisions (
            user_id TEXT NOT NULL,
            collection TEXT NOT NULL,
            record_id TEXT NOT NULL,
            rev INTEGER NOT NULL,
            conflict INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            fields TEXT NOT NULL,
            device TEXT,
            ccid TEXT,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, collection, record_id, rev, conflict)
        );
        CREATE TABLE applied_changes (
            user_id TEXT NOT NULL,
            ccid TEXT NOT NULL,
            body_hash TEXT NOT NULL,
            reply TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, ccid)
        );
        CREATE INDEX applied_changes_by_age ON applied_changes(created_at);
        CREATE TABLE refresh_families (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL REFERENCES users(id),
            client_id TEXT NOT NULL,
            device TEXT,
            created_at INTEGER NOT NULL,
            revoked_at INTEGER
        );
        CREATE TABLE refresh_tokens (
            hash TEXT PRIMARY KEY,
            family_id TEXT NOT NULL REFERENCES refresh_families(id),
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            used_at INTEGER
        );
        CREATE TABLE signing_keys (
            kid TEXT PRIMARY KEY,
            private_pem TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        """

    static func registerQuotaMigration(_ migrator: inout DatabaseMigrator) {
        // Storage quotas: what each user stores, kept up to date by every push from now on.
        migrator.registerMigration("quota") { db in
            try db.execute(
                sql: """
                    ALTER TABLE user_seq ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE user_seq ADD COLUMN stored_records INTEGER NOT NULL DEFAULT 0;
                    UPDATE user_seq SET
                        stored_bytes = (SELECT COALESCE(SUM(length(CAST(fields AS BLOB))), 0) FROM records r
                                        WHERE r.user_id = user_seq.user_id AND r.deleted = 0),
                        stored_records = (SELECT COUNT(*) FROM records r WHERE r.user_id = user_seq.user_id AND r.deleted = 0);
                    """)
        }
    }

    public func ping() async throws {
        _ = try await pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    /// Closes the database, on a thread of its own: `DatabasePool.close()` blocks until every
    /// read in flight has handed back its connection, and an async read hands it back from
    /// Swift's cooperative pool (on Linux, libdispatch's global queues, as many threads as
    /// cores). Called there, with every one of those threads blocked in a `close()` (two stores
    /// shutting down at once on two cores), nothing could hand a connection back: a full test
    /// run hung with both threads in `DatabasePool.close`.
    public func shutdown() async {
        let pool = self.pool
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                try? pool.close()
                continuation.resume()
            }
        }
    }

    // MARK: Users

    public func createUser(_ user: UserAccount, now: Date) async throws -> Bool {
        try await pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE username_key = ?", arguments: [user.usernameKey])
                != nil
            {
                return false
            }
            try db.execute(
                sql: "INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [user.id, user.username, user.usernameKey, user.passwordHash, now.millis])
            try db.execute(
                sql: "INSERT INTO user_seq (user_id, seq, purged_seq) VALUES (?, 0, 0)", arguments: [user.id])
            try Self.insertPersonalSpace(db, userID: user.id, now: now)
            return true
        }
    }

    public func user(usernameKey: String) async throws -> UserAccount? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT \(Self.userColumns) FROM users WHERE username_key = ?", arguments: [usernameKey]
            )
            .map(Self.user(from:))
        }
    }

    public func setPasswordHash(userID: String, hash: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE users SET password_hash = ? WHERE id = ?", arguments: [hash, userID])
        }
    }

    public func upgradePasswordHash(userID: String, from old: String, to new: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?",
                arguments: [new, userID, old])
        }
    }

    public func user(id: String) async throws -> UserAccount? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.userColumns) FROM users WHERE id = ?", arguments: [id])
                .map(Self.user(from:))
        }
    }

    private static let userColumns =
        "id, username, username_key, password_hash, disabled_at IS NOT NULL AS disabled, totp_secret IS NOT NULL AS two_factor"

    private static func user(from row: Row) -> UserAccount {
        UserAccount(
            id: row["id"], username: row["username"], usernameKey: row["username_key"],
            passwordHash: row["password_hash"],
            disabled: row["disabled"], twoFactor: row["two_factor"])
    }

    // MARK: Signing keys

    public func signingKeys() async throws -> [SigningKeyRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT kid, private_pem, created_at FROM signing_keys ORDER BY created_at, kid")
                .map {
                    SigningKeyRecord(
                        kid: $0["kid"], privateKeyPEM: $0["private_pem"], createdAt: Date(millis: $0["created_at"]))
                }
        }
    }

    public func addSigningKey(_ key: SigningKeyRecord) async throws {
        try await pool.write { db in
            try db.execute(
                sql:
                    "INSERT INTO signing_keys (kid, private_pem, created_at) VALUES (?, ?, ?) ON CONFLICT (kid) DO NOTHING",
                arguments: [key.kid, key.privateKeyPEM, key.createdAt.millis])
        }
    }

    public func removeSigningKey(kid: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM signing_keys WHERE kid = ?", arguments: [kid])
        }
    }

    // MARK: Refresh tokens

    public func createRefreshFamily(_ family: RefreshFamily, firstTokenHash: String, expiresAt: Date, now: Date)
        async throws
    {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO refresh_families (id, user_id, client_id, device, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [family.id, family.userID, family.clientID, family.device, now.millis])
            try db.execute(
                sql: "INSERT INTO refresh_tokens (hash, family_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [firstTokenHash, family.id, now.millis, expiresAt.millis])
        }
    }

    public func rotateRefreshToken(hash: String, replacementHash: String, expiresAt: Date, now: Date) async throws
        -> RefreshRotation
    {
        try await pool.write { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT t.family_id, t.expires_at, t.used_at, f.user_id, f.client_id, f.device, f.revoked_at
                        FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE t.hash = ?
                        """, arguments: [hash])
            else { return .invalid }
            let familyID: String = row["family_id"]
            if (row["revoked_at"] as Int64?) != nil { return .invalid }
            if (row["used_at"] as Int64?) != nil {
                try db.execute(
                    sql: "UPDATE refresh_families SET revoked_at = ? WHERE id = ?", arguments: [now.millis, familyID])
                return .reused(familyID: familyID)
            }
            if (row["expires_at"] as Int64) <= now.millis { return .invalid }
            try db.execute(sql: "UPDATE refresh_tokens SET used_at = ? WHERE hash = ?", arguments: [now.millis, hash])
            try db.execute(
                sql: "INSERT INTO refresh_tokens (hash, family_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [replacementHash, familyID, now.millis, expiresAt.millis])
            return .rotated(
                RefreshFamily(id: familyID, userID: row["user_id"], clientID: row["client_id"], device: row["device"]))
        }
    }

    // MARK: Sync

    public func latestSeq(userID: String) async throws -> Int64 {
        try await pool.read { db in
            try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT seq FROM user_seq WHERE user_id = ?"), arguments: [userID]) ?? 0
        }
    }

    public func usage(userID: String) async throws -> StorageUsage {
        try await pool.read { db in
            let own =
                try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT stored_bytes, stored_records, history_bytes FROM user_seq WHERE user_id = ?"),
                    arguments: [userID]
                )
                .map { StorageUsage(bytes: $0[0], records: $0[1], history: $0[2]) } ?? StorageUsage()
            let elsewhere =
                try Row.fetchOne(db.cachedStatement(sql: Self.ownerElsewhereSQL), arguments: [userID]).map {
                    StorageUsage(bytes: $0[0], records: $0[1], history: $0[2])
                } ?? StorageUsage()
            return own + elsewhere
        }
    }

    /// What the owner of space `?1` stores in their other spaces (for a personal space, `?1` is
    /// the user: their shared spaces).
    static let ownerElsewhereSQL = """
        SELECT COALESCE(SUM(q.stored_bytes), 0), COALESCE(SUM(q.stored_records), 0), COALESCE(SUM(q.history_bytes), 0)
        FROM spaces s JOIN user_seq q ON q.user_id = s.id
        WHERE s.owner_id = (SELECT owner_id FROM spaces WHERE id = ?1) AND s.id <> ?1
        """

    public func changes(userID: String, since: Int64, limit: Int, snapshot: Bool) async throws -> ChangesPage {
        try await pool.read { db in
            let seqRow = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT seq, purged_seq FROM user_seq WHERE user_id = ?"), arguments: [userID])
            let latest: Int64 = seqRow?["seq"] ?? 0
            let purged: Int64 = seqRow?["purged_seq"] ?? 0
            let query = ChangesQuery(since: since, limit: limit, latest: latest, purgedSeq: purged, snapshot: snapshot)
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT \(Self.recordColumns) FROM records
                        WHERE user_id = ? AND seq > ? AND seq <= ? AND (deleted = 0 OR ?)
                        ORDER BY seq LIMIT ?
                        """),
                arguments: [userID, query.lowerBound, query.upperBound, query.includeTombstones, query.fetchLimit])
            return try query.page(from: rows.map(Self.record(from:)))
        }
    }

    public func record(userID: String, collection: String, id: String) async throws -> Record? {
        try await pool.read { db in
            try Self.fetchRecord(db, userID: userID, collection: collection, id: id)
        }
    }

    public func revisions(userID: String, collection: String, id: String) async throws -> [RevisionInfo]? {
        try await pool.read { db in
            guard try Self.fetchRecord(db, userID: userID, collection: collection, id: id) != nil else { return nil }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT r.rev, r.conflict, r.seq, r.device, r.ccid, r.updated_at, r.size, r.author, u.username
                    FROM revisions r LEFT JOIN users u ON u.id = r.author
                    WHERE r.user_id = ? AND r.collection = ? AND r.record_id = ? ORDER BY r.rev, r.conflict
                    """, arguments: [userID, collection, id]
            ).map { row in
                RevisionInfo(
                    rev: row["rev"], seq: row["seq"], updatedAt: Date(millis: row["updated_at"]), device: row["device"],
                    ccid: row["ccid"], conflict: row["conflict"], fields: [:], size: row["size"], author: row["author"],
                    authorName: row["username"])
            }
        }
    }

    public func revision(userID: String, collection: String, id: String, rev: Int64, conflict: Bool) async throws
        -> RevisionInfo?
    {
        try await pool.read { db in
            if conflict {
                return try Row.fetchOne(
                    db,
                    sql: """
                        SELECT \(Self.revisionColumns) FROM revisions
                        WHERE user_id = ? AND collection = ? AND record_id = ? AND rev = ? AND conflict = 1
                        """, arguments: [userID, collection, id, rev]
                ).map { try Self.storedRevision(from: $0) }.map { $0.info(fields: $0.fields) }
            }
            let chain = try Self.revisionChain(db, userID: userID, collection: collection, id: id, rev: rev)
            guard let first = chain.first else { return nil }
            return first.info(fields: try HistoryChain.materialize(chain))
        }
    }

    public func push(_ change: Change, context: PushContext) async throws -> PushResult {
        try await push([(change, context)])[0].get()
    }

    /// The changes of one push message, in order, through group commit: with other users'
    /// pushes waiting, usually one transaction (one fsync) for all of them.
    ///
    /// A change is decided inside the write transaction when that is cheap
    /// (``PushAlgorithm/isCheapForWriter(_:current:)``: the writer's page cache is warm; a
    /// reader's starts cold after every commit, and the trip to it costs more than a
    /// keystroke's decision). Any other (a merge, long texts, a large change of a text) is
    /// not: it and the push's later changes leave the transaction without writing anything, it
    /// is decided on a reader (``PushAlgorithm``), and they are queued again, in order, with
    /// that decision.
    public func push(_ changes: [(change: Change, context: PushContext)]) async throws -> [Result<
        PushResult, any Error
    >] {
        let algorithm = PushAlgorithm(processor: processor)
        var results: [Result<PushResult, any Error>] = []
        // After a change left the transaction, the next round starts with it: decided on a
        // reader (`prepared`; nil when that failed: the writer then decides it, as it would anyway).
        var resumed = false
        var prepared: PushAlgorithm.Prepared? = nil
        while results.count < changes.count {
            // Once a change of this push leaves the transaction, the later ones follow it.
            let deferred = NIOLockedValueBox(false)
            var works: [SQLiteGroupCommit.Work] = []
            for (offset, (change, context)) in changes[results.count...].enumerated() {
                let decided: PushAlgorithm.Prepared? = offset == 0 ? prepared : nil
                let mayDecide: (@Sendable (Record?) -> Bool)?
                if offset == 0 && resumed {
                    mayDecide = nil
                } else {
                    mayDecide = { current in algorithm.isCheapForWriter(change, current: current) }
                }
                works.append { db in
                    guard !deferred.withLockedValue({ $0 }) else { throw PushAlgorithm.DecideOutside() }
                    var reads = Reads(db: db, userID: context.userID, change: change)
                    let outcome: (result: PushResult, writes: [PushWrite])
                    do {
                        outcome = try algorithm.run(
                            change, context: context, reads: &reads, prepared: decided, mayDecide: mayDecide)
                    } catch let error as PushAlgorithm.DecideOutside {
                        deferred.withLockedValue { $0 = true }
                        throw error
                    }
                    for write in outcome.writes {
                        try Self.execute(write, userID: context.userID, in: db)
                    }
                    return outcome.result
                }
            }
            let outcomes = await commits.run(works)
            results += outcomes.prefix { outcome in
                if case .failure(let error) = outcome, error is PushAlgorithm.DecideOutside { return false }
                return true
            }
            guard results.count < changes.count else { break }
            // Decided on a reader, outside the single writer; if it cannot be decided there,
            // the writer decides (as it would anyway).
            let (change, context) = changes[results.count]
            prepared = try? await pool.read { db in
                var reads = Reads(db: db, userID: context.userID, change: change)
                return try algorithm.prepare(change, context: context, reads: &reads)
            }
            resumed = true
        }
        return results.map { outcome in
            outcome.mapError { error in
                // A full disk: the transaction rolled back, nothing was stored. The change is
                // answered `rate_limited` (the retryable reject code: every client resends it
                // later, unchanged) and the server keeps serving; found by scripts/faults.
                if let error = error as? DatabaseError, error.resultCode == .SQLITE_FULL {
                    return ProtocolError(.rateLimited, "the server's storage is full; nothing was stored; retry later")
                }
                return error
            }
        }
    }

    /// The reads of a push, in SQLite's SQL.
    private struct Reads: PushReads {
        let db: Database
        let userID: String
        let change: Change

        func lockedSeq() throws -> Int64 {
            // The write transaction holds SQLite's only writer: the seq cannot move under it.
            // No row: the account was deleted after this push was authenticated.
            guard
                let seq = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT seq FROM user_seq WHERE user_id = ?"), arguments: [userID])
            else {
                throw AccountDeleted()
            }
            return seq
        }

        func appliedResult() throws -> (bodyHash: String, reply: String)? {
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT body_hash, reply FROM applied_changes WHERE user_id = ? AND ccid = ?"),
                arguments: [userID, change.ccid]
            )
            .map { (bodyHash: $0[0] as String, reply: $0[1] as String) }
        }

        func current() throws -> Record? {
            try SQLiteStore.fetchRecord(db, userID: userID, collection: change.collection, id: change.id)
        }

        func baseFields(rev: Int64) throws -> [String: JSONValue]? {
            try SQLiteStore.revisionFields(db, userID: userID, collection: change.collection, id: change.id, rev: rev)
        }

        func usage() throws -> StorageUsage {
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT stored_bytes, stored_records, history_bytes FROM user_seq WHERE user_id = ?"),
                arguments: [userID]
            )
            .map { StorageUsage(bytes: $0[0], records: $0[1], history: $0[2]) } ?? StorageUsage()
        }

        func ownerElsewhere() throws -> StorageUsage {
            try Row.fetchOne(
                db.cachedStatement(sql: SQLiteStore.ownerElsewhereSQL), arguments: [userID]
            ).map { StorageUsage(bytes: $0[0], records: $0[1], history: $0[2]) } ?? StorageUsage()
        }

        func role(of user: String) throws -> SpaceRole? {
            // The write transaction holds SQLite's only writer: no membership change is half-way.
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT role FROM space_members WHERE space_id = ? AND user_id = ?"),
                arguments: [userID, user]
            ).flatMap(SpaceRole.init(rawValue:))
        }

        func blobSizes(_ hashes: Set<String>) throws -> [String: Int64] {
            var sizes: [String: Int64] = [:]
            for hash in hashes {
                if let size = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT size FROM blobs WHERE user_id = ? AND sha256 = ?"),
                    arguments: [userID, hash])
                {
                    sizes[hash] = size
                }
            }
            return sizes
        }
    }

    /// One statement of a push, in SQLite's SQL.
    private static func execute(_ write: PushWrite, userID: String, in db: Database) throws {
        switch write {
        case .setSeq(let seq):
            try db.cachedStatement(sql: "UPDATE user_seq SET seq = ? WHERE user_id = ?").execute(arguments: [
                seq, userID,
            ])
        case .setUsage(let usage):
            try db.cachedStatement(sql: "UPDATE user_seq SET stored_bytes = ?, stored_records = ? WHERE user_id = ?")
                .execute(arguments: [usage.bytes, usage.records, userID])
        case .upsertRecord(let record):
            try db.cachedStatement(
                sql: """
                    INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (user_id, collection, id) DO UPDATE SET
                        rev = excluded.rev, seq = excluded.seq, deleted = excluded.deleted,
                        fields = excluded.fields, updated_at = excluded.updated_at
                    """
            ).execute(arguments: [
                userID, record.collection, record.id, record.rev, record.seq, record.deleted,
                FieldsCoding.encode(record.fields), record.createdAt.millis, record.updatedAt.millis,
            ])
        case .deleteRevisions(let collection, let id):
            try db.cachedStatement(sql: "DELETE FROM revisions WHERE user_id = ? AND collection = ? AND record_id = ?")
                .execute(arguments: [userID, collection, id])
            try db.cachedStatement(
                sql: "DELETE FROM history_due WHERE user_id = ? AND collection = ? AND record_id = ?"
            )
            .execute(arguments: [userID, collection, id])
        case .insertRevision(let collection, let id, let revision):
            let fields = FieldsCoding.encode(revision.fields)
            try db.cachedStatement(
                sql: """
                    INSERT INTO revisions (user_id, collection, record_id, rev, conflict, seq, fields, device, ccid, updated_at, size, author)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                userID, collection, id, revision.rev, revision.conflict, revision.seq,
                fields, revision.device, revision.ccid, revision.updatedAt.millis, fields.utf8.count, revision.author,
            ])
        case .historyDue(let collection, let id, let at):
            try db.cachedStatement(
                sql: """
                    INSERT INTO history_due (user_id, collection, record_id, due_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (user_id, collection, record_id) DO UPDATE SET due_at = MIN(due_at, excluded.due_at)
                    """
            ).execute(arguments: [userID, collection, id, at.millis])
        case .pruneConflictRevisions(let collection, let id, let keeping):
            try db.cachedStatement(
                sql: """
                    DELETE FROM revisions WHERE user_id = ? AND collection = ? AND record_id = ? AND conflict = 1 AND rev NOT IN (
                        SELECT rev FROM revisions WHERE user_id = ? AND collection = ? AND record_id = ? AND conflict = 1
                        ORDER BY rev DESC LIMIT ?)
                    """
            ).execute(arguments: [userID, collection, id, userID, collection, id, keeping])
        case .recordApplied(let ccid, let bodyHash, let reply, let at):
            try db.cachedStatement(
                sql: "INSERT INTO applied_changes (user_id, ccid, body_hash, reply, created_at) VALUES (?, ?, ?, ?, ?)"
            )
            .execute(arguments: [userID, ccid, bodyHash, reply, at.millis])
        case .announce:
            // One process serves a SQLite file: the session hub is the whole audience.
            break
        }
    }

    public func sweep(tombstonesBefore: Date, appliedChangesBefore: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE user_seq SET purged_seq = MAX(purged_seq, (
                        SELECT MAX(seq) FROM records r WHERE r.user_id = user_seq.user_id AND r.deleted = 1 AND r.updated_at < ?))
                    WHERE EXISTS (SELECT 1 FROM records r WHERE r.user_id = user_seq.user_id AND r.deleted = 1 AND r.updated_at < ?)
                    """, arguments: [tombstonesBefore.millis, tombstonesBefore.millis])
            try db.execute(
                sql: "DELETE FROM records WHERE deleted = 1 AND updated_at < ?", arguments: [tombstonesBefore.millis])
            try db.execute(
                sql: "DELETE FROM applied_changes WHERE created_at < ?", arguments: [appliedChangesBefore.millis])
        }
    }

    public func listenForCommits(
        onListening: @escaping @Sendable () async -> Void,
        _ handler: @escaping @Sendable (CommitNotice) async -> Void
    ) async throws {
        // One SQLite file belongs to one server process: there are no other nodes to hear, only
        // `noted-server users` run beside it (its account events).
        try await listenForAccountEvents(onListening: onListening, handler)
    }

    // MARK: Rows

    fileprivate static func fetchRecord(_ db: Database, userID: String, collection: String, id: String) throws
        -> Record?
    {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT \(recordColumns) FROM records
                    WHERE user_id = ? AND collection = ? AND id = ?
                    """), arguments: [userID, collection, id]
        ).map(record(from:))
    }

    /// The columns ``record(from:)`` reads, by position (a lookup by name costs a lowercased
    /// comparison per column: 1 % of the server's CPU under sustained pushes).
    static let recordColumns = "collection, id, rev, seq, deleted, fields, created_at, updated_at"

    private static func record(from row: Row) throws -> Record {
        Record(
            collection: row[0], id: row[1], rev: row[2], seq: row[3], deleted: row[4],
            fields: try FieldsCoding.decode(row[5]),
            createdAt: Date(millis: row[6]), updatedAt: Date(millis: row[7]))
    }
}
