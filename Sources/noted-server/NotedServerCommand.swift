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

    @Option(name: ServerSetting.data.long, help: ServerSetting.data.help) var data: String?
    @Option(name: ServerSetting.database.long, help: ServerSetting.database.help) var database: String?
    @Option(name: ServerSetting.accessTokenLifetime.long, help: ServerSetting.accessTokenLifetime.help)
    var accessTokenLifetime: Int?

    /// The settings of these flags (with `more`), the environment and the config file.
    func settings(
        more: [String: ConfigContent] = [:], environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> Settings {
        try await Settings.load(
            flags: ServerSetting.given(in: self).merging(more) { flag, _ in flag }, configFlag: config,
            environment: environment)
    }

    /// The configuration of the store alone (the operators' commands).
    func storeConfiguration() async throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        let settings = try await settings()
        for setting in ServerSetting.store { try setting.apply?(settings, &configuration) }
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

    @Option(name: ServerSetting.host.long, help: ServerSetting.host.help) var host: String?
    @Option(name: ServerSetting.port.long, help: ServerSetting.port.help) var port: Int?
    @OptionGroup var store: StoreOptions
    @Option(name: ServerSetting.allowedOrigins.long, help: ServerSetting.allowedOrigins.help) var allowedOrigins:
        [String] = []
    @Flag(name: ServerSetting.noRegistration.long, help: ServerSetting.noRegistration.help) var noRegistration: Bool =
        false
    @Option(name: ServerSetting.issuer.long, help: ServerSetting.issuer.help) var issuer: String?
    @Option(name: ServerSetting.logLevel.long, help: ServerSetting.logLevel.help) var logLevel: String?
    @Option(name: ServerSetting.webRoot.long, help: ServerSetting.webRoot.help) var webRoot: String?
    @Option(name: ServerSetting.oauthClients.long, help: ServerSetting.oauthClients.help) var oauthClients: [String] =
        []
    @Option(name: ServerSetting.trustedIssuers.long, help: ServerSetting.trustedIssuers.help) var trustedIssuers:
        [String] = []
    @Option(name: ServerSetting.authAttemptsPerMinute.long, help: ServerSetting.authAttemptsPerMinute.help)
    var authAttemptsPerMinute: Int?
    @Option(name: ServerSetting.maxPushesPerSecond.long, help: ServerSetting.maxPushesPerSecond.help)
    var maxPushesPerSecond: Int?
    @Option(name: ServerSetting.heartbeatSeconds.long, help: ServerSetting.heartbeatSeconds.help) var heartbeatSeconds:
        Int?
    @Option(name: ServerSetting.trustedProxies.long, help: ServerSetting.trustedProxies.help) var trustedProxies:
        [String] = []
    @Option(name: ServerSetting.metricsToken.long, help: ServerSetting.metricsToken.help) var metricsToken: String?
    @Option(name: ServerSetting.maxSessionsPerUser.long, help: ServerSetting.maxSessionsPerUser.help)
    var maxSessionsPerUser: Int?
    @Option(name: ServerSetting.maxConnections.long, help: ServerSetting.maxConnections.help) var maxConnections: Int?
    @Option(name: ServerSetting.maxBlobs.long, help: ServerSetting.maxBlobs.help) var maxBlobs: Int?
    @Option(name: ServerSetting.maxConnectionsPerAddress.long, help: ServerSetting.maxConnectionsPerAddress.help)
    var maxConnectionsPerAddress: Int?
    @Option(name: ServerSetting.quotaBytes.long, help: ServerSetting.quotaBytes.help) var quotaBytes: Int64?
    @Option(name: ServerSetting.quotaRecords.long, help: ServerSetting.quotaRecords.help) var quotaRecords: Int64?
    @Option(name: ServerSetting.maxImportBytes.long, help: ServerSetting.maxImportBytes.help) var maxImportBytes: Int?
    @Option(name: ServerSetting.maxBlobBytes.long, help: ServerSetting.maxBlobBytes.help) var maxBlobBytes: Int?
    @Option(name: ServerSetting.blobRetentionHours.long, help: ServerSetting.blobRetentionHours.help)
    var blobRetentionHours: Int?
    @Option(name: ServerSetting.historyDays.long, help: ServerSetting.historyDays.help) var historyDays: Int?
    @Option(name: ServerSetting.collections.long, help: ServerSetting.collections.help) var collections: String?

    /// The configuration the settings give (flags, then environment, then the config file).
    static func configuration(_ settings: Settings) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        for setting in ServerSetting.all { try setting.apply?(settings, &configuration) }
        return configuration
    }

    func run() async throws {
        // Whatever the server creates (the data directory, the database and its -wal and -shm
        // files) is its own user's only: they hold the signing keys and every note.
        umask(0o077)
        let settings = try await store.settings(more: ServerSetting.given(in: self))
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
