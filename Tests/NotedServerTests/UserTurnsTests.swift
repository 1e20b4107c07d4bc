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

    @Test func aStuckPushHoldsUpItsUsersNextOnesOnlyForThePatience() async throws {
        let turns = UserTurns(patience: .milliseconds(200))
        let log = Log()
        let stuck = Task { try await turns.run("ada") { try await Task.sleep(for: .seconds(30)) } }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        try await turns.run("ada") { await log.add("went ahead") }
        #expect(await log.events == ["went ahead"])
        #expect(ContinuousClock.now - started < .seconds(20))
        stuck.cancel()
    }
}
