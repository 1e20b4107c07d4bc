import Foundation
import NotedCore
import Testing

@testable import NotedClient

typealias Machine = SyncStateMachine<ContinuousClock.Instant>

/// Drives a machine through connect → hello → welcome → pull to the end.
struct MachineHarness {
    var machine: Machine
    let start = ContinuousClock.now
    var elapsed: Duration = .zero
    var now: ContinuousClock.Instant { start.advanced(by: elapsed) }

    init(seed: UInt64 = 1, configure: (inout Machine.Configuration) -> Void = { _ in }) {
        var configuration = Machine.Configuration()
        configure(&configuration)
        machine = Machine(configuration: configuration, seed: seed)
    }

    mutating func advance(_ duration: Duration) -> [Machine.Action] {
        elapsed += duration
        return machine.tick(now: now)
    }

    /// Connects and catches up; returns the actions of the last step (the first compose).
    mutating func connectAndCatchUp(cursor: Int64 = 0, welcome: JSONValue? = nil) -> [Machine.Action] {
        let start = machine.start()
        guard case .connect(let id)? = start.first else {
            Issue.record("expected connect, got \(start)")
            return []
        }
        let hello = machine.connected(id: id, token: "t", device: "d", cursor: cursor, now: now)
        let rid = sentMessages(hello).first?["rid"] ?? .null
        var welcomeMessage =
            welcome ?? [
                "type": "welcome", "protocol": 1, "user": "u", "seq": 0,
                "expiresAt": .string(Timestamp.format(Date().addingTimeInterval(3600))),
                "limits": ["maxMessageBytes": 1_000_000, "maxChangesPerPush": 2, "maxTextLength": 1000, "maxTags": 10],
            ]
        if var object = welcomeMessage.objectValue {
            object["rid"] = rid
            welcomeMessage = .object(object)
        }
        let pull = machine.received(welcomeMessage, now: now)
        guard let pullMessage = sentMessages(pull).first, pullMessage["type"] == "pull" else {
            Issue.record("expected a pull after welcome, got \(pull)")
            return []
        }
        #expect(pullMessage["since"] == .int(cursor))
        let page: JSONValue = [
            "type": "changes", "records": [], "cursor": .int(cursor), "more": false, "reset": false,
            "rid": pullMessage["rid"] ?? .null,
        ]
        #expect(machine.received(page, now: now) == [.storePage(decodedPage(page))])
        return machine.pageStored(more: false, cursor: cursor, now: now)
    }
}

/// The messages `actions` send, as the server reads them.
func sentMessages(_ actions: [Machine.Action]) -> [JSONValue] {
    actions.compactMap {
        switch $0 {
        case .send(let message, let rid): message.json(rid: .int(rid))
        case .push(let changes, let rid):
            try? JSONValue.parse(ClientMessage.pushText(changes: changes.map(\.body), rid: .int(rid)))
        default: nil
        }
    }
}

func change(_ id: String, ccid: String) -> OutboxChange {
    OutboxChange(
        recordID: id, ccid: ccid,
        body: JSONValue.object([
            "ccid": .string(ccid), "collection": "notes", "id": .string(id), "baseRev": 0, "op": "upsert",
            "fields": [:],
        ]).jsonString)
}

