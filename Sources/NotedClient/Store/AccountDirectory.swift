import Foundation
import NotedCore

/// One directory (the `noted` home, an app's support folder) that keeps each account's local
/// database apart, keyed by server and user id (docs/client.md, "Accounts on one device").
///
/// `accounts.json` in the directory names the account in use and where each account's
/// database is. Signing in as someone else switches to that account's database (made on first
/// use) and never erases another's: what one account left unsynced is still there, and syncs,
/// when that account signs in again. Signing out changes nothing here.
///
/// Before any sign-in, the directory has one database, `databaseName`, and the first account
/// that signs in takes it over (with what was written offline before). A directory written by
/// a version without `accounts.json` held one account's database under that name, bound to the
/// account by its `account` setting: that account keeps it, and a different one gets its own.
///
/// ```swift
/// let directory = AccountDirectory(path: supportFolder)
/// let path = try await directory.use(server: "https://notes.example", userID: userID, username: "alice")
/// let client = try NotedClient(databasePath: path, server: server, credentials: credentials)
/// ```
public struct AccountDirectory: Sendable {
    /// An account that has signed in here.
    public struct Account: Codable, Sendable, Hashable {
        /// The server's URL, without a trailing slash.
        public var server: String
        /// The user's id on that server (the access token's `sub`).
        public var userID: String
        public var username: String
        /// The database file, relative to the directory.
        public var database: String

        /// What a database's `account` setting holds for this account.
        public var binding: String { Self.binding(server: server, userID: userID) }

        static func binding(server: String, userID: String) -> String { server + " " + userID }
    }

    private struct Index: Codable {
        /// The binding of the account in use.
        var current: String?
        var accounts: [Account] = []
    }

    public let path: String
    /// The name of the directory's first database (and of every account's database file).
    public let databaseName: String

    public init(path: String, databaseName: String = "noted.sqlite") {
        self.path = path
        self.databaseName = databaseName
    }

    /// The file naming the account in use and each account's database.
    public var indexPath: String { path + "/accounts.json" }

    /// Every account that has signed in here, the one in use first.
    public func accounts() throws -> [Account] {
        let index = try load()
        return index.accounts.sorted { a, _ in a.binding == index.current }
    }

    /// The account in use: the last one that signed in (also after it signed out, so that it
    /// can keep working offline); nil before any sign-in.
    public func current() throws -> Account? {
        let index = try load()
        return index.accounts.first { $0.binding == index.current }
    }

    /// The database of the account in use; the directory's first database before any sign-in.
    public func databasePath() throws -> String {
        guard let account = try current() else { return path + "/" + databaseName }
        return path + "/" + account.database
    }

    /// Makes the account of `server` and `userID` the one in use and returns the path of its
    /// database (created on first use; nothing of another account is touched).
    /// `collections`: the app's collection schemas, to open the directory's first database
    /// when it has to be read to tell whose it is.
    public func use(server: String, userID: String, username: String, collections: [CollectionSchema] = []) async throws
        -> String
    {
        let server = server.hasSuffix("/") ? String(server.dropLast()) : server
        let binding = Account.binding(server: server, userID: userID)
        var index = try load()
        if let at = index.accounts.firstIndex(where: { $0.binding == binding }) {
            index.accounts[at].username = username
            index.current = binding
            try save(index)
            return path + "/" + index.accounts[at].database
        }
        var database = databaseName
        let first = path + "/" + databaseName
        if index.accounts.contains(where: { $0.database == databaseName }) {
            database = Self.databaseName(for: binding, file: databaseName)
        } else if FileManager.default.fileExists(atPath: first) {
            let bound = try await LocalStore.open(path: first, collections: collections).meta("account")
            if let bound, bound != binding {
                // Signed in with a version that kept one database: its account keeps it.
                let parts = bound.split(separator: " ", maxSplits: 1).map(String.init)
                let (boundServer, boundUser) = (parts.first ?? bound, parts.count > 1 ? parts[1] : "")
                index.accounts.append(
                    Account(server: boundServer, userID: boundUser, username: boundUser, database: databaseName))
                database = Self.databaseName(for: binding, file: databaseName)
            }
        }
        if database != databaseName {
            let folder = (path + "/" + database as NSString).deletingLastPathComponent
            do {
                try FileManager.default.createDirectory(
                    atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw NotedClientError(.storage, "cannot create \(folder): \(error.localizedDescription)")
            }
        }
        index.accounts.append(Account(server: server, userID: userID, username: username, database: database))
        index.current = binding
        try save(index)
        return path + "/" + database
    }

    /// Forgets the account of `server` and `userID` (deleted on the server): its database
    /// files are removed and it is no longer the one in use. Nothing of another account is
    /// touched.
    public func forget(server: String, userID: String) throws {
        let server = server.hasSuffix("/") ? String(server.dropLast()) : server
        let binding = Account.binding(server: server, userID: userID)
        var index = try load()
        guard let at = index.accounts.firstIndex(where: { $0.binding == binding }) else { return }
        let database = path + "/" + index.accounts[at].database
        index.accounts.remove(at: at)
        if index.current == binding { index.current = nil }
        try save(index)
        for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: database + suffix) {
            do {
                try FileManager.default.removeItem(atPath: database + suffix)
            } catch {
                throw NotedClientError(.storage, "cannot remove \(database + suffix): \(error.localizedDescription)")
            }
        }
    }

    /// `accounts/<readable part>-<hash>/<file>`: the server's host and the user id, made safe
    /// for a file name, and a hash of both that keeps two accounts apart whatever they hold.
    static func databaseName(for binding: String, file: String) -> String {
        let readable = String(
            binding.replacingOccurrences(of: "https://", with: "").replacingOccurrences(of: "http://", with: "")
                .map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") ? $0 : "_" }.prefix(60))
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a, 64 bits
        for byte in binding.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        return "accounts/\(readable)-\(String(hash, radix: 16))/\(file)"
    }

    private func load() throws -> Index {
        guard let data = FileManager.default.contents(atPath: indexPath) else { return Index() }
        do {
            return try JSONDecoder().decode(Index.self, from: data)
        } catch {
            throw NotedClientError(
                .storage, "\(indexPath) is damaged (\(error)); it lists which database holds which account")
        }
    }

    private func save(_ index: Index) throws {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw NotedClientError(.storage, "cannot create \(path): \(error.localizedDescription)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(index)
        let temporary = indexPath + ".tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]),
            rename(temporary, indexPath) == 0
        else {
            throw NotedClientError(.storage, "cannot write \(indexPath)")
        }
    }
}
