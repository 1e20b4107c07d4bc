import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import NotedCore
import PostgresNIO

/// The scale-out backend: PostgreSQL through a PostgresNIO connection pool.
///
/// Several server nodes may share one database: a push locks the user's `seq` row
/// (`SELECT … FOR UPDATE`) for the length of its transaction, so pushes of one user serialize
/// across connections and nodes.
public struct PostgresStore: NotedStore {
    let client: PostgresClient
    private let runTask: Task<Void, Never>
    private let configuration: PostgresClient.Configuration
    private let tlsMode: TLSMode
    let logger: Logger
    let processor: ChangeProcessor
    /// Tells this node's own commit notifications from other nodes'.
    let nodeID: String
    let commits: PostgresGroupCommit
    static let commitChannel = "noted_commits"
    /// How long a batch of pushes (``PostgresGroupCommit``) may wait for PostgreSQL before it
    /// fails: a batch takes milliseconds, and PostgresNIO 1.33.2 sometimes leaves a query
    /// unanswered for ever when PostgreSQL restarts under it (``withDeadline(_:_:_:)``; the
    /// `postgres-fsync` fault scenario saw every user of the node wait for this deadline after a
    /// crash restart). Failed, the batch's changes are answered with an error, their sessions
    /// close and their clients resend them (a change that did commit is then a `duplicate`).
    static let pushDeadline: Duration = .seconds(10)

    /// Connects a pool to `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`).
    public init(
        url: String, schemas: SchemaRegistry = .v1, limits: Limits, conflictRevisionsKept: Int = 1000,
        quota: StorageQuota = .unlimited, logger: Logger
    ) throws {
        let (configuration, tlsMode) = try Self.configurationAndTLS(from: url)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.configuration = configuration
        self.tlsMode = tlsMode
        self.runTask = Task { await client.run() }
        self.logger = logger
        let processor = ChangeProcessor(
            schemas: schemas, merger: FieldMerger(limits: limits), conflictRevisionsKept: conflictRevisionsKept,
            quota: quota)
        self.processor = processor
        let nodeID = UUID().uuidString.lowercased()
        self.nodeID = nodeID
        self.commits = PostgresGroupCommit(
            client: client, algorithm: PushAlgorithm(processor: processor), nodeID: nodeID, logger: logger)
    }

