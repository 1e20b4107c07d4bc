import ArgumentParser
import Foundation
import NotedClient
import NotedCore

/// `shelf`: a reading log that syncs, an example of an app's own collections on NotedClient
/// (docs/collections.md walks through it).
struct Shelf: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shelf",
        abstract: "A reading log that works offline and syncs across your devices.",
        discussion:
            "Books and timed reading sessions, kept on this device and synced through a noted-server that serves shelf's collections (noted-server --collections Sources/shelf/collections).",
        subcommands: [
            Register.self, Login.self, Add.self, List.self, SetStatus.self, Start.self, Stop.self,
            Sessions.self, Stats.self, History.self, Sync.self,
        ])
}

/// A user mistake or an unusable environment: one line on standard error, exit status 1.
struct ShelfError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Options every command takes.
struct Options: ParsableArguments {
    @Option(help: "Directory of shelf's database and credentials [SHELF_HOME].")
    var home: String?

    @Option(help: "Server URL, e.g. http://127.0.0.1:8080 [NOTED_SERVER]; remembered after login.")
    var server: String?

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Do not contact the server at all.")
    var offline = false

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// `--home`, else `SHELF_HOME`, else the user's data directory.
    var homePath: String {
        if let home, !home.isEmpty { return home }
        if let value = environment["SHELF_HOME"], !value.isEmpty { return value }
        let base =
            environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/share")
        return base + "/shelf"
    }

    /// Each account's books in a database of its own (`AccountDirectory`): signing in as
    /// someone else on this home switches to theirs and erases nothing.
    var accounts: AccountDirectory { AccountDirectory(path: homePath, databaseName: "shelf.sqlite") }

    /// The database of the account last signed in (the home's first one before any sign-in).
    func databasePath() throws -> String { try librarySync { try accounts.databasePath() } }
    var credentialsPath: String { homePath + "/credentials.json" }

    /// `--server`, else `NOTED_SERVER`, else the server signed in to.
    func serverURL() throws -> URL? {
        guard
            let text = server ?? environment["NOTED_SERVER"].flatMap({ $0.isEmpty ? nil : $0 })
                ?? (try? credentials())?.server
        else {
            return nil
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host != nil
        else {
            throw ShelfError("the server must be an http:// or https:// URL, not \"\(text)\"")
        }
        return url
    }

    func createHome() throws {
        do {
            try FileManager.default.createDirectory(
                atPath: homePath, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw ShelfError("cannot create the home directory \(homePath): \(error.localizedDescription)")
        }
    }

    func credentials() throws -> Credentials? {
        guard let data = FileManager.default.contents(atPath: credentialsPath) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        guard let credentials = try? decoder.decode(Credentials.self, from: data) else {
            throw ShelfError("the credentials file \(credentialsPath) is damaged; run `shelf login` again")
        }
        return credentials
    }

    /// Written to a temporary file, then renamed over the old one: a crash leaves one whole file.
    static func save(_ credentials: Credentials, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let temporary = path + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: try encoder.encode(credentials), attributes: [.posixPermissions: 0o600]),
            rename(temporary, path) == 0
        else {
            throw ShelfError("cannot write \(path)")
        }
    }

    /// The client over this home, syncing when signed in to the server and not `--offline`.
    func open() throws -> NotedClient {
        try createHome()
        let credentials = offline ? nil : try credentials()
        let server = offline ? nil : try serverURL()
        let path = credentialsPath
        let same =
            credentials.map { $0.server.trimmingSuffix("/") == server?.absoluteString.trimmingSuffix("/") } ?? false
        return try librarySync {
            try NotedClient(
                databasePath: try accounts.databasePath(), collections: ShelfSchemas.all, server: same ? server : nil,
                credentials: same ? credentials : nil, persist: { try Options.save($0, to: path) })
        }
    }

    /// After a change: sync it, waiting at most five seconds (it stays queued otherwise).
    func sync(_ client: NotedClient) async {
        guard !offline, client.server != nil else { return }
        await client.startSync()
        _ = await client.waitUntilSynced(timeout: .seconds(5), failWhenOffline: true)
        await client.stopSync()
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}

/// Runs a library call, turning its errors into one-line errors.
@discardableResult
func library<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as NotedClientError {
        throw ShelfError(error.message)
    }
}

/// ``library(_:)`` for a synchronous call (a name of its own: with one name, a trailing
/// closure could pick either).
@discardableResult
func librarySync<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as NotedClientError {
        throw ShelfError(error.message)
    }
}

func printJSON(_ value: JSONValue) { print(value.jsonString) }
