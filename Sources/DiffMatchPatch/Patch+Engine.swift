/// The reference's patch functions on UTF-16 units, plus what keeps surrogate pairs whole.
extension DiffMatchPatch {
    /// Grows a patch's context until it is unique in `text` (within Bitap's reach), then adds
    /// a margin on both sides; never starts or ends the context inside a surrogate pair.
    func patchAddContext(_ patch: inout UPatch, _ text: Units) {
        if text.isEmpty { return }
        func clampedSub(_ from: Int, _ to: Int) -> Units {
            let a = max(0, min(from, text.count))
            let b = max(0, min(to, text.count))
            return text.sub(min(a, b), max(a, b))
        }
        var pattern = clampedSub(patch.start2, patch.start2 + patch.length1)
        var padding = 0
        // Grow while the pattern is not unique, but stay within what Bitap can match.
        while margin > 0 && pattern.count < maxBits - margin - margin && !isUnique(pattern, in: text) {
            padding += margin
            pattern = clampedSub(patch.start2 - padding, patch.start2 + patch.length1 + padding)
        }
        padding += margin

        var prefixStart = max(0, min(patch.start2 - padding, text.count))
        let prefixEnd = max(prefixStart, min(patch.start2, text.count))
        if prefixStart > 0 && prefixStart < prefixEnd && isLowSurrogate(text[prefixStart])
            && isHighSurrogate(text[prefixStart - 1])
        {
            prefixStart -= 1
        }
        let prefix = text.sub(prefixStart, prefixEnd)
        let suffixStart = max(0, min(patch.start2 + patch.length1, text.count))
        var suffixEnd = max(suffixStart, min(patch.start2 + patch.length1 + padding, text.count))
        if suffixEnd > suffixStart && suffixEnd < text.count && isHighSurrogate(text[suffixEnd - 1])
            && isLowSurrogate(text[suffixEnd])
        {
            suffixEnd += 1
        }
        let suffix = text.sub(suffixStart, suffixEnd)
        if !prefix.isEmpty { patch.diffs.insert(UDiff(.equal, prefix.array), at: 0) }
        if !suffix.isEmpty { patch.diffs.append(UDiff(.equal, suffix.array)) }
        patch.start1 -= prefix.count
        patch.start2 -= prefix.count
        patch.length1 += prefix.count + suffix.count
        patch.length2 += prefix.count + suffix.count
    }

    /// The reference's `text.indexOf(pattern) == text.lastIndexOf(pattern)`.
    private func isUnique(_ pattern: Units, in text: Units) -> Bool {
        if pattern.isEmpty { return text.isEmpty }
        let first = Search.indexOf(text, pattern)
        return first == -1 || Search.indexOf(text, pattern, from: first + 1) == -1
    }

    /// Patches that turn `text1` into the text `diffs` lead to.
    func patchMake(_ text1: [UInt16], _ diffs: [UDiff]) -> [UPatch] {
        if diffs.isEmpty { return [] }
        var patches: [UPatch] = []
        var patch = UPatch()
        var charCount1 = 0
        var charCount2 = 0
        // The text before this hunk, with all earlier hunks applied (the reference's rolling
        // context): postpatchText follows every diff, prepatchText catches up at each hunk.
        var prepatchText = text1
        var postpatchText = text1
        for (x, diff) in diffs.enumerated() {
            let text = diff.text
            if patch.diffs.isEmpty && diff.op != .equal {
                // A new patch starts here.
                patch.start1 = charCount1
                patch.start2 = charCount2
            }
            switch diff.op {
            case .insert:
                patch.diffs.append(diff)
                patch.length2 += text.count
                postpatchText.insert(contentsOf: text, at: charCount2)
            case .delete:
                patch.length1 += text.count
                patch.diffs.append(diff)
                postpatchText.removeSubrange(charCount2..<(charCount2 + text.count))
            case .equal:
                if text.count <= 2 * margin && !patch.diffs.isEmpty && diffs.count != x + 1 {
                    // Small equality inside a patch.
                    patch.diffs.append(diff)
                    patch.length1 += text.count
                    patch.length2 += text.count
                } else if text.count >= 2 * margin && !patch.diffs.isEmpty {
                    // Time for a new patch.
                    prepatchText.withUnsafeBufferPointer { patchAddContext(&patch, $0) }
                    patches.append(patch)
                    patch = UPatch()
                    // Unlike unidiff, patch lists have a rolling context: each hunk's
                    // context is the text after the earlier hunks are applied.
                    prepatchText = postpatchText
                    charCount1 = charCount2
                }
            }
            if diff.op != .insert { charCount1 += text.count }
            if diff.op != .delete { charCount2 += text.count }
        }
        if !patch.diffs.isEmpty {
            prepatchText.withUnsafeBufferPointer { patchAddContext(&patch, $0) }
            patches.append(patch)
        }
        return patches
    }

