import Foundation
import Testing

@testable import NotedServer

/// One push at a time per user, and never held up for ever by one stuck push.
@Suite struct UserTurnsTests {
    actor Log {
        var events: [String] = []
        func add(_ event: String) { events.append(event) }
    }

    @Test func aUsersPushesTakeTurnsAndOtherUsersDoNotWait() async throws {
        let turns = UserTurns(patience: .seconds(30))
        let log = Log()
        async let first: Void = turns.run("ada") {
            await log.add("ada 1 start")
            try await Task.sleep(for: .milliseconds(300))
            await log.add("ada 1 end")
        }
        try await Task.sleep(for: .milliseconds(50))
        async let second: Void = turns.run("ada") { await log.add("ada 2") }
        async let other: Void = turns.run("bob") { await log.add("bob") }
        _ = try await (first, second, other)
        let events = await log.events
        #expect(events.firstIndex(of: "ada 2")! > events.firstIndex(of: "ada 1 end")!, "\(events)")
        #expect(events.firstIndex(of: "bob")! < events.firstIndex(of: "ada 1 end")!, "\(events)")
    }

    @Test func aStuckPushHoldsUpItsUsersNextOnesOnlyOnceForThePatience() async throws {
        let turns = UserTurns(patience: .milliseconds(200))
        let log = Log()
        let (stuckGate, openStuck) = AsyncStream<Void>.makeStream()
        let stuck = Task {
            try await turns.run("ada") {
                for await _ in stuckGate {}
                await log.add("stuck done")
            }
        }
        while await turns.state(of: "ada").held == false { try await Task.sleep(for: .milliseconds(5)) }
        // The second push waits its patience, then takes the turn over.
        try await turns.run("ada") { await log.add("second") }
        #expect(await turns.takeovers == 1)
        // The stuck push still runs, but the turn is free: the next push does not wait.
        #expect(await turns.state(of: "ada") == (held: false, waiting: 0))
        try await turns.run("ada") { await log.add("third") }
        #expect(await turns.takeovers == 1, "the third push went ahead without a takeover")
        // A push holding the turn keeps it when the stuck one finally ends.
        let (holderGate, openHolder) = AsyncStream<Void>.makeStream()
        let holder = Task { try await turns.run("ada") { for await _ in holderGate {} } }
        while await turns.state(of: "ada").held == false { try await Task.sleep(for: .milliseconds(5)) }
        openStuck.finish()
        try await stuck.value
        #expect(await turns.state(of: "ada").held, "the stuck push's late release must not end another's turn")
        openHolder.finish()
        try await holder.value
        #expect(await turns.state(of: "ada") == (held: false, waiting: 0))
        #expect(await log.events == ["second", "third", "stuck done"])
    }
}
