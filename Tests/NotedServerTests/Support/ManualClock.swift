import Foundation

@testable import NotedServer

/// A server clock that moves only when a test moves it (``advance(by:)``): tokens, codes and
/// sign-ins expire, and the sessions' deadlines and the background work wake, when the test
/// says, instead of after a real wait. Starts at the real time (tokens it dates are sane).
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var time = Date()
    private var sleepers: [UUID: (until: Date, wake: CheckedContinuation<Void, any Error>)] = [:]

    var now: Date { lock.withLock { time } }

    /// What the server is given.
    var server: ServerClock {
        ServerClock(
            now: { [self] in now },
            sleep: { [self] duration in try await sleep(until: now.addingTimeInterval(duration.timeInterval)) },
            sleepUntil: { [self] date in try await sleep(until: date) })
    }

    /// Moves time on by `duration` and wakes every sleep that ends by then.
    func advance(by duration: Duration) {
        let due = lock.withLock {
            time = time.addingTimeInterval(duration.timeInterval)
            let due = sleepers.filter { $0.value.until <= time }
            for id in due.keys { sleepers[id] = nil }
            return due.values.map(\.wake)
        }
        for wake in due { wake.resume() }
    }

    /// Whether `count` sleeps of the server wait on this clock, once they do (a task started
    /// just before may not have begun its sleep yet); false after 5 s of real time without.
    func sleeping(atLeast count: Int = 1) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(5)
        while lock.withLock({ sleepers.count }) < count {
            guard ContinuousClock.now < deadline else { return false }
            await Task.yield()
        }
        return true
    }

    private func sleep(until: Date) async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (wake: CheckedContinuation<Void, any Error>) in
                let ready = lock.withLock { () -> Bool in
                    guard until > time, !Task.isCancelled else { return true }
                    sleepers[id] = (until, wake)
                    return false
                }
                if ready { Task.isCancelled ? wake.resume(throwing: CancellationError()) : wake.resume() }
            }
        } onCancel: {
            lock.withLock { sleepers.removeValue(forKey: id) }?.wake.resume(throwing: CancellationError())
        }
    }
}
