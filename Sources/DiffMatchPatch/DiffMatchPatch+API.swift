/// The public API: the reference's functions with Swift names, on `String`s.
///
/// Each function converts to UTF-16 units, runs the port of the reference, and converts back;
/// diffs are repaired (see `Surrogates`) so that no result splits a surrogate pair.
extension DiffMatchPatch {
    @inline(__always)
    private func units(_ text: String) -> [UInt16] { UTF16Conversion.units(text) }

    @inline(__always)
    private func units(_ diffs: [Diff]) -> [UDiff] { diffs.map(\.udiff) }

    @inline(__always)
    private func published(_ diffs: [UDiff]) -> [Diff] { Surrogates.repair(diffs).map(Diff.init) }

    /// Runs a cleanup of the reference on the UTF-16 form of `diffs`.
    private func rewrite(_ diffs: inout [Diff], _ cleanup: (inout [UDiff]) -> Void) {
        var u = units(diffs)
        cleanup(&u)
        diffs = published(u)
    }

    // MARK: Diff

    /// The differences between two texts, simplest edit first.
    ///
    /// - Parameters:
    ///   - checkLines: run a quick line-level diff first on long texts (faster, slightly
    ///     less optimal), as the reference does by default.
    /// - Returns: diffs that turn `text1` into `text2`.
    public func diff(_ text1: String, _ text2: String, checkLines: Bool = true) -> [Diff] {
        published(diffMain(units(text1), units(text2), checkLines: checkLines, deadline: defaultDeadline))
    }

    /// The differences between two texts, giving up refining at `deadline` (nil: never).
    public func diff(_ text1: String, _ text2: String, checkLines: Bool, deadline: ContinuousClock.Instant?) -> [Diff] {
        published(diffMain(units(text1), units(text2), checkLines: checkLines, deadline: deadline))
    }

    /// A cleanup to run on a diff before it is handed out.
    public enum Cleanup: String, CaseIterable, Sendable {
        case none, semantic, semanticLossless, efficiency
    }

    /// The differences between two texts, then `cleanup`: the same as cleaning up the result
    /// of `diff`, except that the cleanup sees the diff exactly as the reference's would (before
    /// surrogate pairs are made whole), so the result matches the reference's in more cases.
    public func diff(_ text1: String, _ text2: String, checkLines: Bool = true, cleanup: Cleanup) -> [Diff] {
        var diffs = diffMain(units(text1), units(text2), checkLines: checkLines, deadline: defaultDeadline)
        switch cleanup {
        case .none: break
        case .semantic: cleanupSemantic(&diffs)
        case .semanticLossless: cleanupSemanticLossless(&diffs)
        case .efficiency: cleanupEfficiency(&diffs)
        }
        return published(diffs)
    }

    /// The length of the common prefix of two texts, in UTF-16 code units.
    public func commonPrefix(_ text1: String, _ text2: String) -> Int {
        withUnits(units(text1), units(text2)) { commonPrefix($0, $1) }
    }

    /// The length of the common suffix of two texts, in UTF-16 code units.
    public func commonSuffix(_ text1: String, _ text2: String) -> Int {
        withUnits(units(text1), units(text2)) { commonSuffix($0, $1) }
    }

    /// The length of the longest suffix of `text1` that is a prefix of `text2`.
    public func commonOverlap(_ text1: String, _ text2: String) -> Int {
        withUnits(units(text1), units(text2)) { commonOverlap($0, $1) }
    }

    /// Whether the texts share a substring at least half as long as the longer text:
    /// `[text1A, text1B, text2A, text2B, common]`, or nil (always nil without a timeout).
    public func halfMatch(_ text1: String, _ text2: String) -> [String]? {
        withUnits(units(text1), units(text2)) { a, b in
            guard let hm = halfMatch(a, b) else { return nil }
            return [hm.text1A, hm.text1B, hm.text2A, hm.text2B, hm.common].map {
                UTF16Conversion.string($0)
            }
        }
    }

    /// Myers' bisection diff without the reference's speedups, up to `deadline`.
    public func bisect(_ text1: String, _ text2: String, deadline: ContinuousClock.Instant?) -> [Diff] {
        published(withUnits(units(text1), units(text2)) { bisect($0, $1, deadline: deadline) })
    }

    /// Reorders and merges like edit sections and factors out common prefixes and suffixes.
    public func cleanupMerge(_ diffs: inout [Diff]) {
        rewrite(&diffs) { cleanupMerge(&$0) }
    }

