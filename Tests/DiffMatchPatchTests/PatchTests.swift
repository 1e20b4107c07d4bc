import Foundation
import NotedCore
import TestSupport
import Testing

@testable import DiffMatchPatch

/// The reference's patch tests (patch object text, from/to text, context, make, split, padding,
/// apply) and malformed patch text: always a thrown `DiffMatchPatchError`.
struct PatchTests {
    let dmp = DiffMatchPatch()

    static let jumpsOverLazyPatchText = "@@ -21,18 +22,17 @@\n jump\n-s\n+ed\n  over \n-the\n+a\n %0Alaz\n"

    @Test func patchDescriptionIsItsPatchText() {
        let patch = Patch(
            diffs: [eq("jump"), del("s"), ins("ed"), eq(" over "), del("the"), ins("a"), eq("\nlaz")],
            start1: 20, start2: 21, length1: 18, length2: 17
        )
        #expect(patch.description == Self.jumpsOverLazyPatchText)
    }

    @Test func patchFromTextOfNothingIsNoPatches() throws {
        #expect(try dmp.patchFromText("") == [])
    }

    @Test(arguments: [
        jumpsOverLazyPatchText,
        "@@ -1 +1 @@\n-a\n+b\n",
        "@@ -1,3 +0,0 @@\n-abc\n",
        "@@ -0,0 +1,3 @@\n+abc\n",
    ])
    func patchFromTextReadsWhatDescriptionWrites(text: String) throws {
        let patches = try dmp.patchFromText(text)
        #expect(patches.count == 1)
        #expect(patches.first?.description == text)
    }

