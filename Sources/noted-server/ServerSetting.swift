import ArgumentParser
import Configuration
import Foundation
import NotedCore
import NotedServer

/// One setting of `noted-server`, declared once (issue 47). From this table come the flag
/// (`--max-pushes-per-second`), the environment variable (`NOTED_MAX_PUSHES_PER_SECOND`), the
/// config file's key (`max-pushes-per-second`), the help the flag shows with its default (taken
/// from `ServerConfiguration`'s own), and what a value does to a `ServerConfiguration`,
/// validated, naming where a bad one came from. README's table of settings is checked against
/// `noted-server help serve` by Tests/peers/test_settings_table.py.
///
/// A command declares each flag as an option whose property is the setting's name in camel
/// case (`maxPushesPerSecond`), with `name` and `help` from here; `given(in:)` finds them.
struct ServerSetting: Sendable {
    enum Kind: Sendable, Equatable {
        case text
        case number
        /// A flag without a value (`--no-registration`); `true` in the file, `1` in the environment.
        case toggle
        /// A repeatable flag; the environment separates items by `separator`.
        case list(separator: Character)
    }

    /// The config file's key; the flag's long name unless `flag` is given.
    let name: String
    let kind: Kind
    /// The flag's long name, when it differs (a list's flag names one item).
    let flag: String
    /// What the flag's help says before its variable and default, without a final period.
    let summary: String
    /// The default the help states; nil: none stated (the summary says what happens without it).
    let defaultValue: String?
    /// Never printed by swift-configuration's access logging.
    let isSecret: Bool
    /// Reads the setting (when given) into the configuration; nil: read by the command itself.
    let apply: (@Sendable (Settings, inout ServerConfiguration) throws -> Void)?

    init(
        _ name: String, _ kind: Kind, flag: String? = nil, _ summary: String, default defaultValue: String? = nil,
        secret: Bool = false, apply: (@Sendable (Settings, inout ServerConfiguration) throws -> Void)? = nil
    ) {
        self.name = name
        self.kind = kind
        self.flag = flag ?? name
        self.summary = summary
        self.defaultValue = defaultValue
        self.isSecret = secret
        self.apply = apply
    }

