import Foundation
import Testing

@testable import DiffMatchPatch

/// The reference's diff tests: common prefix/suffix/overlap, half-match, line mode, bisect and
/// `diff_main`, plus text1/text2, xIndex, Levenshtein and pretty HTML.
struct DiffTests {
    let dmp = DiffMatchPatch()

    @Test(arguments: [
        ("abc", "xyz", 0),
        ("1234abcdef", "1234xyz", 4),
        ("1234", "1234xyz", 4),
        ("", "abc", 0),
    ])
    func commonPrefixCountsSharedLeadingCodeUnits(text1: String, text2: String, expected: Int) {
        #expect(dmp.commonPrefix(text1, text2) == expected)
    }

    @Test(arguments: [
        ("abc", "xyz", 0),
        ("abcdef1234", "xyz1234", 4),
        ("1234", "xyz1234", 4),
        ("abc", "", 0),
    ])
    func commonSuffixCountsSharedTrailingCodeUnits(text1: String, text2: String, expected: Int) {
        #expect(dmp.commonSuffix(text1, text2) == expected)
    }

    @Test(arguments: [
        ("", "abcd", 0),
        ("abc", "abcd", 3),
        ("123456", "abcd", 0),
        ("123456xxx", "xxxabcd", 3),
        // A ligature is not its letters (U+FB01 is not "fi").
        ("fi", "\u{FB01}i", 0),
    ])
    func commonOverlapFindsSuffixOfFirstThatIsPrefixOfSecond(text1: String, text2: String, expected: Int) {
        #expect(dmp.commonOverlap(text1, text2) == expected)
    }

