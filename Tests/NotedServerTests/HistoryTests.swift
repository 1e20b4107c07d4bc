import Foundation
import GRDB
import Logging
import NotedCore
import PostgresNIO
import TestSupport
import Testing

@testable import NotedServer

@Suite struct HistoryPolicyTests {
    /// Years of saves on a virtual clock, thinned now and then as the service would: every
    /// promise over the saved history holds after each thinning, and the kept set stays small.
    @Test(arguments: [90, 7, 1, 0]) func yearsOfSavesKeepEveryPromisedRevision(days: Int) throws {
        var random = TestSeed.generator(for: "yearsOfSavesKeepEveryPromisedRevision\(days)")
        let policy = HistoryPolicy(days: days)
        let promise = HistoryPromise(days: days)
        var now = Date(timeIntervalSince1970: 1_700_000_000)
        var saved: [HistoryPolicy.Entry] = []
        var present = Set<Int64>()
        var rev: Int64 = 0
        var largest = 0
        for _ in 0..<(days == 0 ? 60 : 730) {
            // A day: a few editing sessions of several saves, seconds to minutes apart, or none.
            if random.next() % 5 != 0 {
                for _ in 0..<(1 + random.next() % 3) {
                    now = now.addingTimeInterval(Double(random.next() % 20_000))
                    for _ in 0..<(1 + random.next() % 30) {
                        rev += 1
                        now = now.addingTimeInterval(Double(1 + random.next() % 240))
                        saved.append(.init(rev: rev, at: now))
                        present.insert(rev)
                    }
                    // Thinning runs at moments of its own.
                    let thinAt = now.addingTimeInterval(Double(random.next() % 7200))
                    now = thinAt  // the server's clock: later saves come after it
                    present = policy.keptOrdinary(saved.filter { present.contains($0.rev) }, now: thinAt)
                    let missing = promise.ordinary(saved.map { ($0.rev, $0.at) }, now: thinAt).subtracting(present)
                    #expect(
                        missing.isEmpty,
                        "seed \(TestSeed.replay): days \(days): promised revisions \(missing.sorted()) missing at \(thinAt)"
                    )
                    if !missing.isEmpty { return }
                    largest = max(largest, present.count)
                }
            }
            now = now.addingTimeInterval(86400 - Double(Int(now.timeIntervalSince1970) % 86400))
        }
        if days > 0 {
            // At most: every save of 10 minutes, 144 stretches of a day, 168 hours, one a day,
            // and one per editing session (three a day here) of the period.
            #expect(largest <= 300 + 144 + 168 + days * 4, "kept \(largest)")
        }
    }

    @Test func conflictsAreKeptForThePeriodThenGo() {
        let policy = HistoryPolicy(days: 90)
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let conflicts = [
            HistoryPolicy.Entry(rev: 3, at: start), HistoryPolicy.Entry(rev: 9, at: start.addingTimeInterval(86400)),
        ]
        #expect(policy.keptConflicts(conflicts, now: start.addingTimeInterval(89 * 86400)) == [3, 9])
        #expect(policy.keptConflicts(conflicts, now: start.addingTimeInterval(90.5 * 86400)) == [9])
        #expect(HistoryPolicy(days: 0).keptConflicts(conflicts, now: start.addingTimeInterval(9000 * 86400)) == [3, 9])
    }

    @Test func theStateBeforeASessionIsKeptWhileTheSessionIsInThePeriod() {
        let policy = HistoryPolicy(days: 90)
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        // Rev 1 saved, then 200 days of quiet, then a session of saves.
        var entries = [HistoryPolicy.Entry(rev: 1, at: start)]
        for rev in Int64(2)...6 {
            entries.append(.init(rev: rev, at: start.addingTimeInterval(200 * 86400 + Double(rev))))
        }
        let later = start.addingTimeInterval(201 * 86400)
        #expect(policy.keptOrdinary(entries, now: later) == [1, 6])
        #expect(policy.keptOrdinary(entries, now: start.addingTimeInterval(291 * 86400)) == [6])
    }

    @Test func theNextChangeIsWhenARevisionLeavesTheWindow() {
        let policy = HistoryPolicy(days: 90)
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let entries = [HistoryPolicy.Entry(rev: 1, at: start), .init(rev: 2, at: start.addingTimeInterval(30))]
        // Rev 1 leaves the window at +600 s, rounded up to the next whole 5 minutes.
        #expect(
            policy.nextChange(ordinary: entries, conflicts: [], now: start.addingTimeInterval(31))
                == Date(timeIntervalSince1970: 1_700_000_700))
        #expect(HistoryPolicy(days: 0).nextChange(ordinary: entries, conflicts: [], now: start) == nil)
        // A lone revision is the record as it stands at every age: never reviewed again.
        #expect(policy.nextChange(ordinary: [entries[0]], conflicts: [], now: start.addingTimeInterval(3)) == nil)
        // The newest counts only as the save after a quiet spell: the one before it is kept until
        // the newest leaves the period.
        let session = [
            HistoryPolicy.Entry(rev: 1, at: start.addingTimeInterval(-100 * 86400)), .init(rev: 2, at: start),
        ]
        #expect(
            policy.nextChange(ordinary: session, conflicts: [], now: start.addingTimeInterval(60))
                == Date(timeIntervalSince1970: 1_707_776_100))  // + 90 days, rounded up
    }

    /// Random histories at random moments: nothing ``HistoryPolicy/keptOrdinary(_:now:)`` or
    /// ``HistoryPolicy/keptConflicts(_:now:)`` decides changes before the next change it names
    /// (less the rounding), nor ever after a nil one; and the moment it names is not premature
    /// for every history (a lone revision is never reviewed).
    @Test func nothingChangesBeforeTheNextChange() {
        var random = TestSeed.generator(for: "nothingChangesBeforeTheNextChange")
        let policy = HistoryPolicy(days: 90)
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let spans: [TimeInterval] = [30, 600, 3600, 86400, 8 * 86400, 100 * 86400]
        var never = 0
        for round in 0..<2000 {
            var at = start
            var ordinary: [HistoryPolicy.Entry] = []
            for rev in 1...Int64(1 + random.next() % 5) {
                at = at.addingTimeInterval(
                    Double(random.next() % UInt64(spans[Int(random.next() % UInt64(spans.count))])))
                ordinary.append(.init(rev: rev, at: at))
            }
            let conflicts = random.next() % 4 == 0 ? [HistoryPolicy.Entry(rev: ordinary.last!.rev, at: at)] : []
            let now = at.addingTimeInterval(Double(random.next() % UInt64(200 * 86400)))
            let next = policy.nextChange(ordinary: ordinary, conflicts: conflicts, now: now)
            let horizon =
                next.map { $0.addingTimeInterval(-HistoryPolicy.reviewGranularity) }
                ?? now.addingTimeInterval(1000 * 86400)
            if next == nil { never += 1 }
            let kept = policy.keptOrdinary(ordinary, now: now)
            let keptConflicts = policy.keptConflicts(conflicts, now: now)
            for step in 0..<20 where horizon > now {
                let later = now.addingTimeInterval(horizon.timeIntervalSince(now) * Double(step) / 20)
                #expect(
                    policy.keptOrdinary(ordinary, now: later) == kept
                        && policy.keptConflicts(conflicts, now: later) == keptConflicts,
                    "seed \(TestSeed.replay), round \(round): \(ordinary) \(conflicts) decided differently at \(later), before \(String(describing: next))"
                )
            }
        }
        #expect(never > 100, "only \(never) histories never reviewed again")
    }
}

