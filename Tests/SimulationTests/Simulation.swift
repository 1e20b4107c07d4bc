import Foundation
import Logging
import NIOConcurrencyHelpers
@testable import NotedClient
import NotedCore
@testable import NotedServer
import Testing

/// A virtual instant: the simulation's clock only moves when a step says so.
struct SimInstant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> SimInstant { SimInstant(offset: offset + duration) }
    func duration(to other: SimInstant) -> Duration { other.offset - offset }
    static func < (a: SimInstant, b: SimInstant) -> Bool { a.offset < b.offset }
}

/// The simulation's seeded generator (SplitMix64).
struct SimRandom {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    /// A lower-case UUID string drawn from the generator (ids must be UUIDs on the wire).
    mutating func uuid() -> String {
        let hex = String(format: "%016llx%016llx", next(), next())
        let c = Array(hex)
        return "\(String(c[0..<8]))-\(String(c[8..<12]))-4\(String(c[13..<16]))-a\(String(c[17..<20]))-\(String(c[20..<32]))"
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
        return (0..<count).map { _ in SimStep(client: random.below(1_000), roll: random.below(100), seed: random.next()) }
    }
}

/// One simulated connection: messages each way, in order, lost when the connection drops. The
/// server end is a real `SyncSession` (hello, token verification, welcome, pull, push, reauth),
/// fed message by message; what it sends (replies, broadcasts, a close) comes out of its stream.
final class SimLink {
    let id: Int
    let session: SyncSession
    var state = SyncSession.State()
    let shared: NIOLockedValueBox<SyncSession.Shared>
    var up: [JSONValue] = []
    var down: [JSONValue] = []
    var dropNextAck = false
    /// The server closed the session: the client sees the connection drop once `down` is read.
    var closedByServer = false
    let stream: AsyncStream<Outgoing>
    let continuation: AsyncStream<Outgoing>.Continuation
    var iterator: AsyncStream<Outgoing>.Iterator
    init(id: Int, session: SyncSession) {
        self.id = id
        self.session = session
        shared = NIOLockedValueBox(SyncSession.Shared(userID: nil, deadline: .distantFuture, deadlineCode: .unauthenticated))
        (stream, continuation) = AsyncStream.makeStream(of: Outgoing.self)
        iterator = stream.makeAsyncIterator()
    }

    /// The session's expiry timer (a wall-clock task; the simulation injects expiry itself).
    func stopTimer() {
        shared.withLockedValue { $0.timer?.cancel() }
    }
}

/// A real client: its GRDB store on disk and the real sync state machine.
final class SimClient {
    let name: String
    let user: Int
    let path: String
    let seed: UInt64
    var store: LocalStore
    var machine: SyncStateMachine<SimInstant>
    var link: SimLink?
    var online = true
    var snapshot = SnapshotPull()
    var lastRev: [String: Int64] = [:]
    var lastCursor: Int64 = 0
    var device: String
    /// The next access token this client gets is already expired (the token-expiry step).
    var expiredToken = false

    init(name: String, user: Int, path: String, seed: UInt64) throws {
        self.name = name
        self.user = user
        self.path = path
        self.seed = seed
        var random = SimRandom(state: seed)
        device = random.uuid()
        store = try LocalStore.open(path: path)
        machine = SyncStateMachine(configuration: SimClient.configuration, seed: seed)
    }

    static var configuration: SyncStateMachine<SimInstant>.Configuration {
        var c = SyncStateMachine<SimInstant>.Configuration()
        c.debounce = .milliseconds(100)
        c.pullLimit = 7
        return c
    }
}

/// The whole world of one run: the real server core over a real SQLite file, real clients.
final class World {
    var random: SimRandom
    let directory: String
    let serverPath: String
    var sync: SyncService
    var tokens: AccessTokens
    var serverUp = true
    var now = SimInstant(offset: .zero)
    var clients: [SimClient] = []
    var users: [String] = []
    var nextLink = 1
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

    init(seed: UInt64) async throws {
        random = SimRandom(state: seed)
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        directory = base + "/noted-sim-\(seed)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        serverPath = directory + "/server.sqlite"
        (sync, tokens) = try await World.openServer(path: serverPath)
        let userCount = 2 + random.below(2)
        for u in 0..<userCount {
            let id = "user-\(u)"
            _ = try await sync.store.createUser(UserAccount(id: id, username: id, usernameKey: id, passwordHash: "x"), now: Date(timeIntervalSince1970: 0))
            users.append(id)
            for c in 0..<(2 + random.below(4)) {
                let name = "u\(u)c\(c)"
                clients.append(try SimClient(name: name, user: u, path: directory + "/\(name).sqlite", seed: random.next()))
            }
        }
    }

    /// The server's configuration: few kept revisions (so `base_unavailable` happens), and the
    /// wall-clock rate limits out of reach (they would make runs depend on real time).
    static let configuration: ServerConfiguration = {
        var configuration = ServerConfiguration()
        configuration.revisionsKept = 5
        configuration.maxPushesPerSecond = 1_000_000
        configuration.maxErrorsPerMinute = 1_000_000
        return configuration
    }()