    /// Makes diffs easier for people to read by removing coincidental equalities.
    public func cleanupSemantic(_ diffs: inout [Diff]) {
        rewrite(&diffs) { cleanupSemantic(&$0) }
    }

    /// Slides single edits to word and line boundaries without changing their content.
    public func cleanupSemanticLossless(_ diffs: inout [Diff]) {
        rewrite(&diffs) { cleanupSemanticLossless(&$0) }
    }

    /// Removes equalities that cost more to keep than `diffEditCost`.
    public func cleanupEfficiency(_ diffs: inout [Diff]) {
        rewrite(&diffs) { cleanupEfficiency(&$0) }
    }

    /// The Levenshtein distance the diffs describe, in UTF-16 code units.
    public func levenshtein(_ diffs: [Diff]) -> Int { levenshtein(units(diffs)) }

    /// Where `location` in the source text lands in the result text.
    public func xIndex(_ diffs: [Diff], _ location: Int) -> Int { xIndex(units(diffs), location) }

    /// The diffs as HTML, as the reference's `diff_prettyHtml`.
    public func prettyHTML(_ diffs: [Diff]) -> String { prettyHTML(units(diffs)) }

    /// The source text of the diffs.
    public func text1(_ diffs: [Diff]) -> String { diffs.filter { $0.operation != .insert }.map(\.text).joined() }

    /// The result text of the diffs.
    public func text2(_ diffs: [Diff]) -> String { diffs.filter { $0.operation != .delete }.map(\.text).joined() }

    /// The diffs as a compact delta: `=3\t-2\t+ing` keeps 3, deletes 2, inserts "ing".
    public func toDelta(_ diffs: [Diff]) -> String { toDelta(units(diffs)) }

    /// The diffs a delta describes against `text1`.
    ///
    /// Accepts everything the reference emits, and deltas from ports that split surrogate
    /// pairs (the diffs are then repaired).
    /// - Throws: `DiffMatchPatchError` for a malformed delta or one that does not fit `text1`.
    public func fromDelta(_ text1: String, _ delta: String) throws(DiffMatchPatchError) -> [Diff] {
        try fromDelta(text1, delta, strict: false)
    }

    /// The diffs a delta describes against `text1`; with `strict`, a delta that splits a
    /// surrogate pair is refused with `.splitSurrogatePair` instead of repaired.
    public func fromDelta(_ text1: String, _ delta: String, strict: Bool) throws(DiffMatchPatchError) -> [Diff] {
        let diffs = try fromDelta(units(text1), units(delta))
        let splits = Surrogates.splitsPair(diffs)
        if strict && splits {
            throw DiffMatchPatchError(.splitSurrogatePair, "Delta splits a surrogate pair")
        }
        let repaired = splits ? Surrogates.repair(diffs) : diffs
        for diff in repaired where diff.op == .insert && Surrogates.hasUnpaired(diff.text) {
            throw DiffMatchPatchError(.splitSurrogatePair, "Delta inserts an unpaired surrogate")
        }
        if splits && Surrogates.splitsPair(repaired) {
            throw DiffMatchPatchError(.splitSurrogatePair, "Delta splits a surrogate pair")
        }
        return repaired.map(Diff.init)
    }

    // MARK: Match

    /// The location of the best match of `pattern` near `location` in `text`, or nil.
    ///
    /// Patterns up to `matchMaxBits` code units match fuzzily (Bitap, as the reference);
    /// longer ones, which the reference refuses, match exactly at the nearest occurrence.
    public func match(_ text: String, _ pattern: String, _ location: Int) -> Int? {
        let r = withUnits(units(text), units(pattern)) { matchMain($0, $1, location) }
        return r == -1 ? nil : r
    }

    /// The Bitap fuzzy match of `pattern` near `location`, or nil.
    public func matchBitap(_ text: String, _ pattern: String, _ location: Int) -> Int? {
        let r = withUnits(units(text), units(pattern)) { t, p in
            p.count > maxBits ? matchMain(t, p, location) : matchBitap(t, p, location)
        }
        return r == -1 ? nil : r
    }

    /// The Bitap alphabet of a pattern: for each code unit, the bit mask of its positions.
    public func matchAlphabet(_ pattern: String) -> [UInt16: UInt32] {
        units(pattern).withUnsafeBufferPointer { matchAlphabet($0) }
    }

    // MARK: Patch