@Suite struct RevisionDeltaTests {
    /// Random texts and edits: a delta always turns the newer fields into the older exactly,
    /// stored and read back.
    @Test func deltasRoundTripOnRandomEdits() throws {
        var random = TestSeed.generator(for: "deltasRoundTripOnRandomEdits")
        let words = ["alpha", "beta", "gamma", "δέλτα", "😀", "e\u{301}", "\n", "  ", "x", "lorem ipsum dolor"]
        func text(_ count: Int) -> String {
            (0..<count).map { _ in words[Int(random.next() % UInt64(words.count))] }.joined(separator: " ")
        }
        for round in 0..<300 {
            var older: [String: JSONValue] = [
                "title": .string(text(3)), "body": .string(text(Int(random.next() % 400))),
                "pinned": .bool(random.next() % 2 == 0),
            ]
            if random.next() % 3 == 0 { older["folder"] = .string("Work") }
            var newer = older
            var body = older["body"]!.stringValue!
            for _ in 0..<(random.next() % 6) {
                var characters = Array(body)
                let at = characters.isEmpty ? 0 : Int(random.next() % UInt64(characters.count))
                if random.next() % 2 == 0 || characters.isEmpty {
                    characters.insert(contentsOf: text(Int(1 + random.next() % 5)), at: at)
                } else {
                    characters.removeSubrange(at..<min(characters.count, at + Int(1 + random.next() % 30)))
                }
                body = String(characters)
            }
            newer["body"] = .string(body)
            if random.next() % 4 == 0 { newer["folder"] = nil }
            if random.next() % 4 == 0 { newer["tags"] = .array([.string("t")]) }
            let delta = RevisionDelta.make(from: newer, to: older)
            let stored = try RevisionDelta(
                values: try FieldsCoding.decode(FieldsCoding.encode(delta.values)), column: delta.columnJSON)
            #expect(try stored.apply(to: newer) == older, "seed \(TestSeed.replay), round \(round)")
        }
    }