    static func openServer(path: String) async throws -> (SyncService, AccessTokens) {
        let limits = configuration.limits
        let store = try SQLiteStore(path: path, limits: limits, revisionsKept: configuration.revisionsKept)
        try await store.migrate()
        let sync = SyncService(store: store, parser: ChangeParser(schemas: .v1, limits: limits), hub: SessionHub(), metrics: ServerMetrics())
        let tokens = try await AccessTokens.load(store: store, issuer: "https://sim.noted.invalid", audience: "noted", lifetime: .seconds(3600))
        return (sync, tokens)
    }

    /// A real access token for the client's user, signed with the server's key; already
    /// expired after a token-expiry step.
    func token(for client: SimClient) async throws -> String {
        let expired = client.expiredToken
        client.expiredToken = false
        let now = expired ? Date().addingTimeInterval(-7200) : Date()
        return try await tokens.issue(userID: users[client.user], clientID: "noted-sim", now: now).token
    }

    func cleanUp() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Client side: the actions SyncEngine performs, on the virtual clock

    func perform(_ client: SimClient, _ actions: [SyncStateMachine<SimInstant>.Action]) async throws {
        for action in actions { try await perform(client, action) }
    }

    func perform(_ client: SimClient, _ action: SyncStateMachine<SimInstant>.Action) async throws {
        switch action {
        case .connect(let id):
            guard client.online, serverUp else {
                try await perform(client, client.machine.connectionLost(id: id, now: now))
                return
            }
            let session = SyncSession(sync: sync, tokens: tokens, configuration: World.configuration, headerToken: nil, logger: logger)
            let link = SimLink(id: id, session: session)
            sync.hub.track(session: session.id, continuation: link.continuation)
            client.link = link
            let cursor = try await client.store.cursor()
            let token = try await token(for: client)
            try await perform(client, client.machine.connected(id: id, token: token, device: client.device, cursor: cursor, now: now))
        case .send(let message):
            client.link?.up.append(message)
        case .close:
            if let link = client.link {
                link.stopTimer()
                sync.hub.leave(session: link.session.id)
                client.link = nil
            }
        case .storePage(let message):
            guard let cursor = message["cursor"]?.intValue else { throw SimFailure(description: "page without cursor") }
            let records = (message["records"]?.arrayValue ?? []).compactMap(LocalStore.record(from:))
            let more = message["more"]?.boolValue ?? false
            let (storeCursor, keep) = client.snapshot.page(records: records, since: client.machine.cursor, cursor: cursor, more: more,
                                                           reset: message["reset"]?.boolValue == true)
            _ = try await client.store.storePage(records: records, cursor: storeCursor)
            if let keep {
                _ = try await client.store.dropAbsent(keeping: keep)
            }
            try await perform(client, client.machine.pageStored(more: more, cursor: cursor, now: now))
        case .applyAnswer(let message):
            let effect = message["type"]?.stringValue == "ack" ? try await client.store.applyAck(message) : try await client.store.applyReject(message)
            try await perform(client, client.machine.answerApplied(needsPull: effect.needsPull, retryLater: effect.retryLater, now: now))
        case .applyBroadcast(let message):
            let (applied, _) = try await client.store.applyBroadcast(message, limits: client.machine.limits)
            try await perform(client, client.machine.broadcastApplied(applied, now: now))
        case .composePush(let excluding, let limit):
            let (changes, _) = try await client.store.outbox(excluding: excluding, limit: limit)
            try await perform(client, client.machine.composed(changes, now: now))
        case .refuse(let change, let reason):
            let reject: JSONValue = ["type": "reject", "ccid": .string(change.ccid), "collection": "notes",
                                     "id": .string(change.recordID), "code": "too_large", "message": .string(reason)]
            _ = try await client.store.applyReject(reject)
        case .refreshToken:
            try await perform(client, client.machine.tokenRefreshed(try await token(for: client), now: now))
        case .status, .error:
            break
        }
    }

    func dropConnection(_ client: SimClient) async throws {
        guard let link = client.link else { return }
        link.stopTimer()
        sync.hub.leave(session: link.session.id)
        client.link = nil
        try await perform(client, client.machine.connectionLost(id: link.id, now: now))
    }

    // MARK: Server side: the real session

    /// Hands one client message to the link's real `SyncSession`, then collects what every
    /// session was sent (the replies, and broadcasts to the user's other connections).
    func serve(_ value: JSONValue, on link: SimLink) async throws {
        guard !link.closedByServer else { return }
        let keepGoing = try await link.session.handle(.text(value.jsonString), state: &link.state, shared: link.shared, continuation: link.continuation)
        if !keepGoing { link.closedByServer = true }
        try await collectBroadcasts()
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
                case .close:
                    // The server closes the connection after what it queued.
                    link.closedByServer = true
                    link.down.append(["type": "sim-close"])
                    continue
                }
                if message["type"] == "change", let userID = link.state.userID, userID != users[client.user] {
                    throw SimFailure(description: "a change of another user reached \(client.name)")
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
