import Foundation
import NotedCore
import Testing

@testable import NotedServer

/// Which changes SQLite's writer decides itself (``PushAlgorithm/isCheapForWriter(_:current:)``)
/// and which it leaves to a reader.
@Suite struct PushAlgorithmTests {
    let algorithm = PushAlgorithm(
        processor: ChangeProcessor(schemas: .v1, merger: FieldMerger(limits: Limits()), conflictRevisionsKept: 10))
    let id = "0c5f3a1e-2b4d-4c6e-8f10-1a2b3c4d5e6f"

    func change(baseRev: Int64, _ fields: JSONValue) throws -> Change {
        try ChangeParser().parse([
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
            "baseRev": .int(baseRev), "op": "upsert", "fields": fields,
        ])
    }

    func note(rev: Int64, body: String) -> Record {
        Record(
            collection: "notes", id: id, rev: rev, seq: rev, deleted: false, fields: ["body": .string(body)],
            createdAt: Date(), updatedAt: Date())
    }

    @Test func aDeltaCountsWhatItInsertsAndDeletes() {
        #expect(PushAlgorithm.changedCharacters("=5\t+abc\t-2\t=3") == 5)
        #expect(PushAlgorithm.changedCharacters("+%E2%82%AC") == 9)  // as sent: at least what it decodes to
        #expect(PushAlgorithm.changedCharacters("=10") == 0)
        #expect(PushAlgorithm.changedCharacters("") == 0)
        #expect(PushAlgorithm.changedCharacters("x3") == nil)
        #expect(PushAlgorithm.changedCharacters("=1\t-two") == nil)
        #expect(PushAlgorithm.changedCharacters("-9999999999999999999999") == nil)
    }

    @Test func aKeystrokeIsDecidedByTheWriter() throws {
        let body = String(repeating: "a", count: 2000)
        let keystroke = try change(baseRev: 3, ["body": ["delta": "=1000\t+x\t=1000"]])
        #expect(algorithm.isCheapForWriter(keystroke, current: note(rev: 3, body: body)))
        let title = try change(baseRev: 3, ["title": ["set": "a title"]])
        #expect(algorithm.isCheapForWriter(title, current: note(rev: 3, body: body)))
        let create = try change(baseRev: 0, ["body": ["set": .string(String(repeating: "b", count: 1500))]])
        #expect(algorithm.isCheapForWriter(create, current: nil))
    }

    @Test func largeTextChangesAndMergesAreLeftToAReader() throws {
        let body = String(repeating: "a", count: 2000)
        // Two unrelated texts, far below isCostly's 32 KiB: their diff is what the bound is for.
        let unrelated = try change(baseRev: 3, ["body": ["set": .string(String(repeating: "z", count: 16_000))]])
        #expect(!algorithm.isCostly(unrelated, current: note(rev: 3, body: String(repeating: "y", count: 16_000))))
        #expect(
            !algorithm.isCheapForWriter(unrelated, current: note(rev: 3, body: String(repeating: "y", count: 16_000))))
        let smallSetOverText = try change(baseRev: 3, ["body": ["set": "short"]])
        #expect(!algorithm.isCheapForWriter(smallSetOverText, current: note(rev: 3, body: body + body)))
        let paste = try change(
            baseRev: 3, ["body": ["delta": .string("=2000\t+" + String(repeating: "p", count: 3000))]])
        #expect(!algorithm.isCheapForWriter(paste, current: note(rev: 3, body: body)))
        let cut = try change(baseRev: 3, ["body": ["delta": "-2049\t=1951"]])
        #expect(!algorithm.isCheapForWriter(cut, current: note(rev: 3, body: body + body)))
        let smallerCut = try change(baseRev: 3, ["body": ["delta": "-2048\t=1952"]])
        #expect(algorithm.isCheapForWriter(smallerCut, current: note(rev: 3, body: body + body)))
        let stale = try change(baseRev: 2, ["body": ["delta": "=1000\t+x\t=1000"]])
        #expect(!algorithm.isCheapForWriter(stale, current: note(rev: 3, body: body)))
        let notADelta = try change(baseRev: 3, ["body": ["delta": "?"]])
        #expect(!algorithm.isCheapForWriter(notADelta, current: note(rev: 3, body: body)))
    }
}