    @Test(
        arguments: [
            // No match.
            ("1234567890", "abcdef", nil),
            ("12345", "23", nil),
            // Single match.
            ("1234567890", "a345678z", ["12", "90", "a", "z", "345678"]),
            ("a345678z", "1234567890", ["a", "z", "12", "90", "345678"]),
            ("abc56789z", "1234567890", ["abc", "z", "1234", "0", "56789"]),
            ("a23456xyz", "1234567890", ["a", "xyz", "1", "7890", "23456"]),
            // Multiple matches.
            ("121231234123451234123121", "a1234123451234z", ["12123", "123121", "a", "z", "1234123451234"]),
            ("x-=-=-=-=-=-=-=-=-=-=-=-=", "xx-=-=-=-=-=-=-=", ["", "-=-=-=-=-=", "x", "", "x-=-=-=-=-=-=-="]),
            ("-=-=-=-=-=-=-=-=-=-=-=-=y", "-=-=-=-=-=-=-=yy", ["-=-=-=-=-=", "", "", "y", "-=-=-=-=-=-=-=y"]),
            // Non-optimal half-match: the optimal diff would be -q+x=H-i+e=lloHe+Hu=llo-Hew+y.
            ("qHilloHelloHew", "xHelloHeHulloy", ["qHillo", "w", "x", "Hulloy", "HelloHe"]),
        ] as [(String, String, [String]?)])
    func halfMatchWithTimeoutSplitsAroundLongCommonSubstring(text1: String, text2: String, expected: [String]?) {
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 1 }
        #expect(dmp.halfMatch(text1, text2) == expected)
    }

    @Test func halfMatchIsOffWithoutTimeoutSoTheDiffStaysOptimal() {
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        #expect(dmp.halfMatch("qHilloHelloHew", "xHelloHeHulloy") == nil)
        #expect(dmp.halfMatch("1234567890", "a345678z") == nil)
    }

    @Test(arguments: [
        (
            "alpha\nbeta\nalpha\n", "beta\nalpha\nbeta\n", "\u{01}\u{02}\u{01}", "\u{02}\u{01}\u{02}",
            ["", "alpha\n", "beta\n"]
        ),
        ("", "alpha\r\nbeta\r\n\r\n\r\n", "", "\u{01}\u{02}\u{03}\u{03}", ["", "alpha\r\n", "beta\r\n", "\r\n"]),
        ("a", "b", "\u{01}", "\u{02}", ["", "a", "b"]),
    ])
    func linesToCharsGivesEachDistinctLineOneCodeUnit(
        text1: String, text2: String, chars1: String, chars2: String, lines: [String]
    ) {
        let result = dmp.linesToChars(text1, text2)
        #expect(result.chars1 == Array(chars1.utf16))
        #expect(result.chars2 == Array(chars2.utf16))
        #expect(result.lineArray.map(string(utf16:)) == lines)
    }

    /// Lines "1\n" … "300\n" and the code units 1 … 300: more than 256 shows any 8-bit limit.
    static let threeHundredLines = (1...300).map { "\($0)\n" }
    static let threeHundredChars = (1...300).map { UInt16($0) }

    @Test func linesToCharsHandlesMoreThan256Lines() {
        let result = dmp.linesToChars(Self.threeHundredLines.joined(), "")
        #expect(result.chars1 == Self.threeHundredChars)
        #expect(result.chars2 == [])
        #expect(result.lineArray.map(string(utf16:)) == [""] + Self.threeHundredLines)
    }

    @Test func charsToLinesRestoresTheLines() {
        var diffs = [eq("\u{01}\u{02}\u{01}"), ins("\u{02}\u{01}\u{02}")]
        dmp.charsToLines(&diffs, ["", "alpha\n", "beta\n"].map { Array($0.utf16) })
        #expect(diffs == [eq("alpha\nbeta\nalpha\n"), ins("beta\nalpha\nbeta\n")])
    }

    @Test func charsToLinesHandlesMoreThan256Lines() {
        var diffs = [del(string(utf16: Self.threeHundredChars))]
        dmp.charsToLines(&diffs, ([""] + Self.threeHundredLines).map { Array($0.utf16) })
        #expect(diffs == [del(Self.threeHundredLines.joined())])
    }

    @Test func linesToCharsAndBackHandlesMoreThan65536Lines() {
        // Worked on code units: past 55,296 lines the codes would be surrogates.
        let text = (0..<66000).map { "\($0)\n" }.joined()
        let result = dmp.linesToChars(text, "")
        var diffs = [UDiff(.insert, result.chars1)]
        dmp.charsToLines(&diffs, result.lineArray)
        #expect(diffs.count == 1)
        #expect(diffs.first.map { string(utf16: $0.text) } == text)
    }

    @Test func lineModeWithMoreLinesThanSurrogateFreeCodeUnitsStillDiffsCorrectly() {
        // Past 55,296 distinct lines, line mode's code units reach the surrogate range; the
        // result must still rebuild both texts.
        let lines = (0..<60000).map { "line \($0)\n" }
        var changed = lines
        for index in [56000, 57500, 59999] {
            changed[index] = "changed \(index)\n"
        }
        let text1 = lines.joined()
        let text2 = changed.joined()
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        let diffs = dmp.diff(text1, text2, checkLines: true)
        #expect(rebuildTexts(diffs) == [text1, text2])
    }

    @Test func bisectFindsTheMiddleSnake() {
        // The order of insertions and deletions is not normalised here; this is the reference's.
        #expect(dmp.bisect("cat", "map", deadline: nil) == [del("c"), ins("m"), eq("a"), del("t"), ins("p")])
    }

    @Test func bisectPastTheDeadlineGivesUpWithDeleteAndInsert() {
        let deadline = ContinuousClock.now - .seconds(1)
        #expect(dmp.bisect("cat", "map", deadline: deadline) == [del("cat"), ins("map")])
    }

    @Test(
        arguments: [
            ("", "", []),
            ("abc", "abc", [eq("abc")]),
            ("abc", "ab123c", [eq("ab"), ins("123"), eq("c")]),
            ("a123bc", "abc", [eq("a"), del("123"), eq("bc")]),
            ("abc", "a123b456c", [eq("a"), ins("123"), eq("b"), ins("456"), eq("c")]),
            ("a123b456c", "abc", [eq("a"), del("123"), eq("b"), del("456"), eq("c")]),
            ("a", "b", [del("a"), ins("b")]),
            (
                "Apples are a fruit.", "Bananas are also fruit.",
                [del("Apple"), ins("Banana"), eq("s are a"), ins("lso"), eq(" fruit.")]
            ),
            ("ax\t", "\u{0680}x\u{0000}", [del("a"), ins("\u{0680}"), eq("x"), del("\t"), ins("\u{0000}")]),
            // Overlaps.
            ("1ayb2", "abxab", [del("1"), eq("a"), del("y"), eq("b"), del("2"), ins("xab")]),
            ("abcy", "xaxcxabc", [ins("xaxcx"), eq("abc"), del("y")]),
            (
                "ABCDa=bcd=efghijklmnopqrsEFGHIJKLMNOefg", "a-bcd-efghijklmnopqrs",
                [
                    del("ABCD"), eq("a"), del("="), ins("-"), eq("bcd"), del("="), ins("-"), eq("efghijklmnopqrs"),
                    del("EFGHIJKLMNOefg"),
                ]
            ),
            // Large equality.
            (
                "a [[Pennsylvania]] and [[New", " and [[Pennsylvania]]",
                [ins(" "), eq("a"), ins("nd"), eq(" [[Pennsylvania]]"), del(" and [[New")]
            ),
        ] as [(String, String, [Diff])])
    func diffFindsTheReferenceDiff(text1: String, text2: String, expected: [Diff]) {
        for timeout in [0.0, 1.0] {
            let dmp = DiffMatchPatch.with { $0.diffTimeout = timeout }
            #expect(dmp.diff(text1, text2, checkLines: false) == expected, "timeout \(timeout)")
        }
    }

    @Test func diffStopsAtTheTimeout() {
        var text1 =
            "`Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\nAll mimsy were the borogoves,\nAnd the mome raths outgrabe.\n"
        var text2 =
            "I am the very model of a modern major general,\nI've information vegetable, animal, and mineral,\nI know the kings of England, and I quote the fights historical,\nFrom Marathon to Waterloo, in order categorical.\n"
        // 1024 times longer, to be sure of a timeout.
        for _ in 0..<10 {
            text1 += text1
            text2 += text2
        }
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0.1 }
        let clock = ContinuousClock()
        var diffs: [Diff] = []
        let elapsed = clock.measure { diffs = dmp.diff(text1, text2) }
        #expect(elapsed >= .milliseconds(100))
        // Forgiving, as the reference's test: it must not take forever (debug builds are slow).
        #expect(elapsed < .seconds(2))
        #expect(rebuildTexts(diffs) == [text1, text2])
    }

    @Test func diffWithDeadlineInThePastStillRebuildsBothTexts() {
        let text1 = String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 50)
        let text2 = String(repeating: "A slow red hen walks under a busy cat! ", count: 50)
        let diffs = dmp.diff(text1, text2, checkLines: false, deadline: .now - .seconds(1))
        #expect(rebuildTexts(diffs) == [text1, text2])
    }

    static let lineModeCases: [(String, String)] = [
        // Simple line mode (long enough to pass the 100-character cut-off).
        (String(repeating: "1234567890\n", count: 13), String(repeating: "abcdefghij\n", count: 13)),
        // Single line: line mode has nothing to work with.
        (String(repeating: "1234567890", count: 13), String(repeating: "abcdefghij", count: 13)),
    ]

    @Test(arguments: lineModeCases)
    func lineModeGivesTheSameDiffAsCharacterMode(text1: String, text2: String) {
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        #expect(dmp.diff(text1, text2, checkLines: false) == dmp.diff(text1, text2, checkLines: true))
    }

    @Test func lineModeWithOverlappingLinesRebuildsTheSameTexts() {
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        let text1 = String(repeating: "1234567890\n", count: 13)
        let text2 = String(repeating: "abcdefghij\n1234567890\n1234567890\n1234567890\n", count: 3) + "abcdefghij\n"
        let lineMode = rebuildTexts(dmp.diff(text1, text2, checkLines: true))
        let charMode = rebuildTexts(dmp.diff(text1, text2, checkLines: false))
        #expect(lineMode == charMode)
        #expect(lineMode == [text1, text2])
    }

    @Test func diffDefaultsToLineMode() {
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        let text1 = String(repeating: "1234567890\n", count: 13)
        let text2 = String(repeating: "abcdefghij\n", count: 13)
        #expect(dmp.diff(text1, text2) == dmp.diff(text1, text2, checkLines: true))
    }

    static let jumpsOverTheLazy = [eq("jump"), del("s"), ins("ed"), eq(" over "), del("the"), ins("a"), eq(" lazy")]

    @Test func text1AndText2RebuildTheSourceAndTheResult() {
        #expect(dmp.text1(Self.jumpsOverTheLazy) == "jumps over the lazy")
        #expect(dmp.text2(Self.jumpsOverTheLazy) == "jumped over a lazy")
    }

    @Test(
        arguments: [
            // Translation on equality.
            ([del("a"), ins("1234"), eq("xyz")], 2, 5),
            // Translation on deletion.
            ([eq("a"), del("1234"), eq("xyz")], 3, 1),
        ] as [([Diff], Int, Int)])
    func xIndexTranslatesALocationInText1ToText2(diffs: [Diff], location: Int, expected: Int) {
        #expect(dmp.xIndex(diffs, location) == expected)
    }

    @Test(
        arguments: [
            // Trailing equality.
            ([del("abc"), ins("1234"), eq("xyz")], 4),
            // Leading equality.
            ([eq("xyz"), del("abc"), ins("1234")], 4),
            // Middle equality.
            ([del("abc"), eq("xyz"), ins("1234")], 7),
            ([], 0),
        ] as [([Diff], Int)])
    func levenshteinCountsEditedCodeUnits(diffs: [Diff], expected: Int) {
        #expect(dmp.levenshtein(diffs) == expected)
    }

    @Test func levenshteinCountsCodeUnitsOfAstralCharacters() {
        // JS string lengths: an emoji is two code units.
        #expect(dmp.levenshtein([del("😀"), ins("x")]) == 2)
        #expect(dmp.levenshtein([ins("😀😀")]) == 4)
    }

    @Test func prettyHTMLEscapesAndMarksUpTheDiffs() {
        let diffs = [eq("a\n"), del("<B>b</B>"), ins("c&d")]
        #expect(
            dmp.prettyHTML(diffs)
                == "<span>a&para;<br></span><del style=\"background:#ffe6e6;\">&lt;B&gt;b&lt;/B&gt;</del><ins style=\"background:#e6ffe6;\">c&amp;d</ins>"
        )
    }
}
