import NotedCore
import TestSupport
import Testing

@testable import DiffMatchPatch

/// Seeded randomised round trips: `patchApply(patchMake(a, b), a) == b` with every hunk
/// applied, `fromDelta(a, toDelta(diff(a, b)))` gives back b, patch text reads back
/// text-identical, and no output splits a surrogate pair.
///
/// The seed comes from `NOTED_TEST_SEED` (else a fixed default) and every failure prints it.
struct RoundTripTests {
    @Test(arguments: RandomText.Kind.allCases)
    func randomPairsRoundTripThroughDeltaAndPatch(kind: RandomText.Kind) {
        var random = TestSeed.generator(for: "roundTrip-\(kind.rawValue)")
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }
        for round in 0..<120 {
            let maxLength = random.chance(1, in: 10) ? 2000 : 200
            let (a, b) = RandomText.pair(kind, maxLength: maxLength, using: &random)
            let problems = roundTripProblems(dmp, a, b)
            #expect(
                problems.isEmpty,
                "\(TestSeed.replay) \(kind) round \(round): \(a.debugDescription) → \(b.debugDescription): \(problems)")
        }
    }

    /// Patches made from one pair and applied to a third, edited text: whatever fuzzy matching
    /// does, the output is whole characters and the patches are left as they were.
    @Test(arguments: RandomText.Kind.allCases)
    func randomPatchesOnEditedTargetsKeepCharactersWhole(kind: RandomText.Kind) {
        var random = TestSeed.generator(for: "fuzzyApply-\(kind.rawValue)")
        let dmp = DiffMatchPatch()
        for round in 0..<60 {
            let (a, b) = RandomText.pair(kind, maxLength: 300, using: &random)
            let target = RandomText.edit(a, kind, using: &random)
            let patches = dmp.patchMake(a, b)
            let before = dmp.patchToText(patches)
            let result = dmp.patchApply(patches, to: target)
            let context =
                "\(TestSeed.replay) \(kind) round \(round): \(a.debugDescription) → \(b.debugDescription) on \(target.debugDescription)"
            #expect(!result.text.contains(replacementCharacter), "\(context)")
            #expect(result.results.count >= patches.count, "\(context)")
            #expect(dmp.patchToText(patches) == before, "\(context)")
        }
    }

    /// Larger texts with timeouts on: the round trip must hold even when the diff gives up early.
    @Test func largeRandomPairsRoundTripWithATimeout() {
        var random = TestSeed.generator(for: "largeRoundTrip")
        let dmp = DiffMatchPatch.with { $0.diffTimeout = 0.05 }
        for round in 0..<6 {
            let kind = random.pick(RandomText.Kind.allCases)
            let a = RandomText.make(kind, maxLength: 20000, using: &random)
            var b = a
            for _ in 0..<5 {
                b = RandomText.edit(b, kind, using: &random)
            }
            let problems = roundTripProblems(dmp, a, b)
            #expect(
                problems.isEmpty,
                "\(TestSeed.replay) \(kind) round \(round) (\(a.utf16.count) and \(b.utf16.count) units): \(problems.prefix(5))"
            )
        }
    }
}
