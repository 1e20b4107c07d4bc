import Foundation
import NIOConcurrencyHelpers
import NotedCore
import Testing

@testable import NotedServer

/// The session's outbox with its on-demand writer (a task only while something is queued).
@Suite struct OutboxTests {
    /// A write that records what it wrote and can be held (a slow client) or made to fail.
    final class Wire: Sendable {
        private struct State {
            var written: [String] = []
            var held: [CheckedContinuation<Void, Never>] = []
            var holding = false
            var failing = false
        }
        private let state = NIOLockedValueBox(State())
        let wrote = AsyncStream<String>.makeStream()

        var written: [String] { state.withLockedValue { $0.written } }

        func hold(_ on: Bool) {
            let release = state.withLockedValue { state in
                state.holding = on
                defer { state.held = [] }
                return on ? [] : state.held
            }
            for waiter in release { waiter.resume() }
        }

        func fail() { state.withLockedValue { $0.failing = true } }

        func write(_ item: Outgoing) async throws {
            await withCheckedContinuation { continuation in
                let wait = state.withLockedValue { state in
                    if state.holding { state.held.append(continuation) }
                    return state.holding
                }
                if !wait { continuation.resume() }
            }
            let text: String =
                switch item {
                case .text(let text): text
                case .message(let value): value.jsonString
                case .close(let code, _): "close:\(code)"
                case .heartbeat: "heartbeat"
                }
            if state.withLockedValue({ $0.failing }) { throw CancellationError() }
            state.withLockedValue { $0.written.append(text) }
            wrote.continuation.yield(text)
        }

        /// Waits until `count` items in all have been written.
        func waitFor(_ count: Int) async -> [String] {
            var iterator = wrote.stream.makeAsyncIterator()
            while written.count < count { _ = await iterator.next() }
            return written
        }
    }

    @Test func itemsFromManyTasksAreWrittenInQueueOrderAndTheWriterEndsWhenIdle() async throws {
        let wire = Wire()
        let outbox = Outbox(write: { try await wire.write($0) })
        #expect(!outbox.isWriting)
        // Each task queues its own numbered items; every task's items must keep their order.
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<250 { outbox.yield(.text("\(task):\(index)")) }
                }
            }
        }
        let written = await wire.waitFor(2_000)
        #expect(written.count == 2_000)
        for task in 0..<8 {
            let mine = written.filter { $0.hasPrefix("\(task):") }.map { Int($0.split(separator: ":")[1])! }
            #expect(mine == Array(0..<250), "task \(task)")
        }
        await outbox.waitUntilIdle()
        #expect(!outbox.isWriting, "no writer task is left once the queue is empty")
        // Queued again: a new writer starts.
        outbox.yield(.heartbeat)
        #expect(await wire.waitFor(2_001).last == "heartbeat")
    }

    @Test func finishAndWaitLetsAHeldWriterFinishAndStopsTakingItems() async throws {
        let wire = Wire()
        let outbox = Outbox(write: { try await wire.write($0) })
        wire.hold(true)
        outbox.yield(.text("a"))
        outbox.yield(.text("b"))
        outbox.finish()
        let finished = Task { await outbox.finishAndWait(upTo: .seconds(60)) }
        outbox.yield(.text("after finish"))
        wire.hold(false)
        await finished.value
        #expect(wire.written == ["a", "b"])
        #expect(!outbox.isWriting)
    }

    @Test func finishAndWaitGivesUpOnAWriterThatNeverEnds() async throws {
        let wire = Wire()
        let outbox = Outbox(write: { try await wire.write($0) })
        wire.hold(true)
        outbox.yield(.text("stuck"))
        await outbox.finishAndWait(upTo: .milliseconds(50))
        #expect(wire.written.isEmpty)
        wire.hold(false)
    }

    @Test func pastTheBoundTheQueueClosesWith1008AndTakesNothingMore() async throws {
        let wire = Wire()
        let outbox = Outbox(limit: 10, write: { try await wire.write($0) })
        wire.hold(true)
        outbox.yield(.text("12345"))
        outbox.yield(.text("67890"))
        #expect(!outbox.overflowed)
        outbox.yield(.text("x"))
        #expect(outbox.overflowed)
        outbox.yield(.text("dropped"))
        wire.hold(false)
        #expect(await wire.waitFor(3) == ["12345", "67890", "close:1008"])
        await outbox.waitUntilIdle()
        #expect(wire.written.count == 3)
    }

    @Test func aCloseOrAFailedWriteEndsTheOutbox() async throws {
        let closing = Wire()
        let finishedCount = NIOLockedValueBox(0)
        let outbox = Outbox(
            write: { try await closing.write($0) }, onFinish: { finishedCount.withLockedValue { $0 += 1 } })
        outbox.yield(.close(code: 4001, reason: "bye"))
        #expect(await closing.waitFor(1) == ["close:4001"])
        await outbox.waitUntilIdle()
        outbox.yield(.text("after the close"))
        outbox.finish()
        await outbox.waitUntilIdle()
        #expect(closing.written == ["close:4001"])
        #expect(finishedCount.withLockedValue { $0 } == 1, "onFinish is called once")

        let failing = Wire()
        failing.fail()
        let broken = Outbox(write: { try await failing.write($0) })
        broken.yield(.text("lost"))
        broken.yield(.text("also lost"))
        await broken.waitUntilIdle()
        broken.yield(.text("not taken"))
        #expect(!broken.isWriting)
        #expect(failing.written.isEmpty)
    }
}
