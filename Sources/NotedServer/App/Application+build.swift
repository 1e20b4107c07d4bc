import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOPosix
import NotedCore
import ServiceLifecycle

/// Builds the whole server from its configuration: store, tokens, routes, services.
///
/// ```swift
/// let app = try await buildApplication(configuration) { host, port in print("listening on \(port)") }
/// try await app.runService()
/// ```
public func buildApplication(
    _ configuration: ServerConfiguration,
    sessions: SyncSessions = SyncSessions(),
    logger: Logger = Logger(label: "noted-server"),
    onListening: @escaping @Sendable (_ host: String, _ port: Int) async -> Void = { _, _ in }
) async throws -> some ApplicationProtocol {
    let store = try await openStore(configuration, logger: logger)
    do {
        try await configuration.schemas.serve(on: store)
    } catch {
        await store.shutdown()
        throw error
    }
    let issuer = configuration.issuer ?? "http://\(configuration.host):\(configuration.port)"
    var tokens = try await AccessTokens.load(
        store: store, issuer: issuer, audience: configuration.audience, lifetime: configuration.accessTokenLifetime)
    tokens.clock = configuration.clock
    if !configuration.trustedIssuers.isEmpty {
        guard !configuration.trustedIssuers.contains(where: { $0.issuer == issuer }) else {
            throw TrustedIssuer.ParseError("a trusted issuer cannot be this server's own issuer \(issuer)")
        }
        tokens.external = ExternalIssuers(configuration.trustedIssuers, store: store, logger: logger)
    }
    PasswordRules.load()
    let passwords = PasswordHasher(cost: configuration.bcryptCost)
    let dummyHash = try await passwords.hash("not a password")
    var accounts = Accounts(
        store: store, tokens: tokens, registrationOpen: configuration.registrationOpen, passwords: passwords,
        refreshLifetime: configuration.refreshTokenLifetime.timeInterval,
        limiter: RateLimiter(
            limit: configuration.authAttemptsPerWindow, window: configuration.authWindow.timeInterval, backoff: true),
        dummyHash: dummyHash)
    accounts.familyLifetime = configuration.signInLifetime.timeInterval
    accounts.addresses = ClientAddresses(trustedProxies: configuration.trustedProxies)
    let metrics = ServerMetrics()
    let hub = sessions.hub
    // Revoked sign-in sessions: their access tokens are refused and their connections closed,
    // here at once and on other nodes when they hear of it (RemoteFanout).
    tokens.revoked.onRevoke { hub.closeRevoked(signInSession: $0) }
    for family in try await store.revokedFamilies(
        since: configuration.clock.now().addingTimeInterval(-tokens.revoked.keep))
    {
        tokens.revoked.insert(family)
    }
    var sync = SyncService(
        store: store, parser: ChangeParser(schemas: configuration.schemas, limits: configuration.limits), hub: hub,
        metrics: metrics)
    sync.clock = configuration.clock.now
    var spaces = Spaces(store: store, clock: configuration.clock)
    spaces.membershipChanged = { [sync] users in
        await sync.membershipChanged(users: users)
        for user in users { try? await store.announceMembership(userID: user) }
    }
    accounts.beforeDeletion = { [spaces] in try await spaces.release(userID: $0) }
    let clients = OAuthClients(
        [.cli, .web(origins: [issuer] + configuration.allowedOrigins)] + configuration.oauthClients)
    let authorization = AuthorizationServer(
        clients: clients, accounts: accounts, store: store,
        codeLifetime: configuration.authorizationCodeLifetime.timeInterval)
    let routes = Routes(
        configuration: configuration, sync: sync, store: store, accounts: accounts, tokens: tokens, metrics: metrics,
        authorization: authorization, spaces: spaces)

    let router = Router(context: NotedRequestContext.self)
    router.middlewares.add(LogRequestsMiddleware(.debug))
    routes.add(to: router)
    OAuthRoutes(server: authorization).add(to: router)
    if let webRoot = WebApp.root(configured: configuration.webRoot) {
        WebApp.add(to: router, root: webRoot, logger: logger)
    } else {
        logger.warning("web app folder not found: the web app is not served (set --web-root)")
    }
    let webSocketRouter = Router(context: NotedRequestContext.self)
    routes.addWebSocket(to: webSocketRouter)

    let webSocketResponder = webSocketRouter.buildResponder()
    let webSocket = WebSocketServerConfiguration(
        maxFrameSize: configuration.limits.maxMessageBytes,
        // permessage-deflate for every message from 24 bytes, small ones through a small
        // compressor kept for the session (1 KiB window, memory level 4: about 27 KB of an idle
        // connection), large ones (pages) each through a compressor of its own with a 32 KiB
        // window (PerMessageDeflate.swift).
        extensions: [
            .perMessageDeflate(
                PerMessageDeflateBuilder(
                    maxDecompressedFrameSize: configuration.limits.maxMessageBytes,
                    quietStreams: QuietStreams(clock: configuration.clock)))
        ],
        // Heartbeats come from one task for every connection (SessionDeadlines), not a task each.
        autoPing: .disabled,
        validateUTF8: true)
    let connections = ConnectionLimit(
        maximum: configuration.maxConnections, perAddress: configuration.maxConnectionsPerAddress)
    return Application(
        router: router,
        server: HTTPServerBuilder { responder in
            OriginGuardedChannel(
                base: HTTP1WebSocketUpgradeChannel(
                    responder: responder, webSocketResponder: webSocketResponder,
                    // An HTTP connection idle between requests is closed after a minute.
                    configuration: .init(http1: .init(idleTimeout: .seconds(60)), ws: webSocket)),
                policy: OriginPolicy(allowedOrigins: configuration.allowedOrigins), path: "/v1/sync",
                connections: connections, addresses: ClientAddresses(trustedProxies: configuration.trustedProxies))
        },
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
        services: [
            StoreService(store: store),
            SweepService(store: store, configuration: configuration, logger: logger),
            HistoryService(
                store: store, policy: configuration.history, interval: configuration.historyInterval,
                clock: configuration.clock, logger: logger),
            RemoteFanout(sync: sync, store: store, revoked: tokens.revoked, logger: logger),
            KeyReloadService(tokens: tokens, store: store, logger: logger),
        ],
        onServerRunning: { channel in
            await onListening(configuration.host, channel.localAddress?.port ?? configuration.port)
        },
        logger: logger)
}

