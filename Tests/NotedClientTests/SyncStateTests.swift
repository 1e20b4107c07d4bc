import Foundation
import NotedCore
import Testing

@testable import NotedClient

/// Every transition of a record's sync state, from every state in a grid that covers each
/// component's cases, and every state reachable from a new or synced record.
@Suite struct SyncStateTests {
    static let upsert = SyncState.Inflight(ccid: "c1", baseRev: 1, body: #"{"op":"upsert"}"#, sent: ["body": "sent"])
    static let purgeChange = SyncState.Inflight(ccid: "c2", baseRev: 2, body: #"{"op":"delete"}"#, sent: nil)

    static var inflights: [SyncState.Inflight?] {
        var withNewest = upsert
        withNewest.newest = .init(
            fields: ["body": "newer"], rev: 4, updatedAt: Date(timeIntervalSince1970: 1_700_000_000.123))
        var withPurged = upsert
        withPurged.newest = .init(fields: nil, rev: 5, updatedAt: Date(timeIntervalSince1970: 1_700_000_001))
        var absent = upsert
        absent.absentAtSeq = 40
        return [nil, upsert, withNewest, withPurged, purgeChange, absent]
    }

    /// 288 states: every combination of the components' cases.
    static var grid: [SyncState] {
        var states: [SyncState] = []
        for edited in [false, true] {
            for purging in [false, true] {
                for next in [SyncState.NextSend.delta, .set(baseRev: nil), .set(baseRev: 3)] {
                    for inflight in inflights {
                        for refusal in [nil, "invalid_field: no"] {
                            for conflicts in [[], ["body"]] {
                                states.append(
                                    SyncState(
                                        edited: edited, purging: purging, next: next, inflight: inflight,
                                        refusal: refusal, conflicts: conflicts))
                            }
                        }
                    }
                }
            }
        }
        return states
    }

    /// Each transition with what must hold after it, given the state before; `send` and
    /// `keepUnplacedEdits` apply only without a change in flight (their precondition).
    static let transitions:
        [(name: String, apply: @Sendable (inout SyncState) -> Void, check: @Sendable (SyncState, SyncState) -> Bool)] =
            [
                (
                    "edit", { $0.edit() },
                    { before, after in
                        after.edited && after.refusal == nil && after.conflicts.isEmpty
                            && after.inflight == before.inflight
                            && after.purging == before.purging && after.next == before.next
                    }
                ),
                (
                    "purge", { $0.purge() },
                    { before, after in
                        after.purging && after.edited && after.inflight == before.inflight && after.refusal == nil
                    }
                ),
                (
                    "send", { $0.send(upsert) },
                    { before, after in
                        after.inflight == upsert && !after.edited && after.next == .delta && after.refusal == nil
                            && after.purging == before.purging && after.conflicts == before.conflicts
                    }
                ),
                (
                    "nothingToSend", { $0.nothingToSend() },
                    { before, after in
                        var expected = before
                        expected.edited = false
                        return after == expected
                    }
                ),
                (
                    "sawNewer",
                    { $0.sawNewer(fields: ["body": "x"], rev: 4, updatedAt: Date(timeIntervalSince1970: 2)) },
                    { before, after in
                        guard let old = before.inflight else { return after == before }
                        guard let newest = after.inflight?.newest else { return false }
                        var rest = after
                        rest.inflight?.newest = old.newest
                        return rest == before && newest.rev == max(4, old.newest?.rev ?? 0)
                            && (old.newest.map { $0.rev >= 4 } ?? false
                                ? newest == old.newest : newest.fields == ["body": "x"])
                    }
                ),
                (
                    "absentFromSnapshot", { $0.absentFromSnapshot(at: 77) },
                    { before, after in
                        before.inflight == nil
                            ? after == before
                            : after.inflight?.absentAtSeq == 77 && after.inflight?.ccid == before.inflight?.ccid
                    }
                ),
                (
                    "answered", { _ = $0.answered() },
                    { before, after in
                        var expected = before
                        expected.inflight = nil
                        return after == expected
                    }
                ),
                (
                    "stillToSend", { $0.stillToSend() },
                    { before, after in
                        // Refused edits are held, not sent again.
                        var expected = before
                        if before.refusal == nil { expected.edited = true }
                        return after == expected
                    }
                ),
                (
                    "moved(differs)", { $0.moved(localDiffers: true) },
                    { before, after in
                        after.edited == (before.purging || before.refusal == nil) && after.refusal == before.refusal
                    }
                ),
                (
                    "moved(same)", { $0.moved(localDiffers: false) },
                    { before, after in after.edited == before.purging && after.refusal == nil }
                ),
                (
                    "discard", { $0.discard() },
                    { before, after in
                        !after.edited && !after.purging && after.refusal == nil && after.conflicts.isEmpty
                            && after.next == .delta
                            && after.inflight == before.inflight
                    }
                ),
                ("merged([])", { $0.merged(conflicts: []) }, { before, after in after == before }),
                ("merged([body])", { $0.merged(conflicts: ["body"]) }, { _, after in after.conflicts == ["body"] }),
                (
                    "keepUnplacedEdits", { $0.keepUnplacedEdits(staleBase: 2) },
                    { before, after in
                        after.edited && after.conflicts == ["body"] && after.next == .set(baseRev: 2)
                            && after.inflight == before.inflight
                    }
                ),
            ]

    static let needsNoInflight: Set<String> = ["send", "keepUnplacedEdits"]

    @Test func everyTransitionFromEveryStateInTheGrid() throws {
        let grid = Self.grid
        #expect(grid.count == 288)
        #expect(Set(grid).count == 288, "the grid's states are distinct")
        for state in grid {
            for transition in Self.transitions {
                if state.inflight != nil && Self.needsNoInflight.contains(transition.name) { continue }
                var after = state
                transition.apply(&after)
                #expect(transition.check(state, after), "\(transition.name) from \(state) gave \(after)")
                #expect(after.pending == (after.edited || after.inflight != nil || after.purging))
                #expect(
                    try SyncState(json: JSONValue.parse(after.json.jsonString)) == after, "\(after) survives storage")
            }
        }
    }

    @Test func everyRefusalCodeFromEveryStateInTheGrid() throws {
        // Every code a reject can carry, and one this client does not know (final, like bad_request).
        let codes: [ErrorCode] = [
            .badRequest, .unknownCollection, .invalidField, .invalidDelta, .invalidVersion, .baseUnavailable,
            .notFound, .alreadyExists, .gone, .tooLarge, .ccidReused, .rateLimited, ErrorCode(rawValue: "new_code"),
        ]
        for state in Self.grid {
            for code in codes {
                var after = state
                after.refused(code, message: "m")
                if code == .rateLimited {
                    #expect(after == state, "rate_limited keeps the change in flight")
                    continue
                }
                #expect(after.inflight == nil)
                #expect(after.purging == state.purging && after.conflicts == state.conflicts)
                switch code {
                case .baseUnavailable, .invalidDelta:
                    #expect(after.edited && after.next == .set(baseRev: nil) && after.refusal == state.refusal)
                case .gone, .notFound, .alreadyExists, .invalidVersion, .ccidReused:
                    #expect(after.edited && after.next == state.next && after.refusal == state.refusal)
                case _ where state.edited && state.inflight != nil:
                    // Edited since the change was sent: those edits go out, not refused yet.
                    #expect(after.edited && after.refusal == state.refusal, "\(code) after an edit since the send")
                default:
                    #expect(!after.edited && after.refusal == "\(code.rawValue): m", "\(code) is final")
                }
            }
        }
    }

    /// Every state reachable from a new record and from a synced one, through every transition:
    /// a change in flight always goes out as the next send decided it, so no state holds both a
    /// change in flight and a pending `set` resend; and each reachable state is stored exactly.
    @Test func reachableStatesKeepTheInvariants() throws {
        var seen: Set<SyncState> = [.created, .synced]
        var queue: [SyncState] = [.created, .synced]
        let steps: [(name: String, apply: (inout SyncState) -> Void)] =
            Self.transitions.map { ($0.name, $0.apply) } + [
                ("send", { $0.send(Self.purgeChange) }),
                ("refused", { $0.refused(.baseUnavailable, message: "m") }),
                ("refused", { $0.refused(.invalidField, message: "m") }),
                ("refused", { $0.refused(.gone, message: "m") }),
                ("refused", { $0.refused(.rateLimited, message: "m") }),
            ]
        while let state = queue.popLast() {
            for step in steps {
                if state.inflight != nil && Self.needsNoInflight.contains(step.name) { continue }
                var next = state
                step.apply(&next)
                if seen.insert(next).inserted { queue.append(next) }
            }
        }
        #expect(seen.count > 50)
        for state in seen {
            if state.inflight != nil { #expect(state.next == .delta, "\(state)") }
            #expect(try SyncState(json: JSONValue.parse(state.json.jsonString)) == state)
        }
        #expect(SyncState.synced.json == [:], "a synced record stores nothing")
    }

    @Test func aDamagedStateIsAClearError() {
        for text in [
            #"[]"#, #"{"inflight":{"ccid":"c"}}"#,
            #"{"inflight":{"ccid":"c","baseRev":1,"body":"{}","newest":{"rev":2}}}"#,
        ] {
            #expect(throws: NotedClientError.self) { try SyncState(json: JSONValue.parse(text)) }
        }
    }
}
