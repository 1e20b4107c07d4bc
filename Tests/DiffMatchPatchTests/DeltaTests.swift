import NotedCore
import TestSupport
import Testing

@testable import DiffMatchPatch

/// The reference's delta tests, escaping of every character class (expected strings printed
/// by the JavaScript reference), and malformed deltas: always a thrown `DiffMatchPatchError`.
struct DeltaTests {
    let dmp = DiffMatchPatch()

    static let jumpsOverTheLazyOldDog = [
        eq("jump"), del("s"), ins("ed"), eq(" over "), del("the"), ins("a"), eq(" lazy"), ins("old dog"),
    ]

    @Test func toDeltaEncodesEqualitiesAndDeletionsAsCountsAndInsertionsAsText() throws {
        let diffs = Self.jumpsOverTheLazyOldDog
        let text1 = dmp.text1(diffs)
        #expect(text1 == "jumps over the lazy")
        let delta = dmp.toDelta(diffs)
        #expect(delta == "=4\t-1\t+ed\t=6\t-3\t+a\t=5\t+old dog")
        #expect(try dmp.fromDelta(text1, delta) == diffs)
    }

    @Test func fromDeltaRejectsASourceTextThatIsTooLong() {
        let error = #expect(throws: DiffMatchPatchError.self) {
            try dmp.fromDelta("jumps over the lazyx", "=4\t-1\t+ed\t=6\t-3\t+a\t=5\t+old dog")
        }
        #expect(error?.kind == .lengthMismatch)
    }

    @Test func fromDeltaRejectsASourceTextThatIsTooShort() {
        let error = #expect(throws: DiffMatchPatchError.self) {
            try dmp.fromDelta("umps over the lazy", "=4\t-1\t+ed\t=6\t-3\t+a\t=5\t+old dog")
        }
        #expect(error?.kind == .lengthMismatch)
    }

    @Test func fromDeltaRejectsInvalidUnicodeEscapes() {
        let error = #expect(throws: DiffMatchPatchError.self) {
            try dmp.fromDelta("", "+%c3%xy")
        }
        #expect(error?.kind == .invalidDelta)
    }

    @Test func deltaEscapesSpecialCharacters() throws {
        let diffs = [eq("\u{0680} \u{0000} \t %"), del("\u{0681} \u{0001} \n ^"), ins("\u{0682} \u{0002} \\ |")]
        let text1 = dmp.text1(diffs)
        #expect(text1 == "\u{0680} \u{0000} \t %\u{0681} \u{0001} \n ^")
        let delta = dmp.toDelta(diffs)
        #expect(delta == "=7\t-7\t+%DA%82 %02 %5C %7C")
        #expect(try dmp.fromDelta(text1, delta) == diffs)
    }

    @Test func deltaLeavesThePoolOfUnreservedCharactersUnescaped() throws {
        let diffs = [ins("A-Z a-z 0-9 - _ . ! ~ * ' ( ) ; / ? : @ & = + $ , # ")]
        let text2 = dmp.text2(diffs)
        #expect(text2 == "A-Z a-z 0-9 - _ . ! ~ * ' ( ) ; / ? : @ & = + $ , # ")
        let delta = dmp.toDelta(diffs)
        #expect(delta == "+A-Z a-z 0-9 - _ . ! ~ * ' ( ) ; / ? : @ & = + $ , # ")
        #expect(try dmp.fromDelta("", delta) == diffs)
    }

    @Test func deltaOfA160KBInsertionRoundTrips() throws {
        var text = "abcdefghij"
        for _ in 0..<14 {
            text += text
        }
        let diffs = [ins(text)]
        let delta = dmp.toDelta(diffs)
        #expect(delta == "+" + text)
        #expect(try dmp.fromDelta("", delta) == diffs)
    }

    @Test func deltaCountsAstralCharactersAsTwoCodeUnits() throws {
        let diffs = [eq("😀a"), del("𝒜"), ins("👍🏽"), eq("b")]
        let delta = dmp.toDelta(diffs)
        #expect(delta == "=3\t-2\t+%F0%9F%91%8D%F0%9F%8F%BD\t=1")
        #expect(try dmp.fromDelta("😀a𝒜b", delta) == diffs)
    }

    /// Every class of character, as an insertion, with the delta and the patch text the
    /// JavaScript reference prints for it.
    static let escapingTable: [(String, String, String, String)] = [
        (
            "letters and digits", "AZaz09",
            "+AZaz09",
            "@@ -0,0 +1,6 @@\n+AZaz09\n"
        ),
        (
            "unreserved marks", "-_.!~*'()",
            "+-_.!~*'()",
            "@@ -0,0 +1,9 @@\n+-_.!~*'()\n"
        ),
        (
            "reserved characters", ";,/?:@&=+$#",
            "+;,/?:@&=+$#",
            "@@ -0,0 +1,11 @@\n+;,/?:@&=+$#\n"
        ),
        (
            "space", "a b  c",
            "+a b  c",
            "@@ -0,0 +1,6 @@\n+a b  c\n"
        ),
        (
            "other ASCII punctuation", "\"%<>[\\]^`{|}",
            "+%22%25%3C%3E%5B%5C%5D%5E%60%7B%7C%7D",
            "@@ -0,0 +1,12 @@\n+%22%25%3C%3E%5B%5C%5D%5E%60%7B%7C%7D\n"
        ),
        (
            "tab, newline and carriage return", "\t\n\r",
            "+%09%0A%0D",
            "@@ -0,0 +1,3 @@\n+%09%0A%0D\n"
        ),
        (
            "C0 controls and DEL", "\u{0000}\u{0001}\u{001F}\u{007F}",
            "+%00%01%1F%7F",
            "@@ -0,0 +1,4 @@\n+%00%01%1F%7F\n"
        ),
        (
            "Latin-1 and no-break space", "\u{00A0}\u{00E9}\u{00FF}",
            "+%C2%A0%C3%A9%C3%BF",
            "@@ -0,0 +1,3 @@\n+%C2%A0%C3%A9%C3%BF\n"
        ),
        (
            "two-byte UTF-8", "\u{0100}\u{0680}\u{07FF}",
            "+%C4%80%DA%80%DF%BF",
            "@@ -0,0 +1,3 @@\n+%C4%80%DA%80%DF%BF\n"
        ),
        (
            "three-byte UTF-8", "\u{0800}\u{4E2D}\u{20AC}\u{2028}\u{FEFF}\u{FFFF}",
            "+%E0%A0%80%E4%B8%AD%E2%82%AC%E2%80%A8%EF%BB%BF%EF%BF%BF",
            "@@ -0,0 +1,6 @@\n+%E0%A0%80%E4%B8%AD%E2%82%AC%E2%80%A8%EF%BB%BF%EF%BF%BF\n"
        ),
        (
            "private use and noncharacters", string(utf16: [0xE000, 0xFDD0, 0xFFFE]),
            "+%EE%80%80%EF%B7%90%EF%BF%BE",
            "@@ -0,0 +1,3 @@\n+%EE%80%80%EF%B7%90%EF%BF%BE\n"
        ),
        (
            "astral characters", "\u{1F600}\u{1D49C}\u{2000B}\u{10FFFF}",
            "+%F0%9F%98%80%F0%9D%92%9C%F0%A0%80%8B%F4%8F%BF%BF",
            "@@ -0,0 +1,8 @@\n+%F0%9F%98%80%F0%9D%92%9C%F0%A0%80%8B%F4%8F%BF%BF\n"
        ),
        (
            "emoji sequences", "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{1F1EB}\u{1F1F7}\u{1F44D}\u{1F3FD}",
            "+%F0%9F%91%A8%E2%80%8D%F0%9F%91%A9%E2%80%8D%F0%9F%91%A7%F0%9F%87%AB%F0%9F%87%B7%F0%9F%91%8D%F0%9F%8F%BD",
            "@@ -0,0 +1,16 @@\n+%F0%9F%91%A8%E2%80%8D%F0%9F%91%A9%E2%80%8D%F0%9F%91%A7%F0%9F%87%AB%F0%9F%87%B7%F0%9F%91%8D%F0%9F%8F%BD\n"
        ),
        (
            "combining marks", "e\u{0301}\u{0308}",
            "+e%CC%81%CC%88",
            "@@ -0,0 +1,3 @@\n+e%CC%81%CC%88\n"
        ),
        (
            "escape look-alikes", "%20%25%3B%",
            "+%2520%2525%253B%25",
            "@@ -0,0 +1,10 @@\n+%2520%2525%253B%25\n"
        ),
    ]

    @Test(arguments: escapingTable)
    func deltaEscapesEachCharacterClassLikeTheReference(name: String, text: String, delta: String, patchText: String)
        throws
    {
        #expect(dmp.toDelta([ins(text)]) == delta, "\(name)")
        #expect(try dmp.fromDelta("", delta) == [ins(text)], "\(name)")
        #expect(dmp.toDelta([eq(text), ins("x")]) == "=\(text.utf16.count)\t+x", "\(name)")
    }

    @Test(arguments: escapingTable)
    func patchTextEscapesEachCharacterClassLikeTheReference(
        name: String, text: String, delta: String, patchText: String
    ) throws {
        let patch = Patch(diffs: [ins(text)], start1: 0, start2: 0, length1: 0, length2: text.utf16.count)
        #expect(patch.description == patchText, "\(name)")
        #expect(dmp.patchToText([patch]) == patchText, "\(name)")
        #expect(try dmp.patchFromText(patchText) == [patch], "\(name)")
    }

    @Test func fromDeltaAcceptsLowerCaseHex() throws {
        #expect(try dmp.fromDelta("abc", "=3\t+%c3%a9") == [eq("abc"), ins("é")])
    }

    @Test func fromDeltaKeepsEscapesOfReservedCharactersAsTheyAre() throws {
        // decodeURI leaves %3B (";") escaped, and so does the reference.
        #expect(try dmp.fromDelta("abc", "+%3B\t=3") == [ins("%3B"), eq("abc")])
    }

    @Test func fromDeltaSkipsBlankTokens() throws {
        #expect(try dmp.fromDelta("abc", "\t\t=3\t") == [eq("abc")])
        #expect(try dmp.fromDelta("abc", "=1\t=1\t=1") == [eq("a"), eq("b"), eq("c")])
    }

    /// Deltas the reference rejects (checked with node), for the source text "abc".
    @Test(
        arguments: [
            ("=4", DiffMatchPatchError.Kind.lengthMismatch),
            ("=2", .lengthMismatch),
            ("-4", .lengthMismatch),
            ("=1\t-1", .lengthMismatch),
            ("=-1", .invalidDelta),
            ("=", .invalidDelta),
            ("-", .invalidDelta),
            ("=abc", .invalidDelta),
            ("x3", .invalidDelta),
            ("*3", .invalidDelta),
            ("\u{0000}", .invalidDelta),
            ("=1\té", .invalidDelta),
            ("=\u{FF13}", .invalidDelta),
            ("=\u{0663}", .invalidDelta),
            ("+%", .invalidDelta),
            ("+%c3%xy", .invalidDelta),
            ("+%C3", .invalidDelta),
            ("+%E2%82", .invalidDelta),
            ("+%FF", .invalidDelta),
            ("+%C0%80", .invalidDelta),
            ("+%F4%90%80%80", .invalidDelta),
            ("+%2", .invalidDelta),
            ("+%%", .invalidDelta),
            ("+%G0", .invalidDelta),
            ("+%80", .invalidDelta),
            ("+%E2%28%A1", .invalidDelta),
            ("+%F0%9F%98", .invalidDelta),
            ("+%u0041\t=3", .invalidDelta),
            ("=3\t+%", .invalidDelta),
        ] as [(String, DiffMatchPatchError.Kind)])
    func fromDeltaThrowsOnMalformedDeltas(delta: String, kind: DiffMatchPatchError.Kind) {
        let error = #expect(throws: DiffMatchPatchError.self, "\(delta.debugDescription)") {
            try dmp.fromDelta("abc", delta)
        }
        #expect(error?.kind == kind, "\(delta.debugDescription): \(error?.description ?? "")")
        #expect(error.map { !$0.description.isEmpty } ?? true)
    }

    /// Numbers too large for any text: the reference reports a length mismatch; an `Int`
    /// overflow must not trap.
    @Test(arguments: [
        "=99999999999999999999999",
        "=18446744073709551616",
        "=9223372036854775807\t=1",
        "=9223372036854775807\t=9223372036854775807",
        "-9223372036854775807\t-9223372036854775807\t=3",
        "=1\t-9223372036854775807",
    ])
    func fromDeltaThrowsOnHugeCountsWithoutOverflowing(delta: String) {
        #expect(throws: DiffMatchPatchError.self, "\(delta.debugDescription)") {
            try dmp.fromDelta("abc", delta)
        }
    }

    /// Inputs the reference happens to accept (its `parseInt` is lenient, `decodeURI` rejects
    /// escaped surrogates) but never emits: a port may accept or reject them, never crash.
    @Test(arguments: [
        "=3\n", "=03", "=+3", "= 3", "=3.0", "=1e3", "+\t=3", "=0\t=3", "=3\t-0", "+%ED%A0%80\t=3", "+%ED%B0%80\t=3",
    ])
    func fromDeltaNeverCrashesOnInputsOnlyTheReferenceTolerates(delta: String) {
        do {
            let diffs = try dmp.fromDelta("abc", delta)
            #expect(dmp.text1(diffs) == "abc", "\(delta.debugDescription)")
        } catch {
            // A thrown DiffMatchPatchError (the only type these functions throw) is fine.
        }
    }

    @Test func strictFromDeltaRejectsADeltaThatSplitsASurrogatePair() {
        for delta in ["=2\t=2", "=2\t-2", "-2\t=2", "=1\t-1\t=2", "-1\t-1\t-2", "=2\t+x\t=2"] {
            let error = #expect(throws: DiffMatchPatchError.self, "\(delta.debugDescription)") {
                try dmp.fromDelta("a😀b", delta, strict: true)
            }
            #expect(error?.kind == .splitSurrogatePair, "\(delta.debugDescription)")
        }
    }

    @Test func strictFromDeltaAcceptsADeltaOnCharacterBoundaries() throws {
        #expect(
            try dmp.fromDelta("a😀b", "=1\t-2\t+%F0%9F%98%81\t=1", strict: true) == [
                eq("a"), del("😀"), ins("😁"), eq("b"),
            ])
    }

    @Test func nonStrictFromDeltaOfASplitPairDoesNotCrash() {
        do {
            let diffs = try dmp.fromDelta("a😀b", "=2\t=2")
            #expect(diffs.count <= 2)
        } catch {
            // A thrown DiffMatchPatchError (the only type these functions throw) is fine.
        }
    }

    /// A seeded fuzz loop: mutated valid deltas and random token soup either decode to diffs
    /// of the source text or throw `DiffMatchPatchError`; nothing else, and never a crash.
    @Test func fromDeltaFuzzedInputsThrowOrDecodeButNeverCrash() {
        var random = TestSeed.generator(for: "fromDeltaFuzz")
        let pieces = [
            "%", "%E", "%ED", "%A0", "%80", "%F0", "%9F", "%C3", "%xy", "%2", "\t", "=", "-", "+", "0", "1", "9",
            "99999999999999999999", "-1", "😀", "\u{0000}", "é", " ", "%25", "%3B", "a",
        ]
        let sources = ["", "abc", "a😀b", "😀😀", "héllo wörld", "line\nline\n"]
        for round in 0..<2000 {
            let text1 = random.pick(sources)
            let text2 = random.pick(sources)
            var delta = Array(dmp.toDelta(dmp.diff(text1, text2)))
            for _ in 0..<random.int(in: 0...4) {
                let piece = Array(random.pick(pieces))
                let position = random.int(in: 0...delta.count)
                switch random.int(in: 0..<3) {
                case 0:
                    delta.insert(contentsOf: piece, at: position)
                case 1 where position < delta.count:
                    delta.removeSubrange(position..<min(delta.count, position + random.int(in: 1...3)))
                default:
                    delta.replaceSubrange(position..<min(delta.count, position + 1), with: piece)
                }
            }
            let mutated = String(delta)
            let context =
                "round \(round), text1 \(text1.debugDescription), delta \(mutated.debugDescription), \(TestSeed.replay)"
            for strict in [false, true] {
                do {
                    let diffs = try dmp.fromDelta(text1, mutated, strict: strict)
                    if strict {
                        #expect(dmp.text1(diffs) == text1, "\(context)")
                    }
                } catch {
                    // Typed throws: a DiffMatchPatchError, which is fine.
                }
            }
        }
    }
}