    @Test func aSmallEditToALongTextIsStoredAsAPatch() throws {
        let long = String(repeating: "All work and no play makes Jack a dull boy. ", count: 500)
        let newer: [String: JSONValue] = ["body": .string(long + "The end.")]
        let older: [String: JSONValue] = ["body": .string(long)]
        let delta = RevisionDelta.make(from: newer, to: older)
        #expect(delta.values.isEmpty && delta.patches["body"] != nil)
        #expect(delta.storedBytes < 200, "\(delta.storedBytes)")
        #expect(try delta.apply(to: newer) == older)
        // A patch that does not apply to what it is read against is an error, never a wrong text.
        #expect(throws: StoreError.self) { _ = try delta.apply(to: ["body": .string("something else entirely")]) }
    }
}

@Suite struct HistoryChainTests {
    /// The rows of one record in memory, with a rewrite applied as a store applies it.
    struct Rows {
        var rows: [Int64: StoredRevision] = [:]

        mutating func save(rev: Int64, at: Date, fields: [String: JSONValue]) {
            rows[rev] = StoredRevision(
                rev: rev, conflict: false, seq: rev, updatedAt: at, device: nil, ccid: nil, fields: fields, delta: nil,
                size: Int64(FieldsCoding.encode(fields).utf8.count))
        }

        mutating func apply(_ rewrite: HistoryChain.Rewrite) {
            for (rev, _) in rewrite.deletes { rows[rev] = nil }
            for update in rewrite.updates {
                rows[update.rev]?.fields = update.fields
                rows[update.rev]?.delta = update.delta
            }
        }

        func read(_ rev: Int64) throws -> [String: JSONValue] {
            let chain = rows.values.filter { $0.rev >= rev }.sorted { $0.rev < $1.rev }
            guard let end = chain.firstIndex(where: { $0.delta == nil }) else {
                throw StoreError.corrupt("no whole row")
            }
            #expect(end <= HistoryChain.maxRun, "a chain of \(end) deltas")
            return try HistoryChain.materialize(Array(chain[...end]))
        }
    }

    /// 400 saves of a growing note kept (days 0 keeps everything), compacted after each: every
    /// revision reads back, chains stay within ``HistoryChain/maxRun``, and a save rewrites a
    /// bounded number of rows (anchors do not move with every save).
    @Test func anchorsStayPutAsSavesComeAndEveryRevisionReadsBack() throws {
        var rows = Rows()
        var bodies: [Int64: String] = [:]
        var body = "A note that grows. "
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        var largestRewrite = 0
        for rev in Int64(1)...400 {
            body += "Save \(rev) adds a sentence. "
            bodies[rev] = body
            rows.save(rev: rev, at: start.addingTimeInterval(Double(rev)), fields: ["body": .string(body)])
            let rewrite = try HistoryChain.plan(
                Array(rows.rows.values), policy: HistoryPolicy(days: 0), now: start.addingTimeInterval(Double(rev) + 5))
            if rev > 10 { largestRewrite = max(largestRewrite, rewrite.updates.count) }
            rows.apply(rewrite)
        }
        #expect(largestRewrite <= 2, "a save rewrote \(largestRewrite) rows")
        #expect(rows.rows.values.filter { $0.delta == nil }.count <= 400 / (3 * HistoryChain.maxRun / 4) + 1)
        for rev in Int64(1)...400 {
            #expect(try rows.read(rev)["body"] == .string(bodies[rev]!))
        }
    }

