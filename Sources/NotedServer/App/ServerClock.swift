import Foundation

/// The server's time and timers (issue 47): what access tokens, authorization codes, sign-ins,
/// a session's deadlines and a revision are dated by, and what the sessions' deadlines and the
/// background work (sweeps, history, key reloads) sleep on. The system's by default; a test
/// gives its own and moves time on instead of waiting for it.
public struct ServerClock: Sendable {
    /// The time now.
    public var now: @Sendable () -> Date
    /// Returns once this clock's time reaches the date (at once when it has; throws when the
    /// task is cancelled). A deadline, not a length: time moved on meanwhile is not lost.
    public var sleepUntil: @Sendable (Date) async throws -> Void

    public init(now: @escaping @Sendable () -> Date, sleepUntil: @escaping @Sendable (Date) async throws -> Void) {
        self.now = now
        self.sleepUntil = sleepUntil
    }

    /// Returns after `duration` of this clock's time.
    public func sleep(_ duration: Duration) async throws {
        try await sleepUntil(now().addingTimeInterval(duration.timeInterval))
    }

    /// The system's wall clock, and `Task.sleep`.
    public static let system = ServerClock(
        now: { Date() },
        sleepUntil: { date in
            // At most an hour at a time: a date far away never reaches an overflowing conversion.
            while case let wait = date.timeIntervalSinceNow, wait > 0 {
                try await Task.sleep(for: .milliseconds(Int(min(wait, 3600) * 1000) + 1))
            }
        })
}