@Suite struct SyncStateMachineTests {
    @Test func helloThenPullToTheEndBeforeAnyPush() {
        var harness = MachineHarness()
        let start = harness.machine.start()
        #expect(start.first == .connect(id: 1))
        let hello = harness.machine.connected(id: 1, token: "tok", device: "dev", cursor: 7, now: harness.now)
        let message = sentMessages(hello).first
        #expect(message?["type"] == "hello")
        #expect(message?["token"] == "tok")
        #expect(message?["protocol"] == 2)
        // Nothing is pushed before the pull reached the end, even after the debounce.
        _ = harness.machine.localEdit(now: harness.now)
        #expect(!harness.advance(.seconds(1)).contains { if case .composePush = $0 { true } else { false } })
        let pull = harness.machine.received(
            [
                "type": "welcome", "user": "u", "seq": 0, "rid": message?["rid"] ?? .null,
                "expiresAt": "2999-01-01T00:00:00.000Z",
            ], now: harness.now)
        let pullMessage = sentMessages(pull).first
        #expect(pullMessage?["since"] == 7)
        let first: JSONValue = [
            "type": "changes", "records": [], "cursor": 9, "more": true, "reset": false,
            "rid": pullMessage?["rid"] ?? .null,
        ]
        // The next page is asked for as the first arrives, before the first is stored.
        let next = harness.machine.received(first, now: harness.now)
        #expect(next.last == .storePage(decodedPage(first)))
        #expect(sentMessages(next).first?["since"] == 9)
        let stored = harness.machine.pageStored(more: true, cursor: 9, now: harness.now)
        #expect(stored.isEmpty)
        let last: JSONValue = [
            "type": "changes", "records": [], "cursor": 12, "more": false, "reset": false,
            "rid": sentMessages(next).first?["rid"] ?? .null,
        ]
        #expect(harness.machine.received(last, now: harness.now) == [.storePage(decodedPage(last))])
        let done = harness.machine.pageStored(more: false, cursor: 12, now: harness.now)
        #expect(done.contains(.composePush(excluding: [], limit: 400)))
    }

