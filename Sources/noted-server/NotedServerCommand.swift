import ArgumentParser
import Configuration
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
        discussion:
            "Every option also reads an environment variable (shown in brackets) and a setting of the same name in the --config file; a flag wins over the environment, which wins over the file.",
        subcommands: [Serve.self, Keys.self, Users.self, Backup.self, Restore.self],
        defaultSubcommand: Serve.self)
}

/// Where the data lives and how long access tokens live: shared by serving and the operators'
/// commands, with the config file they all read.
struct StoreOptions: ParsableArguments {
    @Option(
        help:
            "A JSON file of settings, named as the flags are ({\"port\": 8080, \"max-pushes-per-second\": 50}); a flag or an environment variable wins over it [NOTED_CONFIG]."
    )
    var config: String?

    @Option(help: "Data directory of the embedded SQLite database [NOTED_DATA].")
    var data: String?

    @Option(help: "sqlite:PATH or postgres://USER@HOST:PORT/DB [NOTED_DATABASE].")
    var database: String?

    @Option(
        name: .customLong("access-token-lifetime"),
        help: "Access-token lifetime in seconds [NOTED_ACCESS_TOKEN_LIFETIME].")
    var accessTokenLifetime: Int?

    /// The flags given, by setting name.
    var flags: [String: ConfigContent] {
        var flags: [String: ConfigContent] = [:]
        flags["data"] = data.map(ConfigContent.string)
        flags["database"] = database.map(ConfigContent.string)
        flags["access-token-lifetime"] = accessTokenLifetime.map(ConfigContent.int)
        return flags
    }

    /// The settings of these flags (with `more`), the environment and the config file.
    func settings(
        more: [String: ConfigContent] = [:], environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> Settings {
        try await Settings.load(
            flags: flags.merging(more) { flag, _ in flag }, configFlag: config, environment: environment)
    }

    static func apply(_ settings: Settings, to configuration: inout ServerConfiguration) throws {
        configuration.dataDirectory = try settings.string("data") ?? configuration.dataDirectory
        if let location = try settings.parsed(
            "database", "takes sqlite:PATH or postgres://USER@HOST:PORT/DB", DatabaseLocation.init(argument:))
        {
            configuration.database = location
        }
        if let seconds = try settings.int(
            "access-token-lifetime", "the access-token lifetime is a number of seconds >= 1", { $0 >= 1 })
        {
            configuration.accessTokenLifetime = .seconds(seconds)
        }
    }

    /// The configuration of the store alone (the operators' commands).
    func storeConfiguration() async throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        try Self.apply(try await settings(), to: &configuration)
        return configuration
    }
}

/// `noted-server keys rotate`.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the access-token signing keys.", subcommands: [Rotate.self])

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Add a new signing key (a new kid); older keys stay in the JWKS until the tokens they signed have expired.",
            discussion: "Running servers sign with the new key within a minute, without a restart.")

        @OptionGroup var store: StoreOptions

        func run() async throws {
            umask(0o077)
            let configuration = try await store.storeConfiguration()
            LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
            let result = try await rotateSigningKeys(configuration, logger: Logger(label: "noted-server"))
            print("new signing key \(result.kid)")
            for kid in result.dropped { print("dropped retired key \(kid)") }
            print("the JWKS lists \(result.listed.joined(separator: ", "))")
        }
    }
}

