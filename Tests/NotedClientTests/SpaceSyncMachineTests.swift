import Foundation
import NotedCore
import Testing

@testable import NotedClient

/// Protocol 2 in the state machine (docs/protocol.md, "Spaces"): the personal space is pulled
/// first, then each shared space whose `seq` is past this device's cursor, one at a time; a
/// `spaces` message pulls a space just joined and forgets one left.
@Suite struct SpaceSyncMachineTests {
    /// Answers the pull in `actions` with one last page at `cursor` and stores it.
    func answer(_ harness: inout MachineHarness, _ actions: [Machine.Action], cursor: Int64) -> [Machine.Action] {
        guard let pull = sentMessages(actions).first(where: { $0["type"] == "pull" }) else {
            Issue.record("expected a pull in \(actions)")
            return []
        }
        var page: [String: JSONValue] = [
            "type": "changes", "records": [], "cursor": .int(cursor), "more": false, "reset": false,
            "rid": pull["rid"] ?? .null,
        ]
        page["space"] = pull["space"]
        #expect(
            harness.machine.received(decoded(.object(page)), now: harness.now) == [
                .storePage(decodedPage(.object(page)))
            ])
        return harness.machine.pageStored(more: false, cursor: cursor, now: harness.now)
    }

    @Test func spacesArePulledOneAfterAnotherOnlyWhenTheirSeqMoved() throws {
        var harness = MachineHarness()
        guard case .connect(let id)? = harness.machine.start().first else { throw TestFailure("no connect") }
        let hello = harness.machine.connected(
            id: id, token: "t", device: "d", cursor: 3, spaceCursors: ["old": 5, "same": 8, "gone": 2],
            now: harness.now)
        #expect(sentMessages(hello).first?["protocol"] == 2)
        let spaces: [JSONValue] = [
            ["id": "u", "name": "Personal", "personal": true, "role": "owner", "seq": 3],
            ["id": "old", "name": "Old", "role": "editor", "seq": 9],
            ["id": "same", "name": "Same", "role": "viewer", "seq": 8],
            ["id": "new", "name": "New", "role": "editor", "seq": 4],
        ]
        let welcome: JSONValue = [
            "type": "welcome", "protocol": 2, "user": "u", "seq": 3, "rid": sentMessages(hello).first?["rid"] ?? .null,
            "expiresAt": "2999-01-01T00:00:00.000Z", "spaces": .array(spaces),
        ]
        let afterWelcome = harness.machine.received(decoded(welcome), now: harness.now)
        #expect(afterWelcome.contains(.storeSpaces(spaces)))
        // One pull at a time: the personal space from its cursor.
        let pulls = sentMessages(afterWelcome).filter { $0["type"] == "pull" }
        #expect(pulls.count == 1)
        #expect(pulls.first?["since"] == 3 && pulls.first?["space"] == nil)

        let toOld = answer(&harness, afterWelcome, cursor: 3)
        #expect(sentMessages(toOld).first?["space"] == "old" && sentMessages(toOld).first?["since"] == 5)
        let toNew = answer(&harness, toOld, cursor: 9)
        // A space never pulled here starts from 0, as a snapshot; `same` (seq 8, cursor 8) is not pulled.
        #expect(sentMessages(toNew).first?["space"] == "new" && sentMessages(toNew).first?["since"] == 0)
        #expect(sentMessages(toNew).first?["snapshot"] == true)
        let done = answer(&harness, toNew, cursor: 4)
        #expect(done.contains { if case .composePush = $0 { true } else { false } })
        #expect(harness.machine.spaceCursors == ["old": 9, "same": 8, "new": 4])

        // `spaces`: `old` left (forgotten), `new` moved on (pulled from its cursor).
        let update: [JSONValue] = [
            ["id": "u", "name": "Personal", "personal": true, "role": "owner", "seq": 3],
            ["id": "same", "name": "Same", "role": "editor", "seq": 8],
            ["id": "new", "name": "New", "role": "editor", "seq": 6],
        ]
        let listed = harness.machine.received(decoded(["type": "spaces", "spaces": .array(update)]), now: harness.now)
        #expect(listed.first == .storeSpaces(update))
        #expect(sentMessages(listed).first?["space"] == "new" && sentMessages(listed).first?["since"] == 4)
        #expect(harness.machine.spaceCursors["old"] == nil)
        // While that pull is out, a broadcast of `same` that could not be applied waits its turn.
        #expect(sentMessages(harness.machine.broadcastApplied(false, space: "same", now: harness.now)).isEmpty)
        let next = answer(&harness, listed, cursor: 6)
        #expect(sentMessages(next).first?["space"] == "same" && sentMessages(next).first?["since"] == 8)
    }

    @Test func aProtocolOneServerOrANoSpaceWelcomePullsThePersonalSpaceOnly() throws {
        var harness = MachineHarness()
        // The harness's welcome lists no spaces (as a protocol-1 answer): nothing else is pulled.
        let done = harness.connectAndCatchUp(cursor: 7)
        #expect(done.contains { if case .composePush = $0 { true } else { false } })
        #expect(!done.contains { if case .storeSpaces = $0 { true } else { false } })
    }

    /// The space pulled last answers `not_found` (the user was removed meanwhile): the catch-up
    /// ends there and local edits go out (they waited for it for ever).
    @Test func aFailedLastPullStillEndsTheCatchUp() throws {
        var harness = MachineHarness()
        guard case .connect(let id)? = harness.machine.start().first else { throw TestFailure("no connect") }
        let hello = harness.machine.connected(id: id, token: "t", device: "d", cursor: 0, now: harness.now)
        let welcome: JSONValue = [
            "type": "welcome", "protocol": 2, "user": "u", "seq": 0, "rid": sentMessages(hello).first?["rid"] ?? .null,
            "expiresAt": "2999-01-01T00:00:00.000Z",
            "spaces": [
                ["id": "u", "name": "Personal", "personal": true, "role": "owner", "seq": 0],
                ["id": "x", "name": "X", "role": "editor", "seq": 3],
            ],
        ]
        let toX = answer(&harness, harness.machine.received(decoded(welcome), now: harness.now), cursor: 0)
        let pull = try #require(sentMessages(toX).first)
        #expect(pull["space"] == "x")
        let error: JSONValue = [
            "type": "error", "code": "not_found", "message": "no such space", "rid": pull["rid"] ?? .null,
        ]
        let after = harness.machine.received(decoded(error), now: harness.now)
        #expect(after.contains { if case .composePush = $0 { true } else { false } })
    }

    /// A server from before spaces refuses protocol 2: the next hello says 1.
    @Test func aServerWithoutProtocolTwoIsSpokenToInProtocolOne() throws {
        var harness = MachineHarness()
        guard case .connect(let id)? = harness.machine.start().first else { throw TestFailure("no connect") }
        let hello = harness.machine.connected(id: id, token: "t", device: "d", cursor: 0, now: harness.now)
        #expect(sentMessages(hello).first?["protocol"] == 2)
        let refusal: JSONValue = [
            "type": "error", "code": "unsupported_protocol", "message": "this server speaks protocol 1",
            "rid": sentMessages(hello).first?["rid"] ?? .null,
        ]
        _ = harness.machine.received(decoded(refusal), now: harness.now)
        _ = harness.machine.connectionLost(id: id, now: harness.now)
        let again = harness.advance(.seconds(60)).compactMap { if case .connect(let id) = $0 { id } else { nil } }
        let next = try #require(again.first)
        let second = harness.machine.connected(id: next, token: "t", device: "d", cursor: 0, now: harness.now)
        #expect(sentMessages(second).first?["protocol"] == 1)
    }

    /// A page or broadcast of a space the device no longer lists is not taken: no record of it
    /// comes back, nothing is dropped or buried.
    @Test func aPageOfASpaceLeftIsNotStored() async throws {
        let store = try LocalStore.inMemory()
        let personal: JSONValue = ["id": "u", "name": "Personal", "personal": true, "role": "owner", "seq": 0]
        _ = try await store.storeSpaces([personal, ["id": "x", "name": "X", "role": "editor", "seq": 1]])
        let record = try Record(
            json: [
                "collection": "notes", "id": "0b8f1f2e-1c1a-4c1e-9a1e-0f1e2d3c4b5a", "rev": 1, "seq": 1,
                "deleted": false, "fields": ["title": "kept"], "updatedAt": "2026-01-01T00:00:00.000Z",
            ])
        _ = try await store.storePage(records: [record], cursor: 1, space: "x")
        #expect(try await store.list(NoteFilter(space: .shared("x"))).map(\.title) == ["kept"])
        // Left: the synced note goes; a page still on the way brings nothing back.
        _ = try await store.storeSpaces([personal])
        #expect(try await store.list().isEmpty)
        _ = try await store.storePage(records: [record], cursor: 1, space: "x")
        #expect(try await store.list().isEmpty)
        var broadcast = Broadcast(record: record)
        broadcast.space = "x"
        #expect(try await store.applyBroadcast(broadcast, limits: Limits()).applied)
        #expect(try await store.list().isEmpty)
        // A list without the personal space is not a list: nothing changes.
        _ = try await store.storeSpaces([personal, ["id": "x", "name": "X", "role": "editor", "seq": 1]])
        _ = try await store.storePage(records: [record], cursor: 1, space: "x")
        #expect(try await store.storeSpaces([]).isEmpty)
        #expect(try await store.list().count == 1)
    }
}