    /// One pull ahead at most: pages come in order, each asks for the next as it arrives, and
    /// `pageStored` sends nothing while that pull is out.
    @Test func theNextPageIsAskedForWhileAPageIsStoredOneAhead() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp(cursor: 0)
        var pull = sentMessages(harness.machine.broadcastApplied(false, now: harness.now)).first
        var cursor: Int64 = 0
        for page in 1...5 {
            #expect(pull?["type"] == "pull")
            #expect(pull?["since"] == .int(cursor))
            let more = page < 5
            cursor += 500
            let message: JSONValue = [
                "type": "changes", "records": [], "cursor": .int(cursor), "more": .bool(more), "reset": false,
                "rid": pull?["rid"] ?? .null,
            ]
            let actions = harness.machine.received(message, now: harness.now)
            #expect(actions.last == .storePage(decodedPage(message)))
            #expect(sentMessages(actions).count == (more ? 1 : 0))
            let stored = harness.machine.pageStored(more: more, cursor: cursor, now: harness.now)
            #expect(sentMessages(stored).filter { $0["type"] == "pull" }.isEmpty)
            pull = sentMessages(actions).first
        }
        #expect(harness.machine.cursor == 2500)
    }

    /// A reset page (`cursor: 0`, `more: true`) asks at once for the snapshot from 0, marked
    /// `snapshot: true`, and the snapshot's pages ask on with the mark.
    @Test func aResetPageAsksForTheSnapshotAheadMarkedAsOne() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp(cursor: 40)
        let pull = sentMessages(harness.machine.broadcastApplied(false, now: harness.now)).first
        let reset: JSONValue = [
            "type": "changes", "records": [], "cursor": 0, "more": true, "reset": true, "rid": pull?["rid"] ?? .null,
        ]
        let fromZero = sentMessages(harness.machine.received(reset, now: harness.now)).first
        #expect(fromZero?["since"] == 0)
        #expect(fromZero?["snapshot"] == true)
        #expect(harness.machine.pageStored(more: true, cursor: 0, now: harness.now).isEmpty)
        let page: JSONValue = [
            "type": "changes", "records": [], "cursor": 7, "more": true, "reset": false,
            "rid": fromZero?["rid"] ?? .null,
        ]
        let ahead = sentMessages(harness.machine.received(page, now: harness.now)).first
        #expect(ahead?["since"] == 7)
        #expect(ahead?["snapshot"] == true)
    }

    /// A pull wanted again while a pull asked ahead is out (a broadcast that did not apply) is
    /// made after the last page: the page asked ahead may have been read before that change.
    @Test func aPullWantedAgainWhilePagesComeIsMadeAfterTheLast() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp(cursor: 0)
        let pull = sentMessages(harness.machine.broadcastApplied(false, now: harness.now)).first
        let first: JSONValue = [
            "type": "changes", "records": [], "cursor": 3, "more": true, "reset": false, "rid": pull?["rid"] ?? .null,
        ]
        let ahead = sentMessages(harness.machine.received(first, now: harness.now)).first
        #expect(harness.machine.broadcastApplied(false, now: harness.now).isEmpty)
        #expect(harness.machine.pageStored(more: true, cursor: 3, now: harness.now).isEmpty)
        let last: JSONValue = [
            "type": "changes", "records": [], "cursor": 4, "more": false, "reset": false, "rid": ahead?["rid"] ?? .null,
        ]
        #expect(sentMessages(harness.machine.received(last, now: harness.now)).isEmpty)
        let after = sentMessages(harness.machine.pageStored(more: false, cursor: 4, now: harness.now)).first
        #expect(after?["type"] == "pull")
        #expect(after?["since"] == 4)
    }

    /// A pull asked ahead and refused by the server while a page is stored is asked again once
    /// that page is stored.
    @Test func aPullAskedAheadAndRefusedIsAskedAgainAfterTheStore() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp(cursor: 0)
        let pull = sentMessages(harness.machine.broadcastApplied(false, now: harness.now)).first
        let first: JSONValue = [
            "type": "changes", "records": [], "cursor": 3, "more": true, "reset": false, "rid": pull?["rid"] ?? .null,
        ]
        let ahead = sentMessages(harness.machine.received(first, now: harness.now)).first
        let refused: JSONValue = [
            "type": "error", "code": "rate_limited", "message": "slow down", "rid": ahead?["rid"] ?? .null,
        ]
        _ = harness.machine.received(refused, now: harness.now)
        let again = sentMessages(harness.machine.pageStored(more: true, cursor: 3, now: harness.now)).first
        #expect(again?["type"] == "pull")
        #expect(again?["since"] == 3)
        let last: JSONValue = [
            "type": "changes", "records": [], "cursor": 4, "more": false, "reset": false, "rid": again?["rid"] ?? .null,
        ]
        #expect(sentMessages(harness.machine.received(last, now: harness.now)).isEmpty)
        #expect(sentMessages(harness.machine.pageStored(more: false, cursor: 4, now: harness.now)).isEmpty)
        #expect(harness.machine.cursor == 4)
    }

    @Test func aPageForAnUnknownRequestIsIgnored() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        let stray: JSONValue = [
            "type": "changes", "records": [], "cursor": 3, "more": false, "reset": false, "rid": 999,
        ]
        #expect(harness.machine.received(stray, now: harness.now).isEmpty)
    }

    @Test func pushesRespectMaxChangesPerPushAndOneChangePerRecord() {
        var harness = MachineHarness()
        let compose = harness.connectAndCatchUp()
        #expect(compose.contains(.composePush(excluding: [], limit: 8)))
        let actions = harness.machine.composed(
            [change("a", ccid: "1"), change("b", ccid: "2"), change("c", ccid: "3")], now: harness.now)
        let pushes = sentMessages(actions)
        #expect(pushes.count == 2)
        #expect(pushes.map { $0["changes"]?.arrayValue?.count } == [2, 1])
        #expect(harness.machine.inFlight == ["a": "1", "b": "2", "c": "3"])
        // A record already in flight is never sent again on this connection.
        _ = harness.machine.localEdit(now: harness.now)
        let again = harness.advance(.milliseconds(301))
        #expect(again.contains(.composePush(excluding: ["a", "b", "c"], limit: 8)))
        #expect(sentMessages(harness.machine.composed([change("a", ccid: "9")], now: harness.now)).isEmpty)
    }

    @Test func anAckFreesTheRecordAndComposesAgain() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        let push = sentMessages(harness.machine.composed([change("a", ccid: "1")], now: harness.now))[0]
        let ack: JSONValue = [
            "type": "ack", "ccid": "1", "collection": "notes", "id": "a", "rev": 1, "status": "applied",
            "rid": push["rid"] ?? .null,
        ]
        #expect(harness.machine.received(ack, now: harness.now) == [.applyAck(decodedAck(ack))])
        #expect(harness.machine.inFlight.isEmpty)
        let after = harness.machine.answerApplied(needsPull: false, retryLater: false, now: harness.now)
        #expect(after.contains(.composePush(excluding: [], limit: 8)))
        let idle = harness.machine.composed([], now: harness.now)
        #expect(idle.contains(.status(.synced)))
        #expect(harness.machine.isIdle)
    }

    @Test func debounceWaitsForQuietAfterTheLastEdit() {
        var harness = MachineHarness { $0.debounce = .milliseconds(300) }
        _ = harness.connectAndCatchUp()
        _ = harness.machine.composed([], now: harness.now)
        _ = harness.machine.localEdit(now: harness.now)
        #expect(harness.advance(.milliseconds(200)).isEmpty)
        _ = harness.machine.localEdit(now: harness.now)
        #expect(harness.advance(.milliseconds(200)).isEmpty)
        #expect(harness.advance(.milliseconds(150)).contains(.composePush(excluding: [], limit: 8)))
    }

    @Test func anUnansweredRequestMeansADeadConnection() {
        var harness = MachineHarness { $0.requestTimeout = .seconds(5) }
        _ = harness.connectAndCatchUp()
        _ = harness.machine.composed([change("a", ccid: "1")], now: harness.now)
        #expect(harness.advance(.seconds(4)).isEmpty)
        let dead = harness.advance(.seconds(2))
        #expect(dead.first == .close)
        #expect(dead.contains { if case .status(.offline) = $0 { true } else { false } })
        #expect(harness.machine.inFlight.isEmpty)
        // After the backoff, a new connection; the in-flight change is resent there (store side).
        let reconnect = harness.advance(.seconds(1))
        #expect(reconnect.contains(.connect(id: 2)))
    }

    @Test func lostConnectionsBackOffExponentiallyWithJitter() {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "") ?? UInt64.random(in: 0...UInt64.max)
        print("lostConnectionsBackOffExponentiallyWithJitter: NOTED_TEST_SEED=\(seed)")
        var harness = MachineHarness(seed: seed) {
            $0.initialBackoff = .seconds(1)
            $0.maxBackoff = .seconds(8)
        }
        var delays: [Duration] = []
        var id = 0
        if case .connect(let first)? = harness.machine.start().first { id = first }
        for _ in 0..<6 {
            let lost = harness.machine.connectionLost(id: id, now: harness.now)
            guard case .status(.offline(let delay))? = lost.first else {
                Issue.record("expected offline status, got \(lost)")
                return
            }
            delays.append(delay)
            let reconnect = harness.advance(delay)
            guard case .connect(let next)? = reconnect.first else {
                Issue.record("expected a reconnect after \(delay), got \(reconnect)")
                return
            }
            id = next
        }
        let caps: [Duration] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)]
        for (delay, cap) in zip(delays, caps) {
            #expect(delay >= cap / 2 && delay <= cap, "delay \(delay) outside [\(cap / 2), \(cap)]")
        }
    }

    @Test func aSuccessfulWelcomeResetsTheBackoff() {
        var harness = MachineHarness { $0.initialBackoff = .seconds(1) }
        _ = harness.machine.start()
        for id in 1...4 {
            let lost = harness.machine.connectionLost(id: id, now: harness.now)
            guard case .status(.offline(let delay))? = lost.first else { return }
            _ = harness.advance(delay)
        }
        let hello = harness.machine.connected(id: 5, token: "t", device: "d", cursor: 0, now: harness.now)
        _ = harness.machine.received(
            ["type": "welcome", "user": "u", "seq": 0, "rid": sentMessages(hello)[0]["rid"] ?? .null], now: harness.now)
        let lost = harness.machine.connectionLost(id: 5, now: harness.now)
        guard case .status(.offline(let delay))? = lost.first else {
            Issue.record("expected offline")
            return
        }
        #expect(delay <= .seconds(1))
    }

    @Test func aStaleConnectionLossIsIgnored() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        #expect(harness.machine.connectionLost(id: 42, now: harness.now).isEmpty)
        #expect(harness.machine.isConnected)
    }

    @Test func aBroadcastNotAtPrevRevTriggersOnePull() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp(cursor: 5)
        let broadcast: JSONValue = [
            "type": "change", "collection": "notes", "id": "a", "rev": 3, "prevRev": 2, "op": "upsert", "fields": [:],
            "updatedAt": "2026-01-01T00:00:00.000Z",
        ]
        #expect(harness.machine.received(broadcast, now: harness.now) == [.applyBroadcast(decodedBroadcast(broadcast))])
        #expect(harness.machine.broadcastApplied(true, now: harness.now).isEmpty)
        let pull = sentMessages(harness.machine.broadcastApplied(false, now: harness.now))
        #expect(pull.first?["type"] == "pull")
        #expect(pull.first?["since"] == 5)
        // A second miss while that pull is out does not send another; it pulls again after.
        #expect(harness.machine.broadcastApplied(false, now: harness.now).isEmpty)
        _ = harness.machine.received(
            [
                "type": "changes", "records": [], "cursor": 6, "more": false, "reset": false,
                "rid": pull.first?["rid"] ?? .null,
            ], now: harness.now)
        let again = sentMessages(harness.machine.pageStored(more: false, cursor: 6, now: harness.now))
        #expect(again.first?["since"] == 6)
    }

    @Test func rejectsThatNeedAPullPullThenCompose() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        let actions = harness.machine.answerApplied(needsPull: true, retryLater: false, now: harness.now)
        #expect(sentMessages(actions).first?["type"] == "pull")
    }

    @Test func rateLimitedChangesAreRetriedLater() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        _ = harness.machine.composed([], now: harness.now)
        let actions = harness.machine.answerApplied(needsPull: false, retryLater: true, now: harness.now)
        #expect(!actions.contains { if case .composePush = $0 { true } else { false } })
        #expect(harness.advance(.milliseconds(100)).isEmpty)
        #expect(harness.advance(.seconds(3)).contains { if case .composePush = $0 { true } else { false } })
    }

    @Test func theTokenIsRefreshedBeforeItExpiresAndReauthSent() {
        var harness = MachineHarness { $0.refreshMargin = .seconds(60) }
        let date = Date()
        _ = harness.machine.start()
        let hello = harness.machine.connected(id: 1, token: "t", device: "d", cursor: 0, now: harness.now)
        _ = harness.machine.received(
            [
                "type": "welcome", "user": "u", "seq": 0, "rid": sentMessages(hello)[0]["rid"] ?? .null,
                "expiresAt": .string(Timestamp.format(date.addingTimeInterval(120))),
            ], now: harness.now, date: date)
        _ = harness.machine.received(
            ["type": "changes", "records": [], "cursor": 0, "more": false, "reset": false, "rid": 2], now: harness.now)
        _ = harness.machine.pageStored(more: false, cursor: 0, now: harness.now)
        _ = harness.machine.composed([], now: harness.now)
        #expect(!harness.advance(.seconds(50)).contains(.refreshToken))
        #expect(harness.advance(.seconds(15)).contains(.refreshToken))
        // Single flight: no second refresh while one is under way.
        #expect(!harness.advance(.seconds(1)).contains(.refreshToken))
        let reauth = sentMessages(harness.machine.tokenRefreshed("new", now: harness.now))
        #expect(reauth.first?["type"] == "reauth")
        #expect(reauth.first?["token"] == "new")
    }

    @Test func tokenExpiredErrorTriggersARefresh() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        let actions = harness.machine.received(
            ["type": "error", "code": "token_expired", "message": "expired"], now: harness.now)
        #expect(actions.contains(.refreshToken))
    }

    @Test func stopClosesAndStaysStopped() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp()
        let actions = harness.machine.stop()
        #expect(actions.first == .close)
        #expect(actions.contains(.status(.stopped)))
        #expect(harness.advance(.seconds(60)).isEmpty)
    }

    @Test func aShortLivedTokenIsRefreshedHalfWayNotInAStorm() {
        var harness = MachineHarness { $0.refreshMargin = .seconds(60) }
        let date = Date()
        _ = harness.machine.start()
        let hello = harness.machine.connected(id: 1, token: "t", device: "d", cursor: 0, now: harness.now)
        _ = harness.machine.received(
            [
                "type": "welcome", "user": "u", "seq": 0, "rid": sentMessages(hello)[0]["rid"] ?? .null,
                "expiresAt": .string(Timestamp.format(date.addingTimeInterval(10))),
            ], now: harness.now, date: date)
        #expect(!harness.machine.tick(now: harness.now).contains(.refreshToken))
        #expect(harness.advance(.seconds(6)).contains(.refreshToken))
    }

    @Test func aRefreshedTokenReconnectsAtOnceAfterAnAuthFailure() {
        var harness = MachineHarness { $0.initialBackoff = .seconds(30) }
        _ = harness.machine.start()
        let hello = harness.machine.connected(id: 1, token: "old", device: "d", cursor: 0, now: harness.now)
        let error = harness.machine.received(
            ["type": "error", "code": "unauthenticated", "message": "invalid access token"], now: harness.now)
        #expect(error.contains(.refreshToken))
        #expect(!sentMessages(hello).isEmpty)
        _ = harness.machine.connectionLost(id: 1, now: harness.now)
        #expect(harness.machine.tokenRefreshed("new", now: harness.now).contains(.connect(id: 2)))
    }

    @Test func pushesStayUnderTheMessageSizeLimitAndOversizedChangesAreRefused() {
        var harness = MachineHarness()
        _ = harness.connectAndCatchUp(welcome: [
            "type": "welcome", "user": "u", "seq": 0, "limits": ["maxMessageBytes": 600, "maxChangesPerPush": 100],
        ])
        func sized(_ id: String, _ size: Int) -> OutboxChange {
            OutboxChange(
                recordID: id, ccid: "c-" + id,
                body: JSONValue.object([
                    "ccid": .string("c-" + id), "id": .string(id),
                    "fields": ["body": ["set": .string(String(repeating: "x", count: size))]],
                ]).jsonString)
        }
        let actions = harness.machine.composed(
            [sized("a", 200), sized("b", 200), sized("c", 200), sized("huge", 1000)], now: harness.now)
        let pushes = sentMessages(actions)
        #expect(pushes.count == 2)
        #expect(pushes.allSatisfy { $0.jsonString.utf8.count <= 600 })
        #expect(actions.contains { if case .refuse(let change, _) = $0 { change.recordID == "huge" } else { false } })
        #expect(harness.machine.inFlight["huge"] == nil)
    }

    /// The engine sleeps until `nextDeadline` and ticks then: a deadline `tick` would not act
    /// on (a push falling due before the first pull ends) would wake it in a loop.
    @Test func theNextDeadlineNamesOnlyWhatTickActsOn() {
        var harness = MachineHarness()
        let start = harness.machine.start()
        guard case .connect(let id)? = start.first else {
            Issue.record("expected connect, got \(start)")
            return
        }
        _ = harness.machine.localEdit(now: harness.now)
        #expect(harness.machine.nextDeadline == nil)
        _ = harness.machine.connected(id: id, token: "t", device: "d", cursor: 0, now: harness.now)
        // The hello's answer is due; the debounced push (sooner) is not named until caught up.
        #expect(harness.machine.nextDeadline == harness.now.advanced(by: harness.machine.configuration.requestTimeout))
        #expect(harness.advance(.seconds(1)).isEmpty)
    }
}
