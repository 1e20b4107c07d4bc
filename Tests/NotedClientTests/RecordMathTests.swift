import DiffMatchPatch
import Foundation
import NotedCore
import Testing

@testable import NotedClient

@Suite struct RecordMathTests {
    let math = RecordMath()
    let dmp = DiffMatchPatch()

    @Test(arguments: [
        ("[7]", "[57]"), ("one [7] two", "one [57] two"), ("helo world", "hello world"), ("a b c", "a x c"),
        ("the cat sat", "the cats sat on"), ("", "new"), ("old", ""), ("[1] [2] [3]", "[1] [3]"), ("x y", "x  y"),
        ("naïve café", "naive cafés"), ("emoji 👍🏽 here", "emoji 👎🏽 here"),
    ])
    func editsCoverWholeWords(old: String, new: String) {
        let diffs = math.editDiffs(old, new)
        #expect(dmp.text1(diffs) == old && dmp.text2(diffs) == new)
        // No change starts or ends inside a word: the kept text next to a change ends (or
        // starts) at whitespace, or the change's own edge is whitespace.
        for (index, diff) in diffs.enumerated() where diff.operation != .equal {
            if index > 0, diffs[index - 1].operation == .equal, let before = diffs[index - 1].text.last {
                #expect(before.isWhitespace || diff.text.first?.isWhitespace == true, "\(diffs)")
            }
            if index + 1 < diffs.count, diffs[index + 1].operation == .equal, let after = diffs[index + 1].text.first {
                #expect(after.isWhitespace || diff.text.last?.isWhitespace == true, "\(diffs)")
            }
        }
    }

    /// A rebase never splices words: every word of its result is a word of the text it was
    /// applied to or of the local text (the edits are whole words, the patch is applied
    /// strictly). Random word edits on both sides; the
    /// seed comes from NOTED_TEST_SEED and is printed on failure. The reference's fuzzy
    /// apply of character diffs does splice words in some of these cases (checked, so the
    /// cases can fail).
    @Test func aRebaseNeverSplicesWords() {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "")
            ?? UInt64.random(in: 1...UInt64.max / 2)
        var random = SplitMix64(seed: seed)
        func next(_ n: Int) -> Int { random.int(in: 0..<n) }
        var counter = 0
        func word() -> String {
            counter += 1
            return "[\(counter)]"
        }
        func edit(_ words: [String]) -> [String] {
            var words = words
            for _ in 0..<(1 + next(3)) {
                switch next(3) {
                case 0: words.insert(word(), at: next(words.count + 1))
                case 1 where !words.isEmpty: words.remove(at: next(words.count))
                default: if !words.isEmpty { words[next(words.count)] = word() }
                }
            }
            return words
        }
        var referenceSplices = 0
        for _ in 0..<2_000 {
            let base = (0..<(1 + next(8))).map { _ in word() }
            let ours = edit(base)
            let theirs = edit(base)
            let baseText = base.joined(separator: " ")
            let oursText = ours.joined(separator: " ")
            let allowed = Set(ours + theirs)
            let strict =
                math.rebase(
                    local: ["body": .string(oursText)], base: ["body": .string(baseText)],
                    onto: ["body": .string(theirs.joined(separator: " "))])["body"]?.stringValue ?? ""
            let patches = dmp.patchMake(baseText, oursText)
            // Every marker whole and known; between them only spaces (two words may end up
            // without a space between them: not spliced, and not checked).
            let spliced = Self.pieces(strict).filter { !allowed.contains($0) }
            #expect(spliced.isEmpty, "seed \(seed): \(base) ours \(ours) theirs \(theirs) gave \(strict)")
            if !spliced.isEmpty { return }
            let reference = dmp.patchApply(patches, to: theirs.joined(separator: " ")).text
            if Self.pieces(reference).contains(where: { !allowed.contains($0) }) { referenceSplices += 1 }
        }
        #expect(referenceSplices > 0, "seed \(seed): the reference spliced no word; the cases test nothing")
    }

    /// The markers of a text and whatever else is in it but spaces.
    static func pieces(_ text: String) -> [String] {
        let markers = text.matches(of: /\[\d+\]/).map { String($0.output) }
        let rest = text.replacing(/\[\d+\]/, with: " ").split(separator: " ").map(String.init)
        return markers + rest
    }

    @Test func aWordEditedInsideIsReplacedWhole() {
        #expect(
            math.editDiffs("one [7] two", "one [57] two") == [
                Diff(.equal, "one "), Diff(.delete, "[7]"), Diff(.insert, "[57]"), Diff(.equal, " two"),
            ])
        // A new word between others stays a pure insertion.
        let inserted = math.editDiffs("[1] [2]", "[1] [5] [2]")
        #expect(inserted.filter { $0.operation == .delete }.isEmpty)
    }

    /// Found by the simulation (a marker `[57]` came out as `5`): a word rewritten here and
    /// deleted elsewhere is not spliced into the text; the rebase reports it.
    @Test func aRewrittenWordDeletedMeanwhileIsNotSpliced() {
        let result = math.rebaseReportingConflicts(
            local: ["title": "[57]"], base: ["title": "[7]"], onto: ["title": ""])
        #expect(result.fields["title"] == "")
        #expect(!result.clean)
        let elsewhere = math.rebaseReportingConflicts(
            local: ["body": "a [57] b"], base: ["body": "a [7] b"], onto: ["body": "z a [7] b"])
        #expect(elsewhere.fields["body"] == "z a [57] b" && elsewhere.clean)
    }
}

