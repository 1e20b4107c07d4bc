import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import NotedServer

/// `withDeadline`: an answer in time passes through; one that never comes (not even on
/// cancellation, like a PostgreSQL query lost in a restart) becomes an error at the limit.
@Suite struct DeadlineTests {
    @Test func anAnswerInTimeAndAnErrorInTimePassThrough() async throws {
        #expect(try await withDeadline(.seconds(30), "test") { 42 } == 42)
        await #expect(throws: CancellationError.self) {
            try await withDeadline(.seconds(30), "test") { throw CancellationError() }
        }
    }

    @Test func anOperationThatNeverEndsFailsAtTheLimitAndIsCancelled() async throws {
        let (never, keep) = AsyncStream<Void>.makeStream()
        let cancelled = NIOLockedValueBox(false)
        do {
            _ = try await withDeadline(.milliseconds(100), "the test database") {
                await withTaskCancellationHandler {
                    for await _ in never {}  // ignores cancellation, like a lost query
                } onCancel: {
                    cancelled.withLockedValue { $0 = true }
                }
                return 1
            }
            Issue.record("expected the deadline to pass")
        } catch let error as StoreError {
            #expect("\(error)".contains("the test database did not answer within"), "\(error)")
        }
        #expect(cancelled.withLockedValue { $0 })
        keep.finish()
    }
}
