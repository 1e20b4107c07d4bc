import Testing

@testable import DiffMatchPatch

/// The reference's cleanup tests (merge, semantic lossless, semantic, efficiency) and the
/// subtle cases the issue names: overlap elimination both ways, boundary scores and their
/// tie-breaks, edit costs 4 and 5.
struct CleanupTests {
    let dmp = DiffMatchPatch()

    @Test(
        arguments: [
            ([], []),
            // No change.
            ([eq("a"), del("b"), ins("c")], [eq("a"), del("b"), ins("c")]),
            // Merge equalities, deletions, insertions.
            ([eq("a"), eq("b"), eq("c")], [eq("abc")]),
            ([del("a"), del("b"), del("c")], [del("abc")]),
            ([ins("a"), ins("b"), ins("c")], [ins("abc")]),
            // Merge interweave.
            ([del("a"), ins("b"), del("c"), ins("d"), eq("e"), eq("f")], [del("ac"), ins("bd"), eq("ef")]),
            // Prefix and suffix detection.
            ([del("a"), ins("abc"), del("dc")], [eq("a"), del("d"), ins("b"), eq("c")]),
            // Prefix and suffix detection with equalities.
            ([eq("x"), del("a"), ins("abc"), del("dc"), eq("y")], [eq("xa"), del("d"), ins("b"), eq("cy")]),
            // Slide edit left.
            ([eq("a"), ins("ba"), eq("c")], [ins("ab"), eq("ac")]),
            // Slide edit right.
            ([eq("c"), ins("ab"), eq("a")], [eq("ca"), ins("ba")]),
            // Slide edit left recursive.
            ([eq("a"), del("b"), eq("c"), del("ac"), eq("x")], [del("abc"), eq("acx")]),
            // Slide edit right recursive.
            ([eq("x"), del("ca"), eq("c"), del("b"), eq("a")], [eq("xca"), del("cba")]),
            // Empty merge.
            ([del("b"), ins("ab"), eq("c")], [ins("a"), eq("bc")]),
            // Empty equality.
            ([eq(""), ins("a"), eq("b")], [ins("a"), eq("b")]),
        ] as [([Diff], [Diff])])
    func cleanupMergeMergesLikeEditsAndFactorsOutCommonText(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        dmp.cleanupMerge(&diffs)
        #expect(diffs == expected)
    }

    @Test(
        arguments: [
            ([], []),
            // Blank lines.
            (
                [eq("AAA\r\n\r\nBBB"), ins("\r\nDDD\r\n\r\nBBB"), eq("\r\nEEE")],
                [eq("AAA\r\n\r\n"), ins("BBB\r\nDDD\r\n\r\n"), eq("BBB\r\nEEE")]
            ),
            // Line boundaries.
            (
                [eq("AAA\r\nBBB"), ins(" DDD\r\nBBB"), eq(" EEE")],
                [eq("AAA\r\n"), ins("BBB DDD\r\n"), eq("BBB EEE")]
            ),
            // Word boundaries.
            ([eq("The c"), ins("ow and the c"), eq("at.")], [eq("The "), ins("cow and the "), eq("cat.")]),
            // Alphanumeric boundaries.
            ([eq("The-c"), ins("ow-and-the-c"), eq("at.")], [eq("The-"), ins("cow-and-the-"), eq("cat.")]),
            // Hitting the start.
            ([eq("a"), del("a"), eq("ax")], [del("a"), eq("aax")]),
            // Hitting the end.
            ([eq("xa"), del("a"), eq("a")], [eq("xaa"), del("a")]),
            // Sentence boundaries.
            (
                [eq("The xxx. The "), ins("zzz. The "), eq("yyy.")],
                [eq("The xxx."), ins(" The zzz."), eq(" The yyy.")]
            ),
        ] as [([Diff], [Diff])])
    func cleanupSemanticLosslessSlidesEditsToLogicalBoundaries(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        dmp.cleanupSemanticLossless(&diffs)
        #expect(diffs == expected)
    }