    /// What a pass reads during sustained typing (``SQLiteStore/passRevisions(_:userID:collection:id:)``):
    /// fields only for the ordinary rows above the newest delta, stubs for the rest. Bursts of
    /// saves every half second with quiet spells between them, under a 90-day policy, a pass
    /// 3 s after each save: every plan from such rows is the plan from every row whole, or it
    /// says it needs the others (``HistoryChain/Unloaded``); during typing it never does.
    /// NOTED_TEST_SEED picks the run.
    @Test func aPassFromTheRowsAboveTheNewestDeltaPlansAsOneFromEveryRow() throws {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "")
            ?? UInt64.random(in: 1...UInt64.max / 2)
        var random = SplitMix64(seed: seed)
        var rows = Rows()
        let policy = HistoryPolicy(days: 90)
        var now = Date(timeIntervalSince1970: 1_790_000_000)
        var body = "A note typed in bursts. "
        var rev: Int64 = 0
        var partialPlans = 0
        var fallbacks = 0
        var fallbacksWhileTyping = 0
        func pass(at: Date, typing: Bool) throws {
            let all = Array(rows.rows.values)
            let topDelta = all.filter { !$0.conflict && $0.delta != nil }.map(\.rev).max() ?? -1
            let partial = all.map { row in
                !row.conflict && row.rev > topDelta
                    ? row
                    : .stub(
                        rev: row.rev, conflict: row.conflict, seq: row.seq, updatedAt: row.updatedAt,
                        device: row.device,
                        ccid: row.ccid, whole: row.delta == nil, size: row.size)
            }
            let full = try HistoryChain.plan(all, policy: policy, now: at)
            do {
                let fromPartial = try HistoryChain.plan(partial, policy: policy, now: at)
                partialPlans += 1
                #expect(fromPartial.deletes.map(\.rev) == full.deletes.map(\.rev), "seed \(seed), rev \(rev)")
                #expect(fromPartial.updates.map(\.rev) == full.updates.map(\.rev), "seed \(seed), rev \(rev)")
                for (a, b) in zip(fromPartial.updates, full.updates) {
                    #expect(a.fields == b.fields && a.delta == b.delta, "seed \(seed), rev \(rev), update of \(a.rev)")
                }
                #expect(fromPartial.nextReview == full.nextReview, "seed \(seed), rev \(rev)")
            } catch is HistoryChain.Unloaded {
                fallbacks += 1
                if typing { fallbacksWhileTyping += 1 }
            }
            rows.apply(full)
        }
        for _ in 0..<40 {
            let saves = 5 + Int(random.next() % 60)
            for save in 0..<saves {
                rev += 1
                body += "w\(random.next() % 1000) "
                if body.count > 600 { body.removeFirst(body.count - 600) }
                rows.save(rev: rev, at: now, fields: ["body": .string(body)])
                now += 0.5
                // A pass 3 s after every sixth save and the last; the first of a burst may
                // thin what came before it.
                if save % 6 == 5 || save == saves - 1 { try pass(at: now + 3, typing: save > 5) }
            }
            // Quiet for between a minute and two days; a pass then.
            now += Double(60 + random.next() % (2 * 24 * 3600))
            try pass(at: now, typing: false)
        }
        #expect(
            partialPlans > 3 * fallbacks,
            "seed \(seed): \(partialPlans) plans from the top rows, \(fallbacks) read again")
        #expect(fallbacks > 0, "seed \(seed): a pass that needs older rows reads them")
        #expect(fallbacksWhileTyping == 0, "seed \(seed)")
    }

    /// Canonically equivalent texts (NFC and NFD) are different revisions: each reads back with
    /// its own bytes.
    @Test func equivalentButDifferentTextsReadBackByteForByte() throws {
        let nfc = "Caf\u{E9} " + String(repeating: "au lait ", count: 20)
        let nfd = "Cafe\u{301} " + String(repeating: "au lait ", count: 20)
        #expect(nfc == nfd)  // Swift's == is canonical equivalence
        let delta = RevisionDelta.make(from: ["body": .string(nfc)], to: ["body": .string(nfd)])
        let read = try delta.apply(to: ["body": .string(nfc)])
        #expect(read["body"]?.stringValue.map { Array($0.utf8) } == Array(nfd.utf8))
    }
}

@Suite struct HistoryStoreTests {
    static let backends = Backend.available
    let contract = StoreContractTests()

