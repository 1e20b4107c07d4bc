import Foundation
import NotedClient
import NotedCore
import Testing

/// The rules the web app must follow exactly as this client does (issue 19), as test vectors:
/// `Tests/web/vectors/record-math.json`, generated here from a fixed seed and checked in, and
/// read by `Tests/web/vectors.test.mjs`, which runs the web app's code on the same inputs.
///
/// - `delta`: the word-widened delta this client sends for an edit of a text field
///   (`RecordMath.ops`), from `old` to `new`.
/// - `rebase`: this device's edit (`base` → `mine`) placed onto someone else's (`theirs`) with
///   the strict patch application (`RecordMath.rebaseReportingConflicts`): the `text` and
///   whether every hunk found its place (`clean`).
///
/// This test fails when the Swift side no longer computes the checked-in vectors (regenerate
/// them on purpose with `NOTED_WRITE_VECTORS=1 swift test --filter SharedVectorTests`, and the
/// JavaScript side must then follow); the node test fails when the web app diverges.
@Suite struct SharedVectorTests {
    static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("web/vectors/record-math.json").path
    /// Fixed: the file is the same on every machine and every run.
    static let seed: UInt64 = 0x0019_5EED
    static let count = 1000

    /// Pieces texts are made of: words of several scripts, numbers and markers people edit
    /// inside (`[57]`), punctuation, emoji with modifiers and joiners, combining marks, CJK,
    /// and the line ends and spaces word widening depends on.
    static let pieces: [String] = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "note", "milk", "eggs", "[7]", "[57]", "[1]",
        "[30]",
        "naïve", "cafe\u{301}", "Übermaß", "straße", "Ωmega", "привет", "мир", "漢字", "東京", "かな", "שלום", "مرحبا",
        "👍", "👍🏽", "👨‍👩‍👧", "🇵🇹", "1,234.5", "e-mail", "don't", "(a)", "x=y;", "—", "…", "- [ ]", "- [x]", "#", "**bold**",
        " ", " ", " ", " ", "  ", "\n", "\n", "\n\n", "\t", "\r\n", ".", ",", "!", "?",
    ]

    /// Pieces mostly separated by a space, as prose is, sometimes by nothing or a line end.
    static func text(_ random: inout SplitMix64, words: Int) -> String {
        let separators = [" ", " ", " ", " ", "", "\n"]
        return (0..<words).map { _ in
            pieces[Int(random.next() % UInt64(pieces.count))]
                + separators[Int(random.next() % UInt64(separators.count))]
        }.joined()
    }

    /// One random edit of `text`: a piece replaced, inserted or removed, a letter changed inside
    /// a word, or a run deleted; sometimes several.
    static func edit(_ text: String, _ random: inout SplitMix64) -> String {
        var characters = Array(text)
        let edits = 1 + Int(random.next() % 3)
        for _ in 0..<edits {
            let at = characters.isEmpty ? 0 : Int(random.next() % UInt64(characters.count + 1))
            switch random.next() % 5 {
            case 0:
                characters.insert(contentsOf: Array(pieces[Int(random.next() % UInt64(pieces.count))]), at: at)
            case 1 where !characters.isEmpty:
                let end = min(characters.count, at + 1 + Int(random.next() % 8))
                characters.removeSubrange(min(at, characters.count - 1)..<end)
            case 2 where !characters.isEmpty:
                characters[min(at, characters.count - 1)] = Array("abcxyzé5漢👍")[Int(random.next() % 10)]
            case 3:
                characters.insert(
                    contentsOf: Array(" " + pieces[Int(random.next() % UInt64(pieces.count))] + " "), at: at)
            default:
                if !characters.isEmpty {
                    let end = min(characters.count, at + Int(random.next() % 4))
                    characters.replaceSubrange(
                        min(at, characters.count - 1)..<max(end, min(at, characters.count - 1)),
                        with: Array(pieces[Int(random.next() % UInt64(pieces.count))]))
                }
            }
        }
        return String(characters)
    }

    /// The vectors, one case per line.
    static func generate() -> String {
        var random = SplitMix64(seed: seed)
        let math = RecordMath(schema: .notes)
        var deltas: [String] = []
        var rebases: [String] = []
        for _ in 0..<count {
            let old = text(&random, words: 4 + Int(random.next() % 30))
            let new = edit(old, &random)
            let ops = math.ops(from: ["body": .string(old)], to: ["body": .string(new)], textAsSet: false)
            let delta = ops["body"]?.json["delta"] ?? .null
            deltas.append(JSONValue.object(["old": .string(old), "new": .string(new), "delta": delta]).jsonString)
        }
        for _ in 0..<count {
            let base = text(&random, words: 4 + Int(random.next() % 30))
            let mine = edit(base, &random)
            let theirs = edit(base, &random)
            let (fields, clean) = math.rebaseReportingConflicts(
                local: ["body": .string(mine)], base: ["body": .string(base)], onto: ["body": .string(theirs)])
            rebases.append(
                JSONValue.object([
                    "base": .string(base), "mine": .string(mine), "theirs": .string(theirs),
                    "text": fields["body"] ?? .null, "clean": .bool(clean),
                ]).jsonString)
        }
        return "{\"version\":1,\"seed\":\(seed),\n\"delta\":[\n" + deltas.joined(separator: ",\n")
            + "\n],\n\"rebase\":[\n"
            + rebases.joined(separator: ",\n") + "\n]}\n"
    }

    /// `generated` is the checked-in file at `path` (written there first with
    /// NOTED_WRITE_VECTORS=1); else an issue naming the first line that differs and how to
    /// regenerate it (`suite`, the test to filter on).
    static func checkVectors(_ generated: String, at path: String, suite: String) throws {
        if ProcessInfo.processInfo.environment["NOTED_WRITE_VECTORS"] == "1" {
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try generated.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let stored = try String(contentsOfFile: path, encoding: .utf8)
        let (a, b) = (stored.split(separator: "\n"), generated.split(separator: "\n"))
        let first = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(
            stored == generated,
            """
            the Swift client no longer computes Tests/web/vectors/\((path as NSString).lastPathComponent) (first \
            difference on line \((first ?? min(a.count, b.count)) + 1)); if that change is meant, regenerate with \
            NOTED_WRITE_VECTORS=1 swift test --filter \(suite) and make the web app follow
            """)
    }

    @Test func theCheckedInVectorsAreWhatThisClientComputes() throws {
        let generated = Self.generate()
        try Self.checkVectors(generated, at: Self.path, suite: "SharedVectorTests")
        // The cases are not all trivial: some rebases conflict, most do not.
        let conflicts = generated.components(separatedBy: "\"clean\":false").count - 1
        #expect(
            conflicts > Self.count / 50 && conflicts < Self.count * 3 / 4,
            "\(conflicts) conflicting rebases of \(Self.count)")
    }
}
