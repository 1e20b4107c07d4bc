import Foundation
import NotedCore

/// The sync protocol logic of a client, without any I/O.
///
/// Every input (a connection opened, a message received, a page stored, a timer tick...) is a
/// method that returns the actions to perform; the driver (``SyncEngine``) performs them and
/// reports back. Time comes in as the `now` argument, so tests drive the machine with a manual
/// clock and replay backoff jitter from a seed.
///
/// Order on each connection: `hello` → `welcome` → pull to the end → resend in-flight changes
/// unchanged and push new ones, at most one change in flight per record.
public struct SyncStateMachine<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration {
    public struct Configuration: Sendable, Hashable {
        /// Quiet time after the last local edit before it is pushed.
        public var debounce: Duration = .milliseconds(300)
        /// A request unanswered this long means the connection is dead.
        public var requestTimeout: Duration = .seconds(15)
        /// First reconnect delay; doubled on every failed attempt up to `maxBackoff`.
        public var initialBackoff: Duration = .milliseconds(500)
        public var maxBackoff: Duration = .seconds(30)
        /// How long before the access token expires it is refreshed.
        public var refreshMargin: Duration = .seconds(60)
        public var pullLimit: Int = 500
        public var client: String = "noted-client/0.1.0"

        public init() {}
    }

    public enum Action: Sendable, Hashable {
        /// Open a new connection; report `connected` or `connectionLost` with this id.
        case connect(id: Int)
        /// Send a message on the open connection.
        case send(ClientMessage, rid: Int64)
        /// Send a `push` of these changes, each as the text it was encoded to when made
        /// (`ClientMessage.pushText`).
        case push([OutboxChange], rid: Int64)
        /// Close the open connection (it is considered dead or the engine stops).
        case close
        /// Store a `changes` page and its cursor durably, then report `pageStored`.
        case storePage(ChangesPage)
        /// Apply an `ack`, then report `answerApplied`.
        case applyAck(Ack)
        /// Apply a `reject`, then report `answerApplied`.
        case applyReject(Reject)
        /// Apply a `change` broadcast, then report `broadcastApplied`.
        case applyBroadcast(Broadcast)
        /// Take the limits a server advertised (local edits are checked against them).
        case storeLimits(Limits)
        /// Protocol 2: store the user's spaces as the server listed them (`welcome`, `spaces`),
        /// letting go of the records of spaces no longer listed.
        case storeSpaces([JSONValue])
        /// Collect the outbox (minus records with a change in flight here), then report `composed`.
        case composePush(excluding: Set<String>, limit: Int)
        /// Get a fresh access token, then report `tokenRefreshed`.
        case refreshToken
        /// A change can never be sent (larger than `maxMessageBytes`): keep it locally as refused.
        case refuse(OutboxChange, reason: String)
        /// Tell observers.
        case status(SyncStatus)
        case error(String)
    }

    enum Phase: Sendable, Hashable {
        case stopped
        case connecting(id: Int)
        case authenticating(id: Int)
        /// Authenticated; `caughtUp` once the first pull reached the end.
        case connected(id: Int, caughtUp: Bool)
        case waiting(until: Instant)
    }

    public let configuration: Configuration
    private(set) var phase: Phase = .stopped
    private var connectionCounter = 0
    /// Connection attempts that failed since the last successful `welcome`.
    public private(set) var failures = 0
    private var random: SplitMix64
    private var nextRID: Int64 = 0
    /// What is under way on the current connection; a new connection starts with none.
    private var requests = Requests()
    private var pushDue: Instant?
    private var refresh: Refresh = .idle
    private(set) var limits = Limits()
    /// The stored pull cursor of the personal space, as the driver last reported it.
    private(set) var cursor: Int64 = 0
    /// Protocol 2: each shared space's stored pull cursor (docs/protocol.md, "Spaces").
    private(set) var spaceCursors: [String: Int64] = [:]
    /// The space of the pull under way, or of the last one (nil: the personal space).
    public private(set) var pullSpace: String?
    /// Spaces whose pull waits for the one under way, in order (nil: the personal space).
    private var pullQueue: [String?] = []
    /// The protocol `hello` asks for: 2, or 1 once a server answered `unsupported_protocol`
    /// (a server from before spaces: the personal space syncs as before).
    public private(set) var protocolVersion: Int64 = 2
    /// The pulls under way are a snapshot: from 0 (or a reset), until its last page.
    private var inSnapshot = false
    private var lastStatus: SyncStatus = .stopped