func openStore(_ configuration: ServerConfiguration, logger: Logger) async throws -> any NotedStore {
    let store: any NotedStore
    switch configuration.databaseLocation {
    case .sqlite(let path):
        let directory = (path as NSString).deletingLastPathComponent
        try DataDirectory.secure(directory: directory.isEmpty ? "." : directory, database: path, logger: logger)
        store = try SQLiteStore(
            path: path, schemas: configuration.schemas, limits: configuration.limits,
            conflictRevisionsKept: configuration.conflictRevisionsKept,
            quota: configuration.quota)
    case .postgres(let url):
        store = try PostgresStore(
            url: url, schemas: configuration.schemas, limits: configuration.limits,
            conflictRevisionsKept: configuration.conflictRevisionsKept,
            quota: configuration.quota, logger: logger)
    }
    do {
        try await store.migrate()
    } catch {
        await store.shutdown()
        throw error
    }
    return store
}

/// `noted-server keys rotate`: adds a new signing key and drops retired ones, in the configured
/// database. Running servers sign with the new key within `AccessTokens.reloadInterval`.
/// - Returns: the new `kid`, the dropped ones, and every `kid` the JWKS now lists.
public func rotateSigningKeys(_ configuration: ServerConfiguration, logger: Logger) async throws
    -> (kid: String, dropped: [String], listed: [String])
{
    let store = try await openStore(configuration, logger: logger)
    do {
        let (kid, dropped) = try await AccessTokens.rotate(store: store, lifetime: configuration.accessTokenLifetime)
        let listed = try await store.signingKeys().map(\.kid)
        await store.shutdown()
        return (kid, dropped, listed)
    } catch {
        await store.shutdown()
        throw error
    }
}

/// Rereads the signing keys now and then, so that a rotation reaches every running node.
struct KeyReloadService: Service {
    let tokens: AccessTokens
    let store: any SigningKeyStore
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await tokens.clock.sleep(AccessTokens.reloadInterval) }
            guard !Task.isShuttingDownGracefully && !Task.isCancelled else { return }
            do {
                try await tokens.reload(store: store)
            } catch {
                logger.error("cannot reload the signing keys", metadata: ["error": .string(String(describing: error))])
            }
        }
    }
}

/// Closes the store's connections when the application stops.
struct StoreService: Service {
    let store: any NotedStore

    func run() async throws {
        try? await gracefulShutdown()
        await store.shutdown()
    }
}