    /// Patches that turn `text1` into `text2` (diff, semantic and efficiency cleanup).
    public func patchMake(_ text1: String, _ text2: String) -> [Patch] {
        let source = units(text1)
        var diffs = diffMain(source, units(text2), checkLines: true, deadline: defaultDeadline)
        if diffs.count > 2 {
            cleanupSemantic(&diffs)
            cleanupEfficiency(&diffs)
        }
        return patchMake(source, Surrogates.repair(diffs)).map(\.patch)
    }

    /// Patches for diffs; the source text is computed from them.
    public func patchMake(_ diffs: [Diff]) -> [Patch] {
        let u = units(diffs)
        return patchMake(text1(u), u).map(\.patch)
    }

    /// Patches that apply `diffs` to `text1`.
    public func patchMake(_ text1: String, _ diffs: [Diff]) -> [Patch] {
        patchMake(units(text1), units(diffs)).map(\.patch)
    }

    /// Adds context to a patch until it is unique in `text`.
    public func patchAddContext(_ patch: inout Patch, _ text: String) {
        var u = UPatch(patch)
        units(text).withUnsafeBufferPointer { patchAddContext(&u, $0) }
        patch = u.patch
    }

    /// Applies patches to `text` with fuzzy matching.
    ///
    /// - Returns: the patched text and, for each patch, whether it applied.
    public func patchApply(_ patches: [Patch], to text: String) -> (text: String, results: [Bool]) {
        let (result, applied) = patchApply(patches.map(UPatch.init), units(text))
        return (UTF16Conversion.string(result), applied)
    }

    /// Applies patches to `text` with fuzzy matching, but never takes or splits text the
    /// patches did not know. With `strict`, a hunk found where the text differs from what it
    /// expects applies only if each of its deletions covers exactly the text it deleted in the
    /// original, and none of its insertions goes inside a word where the original had a word
    /// boundary (between two spaces, say). Otherwise the hunk is left out and its result
    /// is false. A hunk found exactly where and as expected applies as in the reference.
    ///
    /// This is not in the reference. Its `patch_apply` maps edits through a diff of the
    /// expected and the found text: a stale deletion of `[1]` also removes the `[30]` someone
    /// put in its place meanwhile, and an insertion can land inside a word someone else
    /// rewrote. For merging concurrent edits, where text someone else wrote must stay as they
    /// wrote it, such a hunk is better reported as failed (and kept aside).
    /// With `strict` false this is ``patchApply(_:to:)``.
    public func patchApply(_ patches: [Patch], to text: String, strict: Bool) -> (text: String, results: [Bool]) {
        let (result, applied) = patchApply(patches.map(UPatch.init), units(text), strict: strict)
        return (UTF16Conversion.string(result), applied)
    }

    /// ``patchApply(_:to:strict:)`` that gives up at `deadline`: the hunks not yet applied
    /// then are left out (`false` in `results`), and the diffs it runs stop refining at it.
    /// For work that must end in time whatever the input (a server merging a client's edit).
    public func patchApply(_ patches: [Patch], to text: String, strict: Bool, deadline: ContinuousClock.Instant?) -> (
        text: String, results: [Bool]
    ) {
        let (result, applied) = patchApply(patches.map(UPatch.init), units(text), strict: strict, until: deadline)
        return (UTF16Conversion.string(result), applied)
    }

    /// Adds the reference's padding to the first and last patch; returns the padding.
    public func patchAddPadding(_ patches: inout [Patch]) -> String {
        var u = patches.map(UPatch.init)
        let padding = patchAddPadding(&u)
        patches = u.map(\.patch)
        return UTF16Conversion.string(padding)
    }

    /// Splits patches longer than `matchMaxBits` so that Bitap can place them.
    public func patchSplitMax(_ patches: inout [Patch]) {
        var u = patches.map(UPatch.init)
        patchSplitMax(&u)
        patches = u.map(\.patch)
    }

    /// The patches as text, byte-identical to the reference's `patch_toText`.
    public func patchToText(_ patches: [Patch]) -> String {
        var out: [UInt8] = []
        for patch in patches { UPatch(patch).appendText(to: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The patches a patch text describes.
    /// - Throws: `DiffMatchPatchError` (`.invalidPatch`) for anything that does not parse.
    public func patchFromText(_ text: String) throws(DiffMatchPatchError) -> [Patch] {
        let patches = try PatchText.parse(units(text))
        for patch in patches {
            if Surrogates.splitsPair(patch.diffs) {
                throw DiffMatchPatchError(.splitSurrogatePair, "Patch text splits a surrogate pair")
            }
        }
        return patches.map(\.patch)
    }
}