    enum RequestKind: Sendable, Hashable { case hello, pull, push, reauth }

    /// A pull or a compose: not under way, under way, or under way and wanted again after.
    enum Activity: Sendable, Hashable {
        case idle, running, runningAgain
    }

    /// The access token's refresh: nothing planned, planned for a time, or under way.
    enum Refresh: Sendable, Hashable {
        case idle
        case scheduled(Instant)
        case running
    }

    /// The requests of one connection.
    struct Requests: Sendable {
        /// Requests awaiting an answer, with their deadlines.
        var pending: [Int64: (kind: RequestKind, deadline: Instant)] = [:]
        /// For each push request, the ccids not answered yet.
        var pushAnswers: [Int64: Set<String>] = [:]
        /// Records with a change sent on this connection and not answered, with its ccid.
        var inFlight: [String: String] = [:]
        var pulling: Activity = .idle
        /// A pulled page is being stored (its `pageStored` has not come yet).
        var storing = false
        var composing: Activity = .idle
    }

    /// Records with a change sent on this connection and not answered, with its ccid.
    var inFlight: [String: String] { requests.inFlight }

    public init(configuration: Configuration = Configuration(), seed: UInt64) {
        self.configuration = configuration
        self.random = SplitMix64(seed: seed)
    }

    public var isConnected: Bool {
        if case .connected = phase { return true }
        return false
    }

    /// True when connected, caught up, and nothing is being pulled, composed or awaited.
    public var isIdle: Bool {
        guard case .connected(_, true) = phase else { return false }
        return requests.inFlight.isEmpty && requests.pulling == .idle && requests.composing == .idle && pushDue == nil
    }

    /// The earliest time `tick` has something to do: the driver sleeps until then (and again
    /// whenever this changes), so it names only deadlines that `tick` acts on.
    public var nextDeadline: Instant? {
        var times = requests.pending.values.map(\.deadline)
        // A push falls due only once caught up; until then the end of the pull composes it.
        if let pushDue, case .connected(_, true) = phase { times.append(pushDue) }
        if case .scheduled(let at) = refresh { times.append(at) }
        if case .waiting(let until) = phase { times.append(until) }
        return times.min()
    }

    // MARK: Inputs

    public mutating func start() -> [Action] {
        guard case .stopped = phase else { return [] }
        return connect()
    }

    public mutating func stop() -> [Action] {
        let wasOpen: Bool
        switch phase {
        case .connecting, .authenticating, .connected: wasOpen = true
        default: wasOpen = false
        }
        reset()
        phase = .stopped
        return (wasOpen ? [.close] : []) + status(.stopped)
    }

    /// The connection `id` is open: say hello (protocol 2: the personal space and every shared
    /// space the user is in).
    /// - Parameter spaceCursors: each shared space's stored cursor.
    public mutating func connected(
        id: Int, token: String, device: String, cursor: Int64, spaceCursors: [String: Int64] = [:], now: Instant
    ) -> [Action] {
        guard case .connecting(id) = phase else { return [] }
        self.cursor = cursor
        self.spaceCursors = spaceCursors
        phase = .authenticating(id: id)
        let rid = request(.hello, now: now)
        return [
            .send(
                .hello(protocol: protocolVersion, token: token, device: device, client: configuration.client), rid: rid)
        ]
    }

    /// The `since` of the pull under way (its space's stored cursor).
    public var pullCursor: Int64 { cursor(of: pullSpace) }