    /// Boundary scores, highest first: text edge 6, blank line 5, line break 4, end of
    /// sentence 3, whitespace 2, other non-alphanumeric 1. Expected values from the reference.
    @Test(
        arguments: [
            // A blank line (5) beats a line break (4).
            ([eq("AAA\n\nB"), ins("BB\n\nB"), eq("BB")], [eq("AAA\n\nBBB"), ins("\n\nBBB")]),
            // A line break (4) beats the end of a sentence (3).
            (
                [eq("The xxx.\nThe "), ins("zzz.\nThe "), eq("yyy.")],
                [eq("The xxx.\n"), ins("The zzz.\n"), eq("The yyy.")]
            ),
            ([eq("AAA\nBBB"), ins("\nCCC\nBBB"), eq("\nDDD")], [eq("AAA\nBBB\n"), ins("CCC\nBBB\n"), eq("DDD")]),
            // A tab is whitespace (2).
            ([eq("a\tb"), ins("c\tb"), eq("d")], [eq("a\t"), ins("bc\t"), eq("bd")]),
            // JavaScript's \s: no-break space and ideographic space are whitespace too.
            (
                [eq("The\u{00A0}c"), ins("ow and the\u{00A0}c"), eq("at.")],
                [eq("The\u{00A0}"), ins("cow and the\u{00A0}"), eq("cat.")]
            ),
            (
                [eq("The\u{3000}c"), ins("ow and the\u{3000}c"), eq("at.")],
                [eq("The\u{3000}"), ins("cow and the\u{3000}"), eq("cat.")]
            ),
            // Only ASCII letters and digits are alphanumeric: "é" scores as punctuation, so the
            // edges (6) win.
            ([eq("caf"), ins("é et caf"), eq("é.")], [ins("café et "), eq("café.")]),
            // The edge (6) beats everything.
            ([eq("x"), del("yx"), eq("z")], [del("xy"), eq("xz")]),
            ([eq("x "), ins("y x "), eq("z")], [ins("x y "), eq("x z")]),
            // The edge (6) at the end.
            ([eq("ab"), ins("cab"), eq("c")], [eq("abc"), ins("abc")]),
            // Ties go to the rightmost position: x|aa|aaz, xa|aa|az and xaa|aa|z all score 0.
            ([eq("xa"), ins("aa"), eq("az")], [eq("xaa"), ins("aa"), eq("z")]),
            // Two whitespace boundaries (2 + 2) beat one.
            ([eq("x a"), ins("y a"), eq(" az")], [eq("x "), ins("ay "), eq("a az")]),
            // Nothing in common to slide over: unchanged.
            ([eq("a."), ins("b."), eq("c")], [eq("a."), ins("b."), eq("c")]),
            ([eq("one. tw"), ins("o. thr"), eq("ee.")], [eq("one. tw"), ins("o. thr"), eq("ee.")]),
        ] as [([Diff], [Diff])])
    func losslessBoundaryScoresAndTieBreaksMatchTheReference(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        dmp.cleanupSemanticLossless(&diffs)
        #expect(diffs == expected)
    }

    @Test(
        arguments: [
            ([], []),
            // No elimination.
            ([del("ab"), ins("cd"), eq("12"), del("e")], [del("ab"), ins("cd"), eq("12"), del("e")]),
            ([del("abc"), ins("ABC"), eq("1234"), del("wxyz")], [del("abc"), ins("ABC"), eq("1234"), del("wxyz")]),
            // Simple elimination.
            ([del("a"), eq("b"), del("c")], [del("abc"), ins("b")]),
            // Backpass elimination.
            ([del("ab"), eq("cd"), del("e"), eq("f"), ins("g")], [del("abcdef"), ins("cdfg")]),
            // Multiple eliminations.
            (
                [ins("1"), eq("A"), del("B"), ins("2"), eq("_"), ins("1"), eq("A"), del("B"), ins("2")],
                [del("AB_AB"), ins("1A2_1A2")]
            ),
            // Word boundaries.
            ([eq("The c"), del("ow and the c"), eq("at.")], [eq("The "), del("cow and the "), eq("cat.")]),
            // No overlap elimination.
            ([del("abcxx"), ins("xxdef")], [del("abcxx"), ins("xxdef")]),
            // Overlap elimination.
            ([del("abcxxx"), ins("xxxdef")], [del("abc"), eq("xxx"), ins("def")]),
            // Reverse overlap elimination.
            ([del("xxxabc"), ins("defxxx")], [ins("def"), eq("xxx"), del("abc")]),
            // Two overlap eliminations.
            (
                [del("abcd1212"), ins("1212efghi"), eq("----"), del("A3"), ins("3BC")],
                [del("abcd"), eq("1212"), ins("efghi"), eq("----"), del("A"), eq("3"), ins("BC")]
            ),
        ] as [([Diff], [Diff])])
    func cleanupSemanticRemovesSemanticallyTrivialEqualities(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        dmp.cleanupSemantic(&diffs)
        #expect(diffs == expected)
    }

