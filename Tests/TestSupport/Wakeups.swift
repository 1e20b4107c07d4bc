import Foundation

/// Waiting on an actor's state without polling: whatever changes the state calls ``wake()``,
/// and a test waiting for a condition calls ``wait(until:isolation:)`` between looks at it,
/// and is woken by the next change or at its deadline, whichever comes first.
///
/// Called from the actor whose state it watches, the wait registers before that actor can run
/// anything else, so no change between the look and the wait goes unseen:
///
///     while connections.count <= index {
///         guard ContinuousClock.now < deadline else { throw … }
///         await wakeups.wait(until: deadline)
///     }
public final class Wakeups: @unchecked Sendable {
    private let lock = NSLock()
    private var waiting: [Int: CheckedContinuation<Void, Never>] = [:]
    private var next = 0

    public init() {}

    /// Wakes everyone waiting.
    public func wake() {
        let woken = lock.withLock {
            defer { waiting = [:] }
            return Array(waiting.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns at the next ``wake()``, or at `deadline`.
    public func wait(until deadline: ContinuousClock.Instant, isolation: isolated (any Actor)? = #isolation) async {
        let id = lock.withLock {
            next += 1
            return next
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline)
            self?.wake(id)
        }
        await withCheckedContinuation { continuation in
            lock.withLock { waiting[id] = continuation }
        }
        timer.cancel()
    }

    private func wake(_ id: Int) {
        lock.withLock { waiting.removeValue(forKey: id) }?.resume()
    }
}
