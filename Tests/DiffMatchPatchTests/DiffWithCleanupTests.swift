import NotedCore
import TestSupport
import Testing

@testable import DiffMatchPatch

/// `diff(_:_:checkLines:cleanup:)` cleans up the diff as the reference would see it.
struct DiffWithCleanupTests {
    let dmp = DiffMatchPatch(configuration: .init(diffTimeout: 0))

    @Test(arguments: DiffMatchPatch.Cleanup.allCases)
    func equalsCleaningUpAfterwardsOnTextWithoutAstralCharacters(cleanup: DiffMatchPatch.Cleanup) {
        var rng = TestSeed.generator(for: "diffWithCleanup.\(cleanup)")
        for kind in Array(repeating: [RandomText.Kind.ascii, .bmp, .lines], count: 25).joined() {
            let (a, b) = RandomText.pair(kind, maxLength: 80, using: &rng)
            var expected = dmp.diff(a, b, checkLines: false)
            switch cleanup {
            case .none: break
            case .semantic: dmp.cleanupSemantic(&expected)
            case .semanticLossless: dmp.cleanupSemanticLossless(&expected)
            case .efficiency: dmp.cleanupEfficiency(&expected)
            }
            #expect(dmp.diff(a, b, checkLines: false, cleanup: cleanup) == expected, "\(TestSeed.replay)")
        }
    }

    /// From a differential run against the reference: cleaning up the raw diff (whose
    /// boundaries cut emoji) gives the reference's delta, which splits no pair.
    @Test func semanticCleanupOfAstralTextMatchesTheReference() {
        let a = "mat日本 b \u{2028};🙌\u{a0} &naïve= € 🙋<mat \n> cat\u{2028} = <&cat 😀+;🇫🇷<\t=a👍🏽😁€"
        let b = "👍🏽🙌 🙋\n\n sat語 bthedog& 𝄞+€語% <on\u{a0} naïve=é語 🙌  語>sat 語<ran 👍🏽&"
        let diffs = dmp.diff(a, b, checkLines: false, cleanup: .semantic)
        #expect(
            dmp.toDelta(diffs)
                == "-12\t+%F0%9F%91%8D%F0%9F%8F%BD%F0%9F%99%8C %F0%9F%99%8B%0A%0A sat%E8%AA%9E bthedog& %F0%9D%84%9E+%E2%82%AC%E8%AA%9E%25 %3Con\t=2\t-1\t=6\t-45\t+%C3%A9%E8%AA%9E %F0%9F%99%8C  %E8%AA%9E%3Esat %E8%AA%9E%3Cran %F0%9F%91%8D%F0%9F%8F%BD&"
        )
    }
}
