import Foundation
import NotedCore

/// Drives a ``SyncStateMachine`` over a ``SyncTransport``, the ``LocalStore`` and a clock.
///
/// The engine owns the connection: it reconnects with backoff until stopped, refreshes the
/// access token before it expires and re-authenticates in place.
public actor SyncEngine<C: Clock> where C.Duration == Duration {
    private var machine: SyncStateMachine<C.Instant>
    private let store: LocalStore
    private let transport: any SyncTransport
    private let url: URL
    private let tokens: TokenManager
    private let events: EventHub
    private let clock: C
    private var connection: (id: Int, value: any SyncConnection, outgoing: AsyncStream<JSONValue>.Continuation)?
    /// Background work by key (connect, reader and writer of a connection, refresh), so that
    /// finished work does not pile up on a long-lived engine.
    private var tasks: [String: Task<Void, Never>] = [:]
    private var timer: Task<Void, Never>?
    private var snapshot = SnapshotPull()
    private(set) var status: SyncStatus = .stopped
    private var device = ""

    init(store: LocalStore, transport: any SyncTransport, url: URL, tokens: TokenManager, events: EventHub,
         configuration: SyncStateMachine<C.Instant>.Configuration, clock: C, seed: UInt64) {
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
        guard timer == nil else { return }
        device = (try? await store.deviceID()) ?? UUID().uuidString.lowercased()
        let clock = clock
        timer = Task { [weak self] in
            while !Task.isCancelled {
                try? await clock.sleep(for: .milliseconds(25))
                await self?.tick()
            }
        }
        await perform(machine.start())
    }

    /// Stops syncing and closes the connection; in-flight changes stay in the store for next time.
    public func stop() async {
        timer?.cancel()
        timer = nil
        await perform(machine.stop())
        for task in tasks.values { task.cancel() }
        tasks = [:]
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

    private func tick() async {
        await perform(machine.tick(now: clock.now))
    }

    private func opened(id: Int, connection value: any SyncConnection, token: String) async {
        guard case .connecting(id) = machine.phase else {
            await value.close()
            return
        }
        let (outgoing, continuation) = AsyncStream.makeStream(of: JSONValue.self)
        connection = (id, value, continuation)
        tasks["writer"] = Task {
            for await message in outgoing {
                do {
                    try await value.send(message)
                } catch {
                    await value.close()
                    return
                }
            }
        }
        tasks["reader"] = Task { [weak self] in
            for await message in value.messages {
                await self?.received(message, connection: id)
            }
            await self?.lost(id: id)
        }
        let cursor = (try? await store.cursor()) ?? 0
        await perform(machine.connected(id: id, token: token, device: device, cursor: cursor, now: clock.now))
    }

    private func lost(id: Int) async {
        if connection?.id == id {
            connection?.outgoing.finish()
            connection = nil
        }
        await perform(machine.connectionLost(id: id, now: clock.now))
    }

    private func received(_ message: JSONValue, connection id: Int) async {
        guard connection?.id == id else { return }
        if message["type"] == "welcome", let limits = message["limits"], limits.objectValue != nil {
            // Local edits are checked against what this server accepts.
            try? await store.setMeta("limits", limits.jsonString)
        }
        await perform(machine.received(message, now: clock.now))
    }

    // MARK: Actions

    private func perform(_ actions: [SyncStateMachine<C.Instant>.Action]) async {
        for action in actions {
            await perform(action)
        }
    }

    private func perform(_ action: SyncStateMachine<C.Instant>.Action) async {
        switch action {
        case .connect(let id):
            let transport = transport
            let tokens = tokens
            let url = url
            tasks["connect"] = Task { [weak self] in
                do {
                    let token = try await tokens.accessToken()
                    let connection = try await transport.connect(to: url)
                    await self?.opened(id: id, connection: connection, token: token)
                } catch {
                    await self?.report(error)
                    await self?.lost(id: id)
                }
            }
        case .send(let message):
            connection?.outgoing.yield(message)
        case .close:
            if let connection {
                connection.outgoing.finish()
                let value = connection.value
                self.connection = nil
                await value.close()
            }
        case .storePage(let message):
            await storePage(message)
        case .applyAnswer(let message):
            do {
                let effect = message["type"]?.stringValue == "ack" ? try await store.applyAck(message) : try await store.applyReject(message)
                await events.emit(effect, origin: .remote)
                await perform(machine.answerApplied(needsPull: effect.needsPull, retryLater: effect.retryLater, now: clock.now))
            } catch {
                await fail(error)
            }
        case .applyBroadcast(let message):
            do {
                let (applied, effect) = try await store.applyBroadcast(message, limits: machine.limits)
                await events.emit(effect, origin: .remote)
                await perform(machine.broadcastApplied(applied, now: clock.now))
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
            let reject: JSONValue = ["type": "reject", "ccid": .string(change.ccid), "collection": "notes",
                                     "id": .string(change.recordID), "code": "too_large", "message": .string(reason)]
            do {
                await events.emit(try await store.applyReject(reject), origin: .local)
            } catch {
                await report(error)
            }
        case .refreshToken:
            let tokens = tokens
            tasks["refresh"] = Task { [weak self] in
                do {
                    let token = try await tokens.refresh().accessToken
                    await self?.refreshed(token)
                } catch {
                    await self?.report(error)
                    await self?.refreshed(nil)
                }
            }
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

    private func refreshed(_ token: String?) async {
        await perform(machine.tokenRefreshed(token, now: clock.now))
    }

    private func storePage(_ message: JSONValue) async {
        guard let cursor = message["cursor"]?.intValue else {
            await fail(NotedClientError(.server, "a changes page without a cursor"))
            return
        }
        let records = (message["records"]?.arrayValue ?? []).compactMap(LocalStore.record(from:))
        let more = message["more"]?.boolValue ?? false
        do {
            // The machine's cursor is still the `since` of the pull this page answers.
            let (storeCursor, keep) = snapshot.page(records: records, since: machine.cursor, cursor: cursor, more: more,
                                                    reset: message["reset"]?.boolValue == true)
            var effect = try await store.storePage(records: records, cursor: storeCursor)
            if let keep {
                let dropped = try await store.dropAbsent(keeping: keep)
                effect.removed += dropped.removed
            }
            await events.emit(effect, origin: .remote)
            await perform(machine.pageStored(more: more, cursor: cursor, now: clock.now))
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
}
