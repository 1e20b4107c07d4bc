import DiffMatchPatch
import Foundation
import Testing

@testable import NotedCore

@Suite struct ChangeParserTests {
    let parser = ChangeParser(limits: Limits(maxTextLength: 5, maxTags: 2, maxTagLength: 3))
    let id = "0b4c2a6e-1f1e-4b8e-9a55-1d5f3c1e2a77"

    func change(_ fields: JSONValue, baseRev: JSONValue = 1, op: JSONValue = "upsert") -> JSONValue {
        ["ccid": .string(id), "collection": "notes", "id": .string(id), "baseRev": baseRev, "op": op, "fields": fields]
    }

    func code(_ value: JSONValue) -> String? {
        do {
            _ = try parser.parse(value)
            return nil
        } catch {
            return error.code.rawValue
        }
    }

    @Test func aValidChangeParsesEveryOpKind() throws {
        let parsed = try parser.parse(
            change([
                "title": ["set": "hi"], "body": ["delta": "=2"], "tags": ["add": ["a", "a"], "remove": ["b"]],
                "folder": ["set": nil], "pinned": ["set": true],
            ]))
        #expect(parsed.fields["title"] == .textSet("hi"))
        #expect(parsed.fields["body"] == .textDelta("=2"))
        #expect(parsed.fields["tags"] == .setAddRemove(add: ["a"], remove: ["b"]))
        #expect(parsed.fields["folder"] == .scalarSet(.null))
        #expect(parsed.fields["pinned"] == .scalarSet(true))
    }

    @Test(
        arguments: [
            (JSONValue.int(-1), "bad_request"), (.double(1.5), "bad_request"), (.string("1"), "bad_request"),
            (.int(ChangeParser.maxSafeInteger + 1), "bad_request"), (.int(3), nil),
        ] as [(JSONValue, String?)])
    func baseRevMustBeASafeNonNegativeInteger(baseRev: JSONValue, expected: String?) {
        #expect(code(change(["title": ["set": "x"]], baseRev: baseRev)) == expected)
    }

    @Test func limitsGiveTooLarge() {
        #expect(code(change(["title": ["set": "123456"]])) == "too_large")
        #expect(code(change(["tags": ["set": ["a", "b", "c"]]])) == "too_large")
        #expect(code(change(["tags": ["set": ["abcd"]]])) == "too_large")
    }

    @Test func schemaViolationsAreInvalidField() {
        #expect(code(change(["nope": ["set": "x"]])) == "invalid_field")
        #expect(code(change(["pinned": ["set": "true"]])) == "invalid_field")
        #expect(code(change(["title": ["set": "x", "delta": "=1"]])) == "invalid_field")
        #expect(code(change(["tags": [:]])) == "invalid_field")
    }

    @Test func aDeleteCarriesNoFields() {
        #expect(code(change(["title": ["set": "x"]], op: "delete")) == "bad_request")
        #expect(code(change([:], op: "delete")) == nil)
        #expect(code(change([:], baseRev: 0, op: "delete")) == "bad_request")
    }

    @Test func uuidsMustBeCanonicalLowerCase() {
        #expect(UUIDText.isCanonical(id))
        #expect(!UUIDText.isCanonical(id.uppercased()))
        #expect(!UUIDText.isCanonical("0b4c2a6e1f1e4b8e9a551d5f3c1e2a77"))
        #expect(!UUIDText.isCanonical(id + "0"))
    }
}

@Suite struct FieldMergerTests {
    let merger = FieldMerger(limits: Limits())

    @Test func exactDeltaAppliesAgainstTheCurrentValue() throws {
        let result = try merger.apply(
            ["body": .textDelta("=5\t+ world")], schema: .notes, current: ["body": "hello"], base: nil)
        #expect(result.fields["body"] == "hello world")
        #expect(result.conflicts.isEmpty && result.conflictFields == nil)
    }

    @Test func aStaleDeltaIsPatchedOntoTheCurrentValue() throws {
        let result = try merger.apply(
            ["body": .textDelta("=6\t+big \t=5")], schema: .notes,
            current: ["body": "hello brave world"], base: ["body": "hello world"])
        #expect(result.fields["body"] == "hello brave big world" || result.fields["body"] == "hello big brave world")
    }

    /// Found by the simulation (seed 23): one device replaced `[1]` with `[30]`, another,
    /// not having seen that, deleted `[1]`. The reference's fuzzy patch deletes `[30]` too.
    @Test func aStaleDeleteNeverRemovesTextWrittenMeanwhile() throws {
        let base = "[4] [1] [7]"
        let delta = DiffMatchPatch().toDelta(DiffMatchPatch().diff(base, "[4] [7]"))
        let result = try merger.apply(
            ["body": .textDelta(delta)], schema: .notes, current: ["body": "[4] [30] [7]"],
            base: ["body": .string(base)])
        #expect(result.fields["body"] == "[4] [30] [7]")
        #expect(result.conflicts == ["body"])
        #expect(result.conflictFields?["body"] == "[4] [7]")
    }

