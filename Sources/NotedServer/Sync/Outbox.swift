import NIOConcurrencyHelpers
import NotedCore

/// What a session sends, queued for its writer and bounded in bytes (docs/security.md,
/// "Memory"): a client that asks for pages and does not read them can no longer grow the
/// server's memory without end. Past `limit` bytes waiting, nothing more is queued, a 1008
/// close follows what is queued, and the session stops reading (`overflowed`); the client can
/// come back later and resume from its cursor.
///
/// It has the continuation's `yield` and `finish`, so it goes wherever one went.
struct Outbox: Sendable {
    private struct State {
        var queued = 0
        var overflowed = false
    }
    private let continuation: AsyncStream<Outgoing>.Continuation
    private let state = NIOLockedValueBox(State())
    let limit: Int

    init(_ continuation: AsyncStream<Outgoing>.Continuation, limit: Int = .max) {
        self.continuation = continuation
        self.limit = limit
    }

    /// Queues a message (encoded here, so that its size is known); dropped once the queue
    /// overflowed.
    func yield(_ item: Outgoing) {
        var item = item
        if case .message(let value) = item { item = .text(value.jsonString) }
        let size = item.size
        let admitted: Bool? = state.withLockedValue { state in
            if state.overflowed { return false }
            if case .close = item {} else if state.queued + size > limit {
                state.overflowed = true
                return nil
            }
            state.queued += size
            return true
        }
        switch admitted {
        case true?:
            continuation.yield(item)
        case nil:
            continuation.yield(.close(code: 1008, reason: "too much unread; reconnect and pull from your cursor"))
        case false?:
            break
        }
    }

    /// The writer wrote `item`.
    func written(_ item: Outgoing) {
        let size = item.size
        state.withLockedValue { $0.queued -= size }
    }

    func finish() {
        continuation.finish()
    }

    /// True once the queue overflowed: the session stops reading and closes.
    var overflowed: Bool { state.withLockedValue { $0.overflowed } }
}

extension Outgoing {
    /// What the item holds in bytes (an unencoded message counts as empty).
    var size: Int {
        switch self {
        case .text(let text): text.utf8.count
        case .message: 0
        case .close(_, let reason): reason.utf8.count
        }
    }
}