    @Test func patchFromTextReadsHeaderCoordinates() throws {
        let patches = try dmp.patchFromText(Self.jumpsOverLazyPatchText)
        #expect(
            patches == [
                Patch(
                    diffs: [eq("jump"), del("s"), ins("ed"), eq(" over "), del("the"), ins("a"), eq("\nlaz")],
                    start1: 20, start2: 21, length1: 18, length2: 17
                )
            ])
        #expect(
            try dmp.patchFromText("@@ -1,3 +0,0 @@\n-abc\n").first.map {
                [$0.start1, $0.length1, $0.start2, $0.length2]
            } == [0, 3, 0, 0])
        #expect(
            try dmp.patchFromText("@@ -0,0 +1,3 @@\n+abc\n").first.map {
                [$0.start1, $0.length1, $0.start2, $0.length2]
            } == [0, 0, 0, 3])
        #expect(
            try dmp.patchFromText("@@ -1 +1 @@\n-a\n+b\n").first.map { [$0.start1, $0.length1, $0.start2, $0.length2] }
                == [0, 1, 0, 1])
    }

    @Test func patchFromTextRejectsText() {
        let error = #expect(throws: DiffMatchPatchError.self) {
            try dmp.patchFromText("Bad\nPatch\n")
        }
        #expect(error?.kind == .invalidPatch)
    }

    @Test(arguments: [
        "@@ -21,18 +22,17 @@\n jump\n-s\n+ed\n  over \n-the\n+a\n  laz\n",
        "@@ -1,9 +1,9 @@\n-f\n+F\n oo+fooba\n@@ -7,9 +7,9 @@\n obar\n-,\n+.\n  tes\n",
    ])
    func patchToTextWritesWhatPatchFromTextRead(text: String) throws {
        #expect(dmp.patchToText(try dmp.patchFromText(text)) == text)
    }

    @Test(arguments: [
        (
            "The quick brown fox jumps over the lazy dog.", "@@ -21,4 +21,10 @@\n-jump\n+somersault\n",
            "@@ -17,12 +17,18 @@\n fox \n-jump\n+somersault\n s ov\n"
        ),
        // Not enough trailing context.
        (
            "The quick brown fox jumps.", "@@ -21,4 +21,10 @@\n-jump\n+somersault\n",
            "@@ -17,10 +17,16 @@\n fox \n-jump\n+somersault\n s.\n"
        ),
        // Not enough leading context.
        ("The quick brown fox jumps.", "@@ -3 +3,2 @@\n-e\n+at\n", "@@ -1,7 +1,8 @@\n Th\n-e\n+at\n  qui\n"),
        // Ambiguity: the context grows until it is unique.
        (
            "The quick brown fox jumps.  The quick brown fox crashes.", "@@ -3 +3,2 @@\n-e\n+at\n",
            "@@ -1,27 +1,28 @@\n Th\n-e\n+at\n  quick brown fox jumps. \n"
        ),
    ])
    func patchAddContextAddsMarginThatMakesTheHunkUnique(text: String, patchText: String, expected: String) throws {
        let dmp = DiffMatchPatch.with { $0.patchMargin = 4 }
        var patch = try #require(try dmp.patchFromText(patchText).first)
        dmp.patchAddContext(&patch, text)
        #expect(patch.description == expected)
    }

    static let quickFox = "The quick brown fox jumps over the lazy dog."
    static let thatQuickFox = "That quick brown fox jumped over a lazy dog."

    @Test func patchMakeOfTwoEmptyTextsIsEmpty() {
        #expect(dmp.patchToText(dmp.patchMake("", "")) == "")
    }

    @Test func patchMakeUsesRollingContext() {
        // The second hunk must be "-21,17 +21,18", not "-22,17 +21,18", due to rolling context.
        let expected =
            "@@ -1,8 +1,7 @@\n Th\n-at\n+e\n  qui\n@@ -21,17 +21,18 @@\n jump\n-ed\n+s\n  over \n-a\n+the\n  laz\n"
        #expect(dmp.patchToText(dmp.patchMake(Self.thatQuickFox, Self.quickFox)) == expected)
    }

    @Test func patchMakeFromTextsFromDiffsAndFromTextAndDiffsAgree() {
        let expected =
            "@@ -1,11 +1,12 @@\n Th\n-e\n+at\n  quick b\n@@ -22,18 +22,17 @@\n jump\n-s\n+ed\n  over \n-the\n+a\n  laz\n"
        #expect(dmp.patchToText(dmp.patchMake(Self.quickFox, Self.thatQuickFox)) == expected)
        let diffs = dmp.diff(Self.quickFox, Self.thatQuickFox, checkLines: false)
        #expect(dmp.patchToText(dmp.patchMake(diffs)) == expected)
        #expect(dmp.patchToText(dmp.patchMake(Self.quickFox, diffs)) == expected)
    }

    @Test func patchMakeEscapesCharacters() {
        let patches = dmp.patchMake("`1234567890-=[]\\;',./", "~!@#$%^&*()_+{}|:\"<>?")
        #expect(
            dmp.patchToText(patches)
                == "@@ -1,21 +1,21 @@\n-%601234567890-=%5B%5D%5C;',./\n+~!@#$%25%5E&*()_+%7B%7D%7C:%22%3C%3E?\n")
    }

    @Test func patchFromTextDecodesCharacters() throws {
        let patches = try dmp.patchFromText(
            "@@ -1,21 +1,21 @@\n-%601234567890-=%5B%5D%5C;',./\n+~!@#$%25%5E&*()_+%7B%7D%7C:%22%3C%3E?\n")
        #expect(patches.first?.diffs == [del("`1234567890-=[]\\;',./"), ins("~!@#$%^&*()_+{}|:\"<>?")])
    }

    @Test func patchFromTextKeepsEscapesOfReservedCharactersAsTheyAre() throws {
        // As decodeURI: "%3B%2B" reads as those six characters, which then re-encode as "%253B%252B".
        let patches = try dmp.patchFromText("@@ -1 +1 @@\n+%3B%2B\n")
        #expect(patches.first?.diffs == [ins("%3B%2B")])
        #expect(dmp.patchToText(patches) == "@@ -1 +1 @@\n+%253B%252B\n")
    }

    @Test func patchMakeOfALongRepetitiveTextAddsEnoughContext() {
        let text1 = String(repeating: "abcdef", count: 100)
        let text2 = text1 + "123"
        #expect(
            dmp.patchToText(dmp.patchMake(text1, text2))
                == "@@ -573,28 +573,31 @@\n cdefabcdefabcdefabcdefabcdef\n+123\n")
    }

    @Test(arguments: [
        (
            "abcdefghijklmnopqrstuvwxyz01234567890", "XabXcdXefXghXijXklXmnXopXqrXstXuvXwxXyzX01X23X45X67X89X0",
            "@@ -1,32 +1,46 @@\n+X\n ab\n+X\n cd\n+X\n ef\n+X\n gh\n+X\n ij\n+X\n kl\n+X\n mn\n+X\n op\n+X\n qr\n+X\n st\n+X\n uv\n+X\n wx\n+X\n yz\n+X\n 012345\n@@ -25,13 +39,18 @@\n zX01\n+X\n 23\n+X\n 45\n+X\n 67\n+X\n 89\n+X\n 0\n"
        ),
        (
            "1234567890123456789012345678901234567890123456789012345678901234567890", "abc",
            "@@ -1,32 +1,4 @@\n-1234567890123456789012345678\n 9012\n@@ -29,32 +1,4 @@\n-9012345678901234567890123456\n 7890\n@@ -57,14 +1,3 @@\n-78901234567890\n+abc\n"
        ),
        (
            "abcdefghij , h : 0 , t : 1 abcdefghij , h : 0 , t : 1 abcdefghij , h : 0 , t : 1",
            "abcdefghij , h : 1 , t : 1 abcdefghij , h : 1 , t : 1 abcdefghij , h : 0 , t : 1",
            "@@ -2,32 +2,32 @@\n bcdefghij , h : \n-0\n+1\n  , t : 1 abcdef\n@@ -29,32 +29,32 @@\n bcdefghij , h : \n-0\n+1\n  , t : 1 abcdef\n"
        ),
    ])
    func patchSplitMaxSplitsHunksLongerThanTheMatcherBits(text1: String, text2: String, expected: String) {
        var patches = dmp.patchMake(text1, text2)
        dmp.patchSplitMax(&patches)
        #expect(dmp.patchToText(patches) == expected)
    }

    @Test func patchSplitMaxLeavesABigDeletionThatNeedsNoMatchingAlone() {
        var patches = dmp.patchMake(
            "abcdef1234567890123456789012345678901234567890123456789012345678901234567890uvwxyz", "abcdefuvwxyz")
        let before = dmp.patchToText(patches)
        dmp.patchSplitMax(&patches)
        #expect(dmp.patchToText(patches) == before)
    }

    @Test(arguments: [
        // Both edges full.
        ("", "test", "@@ -0,0 +1,4 @@\n+test\n", "@@ -1,8 +1,12 @@\n %01%02%03%04\n+test\n %01%02%03%04\n"),
        // Both edges partial.
        ("XY", "XtestY", "@@ -1,2 +1,6 @@\n X\n+test\n Y\n", "@@ -2,8 +2,12 @@\n %02%03%04X\n+test\n Y%01%02%03\n"),
        // Both edges none.
        (
            "XXXXYYYY", "XXXXtestYYYY", "@@ -1,8 +1,12 @@\n XXXX\n+test\n YYYY\n",
            "@@ -5,8 +5,12 @@\n XXXX\n+test\n YYYY\n"
        ),
    ])
    func patchAddPaddingPadsHunksAtTheTextEdges(text1: String, text2: String, before: String, after: String) {
        var patches = dmp.patchMake(text1, text2)
        #expect(dmp.patchToText(patches) == before)
        let padding = dmp.patchAddPadding(&patches)
        #expect(padding == "\u{01}\u{02}\u{03}\u{04}")
        #expect(dmp.patchToText(patches) == after)
    }

    static func applying(threshold: Double = 0.5, distance: Int = 1000, deleteThreshold: Double = 0.5) -> DiffMatchPatch
    {
        DiffMatchPatch.with {
            $0.matchThreshold = threshold
            $0.matchDistance = distance
            $0.patchDeleteThreshold = deleteThreshold
        }
    }

    @Test func strictApplyLeavesOutAHunkThatWouldTakeOrSplitOtherText() {
        let patches = dmp.patchMake("The quick brown fox jumps.", "The quick fox jumps.")
        // The reference deletes what now stands where "brown " stood.
        #expect(dmp.patchApply(patches, to: "The quick red fox jumps.").text == "The quick fox jumps.")
        let careful = dmp.patchApply(patches, to: "The quick red fox jumps.", strict: true)
        #expect(careful.text == "The quick red fox jumps." && careful.results == [false])
        // A deletion of text that is still there applies, also where the context moved.
        let moved = dmp.patchApply(patches, to: "Oh. The quick brown fox jumps.", strict: true)
        #expect(moved.text == "Oh. The quick fox jumps." && moved.results == [true])
        // Text put inside the deleted range meanwhile is kept.
        let inside = dmp.patchApply(patches, to: "The quick bro-wn fox jumps.", strict: true)
        #expect(inside.text == "The quick bro-wn fox jumps." && inside.results == [false])
        // Text added next to it meanwhile does not stop it.
        let insert = dmp.patchMake("I saw [4] and [7] today", "I saw [4] and [7] [9] today")
        let added = dmp.patchApply(insert, to: "I saw [4] and [7] [8] today", strict: true)
        #expect(added.results == [true] && added.text.contains("[9]") && added.text.contains("[8]"))
        // Without the flag it is the reference's patch_apply.
        #expect(
            dmp.patchApply(patches, to: "The quick red fox jumps.", strict: false)
                == dmp.patchApply(patches, to: "The quick red fox jumps."))
    }

    /// Found by the web simulation (seed 5248): two insertions of one hunk, beside an insertion
    /// made meanwhile; the reference places the second one unit short ("threet19C  four"),
    /// mapping a position that counts the first insertion past the end of the found text.
    /// Strict application places each edit by its place in the expected text.
    @Test func strictApplyPlacesEachInsertionOfAHunkWhereItBelongs() {
        let base = "one two three four five six t1B eight"
        // The client's word-widened delta, as the server's merge makes its patch from it.
        let diffs = [
            Diff(.equal, "one two "), Diff(.insert, "t10C "), Diff(.equal, "three "), Diff(.insert, "t19C "),
            Diff(.equal, "four five six t1B eight"),
        ]
        let patches = dmp.patchMake(base, diffs)
        let applied = dmp.patchApply(patches, to: "t9B one two t22A three four five six t21A eight", strict: true)
        #expect(applied.text == "t9B one two t22A t10C three t19C four five six t21A eight")
        #expect(applied.results == [true])
    }

    /// Found by the web app's mixed test: "gamma" made "cligamma" on one device and "webgamma"
    /// on another. An insertion may not glue onto a word on a side where the expected text had
    /// a boundary around its edits: the hunk is left out (the caller keeps it as a conflict),
    /// not spliced into "cliwebgamma".
    @Test func strictApplyDoesNotGlueAnInsertionOntoAWordWrittenMeanwhile() {
        let diffs = [Diff(.equal, "a "), Diff(.delete, "gamma"), Diff(.insert, "webgamma"), Diff(.equal, " b")]
        let applied = dmp.patchApply(dmp.patchMake("a gamma b", diffs), to: "a cligamma b", strict: true)
        #expect(applied.text == "a cligamma b")
        #expect(applied.results == [false])
    }

    @Test func patchApplyOfNoPatchesChangesNothing() {
        let result = Self.applying().patchApply(dmp.patchMake("", ""), to: "Hello world.")
        #expect(result.text == "Hello world.")
        #expect(result.results == [])
    }

    @Test(arguments: [
        // Exact match.
        ("The quick brown fox jumps over the lazy dog.", "That quick brown fox jumped over a lazy dog.", [true, true]),
        // Partial match.
        (
            "The quick red rabbit jumps over the tired tiger.", "That quick red rabbit jumped over a tired tiger.",
            [true, true]
        ),
        // Failed match.
        (
            "I am the very model of a modern major general.", "I am the very model of a modern major general.",
            [false, false]
        ),
    ])
    func patchApplyMatchesFuzzily(text: String, expected: String, results: [Bool]) {
        let dmp = Self.applying()
        let patches = dmp.patchMake(Self.quickFox, Self.thatQuickFox)
        let result = dmp.patchApply(patches, to: text)
        #expect(result.text == expected)
        #expect(result.results == results)
    }

    static let bigDeleteSource = "x1234567890123456789012345678901234567890123456789012345678901234567890y"

    @Test func patchApplyOfABigDeleteWithASmallChangeSucceeds() {
        let dmp = Self.applying(deleteThreshold: 0.5)
        let patches = dmp.patchMake(Self.bigDeleteSource, "xabcy")
        let result = dmp.patchApply(
            patches, to: "x123456789012345678901234567890-----++++++++++-----123456789012345678901234567890y")
        #expect(result.text == "xabcy")
        #expect(result.results == [true, true])
    }

    @Test func patchApplyOfABigDeleteWithABigChangeFailsAtDeleteThresholdHalf() {
        let dmp = Self.applying(deleteThreshold: 0.5)
        let patches = dmp.patchMake(Self.bigDeleteSource, "xabcy")
        let result = dmp.patchApply(
            patches, to: "x12345678901234567890---------------++++++++++---------------12345678901234567890y")
        #expect(result.text == "xabc12345678901234567890---------------++++++++++---------------12345678901234567890y")
        #expect(result.results == [false, true])
    }

    @Test func patchApplyOfABigDeleteWithABigChangeSucceedsAtDeleteThreshold0_6() {
        let dmp = Self.applying(deleteThreshold: 0.6)
        let patches = dmp.patchMake(Self.bigDeleteSource, "xabcy")
        let result = dmp.patchApply(
            patches, to: "x12345678901234567890---------------++++++++++---------------12345678901234567890y")
        #expect(result.text == "xabcy")
        #expect(result.results == [true, true])
    }

    @Test func patchApplyCompensatesForAFailedPatch() {
        let dmp = Self.applying(threshold: 0, distance: 0)
        let patches = dmp.patchMake(
            "abcdefghijklmnopqrstuvwxyz--------------------1234567890",
            "abcXXXXXXXXXXdefghijklmnopqrstuvwxyz--------------------1234567YYYYYYYYYY890"
        )
        let result = dmp.patchApply(patches, to: "ABCDEFGHIJKLMNOPQRSTUVWXYZ--------------------1234567890")
        #expect(result.text == "ABCDEFGHIJKLMNOPQRSTUVWXYZ--------------------1234567YYYYYYYYYY890")
        #expect(result.results == [false, true])
    }

    @Test(arguments: [
        ("", "test", ""),
        // A major delete.
        (quickFox, "Woof", quickFox),
    ])
    func patchApplyHasNoSideEffectsOnThePatches(text1: String, text2: String, target: String) {
        let dmp = Self.applying()
        let patches = dmp.patchMake(text1, text2)
        let before = dmp.patchToText(patches)
        _ = dmp.patchApply(patches, to: target)
        #expect(dmp.patchToText(patches) == before)
    }

    @Test(arguments: [
        // Edge exact match.
        ("", "test", "", "test"),
        // Near edge exact match.
        ("XY", "XtestY", "XY", "XtestY"),
        // Edge partial match.
        ("y", "y123", "x", "x123"),
    ])
    func patchApplyMatchesAtTheTextEdges(text1: String, text2: String, target: String, expected: String) {
        let dmp = Self.applying()
        let result = dmp.patchApply(dmp.patchMake(text1, text2), to: target)
        #expect(result.text == expected)
        #expect(result.results == [true])
    }

    /// Hunks whose coordinates or text do not fit the target: what the reference makes of them.
    @Test(arguments: [
        ("@@ -1000,5 +1000,5 @@\n-abcde\n+fghij\n", "short", "fghij", [true]),
        ("@@ -1,100 +1,100 @@\n-a\n+b\n", "abc", "b", [true]),
        ("@@ -3,0 +3,0 @@\n", "abc", "abc", [true]),
        ("@@ -1,3 +1,0 @@\n-abc\n", "", "", [true]),
        ("@@ -1 +1 @@\n-x\n", "abc", "", [true]),
        ("@@ -2,3 +2,3 @@\n b\n-c\n+%F0%9F%98%80\n d\n", "abcde", "ab😀de", [true]),
        ("@@ -1,4 +1,4 @@\n-%F0%9F%98%80\n+%F0%9F%98%81\n %F0%9F%98%82\n", "😀😂", "😁😂", [true]),
        (
            "@@ -1,70 +1,3 @@\n-" + String(repeating: "x", count: 70) + "\n+abc\n", String(repeating: "y", count: 100),
            String(repeating: "y", count: 100), [false, false]
        ),
        ("@@ -0,0 +1,1 @@\n+a\n", "", "a", [true]),
    ])
    func patchApplyOfMisplacedHunksMatchesTheReference(
        patchText: String, target: String, expected: String, results: [Bool]
    ) throws {
        let result = dmp.patchApply(try dmp.patchFromText(patchText), to: target)
        #expect(result.text == expected)
        #expect(result.results == results)
    }

    /// Patches applied to texts that were edited too: fuzzy matching and the mapping of each
    /// edit through the diff of the expected and the found text, as the reference prints them
    /// (the first case is one where the Python port places a deletion differently).
    @Test(arguments: [
        (
            "X> ;Cp=+1=t2%+1<jl\t\"gz:vz\t[>Bv[<~ '2X",
            "X> ;Cp=+1=t2%+1eCu\"ifjl\t\"gzfo:vz\tx<9[>2X",
            "X\"` ;Cp;+1=?+2%+1<jl\t\"gz:vz\t[>Bv[<~ s9'2X",
            "X\"` ;Cp;+1=?+2%+1eCu\"ifjl\t\"gzfo:vz\tx<9[>9'2X", [true]
        ),
        (
            "hi Zc .-Ykb,kkh d.h,a.a bi\n,kk.eZkjd dcfXYk,h.eYcZ.ibcb.\nbk..ahcZgghfej- iY\n",
            "hi Zc .-Ykbd.h,a.a bi\n,kk.eZkjd dcfXYk,h.eYcZ.ibcb.\nbk..ahcZgghfej- iY\n",
            "hi Zc .-Ykb,kkh d.h,a.a bi\n,kk.eZkjd dcfXYk,h.eYcZ.ibcb.\nbk..ahcibZgghfej- iY",
            "hi Zc .-Ykbd.h,a.a bi\n,kk.eZkjd dcfXYk,h.eYcZ.ibcb.\nbk..ahcibZgghfej- iY", [true]
        ),
        (
            "k-cgZ\nkZZiad.Yjfc,jd\n,Y,b,e,kihZjjkkdZ",
            "k-cgZ\nZZiad.Yjfc,jd\n,Y,b,e,kihZjjkkdZ",
            "k-cgZ\nkZZiad.Yjfcjd\n,Y,b,e,kihjjkkdZ",
            "k-cgZ\nZZiad.Yjfcjd\n,Y,b,e,kihjjkkdZ", [true]
        ),
        (
            " \nkegYkZiZhg gbX-,i\n\n\nhY iegghbX icdfkcY.\nfhh-XkccZg--.hc.e\nj,gZf.df\nhY-Y.",
            " \nkegYkZiZhg gbX-,i\n\n\nhY iegghbX icdfkcY.\nfhh-XkccZg--.c.e\nj,gZf.df\nhY-Y.",
            " \nkegYkZiZhg gbX-,i\n\nhY iegghbX idfkcY.\nfhh-XkccZg--.hc.e\nj,gZf.df\nhY-Y.",
            " \nkegYkZiZhg gbX-,i\n\nhY iegghbX idfkcY.\nfhh-XkccZg--.c.e\nj,gZf.df\nhY-Y.", [true]
        ),
        (
            "jfbgiiiiaea.ddXX\nkcjXjdkXbfcai.g\nb",
            "jfbgiiiiaea.ddhYYXX\nkcjXjdkXbfcai.g\nb",
            "jfgiiiiaea.ddXX\nkcjXjdkXbfcai.\nb",
            "jfgiiiiaea.ddhYYXX\nkcjXjdkXbfcai.\nb", [true]
        ),
        (
            "d fYZ c,dXhfgXbbcdfh.j.X\nZd\njfaheZb,d \nk, gfaadbZb-f,fh.Y-i \n ZfZkY-ce i-X-eeeekdXd- e",
            "d fYZ c,dXhfgXbbcdfh.j.X\nZd\njfaheZb,d \nk, gfaadbZb-f,fcgh.Y-i \n ZfZkY-ce i-X-eeeekdXd- e",
            "d fYZ c,dXhfXbbcdfh.j.X\nZd\njfaheZb,d \nk, gfaadbZb-f,fh.Y-i \n ZfZkY-ce i-X-eeiYeekdXd- e",
            "d fYZ c,dXhfXbbcdfh.j.X\nZd\njfaheZb,d \nk, gfaadbZb-f,fcgh.Y-i \n ZfZkY-ce i-X-eeiYeekdXd- e", [true]
        ),
    ])
    func patchApplyOntoAnEditedTextMatchesTheReference(
        text1: String, text2: String, target: String, expected: String, results: [Bool]
    ) {
        let result = dmp.patchApply(dmp.patchMake(text1, text2), to: target)
        #expect(result.text == expected)
        #expect(result.results == results)
    }

    @Test func patchApplyOfHandMadePatchesWithNonsenseCoordinatesDoesNotCrash() {
        let patches = [
            Patch(diffs: [del("abc"), ins("x")], start1: -5, start2: -5, length1: 3, length2: 1),
            Patch(diffs: [eq("a"), ins("x")], start1: Int.max / 2, start2: 0, length1: 1, length2: 2),
            Patch(diffs: [], start1: 3, start2: 3, length1: 100, length2: 0),
            Patch(diffs: [ins("")], start1: 0, start2: 0, length1: 0, length2: 0),
        ]
        for patch in patches {
            _ = dmp.patchApply([patch], to: "abcdef")
            _ = dmp.patchApply([patch], to: "")
        }
    }

    /// Patch texts the reference rejects (checked with node).
    @Test(arguments: [
        "Bad\nPatch\n",
        "\n",
        "@@ -1 +1 @@\nxa\n",
        "@@ -1 +1 @@\n-%\n",
        "@@ -1 +1 @@\n-%E2%82\n",
        "@@ -1 +1 @@\n-%C0%80\n",
        "@@ -1 +1 @@\n-%F4%90%80%80\n",
        "@@ -1 +1 @@\n-%zz\n",
        "@@ -a +1 @@\n",
        "@@ -1,2,3 +1 @@\n",
        "@@ -1 +1 @@ \n",
        " @@ -1 +1 @@\n",
        "@@ -0,0 +1,3 @@\n+abc\n@@",
        "@@ -1 +1 @@\r\n-a\r\n",
        "@@ -1 +1 @@\n-a\nb",
        "@@ +1 -1 @@\n",
        "@@ -\u{FF10} +1 @@\n",
        "@@ -1 +1 @@\n=a\n",
        "@@ --1 +1 @@\n",
        "@@ -1 +1 @@@\n",
        "@@  -1 +1 @@\n",
        "@@ -1 +1 @@\n%41\n",
        "@@ -1 +1\n",
        "@@",
        "@@ -1 +1 @@\n-a\n@@ -x +1 @@\n",
    ])
    func patchFromTextThrowsOnMalformedPatchText(text: String) {
        let error = #expect(throws: DiffMatchPatchError.self, "\(text.debugDescription)") {
            try dmp.patchFromText(text)
        }
        #expect(error?.kind == .invalidPatch, "\(text.debugDescription): \(error?.description ?? "")")
    }

    /// Patch texts the reference accepts (checked with node) and how it writes them back.
    @Test(arguments: [
        ("@@ -1 +1 @@", "@@ -1 +1 @@\n"),
        ("@@ -1 +1 @@\n\n\n-a", "@@ -1 +1 @@\n-a\n"),
        ("@@ -1,0 +1,0 @@\n", "@@ -1,0 +1,0 @@\n"),
        ("@@ -1 +1 @@\n-a\n+b", "@@ -1 +1 @@\n-a\n+b\n"),
        ("@@ -1 +1 @@\n-\u{00E9}\n", "@@ -1 +1 @@\n-%C3%A9\n"),
        ("@@ -1 +1 @@\n-😀\n", "@@ -1 +1 @@\n-%F0%9F%98%80\n"),
        ("@@ -1 +1 @@\n-a\n@@ -1 +1 @@\n+b\n", "@@ -1 +1 @@\n-a\n@@ -1 +1 @@\n+b\n"),
    ])
    func patchFromTextAcceptsWhatTheReferenceAccepts(text: String, expected: String) throws {
        #expect(dmp.patchToText(try dmp.patchFromText(text)) == expected)
    }

    /// Inputs only the reference's lenient parsing accepts (it never writes them): accepted or
    /// rejected, never a crash.
    @Test(arguments: [
        "@@ -99999999999999999999 +1 @@\n",
        "@@ -1 +99999999999999999999,5 @@\n",
        "@@ -9223372036854775807,9223372036854775807 +1 @@\n-a\n",
        "@@ -1, +1 @@\n",
        "@@ -1 +1 @@\n+%ED%A0%80\n",
        "@@ -1 +1 @@\n+%ED%B0%80%ED%A0%80\n",
    ])
    func patchFromTextNeverCrashesOnInputsOnlyTheReferenceTolerates(text: String) {
        do {
            let patches = try dmp.patchFromText(text)
            _ = dmp.patchToText(patches)
            _ = dmp.patchApply(patches, to: "abc")
        } catch {
            // A thrown DiffMatchPatchError (the only type these functions throw) is fine.
        }
    }

    /// A seeded fuzz loop: mutated valid patch texts either parse (and then print and apply
    /// without trouble) or throw `DiffMatchPatchError`.
    @Test func patchFromTextFuzzedInputsThrowOrParseButNeverCrash() {
        var random = TestSeed.generator(for: "patchFromTextFuzz")
        let pieces = [
            "@@", " -", " +", ",", "0", "1", "9", "99999999999999999999", "\n", "%", "%E", "%ED%A0%80", "%F0%9F",
            "%C3", "%zz", "-", "+", " ", "😀", "\u{0000}", "\r", "@@ -1 +1 @@\n", "a",
        ]
        let sources = ["", "abc", "a😀b", "The quick brown fox.", "line\nline\n", "héllo wörld"]
        for _ in 0..<1500 {
            let text1 = random.pick(sources)
            let text2 = random.pick(sources)
            var text = Array(dmp.patchToText(dmp.patchMake(text1, text2)))
            for _ in 0..<random.int(in: 0...4) {
                let piece = Array(random.pick(pieces))
                let position = random.int(in: 0...text.count)
                switch random.int(in: 0..<3) {
                case 0:
                    text.insert(contentsOf: piece, at: position)
                case 1 where position < text.count:
                    text.removeSubrange(position..<min(text.count, position + random.int(in: 1...3)))
                default:
                    text.replaceSubrange(position..<min(text.count, position + 1), with: piece)
                }
            }
            let mutated = String(text)
            do {
                let patches = try dmp.patchFromText(mutated)
                _ = dmp.patchToText(patches)
                _ = dmp.patchApply(patches, to: text1)
            } catch {
                // Typed throws: a DiffMatchPatchError, which is fine.
            }
        }
    }
}
