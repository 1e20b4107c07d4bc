import Foundation
import NotedCore
import TestSupport
import Testing

@testable import DiffMatchPatch

/// Differential test against PyPI's pure-Python `diff-match-patch` (run by
/// `scripts/dmp-python-peer.py`), over a few hundred seeded random pairs.
///
/// The JavaScript reference is the contract, so only what the Python port and the reference
/// agree on is compared (each rule below was checked against node on thousands of pairs):
///
/// - Python counts code points, the reference UTF-16 code units: texts stay in the BMP.
/// - `diff_main` (timeout 0, line mode off) and its delta: always compared.
/// - Line mode runs a semantic cleanup over line codes, and Python's `isspace` calls codes
///   28…31 whitespace where JavaScript's `\s` does not: compared below 28 distinct lines.
/// - `patch_make` in Python splits a hunk at an equality of exactly 2 × `Patch_Margin` (8)
///   code units where the reference keeps it inside the hunk: patches are compared only when
///   no such equality occurs.
/// - Semantic cleanup scores characters with Python's Unicode `isalnum`/`isspace` where the
///   reference uses `[a-zA-Z0-9]` and `\s`: `patch_make(a, b)` (which cleans up) and
///   `patch_apply` are compared only on ASCII texts without codes 28…31.
/// - `patch_apply` onto an edited target can place a deletion differently in Python: only the
///   per-hunk results are compared there, not the text.
@Suite(
    .enabled("needs python3 with the diff-match-patch package (scripts/test installs it)") {
        await PythonPeer.isUsable()
    })
struct DifferentialTests {
    static let cases = 300

    @Test func randomPairsMatchThePythonPort() async throws {
        var random = TestSeed.generator(for: "differential")
        let kinds = RandomText.Kind.allCases.filter(\.isBMPOnly)
        var requests: [PythonPeer.Case] = []
        for index in 0..<Self.cases {
            let kind = kinds[index % kinds.count]
            let (a, b) = RandomText.pair(kind, maxLength: random.chance(1, in: 10) ? 1500 : 300, using: &random)
            requests.append(PythonPeer.Case(a: a, b: b, target: RandomText.edit(a, kind, using: &random)))
        }
        let answers = try await PythonPeer.run(requests)
        try #require(answers.count == requests.count, "the peer answered \(answers.count) of \(requests.count) cases")

        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        let margin = dmp.configuration.patchMargin
        var compared: [String: Int] = [:]
        for (index, (request, peer)) in zip(requests, answers).enumerated() {
            let a = request.a
            let b = request.b
            let context = "\(TestSeed.replay) case \(index): \(a.debugDescription) → \(b.debugDescription)"
            func compare<T: Equatable>(_ name: String, _ ours: T, _ theirs: T) {
                compared[name, default: 0] += 1
                #expect(ours == theirs, "\(name) differs from Python's, \(context)")
            }

            let diffs = dmp.diff(a, b, checkLines: false)
            compare("diff_main", diffs, peer.diff.map(\.diff))
            compare("diff_toDelta", dmp.toDelta(diffs), peer.delta)
            if Self.distinctLineCount(a, b) < 28 {
                compare("diff_main line mode", dmp.diff(a, b, checkLines: true), peer.diffLines.map(\.diff))
            }
            if !Self.hasInnerEquality(ofLength: 2 * margin, diffs) {
                compare("patch_make(a, diffs)", dmp.patchToText(dmp.patchMake(a, diffs)), peer.patchFromDiffs)
            }

            var cleaned = dmp.diff(a, b, checkLines: true)
            if cleaned.count > 2 {
                dmp.cleanupSemantic(&cleaned)
                dmp.cleanupEfficiency(&cleaned)
            }
            guard !Self.hasInnerEquality(ofLength: 2 * margin, cleaned), Self.scoresAlike(a + b) else { continue }
            let patches = dmp.patchMake(a, b)
            compare("patch_make(a, b)", dmp.patchToText(patches), peer.patchText)
            let applied = dmp.patchApply(patches, to: a)
            compare(
                "patch_apply on a", PythonPeer.Applied(text: applied.text, results: applied.results), peer.applySelf)
            if Self.scoresAlike(request.target) {
                compare(
                    "patch_apply results on an edited target", dmp.patchApply(patches, to: request.target).results,
                    peer.applyTarget.results)
            }
        }
        // The rules above must leave enough to compare, or the test proves little.
        #expect(compared["patch_make(a, b)", default: 0] >= Self.cases / 5, "compared \(compared)")
        #expect(compared["diff_main line mode", default: 0] >= Self.cases / 2, "compared \(compared)")
    }

