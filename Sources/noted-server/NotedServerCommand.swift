import ArgumentParser
import Foundation
import Logging
import NotedCore
import NotedServer
import ServiceLifecycle

/// `noted-server`: serves (the default subcommand, so `noted-server --port 0` keeps working)
/// or manages signing keys.
@main
struct NotedServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "noted-server",
        abstract: "The Noted sync server.",
        discussion: "Every option also reads an environment variable (shown in brackets); a flag wins over the environment.",
        subcommands: [Serve.self, Keys.self],
        defaultSubcommand: Serve.self)
}

/// Where the data lives and how long access tokens live: shared by serving and `keys`.
struct StoreOptions: ParsableArguments {
    @Option(help: "Data directory of the embedded SQLite database [NOTED_DATA].")
    var data: String?

    @Option(help: "sqlite:PATH or postgres://USER@HOST:PORT/DB [NOTED_DATABASE].")
    var database: String?

    @Option(name: .customLong("access-token-lifetime"), help: "Access-token lifetime in seconds [NOTED_ACCESS_TOKEN_LIFETIME].")
    var accessTokenLifetime: Int?

    func apply(to configuration: inout ServerConfiguration, environment: [String: String]) throws {
        configuration.dataDirectory = data ?? environment["NOTED_DATA"] ?? configuration.dataDirectory
        if let text = database ?? environment["NOTED_DATABASE"] {
            guard let location = DatabaseLocation(argument: text) else {
                throw ValidationError("--database takes sqlite:PATH or postgres://USER@HOST:PORT/DB")
            }
            configuration.database = location
        }
        if let text = accessTokenLifetime.map(String.init) ?? environment["NOTED_ACCESS_TOKEN_LIFETIME"] {
            guard let seconds = Int(text), seconds >= 1 else { throw ValidationError("the access-token lifetime is a number of seconds >= 1") }
            configuration.accessTokenLifetime = .seconds(seconds)
        }
    }
}

/// `noted-server keys rotate`.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage the access-token signing keys.", subcommands: [Rotate.self])

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a new signing key (a new kid); older keys stay in the JWKS until the tokens they signed have expired.",
            discussion: "Running servers sign with the new key within a minute, without a restart.")

        @OptionGroup var store: StoreOptions

        func run() async throws {
            umask(0o077)
            var configuration = ServerConfiguration()
            try store.apply(to: &configuration, environment: ProcessInfo.processInfo.environment)
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            let result = try await rotateSigningKeys(configuration, logger: Logger(label: "noted-server"))
            print("new signing key \(result.kid)")
            for kid in result.dropped { print("dropped retired key \(kid)") }
            print("the JWKS lists \(result.listed.joined(separator: ", "))")
        }
    }
}