    private func cursor(of space: String?) -> Int64 {
        space.map { spaceCursors[$0] ?? 0 } ?? cursor
    }

    /// The connection `id` could not be opened or was lost.
    public mutating func connectionLost(id: Int, now: Instant) -> [Action] {
        switch phase {
        case .connecting(id), .authenticating(id), .connected(id, _): break
        default: return []
        }
        return backOff(now: now)
    }

    public mutating func received(_ message: ServerMessage, now: Instant, date: Date = Date()) -> [Action] {
        let rid: Int64? = if case .int(let value)? = message.rid { value } else { nil }
        switch message {
        case .welcome(let welcome):
            return self.welcome(welcome, rid: rid, now: now, date: date)
        case .changes(let page):
            guard case .connected = phase, let rid, requests.pending[rid]?.kind == .pull else { return [] }
            requests.pending[rid] = nil
            requests.storing = true
            // The next page is asked for now, while this one is stored: the server reads and
            // sends it meanwhile (an initial sync of 10,000 notes spent a third of its time
            // waiting for pages). Pages are still stored one at a time, in order, and the
            // stored cursor still moves only with a stored page (docs/protocol.md, section 8).
            guard page.more else { return [.storePage(page)] }
            return pullAhead(since: page.cursor, now: now) + [.storePage(page)]
        case .ack(let ack):
            guard case .connected = phase else { return [] }
            answered(ccid: ack.ccid, id: ack.id, rid: rid, now: now)
            return [.applyAck(ack)]
        case .reject(let reject):
            guard case .connected = phase else { return [] }
            if let ccid = reject.ccid {
                answered(ccid: ccid, id: reject.id, rid: rid, now: now)
            }
            return [.applyReject(reject)]
        case .change(let broadcast):
            guard case .connected = phase else { return [] }
            return [.applyBroadcast(broadcast)]
        case .error(let error):
            return serverError(error, rid: rid, now: now)
        case .spaces(let update):
            guard case .connected = phase else { return [] }
            return spacesListed(update.spaces, now: now)
        }
    }

    /// An `ack` or `reject` for `ccid` arrived: the push it answers waits for one answer less.
    private mutating func answered(ccid: String, id: String?, rid: Int64?, now: Instant) {
        if let rid, var waiting = requests.pushAnswers[rid] {
            waiting.remove(ccid)
            if waiting.isEmpty {
                requests.pushAnswers[rid] = nil
                requests.pending[rid] = nil
            } else {
                requests.pushAnswers[rid] = waiting
                // Progress: the connection is alive; give the rest of the push a fresh deadline.
                let deadline = now.advanced(by: configuration.requestTimeout)
                requests.pending[rid]?.deadline = deadline
            }
        }
        if let id, requests.inFlight[id] == ccid {
            requests.inFlight[id] = nil
        }
    }

    /// A page was stored and its cursor advanced.
    public mutating func pageStored(more: Bool, cursor: Int64, now: Instant) -> [Action] {
        guard case .connected(let id, let caughtUp) = phase else { return [] }
        requests.storing = false
        if let space = pullSpace {
            // A space left while its page was on the way keeps no cursor (pulled from 0 if joined again).
            if spaceCursors[space] != nil { spaceCursors[space] = cursor }
        } else {
            self.cursor = cursor
        }
        if !more { inSnapshot = false }
        // The next page was asked for when this one arrived: its answer goes on from here.
        if more, requests.pending.values.contains(where: { $0.kind == .pull }) { return [] }
        let again = requests.pulling == .runningAgain
        requests.pulling = .idle
        if more || again {
            return pull(since: cursor, now: now)
        }
        // The next space's pull, until every space is pulled to its end.
        if !pullQueue.isEmpty {
            pullSpace = pullQueue.removeFirst()
            return pull(since: self.cursor(of: pullSpace), now: now)
        }
        if !caughtUp {
            phase = .connected(id: id, caughtUp: true)
        }
        return compose()
    }

