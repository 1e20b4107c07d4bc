@testable import DiffMatchPatch

/// Every identity one pair of texts must satisfy, and the no-split rule on every output.
///
/// Returns descriptions of what went wrong; empty when all is well. The texts must not contain
/// U+FFFD, which is how half a surrogate pair shows in a Swift `String`.
func roundTripProblems(_ dmp: DiffMatchPatch, _ a: String, _ b: String) -> [String] {
    var problems: [String] = []
    func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { problems.append(message()) }
    }
    func checkDiffs(_ diffs: [Diff], _ what: String) {
        check(rebuildTexts(diffs) == [a, b], "\(what) does not rebuild the texts: \(diffs)")
        check(!diffs.contains { $0.text.contains(replacementCharacter) }, "\(what) splits a surrogate pair: \(diffs)")
    }

    for checkLines in [false, true] {
        let diffs = dmp.diff(a, b, checkLines: checkLines)
        checkDiffs(diffs, "diff(checkLines: \(checkLines))")
    }
    let diffs = dmp.diff(a, b, checkLines: false)
    var cleaned = diffs
    dmp.cleanupSemantic(&cleaned)
    checkDiffs(cleaned, "cleanupSemantic")
    cleaned = diffs
    dmp.cleanupEfficiency(&cleaned)
    checkDiffs(cleaned, "cleanupEfficiency")
    cleaned = diffs
    dmp.cleanupSemanticLossless(&cleaned)
    checkDiffs(cleaned, "cleanupSemanticLossless")
    cleaned = diffs
    dmp.cleanupMerge(&cleaned)
    checkDiffs(cleaned, "cleanupMerge")

    check(dmp.levenshtein(diffs) <= a.utf16.count + b.utf16.count, "levenshtein larger than both texts together")
    check(!dmp.prettyHTML(diffs).contains(replacementCharacter), "prettyHTML has U+FFFD")

    // Delta.
    let delta = dmp.toDelta(diffs)
    problems += deltaSurrogateProblems(delta, text1: a).map { "toDelta: \($0)" }
    do {
        let decoded = try dmp.fromDelta(a, delta)
        check(decoded == diffs, "fromDelta(toDelta) differs: \(delta.debugDescription) gave \(decoded)")
        check(dmp.text2(decoded) == b, "fromDelta(toDelta) does not give text2")
        let strict = try dmp.fromDelta(a, delta, strict: true)
        check(strict == diffs, "strict fromDelta(toDelta) differs")
    } catch {
        problems.append("fromDelta(toDelta) threw \(error) for \(delta.debugDescription)")
    }

    // Patches.
    let patches = dmp.patchMake(a, b)
    let patchText = dmp.patchToText(patches)
    problems += patchSurrogateProblems(patches, patchText: patchText, text1: a, text2: b).map { "patchMake: \($0)" }
    check(
        dmp.patchToText(dmp.patchMake(diffs)) == dmp.patchToText(dmp.patchMake(a, diffs)),
        "patchMake(diffs) and patchMake(a, diffs) differ")
    do {
        let parsed = try dmp.patchFromText(patchText)
        check(parsed == patches, "patchFromText(patchToText) differs from the patches")
        check(dmp.patchToText(parsed) == patchText, "patchToText(patchFromText) is not text-identical")
    } catch {
        problems.append("patchFromText(patchToText) threw \(error) for \(patchText.debugDescription)")
    }
    let applied = dmp.patchApply(patches, to: a)
    check(applied.text == b, "patchApply(patchMake(a, b), a) gave \(applied.text.debugDescription)")
    check(applied.results.allSatisfy { $0 }, "patchApply results \(applied.results)")
    check(!applied.text.contains(replacementCharacter), "patchApply result has U+FFFD")

    var split = patches
    dmp.patchSplitMax(&split)
    let splitText = dmp.patchToText(split)
    problems += escapedSurrogateProblems(splitText).map { "patchSplitMax: \($0)" }
    for patch in split where patch.diffs.contains(where: { $0.text.contains(replacementCharacter) }) {
        problems.append("patchSplitMax splits a surrogate pair: \(patch.diffs)")
    }
    let splitApplied = dmp.patchApply(split, to: a)
    check(splitApplied.text == b, "patchApply(split patches, a) gave \(splitApplied.text.debugDescription)")

    var padded = patches
    _ = dmp.patchAddPadding(&padded)
    problems += escapedSurrogateProblems(dmp.patchToText(padded)).map { "patchAddPadding: \($0)" }
    return problems
}