/// The operator's tools work on the configured database, beside a running server or without one.
private func operators(_ store: StoreOptions) async throws -> Operators {
    umask(0o077)
    let configuration = try await store.storeConfiguration()
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
        discussion:
            "Works on the configured database, also while servers run on it: they close a disabled or deleted account's connections within seconds.",
        subcommands: [List.self, Disable.self, Enable.self, Delete.self, ResetPassword.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "List every account: username, id, created, last seen, notes and bytes stored, disabled, two-factor.")
        @OptionGroup var store: StoreOptions
        @Flag(help: "JSON lines, one per account.") var json = false

        func run() async throws {
            let users = try await operators(store).users()
            for user in users {
                if json {
                    let line: JSONValue = [
                        "id": .string(user.id), "username": .string(user.username),
                        "createdAt": .string(Timestamp.format(user.createdAt)),
                        "lastSeen": user.lastSeen.map { .string(Timestamp.format($0)) } ?? .null,
                        "records": .int(user.records),
                        "storedBytes": .int(user.storedBytes), "disabled": .bool(user.disabled),
                        "twoFactor": .bool(user.twoFactor),
                    ]
                    print(line.jsonString)
                } else {
                    let flags = [user.disabled ? "disabled" : nil, user.twoFactor ? "2fa" : nil].compactMap { $0 }
                        .joined(separator: ",")
                    print(
                        [
                            user.username, user.id, "created " + Timestamp.format(user.createdAt),
                            "last seen " + (user.lastSeen.map(Timestamp.format) ?? "never"), "\(user.records) records",
                            "\(user.storedBytes) bytes", flags,
                        ].filter { !$0.isEmpty }.joined(separator: "\t"))
                }
            }
            if !json { FileHandle.standardError.write(Data("\(users.count) account(s)\n".utf8)) }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable an account: every sign-in ends, every connection closes, no new sign-in until enabled.")
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
        static let configuration = CommandConfiguration(
            abstract:
                "Delete an account and everything kept for it (notes, history, sign-ins); the username is free again.")
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
            discussion:
                "Pass the password on to its owner by a safe way; they should change it (noted account password, or the web app's Account panel)."
        )
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username (or the account's id).") var user: String
        @Flag(
            name: .customLong("turn-off-2fa"),
            help: "Turn off two-factor sign-in too (the owner lost their authenticator).") var turnOffTwoFactor = false

        func run() async throws {
            try await refusing {
                let (name, password) = try await operators(store).resetPassword(
                    user, turnOffTwoFactor: turnOffTwoFactor)
                print(password)
                FileHandle.standardError.write(
                    Data(
                        "new password of \(name) printed above; every sign-in of it ended\(turnOffTwoFactor ? ", two-factor sign-in is off" : "")\n"
                            .utf8))
            }
        }
    }
}

/// `noted-server backup PATH`: an online, consistent copy of the SQLite database.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite database to a new file, consistently, while the server runs (SQLite's backup API).",
        discussion:
            "PostgreSQL: use pg_dump (docs/deploy.md, \"Backups\"). The copy holds every password hash and signing key: keep it as safe as the data directory."
    )
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
        discussion:
            "Refused when a database is there, unless --replace: then that one is kept beside it, renamed. A backup of an earlier version is upgraded."
    )
    @OptionGroup var store: StoreOptions
    @Argument(help: "A file written by noted-server backup.") var path: String
    @Flag(help: "Replace the database there (kept beside it, renamed, never deleted).") var replace = false

    func run() async throws {
        try await refusing {
            let (users, keptAs) = try await operators(store).restore(from: path, replace: replace)
            print(
                "restored \(users) account(s) from \(path)"
                    + (keptAs.map { "; the database that was there is now \($0)" } ?? ""))
        }
    }
}

