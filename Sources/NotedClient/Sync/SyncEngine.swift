import Foundation
import NotedCore

/// Where the sync engine gets access tokens: ``TokenManager`` in an app, anything in a test.
public protocol AccessTokenProvider: Sendable {
    /// A token valid for a while yet (refreshed first when it is about to expire).
    func accessToken() async throws -> String
    /// A new token, whatever the current one's expiry (the server said it expired).
    func refreshedAccessToken() async throws -> String
}

extension TokenManager: AccessTokenProvider {
    public func accessToken() async throws -> String {
        try await accessToken(margin: 60)
    }

    public func refreshedAccessToken() async throws -> String {
        try await refresh().accessToken
    }
}

/// Drives a ``SyncStateMachine`` over a ``SyncTransport``, the ``LocalStore`` and a clock.
///
/// The engine owns the connection: it reconnects with backoff until stopped, refreshes the
/// access token before it expires and re-authenticates in place. It is generic over its clock
/// and never polls: one timer task sleeps until the machine's next deadline
/// (``SyncStateMachine/nextDeadline``) and is re-armed whenever that deadline changes, so a test
/// clock (the deterministic simulation's) runs the engine users run.
public actor SyncEngine<C: Clock> where C.Duration == Duration {
    private struct Connection {
        var id: Int
        var value: any SyncConnection
        /// Text frames to send, in order.
        var outgoing: AsyncStream<String>.Continuation
    }

    private var machine: SyncStateMachine<C.Instant>
    private let store: LocalStore
    private let transport: any SyncTransport
    private let url: URL
    private let tokens: any AccessTokenProvider
    private let events: EventHub
    private let clock: C
    private var connection: Connection?
    /// Connections the engine closed itself: their reader ending is not news.
    private var closedHere: Set<Int> = []
    /// Background work by key (connect, reader and writer of a connection, refresh), so that
    /// finished work does not pile up on a long-lived engine.
    private var tasks: [String: Task<Void, Never>] = [:]
    private var timer: (deadline: C.Instant, generation: Int, task: Task<Void, Never>)?
    private var timerGeneration = 0
    private var running = false
    private var snapshot = SnapshotPull()
    private(set) var status: SyncStatus = .stopped
    private var device = ""
    private var work = Work()
    /// How many times `perform` has run: what ``waitForStep(after:)`` waits on.
    private(set) var steps = 0
    private var stepWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextStepWaiter = 0

    init(
        store: LocalStore, transport: any SyncTransport, url: URL, tokens: any AccessTokenProvider, events: EventHub,
        configuration: SyncStateMachine<C.Instant>.Configuration, clock: C, seed: UInt64
    ) {
        self.machine = SyncStateMachine(configuration: configuration, seed: seed)
        self.store = store
        self.transport = transport
        self.url = url
        self.tokens = tokens
        self.events = events
        self.clock = clock
    }

    /// Starts syncing (idempotent).
    public func start() async {
        guard !running else { return }
        running = true
        device = (try? await store.deviceID()) ?? UUID().uuidString.lowercased()
        await perform(machine.start())
    }

    /// Stops syncing and closes the connection; in-flight changes stay in the store for next time.
    public func stop() async {
        running = false
        await perform(machine.stop())
        for task in tasks.values { task.cancel() }
        tasks = [:]
        armTimer()
    }

    /// Tells the engine the user changed something: it pushes after the debounce.
    public func localEdit() async {
        await perform(machine.localEdit(now: clock.now))
    }

    /// True when connected, caught up, and nothing is waiting to be sent or acknowledged.
    public func isSynced() async -> Bool {
        guard machine.isIdle else { return false }
        return (try? await store.pendingCount()) == 0
    }

    public var currentStatus: SyncStatus { status }

    /// Connection attempts that failed in a row (0 once connected).
    public var connectionFailures: Int { machine.failures }

    // MARK: Inputs

    private func timerFired(generation: Int) async {
        defer {
            work.timerFirings += 1
            resumeSettled()
        }
        guard generation == timer?.generation else { return }
        timer = nil
        await perform(machine.tick(now: clock.now))
    }

    private func opened(id: Int, connection value: any SyncConnection, token: String) async {
        guard case .connecting(id) = machine.phase else {
            closedHere.insert(id)
            await value.close()
            return
        }
        let (outgoing, continuation) = AsyncStream.makeStream(of: String.self)
        connection = Connection(id: id, value: value, outgoing: continuation)
        tasks["writer"] = Task { [weak self] in
            var failed = false
            for await message in outgoing {
                // After a failed send the rest is dropped, but still counted as done.
                if !failed {
                    do {
                        try await value.send(text: message)
                    } catch {
                        failed = true
                        await value.close()
                    }
                }
                await self?.sent()
            }
        }
        tasks["reader"] = Task { [weak self] in
            for await message in value.messages {
                await self?.received(message, connection: id)
            }
            await self?.readerEnded(id: id)
        }
        let cursor = (try? await store.cursor()) ?? 0
        let spaceCursors = (try? await store.spaceCursors()) ?? [:]
        await perform(
            machine.connected(
                id: id, token: token, device: device, cursor: cursor, spaceCursors: spaceCursors, now: clock.now))
    }

    private func readerEnded(id: Int) async {
        if closedHere.remove(id) == nil {
            work.losses += 1
            defer { resumeSettled() }
            await lost(id: id)
        }
    }

    private func lost(id: Int) async {
        if connection?.id == id {
            connection?.outgoing.finish()
            connection = nil
        }
        await perform(machine.connectionLost(id: id, now: clock.now))
    }

    private func received(_ message: JSONValue, connection id: Int) async {
        defer {
            work.messages += 1
            resumeSettled()
        }
        guard connection?.id == id else { return }
        let decoded: ServerMessage?
        do {
            decoded = try ServerMessage.decode(message)
        } catch {
            await report(NotedClientError(.server, "an unreadable message from the server: \(error.message)"))
            return
        }
        // A message type this client does not know is ignored.
        guard let decoded else { return }
        await perform(machine.received(decoded, now: clock.now))
    }

    private func refreshed(_ token: String?) async {
        await perform(machine.tokenRefreshed(token, now: clock.now))
    }

    private func sent() {
        work.busy -= 1
        resumeSettled()
    }

    // MARK: Actions

    private func perform(_ actions: [SyncStateMachine<C.Instant>.Action]) async {
        for action in actions {
            await perform(action)
        }
        armTimer()
        steps += 1
        let waiters = stepWaiters
        stepWaiters = [:]
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns once the engine has taken a step (handled a message, a timer, a connection, an
    /// edit) after step `after` (at once if it already has), or when the calling task is
    /// cancelled: ``NotedClient/waitUntilSynced(timeout:failWhenOffline:)`` waits on it instead
    /// of polling.
    func waitForStep(after: Int) async {
        guard steps <= after else { return }
        let id = nextStepWaiter
        nextStepWaiter += 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                stepWaiters[id] = continuation
            }
        } onCancel: {
            Task { await self.stopWaiting(id) }
        }
    }

    private func stopWaiting(_ id: Int) {
        stepWaiters.removeValue(forKey: id)?.resume()
    }

    /// Queues a text frame on the open connection (counted as work until it is written).
    private func send(_ text: String) {
        if let connection, case .enqueued = connection.outgoing.yield(text) {
            work.busy += 1
        }
    }

    private func perform(_ action: SyncStateMachine<C.Instant>.Action) async {
        switch action {
        case .connect(let id):
            connect(id: id)
        case .send(let message, let rid):
            send(message.json(rid: .int(rid)).jsonString)
        case .push(let changes, let rid):
            send(ClientMessage.pushText(changes: changes.map(\.body), rid: .int(rid)))
        case .close:
            if let connection {
                connection.outgoing.finish()
                closedHere.insert(connection.id)
                self.connection = nil
                await connection.value.close()
            }
        case .storePage(let message):
            await storePage(message)
        case .applyAck(let ack):
            await applyAnswer { try await $0.applyAck(ack) }
        case .applyReject(let reject):
            await applyAnswer { try await $0.applyReject(reject) }
        case .storeLimits(let limits):
            // Local edits are checked against what this server accepts.
            try? await store.setMeta("limits", limits.json.jsonString)
        case .storeSpaces(let list):
            do {
                await events.emit(try await store.storeSpaces(list), origin: .remote)
                await events.emit(.spaces)
            } catch {
                await fail(error)
            }
        case .applyBroadcast(let message):
            do {
                let (applied, effect) = try await store.applyBroadcast(message, limits: machine.limits)
                if applied { snapshot.broadcastApplied(id: message.id, seq: message.seq) }
                await events.emit(effect, origin: .remote)
                await perform(machine.broadcastApplied(applied, space: message.space, now: clock.now))
                await sendForks(effect)
            } catch {
                await fail(error)
            }
        case .composePush(let excluding, let limit):
            do {
                let (changes, effect) = try await store.outbox(excluding: excluding, limit: limit)
                await events.emit(effect, origin: .local)
                await perform(machine.composed(changes, now: clock.now))
            } catch {
                await fail(error)
            }
        case .refuse(let change, let reason):
            do {
                await events.emit(try await store.refuse(change, reason: reason), origin: .local)
            } catch {
                await report(error)
            }
        case .refreshToken:
            refresh()
        case .status(let value):
            status = value
            if value == .synced {
                try? await store.setMeta("lastSync", Timestamp.format(Date()))
            }
            await events.emit(.status(value))
        case .error(let message):
            await events.emit(.error(message))
        }
    }

    private func connect(id: Int) {
        let transport = transport
        let tokens = tokens
        let url = url
        work.busy += 1
        tasks["connect"] = Task { [weak self] in
            do {
                let token = try await tokens.accessToken()
                let connection = try await transport.connect(to: url)
                await self?.opened(id: id, connection: connection, token: token)
            } catch {
                await self?.report(error)
                await self?.lost(id: id)
            }
            await self?.finished()
        }
    }

    private func refresh() {
        let tokens = tokens
        work.busy += 1
        tasks["refresh"] = Task { [weak self] in
            do {
                let token = try await tokens.refreshedAccessToken()
                await self?.refreshed(token)
            } catch {
                await self?.report(error)
                await self?.refreshed(nil)
            }
            await self?.finished()
        }
    }

    private func finished() {
        work.busy -= 1
        resumeSettled()
    }

    /// Keeps one timer task sleeping until the machine's next deadline.
    private func armTimer() {
        let deadline = running ? machine.nextDeadline : nil
        guard deadline != timer?.deadline else { return }
        timer?.task.cancel()
        timer = nil
        guard let deadline else { return }
        timerGeneration += 1
        let generation = timerGeneration
        let clock = clock
        work.timerArms += 1
        let task = Task { [weak self] in
            do {
                try await clock.sleep(until: deadline, tolerance: nil)
            } catch {
                return
            }
            await self?.timerFired(generation: generation)
        }
        timer = (deadline, generation, task)
    }

    private func applyAnswer(_ apply: (LocalStore) async throws -> StoreEffect) async {
        do {
            let effect = try await apply(store)
            await events.emit(effect, origin: .remote)
            await perform(
                machine.answerApplied(
                    needsPull: effect.needsPull, retryLater: effect.retryLater, space: effect.pullSpace, now: clock.now)
            )
            await sendForks(effect)
        } catch {
            await fail(error)
        }
    }

    /// Text kept as a new note (its record purged elsewhere) is a local record to send: without
    /// this, it waited for the next edit or connection (found by the simulation's history
    /// steps: a connected, idle client kept it unsent).
    private func sendForks(_ effect: StoreEffect) async {
        guard !effect.forked.isEmpty else { return }
        await perform(machine.localEdit(now: clock.now))
    }

    private func storePage(_ page: ChangesPage) async {
        let (records, cursor, more) = (page.records, page.cursor, page.more)
        do {
            // The machine's cursor is still the `since` of the pull this page answers.
            let space = machine.pullSpace
            let (storeCursor, keep) = snapshot.page(
                records: records, since: machine.pullCursor, cursor: cursor, more: more, reset: page.reset,
                space: space)
            var effect = try await store.storePage(records: records, cursor: storeCursor, space: space)
            if let keep {
                let dropped = try await store.dropAbsent(keeping: keep, space: space)
                for id in dropped.removed { effect.remove(id, in: dropped.collections[id] ?? LocalStore.collection) }
            }
            await events.emit(effect, origin: .remote)
            if keep != nil { await events.emit(.reset) }
            await perform(machine.pageStored(more: more, cursor: cursor, now: clock.now))
            await sendForks(effect)
        } catch {
            await fail(error)
        }
    }

    private func report(_ error: any Error) async {
        await events.emit(.error(String(describing: error)))
    }

    /// A local storage failure: report it and start over on a new connection.
    private func fail(_ error: any Error) async {
        await report(error)
        if let id = connection?.id {
            await perform(.close)
            await perform(machine.connectionLost(id: id, now: clock.now))
        }
    }

    // MARK: Settling

    /// What the engine has done, counted, so that a driver of the clock and the transport (the
    /// deterministic simulation) can tell when everything it set off has been handled.
    struct Work: Sendable {
        /// Connects, refreshes and sends under way.
        var busy = 0
        /// Timer tasks started (each sleeps on the clock exactly once).
        var timerArms = 0
        /// Timer sleeps that returned and were handled.
        var timerFirings = 0
        /// Messages read from connections and handled.
        var messages = 0
        /// Connections that ended without the engine closing them, handled.
        var losses = 0
    }

    private var settledWaiters: [(Expected, CheckedContinuation<Int, Never>)] = []

    /// What a driver has caused: messages it delivered, connections it dropped, and timer
    /// sleeps it let return.
    struct Expected: Sendable, Hashable {
        var messages: Int
        var losses: Int
        var timerFirings: Int
    }

    private func isSettled(_ expected: Expected) -> Bool {
        work.busy == 0 && work.messages == expected.messages && work.losses == expected.losses
            && work.timerFirings == expected.timerFirings
    }

    /// Waits until the engine has handled everything `expected` counts and has nothing of its
    /// own under way (returns at once when that is already so).
    /// - Returns: how many timer tasks the engine has started; each sleeps on the clock once,
    ///   so the driver knows how many sleeps its clock is still to see.
    func settled(_ expected: Expected) async -> Int {
        guard !isSettled(expected) else { return work.timerArms }
        return await withCheckedContinuation { continuation in
            settledWaiters.append((expected, continuation))
        }
    }

    /// The counters, for a driver's failure message.
    var workDescription: String {
        "busy \(work.busy), messages \(work.messages), losses \(work.losses), timer arms \(work.timerArms), firings \(work.timerFirings)"
    }

    private func resumeSettled() {
        guard !settledWaiters.isEmpty else { return }
        var waiting: [(Expected, CheckedContinuation<Int, Never>)] = []
        for (expected, continuation) in settledWaiters {
            if isSettled(expected) {
                continuation.resume(returning: work.timerArms)
            } else {
                waiting.append((expected, continuation))
            }
        }
        settledWaiters = waiting
    }
}