    func edit(_ id: String, baseRev: Int64, body: String) -> JSONValue {
        [
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
            "baseRev": .int(baseRev),
            "op": "upsert", "fields": ["body": ["set": .string(body)]],
        ]
    }

    /// A new note's first save leaves the history service nothing to do (after an import of
    /// 10,000 notes it had 10,000 passes to make); the note's first edit is due, and once
    /// compacted the record is reviewed only when its older revision ages.
    @Test(arguments: backends) func aFirstSaveIsNotDueAndAnEditIs(backend: Backend) async throws {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            let ids = (0..<3).map { _ in UUID().uuidString.lowercased() }
            for id in ids { _ = try await contract.push(store, user: user, contract.create(id, title: "t"), at: start) }
            #expect(
                try await store.thinHistory(
                    now: start.addingTimeInterval(3600), policy: HistoryPolicy(days: 90), limit: 100
                ).records == 0)
            _ = try await contract.push(
                store, user: user, edit(ids[0], baseRev: 1, body: "edited"), at: start.addingTimeInterval(4000))
            let first = try await store.thinHistory(
                now: start.addingTimeInterval(4010), policy: HistoryPolicy(days: 90), limit: 100)
            #expect(first.records == 1, "\(first)")
            #expect(
                try await store.thinHistory(
                    now: start.addingTimeInterval(4300), policy: HistoryPolicy(days: 90), limit: 100
                ).records == 0)
            // Next when rev 1 is a day old (its stretch grows; it stays, the state before rev 2's session).
            #expect(
                try await store.thinHistory(
                    now: start.addingTimeInterval(86400 - 60), policy: HistoryPolicy(days: 90), limit: 100
                ).records == 0)
            #expect(
                try await store.thinHistory(
                    now: start.addingTimeInterval(86400 + 300), policy: HistoryPolicy(days: 90), limit: 100
                ).records == 1)
            #expect(try await store.revisions(userID: user, collection: "notes", id: ids[0])?.map(\.rev) == [1, 2])
        }
    }

    /// A note edited most days for a year on a virtual clock, the history thinned every few
    /// hours as the service does: every promised revision is readable and equal to what was
    /// saved then, and the history stays within 3× the note's size plus 200 B a kept revision.
    @Test(arguments: backends) func aYearOfDailyEditingKeepsEveryPromisedVersion(backend: Backend) async throws {
        try await withStore(backend) { store in
            var random = TestSeed.generator(for: "aYearOfDailyEditingKeepsEveryPromisedVersion")
            let policy = HistoryPolicy(days: 90)
            let user = try await contract.makeUser(store)
            let id = UUID().uuidString.lowercased()
            var now = Date(timeIntervalSince1970: 1_780_000_000)
            var body = (0..<60).map { "Line \($0): a sentence of a note that grows and changes over the year." }.joined(
                separator: "\n")
            _ = try await contract.push(store, user: user, contract.create(id, title: "Diary"), at: now)
            var saved: [HistoryPolicy.Entry] = [.init(rev: 1, at: now)]
            var bodies: [Int64: String?] = [1: nil]
            var rev: Int64 = 1
            var lastThin = now
            for day in 0..<365 {
                guard random.next() % 7 != 0 else {
                    now = now.addingTimeInterval(86400)
                    continue
                }
                now = now.addingTimeInterval(Double(random.next() % 3600))
                for _ in 0..<(1 + random.next() % 6) {
                    var lines = body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                    let at = Int(random.next() % UInt64(lines.count))
                    lines[at] = "Line \(at) of day \(day): \(random.next() % 1000) words changed here."
                    if random.next() % 10 == 0 { lines.append("Day \(day) added a line.") }
                    body = lines.joined(separator: "\n")
                    now = now.addingTimeInterval(Double(20 + random.next() % 200))
                    let answer = try await contract.push(store, user: user, edit(id, baseRev: rev, body: body), at: now)
                    #expect(answer["status"] == "applied", "\(answer)")
                    rev += 1
                    saved.append(.init(rev: rev, at: now))
                    bodies[rev] = body
                }
                // Thinning as the service does: whenever due (every few hours here).
                for hour in stride(
                    from: lastThin.timeIntervalSince1970, through: now.timeIntervalSince1970 + 86400, by: 6 * 3600)
                {
                    _ = try await store.thinHistory(now: Date(timeIntervalSince1970: hour), policy: policy, limit: 100)
                }
                lastThin = now.addingTimeInterval(86400)
                now = now.addingTimeInterval(86400 - Double(Int(now.timeIntervalSince1970) % 86400))
            }
            let end = lastThin
            _ = try await store.thinHistory(now: end, policy: policy, limit: 100)
            let kept = try #require(try await store.revisions(userID: user, collection: "notes", id: id))
            let promised = HistoryPromise(days: 90).ordinary(saved.map { ($0.rev, $0.at) }, now: end)
            #expect(
                promised.isSubset(of: Set(kept.map(\.rev))), "missing \(promised.subtracting(kept.map(\.rev)).sorted())"
            )
            for revision in kept {
                let read = try #require(
                    try await store.revision(
                        userID: user, collection: "notes", id: id, rev: revision.rev, conflict: false))
                #expect(read.fields["body"]?.stringValue == bodies[revision.rev] ?? nil, "rev \(revision.rev)")
                #expect(revision.size == Int64(FieldsCoding.encode(read.fields).utf8.count))
            }
            let stored = try await storedHistoryBytes(store, user: user, id: id)
            let budget = 3 * body.utf8.count + 200 * kept.count
            print(
                "a year of daily editing (\(backend)): \(saved.count) saves, \(kept.count) kept, \(stored) bytes stored, budget \(budget) (note \(body.utf8.count) bytes)"
            )
            #expect(stored <= budget, "history \(stored) bytes, budget \(budget)")
        }
    }

    /// 150 saves of a 20 KB note within a minute, two days after it was last saved: the
    /// version before them is still there after them (and an hour later), each save reads back
    /// exactly, and the history stores far less than 150 copies.
    @Test(arguments: backends) func aBurstOfSavesIsCompactedAndTheVersionBeforeItRestorable(backend: Backend)
        async throws
    {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let id = UUID().uuidString.lowercased()
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            var body = (0..<200).map {
                "Paragraph \($0) of a long note, about a hundred bytes of text in each line of it."
            }.joined(separator: "\n")
            _ = try await contract.push(
                store, user: user, contract.create(id, title: "Long"), at: start.addingTimeInterval(-2 * 86400))
            _ = try await contract.push(
                store, user: user, edit(id, baseRev: 1, body: body), at: start.addingTimeInterval(-2 * 86400 + 1))
            var bodies: [Int64: String] = [2: body]
            for rev in Int64(3)...152 {
                body += " \(rev)"
                let at = start.addingTimeInterval(Double(rev) * 0.3)
                _ = try await contract.push(store, user: user, edit(id, baseRev: rev - 1, body: body), at: at)
                bodies[rev] = body
                if rev % 10 == 0 {
                    _ = try await store.thinHistory(
                        now: at.addingTimeInterval(PushAlgorithm.compactionDelay), policy: HistoryPolicy(days: 90),
                        limit: 100)
                }
            }
            _ = try await store.thinHistory(
                now: start.addingTimeInterval(120), policy: HistoryPolicy(days: 90), limit: 100)
            for rev in [Int64(2), 3, 77, 151, 152] {
                #expect(
                    try await store.revision(userID: user, collection: "notes", id: id, rev: rev, conflict: false)?
                        .fields["body"]?.stringValue == bodies[rev])
            }
            let stored = try await storedHistoryBytes(store, user: user, id: id)
            #expect(stored < 5 * body.utf8.count, "\(stored) bytes for 152 revisions of \(body.utf8.count)")
            // An hour later: the burst's 10-minute stretch keeps its newest save, and the state
            // before the burst (after two days of quiet) stays.
            _ = try await store.thinHistory(
                now: start.addingTimeInterval(3600), policy: HistoryPolicy(days: 90), limit: 100)
            let kept = try #require(try await store.revisions(userID: user, collection: "notes", id: id)).map(\.rev)
            #expect(kept == [2, 152], "\(kept)")
            for rev in kept {
                #expect(
                    try await store.revision(userID: user, collection: "notes", id: id, rev: rev, conflict: false)?
                        .fields["body"]?.stringValue == bodies[rev])
            }
        }
    }

    /// A record whose stored history cannot be read (its newest revision stored as a delta) is
    /// set aside with the error counted; every other record is thinned as usual.
    @Test(arguments: backends) func anUnreadableHistoryIsSetAsideAndTheOthersGoOn(backend: Backend) async throws {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            let (broken, fine) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            for id in [broken, fine] {
                _ = try await contract.push(store, user: user, contract.create(id, title: "t"), at: start)
                for rev in Int64(1)...2 {
                    _ = try await contract.push(
                        store, user: user, edit(id, baseRev: rev, body: "body \(rev)"),
                        at: start.addingTimeInterval(Double(rev)))
                }
            }
            try await executeRaw(
                store,
                [
                    (
                        "UPDATE revisions SET delta = '{}' WHERE user_id = $1 AND record_id = $2 AND rev = 3",
                        [user, broken]
                    )
                ])
            let done = try await store.thinHistory(
                now: start.addingTimeInterval(3600), policy: HistoryPolicy(days: 90), limit: 100)
            #expect(done.failed == 1 && done.records == 1, "\(done)")
            #expect(done.lastFailure?.contains(broken) == true)
            #expect(try await store.revisions(userID: user, collection: "notes", id: fine)?.map(\.rev) == [3])
            // Set aside for a day: the next pass does not take it again.
            let next = try await store.thinHistory(
                now: start.addingTimeInterval(3700), policy: HistoryPolicy(days: 90), limit: 100)
            #expect(next.failed == 0 && next.records == 0, "\(next)")
        }
    }

    /// A pass over more records than one batch writes (SQLite: 100 per transaction; PostgreSQL
    /// one) thins every one of them, and each reads back.
    @Test(arguments: backends) func aPassOfMoreRecordsThanABatchThinsEveryOne(backend: Backend) async throws {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            let ids = (0..<130).map { _ in UUID().uuidString.lowercased() }
            for id in ids {
                _ = try await contract.push(store, user: user, contract.create(id, title: "t"), at: start)
                for rev in Int64(1)...2 {
                    _ = try await contract.push(
                        store, user: user, edit(id, baseRev: rev, body: "\(id) body \(rev)"),
                        at: start.addingTimeInterval(Double(rev)))
                }
            }
            let done = try await store.thinHistory(
                now: start.addingTimeInterval(3600), policy: HistoryPolicy(days: 90), limit: 200)
            #expect(done.records == 130 && done.retried == 0 && done.failed == 0, "\(done)")
            for id in ids {
                #expect(try await store.revisions(userID: user, collection: "notes", id: id)?.map(\.rev) == [3])
                #expect(
                    try await store.revision(userID: user, collection: "notes", id: id, rev: 3, conflict: false)?
                        .fields["body"]?.stringValue == "\(id) body 2")
            }
        }
    }

    /// Two nodes on one PostgreSQL database thin the same records at once, while saves go on:
    /// nothing promised is lost, every revision reads back, and no thinning fails.
    @Test func twoNodesThinTheSameHistoriesAtOnce() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await withDatabase(.postgres) { location in
            guard case .postgres(let url) = location else { return }
            let first = try PostgresStore(url: url, limits: Limits(), logger: Logger(label: "test"))
            let second = try PostgresStore(url: url, limits: Limits(), logger: Logger(label: "test"))
            try await first.migrate()
            try await second.migrate()
            let user = try await contract.makeUser(first)
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            var ids: [String] = []
            var bodies: [String: [Int64: String]] = [:]
            for note in 0..<6 {
                let id = UUID().uuidString.lowercased()
                ids.append(id)
                _ = try await contract.push(first, user: user, contract.create(id, title: "n\(note)"), at: start)
                var body = String(repeating: "words of note \(note) ", count: 100)
                for rev in Int64(2)...30 {
                    body += " \(rev)"
                    _ = try await contract.push(
                        rev % 2 == 0 ? first : second, user: user, edit(id, baseRev: rev - 1, body: body),
                        at: start.addingTimeInterval(Double(rev) * 200))
                    bodies[id, default: [:]][rev] = body
                }
            }
            let later = start.addingTimeInterval(3 * 86400)
            async let a = first.thinHistory(now: later, policy: HistoryPolicy(days: 90), limit: 100)
            async let b = second.thinHistory(now: later, policy: HistoryPolicy(days: 90), limit: 100)
            let (one, two) = try await (a, b)
            #expect(one.records + two.records == 6, "\(one) \(two)")
            for id in ids {
                let kept = try #require(try await second.revisions(userID: user, collection: "notes", id: id))
                for revision in kept where revision.rev >= 2 {
                    #expect(
                        try await first.revision(
                            userID: user, collection: "notes", id: id, rev: revision.rev, conflict: false)?.fields[
                                "body"]?.stringValue == bodies[id]?[revision.rev])
                }
                let saved = (1...30).map {
                    HistoryPolicy.Entry(rev: Int64($0), at: start.addingTimeInterval($0 == 1 ? 0 : Double($0) * 200))
                }
                let promised = HistoryPromise(days: 90).ordinary(saved.map { ($0.rev, $0.at) }, now: later)
                #expect(promised.isSubset(of: Set(kept.map(\.rev))))
            }
            await first.shutdown()
            await second.shutdown()
        }
    }

    /// A database of the version before history by time: its revisions (whole copies, no
    /// size) are listed with sizes after the upgrade, compacted by the first thinning, and read
    /// back the same; pushes go on from them.
    @Test(arguments: backends) func aDatabaseFromBeforeHistoryByTimeUpgrades(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let old = try openStore(location)
            try await migrate(old, upTo: "blobs")
            let user = try await makeUserOfEarlierVersion(old)
            let id = UUID().uuidString.lowercased()
            let start = Date().addingTimeInterval(-3 * 86400).millis
            var statements: [(String, [any Sendable])] = [("UPDATE user_seq SET seq = 5 WHERE user_id = $1", [user])]
            var bodies: [Int64: String] = [:]
            for rev in Int64(1)...5 {
                let body = String(repeating: "An old note's text, saved five times. ", count: 40) + "version \(rev)"
                bodies[rev] = body
                statements.append(
                    (
                        "INSERT INTO revisions (user_id, collection, record_id, rev, conflict, seq, fields, device, ccid, updated_at) VALUES ($1, 'notes', $2, $3, $4, $5, $6, NULL, NULL, $7)",
                        [user, id, rev, false, rev, FieldsCoding.encode(["body": .string(body)]), start + rev * 1000]
                    ))
            }
            statements.append(
                (
                    "INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at) VALUES ($1, 'notes', $2, 5, 5, $3, $4, $5, $6)",
                    [user, id, false, FieldsCoding.encode(["body": .string(bodies[5]!)]), start + 1000, start + 5000]
                ))
            try await executeRaw(old, statements)
            await old.shutdown()

            let store = try openStore(location)
            try await store.migrate()
            let listed = try #require(try await store.revisions(userID: user, collection: "notes", id: id))
            #expect(listed.map(\.rev) == [1, 2, 3, 4, 5])
            #expect(
                listed.allSatisfy {
                    $0.size == Int64(FieldsCoding.encode(["body": .string(bodies[$0.rev]!)]).utf8.count)
                })
            // Due at once: the first pass compacts it (the saves were within a second: one stretch).
            let done = try await store.thinHistory(now: Date(), policy: HistoryPolicy(days: 90), limit: 100)
            #expect(done.records == 1)
            let kept = try #require(try await store.revisions(userID: user, collection: "notes", id: id)).map(\.rev)
            #expect(kept == [5])
            #expect(
                try await contract.push(store, user: user, edit(id, baseRev: 5, body: "new"))["status"] == "applied")
            _ = try await store.thinHistory(
                now: Date().addingTimeInterval(10), policy: HistoryPolicy(days: 90), limit: 100)
            #expect(
                try await store.revision(userID: user, collection: "notes", id: id, rev: 5, conflict: false)?.fields[
                    "body"]?.stringValue == bodies[5])
            await store.shutdown()
        }
    }
}

/// Bytes a record's revision rows store (their `fields` and `delta` columns).
func storedHistoryBytes(_ store: any NotedStore, user: String, id: String) async throws -> Int {
    switch store {
    case let sqlite as SQLiteStore:
        return try await sqlite.pool.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(length(CAST(fields AS BLOB)) + COALESCE(length(CAST(delta AS BLOB)), 0)), 0) FROM revisions
                    WHERE user_id = ? AND record_id = ?
                    """, arguments: [user, id]) ?? 0
        }
    case let postgres as PostgresStore:
        for try await total in try await postgres.client.query(
            """
            SELECT COALESCE(SUM(octet_length(fields) + COALESCE(octet_length(delta), 0)), 0)::BIGINT FROM revisions
            WHERE user_id = \(user) AND record_id = \(id)
            """, logger: postgres.logger
        ).decode(Int64.self) {
            return Int(total)
        }
        return 0
    default:
        return 0
    }
}