/// The sync sessions of one application, for the executable to close them first on shutdown.
///
/// Run ``closeOnShutdown`` after the application in one `ServiceGroup`: graceful shutdown reaches
/// the last service first, so every session is closed with 1001 (going away) before the HTTP
/// server stops, and in-flight pushes finish their commits.
///
/// ```swift
/// let sessions = SyncSessions()
/// let app = try await buildApplication(configuration, sessions: sessions)
/// try await ServiceGroup(configuration: .init(services: [app, sessions.closeOnShutdown],
///                                             gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)).run()
/// ```
public struct SyncSessions: Sendable {
    let hub = SessionHub()

    public init() {}

    /// A service that, when shutdown begins, closes every session with 1001 and waits (at most
    /// `timeout`) until they have ended; the connections of sessions still open then are
    /// closed without the close handshake.
    public func closeOnShutdown(timeout: Duration = .seconds(5)) -> some Service {
        SessionCloser(hub: hub, timeout: timeout)
    }
}

struct SessionCloser: Service {
    let hub: SessionHub
    let timeout: Duration

    func run() async throws {
        try? await gracefulShutdown()
        hub.closeAll()
        let deadline = ContinuousClock.now + timeout
        while hub.connectionCount > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // A client that reads nothing keeps its close unread, and its session open for ever:
        // past the timeout its connection is closed without the handshake (and so is that of a
        // session that starts from now on).
        hub.dropAll()
    }
}

/// Forwards changes committed on other server nodes to this node's sessions of the same user.
///
/// A notification says only "user U committed seq S"; the node reads that record and sends it
/// as a `change` whose ops `set` every field (exact for a client at `prevRev`; any other client
/// pulls, as for every `change`). Per user with sessions here, the hub keeps the highest `seq`
/// accounted for; when listening restarts after an outage, or a notification skips ahead,
/// every record committed since that mark is sent, so a lost notification never means a
/// missed change (at worst a client hears of a record twice and pulls).
struct RemoteFanout: Service {
    let sync: SyncService
    let store: any RecordStore & AccountStore & OAuthStore
    let revoked: RevokedSessions
    let logger: Logger

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            try await store.listenForCommits(onListening: { await catchUp() }) { notice in
                await deliver(notice)
            }
        }
    }

    func deliver(_ notice: CommitNotice) async {
        if let family = notice.revokedFamily {
            revoked.insert(family)
            return
        }
        if let user = notice.deletedUser {
            sync.hub.closeUser(user, reason: SessionHub.accountDeleted)
            return
        }
        if let user = notice.disabledUser {
            sync.hub.closeUser(user, reason: SessionHub.accountDisabled)
            return
        }
        if let user = notice.membershipUser {
            if !notice.fromThisNode { await sync.membershipChanged(users: [user]) }
            return
        }
        // A user's personal space, or a shared space followed here.
        let previous: Int64
        let space: Bool
        if let mark = sync.hub.advanceSeenSeq(user: notice.userID, to: notice.seq) {
            (previous, space) = (mark, false)
        } else if let mark = sync.hub.advanceSeenSeq(space: notice.userID, to: notice.seq) {
            (previous, space) = (mark, true)
        } else {
            return
        }
        guard previous < notice.seq else { return }
        // The usual case: the next commit, made here, so this node's sessions already have it.
        if notice.fromThisNode && previous == notice.seq - 1 { return }
        await send(user: notice.userID, after: previous, upTo: notice.seq, space: space)
    }

    /// After (re)connecting: everything committed since each user's mark.
    func catchUp() async {
        // Sign-in sessions revoked on other nodes while this one was not listening.
        if let families = try? await store.revokedFamilies(
            since: sync.clock().addingTimeInterval(-revoked.keep))
        {
            for family in families { revoked.insert(family) }
        }
        for (user, seen) in sync.hub.seenSeqs() {
            // An account deleted on another node meanwhile: its connections here end too.
            do {
                switch try await store.user(id: user) {
                case nil:
                    sync.hub.closeUser(user, reason: SessionHub.accountDeleted)
                    continue
                case let account? where account.disabled:
                    sync.hub.closeUser(user, reason: SessionHub.accountDisabled)
                    continue
                default:
                    break
                }
            } catch {
                // Unknown for now: the next catch-up looks again.
            }
            guard let latest = try? await store.latestSeq(userID: user), latest > seen else { continue }
            _ = sync.hub.advanceSeenSeq(user: user, to: latest)
            logger.info(
                "catching up after listening restarted",
                metadata: ["user": .string(user), "from": "\(seen)", "to": "\(latest)"])
            await send(user: user, after: seen, upTo: latest)
        }
        // Membership changed on other nodes while this one was not listening (a session whose
        // hello is between reading its spaces and following them reads them again).
        sync.hub.bumpEveryMembership()
        await sync.membershipChanged(users: sync.hub.followingUsers())
        for (space, seen) in sync.hub.seenSpaceSeqs() {
            guard let latest = try? await store.latestSeq(userID: space), latest > seen else { continue }
            _ = sync.hub.advanceSeenSeq(space: space, to: latest)
            await send(user: space, after: seen, upTo: latest, space: true)
        }
    }

    /// Sends the user's records whose current `seq` lies in `(after, upTo]`; a record changed
    /// again since then is left to the notification of that later commit.
    private func send(user: String, after: Int64, upTo: Int64, space: Bool = false) async {
        var since = after
        while since < upTo {
            let page: ChangesPage
            do {
                page = try await store.changes(userID: user, since: since, limit: 500)
            } catch {
                logger.warning(
                    "could not read changes for fan-out", metadata: ["error": .string(String(describing: error))])
                return
            }
            for record in page.records where record.seq <= upTo {
                if space {
                    sync.hub.publish(
                        space: user, message: SyncService.change(Broadcast(record: record), space: user), except: nil)
                } else {
                    sync.hub.publish(user: user, message: Self.change(record), except: nil)
                }
            }
            guard page.more, page.cursor > since else { return }
            since = page.cursor
        }
    }

    static func change(_ record: Record) -> JSONValue {
        ServerMessage.change(Broadcast(record: record)).json
    }
}

