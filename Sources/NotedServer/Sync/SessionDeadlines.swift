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
final class SessionDeadlines: Sendable {
    private struct Watched {
        let shared: NIOLockedValueBox<SyncSession.Shared>
        let continuation: Outbox
    }

    private struct State {
        var watched: [UUID: Watched] = [:]
        /// The task that sleeps until `wakeAt`, and its generation (a newer one replaces it).
        var ticker: Task<Void, Never>?
        var generation = 0
        var wakeAt: Date?
    }

    private let state = NIOLockedValueBox(State())

    /// Watches (again) the session `id`, whose deadline is in `shared`.
    func watch(_ id: UUID, shared: NIOLockedValueBox<SyncSession.Shared>, continuation: Outbox) {
        let deadline = shared.withLockedValue { $0.deadline }
        state.withLockedValue { state in
            state.watched[id] = Watched(shared: shared, continuation: continuation)
            if state.ticker != nil, let wake = state.wakeAt, wake <= deadline { return }
            state.ticker?.cancel()
            state.generation += 1
            state.wakeAt = deadline
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

    private func run(generation: Int) async {
        while true {
            let wait = state.withLockedValue { $0.wakeAt?.timeIntervalSinceNow } ?? 0
            // At most an hour at a time: a deadline far away never reaches an overflowing conversion.
            if wait > 0 { try? await Task.sleep(for: .milliseconds(Int(min(wait, 3600) * 1000) + 1)) }
            if Task.isCancelled { return }
            let now = Date()
            let (due, stop) = state.withLockedValue { state -> ([(Outbox, ErrorCode)], Bool) in
                guard state.generation == generation else { return ([], true) }
                var due: [(Outbox, ErrorCode)] = []
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
                if next == nil { state.ticker = nil }
                return (due, next == nil)
            }
            for (continuation, code) in due {
                let message = code == .tokenExpired ? "the access token expired" : "no valid hello"
                continuation.yield(.message(ServerMessage.error(ServerError(ProtocolError(code, message))).json))
                continuation.yield(.close(code: 4001, reason: message))
            }
            if stop { return }
        }
    }
}
