import Foundation

/// The server's time and timers (issue 47): what access tokens, authorization codes, sign-ins,
/// a session's deadlines and a revision are dated by, and what the sessions' deadlines and the
/// background work (sweeps, history, key reloads) sleep on. The system's by default; a test
/// gives its own and moves time on instead of waiting for it.
public struct ServerClock: Sendable {
    /// The time now.
    public var now: @Sendable () -> Date
    /// Returns after `duration` of this clock's time (throws when the task is cancelled).
    public var sleep: @Sendable (Duration) async throws -> Void

    public init(now: @escaping @Sendable () -> Date, sleep: @escaping @Sendable (Duration) async throws -> Void) {
        self.now = now
        self.sleep = sleep
    }

    /// The system's wall clock, and `Task.sleep`.
    public static let system = ServerClock(now: { Date() }, sleep: { try await Task.sleep(for: $0) })
}
