import NIOConcurrencyHelpers
import NotedCore

/// What a session sends, queued in order, bounded in bytes, and written by a task that exists
/// only while something is queued.
///
/// The bound (docs/security.md, "Memory"): a client that asks for pages and does not read them
/// cannot grow the server's memory without end. Past `limit` bytes waiting, nothing more is
/// queued, a 1008 close follows what is queued, and the session stops reading (`overflowed`);
/// the client can come back later and resume from its cursor.
///
/// The writer: a session used to keep a task of its own waiting on its queue for its whole
/// life, holding the memory its deepest write had needed (issue 18, docs/benchmarks.md "Idle
/// connections"). Now the first item queued while nothing is being written starts a task that
/// writes until the queue is empty and then ends, so an idle session has no writer. At most
/// one such task runs per outbox, so items go out in the order they were queued, and replies
/// and broadcasts never interleave inside a frame.
final class Outbox: Sendable {
    private struct State {
        var queue: [Outgoing] = []
        var head = 0
        var queued = 0
        var overflowed = false
        /// No more items are taken: `finish()` was called, a close was written, or a write failed.
        var finished = false
        var finishReported = false
        /// A writer task runs (or is being started); `generation` tells one start from the next.
        var writing = false
        var generation = 0
        var writer: Task<Void, Never>?
        /// Waiting in ``finishAndWait(upTo:)`` for the writer to end.
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0

        /// Marks the outbox finished; true the first time (when `onFinish` is to be called).
        mutating func markFinished() -> Bool {
            finished = true
            defer { finishReported = true }
            return !finishReported
        }

        var isEmpty: Bool { head == queue.count }

        mutating func pop() -> Outgoing? {
            guard !isEmpty else { return nil }
            let item = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: false)
                head = 0
            }
            return item
        }

        /// The writer ended: what waits for it may go on.
        mutating func writerEnded() -> [CheckedContinuation<Void, Never>] {
            writing = false
            writer = nil
            let waiting = Array(waiters.values)
            waiters = [:]
            return waiting
        }
    }

    /// Where items go: written by the on-demand writer, or (tests, the simulation) handed to a
    /// stream as they are queued, in order, with no writer.
    private enum Sink {
        case writer(@Sendable (Outgoing) async throws -> Void)
        case stream(AsyncStream<Outgoing>.Continuation)
    }

    private let state = NIOLockedValueBox(State())
    private let sink: Sink
    private let onFinish: @Sendable () -> Void
    /// Closes the connection at once (shutdown, for a client that does not answer a close).
    let closeConnection: @Sendable () -> Void
    let limit: Int

    /// - Parameters:
    ///   - write: writes one item (a `.text` or a `.close`; a `.message` is encoded when queued).
    ///   - onFinish: called once when the outbox takes no more items.
    ///   - closeConnection: closes the connection without a handshake.
    init(
        limit: Int = .max, write: @escaping @Sendable (Outgoing) async throws -> Void,
        onFinish: @escaping @Sendable () -> Void = {},
        closeConnection: @escaping @Sendable () -> Void = {}
    ) {
        self.limit = limit
        self.sink = .writer(write)
        self.onFinish = onFinish
        self.closeConnection = closeConnection
    }

    /// An outbox that hands every item to a stream as it is queued (tests and the simulation
    /// read what a session was sent from it); `finish()` finishes the stream. Nothing is
    /// written, so queued bytes only grow: `limit` counts everything ever queued.
    init(_ continuation: AsyncStream<Outgoing>.Continuation, limit: Int = .max) {
        self.limit = limit
        self.sink = .stream(continuation)
        self.onFinish = { continuation.finish() }
        self.closeConnection = {}
    }

    /// Queues a message (encoded here, so that its size is known); dropped once the queue
    /// overflowed or the outbox finished.
    func yield(_ item: Outgoing) {
        var item = item
        if case .message(let value) = item { item = .text(value.jsonString) }
        let size = item.size
        let generation: Int? = state.withLockedValue { state in
            guard !state.overflowed, !state.finished else { return nil }
            if case .close = item {
            } else if state.queued + size > limit {
                state.overflowed = true
                item = .close(code: 1008, reason: "too much unread; reconnect and pull from your cursor")
            } else {
                state.queued += size
            }
            if case .stream(let continuation) = sink {
                continuation.yield(item)
                return nil
            }
            state.queue.append(item)
            guard !state.writing else { return nil }
            state.writing = true
            state.generation += 1
            return state.generation
        }
        guard let generation else { return }
        let task = Task { await self.drain() }
        state.withLockedValue { state in
            // Kept for cancelling, unless that writer has already ended.
            if state.writing && state.generation == generation { state.writer = task }
        }
    }

    /// Writes what is queued, in order, until the queue is empty.
    private func drain() async {
        while true {
            // The next item, or (in the same critical section, so that a `yield` either sees
            // this writer or starts the next one) the end of this writer.
            let (next, waiting): (Outgoing?, [CheckedContinuation<Void, Never>]) = state.withLockedValue { state in
                if let item = state.pop() { return (item, []) }
                return (nil, state.writerEnded())
            }
            guard let item = next else {
                for waiter in waiting { waiter.resume() }
                return
            }
            var failed = false
            do {
                if case .writer(let write) = sink { try await write(item) }
            } catch {
                failed = true
            }
            let isClose: Bool = if case .close = item { true } else { false }
            let ended: (waiting: [CheckedContinuation<Void, Never>], report: Bool)? = state.withLockedValue { state in
                state.queued -= item.size
                guard failed || isClose else { return nil }
                // After a close, or once the connection is gone, nothing more goes out.
                let report = state.markFinished()
                state.queue.removeAll()
                state.head = 0
                state.queued = 0
                return (state.writerEnded(), report)
            }
            if let ended {
                for waiter in ended.waiting { waiter.resume() }
                if ended.report { onFinish() }
                return
            }
        }
    }

    /// Takes no more items; what is queued is still written.
    func finish() {
        if state.withLockedValue({ $0.markFinished() }) { onFinish() }
    }

    /// Takes no more items and waits until what is queued is written, at most `timeout`; past
    /// it the writer is cancelled.
    func finishAndWait(upTo timeout: Duration) async {
        finish()
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.writerEnded()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let written = await group.next() ?? false
            group.cancelAll()
            if !written {
                state.withLockedValue { $0.writer }?.cancel()
            }
        }
    }

    /// Returns once no writer runs (or the waiting task is cancelled).
    private func writerEnded() async {
        let key: Int? = state.withLockedValue { state in
            guard state.writing else { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let key else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLockedValue { state in
                    guard state.writing, !Task.isCancelled else { return true }
                    state.waiters[key] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: key) }?.resume()
        }
    }

    /// True while a writer task runs (tests).
    var isWriting: Bool { state.withLockedValue { $0.writing } }

    /// Returns once no writer runs (tests).
    func waitUntilIdle() async {
        await writerEnded()
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
        case .heartbeat: 0
        }
    }
}