    /// Adds the null padding the reference puts around the text before applying patches.
    func patchAddPadding(_ patches: inout [UPatch]) -> [UInt16] {
        let paddingLength = margin
        let nullPadding = (0..<max(0, paddingLength)).map { UInt16($0 + 1) }
        for i in patches.indices {
            patches[i].start1 += paddingLength
            patches[i].start2 += paddingLength
        }
        guard !patches.isEmpty else { return nullPadding }

        // Add some padding on start of first diff.
        var patch = patches[0]
        if patch.diffs.first?.op != .equal {
            patch.diffs.insert(UDiff(.equal, nullPadding), at: 0)
            patch.start1 -= paddingLength
            patch.start2 -= paddingLength
            patch.length1 += paddingLength
            patch.length2 += paddingLength
        } else if paddingLength > patch.diffs[0].text.count {
            // Grow first equality.
            let extraLength = paddingLength - patch.diffs[0].text.count
            patch.diffs[0].text = Array(nullPadding[patch.diffs[0].text.count...]) + patch.diffs[0].text
            patch.start1 -= extraLength
            patch.start2 -= extraLength
            patch.length1 += extraLength
            patch.length2 += extraLength
        }
        patches[0] = patch

        // Add some padding on end of last diff.
        patch = patches[patches.count - 1]
        if patch.diffs.last?.op != .equal {
            patch.diffs.append(UDiff(.equal, nullPadding))
            patch.length1 += paddingLength
            patch.length2 += paddingLength
        } else if let last = patch.diffs.last, paddingLength > last.text.count {
            // Grow last equality.
            let extraLength = paddingLength - last.text.count
            patch.diffs[patch.diffs.count - 1].text += nullPadding[0..<extraLength]
            patch.length1 += extraLength
            patch.length2 += extraLength
        }
        patches[patches.count - 1] = patch
        return nullPadding
    }