    /// Whether an equality other than the last is exactly `length` code units long.
    static func hasInnerEquality(ofLength length: Int, _ diffs: [Diff]) -> Bool {
        diffs.dropLast().contains { $0.operation == .equal && $0.text.utf16.count == length }
    }

    /// Whether Python and JavaScript classify every character of `text` alike for the semantic
    /// cleanup: ASCII, but not the separators 28…31 that only Python calls whitespace.
    static func scoresAlike(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0.value < 0x80 && !(0x1C...0x1F).contains($0.value) }
    }

    /// How many distinct lines two texts have between them (line mode's alphabet size).
    static func distinctLineCount(_ a: String, _ b: String) -> Int {
        var lines = Set<Substring>()
        for text in [a, b] {
            var start = text.startIndex
            while start < text.endIndex {
                let end = text[start...].firstIndex(of: "\n").map { text.index(after: $0) } ?? text.endIndex
                lines.insert(text[start..<end])
                start = end
            }
        }
        return lines.count
    }
}

/// The Python port, run as a child process with `scripts/dmp-python-peer.py`.
enum PythonPeer {
    struct Case: Encodable {
        var a: String
        var b: String
        var target: String
    }

    struct PeerDiff: Decodable {
        var diff: Diff

        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            let op = try container.decode(Int.self)
            let text = try container.decode(String.self)
            guard let operation = Diff.Operation(rawValue: op) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "operation \(op)")
            }
            diff = Diff(operation, text)
        }
    }

    struct Applied: Decodable, Equatable {
        var text: String
        var results: [Bool]

        init(text: String, results: [Bool]) {
            self.text = text
            self.results = results
        }

        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            text = try container.decode(String.self)
            results = try container.decode([Bool].self)
        }
    }

    struct Answer: Decodable {
        var diff: [PeerDiff]
        var diffLines: [PeerDiff]
        var delta: String
        var patchFromDiffs: String
        var patchText: String
        var applySelf: Applied
        var applyTarget: Applied
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The driver script, found from this file's place in the repository.
    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts/dmp-python-peer.py")

    /// Whether `python3` runs and imports `diff_match_patch`; prints a notice when not.
    ///
    /// With `NOTED_TEST_REQUIRE_PYTHON_PEER=1` a missing peer is a failure instead of a skip.
    static func isUsable() async -> Bool {
        let required = ProcessInfo.processInfo.environment["NOTED_TEST_REQUIRE_PYTHON_PEER"] == "1"
        do {
            let result = try await ChildProcess.run("/usr/bin/env", ["python3", "-c", "import diff_match_patch"])
            if result.status == 0 { return true }
            print(
                "NOTICE: DifferentialTests skipped: python3 cannot import diff_match_patch (pip install diff-match-patch): \(result.stderr)"
            )
        } catch {
            print("NOTICE: DifferentialTests skipped: cannot run python3: \(error)")
        }
        return required
    }

    /// Runs the driver over `cases`.
    static func run(_ cases: [Case]) async throws -> [Answer] {
        let request = try JSONEncoder().encode(["cases": cases])
        let result = try await ChildProcess.run(
            "/usr/bin/env", ["python3", script.path], stdin: String(decoding: request, as: UTF8.self),
            timeout: .seconds(600))
        guard result.status == 0 else {
            throw Failure(description: "\(script.lastPathComponent) exited with \(result.status): \(result.stderr)")
        }
        return try JSONDecoder().decode([Answer].self, from: Data(result.stdout.utf8))
    }
}
