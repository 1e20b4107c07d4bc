import Foundation
import GRDB
import Logging
import NotedCore

/// What `noted-server users …`, `backup` and `restore` do, beside a running server or with
/// none (docs/deploy.md, "Accounts" and "Backups").
public struct Operators: Sendable {
    let configuration: ServerConfiguration
    let logger: Logger

    public init(_ configuration: ServerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// A refusal of an operator's command, said as one line.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    private func withStore<T>(creating: Bool = false, _ body: (any NotedStore) async throws -> T) async throws -> T {
        // A mistyped --data would otherwise make an empty database and report no accounts.
        if !creating, case .sqlite(let path) = configuration.databaseLocation,
            !FileManager.default.fileExists(atPath: path)
        {
            throw Failure("no database at \(path): give the server's --data (or --database)")
        }
        let store = try await openStore(configuration, logger: logger)
        do {
            let result = try await body(store)
            await store.shutdown()
            return result
        } catch {
            await store.shutdown()
            throw error
        }
    }

    /// The account a command names: its id, or its username (any case). A name that is both
    /// one account's id and another's username is refused: anyone may register a username
    /// that looks like an id (the ids appear in logs), and the operator must not hit the wrong one.
    private func account(_ name: String, in store: any NotedStore) async throws -> UserAccount {
        let byID = UUIDText.isCanonical(name) ? try await store.user(id: name) : nil
        let byName = try await store.user(usernameKey: name.lowercased())
        switch (byID, byName) {
        case (let id?, let named?) where id.id != named.id:
            throw Failure(
                "\(name) is the id of \(id.username) and the username of another account (id \(named.id)): give that id instead"
            )
        case (let id?, _): return id
        case (nil, let named?): return named
        case (nil, nil): throw Failure("no account \(name) on this server")
        }
    }

    public func users() async throws -> [UserSummary] {
        try await withStore { try await $0.users() }
    }

    /// Disables (every sign-in revoked, every connection closed, on every node) or enables an
    /// account. Returns its username and how many sign-ins ended.
    public func setDisabled(_ name: String, _ disabled: Bool) async throws -> (username: String, signedOut: Int) {
        try await withStore { store in
            let user = try await account(name, in: store)
            let (_, revoked) = try await store.setUserDisabled(id: user.id, disabled: disabled, now: Date())
            if disabled {
                try await store.announceAccountDisabled(userID: user.id)
                for family in revoked { try await store.announceRevocation(familyID: family) }
            }
            return (user.username, revoked.count)
        }
    }

    /// Deletes an account with everything kept for it, as the user can (`DELETE /v1/account`),
    /// without their password. Returns its username.
    public func delete(_ name: String) async throws -> String {
        try await withStore { store in
            let user = try await account(name, in: store)
            var spaces = Spaces(store: store, clock: configuration.clock)
            // The running server's sessions hear of it (PostgreSQL; SQLite's one node finds
            // out when they reconnect).
            spaces.membershipChanged = { users in
                for user in users { try? await store.announceMembership(userID: user) }
            }
            try await spaces.release(userID: user.id)
            let families = try await store.deleteUser(id: user.id)
            try await store.announceAccountDeletion(userID: user.id)
            for family in families { try await store.announceRevocation(familyID: family) }
            return user.username
        }
    }

    /// Sets a new random password and prints it for the operator to pass on: every sign-in of
    /// the account ends; with `turnOffTwoFactor`, so does its two-factor sign-in (the person
    /// lost their authenticator too). Returns the username and the password.
    public func resetPassword(_ name: String, turnOffTwoFactor: Bool) async throws -> (
        username: String, password: String
    ) {
        try await withStore { store in
            let user = try await account(name, in: store)
            let password = Self.temporaryPassword()
            let hash = try await PasswordHasher(cost: configuration.bcryptCost).hash(password)
            try await store.setPasswordHash(userID: user.id, hash: hash)
            if turnOffTwoFactor { try await store.disableTwoFactor(userID: user.id) }
            let ended = try await store.revokeSignInSessions(userID: user.id, only: nil, except: nil, now: Date())
            for family in ended { try await store.announceRevocation(familyID: family) }
            return (user.username, password)
        }
    }