    /// Splits hunks longer than Bitap can match into smaller ones.
    ///
    /// With `keepingPairs` no cut or context falls inside a surrogate pair, for patches that
    /// are handed out; `patchApply` splits exactly as the reference, since its pieces never
    /// leave it and its edits keep pairs whole anyway.
    func patchSplitMax(_ patches: inout [UPatch], keepingPairs: Bool = true) {
        let patchSize = maxBits
        var x = 0
        while x < patches.count {
            if patches[x].length1 <= patchSize {
                x += 1
                continue
            }
            let bigpatch = patches.remove(at: x)
            // Remove the big old patch; the pieces go where it was.
            var start1 = bigpatch.start1
            var start2 = bigpatch.start2
            var precontext: [UInt16] = []
            var bigDiffs = bigpatch.diffs[...]
            while !bigDiffs.isEmpty {
                // Create one of several smaller patches.
                var patch = UPatch()
                var empty = true
                patch.start1 = start1 - precontext.count
                patch.start2 = start2 - precontext.count
                if !precontext.isEmpty {
                    patch.length1 = precontext.count
                    patch.length2 = precontext.count
                    patch.diffs.append(UDiff(.equal, precontext))
                }
                while let first = bigDiffs.first, patch.length1 < patchSize - margin {
                    let diffType = first.op
                    if diffType == .insert {
                        // Insertions are harmless.
                        patch.length2 += first.text.count
                        start2 += first.text.count
                        patch.diffs.append(first)
                        bigDiffs.removeFirst()
                        empty = false
                    } else if diffType == .delete && patch.diffs.count == 1 && patch.diffs[0].op == .equal
                        && first.text.count > 2 * patchSize
                    {
                        // This is a large deletion. Let it pass in one chunk.
                        patch.length1 += first.text.count
                        start1 += first.text.count
                        empty = false
                        patch.diffs.append(first)
                        bigDiffs.removeFirst()
                    } else {
                        // Deletion or equality. Only take as much as we can stomach.
                        var cut = min(first.text.count, patchSize - patch.length1 - margin)
                        if keepingPairs && cut < first.text.count && cut > 0 && isHighSurrogate(first.text[cut - 1]) {
                            cut -= 1
                            if cut == 0 { cut = min(2, first.text.count) }
                        }
                        let diffText = Array(first.text[0..<cut])
                        patch.length1 += diffText.count
                        start1 += diffText.count
                        if diffType == .equal {
                            patch.length2 += diffText.count
                            start2 += diffText.count
                        } else {
                            empty = false
                        }
                        patch.diffs.append(UDiff(diffType, diffText))
                        if cut == first.text.count {
                            bigDiffs.removeFirst()
                        } else {
                            bigDiffs[bigDiffs.startIndex].text.removeFirst(cut)
                        }
                    }
                }
                // Compute the head context for the next patch.
                precontext = text2(patch.diffs)
                var keep = min(margin, precontext.count)
                if keepingPairs && keep < precontext.count && keep > 0
                    && isLowSurrogate(precontext[precontext.count - keep])
                {
                    keep += 1
                }
                precontext = Array(precontext[(precontext.count - keep)...])
                // Append the end context for this patch.
                let rest = text1(Array(bigDiffs))
                var take = min(margin, rest.count)
                if keepingPairs && take < rest.count && take > 0 && isHighSurrogate(rest[take - 1]) {
                    take += 1
                }
                let postcontext = rest[0..<take]
                if !postcontext.isEmpty {
                    patch.length1 += postcontext.count
                    patch.length2 += postcontext.count
                    if let last = patch.diffs.last, last.op == .equal {
                        patch.diffs[patch.diffs.count - 1].text += postcontext
                    } else {
                        patch.diffs.append(UDiff(.equal, postcontext))
                    }
                }
                if !empty {
                    patches.insert(patch, at: x)
                    x += 1
                }
            }
        }
    }

    /// Whether `index` falls between the two halves of a surrogate pair of `text`.
    @inline(__always)
    private func insidePair(_ text: [UInt16], _ index: Int) -> Bool {
        index > 0 && index < text.count && isLowSurrogate(text[index]) && isHighSurrogate(text[index - 1])
    }

    /// Applies patches to `text` with fuzzy matching; returns the text and which hunks applied.
    ///
    /// The edits are applied exactly as the reference applies them. Its positions are
    /// approximate and can fall inside a surrogate pair; when that leaves half a character in
    /// the result, the patches are applied again with positions moved off the pairs (insert
    /// before a pair, delete less rather than half a character).
    func patchApply(_ patches: [UPatch], _ text: [UInt16], strict: Bool = false, until: ContinuousClock.Instant? = nil)
        -> (text: [UInt16], results: [Bool])
    {
        let exact = patchApply(patches, text, keepingPairs: false, strict: strict, until: until)
        if Surrogates.hasUnpaired(exact.text) && !Surrogates.hasUnpaired(text) {
            return patchApply(patches, text, keepingPairs: true, strict: strict, until: until)
        }
        return exact
    }

