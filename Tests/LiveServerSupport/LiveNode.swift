import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NotedServer

/// The one way the test suites run a real server: the application `buildApplication` makes, on
/// a real socket, for the length of a body (HummingbirdTesting's live framework), then shut down
/// gracefully. `TestServer` (the server's suites) and `LiveServer` (the client library's) are
/// views of it.
public enum LiveNode {
    /// What every test server starts from: loopback, a free port, the cheapest bcrypt cost.
    public static func configuration(_ database: DatabaseLocation) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.database = database
        configuration.bcryptCost = 4
        return configuration
    }

    /// The test servers' logger: critical only, unless NOTED_TEST_LOG_LEVEL says otherwise.
    public static func logger(_ label: String = "noted-test") -> Logger {
        var logger = Logger(label: label)
        logger.logLevel =
            ProcessInfo.processInfo.environment["NOTED_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
            ?? .critical
        return logger
    }

    /// Runs `body` with a live server of `configuration`; the server shuts down gracefully when
    /// it returns or throws.
    public static func run<T: Sendable>(
        _ configuration: ServerConfiguration, logger: Logger? = nil,
        _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        let app = try await buildApplication(configuration, logger: logger ?? Self.logger())
        return try await run(app, body)
    }

    /// Runs `body` with `app` live; it shuts down gracefully afterwards.
    public static func run<T: Sendable>(
        _ app: some ApplicationProtocol, _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        try await app.test(.live) { client in
            try await settle(client)
            return try await body(client)
        }
    }

    /// One request over the testing framework's own connection before the test runs.
    ///
    /// `app.test(.live)` opens that connection without waiting for it, and shuts the server
    /// down gracefully when the test returns. A test that returned at once (a node started and
    /// stopped) could have the connection accepted while the server was already quiescing: the
    /// server then waited for it for ever and the whole test run hung (seen in CI, test
    /// `aCollectionWithoutRecordsMayBeRemoved`). Once a request has been answered, the
    /// connection is idle and the graceful shutdown closes it.
    public static func settle(_ client: some TestClientProtocol) async throws {
        let response = try await client.execute(uri: "/health", method: .get, headers: [:], body: nil)
        guard response.status == .ok else { throw Failure("GET /health answered \(response.status)") }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }
}