    /// Four groups of four from an alphabet without look-alikes: 80 random bits.
    static func temporaryPassword() -> String {
        let alphabet = Array("abcdefghjkmnpqrstuvwxyz23456789")
        var generator = SystemRandomNumberGenerator()
        let characters = (0..<16).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
        return stride(from: 0, to: 16, by: 4).map { String(characters[$0..<$0 + 4]) }.joined(separator: "-")
    }

    // MARK: Backups

    /// The SQLite file of the configuration; PostgreSQL has its own tools.
    private func sqlitePath(for command: String) throws -> String {
        switch configuration.databaseLocation {
        case .sqlite(let path): return path
        case .postgres:
            throw Failure(
                "\(command) copies the embedded SQLite database; for PostgreSQL use pg_dump and pg_restore (docs/deploy.md, \"Backups\")"
            )
        }
    }

    /// Copies the database to `path` (a new file) through SQLite's online backup API: a
    /// consistent copy while the server runs and writes, checked before it is kept.
    public func backup(to path: String) async throws -> (bytes: Int64, users: Int) {
        let source = try sqlitePath(for: "backup")
        guard FileManager.default.fileExists(atPath: source) else {
            throw Failure("no database at \(source): nothing to back up")
        }
        guard !FileManager.default.fileExists(atPath: path) else {
            throw Failure("\(path) exists; give a new file (a backup never overwrites one)")
        }
        let temporary = path + ".partial-\(UUID().uuidString.prefix(8))"
        FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600])
        do {
            var readOnly = Configuration()
            readOnly.readonly = true
            let from = try DatabaseQueue(path: source, configuration: readOnly)
            let to = try DatabaseQueue(path: temporary)
            try from.backup(to: to)
            try from.close()
            // A single file: the copy's own journal mode, not the server's WAL.
            let users = try await to.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                return try Self.check(db, what: "the copy")
            }
            // The blobs the copy's rows name, beside it: files never change once stored, so
            // copying them after the snapshot gives the snapshot's files.
            let blobs = try await to.read { db in
                try db.tableExists("blobs")
                    ? try Row.fetchAll(db, sql: "SELECT user_id, sha256 FROM blobs").map {
                        ($0[0] as String, $0[1] as String)
                    } : []
            }
            try to.close()
            let bytes = try Self.copyBlobs(blobs, from: Self.blobDirectory(beside: source), to: path + ".blobs")
            try Self.durablyRename(temporary, to: path)
            let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
            return (size + bytes, users)
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
    }

    /// Makes the configured database a copy of the backup at `path`, for a server that is not
    /// running: refused when a database is there already unless `replace`, and then the one
    /// there is kept beside it (renamed), never deleted. The copy is migrated as a start would.
    public func restore(from path: String, replace: Bool) async throws -> (users: Int, keptAs: String?) {
        let target = try sqlitePath(for: "restore")
        guard FileManager.default.fileExists(atPath: path) else { throw Failure("no such file: \(path)") }
        var readOnly = Configuration()
        readOnly.readonly = true
        let from: DatabaseQueue
        let users: Int
        do {
            from = try DatabaseQueue(path: path, configuration: readOnly)
            users = try await from.read { try Self.check($0, what: path) }
        } catch let error as DatabaseError {
            throw Failure("\(path) is not a Noted backup: \(error.message ?? "\(error)")")
        }
        let exists = FileManager.default.fileExists(atPath: target)
        guard !exists || replace else {
            throw Failure(
                "\(target) exists; stop the server and give --replace (the database there is kept beside it, renamed)")
        }
        let directory = (target as NSString).deletingLastPathComponent
        try DataDirectory.secure(directory: directory.isEmpty ? "." : directory, database: target, logger: logger)
        // The copy is made whole beside the target first; only then is the database there
        // moved aside and the copy put in its place, so that a failed copy changes nothing.
        let temporary = target + ".partial-\(UUID().uuidString.prefix(8))"
        FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600])
        do {
            let to = try DatabaseQueue(path: temporary)
            try from.backup(to: to)
            try to.close()
            try from.close()
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        var keptAs: String?
        if exists {
            let stamp = Timestamp.format(Date()).replacingOccurrences(of: ":", with: "")
            let aside = target + ".before-restore-" + stamp
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: target + suffix) {
                try FileManager.default.moveItem(atPath: target + suffix, toPath: aside + suffix)
            }
            keptAs = aside
        }
        do {
            try Self.durablyRename(temporary, to: target)
        } catch {
            throw Failure("\(error); the database that was there is \(keptAs ?? "untouched"), the copy \(temporary)")
        }
        // The backup's blobs join those of the data directory (content-addressed: a file there
        // already is the same file).
        let saved = path + ".blobs"
        if FileManager.default.fileExists(atPath: saved) {
            let names = try Self.blobFiles(in: saved)
            _ = try Self.copyBlobs(names, from: saved, to: Self.blobDirectory(beside: target))
        }
        // A backup of an earlier version: brought up to this one now, as a start would.
        try await withStore(creating: true) { _ in }
        return (users, keptAs)
    }

    /// The `blobs` directory of the database at `path` (``SQLiteStore``'s layout).
    static func blobDirectory(beside path: String) -> String {
        (((path as NSString).deletingLastPathComponent) as NSString).appendingPathComponent("blobs")
    }

    /// The (user, sha256) files under a blobs directory.
    static func blobFiles(in directory: String) throws -> [(String, String)] {
        var names: [(String, String)] = []
        for user in try FileManager.default.contentsOfDirectory(atPath: directory) where BlobFiles.isSafe(user) {
            let folder = (directory as NSString).appendingPathComponent(user)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            where AttachmentReference.isSHA256(name) {
                names.append((user, name))
            }
        }
        return names
    }

    /// Copies the blob files `names` (user, sha256) from one blobs directory to another (a hard
    /// link when both are on one file system), leaving files already there; answers the bytes.
    static func copyBlobs(_ names: [(String, String)], from source: String, to target: String) throws -> Int64 {
        var bytes: Int64 = 0
        let files = FileManager.default
        for (user, sha256) in names {
            guard BlobFiles.isSafe(user), AttachmentReference.isSHA256(sha256) else { continue }
            let from = ((source as NSString).appendingPathComponent(user) as NSString).appendingPathComponent(sha256)
            let folder = (target as NSString).appendingPathComponent(user)
            let to = (folder as NSString).appendingPathComponent(sha256)
            guard files.fileExists(atPath: from) else {
                throw Failure("the attachment \(sha256) of user \(user) is missing from \(source)")
            }
            try files.createDirectory(
                atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            if !files.fileExists(atPath: to) {
                if link(from, to) != 0 { try files.copyItem(atPath: from, toPath: to) }
            }
            bytes += (try files.attributesOfItem(atPath: to)[.size] as? NSNumber)?.int64Value ?? 0
        }
        return bytes
    }

    /// That `db` holds Noted's tables, whole; how many accounts it has.
    private static func check(_ db: Database, what: String) throws -> Int {
        let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
        guard integrity == ["ok"] else {
            throw Failure("\(what) is damaged: \(integrity.prefix(3).joined(separator: "; "))")
        }
        for table in ["users", "records", "grdb_migrations"] {
            guard try db.tableExists(table) else {
                throw Failure("\(what) is not a Noted database (no \(table) table)")
            }
        }
        return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM users") ?? 0
    }

    /// Renames `temporary` to `path` with both the file and the rename on disk.
    private static func durablyRename(_ temporary: String, to path: String) throws {
        func sync(_ file: String) {
            let descriptor = open(file, O_RDONLY)
            guard descriptor >= 0 else { return }
            fsync(descriptor)
            close(descriptor)
        }
        sync(temporary)
        guard rename(temporary, path) == 0 else {
            throw Failure("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let directory = (path as NSString).deletingLastPathComponent
        sync(directory.isEmpty ? "." : directory)
    }
}