    /// An ack or reject was applied to the store.
    /// - Parameter space: the space of the record it answered (nil: the personal space).
    public mutating func answerApplied(needsPull: Bool, retryLater: Bool, space: String? = nil, now: Instant)
        -> [Action]
    {
        guard case .connected = phase else { return [] }
        var actions: [Action] = []
        if needsPull { actions += requestPull(space: space, now: now) }
        if retryLater {
            pushDue = now.advanced(by: backoffDelay(attempt: 2))
            return actions + status(.syncing)
        }
        // While a full push's worth of changes is still in flight, the next batch waits for
        // more answers: composing after every ack read the outbox (every waiting record) once
        // per change, and an import of 10,000 notes then synced at a few notes a second.
        if requests.inFlight.count >= max(1, limits.maxChangesPerPush) {
            return actions + currentStatus()
        }
        return actions + compose()
    }

    /// A broadcast was applied, or could not be (the record is not at `prevRev`): then pull
    /// its space (`space`; nil: the personal space).
    public mutating func broadcastApplied(_ applied: Bool, space: String? = nil, now: Instant) -> [Action] {
        guard case .connected = phase, !applied else { return [] }
        return requestPull(space: space, now: now)
    }

    /// The outbox was collected: push it in batches of at most `maxChangesPerPush`.
    public mutating func composed(_ changes: [OutboxChange], now: Instant) -> [Action] {
        let again = requests.composing == .runningAgain
        requests.composing = .idle
        guard case .connected = phase else { return [] }
        var actions: [Action] = []
        // The push envelope and a little slack; each change adds its JSON and a comma.
        let budget = limits.maxMessageBytes - 64
        var remaining: [(change: OutboxChange, bytes: Int)] = []
        for change in changes where requests.inFlight[change.recordID] == nil {
            let bytes = change.body.utf8.count + 1
            if bytes > budget {
                actions.append(
                    .refuse(
                        change,
                        reason: "the change is larger than the server's \(limits.maxMessageBytes)-byte message limit"))
            } else {
                remaining.append((change, bytes))
            }
        }
        while !remaining.isEmpty {
            var batch: [OutboxChange] = []
            var size = 0
            while let next = remaining.first, batch.count < max(1, limits.maxChangesPerPush),
                size + next.bytes <= budget
            {
                batch.append(next.change)
                size += next.bytes
                remaining.removeFirst()
            }
            let rid = request(.push, now: now)
            requests.pushAnswers[rid] = Set(batch.map(\.ccid))
            for change in batch { requests.inFlight[change.recordID] = change.ccid }
            actions.append(.push(batch, rid: rid))
        }
        if again {
            actions += compose()
        }
        return actions + currentStatus()
    }

    /// The user changed something: push after the debounce (each edit restarts it).
    public mutating func localEdit(now: Instant) -> [Action] {
        pushDue = now.advanced(by: configuration.debounce)
        return []
    }

    /// A token refresh finished; nil when it failed.
    public mutating func tokenRefreshed(_ token: String?, now: Instant) -> [Action] {
        guard let token else {
            refresh = .scheduled(now.advanced(by: .seconds(10)))
            return [.error("could not refresh the access token; retrying")]
        }
        refresh = .idle
        if case .waiting = phase {
            // The connection failed for want of a valid token: try again now with the new one.
            return connect()
        }
        guard case .connected = phase else { return [] }
        let rid = request(.reauth, now: now)
        return [.send(.reauth(token: token), rid: rid)]
    }

    /// Timers: request timeouts, debounce, reconnect, token refresh.
    public mutating func tick(now: Instant) -> [Action] {
        if requests.pending.values.contains(where: { $0.deadline <= now }) {
            return [.close, .error("the server did not answer in time; reconnecting")] + backOff(now: now)
        }
        var actions: [Action] = []
        if case .waiting(let until) = phase, until <= now {
            actions += connect()
        }
        if case .scheduled(let at) = refresh, at <= now {
            refresh = .running
            actions.append(.refreshToken)
        }
        if let pushDue, pushDue <= now, case .connected(_, true) = phase {
            self.pushDue = nil
            actions += compose()
        }
        return actions
    }

