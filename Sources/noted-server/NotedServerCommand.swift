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
        subcommands: [Serve.self, Keys.self, Users.self, Backup.self, Restore.self],
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

/// The operator's tools work on the configured database, beside a running server or without one.
private func operators(_ store: StoreOptions) throws -> Operators {
    umask(0o077)
    var configuration = ServerConfiguration()
    try store.apply(to: &configuration, environment: ProcessInfo.processInfo.environment)
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = .warning
        return handler
    }
    return Operators(configuration, logger: Logger(label: "noted-server"))
}

/// Runs an operator's command: its refusals are one line on standard error and exit 1.
private func refusing(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let failure as Operators.Failure {
        FileHandle.standardError.write(Data("Error: \(failure.description)\n".utf8))
        throw ExitCode.failure
    }
}

/// `noted-server users list|disable|enable|delete|reset-password`.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage accounts: list, disable, enable, delete, reset a password.",
        discussion: "Works on the configured database, also while servers run on it: they close a disabled or deleted account's connections within seconds.",
        subcommands: [List.self, Disable.self, Enable.self, Delete.self, ResetPassword.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List every account: username, id, created, last seen, notes and bytes stored, disabled, two-factor.")
        @OptionGroup var store: StoreOptions
        @Flag(help: "JSON lines, one per account.") var json = false

        func run() async throws {
            let formatter = ISO8601DateFormatter()
            let users = try await operators(store).users()
            for user in users {
                if json {
                    let line: JSONValue = [
                        "id": .string(user.id), "username": .string(user.username), "createdAt": .string(formatter.string(from: user.createdAt)),
                        "lastSeen": user.lastSeen.map { .string(formatter.string(from: $0)) } ?? .null, "records": .int(user.records),
                        "storedBytes": .int(user.storedBytes), "disabled": .bool(user.disabled), "twoFactor": .bool(user.twoFactor),
                    ]
                    print(line.jsonString)
                } else {
                    let flags = [user.disabled ? "disabled" : nil, user.twoFactor ? "2fa" : nil].compactMap { $0 }.joined(separator: ",")
                    print([user.username, user.id, "created " + formatter.string(from: user.createdAt),
                           "last seen " + (user.lastSeen.map(formatter.string(from:)) ?? "never"), "\(user.records) records",
                           "\(user.storedBytes) bytes", flags].filter { !$0.isEmpty }.joined(separator: "\t"))
                }
            }
            if !json { FileHandle.standardError.write(Data("\(users.count) account(s)\n".utf8)) }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an account: every sign-in ends, every connection closes, no new sign-in until enabled.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username (or the account's id).") var user: String

        func run() async throws {
            try await refusing {
                let (name, ended) = try await operators(store).setDisabled(user, true)
                print("\(name) disabled; \(ended) sign-in(s) ended")
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled account again.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username (or the account's id).") var user: String

        func run() async throws {
            try await refusing {
                let (name, _) = try await operators(store).setDisabled(user, false)
                print("\(name) enabled")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an account and everything kept for it (notes, history, sign-ins); the username is free again.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username (or the account's id).") var user: String
        @Flag(help: "Confirm: this cannot be undone.") var yes = false

        func run() async throws {
            guard yes else { throw ValidationError("deleting an account cannot be undone: give --yes to confirm") }
            try await refusing {
                let name = try await operators(store).delete(user)
                print("\(name) deleted")
            }
        }
    }

    struct ResetPassword: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset-password",
            abstract: "Give an account a new random password, printed once; every sign-in of it ends.",
            discussion: "Pass the password on to its owner by a safe way; they should change it (noted account password, or the web app's Account panel).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username (or the account's id).") var user: String
        @Flag(name: .customLong("turn-off-2fa"), help: "Turn off two-factor sign-in too (the owner lost their authenticator).") var turnOffTwoFactor = false

        func run() async throws {
            try await refusing {
                let (name, password) = try await operators(store).resetPassword(user, turnOffTwoFactor: turnOffTwoFactor)
                print(password)
                FileHandle.standardError.write(Data("new password of \(name) printed above; every sign-in of it ended\(turnOffTwoFactor ? ", two-factor sign-in is off" : "")\n".utf8))
            }
        }
    }
}

/// `noted-server backup PATH`: an online, consistent copy of the SQLite database.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite database to a new file, consistently, while the server runs (SQLite's backup API).",
        discussion: "PostgreSQL: use pg_dump (docs/deploy.md, \"Backups\"). The copy holds every password hash and signing key: keep it as safe as the data directory.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "The backup file to create (never overwritten).") var path: String

    func run() async throws {
        try await refusing {
            let (bytes, users) = try await operators(store).backup(to: path)
            print("backed up \(users) account(s), \(bytes) bytes, to \(path)")
        }
    }
}

/// `noted-server restore PATH`: the backup becomes the database (with the server stopped).
struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a backup the SQLite database of --data (or --database); run it with the server stopped.",
        discussion: "Refused when a database is there, unless --replace: then that one is kept beside it, renamed. A backup of an earlier version is upgraded.")
    @OptionGroup var store: StoreOptions
    @Argument(help: "A file written by noted-server backup.") var path: String
    @Flag(help: "Replace the database there (kept beside it, renamed, never deleted).") var replace = false

    func run() async throws {
        try await refusing {
            let (users, keptAs) = try await operators(store).restore(from: path, replace: replace)
            print("restored \(users) account(s) from \(path)" + (keptAs.map { "; the database that was there is now \($0)" } ?? ""))
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

    @Option(name: .customLong("heartbeat-seconds"), help: "Seconds between the heartbeats (unsolicited pong frames) every sync connection is sent [NOTED_HEARTBEAT_SECONDS]; default 30.")
    var heartbeatSeconds: Int?

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

    @Option(name: .customLong("max-import-bytes"), help: "The largest export the web app may upload to import, in bytes [NOTED_MAX_IMPORT_BYTES]; default 268435456 (256 MiB).")
    var maxImportBytes: Int?

    @Option(name: .customLong("max-blob-bytes"), help: "The largest attachment a user may upload, in bytes [NOTED_MAX_BLOB_BYTES]; default 26214400 (25 MiB).")
    var maxBlobBytes: Int?

    @Option(name: .customLong("blob-retention-hours"), help: "Hours an attachment no note references is kept after its upload, and an unfinished upload after its last write [NOTED_BLOB_RETENTION_HOURS]; default 24.")
    var blobRetentionHours: Int?

    @Option(name: .customLong("history-days"), help: "Days a note's revision history reaches back (every save for 10 minutes, then one per 10 minutes of the last day, per hour of the last week, per day after); 0 keeps every revision [NOTED_HISTORY_DAYS]; default 90.")
    var historyDays: Int?

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
        if let text = heartbeatSeconds.map(String.init) ?? environment["NOTED_HEARTBEAT_SECONDS"] {
            guard let value = Int(text), (1...3600).contains(value) else { throw ValidationError("--heartbeat-seconds is a number from 1 to 3600") }
            configuration.heartbeatInterval = .seconds(value)
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
        if let text = maxImportBytes.map(String.init) ?? environment["NOTED_MAX_IMPORT_BYTES"] {
            guard let value = Int(text), value >= 1 else { throw ValidationError("--max-import-bytes is a number of bytes >= 1") }
            configuration.maxImportBytes = value
        }
        if let text = maxBlobBytes.map(String.init) ?? environment["NOTED_MAX_BLOB_BYTES"] {
            guard let value = Int(text), value >= 1 else { throw ValidationError("--max-blob-bytes is a number of bytes >= 1") }
            configuration.maxBlobBytes = value
        }
        if let text = blobRetentionHours.map(String.init) ?? environment["NOTED_BLOB_RETENTION_HOURS"] {
            guard let value = Int(text), (1...87_600).contains(value) else { throw ValidationError("--blob-retention-hours is a number of hours from 1 to 87600") }
            configuration.blobRetention = .seconds(value * 3600)
        }
        if let text = historyDays.map(String.init) ?? environment["NOTED_HISTORY_DAYS"] {
            guard let value = Int(text), (0...36_500).contains(value) else { throw ValidationError("--history-days is a number of days from 0 (keep everything) to 36500") }
            configuration.history = HistoryPolicy(days: value)
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