    private func patchApply(
        _ patchesIn: [UPatch], _ textIn: [UInt16], keepingPairs: Bool, strict: Bool, until: ContinuousClock.Instant?
    ) -> (text: [UInt16], results: [Bool]) {
        if patchesIn.isEmpty { return (textIn, []) }
        var patches = patchesIn
        let nullPadding = patchAddPadding(&patches)
        var text = nullPadding + textIn + nullPadding
        // Strict: a hunk stays whole. Split to the matcher's 32 units, a deletion or insertion
        // is cut mid-word, and each piece may then fit somewhere it does not belong; a long
        // hunk is found by its two ends instead (below).
        if !strict { patchSplitMax(&patches, keepingPairs: false) }
        // delta keeps track of the offset between the expected and actual location of the
        // previous patch: if there are patches expected at positions 10 and 20, but the first
        // was found at 12, delta is 2 and the second patch has an effective expected
        // position of 22.
        var delta = 0
        var results = [Bool](repeating: false, count: patches.count)
        for (x, patch) in patches.enumerated() {
            let expectedLoc = patch.start2 + delta
            if let until, ContinuousClock.now > until {
                // Out of time: this hunk and the ones after it are left out.
                results[x] = false
                delta -= patch.length2 - patch.length1
                continue
            }
            let text1 = self.text1(patch.diffs)
            let startLoc: Int
            let endLoc: Int
            (startLoc, endLoc) = text.withUnsafeBufferPointer { textUnits in
                text1.withUnsafeBufferPointer { t1 in
                    if t1.count > maxBits {
                        // Long patch: match its start and its end separately.
                        var start = matchMain(textUnits, t1.sub(0, maxBits), expectedLoc)
                        var end = -1
                        if start != -1 {
                            end = matchMain(textUnits, t1.sub(t1.count - maxBits), expectedLoc + t1.count - maxBits)
                            if end == -1 || start >= end {
                                // Can't find a valid trailing context: drop this patch.
                                start = -1
                            }
                        }
                        return (start, end)
                    }
                    return (matchMain(textUnits, t1, expectedLoc), -1)
                }
            }
            if startLoc == -1 {
                // No match found.
                results[x] = false
                // Subtract the delta for this failed patch from subsequent patches.
                delta -= patch.length2 - patch.length1
                continue
            }
            // Found a match.
            results[x] = true
            delta = startLoc - expectedLoc
            let end = min(endLoc == -1 ? startLoc + text1.count : endLoc + maxBits, text.count)
            let text2 = Array(text[startLoc..<max(startLoc, end)])
            if text1 == text2 {
                // Perfect match, just shove the replacement text in.
                text.replaceSubrange(startLoc..<min(startLoc + text1.count, text.count), with: self.text2(patch.diffs))
                continue
            }
            // Imperfect match. Run a diff to get a framework of equivalent indices.
            var diffs = diffMain(text1, text2, checkLines: false, deadline: earliest(defaultDeadline, until))
            if text1.count > maxBits
                && Double(levenshtein(diffs)) / Double(text1.count) > configuration.patchDeleteThreshold
            {
                // The end points match, but the content is unacceptably bad.
                results[x] = false
                continue
            }
            cleanupSemanticLossless(&diffs)
            if strict {
                var trial = text
                guard applyEdits(patch.diffs, diffs, at: startLoc, to: &trial, keepingPairs: keepingPairs, strict: true)
                else {
                    // An edit would take or split text it did not know: leave the hunk out.
                    results[x] = false
                    delta -= patch.length2 - patch.length1
                    continue
                }
                text = trial
            } else {
                applyEdits(patch.diffs, diffs, at: startLoc, to: &text, keepingPairs: keepingPairs)
            }
        }
        // Strip the padding off.
        let strip = min(nullPadding.count, text.count / 2)
        return (Array(text[strip..<(text.count - strip)]), results)
    }

    /// Whitespace, a control character (the patch padding is made of those) or a separator.
    static func isWordBoundary(_ unit: UInt16) -> Bool {
        switch unit {
        case 0...0x20, 0x85, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000: true
        default: false
        }
    }