    @Test func aStaleDeleteOfUnchangedTextStillApplies() throws {
        let base = "one two three"
        let delta = DiffMatchPatch().toDelta(DiffMatchPatch().diff(base, "one three"))
        let result = try merger.apply(
            ["body": .textDelta(delta)], schema: .notes, current: ["body": "zero one two three four"],
            base: ["body": .string(base)])
        #expect(result.fields["body"] == "zero one three four")
        #expect(result.conflicts.isEmpty && result.conflictFields == nil)
    }

    /// Bounded work per change (issue 14): a stale edit that cannot be placed in time, or is
    /// spread over too many hunks, leaves the current text and is kept whole as a conflict.
    @Test func aStaleEditOutOfTimeOrTooScatteredIsKeptAsAConflictNotLost() throws {
        let words = (0..<3_000).map { "paragraph\($0)" }
        let base = words.joined(separator: " ")
        let edited = words.map { $0 + "x" }.joined(separator: " ")  // 3,000 separate edits
        let delta = DiffMatchPatch().toDelta(DiffMatchPatch().diff(base, edited))
        let current = "intro " + base
        // Too many hunks: nothing placed, nothing lost.
        let scattered = try merger.apply(
            ["body": .textDelta(delta)], schema: .notes, current: ["body": .string(current)],
            base: ["body": .string(base)])
        #expect(scattered.fields["body"] == .string(current))
        #expect(scattered.conflicts == ["body"] && scattered.conflictFields?["body"] == .string(edited))
        // No time at all: one hunk is not placed either, and is kept the same way.
        var hurried = merger
        hurried.timeBudget = .zero
        let small = DiffMatchPatch().toDelta(DiffMatchPatch().diff("one two three", "one 2 three"))
        let late = try hurried.apply(
            ["body": .textDelta(small)], schema: .notes, current: ["body": "zero one two three"],
            base: ["body": "one two three"])
        #expect(late.fields["body"] == "zero one two three")
        #expect(late.conflicts == ["body"] && late.conflictFields?["body"] == "one 2 three")
        // With time, the same hunk is placed.
        let inTime = try merger.apply(
            ["body": .textDelta(small)], schema: .notes, current: ["body": "zero one two three"],
            base: ["body": "one two three"])
        #expect(inTime.fields["body"] == "zero one 2 three" && inTime.conflicts.isEmpty)
    }

    @Test func aDeltaOfTooManyOperationsIsTooLarge() {
        let base = String(repeating: "ab", count: 30_000)
        let delta = (0..<30_000).map { _ in "=1\t-1" }.joined(separator: "\t")  // 60,000 operations
        #expect {
            try merger.apply(["body": .textDelta(delta)], schema: .notes, current: ["body": .string(base)], base: nil)
        } throws: { error in
            (error as? ProtocolError)?.code == .tooLarge
        }
    }

    @Test func aDeltaThatDoesNotFitIsInvalid() {
        #expect(throws: ProtocolError.self) {
            try merger.apply(["body": .textDelta("=9")], schema: .notes, current: ["body": "abc"], base: nil)
        }
    }

    @Test func broadcastOpsUseADeltaWhenShorter() {
        let long = String(repeating: "text ", count: 40)
        let ops = merger.ops(
            from: ["body": .string(long), "pinned": false], to: ["body": .string(long + "!"), "pinned": true],
            schema: .notes)
        #expect(ops["body"]?["delta"] != nil)
        #expect(ops["pinned"] == ["set": true])
        #expect(merger.ops(from: ["body": "a"], to: ["body": "a"], schema: .notes).isEmpty)
    }
}

@Suite struct WireFormatTests {
    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00.000Z"), (951_782_400.5, "2000-02-29T00:00:00.500Z"),
        (1_795_331_563.123, "2026-11-22T07:12:43.123Z"),
    ])
    func timestampsAreRFC3339WithMilliseconds(seconds: Double, expected: String) {
        #expect(Timestamp.format(.init(timeIntervalSince1970: seconds)) == expected)
    }

    @Test func jsonKeepsIntegersExact() throws {
        #expect(try JSONValue.parse("9007199254740991") == .int(9_007_199_254_740_991))
        #expect(try JSONValue.parse("1.5") == .double(1.5))
        #expect(try JSONValue.parse(#"{"a":[true,null,"x"]}"#) == ["a": [true, nil, "x"]])
        #expect(throws: (any Error).self) { try JSONValue.parse("{") }
    }
}
