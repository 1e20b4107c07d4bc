import Foundation

/// The server's time and timers (issue 47): what access tokens, authorization codes, sign-ins,
/// a session's deadlines and a revision are dated by, and what the sessions' deadlines and the
/// background work (sweeps, history, key reloads) sleep on. The system's by default; a test
/// gives its own and moves time on instead of waiting for it.
public struct ServerClock: Sendable {
    /// The time now.
    public var now: @Sendable () -> Date
    /// Returns after an interval (the system's: monotonic, whatever the wall clock does;
    /// throws when the task is cancelled). For the periods of background work.
    public var sleep: @Sendable (Duration) async throws -> Void
    /// Returns once `now` reaches the date (at once when it has; throws when the task is
    /// cancelled). For deadlines dated by `now` (a token's expiry): time that moved on
    /// meanwhile is not lost.
    public var sleepUntil: @Sendable (Date) async throws -> Void

    public init(
        now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (Duration) async throws -> Void,
        sleepUntil: @escaping @Sendable (Date) async throws -> Void
    ) {
        self.now = now
        self.sleep = sleep
        self.sleepUntil = sleepUntil
    }

    /// The system's wall clock, `Task.sleep` for intervals, and for deadlines sleeps of the
    /// time left, looked at again after each (a wall clock stepped back waits the step more).
    public static let system = ServerClock(
        now: { Date() },
        sleep: { try await Task.sleep(for: $0) },
        sleepUntil: { date in
            // At most an hour at a time: a date far away never reaches an overflowing conversion.
            while case let wait = date.timeIntervalSinceNow, wait > 0 {
                try await Task.sleep(for: .milliseconds(Int(min(wait, 3600) * 1000) + 1))
            }
        })
}
