import Foundation
import NIOConcurrencyHelpers
import NotedCore

/// The hello deadline and the token expiry of every session of a server, enforced by one task
/// that sleeps until the earliest of them (docs/protocol.md section 3). A sleeping task of its
/// own cost every idle connection about 2 KB (issue 18, docs/benchmarks.md "Idle connections").
///
/// A session is watched from its start; its deadline lives in its `Shared` box, changed by
/// `hello` and `reauth`, each followed by ``watch(_:shared:continuation:)`` again. When the
/// deadline passes the session is sent an error and a 4001 close, and is no longer watched.
///
/// The same task sends every watched session (every open one) a heartbeat every
/// `heartbeatInterval`: an unsolicited pong frame (RFC 6455 section 5.5.3, "a unidirectional
/// heartbeat", no answer expected). hummingbird-websocket's auto-ping gave every connection a
/// task of its own sleeping between pings, about 3.3 KB of every idle connection. A heartbeat
/// keeps NAT and proxy mappings alive, and it is data the peer's TCP must acknowledge: a peer
/// that vanished stops acknowledging, and the kernel drops the connection once
/// `TCP_USER_TIMEOUT` passes (``OriginGuardedChannel``), which ends the session. Unlike a ping's
/// pong, nothing checks that the client's process answers: a client that hangs while its
/// system still acknowledges keeps its connection, as over any TCP connection. Each round is
/// spread over the interval (`heartbeatSlots` ticks, each serving the sessions of one slot):
/// a heartbeat to every session at once would start as many short writer tasks at once.
final class SessionDeadlines: Sendable {
    private struct Watched {
        let shared: NIOLockedValueBox<SyncSession.Shared>
        let continuation: Outbox
        /// Which heartbeat tick of a round serves it.
        let slot: Int
    }

    private struct State {
        var watched: [UUID: Watched] = [:]
        /// The task that sleeps until `wakeAt` (or the next heartbeat tick), and its generation
        /// (a newer one replaces it).
        var ticker: Task<Void, Never>?
        var generation = 0
        /// The earliest deadline, when the task last looked.
        var wakeAt: Date?
        /// The next heartbeat tick, and the slot it serves.
        var beatAt: Date?
        var beatSlot = 0
        var nextSlot = 0

        /// When the task wakes next.
        var wake: Date? {
            switch (wakeAt, beatAt) {
            case (let a?, let b?): min(a, b)
            case (let a?, nil): a
            case (nil, let b?): b
            case (nil, nil): nil
            }
        }
    }

    private let state = NIOLockedValueBox(State())
    let heartbeatInterval: Duration
    let heartbeatSlots: Int
    /// What deadlines are dated and waited by (the configuration's).
    let clock: ServerClock

    init(heartbeatInterval: Duration = .seconds(30), heartbeatSlots: Int = 30, clock: ServerClock = .system) {
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatSlots = max(1, heartbeatSlots)
        self.clock = clock
    }

    private var tick: TimeInterval {
        (heartbeatInterval / heartbeatSlots).timeInterval
    }

    /// Watches (again) the session `id`, whose deadline is in `shared`.
    func watch(_ id: UUID, shared: NIOLockedValueBox<SyncSession.Shared>, continuation: Outbox) {
        let deadline = shared.withLockedValue { $0.deadline }
        let tick = tick
        state.withLockedValue { state in
            let slot = state.watched[id]?.slot ?? state.nextSlot
            if state.watched[id] == nil { state.nextSlot = (state.nextSlot + 1) % heartbeatSlots }
            state.watched[id] = Watched(shared: shared, continuation: continuation, slot: slot)
            // The task reads `wakeAt` each time it wakes; it is woken earlier only if it would
            // otherwise sleep past this deadline.
            let wake = state.wake
            state.wakeAt = min(state.wakeAt ?? deadline, deadline)
            if state.beatAt == nil { state.beatAt = clock.now().addingTimeInterval(tick) }
            if state.ticker != nil, let wake, wake <= deadline { return }
            state.ticker?.cancel()
            state.generation += 1
            let generation = state.generation
            state.ticker = Task { await self.run(generation: generation) }
        }
    }

    /// The session ended.
    func unwatch(_ id: UUID) {
        state.withLockedValue { _ = $0.watched.removeValue(forKey: id) }
    }

    /// How many sessions are watched (tests).
    var count: Int { state.withLockedValue { $0.watched.count } }

    /// Whether the task runs (tests).
    var running: Bool { state.withLockedValue { $0.ticker != nil } }

    private func run(generation: Int) async {
        let tick = tick
        while true {
            if let wake = state.withLockedValue({ $0.wake }) { try? await clock.sleepUntil(wake) }
            if Task.isCancelled { return }
            let now = clock.now()
            let (due, beats, stop) = state.withLockedValue { state -> ([(Outbox, ErrorCode)], [Outbox], Bool) in
                guard state.generation == generation else { return ([], [], true) }
                var due: [(Outbox, ErrorCode)] = []
                if let wakeAt = state.wakeAt, wakeAt <= now {
                    var next: Date?
                    for (id, watched) in state.watched {
                        let (deadline, code) = watched.shared.withLockedValue { ($0.deadline, $0.deadlineCode) }
                        if deadline <= now {
                            due.append((watched.continuation, code))
                            state.watched[id] = nil
                        } else {
                            next = min(next ?? deadline, deadline)
                        }
                    }
                    state.wakeAt = next
                }
                var beats: [Outbox] = []
                if let beatAt = state.beatAt, beatAt <= now {
                    let slot = state.beatSlot
                    for watched in state.watched.values where watched.slot == slot {
                        beats.append(watched.continuation)
                    }
                    state.beatSlot = (slot + 1) % heartbeatSlots
                    state.beatAt = now.addingTimeInterval(tick)
                }
                guard !state.watched.isEmpty else {
                    state.ticker = nil
                    state.wakeAt = nil
                    state.beatAt = nil
                    return (due, beats, true)
                }
                return (due, beats, false)
            }
            for (continuation, code) in due {
                let message = code == .tokenExpired ? "the access token expired" : "no valid hello"
                continuation.yield(.message(ServerMessage.error(ServerError(ProtocolError(code, message))).json))
                continuation.yield(.close(code: 4001, reason: message))
            }
            for continuation in beats {
                continuation.yield(.heartbeat)
            }
            if stop { return }
        }
    }
}