@Suite struct SnapshotPullTests {
    func records(_ ids: [String]) -> [NotedCore.Record] {
        ids.map { server($0, rev: 1, NoteFields(body: $0)) }
    }

    @Test func aPullFromZeroIsASnapshotOverItsPages() {
        var snapshot = SnapshotPull()
        let first = snapshot.page(records: records(["a", "b"]), since: 0, cursor: 7, more: true, reset: false)
        // Halfway, the stored cursor stays where the snapshot started.
        #expect(first.storeCursor == 0 && first.keep == nil)
        let last = snapshot.page(records: records(["c"]), since: 7, cursor: 9, more: false, reset: false)
        #expect(last.storeCursor == 9 && last.keep == ["a", "b", "c"])
        // An ordinary pull afterwards drops nothing.
        let next = snapshot.page(records: records(["d"]), since: 9, cursor: 10, more: false, reset: false)
        #expect(next.storeCursor == 10 && next.keep == nil)
    }

    @Test func aResetCoversTheFollowingPagesToo() {
        var snapshot = SnapshotPull()
        let reset = snapshot.page(records: records(["a"]), since: 3, cursor: 20, more: true, reset: true)
        #expect(reset.storeCursor == 3 && reset.keep == nil)
        let after = snapshot.page(records: records(["new"]), since: 20, cursor: 25, more: false, reset: false)
        #expect(after.keep == ["a", "new"])
    }

    /// Found by `randomConcurrentEditsConverge` in a full test run: the server read the answer
    /// to a pull from 0 before another device's create committed, and sent it after that
    /// create's broadcast. The note, newer than the snapshot, must stay; one the snapshot's
    /// cursor covers and does not name was purged, and goes.
    @Test func aBroadcastNewerThanTheSnapshotIsKept() {
        var snapshot = SnapshotPull()
        snapshot.broadcastApplied(id: "newer", seq: 8)
        snapshot.broadcastApplied(id: "purged", seq: 4)
        let page = snapshot.page(records: records(["a"]), since: 0, cursor: 6, more: false, reset: false)
        #expect(page.keep == ["a", "newer"])
        // Covered by a later page: no longer kept by the next snapshot.
        _ = snapshot.page(records: [], since: 6, cursor: 9, more: false, reset: false)
        let again = snapshot.page(records: [], since: 0, cursor: 9, more: false, reset: false)
        #expect(again.keep == [])
    }

    /// Found by the simulation: a client whose first pull found nothing, then got a note in a
    /// broadcast, pulled from 0 again after the note was purged and kept it for ever.
    @Test func aStoreDropsWhatASnapshotFromZeroDidNotName() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "purged on the server"))
        let (kept, _) = try await syncedStore(NoteFields(body: "other"))
        _ = kept
        var snapshot = SnapshotPull()
        let page = snapshot.page(records: [], since: 0, cursor: 12, more: false, reset: false)
        _ = try await store.storePage(records: [], cursor: page.storeCursor)
        _ = try await store.dropAbsent(keeping: try #require(page.keep))
        #expect(try await store.note(id) == nil)
        #expect(try await store.cursor() == 12)
    }

    /// Found by the simulation (seed 1065): a create whose ack was lost is purged elsewhere; the
    /// client, at cursor 0, pulls from 0 (no tombstones) before resending, and the resend is
    /// answered `duplicate` with the original `seq`. The note must go.
    @Test func aCreateAppliedBeforeASnapshotThatLacksItIsGoneAtItsAck() async throws {
        let store = try LocalStore.inMemory()
        let note = try await store.create(NoteFields(title: "t", body: "b"))
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        var snapshot = SnapshotPull()
        let page = snapshot.page(records: [], since: 0, cursor: 5, more: false, reset: false)
        _ = try await store.storePage(records: [], cursor: page.storeCursor)
        _ = try await store.dropAbsent(keeping: try #require(page.keep))
        #expect(try await store.note(note.id) != nil)
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(note.id), "collection": "notes",
            "rev": 1, "seq": 3, "status": "duplicate",
        ])
        #expect(try await store.note(note.id) == nil)
        #expect(try await store.isOutboxEmpty())
    }

    /// The same, but the create is applied after the snapshot (`seq` beyond its cursor): it stays.
    @Test func aCreateAppliedAfterTheSnapshotStays() async throws {
        let store = try LocalStore.inMemory()
        let note = try await store.create(NoteFields(title: "t", body: "b"))
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.storePage(records: [], cursor: 5)
        _ = try await store.dropAbsent(keeping: [])
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(note.id), "collection": "notes",
            "rev": 1, "seq": 6, "status": "applied",
        ])
        #expect(try await store.note(note.id)?.rev == 1)
    }

    /// Found by the simulation (seed 1288): a purge broadcast applies whatever revision is held.
    @Test func aPurgeBroadcastAppliesWithoutItsPrevRev() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "x"))
        let (applied, _) = try await store.applyBroadcast(
            [
                "type": "change", "collection": "notes", "id": .string(id), "rev": 5, "prevRev": 4,
                "seq": 9, "op": "delete", "fields": [:],
            ], limits: Limits())
        #expect(applied)
        #expect(try await store.note(id) == nil)
    }
}
