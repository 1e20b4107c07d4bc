import Foundation
import NIOConcurrencyHelpers
import NotedCore
import Testing

@testable import NotedServer

/// The one task that enforces every session's hello deadline and token expiry.
@Suite struct SessionDeadlinesTests {
    /// A watched session: its deadline box and what it was sent.
    struct Watched {
        let id = UUID()
        let shared: NIOLockedValueBox<SyncSession.Shared>
        let outbox: Outbox
        let stream: AsyncStream<Outgoing>

        init(in seconds: Double, _ code: ErrorCode = .unauthenticated) {
            shared = NIOLockedValueBox(
                SyncSession.Shared(deadline: Date().addingTimeInterval(seconds), deadlineCode: code))
            let (stream, continuation) = AsyncStream.makeStream(of: Outgoing.self)
            self.stream = stream
            outbox = Outbox(continuation)
        }

        /// The error code and close code sent, once both came.
        func closed() async -> (String?, UInt16?) {
            var code: String?
            for await item in stream {
                switch item {
                case .text(let text): code = (try? JSONValue.parse(text))?["code"]?.stringValue
                case .message(let value): code = value["code"]?.stringValue
                case .close(let close, _): return (code, close)
                case .heartbeat: break
                }
            }
            return (code, nil)
        }
    }

    @Test func eachSessionIsClosedAtItsDeadlineAndAnEarlierOneWatchedLaterIsNotDelayed() async throws {
        let deadlines = SessionDeadlines()
        let far = Watched(in: 3600)
        // Far enough that no scheduling delay on a loaded machine reaches it: had the early
        // deadline waited for it, the early session would be closed a minute late.
        let late = Watched(in: 60, .tokenExpired)
        let early = Watched(in: 0.3)
        deadlines.watch(far.id, shared: far.shared, continuation: far.outbox)
        deadlines.watch(late.id, shared: late.shared, continuation: late.outbox)
        // Watched after a later one: the task that slept until the later one wakes for it.
        deadlines.watch(early.id, shared: early.shared, continuation: early.outbox)
        let first = await early.closed()
        #expect(first.0 == "unauthenticated")
        #expect(first.1 == 4001)
        #expect(deadlines.count == 2, "the later sessions are still watched")
        // The later one's deadline comes (as a token expiring): closed with its own code.
        late.shared.withLockedValue { $0.deadline = Date() }
        deadlines.watch(late.id, shared: late.shared, continuation: late.outbox)
        let second = await late.closed()
        #expect(second.0 == "token_expired")
        #expect(second.1 == 4001)
        #expect(deadlines.count == 1)
        deadlines.unwatch(far.id)
        #expect(deadlines.count == 0)
    }

    @Test func aDeadlineMovedLaterBeforeItCameAndAnUnwatchedSessionAreNotClosed() async throws {
        let deadlines = SessionDeadlines()
        let moved = Watched(in: 0.3)
        let gone = Watched(in: 0.3)
        let marker = Watched(in: 0.8)
        deadlines.watch(moved.id, shared: moved.shared, continuation: moved.outbox)
        deadlines.watch(gone.id, shared: gone.shared, continuation: gone.outbox)
        deadlines.watch(marker.id, shared: marker.shared, continuation: marker.outbox)
        // As `hello` does: the deadline becomes the token's expiry, and the session is watched again.
        moved.shared.withLockedValue {
            $0.deadline = Date().addingTimeInterval(3600)
            $0.deadlineCode = .tokenExpired
        }
        deadlines.watch(moved.id, shared: moved.shared, continuation: moved.outbox)
        deadlines.unwatch(gone.id)
        _ = await marker.closed()
        // Past both first deadlines: neither session was sent anything.
        moved.outbox.finish()
        gone.outbox.finish()
        #expect(await moved.closed() == (nil, nil))
        #expect(await gone.closed() == (nil, nil))
        #expect(deadlines.count == 1)
    }

    @Test func everyWatchedSessionGetsHeartbeatsSpreadOverTheIntervalUntilItEnds() async throws {
        // Two slots of 20 ms: each session gets one heartbeat per 40 ms round.
        let deadlines = SessionDeadlines(heartbeatInterval: .milliseconds(40), heartbeatSlots: 2)
        let first = Watched(in: 3600)
        let second = Watched(in: 3600)
        deadlines.watch(first.id, shared: first.shared, continuation: first.outbox)
        deadlines.watch(second.id, shared: second.shared, continuation: second.outbox)
        #expect(deadlines.running)
        for session in [first, second] {
            var iterator = session.stream.makeAsyncIterator()
            for _ in 0..<3 {
                guard case .heartbeat? = await iterator.next() else {
                    Issue.record("expected a heartbeat")
                    return
                }
            }
        }
        // A deadline still comes between heartbeats, on time: a session watched while the task
        // sleeps until its next tick, with a deadline before a later tick.
        let early = Watched(in: 0.05)
        deadlines.watch(early.id, shared: early.shared, continuation: early.outbox)
        #expect(await early.closed() == ("unauthenticated", 4001))
        deadlines.unwatch(first.id)
        deadlines.unwatch(second.id)
        // The task stops at its next tick once nobody is watched.
        for _ in 0..<500 where deadlines.running { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!deadlines.running)
        #expect(deadlines.count == 0)
    }
}
