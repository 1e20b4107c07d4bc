import Foundation
import NIOConcurrencyHelpers

/// A fixed-window counter per key: at most `limit` attempts per `window`.
///
/// Process memory is fine here: a limit that resets on restart or differs between nodes still
/// slows down guessing, and correctness never depends on it.
public final class RateLimiter: Sendable {
    private struct Window { var start: Date; var count: Int }
    private let state = NIOLockedValueBox<[String: Window]>([:])
    let limit: Int
    let window: TimeInterval

    public init(limit: Int, window: TimeInterval) {
        self.limit = limit
        self.window = window
    }

    /// Counts an attempt for each key; throws `rateLimited` when any key is over its limit.
    func check(keys: [String], now: Date = Date()) throws(AuthError) {
        let retryAfter: Int? = state.withLockedValue { windows in
            if windows.count > 100_000 {
                windows = windows.filter { now.timeIntervalSince($0.value.start) < window }
            }
            var retry: Int?
            for key in keys {
                var current = windows[key] ?? Window(start: now, count: 0)
                if now.timeIntervalSince(current.start) >= window { current = Window(start: now, count: 0) }
                current.count += 1
                windows[key] = current
                if current.count > limit {
                    retry = max(retry ?? 1, Int((window - now.timeIntervalSince(current.start)).rounded(.up)))
                }
            }
            return retry
        }
        if let retryAfter { throw AuthError(kind: .rateLimited(retryAfter: retryAfter)) }
    }
}