    // MARK: Steps

    private mutating func connect() -> [Action] {
        reset()
        connectionCounter += 1
        phase = .connecting(id: connectionCounter)
        return [.connect(id: connectionCounter)] + status(.connecting)
    }

    private mutating func reset() {
        requests = Requests()
        pullQueue = []
        pullSpace = nil
        // A new connection pulls from the stored cursor: a snapshot left half-way is not
        // continued as one (the server may answer a reset, and the snapshot starts again).
        inSnapshot = false
    }

    private mutating func backOff(now: Instant) -> [Action] {
        reset()
        let delay = backoffDelay(attempt: failures)
        failures += 1
        phase = .waiting(until: now.advanced(by: delay))
        return status(.offline(retryIn: delay))
    }

    /// Exponential backoff with jitter: a random delay in [d/2, d], d = initial × 2^attempt, capped.
    mutating func backoffDelay(attempt: Int) -> Duration {
        var delay = configuration.initialBackoff
        for _ in 0..<min(attempt, 30) where delay < configuration.maxBackoff {
            delay *= 2
        }
        delay = min(delay, configuration.maxBackoff)
        let fraction = Double(random.next() >> 11) / Double(1 << 53)
        return delay / 2 + delay / 2 * fraction
    }

    private mutating func welcome(_ message: Welcome, rid: Int64?, now: Instant, date: Date) -> [Action] {
        if let rid { requests.pending[rid] = nil }
        limits = message.limits
        var actions: [Action] = [.storeLimits(message.limits)]
        if let expiry = message.expiresAt {
            // Refresh `refreshMargin` before expiry, but never sooner than half-way through a
            // short-lived token's life (no refresh storm when the lifetime is below the margin).
            let remaining = Duration.seconds(max(0, expiry.timeIntervalSince(date)))
            // A refresh under way is not rescheduled: its new token brings a new welcome.
            if refresh != .running {
                refresh = .scheduled(now.advanced(by: max(remaining - configuration.refreshMargin, remaining / 2)))
            }
        }
        switch phase {
        case .authenticating(let id):
            phase = .connected(id: id, caughtUp: false)
            failures = 0
            actions += status(.syncing)
            pullSpace = nil
            actions += pull(since: cursor, now: now)
            // Protocol 2: then each shared space with changes this device has not pulled.
            if let spaces = message.spaces { actions += spacesListed(spaces, now: now) }
        case .connected:
            if let spaces = message.spaces { actions += spacesListed(spaces, now: now) }
        default:
            break
        }
        return actions
    }

    /// The user's spaces, listed by the server: stored, and the shared ones with changes this
    /// device has not pulled are pulled (a space just joined from 0, as a first sync).
    private mutating func spacesListed(_ list: [JSONValue], now: Instant) -> [Action] {
        // Every list names the personal space: one that does not is not taken (nothing dropped).
        guard list.contains(where: { $0["personal"]?.boolValue == true }) else { return [] }
        var shared: [(id: String, seq: Int64)] = []
        for entry in list where entry["personal"]?.boolValue != true {
            guard let id = entry["id"]?.stringValue, !id.isEmpty else { continue }
            shared.append((id, entry["seq"]?.intValue ?? 0))
        }
        let listed = Set(shared.map(\.id))
        spaceCursors = spaceCursors.filter { listed.contains($0.key) }
        pullQueue.removeAll { space in space.map { !listed.contains($0) } ?? false }
        var actions: [Action] = [.storeSpaces(list)]
        for (id, seq) in shared {
            let known = spaceCursors[id] ?? 0
            spaceCursors[id] = known
            if seq > known { actions += requestPull(space: id, now: now) }
        }
        return actions
    }