/// Serving: configuration from flags and environment, then the application.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sync server (the default).",
        discussion: "Every option also reads an environment variable (shown in brackets); a flag wins over the environment.")

    @Option(help: "Address to listen on [NOTED_HOST].")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free port [NOTED_PORT].")
    var port: Int?

    @OptionGroup var store: StoreOptions

    @Option(name: .customLong("allowed-origin"), help: "A browser origin allowed to connect; repeatable [NOTED_ALLOWED_ORIGINS, comma-separated].")
    var allowedOrigins: [String] = []

    @Flag(name: .customLong("no-registration"), help: "Switch off POST /v1/accounts [NOTED_NO_REGISTRATION=1].")
    var noRegistration = false

    @Option(help: "Issuer (iss) of access tokens; give every node sharing a database the same one [NOTED_ISSUER]. Default: http://HOST:PORT.")
    var issuer: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error [NOTED_LOG_LEVEL].")
    var logLevel: String?

    @Option(name: .customLong("web-root"), help: "Folder of the web app served at / [NOTED_WEB_ROOT]; default: Web in the working directory or the source checkout.")
    var webRoot: String?

    @Option(name: .customLong("oauth-client"), help: "A third-party OAuth client, ID[:Name]=REDIRECT_URI[,REDIRECT_URI…]; repeatable [NOTED_OAUTH_CLIENTS, separated by spaces].")
    var oauthClients: [String] = []

    @Option(name: .customLong("trust-issuer"), help: "Accept access tokens of an external OpenID issuer: issuer=URL,jwks=URL|discovery=URL,audience=AUD[,claim=sub][,refetch=60]; repeatable [NOTED_TRUSTED_ISSUERS, separated by spaces].")
    var trustedIssuers: [String] = []

    @Option(name: .customLong("auth-attempts-per-minute"), help: "Sign-in and registration attempts per minute, per address and per username [NOTED_AUTH_ATTEMPTS_PER_MINUTE]; default 10.")
    var authAttemptsPerMinute: Int?

    @Option(name: .customLong("max-pushes-per-second"), help: "Push messages per second and connection; more are rejected rate_limited [NOTED_MAX_PUSHES_PER_SECOND]; default 20.")
    var maxPushesPerSecond: Int?

    @Option(name: .customLong("trusted-proxy"), help: "A reverse proxy (address or CIDR) whose X-Forwarded-For is believed for the sign-in limits; repeatable [NOTED_TRUSTED_PROXIES, comma-separated].")
    var trustedProxies: [String] = []

    @Option(name: .customLong("metrics-token"), help: "Bearer token that lets /metrics be read from other machines (loopback may always) [NOTED_METRICS_TOKEN].")
    var metricsToken: String?

    @Option(name: .customLong("max-sessions-per-user"), help: "Sync connections of one user on this node; a hello beyond is refused (close 4029) [NOTED_MAX_SESSIONS_PER_USER]; default 50.")
    var maxSessionsPerUser: Int?

    @Option(name: .customLong("max-connections"), help: "Open connections (HTTP and WebSocket) of this node; one beyond is answered 503 and closed [NOTED_MAX_CONNECTIONS]; default 16384.")
    var maxConnections: Int?

    @Option(name: .customLong("quota-bytes"), help: "Bytes of records one user may store; 0 for no limit [NOTED_QUOTA_BYTES]; default 1073741824 (1 GiB).")
    var quotaBytes: Int64?

    @Option(name: .customLong("quota-records"), help: "Records one user may store; 0 for no limit [NOTED_QUOTA_RECORDS]; default 1000000.")
    var quotaRecords: Int64?

    @Option(help: "Folder of collection schema documents (*.json, docs/collections.md) served besides notes [NOTED_COLLECTIONS].")
    var collections: String?

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
        try store.apply(to: &configuration, environment: environment)
        let envOrigins = environment["NOTED_ALLOWED_ORIGINS"].map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } } ?? []
        configuration.allowedOrigins = allowedOrigins.isEmpty ? envOrigins : allowedOrigins
        if noRegistration || ["1", "true", "yes"].contains(environment["NOTED_NO_REGISTRATION"]?.lowercased() ?? "") {
            configuration.registrationOpen = false
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
        let issuerArguments = trustedIssuers.isEmpty
            ? (environment["NOTED_TRUSTED_ISSUERS"]?.split(separator: " ").map(String.init) ?? []) : trustedIssuers
        for argument in issuerArguments {
            switch TrustedIssuer.parse(argument) {
            case .success(let trusted):
                guard !configuration.trustedIssuers.contains(where: { $0.issuer == trusted.issuer }) else {
                    throw ValidationError("--trust-issuer: \(trusted.issuer) is given twice")
                }
                configuration.trustedIssuers.append(trusted)
            case .failure(let error):
                throw ValidationError("--trust-issuer takes issuer=URL,jwks=URL|discovery=URL,audience=AUD[,claim=NAME][,refetch=SECONDS]: \(error)")
            }
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
        let proxies = trustedProxies.isEmpty
            ? (environment["NOTED_TRUSTED_PROXIES"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            : trustedProxies
        configuration.trustedProxies = try proxies.map { text in
            guard let range = ClientAddresses.Range(text) else { throw ValidationError("--trusted-proxy takes an address or a CIDR range, not \"\(text)\"") }
            return range
        }
        if let token = metricsToken ?? environment["NOTED_METRICS_TOKEN"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard token.utf8.count >= 16 else { throw ValidationError("--metrics-token must be at least 16 characters") }
            configuration.metricsToken = token
        }
        if let text = maxSessionsPerUser.map(String.init) ?? environment["NOTED_MAX_SESSIONS_PER_USER"] {
            guard let value = Int(text), value >= 1 else { throw ValidationError("--max-sessions-per-user is a number >= 1") }
            configuration.maxSessionsPerUser = value
        }
        if let text = maxConnections.map(String.init) ?? environment["NOTED_MAX_CONNECTIONS"] {
            guard let value = Int(text), value >= 1 else { throw ValidationError("--max-connections is a number >= 1") }
            configuration.maxConnections = value
        }
        if let text = quotaBytes.map(String.init) ?? environment["NOTED_QUOTA_BYTES"] {
            guard let value = Int64(text), value >= 0 else { throw ValidationError("--quota-bytes is a number of bytes >= 0 (0: no limit)") }
            configuration.quota.bytes = value == 0 ? nil : value
        }
        if let text = quotaRecords.map(String.init) ?? environment["NOTED_QUOTA_RECORDS"] {
            guard let value = Int64(text), value >= 0 else { throw ValidationError("--quota-records is a number >= 0 (0: no limit)") }
            configuration.quota.records = value == 0 ? nil : value
        }
        return configuration
    }

    func run() async throws {
        // Whatever the server creates (the data directory, the database and its -wal and -shm
        // files) is its own user's only: they hold the signing keys and every note.
        umask(0o077)
        var configuration = try makeConfiguration()
        do {
            configuration.schemas = try SchemaRegistry.load(directory: collections ?? ProcessInfo.processInfo.environment["NOTED_COLLECTIONS"])
            try await serve(configuration)
        } catch let refusal as StartupRefusal {
            FileHandle.standardError.write(Data("noted-server: \(refusal.description)\n".utf8))
            throw ExitCode(2)
        }
    }

    private func serve(_ configuration: ServerConfiguration) async throws {
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