    /// One direct connection (10 s connect timeout) before the pool is used: an unreachable
    /// server, a wrong password or a missing database fails at once with PostgreSQL's reason,
    /// where the pool would retry for a minute or more, logging every attempt.
    private func probe() async throws {
        guard let configuration = try directConfiguration(), let host = configuration.host,
            let port = configuration.port
        else { return }
        var quiet = logger
        quiet.logLevel = .critical
        do {
            let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: quiet)
            try await connection.close()
        } catch let error as PSQLError {
            let reason =
                error.serverInfo?[.message] ?? error.underlying.map { String(describing: $0) } ?? "\(error.code)"
            throw StoreError.unreachable("PostgreSQL at \(host):\(port): \(reason)")
        }
    }

    /// The pool's server, database, user and encryption for a connection outside the pool.
    private func directConfiguration() throws -> PostgresConnection.Configuration? {
        let pool = self.configuration
        guard let host = pool.host, let port = pool.port else { return nil }
        let tls: PostgresConnection.Configuration.TLS =
            switch tlsMode {
            case .disable: .disable
            case .prefer(let tls): .prefer(try NIOSSLContext(configuration: tls))
            case .require(let tls): .require(try NIOSSLContext(configuration: tls))
            }
        return PostgresConnection.Configuration(
            host: host, port: port, username: pool.username, password: pool.password, database: pool.database, tls: tls)
    }

    /// How the connection is encrypted, from the URL's `sslmode` (libpq's names).
    enum TLSMode: Sendable {
        case disable
        case prefer(TLSConfiguration)
        case require(TLSConfiguration)
    }

    static func configuration(from url: String) throws -> PostgresClient.Configuration {
        try configurationAndTLS(from: url).0
    }

    /// The pool's configuration from `postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=MODE&sslrootcert=PATH]`.
    ///
    /// `sslmode` as libpq has it: `disable` (no TLS), `allow` and `prefer` (TLS if the server
    /// offers it, certificate not checked; `prefer` is the default, as in libpq), `require`
    /// (TLS or no connection, certificate not checked), `verify-ca` (the certificate must chain
    /// to a trusted root), `verify-full` (and name the host: use this for any database not on
    /// this machine). `sslrootcert` is a PEM file of the roots to trust (default: the system's).
    static func configurationAndTLS(from url: String) throws -> (PostgresClient.Configuration, TLSMode) {
        guard let components = URLComponents(string: url),
            components.scheme == "postgres" || components.scheme == "postgresql",
            let host = components.host, !host.isEmpty, let user = components.user, !user.isEmpty
        else { throw StoreError.unsupportedURL("expected postgres://USER@HOST:PORT/DB") }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        var parameters: [String: String] = [:]
        for item in components.queryItems ?? [] {
            guard ["sslmode", "sslrootcert"].contains(item.name) else {
                throw StoreError.unsupportedURL(
                    "unknown parameter \(item.name.prefix(40)) (known: sslmode, sslrootcert)")
            }
            guard parameters[item.name] == nil, let value = item.value, !value.isEmpty else {
                throw StoreError.unsupportedURL("\(item.name) must be given once, with a value")
            }
            parameters[item.name] = value
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let path = parameters["sslrootcert"] {
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(path))
            } catch {
                throw StoreError.unsupportedURL("sslrootcert \(path): not a readable PEM file of certificates")
            }
        }
        let mode: TLSMode
        switch parameters["sslmode"] ?? "prefer" {
        case "disable":
            mode = .disable
        case "allow", "prefer":
            tls.certificateVerification = .none
            mode = .prefer(tls)
        case "require":
            tls.certificateVerification = .none
            mode = .require(tls)
        case "verify-ca":
            tls.certificateVerification = .noHostnameVerification
            mode = .require(tls)
        case "verify-full":
            tls.certificateVerification = .fullVerification
            mode = .require(tls)
        case let other:
            throw StoreError.unsupportedURL(
                "sslmode \(other.prefix(40)) is not one of disable, allow, prefer, require, verify-ca, verify-full")
        }
        let poolTLS: PostgresClient.Configuration.TLS =
            switch mode {
            case .disable: .disable
            case .prefer(let tls): .prefer(tls)
            case .require(let tls): .require(tls)
            }
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: database.isEmpty ? nil : database, tls: poolTLS)
        configuration.options.maximumConnections = 20
        // No keep-alive queries (issue 18, docs/benchmarks.md "Idle connections on PostgreSQL").
        // The pool opens connections as needed (its minimum is 0) and closes one after 60 s
        // unused (`connectionIdleTimeout`; a keep-alive query does not restart that timer), so
        // keep-alive only ever sent one `SELECT 1` 30 s into a connection's idle minute, and no
        // connection stays idle for more than that minute (docs/deploy.md). Its cost was a
        // timer each time a query gave a connection back, a task that holds about 750 bytes
        // until its deadline even when cancelled, about 1 KB per sync sign-in for 30 s. (A
        // minimum above 0 would need keep-alive, and PostgresNIO 1.33.2 stops the process when
        // such a pool's connections die in a PostgreSQL crash restart.)
        configuration.options.keepAliveBehavior = nil
        return (configuration, mode)
    }

    private static let migrations: [(String, [PostgresQuery])] = [
        (
            "v1",
            [
                """
                CREATE TABLE users (
                    id TEXT PRIMARY KEY, username TEXT NOT NULL, username_key TEXT NOT NULL UNIQUE,
                    password_hash TEXT NOT NULL, created_at BIGINT NOT NULL)
                """,
                """
                CREATE TABLE user_seq (
                    user_id TEXT PRIMARY KEY REFERENCES users(id), seq BIGINT NOT NULL DEFAULT 0,
                    purged_seq BIGINT NOT NULL DEFAULT 0)
                """,
                """
                CREATE TABLE records (
                    user_id TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, rev BIGINT NOT NULL,
                    seq BIGINT NOT NULL, deleted BOOLEAN NOT NULL, fields TEXT NOT NULL,
                    created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, PRIMARY KEY (user_id, collection, id))
                """,
                "CREATE INDEX records_by_seq ON records(user_id, seq)",
                """
                CREATE TABLE revisions (
                    user_id TEXT NOT NULL, collection TEXT NOT NULL, record_id TEXT NOT NULL, rev BIGINT NOT NULL,
                    conflict BOOLEAN NOT NULL, seq BIGINT NOT NULL, fields TEXT NOT NULL, device TEXT, ccid TEXT,
                    updated_at BIGINT NOT NULL, PRIMARY KEY (user_id, collection, record_id, rev, conflict))
                """,
                """
                CREATE TABLE applied_changes (
                    user_id TEXT NOT NULL, ccid TEXT NOT NULL, body_hash TEXT NOT NULL, reply TEXT NOT NULL,
                    created_at BIGINT NOT NULL, PRIMARY KEY (user_id, ccid))
                """,
                "CREATE INDEX applied_changes_by_age ON applied_changes(created_at)",
                """
                CREATE TABLE refresh_families (
                    id TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id), client_id TEXT NOT NULL,
                    device TEXT, created_at BIGINT NOT NULL, revoked_at BIGINT)
                """,
                """
                CREATE TABLE refresh_tokens (
                    hash TEXT PRIMARY KEY, family_id TEXT NOT NULL REFERENCES refresh_families(id),
                    created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, used_at BIGINT)
                """,
                "CREATE TABLE signing_keys (kid TEXT PRIMARY KEY, private_pem TEXT NOT NULL, created_at BIGINT NOT NULL)",
            ]
        )
    ]

    /// Storage quotas: what each user stores, kept up to date by every push from now on.
    static let quotaMigration: (String, [PostgresQuery]) = (
        "quota",
        [
            "ALTER TABLE user_seq ADD COLUMN stored_bytes BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE user_seq ADD COLUMN stored_records BIGINT NOT NULL DEFAULT 0",
            """
            UPDATE user_seq SET
                stored_bytes = (SELECT COALESCE(SUM(octet_length(fields)), 0) FROM records r
                                WHERE r.user_id = user_seq.user_id AND NOT r.deleted),
                stored_records = (SELECT COUNT(*) FROM records r WHERE r.user_id = user_seq.user_id AND NOT r.deleted)
            """,
        ]
    )

    public func migrate() async throws {
        try await migrate(upTo: nil)
    }

    /// Runs the migrations, all of them or those up to and including `last` (tests make the
    /// database an earlier version left).
    func migrate(upTo last: String?) async throws {
        try await probe()
        // Give the pool's run() a moment to start, so the first lease does not log a warning.
        try await Task.sleep(for: .milliseconds(20))
        try await client.withTransaction(logger: logger) { connection in
            // One node migrates at a time.
            try await connection.run("SELECT pg_advisory_xact_lock(7361626)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS noted_migrations (name TEXT PRIMARY KEY)", logger: logger)
            var done = Set<String>()
            for try await name in try await connection.query("SELECT name FROM noted_migrations", logger: logger)
                .decode(String.self)
            {
                done.insert(name)
            }
            var all =
                Self.migrations + [
                    Self.oauthMigration, Self.collectionsMigration, Self.quotaMigration, Self.accountAdminMigration,
                    Self.blobsMigration, Self.historyMigration, Self.historyBytesMigration, Self.blobChargeMigration,
                    Self.spacesMigration, ("revision-author", ["ALTER TABLE revisions ADD COLUMN author TEXT"]),
                ]
            if let last, let index = all.firstIndex(where: { $0.0 == last }) { all = Array(all[...index]) }
            for (name, statements) in all where !done.contains(name) {
                for statement in statements {
                    try await connection.query(statement, logger: logger)
                }
                try await connection.query("INSERT INTO noted_migrations (name) VALUES (\(name))", logger: logger)
            }
        }
    }

    public func ping() async throws {
        try await client.query("SELECT 1", logger: logger)
    }

    public func shutdown() async {
        runTask.cancel()
        await runTask.value
    }

    // MARK: Users

    public func createUser(_ user: UserAccount, now: Date) async throws -> Bool {
        try await client.withTransaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                INSERT INTO users (id, username, username_key, password_hash, created_at)
                VALUES (\(user.id), \(user.username), \(user.usernameKey), \(user.passwordHash), \(now.millis))
                ON CONFLICT (username_key) DO NOTHING RETURNING id
                """, logger: logger)
            var inserted = false
            for try await _ in rows.decode(String.self) { inserted = true }
            if inserted {
                try await connection.query(
                    "INSERT INTO user_seq (user_id, seq, purged_seq) VALUES (\(user.id), 0, 0)", logger: logger)
                try await Self.insertPersonalSpace(connection, userID: user.id, now: now, logger: logger)
            }
            return inserted
        }
    }

    public func user(usernameKey: String) async throws -> UserAccount? {
        try await firstUser(
            client.query(
                "SELECT id, username, username_key, password_hash, disabled_at IS NOT NULL, totp_secret IS NOT NULL FROM users WHERE username_key = \(usernameKey)",
                logger: logger))
    }

    public func user(id: String) async throws -> UserAccount? {
        try await firstUser(
            client.query(
                "SELECT id, username, username_key, password_hash, disabled_at IS NOT NULL, totp_secret IS NOT NULL FROM users WHERE id = \(id)",
                logger: logger))
    }

    public func userAndSeq(id: String) async throws -> (user: UserAccount, seq: Int64)? {
        let rows = try await client.query(
            """
            SELECT u.id, u.username, u.username_key, u.password_hash, u.disabled_at IS NOT NULL, u.totp_secret IS NOT NULL,
                   COALESCE(s.seq, 0)
            FROM users u LEFT JOIN user_seq s ON s.user_id = u.id WHERE u.id = \(id)
            """, logger: logger)
        for try await (id, username, key, hash, disabled, twoFactor, seq) in rows.decode(
            (String, String, String, String, Bool, Bool, Int64).self)
        {
            return (
                UserAccount(
                    id: id, username: username, usernameKey: key, passwordHash: hash, disabled: disabled,
                    twoFactor: twoFactor), seq
            )
        }
        return nil
    }

    public func setPasswordHash(userID: String, hash: String) async throws {
        try await client.query("UPDATE users SET password_hash = \(hash) WHERE id = \(userID)", logger: logger)
    }

    public func upgradePasswordHash(userID: String, from old: String, to new: String) async throws {
        try await client.query(
            "UPDATE users SET password_hash = \(new) WHERE id = \(userID) AND password_hash = \(old)", logger: logger)
    }

    private func firstUser(_ rows: PostgresRowSequence) async throws -> UserAccount? {
        for try await (id, username, key, hash, disabled, twoFactor) in rows.decode(
            (String, String, String, String, Bool, Bool).self)
        {
            return UserAccount(
                id: id, username: username, usernameKey: key, passwordHash: hash, disabled: disabled,
                twoFactor: twoFactor)
        }
        return nil
    }

    // MARK: Signing keys

    public func signingKeys() async throws -> [SigningKeyRecord] {
        var keys: [SigningKeyRecord] = []
        let rows = try await client.query(
            "SELECT kid, private_pem, created_at FROM signing_keys ORDER BY created_at, kid", logger: logger)
        for try await (kid, pem, created) in rows.decode((String, String, Int64).self) {
            keys.append(SigningKeyRecord(kid: kid, privateKeyPEM: pem, createdAt: Date(millis: created)))
        }
        return keys
    }

    public func addSigningKey(_ key: SigningKeyRecord) async throws {
        try await client.query(
            """
            INSERT INTO signing_keys (kid, private_pem, created_at) VALUES (\(key.kid), \(key.privateKeyPEM), \(key.createdAt.millis))
            ON CONFLICT (kid) DO NOTHING
            """, logger: logger)
    }

    public func removeSigningKey(kid: String) async throws {
        try await client.query("DELETE FROM signing_keys WHERE kid = \(kid)", logger: logger)
    }

    // MARK: Refresh tokens

    public func createRefreshFamily(_ family: RefreshFamily, firstTokenHash: String, expiresAt: Date, now: Date)
        async throws
    {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                """
                INSERT INTO refresh_families (id, user_id, client_id, device, created_at)
                VALUES (\(family.id), \(family.userID), \(family.clientID), \(family.device), \(now.millis))
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO refresh_tokens (hash, family_id, created_at, expires_at)
                VALUES (\(firstTokenHash), \(family.id), \(now.millis), \(expiresAt.millis))
                """, logger: logger)
        }
    }

    public func rotateRefreshToken(hash: String, replacementHash: String, expiresAt: Date, now: Date) async throws
        -> RefreshRotation
    {
        try await client.withTransaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                SELECT t.family_id, t.expires_at, t.used_at, f.user_id, f.client_id, f.device, f.revoked_at
                FROM refresh_tokens t JOIN refresh_families f ON f.id = t.family_id WHERE t.hash = \(hash)
                FOR UPDATE
                """, logger: logger)
            var found: (String, Int64, Int64?, String, String, String?, Int64?)?
            for try await row in rows.decode((String, Int64, Int64?, String, String, String?, Int64?).self) {
                found = row
            }
            guard let (familyID, tokenExpiry, usedAt, userID, clientID, device, revokedAt) = found else {
                return .invalid
            }
            if revokedAt != nil { return .invalid }
            if usedAt != nil {
                try await connection.query(
                    "UPDATE refresh_families SET revoked_at = \(now.millis) WHERE id = \(familyID)", logger: logger)
                return .reused(familyID: familyID)
            }
            if tokenExpiry <= now.millis { return .invalid }
            try await connection.query(
                "UPDATE refresh_tokens SET used_at = \(now.millis) WHERE hash = \(hash)", logger: logger)
            try await connection.query(
                """
                INSERT INTO refresh_tokens (hash, family_id, created_at, expires_at)
                VALUES (\(replacementHash), \(familyID), \(now.millis), \(expiresAt.millis))
                """, logger: logger)
            return .rotated(RefreshFamily(id: familyID, userID: userID, clientID: clientID, device: device))
        }
    }

    // MARK: Sync

    public func latestSeq(userID: String) async throws -> Int64 {
        let rows = try await client.query("SELECT seq FROM user_seq WHERE user_id = \(userID)", logger: logger)
        for try await seq in rows.decode(Int64.self) { return seq }
        return 0
    }

    public func usage(userID: String) async throws -> StorageUsage {
        // Every space the user owns: the personal one (its id is the user's) and shared ones.
        let rows = try await client.query(
            """
            SELECT COALESCE(SUM(q.stored_bytes), 0)::bigint, COALESCE(SUM(q.stored_records), 0)::bigint,
                   COALESCE(SUM(q.history_bytes), 0)::bigint
            FROM user_seq q
            WHERE q.user_id = \(userID) OR q.user_id IN (SELECT id FROM spaces WHERE owner_id = \(userID))
            """, logger: logger
        )
        for try await (bytes, records, history) in rows.decode((Int64, Int64, Int64).self) {
            return StorageUsage(bytes: bytes, records: records, history: history)
        }
        return StorageUsage()
    }

    public func changes(userID: String, since: Int64, limit: Int, snapshot: Bool) async throws -> ChangesPage {
        try await client.withTransaction(logger: logger) { connection in
            // The seq, the purge point and the records from one snapshot.
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
            var latest: Int64 = 0
            var purged: Int64 = 0
            let seqRows = try await connection.query(
                "SELECT seq, purged_seq FROM user_seq WHERE user_id = \(userID)", logger: logger)
            for try await (seq, purgedSeq) in seqRows.decode((Int64, Int64).self) {
                latest = seq
                purged = purgedSeq
            }
            let query = ChangesQuery(since: since, limit: limit, latest: latest, purgedSeq: purged, snapshot: snapshot)
            let rows = try await connection.query(
                """
                SELECT collection, id, rev, seq, deleted, fields, created_at, updated_at FROM records
                WHERE user_id = \(userID) AND seq > \(query.lowerBound) AND seq <= \(query.upperBound)
                AND (NOT deleted OR \(query.includeTombstones))
                ORDER BY seq LIMIT \(Int64(query.fetchLimit))
                """, logger: logger)
            return query.page(from: try await Self.records(rows))
        }
    }

    public func record(userID: String, collection: String, id: String) async throws -> Record? {
        try await client.withConnection { connection in
            try await Self.fetchRecord(connection, userID: userID, collection: collection, id: id, logger: logger)
        }
    }

    public func revisions(userID: String, collection: String, id: String) async throws -> [RevisionInfo]? {
        try await client.withConnection { connection in
            guard
                try await Self.fetchRecord(connection, userID: userID, collection: collection, id: id, logger: logger)
                    != nil
            else { return nil }
            var result: [RevisionInfo] = []
            for try await (rev, conflict, seq, device, ccid, updated, size, author, name) in try await connection.query(
                """
                SELECT r.rev, r.conflict, r.seq, r.device, r.ccid, r.updated_at, r.size, r.author, u.username
                FROM revisions r LEFT JOIN users u ON u.id = r.author
                WHERE r.user_id = \(userID) AND r.collection = \(collection) AND r.record_id = \(id)
                ORDER BY r.rev, r.conflict
                """, logger: logger
            ).decode((Int64, Bool, Int64, String?, String?, Int64, Int64?, String?, String?).self) {
                result.append(
                    RevisionInfo(
                        rev: rev, seq: seq, updatedAt: Date(millis: updated), device: device, ccid: ccid,
                        conflict: conflict, fields: [:], size: size, author: author, authorName: name))
            }
            return result
        }
    }

    public func revision(userID: String, collection: String, id: String, rev: Int64, conflict: Bool) async throws
        -> RevisionInfo?
    {
        try await client.withConnection { connection in
            if conflict {
                let rows = try await Self.storedRevisions(
                    connection.query(
                        """
                        SELECT rev, conflict, seq, fields, delta, size, device, ccid, updated_at FROM revisions
                        WHERE user_id = \(userID) AND collection = \(collection) AND record_id = \(id) AND rev = \(rev) AND conflict
                        """, logger: logger))
                return rows.first.map { $0.info(fields: $0.fields) }
            }
            let chain = try await Self.revisionChain(
                connection, userID: userID, collection: collection, id: id, rev: rev, logger: logger)
            guard let first = chain.first else { return nil }
            return first.info(fields: try HistoryChain.materialize(chain))
        }
    }

    /// The push algorithm (``PushAlgorithm``) through group commit (``PostgresGroupCommit``):
    /// with other changes waiting, this one goes into their transaction. A push that PostgreSQL
    /// has not answered within ``pushDeadline`` fails.
    public func push(_ change: Change, context: PushContext) async throws -> PushResult {
        try await push([(change, context)])[0].get()
    }

    /// The changes of one push message, in order, through group commit: one transaction (one
    /// WAL flush) for them and the other users' changes waiting with them.
    public func push(_ changes: [(change: Change, context: PushContext)]) async throws -> [Result<
        PushResult, any Error
    >] {
        await commits.run(changes)
    }

    public func sweep(tombstonesBefore: Date, appliedChangesBefore: Date) async throws {
        try await client.withTransaction(logger: logger) { connection in
            // One statement, one snapshot: every tombstone deleted raises its user's purge point.
            try await connection.query(
                """
                WITH purged AS (
                    DELETE FROM records WHERE deleted AND updated_at < \(tombstonesBefore.millis) RETURNING user_id, seq),
                maxes AS (SELECT user_id, MAX(seq) AS max_seq FROM purged GROUP BY user_id)
                UPDATE user_seq u SET purged_seq = GREATEST(u.purged_seq, m.max_seq) FROM maxes m WHERE u.user_id = m.user_id
                """, logger: logger)
            try await connection.query(
                "DELETE FROM applied_changes WHERE created_at < \(appliedChangesBefore.millis)", logger: logger)
        }
    }

    public func listenForCommits(
        onListening: @escaping @Sendable () async -> Void,
        _ handler: @escaping @Sendable (CommitNotice) async -> Void
    ) async throws {
        let nodeID = self.nodeID
        let logger = self.logger
        // Failed attempts in a row; reset once LISTEN is in effect.
        let failures = NIOLockedValueBox(0)
        // A connection of its own, not one of the pool's: when PostgreSQL ends the listening
        // connection, a pooled one went back to the pool before its end was noticed and the
        // next push's transaction was leased it (`BEGIN` failed with 57P01; ClusterFaultTests).
        let direct = try directConfiguration()
        var attempt = 0
        while !Task.isCancelled {
            attempt += 1
            do {
                try await withListeningConnection(direct, id: attempt) { connection in
                    try await connection.listen(on: Self.commitChannel) { notifications in
                        // LISTEN is in effect here: what was committed before is read by the
                        // catch-up, what is committed after arrives below.
                        if failures.withLockedValue({ $0 }) > 0 {
                            logger.notice("listening for other nodes' commits again")
                        }
                        failures.withLockedValue { $0 = 0 }
                        await onListening()
                        for try await notification in notifications {
                            let parts = notification.payload.split(separator: " ")
                            if parts.count == 3, parts[1] == "revoke" {
                                await handler(
                                    CommitNotice(
                                        userID: "", seq: 0, fromThisNode: parts[0] == nodeID,
                                        revokedFamily: String(parts[2])))
                                continue
                            }
                            if parts.count == 3, parts[1] == "deleted" {
                                await handler(
                                    CommitNotice(
                                        userID: "", seq: 0, fromThisNode: parts[0] == nodeID,
                                        deletedUser: String(parts[2])))
                                continue
                            }
                            if parts.count == 3, parts[1] == "membership" {
                                var notice = CommitNotice(userID: "", seq: 0, fromThisNode: parts[0] == nodeID)
                                notice.membershipUser = String(parts[2])
                                await handler(notice)
                                continue
                            }
                            if parts.count == 3, parts[1] == "disabled" {
                                await handler(
                                    CommitNotice(
                                        userID: "", seq: 0, fromThisNode: parts[0] == nodeID,
                                        disabledUser: String(parts[2])))
                                continue
                            }
                            guard parts.count == 3, let seq = Int64(parts[2]) else { continue }
                            await handler(
                                CommitNotice(userID: String(parts[1]), seq: seq, fromThisNode: parts[0] == nodeID))
                        }
                    }
                }
                // The notification stream only ends when its connection does.
                throw PostgresStoreError.listenerEnded
            } catch {
                if Task.isCancelled { return }
                let failed = failures.withLockedValue {
                    $0 += 1
                    return $0
                }
                // 0.25 s, 0.5 s, 1 s … at most 8 s between attempts.
                let delay = Duration.milliseconds(250 * (1 << min(failed - 1, 5)))
                logger.warning(
                    "listening for other nodes' commits failed; retrying",
                    metadata: [
                        "error": .string(String(describing: error)), "retryIn": .stringConvertible(delay),
                    ])
                try? await Task.sleep(for: delay)
            }
        }
    }

    /// Runs `body` on a new connection made with `configuration` (closed afterwards), or on one
    /// of the pool's without one.
    private func withListeningConnection(
        _ configuration: PostgresConnection.Configuration?, id: Int,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Void
    ) async throws {
        guard let configuration else { return try await client.withConnection(body) }
        let connection = try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
        do {
            try await body(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
    }

    // MARK: Rows

    private static func fetchRecord(
        _ connection: PostgresConnection, userID: String, collection: String, id: String, logger: Logger
    ) async throws -> Record? {
        let rows = try await connection.query(
            """
            SELECT collection, id, rev, seq, deleted, fields, created_at, updated_at FROM records
            WHERE user_id = \(userID) AND collection = \(collection) AND id = \(id)
            """, logger: logger)
        return try await records(rows).first
    }

    private static func records(_ rows: PostgresRowSequence) async throws -> [Record] {
        var result: [Record] = []
        for try await (collection, id, rev, seq, deleted, fields, created, updated)
            in rows.decode((String, String, Int64, Int64, Bool, String, Int64, Int64).self)
        {
            result.append(
                Record(
                    collection: collection, id: id, rev: rev, seq: seq, deleted: deleted,
                    fields: try FieldsCoding.decode(fields),
                    createdAt: Date(millis: created), updatedAt: Date(millis: updated)))
        }
        return result
    }
}

enum PostgresStoreError: Error, CustomStringConvertible {
    case listenerEnded

    var description: String {
        switch self {
        case .listenerEnded: "the listening connection closed"
        }
    }
}
