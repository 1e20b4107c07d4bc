import Foundation
import NIOConcurrencyHelpers

/// Waits for `operation` at most `limit`, then throws ``StoreError/unreachable(_:)``.
///
/// For database calls that may never return: PostgresNIO 1.33.2 sometimes leaves a query of a
/// transaction unanswered for ever when PostgreSQL restarts under it (seen in `scripts/faults`'
/// PostgreSQL scenario: the query sent as the server went away neither returned nor threw).
/// The operation runs in a task of its own, cancelled when the limit passes and then left to
/// end (or not) on its own: its caller gets an answer either way, and a sync session that
/// waited on it goes on (closed with an error, so its client reconnects and resends).
func withDeadline<T: Sendable>(
    _ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let settled = NIOLockedValueBox(false)
    let work = NIOLockedValueBox<Task<Void, Never>?>(nil)
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
        let timer = Task {
            guard (try? await Task.sleep(for: limit)) != nil else { return }
            if settled.withLockedValue({ done in
                defer { done = true }
                return !done
            }) {
                work.withLockedValue { $0?.cancel() }
                continuation.resume(throwing: StoreError.unreachable("\(what) did not answer within \(limit)"))
            }
        }
        work.withLockedValue {
            $0 = Task {
                let result: Result<T, Error>
                do { result = .success(try await operation()) } catch { result = .failure(error) }
                timer.cancel()
                if settled.withLockedValue({ done in
                    defer { done = true }
                    return !done
                }) {
                    continuation.resume(with: result)
                }
            }
        }
    }
}
