import Foundation
import Logging
import NIOConcurrencyHelpers
import NotedCore
import TestSupport
import Testing

@testable import NotedClient
@testable import NotedServer

/// A virtual instant: the simulation's clock only moves when a step says so.
struct SimInstant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> SimInstant { SimInstant(offset: offset + duration) }
    func duration(to other: SimInstant) -> Duration { other.offset - offset }
    static func < (a: SimInstant, b: SimInstant) -> Bool { a.offset < b.offset }
}

/// The simulation's draws, from the project's one seeded generator.
typealias SimRandom = SplitMix64

extension SplitMix64 {
    init(state: UInt64) { self.init(seed: state) }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    /// A lower-case UUID string drawn from the generator (ids must be UUIDs on the wire).
    mutating func uuid() -> String {
        let hex = String(format: "%016llx%016llx", next(), next())
        let c = Array(hex)
        return
            "\(String(c[0..<8]))-\(String(c[8..<12]))-4\(String(c[13..<16]))-a\(String(c[17..<20]))-\(String(c[20..<32]))"
    }
}

struct SimFailure: Error, CustomStringConvertible {
    var description: String

    /// The failure with numbers and ids taken out: which check failed, for shrinking.
    var kind: String {
        description.replacing(/[0-9a-f]{8}-[0-9a-f-]{27}/, with: "ID").replacing(/[0-9]+/, with: "N")
            .split(separator: " ").prefix(6).joined(separator: " ")
    }
}

/// One step of a run: which client, which kind of step (a roll out of 100), and the seed of
/// every random choice the step makes.
struct SimStep: Sendable, Hashable {
    var client: Int
    var roll: Int
    var seed: UInt64

    /// A run's steps, drawn from its seed.
    static func plan(seed: UInt64, count: Int) -> [SimStep] {
        var random = SimRandom(state: seed ^ 0x5354_4550_5053_494D)
        return (0..<count).map { _ in SimStep(client: random.below(1_000), roll: random.below(100), seed: random.next())
        }
    }
}

/// The world's virtual time, shared by every client's clock.
final class SimTime: Sendable {
    private let value = NIOLockedValueBox(SimInstant(offset: .zero))
    var now: SimInstant {
        get { value.withLockedValue { $0 } }
        set { value.withLockedValue { $0 = newValue } }
    }
}

/// One client's clock on the world's virtual time: the shipped `SyncEngine` sleeps on it, and
/// its sleeps return only when the world wakes them (`wake`), even a sleep whose deadline has
/// already come (for instance a push that fell due while a pull was running). Returning such a sleep
/// at once let the engine's timer fire whenever its task happened to run, possibly after the
/// world had counted the sleeps that returned, and `settle` then waited for good for a count
/// already passed (docs/reliability.md: the stalls of seeds 6286, 9727 and 43). The world
/// wakes it at its next move of time, not whenever its task gets to run. The clock counts the
/// sleeps it has seen begin and those it let return, so the world knows when the engine has
/// settled.
final class SimClock: Clock, Sendable {
    typealias Instant = SimInstant
    private struct State {
        var sleepers: [Int: (deadline: SimInstant, continuation: CheckedContinuation<Void, any Error>)] = [:]
        var nextID = 0
        var sleeps = 0
        var returns = 0
        var sleepWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    let time: SimTime
    private let state = NIOLockedValueBox(State())

    init(time: SimTime) { self.time = time }

    var now: SimInstant { time.now }
    var minimumResolution: Duration { .zero }

    /// Sleeps begun, and sleeps that returned (not cancelled); `returns` changes only in `wake`.
    var counts: (sleeps: Int, returns: Int) { state.withLockedValue { ($0.sleeps, $0.returns) } }