    /// `NOTED_MAX_PUSHES_PER_SECOND`, as the environment provider spells `max-pushes-per-second`.
    var variable: String { "NOTED_" + String(name.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" }) }

    /// The option's name in a command: `maxPushesPerSecond`.
    var property: String {
        let words = name.split(separator: "-")
        return String(words[0]) + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    var long: NameSpecification { .customLong(flag) }

    /// The flag's help: the summary, the variable (how a list or a toggle is spelled there), the default.
    var help: ArgumentHelp {
        let variable =
            switch kind {
            case .text, .number: variable
            case .toggle: variable + "=1"
            case .list(let separator): variable + (separator == " " ? ", separated by spaces" : ", comma-separated")
            }
        return ArgumentHelp(summary + " [\(variable)]" + (defaultValue.map { "; default \($0)" } ?? "") + ".")
    }

    /// The default of a number of `ServerConfiguration`, as the help states it.
    private static func standard(_ value: (ServerConfiguration) -> Int) -> String {
        String(value(ServerConfiguration()))
    }
}

// MARK: The settings

extension ServerSetting {
    static let host = ServerSetting(
        "host", .text, "Address to listen on", default: ServerConfiguration().host,
        apply: { settings, configuration in configuration.host = try settings.string("host") ?? configuration.host })

    static let port = ServerSetting(
        "port", .number, "Port to listen on; 0 picks a free port", default: standard(\.port),
        apply: { settings, configuration in
            configuration.port =
                try settings.int("port", "the port is a number from 0 to 65535", { (0...65535).contains($0) })
                ?? configuration.port
        })

    static let data = ServerSetting(
        "data", .text, "Data directory of the embedded SQLite database", default: ServerConfiguration().dataDirectory,
        apply: { settings, configuration in
            configuration.dataDirectory = try settings.string("data") ?? configuration.dataDirectory
        })

    static let database = ServerSetting(
        "database", .text, "sqlite:PATH or postgres://USER@HOST:PORT/DB", default: "SQLite in the data directory",
        secret: true,
        apply: { settings, configuration in
            if let location = try settings.parsed(
                "database", "takes sqlite:PATH or postgres://USER@HOST:PORT/DB", DatabaseLocation.init(argument:))
            {
                configuration.database = location
            }
        })

    static let accessTokenLifetime = ServerSetting(
        "access-token-lifetime", .number, "Access-token lifetime in seconds",
        default: standard { Int($0.accessTokenLifetime.components.seconds) },
        apply: { settings, configuration in
            if let seconds = try settings.int(
                "access-token-lifetime", "the access-token lifetime is a number of seconds >= 1", { $0 >= 1 })
            {
                configuration.accessTokenLifetime = .seconds(seconds)
            }
        })

    static let allowedOrigins = ServerSetting(
        "allowed-origins", .list(separator: ","), flag: "allowed-origin",
        "A browser origin allowed to connect besides the server's own; repeatable",
        apply: { settings, configuration in configuration.allowedOrigins = try settings.list("allowed-origins") })

    static let noRegistration = ServerSetting(
        "no-registration", .toggle, "Switch off POST /v1/accounts (registration is open without it)",
        apply: { settings, configuration in
            if try settings.bool("no-registration") == true { configuration.registrationOpen = false }
        })

    static let issuer = ServerSetting(
        "issuer", .text,
        "Issuer (iss) of access tokens; give every node sharing a database the same one", default: "http://HOST:PORT",
        apply: { settings, configuration in
            guard let value = try settings.string("issuer") else { return }
            guard !value.isEmpty else { throw settings.refuse("issuer", "the issuer must not be empty") }
            configuration.issuer = value
        })

    /// Read by `Serve` itself: the logging system is set up before the application is built.
    static let logLevel = ServerSetting(
        "log-level", .text, "Log level: trace, debug, info, notice, warning, error", default: "info")

    static let webRoot = ServerSetting(
        "web-root", .text,
        "Folder of the web app served at /", default: "Web in the working directory or the source checkout",
        apply: { settings, configuration in
            configuration.webRoot = try settings.string("web-root")
            if let root = configuration.webRoot, !FileManager.default.fileExists(atPath: root + "/index.html") {
                throw settings.refuse("web-root", "\(root) has no index.html")
            }
        })

    static let oauthClients = ServerSetting(
        "oauth-clients", .list(separator: " "), flag: "oauth-client",
        "A third-party OAuth client, ID[:Name]=REDIRECT_URI[,REDIRECT_URI…]; repeatable",
        apply: { settings, configuration in
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
        })

    static let trustedIssuers = ServerSetting(
        "trusted-issuers", .list(separator: " "), flag: "trust-issuer",
        "Accept access tokens of an external OpenID issuer: issuer=URL,jwks=URL|discovery=URL,audience=AUD[,claim=sub][,refetch=60]; repeatable",
        apply: { settings, configuration in
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
        })

    static let authAttemptsPerMinute = ServerSetting(
        "auth-attempts-per-minute", .number,
        "Sign-in and registration attempts per minute, per address and per username",
        default: standard(\.authAttemptsPerWindow),
        apply: { settings, configuration in
            if let value = try settings.int("auth-attempts-per-minute", "a number >= 1", { $0 >= 1 }) {
                configuration.authAttemptsPerWindow = value
                configuration.authWindow = .seconds(60)
            }
        })

    static let maxPushesPerSecond = ServerSetting(
        "max-pushes-per-second", .number, "Push messages per second and connection; more are rejected rate_limited",
        default: standard(\.maxPushesPerSecond),
        apply: { settings, configuration in
            configuration.maxPushesPerSecond =
                try settings.int("max-pushes-per-second", "a number >= 1", { $0 >= 1 })
                ?? configuration.maxPushesPerSecond
        })

    static let heartbeatSeconds = ServerSetting(
        "heartbeat-seconds", .number,
        "Seconds between the heartbeats (unsolicited pong frames) every sync connection is sent",
        default: standard { Int($0.heartbeatInterval.components.seconds) },
        apply: { settings, configuration in
            if let value = try settings.int(
                "heartbeat-seconds", "a number from 1 to 3600", { (1...3600).contains($0) })
            {
                configuration.heartbeatInterval = .seconds(value)
            }
        })

    static let trustedProxies = ServerSetting(
        "trusted-proxies", .list(separator: ","), flag: "trusted-proxy",
        "A reverse proxy (address or CIDR) whose X-Forwarded-For is believed for the sign-in limits; repeatable",
        apply: { settings, configuration in
            configuration.trustedProxies = try settings.list("trusted-proxies").map { text in
                guard let range = ClientAddresses.Range(text) else {
                    throw settings.refuse("trusted-proxies", "takes addresses or CIDR ranges, not \"\(text)\"")
                }
                return range
            }
        })

    static let metricsToken = ServerSetting(
        "metrics-token", .text, "Bearer token that lets /metrics be read from other machines (loopback may always)",
        secret: true,
        apply: { settings, configuration in
            guard let token = try settings.string("metrics-token") else { return }
            guard token.utf8.count >= 16 else {
                throw settings.refuse("metrics-token", "the metrics token must be at least 16 characters")
            }
            configuration.metricsToken = token
        })

    static let maxSessionsPerUser = ServerSetting(
        "max-sessions-per-user", .number,
        "Sync connections of one user on this node; a hello beyond is refused (close 4029)",
        default: standard(\.maxSessionsPerUser),
        apply: { settings, configuration in
            configuration.maxSessionsPerUser =
                try settings.int("max-sessions-per-user", "a number >= 1", { $0 >= 1 })
                ?? configuration.maxSessionsPerUser
        })

    static let maxConnections = ServerSetting(
        "max-connections", .number,
        "Open connections (HTTP and WebSocket) of this node; one beyond is answered 503 and closed",
        default: standard(\.maxConnections),
        apply: { settings, configuration in
            configuration.maxConnections =
                try settings.int("max-connections", "a number >= 1", { $0 >= 1 }) ?? configuration.maxConnections
        })

    static let maxConnectionsPerAddress = ServerSetting(
        "max-connections-per-address", .number,
        "Open connections from one address (IPv6: one /64; a trusted proxy's are not counted)",
        default: standard(\.maxConnectionsPerAddress),
        apply: { settings, configuration in
            configuration.maxConnectionsPerAddress =
                try settings.int("max-connections-per-address", "a number >= 1", { $0 >= 1 })
                ?? configuration.maxConnectionsPerAddress
        })

    static let maxBlobs = ServerSetting(
        "max-blobs", .number, "Files (attachments) one user may hold; 0 for no limit",
        default: standard { $0.maxBlobs ?? 0 },
        apply: { settings, configuration in
            if let value = try settings.int("max-blobs", "a number >= 0 (0: no limit)", { $0 >= 0 }) {
                configuration.maxBlobs = value == 0 ? nil : value
            }
        })

    static let quotaBytes = ServerSetting(
        "quota-bytes", .number, "Bytes of records one user may store; 0 for no limit",
        default: standard { Int($0.quota.bytes ?? 0) } + " (1 GiB)",
        apply: { settings, configuration in
            if let value = try settings.int("quota-bytes", "a number of bytes >= 0 (0: no limit)", { $0 >= 0 }) {
                configuration.quota.bytes = value == 0 ? nil : Int64(value)
            }
        })

    static let quotaRecords = ServerSetting(
        "quota-records", .number, "Records one user may store; 0 for no limit",
        default: standard { Int($0.quota.records ?? 0) },
        apply: { settings, configuration in
            if let value = try settings.int("quota-records", "a number >= 0 (0: no limit)", { $0 >= 0 }) {
                configuration.quota.records = value == 0 ? nil : Int64(value)
            }
        })

    static let maxImportBytes = ServerSetting(
        "max-import-bytes", .number, "The largest export the web app may upload to import, in bytes",
        default: standard(\.maxImportBytes) + " (256 MiB)",
        apply: { settings, configuration in
            configuration.maxImportBytes =
                try settings.int("max-import-bytes", "a number of bytes >= 1", { $0 >= 1 })
                ?? configuration.maxImportBytes
        })

    static let maxBlobBytes = ServerSetting(
        "max-blob-bytes", .number, "The largest attachment a user may upload, in bytes",
        default: standard(\.maxBlobBytes) + " (25 MiB)",
        apply: { settings, configuration in
            configuration.maxBlobBytes =
                try settings.int("max-blob-bytes", "a number of bytes >= 1", { $0 >= 1 }) ?? configuration.maxBlobBytes
        })

    static let blobRetentionHours = ServerSetting(
        "blob-retention-hours", .number,
        "Hours an attachment no note references is kept after its upload, and an unfinished upload after its last write",
        default: standard { Int($0.blobRetention.components.seconds / 3600) },
        apply: { settings, configuration in
            if let value = try settings.int(
                "blob-retention-hours", "a number of hours from 1 to 87600", { (1...87_600).contains($0) })
            {
                configuration.blobRetention = .seconds(value * 3600)
            }
        })

    static let historyDays = ServerSetting(
        "history-days", .number,
        "Days a note's revision history reaches back (every save for 10 minutes, then one per 10 minutes of the last day, per hour of the last week, per day after); 0 keeps every revision",
        default: standard { $0.history.days },
        apply: { settings, configuration in
            if let value = try settings.int(
                "history-days", "a number of days from 0 (keep everything) to 36500", { (0...36_500).contains($0) })
            {
                configuration.history = HistoryPolicy(days: value)
            }
        })

    /// Read by `Serve` itself: loading the schema documents can refuse to start (exit 2).
    static let collections = ServerSetting(
        "collections", .text,
        "Folder of collection schema documents (*.json, docs/collections.md) served besides notes")

    /// Those of the store, which the operators' commands read too (`StoreOptions`).
    static let store = [data, database, accessTokenLifetime]

    /// Every setting, in the order `Serve` applies them.
    static let all =
        [host, port] + store + [
            allowedOrigins, noRegistration, issuer, logLevel, webRoot, oauthClients, trustedIssuers,
            authAttemptsPerMinute, maxPushesPerSecond, heartbeatSeconds, maxSessionsPerUser, maxConnections,
            maxConnectionsPerAddress, maxBlobs, quotaBytes, quotaRecords, maxImportBytes, maxBlobBytes,
            blobRetentionHours, historyDays, trustedProxies, metricsToken, collections,
        ]

    /// The settings a parsed command's options give, by setting name: each option whose
    /// property is a setting's `property` (options left out are not given). An option of no
    /// setting (a property named otherwise) is a mistake in this program: it stops here rather
    /// than take a flag and do nothing with it.
    static func given(in command: Any) -> [String: ConfigContent] {
        var flags: [String: ConfigContent] = [:]
        for child in Mirror(reflecting: command).children {
            guard let label = child.label, label.hasPrefix("_"), label != "_config",
                !(child.value is OptionGroup<StoreOptions>)
            else { continue }
            guard let setting = all.first(where: { $0.property == label.dropFirst() }) else {
                preconditionFailure("the option \(label.dropFirst()) is no setting of ServerSetting.all")
            }
            flags[setting.name] = content(of: child.value)
        }
        return flags
    }

    /// What an option's value says: nil when the flag was not given.
    private static func content(of option: Any) -> ConfigContent? {
        switch option {
        case let option as Option<String?>: option.wrappedValue.map(ConfigContent.string)
        case let option as Option<Int?>: option.wrappedValue.map(ConfigContent.int)
        case let option as Option<Int64?>: option.wrappedValue.map { .int(Int($0)) }
        case let option as Option<[String]>: option.wrappedValue.isEmpty ? nil : .stringArray(option.wrappedValue)
        case let flag as Flag<Bool>: flag.wrappedValue ? .bool(true) : nil
        default: preconditionFailure("an option of a type ServerSetting does not read: \(type(of: option))")
        }
    }
}
