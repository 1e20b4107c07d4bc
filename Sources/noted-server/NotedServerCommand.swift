import ArgumentParser
import Foundation
import Logging
import NotedServer
import ServiceLifecycle

/// `noted-server`: configuration from flags and environment, then the application.
@main
struct NotedServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "noted-server",
        abstract: "The Noted sync server.",
        discussion: "Every option also reads an environment variable (shown in brackets); a flag wins over the environment.")

    @Option(help: "Address to listen on [NOTED_HOST].")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free port [NOTED_PORT].")
    var port: Int?

    @Option(help: "Data directory of the embedded SQLite database [NOTED_DATA].")
    var data: String?

    @Option(help: "sqlite:PATH or postgres://USER@HOST:PORT/DB [NOTED_DATABASE].")
    var database: String?

    @Option(name: .customLong("allowed-origin"), help: "A browser origin allowed to connect; repeatable [NOTED_ALLOWED_ORIGINS, comma-separated].")
    var allowedOrigins: [String] = []

    @Flag(name: .customLong("no-registration"), help: "Switch off POST /v1/accounts [NOTED_NO_REGISTRATION=1].")
    var noRegistration = false

    @Option(name: .customLong("access-token-lifetime"), help: "Access-token lifetime in seconds [NOTED_ACCESS_TOKEN_LIFETIME].")
    var accessTokenLifetime: Int?

    @Option(help: "Issuer (iss) of access tokens; give every node sharing a database the same one [NOTED_ISSUER]. Default: http://HOST:PORT.")
    var issuer: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error [NOTED_LOG_LEVEL].")
    var logLevel: String?

    @Option(name: .customLong("web-root"), help: "Folder of the web app served at / [NOTED_WEB_ROOT]; default: Web in the working directory or the source checkout.")
    var webRoot: String?

    @Option(name: .customLong("oauth-client"), help: "A third-party OAuth client, ID[:Name]=REDIRECT_URI[,REDIRECT_URI…]; repeatable [NOTED_OAUTH_CLIENTS, separated by spaces].")
    var oauthClients: [String] = []

    @Option(name: .customLong("auth-attempts-per-minute"), help: "Sign-in and registration attempts per minute, per address and per username [NOTED_AUTH_ATTEMPTS_PER_MINUTE]; default 10.")
    var authAttemptsPerMinute: Int?

    @Option(name: .customLong("max-pushes-per-second"), help: "Push messages per second and connection; more are rejected rate_limited [NOTED_MAX_PUSHES_PER_SECOND]; default 20.")
    var maxPushesPerSecond: Int?

    func validate() throws {
        _ = try makeConfiguration()
    }

    func makeConfiguration(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.host = host ?? environment["NOTED_HOST"] ?? configuration.host
        if let text = port.map(String.init) ?? environment["NOTED_PORT"] {
            guard let value = Int(text), (0...65535).contains(value) else { throw ValidationError("the port must be 0 to 65535") }
            configuration.port = value
        }
        configuration.dataDirectory = data ?? environment["NOTED_DATA"] ?? configuration.dataDirectory
        if let text = database ?? environment["NOTED_DATABASE"] {
            guard let location = DatabaseLocation(argument: text) else {
                throw ValidationError("--database takes sqlite:PATH or postgres://USER@HOST:PORT/DB")
            }
            configuration.database = location
        }
        let envOrigins = environment["NOTED_ALLOWED_ORIGINS"].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
        configuration.allowedOrigins = allowedOrigins.isEmpty ? envOrigins : allowedOrigins
        if noRegistration || ["1", "true", "yes"].contains(environment["NOTED_NO_REGISTRATION"]?.lowercased() ?? "") {
            configuration.registrationOpen = false
        }
        if let text = accessTokenLifetime.map(String.init) ?? environment["NOTED_ACCESS_TOKEN_LIFETIME"] {
            guard let seconds = Int(text), seconds >= 1 else { throw ValidationError("the access-token lifetime is a number of seconds >= 1") }
            configuration.accessTokenLifetime = .seconds(seconds)
        }
        if let value = issuer ?? environment["NOTED_ISSUER"] {
            guard !value.isEmpty else { throw ValidationError("the issuer must not be empty") }
            configuration.issuer = value
        }
        configuration.webRoot = webRoot ?? environment["NOTED_WEB_ROOT"]
        if let root = configuration.webRoot, !FileManager.default.fileExists(atPath: root + "/index.html") {
            throw ValidationError("--web-root \(root) has no index.html")
        }
        let clientArguments = oauthClients.isEmpty
            ? (environment["NOTED_OAUTH_CLIENTS"]?.split(separator: " ").map(String.init) ?? []) : oauthClients
        for argument in clientArguments {
            guard let client = OAuthClients.parse(argument) else {
                throw ValidationError("--oauth-client takes ID[:Name]=REDIRECT_URI[,REDIRECT_URI…], got \(argument)")
            }
            guard !["noted-cli", OAuthClient.webClientID, "noted"].contains(client.id) else {
                throw ValidationError("--oauth-client: \(client.id) is a built-in client")
            }
            configuration.oauthClients.append(client)
        }
        if let text = authAttemptsPerMinute.map(String.init) ?? environment["NOTED_AUTH_ATTEMPTS_PER_MINUTE"] {
            guard let value = Int(text), value >= 1 else { throw ValidationError("--auth-attempts-per-minute is a number >= 1") }
            configuration.authAttemptsPerWindow = value
            configuration.authWindow = .seconds(60)
        }
        if let text = maxPushesPerSecond.map(String.init) ?? environment["NOTED_MAX_PUSHES_PER_SECOND"] {
            guard let value = Int(text), value >= 1 else { throw ValidationError("--max-pushes-per-second is a number >= 1") }
            configuration.maxPushesPerSecond = value
        }
        return configuration
    }

    func run() async throws {
        let configuration = try makeConfiguration()
        let level = Logger.Level(rawValue: logLevel ?? ProcessInfo.processInfo.environment["NOTED_LOG_LEVEL"] ?? "info") ?? .info
        // Logs go to standard error: standard output carries only the "listening" line.
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "noted-server")
        let sessions = SyncSessions()
        let app = try await buildApplication(configuration, sessions: sessions, logger: logger) { host, port in
            FileHandle.standardOutput.write(Data("noted-server listening on http://\(host):\(port)\n".utf8))
        }
        let group = ServiceGroup(configuration: .init(
            services: [app, sessions.closeOnShutdown()], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