    func sleep(until deadline: SimInstant, tolerance: Duration?) async throws {
        let id = state.withLockedValue { state in
            state.nextID += 1
            return state.nextID
        }
        if deadline <= time.now { SimStats.pastDeadlineSleeps.withLockedValue { $0 += 1 } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Counted and registered at once: a world that sees the sleep begun can wake it.
                let (cancelled, ready) = state.withLockedValue { state in
                    state.sleeps += 1
                    let cancelled = Task.isCancelled
                    if !cancelled { state.sleepers[id] = (deadline, continuation) }
                    let sleeps = state.sleeps
                    defer { state.sleepWaiters.removeAll { $0.count <= sleeps } }
                    return (cancelled, state.sleepWaiters.filter { $0.count <= sleeps }.map(\.continuation))
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
                for waiter in ready { waiter.resume() }
            }
        } onCancel: {
            let sleeper = state.withLockedValue { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Waits until `count` sleeps have begun.
    func sleepsBegun(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLockedValue { state in
                if state.sleeps >= count { return true }
                state.sleepWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Lets every sleep whose deadline has come return, earliest first; how many did.
    func wake() -> Int {
        let now = time.now
        let due = state.withLockedValue { state in
            let due = state.sleepers.filter { $0.value.deadline <= now }.sorted {
                ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
            }
            for (id, _) in due { state.sleepers[id] = nil }
            state.returns += due.count
            return due.map(\.value.continuation)
        }
        for continuation in due { continuation.resume() }
        return due.count
    }
}

/// The client end of one simulated connection, as the shipped engine sees it through
/// `SyncTransport`: what the engine sends queues in `up` until the world delivers it to the
/// server; what the world delivers comes out of `messages`.
final class SimConnection: SyncConnection, Sendable {
    let messages: AsyncStream<JSONValue>
    private let continuation: AsyncStream<JSONValue>.Continuation
    private let state = NIOLockedValueBox<(up: [JSONValue], closed: Bool)>(([], false))
    /// The server side's clean-up when either end closes.
    private let onClose: @Sendable () -> Void

    init(onClose: @escaping @Sendable () -> Void) {
        (messages, continuation) = AsyncStream.makeStream(of: JSONValue.self)
        self.onClose = onClose
    }

    var up: [JSONValue] {
        get { state.withLockedValue { $0.up } }
        set { state.withLockedValue { $0.up = newValue } }
    }

    var isClosed: Bool { state.withLockedValue { $0.closed } }

    func send(_ message: JSONValue) async throws {
        try state.withLockedValue { state in
            guard !state.closed else { throw SimFailure(description: "send on a closed connection") }
            state.up.append(message)
        }
    }

    func close() async {
        _ = closeNow()
    }

    /// Closes the connection; true if it was open.
    func closeNow() -> Bool {
        let wasOpen = state.withLockedValue { state in
            defer { state.closed = true }
            return !state.closed
        }
        if wasOpen {
            continuation.finish()
            onClose()
        }
        return wasOpen
    }

    /// Hands the engine one message from the server.
    func deliver(_ message: JSONValue) {
        continuation.yield(message)
    }
}

/// One simulated connection, both ends: the client's `SimConnection`, and the server end, a
/// real `SyncSession` (hello, token verification, welcome, pull, push, reauth) fed message by
/// message; what it sends (replies, broadcasts, a close) comes out of its stream into `down`.
final class SimLink {
    let session: SyncSession
    let connection: SimConnection
    var state = SyncSession.State()
    let shared: NIOLockedValueBox<SyncSession.Shared>
    var down: [JSONValue] = []
    var dropNextAck = false
    /// The server closed the session: the client sees the connection drop once `down` is read.
    var closedByServer = false
    let stream: AsyncStream<Outgoing>
    /// The session's outgoing queue, unbounded here: the world reads it after every step.
    let continuation: Outbox
    var iterator: AsyncStream<Outgoing>.Iterator

    init(session: SyncSession, hub: SessionHub) {
        self.session = session
        let shared = NIOLockedValueBox(SyncSession.Shared(deadline: .distantFuture, deadlineCode: .unauthenticated))
        self.shared = shared
        let (stream, raw) = AsyncStream.makeStream(of: Outgoing.self)
        self.stream = stream
        continuation = Outbox(raw)
        iterator = stream.makeAsyncIterator()
        let sessionID = session.id
        let deadlines = session.environment.deadlines
        // The session's deadline is watched on the wall clock; the simulation injects expiry itself.
        connection = SimConnection {
            deadlines.unwatch(sessionID)
            hub.leave(session: sessionID)
        }
    }

    var up: [JSONValue] {
        get { connection.up }
        set { connection.up = newValue }
    }
}

/// Opens connections for one client's engine: to the world's current server, unless the
/// client is offline or the server is down.
struct SimTransport: SyncTransport {
    let world: WorldReference
    let client: Int

    func connect(to url: URL) async throws -> any SyncConnection {
        try world.value.openLink(for: world.value.clients[client])
    }
}

/// Real access tokens for one client's user, signed by the world's current server.
struct SimTokens: AccessTokenProvider {
    let world: WorldReference
    let client: Int

    func accessToken() async throws -> String {
        try await world.value.token(for: world.value.clients[client])
    }

    func refreshedAccessToken() async throws -> String {
        try await accessToken()
    }
}

/// The world, handed to the engines' transports and token providers.
///
/// `@unchecked Sendable` because the world is only ever touched by one task at a time: the
/// run's own task drives it, and while it waits for a client's engine to settle (the only time
/// an engine runs) that engine alone calls back into it, from one chain of work.
final class WorldReference: @unchecked Sendable {
    unowned let value: World
    init(_ value: World) { self.value = value }
}

/// A real client: its GRDB store on disk and the shipped `SyncEngine` on a virtual clock.
final class SimClient {
    let name: String
    /// The account signed in now; another user's on a shared device (see `switchAccount`).
    var user: Int
    /// The account this device belongs to.
    let homeUser: Int
    let index: Int
    let path: String
    var store: LocalStore
    var clock: SimClock
    var engine: SyncEngine<SimClock>
    var currentLink: SimLink?
    var online = true
    var lastRev: [String: Int64] = [:]
    var lastCursor: Int64 = 0
    /// The last cursor seen in each account's database on this device.
    var cursors: [Int: Int64] = [:]
    /// Signed out: no engine runs; the database stays (the user works offline, or signs in again).
    var signedOut = false
    /// The session was lost (`invalid_grant`): every token request fails until the user signs in again.
    var sessionLost = false
    var device: String
    /// The next access token this client gets is already expired (the token-expiry step).
    var expiredToken = false
    /// What the world has caused this engine to handle (see `SyncEngine.settled`).
    var delivered = 0
    var drops = 0

    /// The open connection, if any.
    var link: SimLink? {
        guard let link = currentLink, !link.connection.isClosed else { return nil }
        return link
    }

    init(name: String, user: Int, index: Int, path: String, seed: UInt64, world: World) throws {
        self.name = name
        self.user = user
        self.homeUser = user
        self.index = index
        self.path = path
        var random = SimRandom(state: seed)
        device = random.uuid()
        try SimulationTemplates.client(at: path)
        store = try LocalStore.open(path: path, collections: [World.clientJournal])
        clock = SimClock(time: world.time)
        engine = SimClient.engine(store: store, clock: clock, world: world, index: index, seed: seed)
    }

    static func engine(store: LocalStore, clock: SimClock, world: World, index: Int, seed: UInt64) -> SyncEngine<
        SimClock
    > {
        let reference = WorldReference(world)
        return SyncEngine(
            store: store, transport: SimTransport(world: reference, client: index),
            url: URL(string: "ws://sim.noted.invalid/v1/sync")!,
            tokens: SimTokens(world: reference, client: index), events: EventHub(), configuration: configuration,
            clock: clock, seed: seed)
    }

    static var configuration: SyncStateMachine<SimInstant>.Configuration {
        var c = SyncStateMachine<SimInstant>.Configuration()
        c.debounce = .milliseconds(100)
        c.pullLimit = 7
        return c
    }
}

/// What the runs of one process did, for the summary line: the history steps are seen to thin,
/// and to make clients meet `base_unavailable`.
enum SimStats {
    static let thinnedRevisions = NIOLockedValueBox(0)
    static let baseUnavailable = NIOLockedValueBox(0)
    /// Sleeps asked for with their deadline already come (see `SimClock`): the path is exercised.
    static let pastDeadlineSleeps = NIOLockedValueBox(0)
    /// The runs under way, by seed: when each started and where it is (step, last trace line), so
    /// a run that never ends can be named while it hangs (`SimulationTests.seededRuns` prints them).
    static let running = NIOLockedValueBox([UInt64: (started: ContinuousClock.Instant, at: String)]())
}

struct RevisionKey: Hashable {
    var rev: Int64
    var conflict: Bool
}

struct SavedRevision {
    var at: Date
    var fields: [String: JSONValue]
}

/// The whole world of one run: the real server core over a real SQLite file, real clients.
final class World {
    var random: SimRandom
    let directory: String
    let serverPath: String
    var store: SQLiteStore
    var sync: SyncService
    var tokens: AccessTokens
    var serverUp = true
    let time: SimTime
    var now: SimInstant { time.now }
    /// How far the server's clock is ahead of the clients' virtual time: the history steps move
    /// it on by hours and days (the clients' own timers are not concerned).
    let serverAhead: NIOLockedValueBox<TimeInterval>
    /// Every revision the server saved, by record (`collection/id`): what a thinned history is
    /// checked against (``checkHistory()``).
    var savedRevisions: [String: [RevisionKey: SavedRevision]] = [:]
    var clients: [SimClient] = []
    var users: [String] = []
    var nextMarker = 1
    var trace: [String] = []
    /// Markers inserted, by user, and those a local edit removed.
    var inserted: [Int: Set<Int>] = [:]
    var removed: Set<Int> = []
    /// Records whose text a purge or trash may have taken away (trash keeps text; purge removes).
    var purged: Set<String> = []
    var markerRecord: [Int: String] = [:]
    var serverSeq: [String: Int64] = [:]
    /// Quiet: a session logs every sign-in at info level.
    let logger = Logger(label: "sim", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Whether local edits also go to the second collection, `journal`. The regression seeds run
    /// without it, so that each replays the schedule that found its bug.
    let journaling: Bool

    /// The second collection: every field kind, with the bounds and enums the server checks.
    static let journal = try! CollectionSchema(
        json: JSONValue.parse(
            """
            {"name": "journal", "version": 1, "fields": {
              "entry":  {"kind": "text", "searchable": true},
              "labels": {"kind": "set"},
              "mood":   {"kind": "scalar", "types": ["string"], "enum": ["low", "ok", "high"], "default": "ok", "indexed": true},
              "score":  {"kind": "scalar", "types": ["number", "null"], "default": null, "min": 0, "max": 100}}}
            """))

    /// The journal as the clients know it: an app updated before its server, with one more mood
    /// than the server accepts. A change that sets it is refused (`invalid_field`), and must stay
    /// on the device until the user edits it into shape or discards it.
    static let clientJournal = try! CollectionSchema(
        json: JSONValue.parse(
            """
            {"name": "journal", "version": 1, "fields": {
              "entry":  {"kind": "text", "searchable": true},
              "labels": {"kind": "set"},
              "mood":   {"kind": "scalar", "types": ["string"], "enum": ["low", "ok", "high", "ecstatic"], "default": "ok", "indexed": true},
              "score":  {"kind": "scalar", "types": ["number", "null"], "default": null, "min": 0, "max": 100}}}
            """))

    init(seed: UInt64, journaling: Bool = true) async throws {
        self.journaling = journaling
        random = SimRandom(state: seed)
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        directory = base + "/noted-sim-\(seed)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        serverPath = directory + "/server.sqlite"
        let time = SimTime()
        let ahead = NIOLockedValueBox<TimeInterval>(0)
        self.time = time
        serverAhead = ahead
        (store, sync, tokens) = try await World.openServer(
            path: serverPath, clock: World.serverClock(time: time, ahead: ahead))
        let userCount = 2 + random.below(2)
        for u in 0..<userCount {
            let id = "user-\(u)"
            _ = try await store.createUser(
                UserAccount(id: id, username: id, usernameKey: id, passwordHash: "x"),
                now: Date(timeIntervalSince1970: 0))
            users.append(id)
            for c in 0..<(2 + random.below(4)) {
                let name = "u\(u)c\(c)"
                let client = try SimClient(
                    name: name, user: u, index: clients.count, path: directory + "/\(name).sqlite", seed: random.next(),
                    world: self)
                // The device id goes into revisions; a fixed one keeps runs repeatable.
                try await client.store.setMeta("device", client.device)
                clients.append(client)
            }
        }
    }

    /// The server's configuration: the wall-clock rate limits out of reach (they would make
    /// runs depend on real time). Revisions are thinned by the history steps (a short period,
    /// so that `base_unavailable` happens).
    static let configuration: ServerConfiguration = {
        var configuration = ServerConfiguration()
        configuration.history = HistoryPolicy(days: 2)
        configuration.maxPushesPerSecond = 1_000_000
        configuration.maxErrorsPerMinute = 1_000_000
        return configuration
    }()

    static func openServer(path: String, clock: @escaping @Sendable () -> Date) async throws -> (
        SQLiteStore, SyncService, AccessTokens
    ) {
        let limits = configuration.limits
        let schemas = SchemaRegistry([.notes, journal])
        try await SimulationTemplates.server(at: path)
        let store = try SQLiteStore(path: path, schemas: schemas, limits: limits)
        try await store.migrate()
        var sync = SyncService(
            store: store, parser: ChangeParser(schemas: schemas, limits: limits), hub: SessionHub(),
            metrics: ServerMetrics())
        sync.clock = clock
        let tokens = try await AccessTokens.load(
            store: store, issuer: "https://sim.noted.invalid", audience: "noted", lifetime: .seconds(3600))
        return (store, sync, tokens)
    }

    /// The server's time: a fixed start, plus the world's virtual time, plus what history steps added.
    var serverClock: @Sendable () -> Date { World.serverClock(time: time, ahead: serverAhead) }

    static func serverClock(time: SimTime, ahead: NIOLockedValueBox<TimeInterval>) -> @Sendable () -> Date {
        {
            let elapsed = time.now.offset.components
            return Date(
                timeIntervalSince1970: 1_790_000_000 + Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
                    + ahead.withLockedValue { $0 })
        }
    }

    /// A real access token for the client's user, signed with the server's key; already
    /// expired after a token-expiry step.
    func token(for client: SimClient) async throws -> String {
        if client.sessionLost {
            throw NotedClientError(.unauthenticated, "the session is over (invalid_grant): sign in again")
        }
        let expired = client.expiredToken
        client.expiredToken = false
        let now = expired ? Date().addingTimeInterval(-7200) : Date()
        return try await tokens.issue(userID: users[client.user], clientID: "noted-sim", now: now).token
    }

    func cleanUp() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Client side: the shipped engine, driven through its transport and clock

    /// The engine's transport opens a connection: a new link to a real session, unless the
    /// client is offline or the server down.
    func openLink(for client: SimClient) throws -> SimConnection {
        guard client.online, serverUp else { throw SimFailure(description: "connection refused") }
        let session = SyncSession(
            sync: sync, tokens: tokens, configuration: World.configuration, headerToken: nil, logger: logger)
        let link = SimLink(session: session, hub: sync.hub)
        sync.hub.track(session: session.id, continuation: link.continuation)
        client.currentLink = link
        return link.connection
    }

    /// Waits until the client's engine has handled everything the world did to it and sleeps
    /// on its clock with nothing else under way. Only the world lets sleeps return (`wake`), so
    /// what it expects is exact: the engine settles at exactly these counts.
    func settle(_ client: SimClient) async throws {
        let returns = client.clock.counts.returns
        let expected = SyncEngine<SimClock>.Expected(
            messages: client.delivered, losses: client.drops, timerFirings: returns)
        let arms = await client.engine.settled(expected)
        // Every timer task the engine started sleeps once.
        await client.clock.sleepsBegun(arms)
    }

    func settleAll() async throws {
        for client in clients { try await settle(client) }
    }

    /// The connection drops (network, server): the engine sees its connection end.
    func dropConnection(_ client: SimClient) async throws {
        guard let link = client.link else { return }
        if link.connection.closeNow() { client.drops += 1 }
        try await settle(client)
    }

    /// Hands the client's engine one message from the server.
    func deliverDown(_ message: JSONValue, to client: SimClient, on link: SimLink) async throws {
        link.connection.deliver(message)
        client.delivered += 1
        try await settle(client)
    }

    // MARK: Server side: the real session

    /// Hands one client message to the link's real `SyncSession`, then collects what every
    /// session was sent (the replies, and broadcasts to the user's other connections).
    func serve(_ value: JSONValue, on link: SimLink) async throws {
        guard !link.closedByServer else { return }
        let keepGoing = try await link.session.handle(
            .text(value.jsonString), state: &link.state, shared: link.shared, continuation: link.continuation)
        if !keepGoing { link.closedByServer = true }
        if value["type"] == "push", let userID = link.state.userID {
            try await noteSavedRevisions(value, userID: userID)
        }
        try await collectBroadcasts()
    }

    /// Remembers the revisions a push made (read back at once: nothing thins between a push
    /// and this), for ``checkHistory()``.
    func noteSavedRevisions(_ push: JSONValue, userID: String) async throws {
        for change in push["changes"]?.arrayValue ?? [] {
            // A change without `collection` is a note's (docs/protocol.md).
            let collection = change["collection"]?.stringValue ?? "notes"
            guard let id = change["id"]?.stringValue,
                let listed = try await store.revisions(userID: userID, collection: collection, id: id)
            else { continue }
            let key = "\(userID)/\(collection)/\(id)"
            for summary in listed
            where savedRevisions[key]?[RevisionKey(rev: summary.rev, conflict: summary.conflict)] == nil {
                guard
                    let revision = try await store.revision(
                        userID: userID, collection: collection, id: id, rev: summary.rev, conflict: summary.conflict)
                else {
                    throw SimFailure(description: "revision \(summary.rev) of \(key) is listed but cannot be read")
                }
                savedRevisions[key, default: [:]][RevisionKey(rev: summary.rev, conflict: summary.conflict)] =
                    SavedRevision(at: revision.updatedAt, fields: revision.fields)
            }
        }
    }

    /// Moves what the hub published into each link's downstream queue.
    func collectBroadcasts() async throws {
        for client in clients {
            guard let link = client.link else { continue }
            link.continuation.yield(.close(code: 0, reason: "sentinel"))
            while let item = await link.iterator.next() {
                if case .close(0, "sentinel") = item { break }
                let message: JSONValue
                switch item {
                case .message(let value): message = value
                case .text(let text): message = try JSONValue.parse(text)
                case .heartbeat:
                    continue
                case .close:
                    // The server closes the connection after what it queued.
                    link.closedByServer = true
                    link.down.append(["type": "sim-close"])
                    continue
                }
                if message["type"] == "change", let userID = link.state.userID, userID != users[client.user] {
                    throw SimFailure(description: "a change of another user reached \(client.name)")
                }
                if message["type"] == "reject", message["code"] == "base_unavailable" {
                    SimStats.baseUnavailable.withLockedValue { $0 += 1 }
                }
                if link.dropNextAck, message["type"] == "ack" {
                    link.dropNextAck = false
                    continue
                }
                link.down.append(message)
            }
        }
    }
}