    private mutating func serverError(_ message: ServerError, rid: Int64?, now: Instant) -> [Action] {
        let code = message.code.rawValue
        var actions: [Action] = [.error("server: \(code): \(message.message)")]
        if let rid, let request = requests.pending[rid] {
            requests.pending[rid] = nil
            switch request.kind {
            case .push:
                // The whole push was refused (e.g. too_large): its changes go again later.
                for ccid in requests.pushAnswers[rid] ?? [] {
                    if let id = requests.inFlight.first(where: { $0.value == ccid })?.key {
                        requests.inFlight[id] = nil
                    }
                }
                requests.pushAnswers[rid] = nil
                pushDue = now.advanced(by: backoffDelay(attempt: 2))
            case .pull:
                // A pull asked ahead while a page is stored: that page's `pageStored` asks again.
                // Otherwise the next space waiting is pulled (a space left meanwhile answers
                // `not_found`).
                if !requests.storing {
                    requests.pulling = .idle
                    if !pullQueue.isEmpty {
                        pullSpace = pullQueue.removeFirst()
                        actions += pull(since: cursor(of: pullSpace), now: now)
                    } else if case .connected(let id, false) = phase {
                        // The last pull of the catch-up failed: caught up as far as can be.
                        phase = .connected(id: id, caughtUp: true)
                        actions += compose()
                    }
                }
            case .reauth:
                if refresh != .running { refresh = .scheduled(now.advanced(by: .seconds(5))) }
            case .hello:
                if code == ErrorCode.unsupportedProtocol.rawValue && protocolVersion > 1 {
                    protocolVersion = 1
                    actions.append(
                        .error("the server does not speak protocol 2 (spaces); syncing the personal space only"))
                }
            }
        }
        if code == ErrorCode.tokenExpired.rawValue || code == ErrorCode.unauthenticated.rawValue {
            if refresh != .running {
                refresh = .running
                actions.append(.refreshToken)
            }
        }
        return actions
    }

    /// A pull of `space` (nil: the personal space) from its cursor: now, or after the pull
    /// under way (again, if that is of the same space).
    private mutating func requestPull(space: String?, now: Instant) -> [Action] {
        if requests.pulling != .idle {
            if space == pullSpace {
                requests.pulling = .runningAgain
            } else if !pullQueue.contains(space) {
                pullQueue.append(space)
            }
            return []
        }
        pullSpace = space
        return pull(since: cursor(of: space), now: now)
    }

    /// The pull of the page after one being stored: a pull wanted again meanwhile stays wanted.
    private mutating func pullAhead(since cursor: Int64, now: Instant) -> [Action] {
        let again = requests.pulling == .runningAgain
        let actions = pull(since: cursor, now: now)
        if again { requests.pulling = .runningAgain }
        return actions
    }

    private mutating func pull(since cursor: Int64, now: Instant) -> [Action] {
        requests.pulling = .running
        // A pull from 0 starts a snapshot, and its pages continue it: the server answers them
        // bounded and never with a reset (docs/protocol.md, section 8, "Pull").
        if cursor == 0 { inSnapshot = true }
        let rid = request(.pull, now: now)
        return [
            .send(
                .pull(since: cursor, limit: configuration.pullLimit, snapshot: inSnapshot, space: pullSpace), rid: rid)
        ]
    }

    private mutating func compose() -> [Action] {
        guard case .connected(_, true) = phase else { return [] }
        if requests.composing != .idle {
            requests.composing = .runningAgain
            return []
        }
        requests.composing = .running
        pushDue = nil
        return [.composePush(excluding: Set(requests.inFlight.keys), limit: max(1, limits.maxChangesPerPush * 4))]
    }

    private mutating func request(_ kind: RequestKind, now: Instant) -> Int64 {
        nextRID += 1
        requests.pending[nextRID] = (kind, now.advanced(by: configuration.requestTimeout))
        return nextRID
    }

    private mutating func status(_ value: SyncStatus) -> [Action] {
        guard value != lastStatus else { return [] }
        lastStatus = value
        return [.status(value)]
    }

    private mutating func currentStatus() -> [Action] {
        status(isIdle ? .synced : .syncing)
    }
}