    /// An overlap is factored out when it is at least half of the deletion or of the insertion;
    /// a reverse overlap (the insertion's end is the deletion's start) puts the insertion first.
    @Test(
        arguments: [
            // Overlap of exactly half the deletion.
            ([del("abxx"), ins("xxcdef")], [del("ab"), eq("xx"), ins("cdef")]),
            // Less than half of either: kept.
            ([del("abcxx"), ins("xxdef")], [del("abcxx"), ins("xxdef")]),
            // Reverse overlap of exactly half.
            ([del("xxab"), ins("cdefxx")], [ins("cdef"), eq("xx"), del("ab")]),
            ([del("xxabc"), ins("defxx")], [del("xxabc"), ins("defxx")]),
            ([del("xxxabc"), ins("defxxx")], [ins("def"), eq("xxx"), del("abc")]),
            // Inside equalities.
            (
                [eq("12"), del("abcxxx"), ins("xxxdef"), eq("34")],
                [eq("12"), del("abc"), eq("xxx"), ins("def"), eq("34")]
            ),
            (
                [eq("12"), del("xxxabc"), ins("defxxx"), eq("34")],
                [eq("12"), ins("def"), eq("xxx"), del("abc"), eq("34")]
            ),
            // Only a deletion followed by an insertion is looked at.
            ([ins("xxxdef"), del("abcxxx")], [ins("xxxdef"), del("abcxxx")]),
            // A short equality between two edits is absorbed.
            ([del("abc"), ins("xyz"), eq("x"), del("def"), ins("uvw")], [del("abcxdef"), ins("xyzxuvw")]),
            ([del("The quick brown"), eq(" "), ins("fox")], [del("The quick brown "), ins(" fox")]),
            (
                [eq("AAA\r\n\r\nBBB"), del("\r\nDDD\r\n\r\nBBB"), eq("\r\nEEE")],
                [eq("AAA\r\n\r\n"), del("BBB\r\nDDD\r\n\r\n"), eq("BBB\r\nEEE")]
            ),
        ] as [([Diff], [Diff])])
    func cleanupSemanticEliminatesOverlapsBothWays(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        dmp.cleanupSemantic(&diffs)
        #expect(diffs == expected)
    }

    @Test(
        arguments: [
            ([], []),
            // No elimination.
            (
                [del("ab"), ins("12"), eq("wxyz"), del("cd"), ins("34")],
                [del("ab"), ins("12"), eq("wxyz"), del("cd"), ins("34")]
            ),
            // Four-edit elimination.
            ([del("ab"), ins("12"), eq("xyz"), del("cd"), ins("34")], [del("abxyzcd"), ins("12xyz34")]),
            // Three-edit elimination.
            ([ins("12"), eq("x"), del("cd"), ins("34")], [del("xcd"), ins("12x34")]),
            // Backpass elimination.
            (
                [del("ab"), ins("12"), eq("xy"), ins("34"), eq("z"), del("cd"), ins("56")],
                [del("abxyzcd"), ins("12xy34z56")]
            ),
            // Three edits around two characters: kept at cost 4.
            ([ins("12"), eq("xy"), del("cd"), ins("34")], [ins("12"), eq("xy"), del("cd"), ins("34")]),
            // Two edits are never enough.
            ([ins("12"), eq("xy"), del("cd")], [ins("12"), eq("xy"), del("cd")]),
            ([del("ab"), eq("xy"), ins("cd")], [del("ab"), eq("xy"), ins("cd")]),
        ] as [([Diff], [Diff])])
    func cleanupEfficiencyAtEditCost4(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        let dmp = DiffMatchPatch.with { $0.diffEditCost = 4 }
        dmp.cleanupEfficiency(&diffs)
        #expect(diffs == expected)
    }

    @Test(
        arguments: [
            // High cost elimination: four characters between four edits go at cost 5.
            ([del("ab"), ins("12"), eq("wxyz"), del("cd"), ins("34")], [del("abwxyzcd"), ins("12wxyz34")]),
            ([del("ab"), ins("12"), eq("xyz"), del("cd"), ins("34")], [del("abxyzcd"), ins("12xyz34")]),
            ([ins("12"), eq("x"), del("cd"), ins("34")], [del("xcd"), ins("12x34")]),
            // Three edits around two characters: 2 < 5 / 2, so eliminated.
            ([ins("12"), eq("xy"), del("cd"), ins("34")], [del("xycd"), ins("12xy34")]),
            // Five characters stay.
            (
                [del("ab"), ins("12"), eq("wxyzv"), del("cd"), ins("34")],
                [del("ab"), ins("12"), eq("wxyzv"), del("cd"), ins("34")]
            ),
            ([ins("12"), eq("xy"), del("cd")], [ins("12"), eq("xy"), del("cd")]),
        ] as [([Diff], [Diff])])
    func cleanupEfficiencyAtEditCost5(diffs: [Diff], expected: [Diff]) {
        var diffs = diffs
        let dmp = DiffMatchPatch.with { $0.diffEditCost = 5 }
        dmp.cleanupEfficiency(&diffs)
        #expect(diffs == expected)
    }
}