    /// The edits of one hunk applied at `startLoc`, positions mapped through `diffs` (from the
    /// hunk's expected text to the text found there), as the reference's `patch_apply`.
    /// With `strict`, stops and returns false (`text` then partly edited) at a deletion that
    /// would remove anything but the text it deleted in the expected text, and at an insertion
    /// that would go inside a word of the found text where the expected text had a word
    /// boundary.
    @discardableResult
    private func applyEdits(
        _ edits: [UDiff], _ diffs: [UDiff], at startLoc: Int, to text: inout [UInt16], keepingPairs: Bool,
        strict: Bool = false
    ) -> Bool {
        var index1 = 0
        var index2 = 0
        // Strict: the hunk's expected text, which of its units the found text changed, and
        // where in it the edit now stands.
        let expectedText: [UInt16] = strict ? edits.filter { $0.op != .insert }.flatMap(\.text) : []
        var changed: [Bool] = []
        if strict {
            for diff in diffs where diff.op != .insert {
                changed += [Bool](repeating: diff.op == .delete, count: diff.text.count)
            }
        }
        var expected = 0
        // Strict: what this hunk's edits have added to the text so far, less what they removed.
        var shift = 0
        // Strict: where the run of edits (deletions and insertions between two equalities) the
        // current edit belongs to begins and ends in the expected text: the boundaries an
        // insertion of it must not glue across are around the whole run.
        var runStart = 0
        var runEnd = 0
        for (e, mod) in edits.enumerated() {
            if strict && mod.op != .equal && (e == 0 || edits[e - 1].op == .equal) {
                runStart = expected
                runEnd = expected
                for next in edits[e...] {
                    if next.op == .equal { break }
                    if next.op == .delete { runEnd += next.text.count }
                }
            }
            // Strict: an edit's place is its place in the expected text, mapped, plus what the
            // hunk changed before it. The reference maps `index1`, which counts the insertions,
            // through a mapping of the expected text only: past the found text's end it can land
            // a unit short and glue an insertion onto a word (the web simulation, seed 5248).
            if mod.op != .equal {
                index2 = strict ? xIndex(diffs, expected) + shift : xIndex(diffs, index1)
            }
            if strict && mod.op == .insert {
                // Where the text before it is still as it was, and not inside a new word.
                if expected > 0 && expected <= changed.count && changed[expected - 1] { return false }
                let at = min(startLoc + index2, text.count)
                let splitsWord =
                    at > 0 && at < text.count && !Self.isWordBoundary(text[at - 1]) && !Self.isWordBoundary(text[at])
                let wasInWord =
                    expected > 0 && expected < expectedText.count
                    && !Self.isWordBoundary(expectedText[expected - 1]) && !Self.isWordBoundary(expectedText[expected])
                if splitsWord && !wasInWord { return false }
                // Nor glued onto a word on a side where the expected text had a boundary.
                let gluesBefore =
                    at > 0 && !mod.text.isEmpty && runStart > 0 && Self.isWordBoundary(expectedText[runStart - 1])
                    && !Self.isWordBoundary(text[at - 1]) && !Self.isWordBoundary(mod.text[0])
                let gluesAfter =
                    at < text.count && !mod.text.isEmpty && runEnd < expectedText.count
                    && Self.isWordBoundary(expectedText[runEnd])
                    && !Self.isWordBoundary(text[at]) && !Self.isWordBoundary(mod.text[mod.text.count - 1])
                if gluesBefore || gluesAfter { return false }
            }
            if strict && mod.op == .delete {
                // Only text that is still exactly as it was.
                if changed[min(expected, changed.count)..<min(expected + mod.text.count, changed.count)].contains(true)
                {
                    return false
                }
            }
            if mod.op != .insert { expected += mod.text.count }
            if mod.op == .insert {
                var at = min(startLoc + index2, text.count)
                if keepingPairs && insidePair(text, at) { at -= 1 }
                text.insert(contentsOf: mod.text, at: at)
                shift += mod.text.count
            } else if mod.op == .delete {
                var from = min(startLoc + index2, text.count)
                let end = strict ? xIndex(diffs, expected) + shift : xIndex(diffs, index1 + mod.text.count)
                var to = min(max(from, startLoc + end), text.count)
                if keepingPairs && insidePair(text, from) { from += 1 }
                if keepingPairs && insidePair(text, to) { to -= 1 }
                if strict && !text[from..<to].elementsEqual(mod.text) { return false }
                if from < to {
                    text.removeSubrange(from..<to)
                    shift -= to - from
                }
            }
            if mod.op != .delete {
                index1 += mod.text.count
            }
        }
        return true
    }
}

/// The earlier of two deadlines, nil meaning never.
func earliest(_ a: ContinuousClock.Instant?, _ b: ContinuousClock.Instant?) -> ContinuousClock.Instant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}