/// Serving: configuration from flags and environment, then the application.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the sync server (the default).",
        discussion:
            "Every option also reads an environment variable (shown in brackets) and a setting of the same name in the --config file; a flag wins over the environment, which wins over the file."
    )

    @Option(help: "Address to listen on [NOTED_HOST].")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free port [NOTED_PORT].")
    var port: Int?

    @OptionGroup var store: StoreOptions

    @Option(
        name: .customLong("allowed-origin"),
        help: "A browser origin allowed to connect; repeatable [NOTED_ALLOWED_ORIGINS, comma-separated].")
    var allowedOrigins: [String] = []

    @Flag(name: .customLong("no-registration"), help: "Switch off POST /v1/accounts [NOTED_NO_REGISTRATION=1].")
    var noRegistration = false

    @Option(
        help:
            "Issuer (iss) of access tokens; give every node sharing a database the same one [NOTED_ISSUER]. Default: http://HOST:PORT."
    )
    var issuer: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error [NOTED_LOG_LEVEL].")
    var logLevel: String?

    @Option(
        name: .customLong("web-root"),
        help:
            "Folder of the web app served at / [NOTED_WEB_ROOT]; default: Web in the working directory or the source checkout."
    )
    var webRoot: String?

    @Option(
        name: .customLong("oauth-client"),
        help:
            "A third-party OAuth client, ID[:Name]=REDIRECT_URI[,REDIRECT_URI…]; repeatable [NOTED_OAUTH_CLIENTS, separated by spaces]."
    )
    var oauthClients: [String] = []

    @Option(
        name: .customLong("trust-issuer"),
        help:
            "Accept access tokens of an external OpenID issuer: issuer=URL,jwks=URL|discovery=URL,audience=AUD[,claim=sub][,refetch=60]; repeatable [NOTED_TRUSTED_ISSUERS, separated by spaces]."
    )
    var trustedIssuers: [String] = []

    @Option(
        name: .customLong("auth-attempts-per-minute"),
        help:
            "Sign-in and registration attempts per minute, per address and per username [NOTED_AUTH_ATTEMPTS_PER_MINUTE]; default 10."
    )
    var authAttemptsPerMinute: Int?

    @Option(
        name: .customLong("max-pushes-per-second"),
        help:
            "Push messages per second and connection; more are rejected rate_limited [NOTED_MAX_PUSHES_PER_SECOND]; default 20."
    )
    var maxPushesPerSecond: Int?

    @Option(
        name: .customLong("heartbeat-seconds"),
        help:
            "Seconds between the heartbeats (unsolicited pong frames) every sync connection is sent [NOTED_HEARTBEAT_SECONDS]; default 30."
    )
    var heartbeatSeconds: Int?

    @Option(
        name: .customLong("trusted-proxy"),
        help:
            "A reverse proxy (address or CIDR) whose X-Forwarded-For is believed for the sign-in limits; repeatable [NOTED_TRUSTED_PROXIES, comma-separated]."
    )
    var trustedProxies: [String] = []

    @Option(
        name: .customLong("metrics-token"),
        help: "Bearer token that lets /metrics be read from other machines (loopback may always) [NOTED_METRICS_TOKEN]."
    )
    var metricsToken: String?

    @Option(
        name: .customLong("max-sessions-per-user"),
        help:
            "Sync connections of one user on this node; a hello beyond is refused (close 4029) [NOTED_MAX_SESSIONS_PER_USER]; default 50."
    )
    var maxSessionsPerUser: Int?

    @Option(
        name: .customLong("max-connections"),
        help:
            "Open connections (HTTP and WebSocket) of this node; one beyond is answered 503 and closed [NOTED_MAX_CONNECTIONS]; default 16384."
    )
    var maxConnections: Int?

    @Option(
        name: .customLong("max-blobs"),
        help: "Files (attachments) one user may hold; 0 for no limit [NOTED_MAX_BLOBS]; default 100000.")
    var maxBlobs: Int?

    @Option(
        name: .customLong("max-connections-per-address"),
        help:
            "Open connections from one address (IPv6: one /64; a trusted proxy's are not counted) [NOTED_MAX_CONNECTIONS_PER_ADDRESS]; default 256."
    )
    var maxConnectionsPerAddress: Int?

    @Option(
        name: .customLong("quota-bytes"),
        help: "Bytes of records one user may store; 0 for no limit [NOTED_QUOTA_BYTES]; default 1073741824 (1 GiB).")
    var quotaBytes: Int64?

    @Option(
        name: .customLong("quota-records"),
        help: "Records one user may store; 0 for no limit [NOTED_QUOTA_RECORDS]; default 1000000.")
    var quotaRecords: Int64?

    @Option(
        name: .customLong("max-import-bytes"),
        help:
            "The largest export the web app may upload to import, in bytes [NOTED_MAX_IMPORT_BYTES]; default 268435456 (256 MiB)."
    )
    var maxImportBytes: Int?

    @Option(
        name: .customLong("max-blob-bytes"),
        help: "The largest attachment a user may upload, in bytes [NOTED_MAX_BLOB_BYTES]; default 26214400 (25 MiB).")
    var maxBlobBytes: Int?

    @Option(
        name: .customLong("blob-retention-hours"),
        help:
            "Hours an attachment no note references is kept after its upload, and an unfinished upload after its last write [NOTED_BLOB_RETENTION_HOURS]; default 24."
    )
    var blobRetentionHours: Int?

    @Option(
        name: .customLong("history-days"),
        help:
            "Days a note's revision history reaches back (every save for 10 minutes, then one per 10 minutes of the last day, per hour of the last week, per day after); 0 keeps every revision [NOTED_HISTORY_DAYS]; default 90."
    )
    var historyDays: Int?

    @Option(
        help:
            "Folder of collection schema documents (*.json, docs/collections.md) served besides notes [NOTED_COLLECTIONS]."
    )
    var collections: String?

    /// The flags given, by setting name (a repeatable flag's setting is the plural list).
    var flags: [String: ConfigContent] {
        var flags: [String: ConfigContent] = [:]
        flags["host"] = host.map(ConfigContent.string)
        flags["port"] = port.map(ConfigContent.int)
        flags["allowed-origins"] = allowedOrigins.isEmpty ? nil : .stringArray(allowedOrigins)
        flags["no-registration"] = noRegistration ? .bool(true) : nil
        flags["issuer"] = issuer.map(ConfigContent.string)
        flags["log-level"] = logLevel.map(ConfigContent.string)
        flags["web-root"] = webRoot.map(ConfigContent.string)
        flags["oauth-clients"] = oauthClients.isEmpty ? nil : .stringArray(oauthClients)
        flags["trusted-issuers"] = trustedIssuers.isEmpty ? nil : .stringArray(trustedIssuers)
        flags["trusted-proxies"] = trustedProxies.isEmpty ? nil : .stringArray(trustedProxies)
        flags["metrics-token"] = metricsToken.map(ConfigContent.string)
        flags["collections"] = collections.map(ConfigContent.string)
        let numbers: [(String, Int?)] = [
            ("auth-attempts-per-minute", authAttemptsPerMinute), ("max-pushes-per-second", maxPushesPerSecond),
            ("heartbeat-seconds", heartbeatSeconds), ("max-sessions-per-user", maxSessionsPerUser),
            ("max-connections", maxConnections), ("max-connections-per-address", maxConnectionsPerAddress),
            ("max-blobs", maxBlobs),
            ("quota-bytes", quotaBytes.map { Int($0) }),
            ("quota-records", quotaRecords.map { Int($0) }), ("max-import-bytes", maxImportBytes),
            ("max-blob-bytes", maxBlobBytes), ("blob-retention-hours", blobRetentionHours),
            ("history-days", historyDays),
        ]
        for (name, value) in numbers { flags[name] = value.map(ConfigContent.int) }
        return flags
    }

    static func configuration(_ settings: Settings) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.host = try settings.string("host") ?? configuration.host
        configuration.port =
            try settings.int("port", "the port is a number from 0 to 65535", { (0...65535).contains($0) })
            ?? configuration.port
        try StoreOptions.apply(settings, to: &configuration)
        configuration.allowedOrigins = try settings.list("allowed-origins")
        if try settings.bool("no-registration") == true { configuration.registrationOpen = false }
        if let value = try settings.string("issuer") {
            guard !value.isEmpty else { throw settings.refuse("issuer", "the issuer must not be empty") }
            configuration.issuer = value
        }
        configuration.webRoot = try settings.string("web-root")
        if let root = configuration.webRoot, !FileManager.default.fileExists(atPath: root + "/index.html") {
            throw settings.refuse("web-root", "\(root) has no index.html")
        }
        try oauthClients(settings, into: &configuration)
        try limits(settings, into: &configuration)
        configuration.trustedProxies = try settings.list("trusted-proxies").map { text in
            guard let range = ClientAddresses.Range(text) else {
                throw settings.refuse("trusted-proxies", "takes addresses or CIDR ranges, not \"\(text)\"")
            }
            return range
        }
        if let token = try settings.string("metrics-token") {
            guard token.utf8.count >= 16 else {
                throw settings.refuse("metrics-token", "the metrics token must be at least 16 characters")
            }
            configuration.metricsToken = token
        }
        return configuration
    }

    /// Third-party OAuth clients and the external issuers whose tokens are accepted.
    private static func oauthClients(_ settings: Settings, into configuration: inout ServerConfiguration) throws {
        for argument in try settings.list("oauth-clients") {
            guard let client = OAuthClients.parse(argument) else {
                throw settings.refuse(
                    "oauth-clients", "an OAuth client is ID[:Name]=REDIRECT_URI[,REDIRECT_URI…], not \(argument)")
            }
            guard !["noted-cli", OAuthClient.webClientID, "noted"].contains(client.id) else {
                throw settings.refuse("oauth-clients", "\(client.id) is a built-in client")
            }
            configuration.oauthClients.append(client)
        }
        for argument in try settings.list("trusted-issuers") {
            switch TrustedIssuer.parse(argument) {
            case .success(let trusted):
                guard !configuration.trustedIssuers.contains(where: { $0.issuer == trusted.issuer }) else {
                    throw settings.refuse("trusted-issuers", "\(trusted.issuer) is given twice")
                }
                configuration.trustedIssuers.append(trusted)
            case .failure(let error):
                throw settings.refuse(
                    "trusted-issuers",
                    "a trusted issuer is issuer=URL,jwks=URL|discovery=URL,audience=AUD[,claim=NAME][,refetch=SECONDS]: \(error)"
                )
            }
        }
    }

    /// The numbers: rates, quotas, sizes and retention.
    private static func limits(_ settings: Settings, into configuration: inout ServerConfiguration) throws {
        if let value = try settings.int("auth-attempts-per-minute", "a number >= 1", { $0 >= 1 }) {
            configuration.authAttemptsPerWindow = value
            configuration.authWindow = .seconds(60)
        }
        configuration.maxPushesPerSecond =
            try settings.int("max-pushes-per-second", "a number >= 1", { $0 >= 1 }) ?? configuration.maxPushesPerSecond
        if let value = try settings.int("heartbeat-seconds", "a number from 1 to 3600", { (1...3600).contains($0) }) {
            configuration.heartbeatInterval = .seconds(value)
        }
        configuration.maxSessionsPerUser =
            try settings.int("max-sessions-per-user", "a number >= 1", { $0 >= 1 }) ?? configuration.maxSessionsPerUser
        configuration.maxConnections =
            try settings.int("max-connections", "a number >= 1", { $0 >= 1 }) ?? configuration.maxConnections
        configuration.maxConnectionsPerAddress =
            try settings.int("max-connections-per-address", "a number >= 1", { $0 >= 1 })
            ?? configuration.maxConnectionsPerAddress
        if let value = try settings.int("max-blobs", "a number >= 0 (0: no limit)", { $0 >= 0 }) {
            configuration.maxBlobs = value == 0 ? nil : value
        }
        if let value = try settings.int("quota-bytes", "a number of bytes >= 0 (0: no limit)", { $0 >= 0 }) {
            configuration.quota.bytes = value == 0 ? nil : Int64(value)
        }
        if let value = try settings.int("quota-records", "a number >= 0 (0: no limit)", { $0 >= 0 }) {
            configuration.quota.records = value == 0 ? nil : Int64(value)
        }
        configuration.maxImportBytes =
            try settings.int("max-import-bytes", "a number of bytes >= 1", { $0 >= 1 }) ?? configuration.maxImportBytes
        configuration.maxBlobBytes =
            try settings.int("max-blob-bytes", "a number of bytes >= 1", { $0 >= 1 }) ?? configuration.maxBlobBytes
        if let value = try settings.int(
            "blob-retention-hours", "a number of hours from 1 to 87600", { (1...87_600).contains($0) })
        {
            configuration.blobRetention = .seconds(value * 3600)
        }
        if let value = try settings.int(
            "history-days", "a number of days from 0 (keep everything) to 36500", { (0...36_500).contains($0) })
        {
            configuration.history = HistoryPolicy(days: value)
        }
    }

    func run() async throws {
        // Whatever the server creates (the data directory, the database and its -wal and -shm
        // files) is its own user's only: they hold the signing keys and every note.
        umask(0o077)
        let settings = try await store.settings(more: flags)
        var configuration = try Self.configuration(settings)
        let level =
            try settings.parsed(
                "log-level", "the log level is trace, debug, info, notice, warning, error or critical",
                Logger.Level.init(rawValue:)) ?? .info
        do {
            configuration.schemas = try SchemaRegistry.load(directory: try settings.string("collections"))
            try await serve(configuration, level: level)
        } catch let refusal as StartupRefusal {
            FileHandle.standardError.write(Data("noted-server: \(refusal.description)\n".utf8))
            throw ExitCode(2)
        }
    }

    private func serve(_ configuration: ServerConfiguration, level: Logger.Level) async throws {
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
        let group = ServiceGroup(
            configuration: .init(
                services: [app, sessions.closeOnShutdown()], gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}