/// Removes tombstones and `ccid` results past their retention, periodically.
struct SweepService: Service {
    let store: any HousekeepingStore & BlobStore
    let configuration: ServerConfiguration
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let now = configuration.clock.now()
            do {
                try await store.sweep(
                    tombstonesBefore: now.addingTimeInterval(-configuration.tombstoneRetention.timeInterval),
                    appliedChangesBefore: now.addingTimeInterval(-configuration.appliedChangeRetention.timeInterval))
            } catch {
                logger.error("sweep failed", metadata: ["error": .string(String(describing: error))])
            }
            do {
                let retention = configuration.blobRetention.timeInterval
                let collected = try await store.collectBlobs(
                    storedBefore: now.addingTimeInterval(-retention), uploadsBefore: now.addingTimeInterval(-retention))
                if collected != BlobCollection() {
                    logger.info(
                        "collected unreferenced attachments",
                        metadata: [
                            "blobs": "\(collected.blobs)", "bytes": "\(collected.bytes)",
                            "uploads": "\(collected.uploads)",
                        ])
                }
            } catch {
                logger.error("collecting attachments failed", metadata: ["error": .string(String(describing: error))])
            }
            try? await cancelWhenGracefulShutdown { try await configuration.clock.sleep(configuration.sweepInterval) }
        }
    }
}

/// Compacts and thins revision histories (``HistoryPolicy``): every few seconds, the records
/// whose history is due, decided outside the writer and written a batch of records per
/// transaction (one commit for many records; the writer held for their statements only; on
/// several nodes, one node per record at a time).
struct HistoryService: Service {
    let store: any HousekeepingStore
    let policy: HistoryPolicy
    let interval: Duration
    let clock: ServerClock
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            var more = false
            do {
                let done = try await store.thinHistory(now: clock.now(), policy: policy, limit: 100)
                more = done.records + done.retried >= 100
                if let failure = done.lastFailure {
                    logger.error(
                        "a record's revision history could not be thinned; set aside for a day",
                        metadata: [
                            "records": "\(done.failed)", "last": .string(failure),
                        ])
                }
                if done.deleted > 0 {
                    logger.debug(
                        "thinned revision histories",
                        metadata: [
                            "records": "\(done.records)", "deleted": "\(done.deleted)",
                            "rewritten": "\(done.rewritten)",
                        ])
                }
            } catch {
                logger.error(
                    "thinning revision histories failed", metadata: ["error": .string(String(describing: error))])
            }
            if !more {
                try? await cancelWhenGracefulShutdown { try await clock.sleep(interval) }
            }
        }
    }
}
