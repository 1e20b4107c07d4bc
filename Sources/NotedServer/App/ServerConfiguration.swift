import Foundation
import NotedCore

/// Where the server keeps its data.
public enum DatabaseLocation: Sendable, Hashable {
    /// An SQLite file.
    case sqlite(path: String)
    /// A PostgreSQL database, `postgres://USER@HOST:PORT/DB`.
    case postgres(url: String)

    /// Parses `sqlite:PATH` or `postgres://…`.
    public init?(argument: String) {
        if argument.hasPrefix("sqlite:") {
            let path = String(argument.dropFirst("sqlite:".count))
            guard !path.isEmpty else { return nil }
            self = .sqlite(path: path)
        } else if argument.hasPrefix("postgres://") || argument.hasPrefix("postgresql://") {
            self = .postgres(url: argument)
        } else {
            return nil
        }
    }
}

/// Everything that configures a server; the defaults need nothing installed.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port.
    public var port = 8080
    /// Holds the SQLite database unless `database` says otherwise.
    public var dataDirectory = "./.noted-server"
    /// Nil: SQLite at `<dataDirectory>/noted.sqlite`.
    public var database: DatabaseLocation?
    /// Browser origins allowed to open the sync WebSocket besides the server's own.
    public var allowedOrigins: [String] = []
    public var registrationOpen = true
    public var accessTokenLifetime: Duration = .seconds(15 * 60)
    public var refreshTokenLifetime: Duration = .seconds(60 * 60 * 24 * 60)
    /// The longest a sign-in lasts, however often its refresh token is used (an absolute
    /// lifetime for the refresh-token family).
    public var signInLifetime: Duration = .seconds(60 * 60 * 24 * 90)
    /// `iss` of access tokens; nil: the listening URL.
    public var issuer: String?
    public var audience = "noted"
    public var limits = Limits()
    /// Which revisions the server keeps, by time (`--history-days`; docs/protocol.md, "History").
    public var history = HistoryPolicy(days: 90)
    /// How often the history service looks for histories due to be compacted and thinned.
    public var historyInterval: Duration = .seconds(2)
    /// Conflict revisions a record keeps at most (a bound against an account making conflicts
    /// on purpose; far beyond what editing makes).
    public var conflictRevisionsKept = 1000
    public var tombstoneRetention: Duration = .seconds(60 * 60 * 24 * 90)
    public var appliedChangeRetention: Duration = .seconds(60 * 60 * 24 * 30)
    public var sweepInterval: Duration = .seconds(60 * 60)
    public var helloTimeout: Duration = .seconds(15)
    /// How often every sync connection is sent a heartbeat (``SessionDeadlines``).
    public var heartbeatInterval: Duration = .seconds(30)
    /// Errors in one minute after which a session is closed with 1008.
    public var maxErrorsPerMinute = 20
    /// Push messages per second and session; more are rejected `rate_limited`.
    public var maxPushesPerSecond = 20
    /// Authenticated sync connections of one user on one node; a `hello` beyond is refused
    /// (`rate_limited`, close 4029).
    public var maxSessionsPerUser = 50
    /// Open TCP connections (HTTP and WebSocket) of the whole node; a connection beyond is
    /// answered 503 and closed at once (docs/security.md).
    public var maxConnections = 16_384
    /// Open connections from one address (IPv4, or an IPv6 /64) of the node; a trusted proxy's
    /// are not counted here (its clients are for it to limit: `limit_conn`, docs/deploy.md).
    public var maxConnectionsPerAddress = 256
    /// Files (blobs) one user may hold, stored or being uploaded; nil: no limit.
    public var maxBlobs: Int? = 100_000
    /// What one user may store (`--quota-bytes`, `--quota-records`).
    public var quota = StorageQuota.standard
    /// Bytes a session may have waiting to be sent (a client not reading what it asked for);
    /// beyond, the session is closed with 1008.
    public var maxQueuedBytesPerSession = 16 << 20
    /// A bearer token that lets `/metrics` be read from other machines; without it, only
    /// loopback may read it.
    public var metricsToken: String?
    /// Reverse proxies whose `X-Forwarded-For` is believed, for the sign-in limits.
    public var trustedProxies: [ClientAddresses.Range] = []
    /// Sign-in and registration attempts per address or username and window.
    public var authAttemptsPerWindow = 10
    public var authWindow: Duration = .seconds(60)
    /// Third-party OAuth clients, besides the built-in `noted-cli` and `noted-web`.
    public var oauthClients: [OAuthClient] = []
    /// External OpenID issuers whose access tokens the sync API accepts.
    public var trustedIssuers: [TrustedIssuer] = []
    /// How long an authorization code may wait for its exchange.
    public var authorizationCodeLifetime: Duration = .seconds(60)
    /// The web app's folder; nil: `Web` in the working directory or in the source checkout.
    public var webRoot: String?
    /// The collections served: the built-in `notes` and those of `--collections`.
    public var schemas = SchemaRegistry.v1
    /// bcrypt cost of new password hashes.
    public var bcryptCost: UInt8 = 12
    /// The largest export the web app may upload to import (`POST /v1/import`), in bytes.
    public var maxImportBytes = 256 * 1024 * 1024
    /// The largest attachment (`PUT /v1/blobs/{sha256}`), in bytes: 25 MiB.
    public var maxBlobBytes = 25 * 1024 * 1024
    /// How long a blob no record or kept revision references is kept after its upload, and an
    /// upload not written to is kept (docs/protocol.md, "Attachments").
    public var blobRetention: Duration = .seconds(60 * 60 * 24)

    /// The time and the timers (``ServerClock``): the system's unless a test gives its own.
    public var clock = ServerClock.system

    public init() {}

    var databaseLocation: DatabaseLocation {
        database ?? .sqlite(path: (dataDirectory as NSString).appendingPathComponent("noted.sqlite"))
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
