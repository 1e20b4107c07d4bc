import Foundation
import Hummingbird
import LiveServerSupport
import Logging
import NotedClient
import NotedCore
import NotedServer
import Testing

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The real server, in process, on a free port over a SQLite file in a temporary directory.
struct LiveServer: Sendable {
    let url: URL
    let port: Int
    let directory: String

    /// Runs `body` against a fresh server; the server stops and its files go afterwards.
    static func with(
        directory: String? = nil, port: Int = 0, configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (LiveServer) async throws -> Void
    ) async throws {
        let directory =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("noted-client-test-\(UUID().uuidString)")
            .path
        let owned = directory.contains("noted-client-test-")
        defer { if owned { try? FileManager.default.removeItem(atPath: directory) } }
        try await run(directory: directory, port: port, configure: configure, body)
    }

    /// Runs a server over an existing directory (for restarts on the same port).
    static func run(
        directory: String, port: Int, configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (LiveServer) async throws -> Void
    ) async throws {
        try await runReturning(directory: directory, port: port, configure: configure, body)
    }

    /// Runs a server over `directory` (on `port`, else a free one) for `body` and returns what
    /// it returns; the one harness of the server's suites (`LiveNode`) runs it.
    static func runReturning<T: Sendable>(
        directory: String, port: Int = 0, configure: @Sendable (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (LiveServer) async throws -> T
    ) async throws -> T {
        var configuration = LiveNode.configuration(.sqlite(path: directory + "/noted.sqlite"))
        configuration.port = port
        configuration.dataDirectory = directory
        configuration.authAttemptsPerWindow = 1000
        configure(&configuration)
        return try await LiveNode.run(configuration, logger: LiveNode.logger("noted-client-test-server")) { client in
            guard let actualPort = client.port else { throw TestFailure("the server did not start") }
            return try await body(
                LiveServer(url: URL(string: "http://127.0.0.1:\(actualPort)")!, port: actualPort, directory: directory))
        }
    }

    /// A client of a server that is no longer running on `port` (its sync never connects).
    static func offlineClient(_ credentials: Credentials, path: String, port: Int) throws -> NotedClient {
        var configuration = NotedClient.Configuration()
        configuration.sync.initialBackoff = .milliseconds(100)
        configuration.sync.maxBackoff = .milliseconds(500)
        return try NotedClient(
            databasePath: path, server: URL(string: "http://127.0.0.1:\(port)")!, credentials: credentials,
            configuration: configuration)
    }

    /// Registers a user and signs in; the credentials a client needs.
    func makeUser(_ name: String = "user-\(UUID().uuidString.prefix(8).lowercased())") async throws -> Credentials {
        let api = NotedAPI(server: url)
        let password = "correct horse battery"
        let id = try await api.register(username: name, password: password)
        return try await signIn(name, userID: id, password: password)
    }

    func signIn(_ name: String, userID: String, password: String = "correct horse battery") async throws -> Credentials
    {
        let tokens = try await NotedAPI(server: url).signIn(
            username: name, password: password, device: UUID().uuidString.lowercased())
        return Credentials(
            server: url.absoluteString, username: name, userID: userID, accessToken: tokens.accessToken,
            refreshToken: tokens.refreshToken, expiresAt: tokens.expiresAt)
    }

    /// A client with its own database file, for `credentials`.
    func client(
        _ credentials: Credentials, path: String? = nil, collections: [CollectionSchema] = [],
        configure: (inout NotedClient.Configuration) -> Void = { _ in }
    ) throws -> NotedClient {
        var configuration = NotedClient.Configuration()
        configuration.sync.debounce = .milliseconds(20)
        configuration.sync.initialBackoff = .milliseconds(100)
        configuration.sync.maxBackoff = .milliseconds(500)
        configure(&configuration)
        let path =
            path
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("noted-client-\(UUID().uuidString).sqlite")
            .path
        return try NotedClient(
            databasePath: path, collections: collections, server: url, credentials: credentials,
            configuration: configuration)
    }
}

/// Waits until `condition` holds, looking again each time one of `clients` reports an event
/// (``NotedClient/events()``: a record stored, acknowledged or refused, a change of sync status);
/// fails the test after `timeout`. The subscriptions begin before the first look, so no event
/// between a look and the wait goes unseen.
func eventually(
    _ what: String, on clients: [NotedClient], timeout: Duration = .seconds(30), _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    var watchers: [Task<Void, Never>] = [
        Task {
            try? await Task.sleep(until: deadline)
            wake.yield()
        }
    ]
    for client in clients {
        let events = await client.events()
        watchers.append(
            Task {
                for await _ in events { wake.yield() }
            })
    }
    defer {
        for watcher in watchers { watcher.cancel() }
        wake.finish()
    }
    var woken = wakes.makeAsyncIterator()
    while true {
        if try await condition() { return }
        guard ContinuousClock.now < deadline else { break }
        _ = await woken.next()
    }
    throw TestFailure("timed out waiting until \(what)")
}

/// Waits until the server's own state (which no client hears of: a sweep) satisfies
/// `condition`, asking it every 50 ms; fails the test after `timeout`.
func pollServer(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw TestFailure("timed out waiting until \(what)")
}

/// The notes of a client as comparable values (id, title, body, tags as a set, flags, rev).
func snapshot(_ client: NotedClient) async throws -> [String: String] {
    var result: [String: String] = [:]
    for trashed in [false, true] {
        for note in try await client.list(NoteFilter(trashed: trashed)) {
            result[note.id] =
                "\(note.title)|\(note.body)|\(note.tags.sorted())|\(note.folder ?? "-")|\(note.pinned)|\(note.trashed)|\(note.rev)"
        }
    }
    return result
}
