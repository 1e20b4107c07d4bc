/// The diff algorithm on UTF-16 units: a faithful port of the reference's `diff_main` and
/// its helpers, so that the same inputs give the same diffs.
extension DiffMatchPatch {
    typealias Deadline = ContinuousClock.Instant?

    func diffMain(_ text1: [UInt16], _ text2: [UInt16], checkLines: Bool, deadline: Deadline) -> [UDiff] {
        withUnits(text1, text2) { diffMain($0, $1, checkLines: checkLines, deadline: deadline) }
    }

    func diffMain(_ text1: Units, _ text2: Units, checkLines: Bool, deadline: Deadline) -> [UDiff] {
        if same(text1, text2) {
            return text1.isEmpty ? [] : [UDiff(.equal, text1.array)]
        }
        let prefixLength = commonPrefix(text1, text2)
        let prefix = text1.sub(0, prefixLength)
        var a = text1.sub(prefixLength)
        var b = text2.sub(prefixLength)
        let suffixLength = commonSuffix(a, b)
        let suffix = a.sub(a.count - suffixLength)
        a = a.sub(0, a.count - suffixLength)
        b = b.sub(0, b.count - suffixLength)

        var diffs = diffCompute(a, b, checkLines: checkLines, deadline: deadline)
        if !prefix.isEmpty { diffs.insert(UDiff(.equal, prefix.array), at: 0) }
        if !suffix.isEmpty { diffs.append(UDiff(.equal, suffix.array)) }
        cleanupMerge(&diffs)
        return diffs
    }

    private func diffCompute(_ text1: Units, _ text2: Units, checkLines: Bool, deadline: Deadline) -> [UDiff] {
        if text1.isEmpty { return [UDiff(.insert, text2.array)] }
        if text2.isEmpty { return [UDiff(.delete, text1.array)] }

        let longFirst = text1.count > text2.count
        let longText = longFirst ? text1 : text2
        let shortText = longFirst ? text2 : text1
        let i = Search.indexOf(longText, shortText)
        if i != -1 {
            let op: Diff.Operation = longFirst ? .delete : .insert
            return [
                UDiff(op, longText.sub(0, i).array),
                UDiff(.equal, shortText.array),
                UDiff(op, longText.sub(i + shortText.count).array),
            ]
        }
        if shortText.count == 1 {
            return [UDiff(.delete, text1.array), UDiff(.insert, text2.array)]
        }
        if let hm = halfMatch(text1, text2) {
            var diffs = diffMain(hm.text1A, hm.text2A, checkLines: checkLines, deadline: deadline)
            diffs.append(UDiff(.equal, hm.common.array))
            diffs.append(contentsOf: diffMain(hm.text1B, hm.text2B, checkLines: checkLines, deadline: deadline))
            return diffs
        }
        if checkLines && text1.count > 100 && text2.count > 100 {
            return diffLineMode(text1, text2, deadline: deadline)
        }
        return bisect(text1, text2, deadline: deadline)
    }

    /// A quick line-level diff, then a character diff of the replaced blocks.
    private func diffLineMode(_ text1: Units, _ text2: Units, deadline: Deadline) -> [UDiff] {
        let (chars1, chars2, lineArray) = linesToChars(text1, text2)
        var diffs = diffMain(chars1, chars2, checkLines: false, deadline: deadline)
        charsToLines(&diffs, lineArray)
        cleanupSemantic(&diffs)

        // Rediff each replacement block character by character.
        diffs.append(UDiff(.equal, []))
        var pointer = 0
        var countDelete = 0
        var countInsert = 0
        var textDelete: [UInt16] = []
        var textInsert: [UInt16] = []
        while pointer < diffs.count {
            switch diffs[pointer].op {
            case .insert:
                countInsert += 1
                textInsert += diffs[pointer].text
            case .delete:
                countDelete += 1
                textDelete += diffs[pointer].text
            case .equal:
                if countDelete >= 1 && countInsert >= 1 {
                    let start = pointer - countDelete - countInsert
                    diffs.removeSubrange(start..<pointer)
                    pointer = start
                    let sub = diffMain(textDelete, textInsert, checkLines: false, deadline: deadline)
                    diffs.insert(contentsOf: sub, at: pointer)
                    pointer += sub.count
                }
                countInsert = 0
                countDelete = 0
                textDelete.removeAll(keepingCapacity: true)
                textInsert.removeAll(keepingCapacity: true)
            }
            pointer += 1
        }
        diffs.removeLast()
        return diffs
    }

    /// Myers' O(ND) bisection: finds the middle snake and recurses on both halves.
    func bisect(_ text1: Units, _ text2: Units, deadline: Deadline) -> [UDiff] {
        let length1 = text1.count
        let length2 = text2.count
        let maxD = (length1 + length2 + 1) / 2
        let vOffset = maxD
        let vLength = 2 * maxD
        var v1 = [Int](repeating: -1, count: vLength + 2)
        var v2 = [Int](repeating: -1, count: vLength + 2)
        v1[vOffset + 1] = 0
        v2[vOffset + 1] = 0
        let delta = length1 - length2
        // With an odd delta the front path collides with the reverse path.
        let front = delta % 2 != 0
        var k1start = 0
        var k1end = 0
        var k2start = 0
        var k2end = 0
        guard let t1 = text1.baseAddress, let t2 = text2.baseAddress else {
            return [UDiff(.delete, text1.array), UDiff(.insert, text2.array)]
        }
        let split: (Int, Int)? = v1.withUnsafeMutableBufferPointer { v1 in
            v2.withUnsafeMutableBufferPointer { v2 in
                var d = 0
                while d < maxD {
                    if let deadline, ContinuousClock.now > deadline { break }
                    var k1 = -d + k1start
                    while k1 <= d - k1end {
                        let k1Offset = vOffset + k1
                        var x1: Int
                        if k1 == -d || (k1 != d && v1[k1Offset - 1] < v1[k1Offset + 1]) {
                            x1 = v1[k1Offset + 1]
                        } else {
                            x1 = v1[k1Offset - 1] + 1
                        }
                        var y1 = x1 - k1
                        while x1 < length1 && y1 < length2 && t1[x1] == t2[y1] {
                            x1 += 1
                            y1 += 1
                        }
                        v1[k1Offset] = x1
                        if x1 > length1 {
                            k1end += 2
                        } else if y1 > length2 {
                            k1start += 2
                        } else if front {
                            let k2Offset = vOffset + delta - k1
                            if k2Offset >= 0 && k2Offset < vLength && v2[k2Offset] != -1 {
                                let x2 = length1 - v2[k2Offset]
                                if x1 >= x2 { return (x1, y1) }
                            }
                        }
                        k1 += 2
                    }
                    var k2 = -d + k2start
                    while k2 <= d - k2end {
                        let k2Offset = vOffset + k2
                        var x2: Int
                        if k2 == -d || (k2 != d && v2[k2Offset - 1] < v2[k2Offset + 1]) {
                            x2 = v2[k2Offset + 1]
                        } else {
                            x2 = v2[k2Offset - 1] + 1
                        }
                        var y2 = x2 - k2
                        while x2 < length1 && y2 < length2 && t1[length1 - x2 - 1] == t2[length2 - y2 - 1] {
                            x2 += 1
                            y2 += 1
                        }
                        v2[k2Offset] = x2
                        if x2 > length1 {
                            k2end += 2
                        } else if y2 > length2 {
                            k2start += 2
                        } else if !front {
                            let k1Offset = vOffset + delta - k2
                            if k1Offset >= 0 && k1Offset < vLength && v1[k1Offset] != -1 {
                                let x1 = v1[k1Offset]
                                let y1 = vOffset + x1 - k1Offset
                                if x1 >= length1 - x2 { return (x1, y1) }
                            }
                        }
                        k2 += 2
                    }
                    d += 1
                }
                return nil
            }
        }
        if let (x, y) = split {
            var diffs = diffMain(text1.sub(0, x), text2.sub(0, y), checkLines: false, deadline: deadline)
            diffs += diffMain(text1.sub(x), text2.sub(y), checkLines: false, deadline: deadline)
            return diffs
        }
        // Out of time, or no commonality at all.
        return [UDiff(.delete, text1.array), UDiff(.insert, text2.array)]
    }

    /// Maps each line of both texts to one code unit, for a line-level diff.
    func linesToChars(_ text1: Units, _ text2: Units) -> (chars1: [UInt16], chars2: [UInt16], lineArray: [[UInt16]]) {
        // Index 0 stays empty so that no line maps to U+0000, as in the reference.
        var lineArray: [[UInt16]] = [[]]
        var lineHash: [[UInt16]: Int] = [:]

        func munge(_ text: Units, maxLines: Int) -> [UInt16] {
            var chars: [UInt16] = []
            var lineStart = 0
            var lineEnd = -1
            while lineEnd < text.count - 1 {
                lineEnd = lineStart
                while lineEnd < text.count && text[lineEnd] != 0x0A { lineEnd += 1 }
                if lineEnd == text.count { lineEnd = text.count - 1 }
                var line = text.sub(lineStart, lineEnd + 1).array
                if let index = lineHash[line] {
                    chars.append(UInt16(truncatingIfNeeded: index))
                } else {
                    if lineArray.count == maxLines {
                        // Out of code units: the rest of the text is one "line".
                        line = text.sub(lineStart).array
                        lineEnd = text.count
                    }
                    chars.append(UInt16(truncatingIfNeeded: lineArray.count))
                    lineHash[line] = lineArray.count
                    lineArray.append(line)
                }
                lineStart = lineEnd + 1
            }
            return chars
        }
        let chars1 = munge(text1, maxLines: 40000)
        let chars2 = munge(text2, maxLines: 65535)
        return (chars1, chars2, lineArray)
    }

    func linesToChars(_ text1: [UInt16], _ text2: [UInt16]) -> (
        chars1: [UInt16], chars2: [UInt16], lineArray: [[UInt16]]
    ) {
        withUnits(text1, text2) { linesToChars($0, $1) }
    }

    /// Turns line-encoded diffs back into text.
    func charsToLines(_ diffs: inout [UDiff], _ lineArray: [[UInt16]]) {
        for i in diffs.indices {
            var text: [UInt16] = []
            for c in diffs[i].text where Int(c) < lineArray.count {
                text += lineArray[Int(c)]
            }
            diffs[i].text = text
        }
    }

    func commonPrefix(_ text1: Units, _ text2: Units) -> Int {
        let n = min(text1.count, text2.count)
        var i = 0
        while i < n && text1[i] == text2[i] { i += 1 }
        return i
    }

    func commonSuffix(_ text1: Units, _ text2: Units) -> Int {
        let l1 = text1.count
        let l2 = text2.count
        let n = min(l1, l2)
        var i = 0
        while i < n && text1[l1 - 1 - i] == text2[l2 - 1 - i] { i += 1 }
        return i
    }

    /// Length of the longest suffix of `text1` that is a prefix of `text2`.
    func commonOverlap(_ text1In: Units, _ text2In: Units) -> Int {
        var text1 = text1In
        var text2 = text2In
        if text1.isEmpty || text2.isEmpty { return 0 }
        if text1.count > text2.count {
            text1 = text1.sub(text1.count - text2.count)
        } else if text1.count < text2.count {
            text2 = text2.sub(0, text1.count)
        }
        let textLength = min(text1.count, text2.count)
        if same(text1, text2) { return textLength }
        var best = 0
        var length = 1
        while true {
            let pattern = text1.sub(textLength - length)
            let found = Search.indexOf(text2, pattern)
            if found == -1 { return best }
            length += found
            if found == 0 || same(text1.sub(textLength - length), text2.sub(0, length)) {
                best = length
                length += 1
            }
        }
    }

    struct HalfMatch {
        var text1A: Units
        var text1B: Units
        var text2A: Units
        var text2B: Units
        var common: Units
    }

    /// Whether the texts share a substring at least half the length of the longer one.
    /// Only used with a timeout: it can give a non-minimal diff.
    func halfMatch(_ text1: Units, _ text2: Units) -> HalfMatch? {
        if configuration.diffTimeout <= 0 { return nil }
        let longFirst = text1.count > text2.count
        let longText = longFirst ? text1 : text2
        let shortText = longFirst ? text2 : text1
        if longText.count < 4 || shortText.count * 2 < longText.count { return nil }

        func halfMatchI(_ i: Int) -> (
            longA: Units, longB: Units, shortA: Units, shortB: Units, common: Int, commonStart: Int
        )? {
            let seed = longText.sub(i, i + longText.count / 4)
            var j = -1
            var bestCommon = 0
            var best: (longA: Units, longB: Units, shortA: Units, shortB: Units, common: Int, commonStart: Int)?
            while true {
                j = Search.indexOf(shortText, seed, from: j + 1)
                if j == -1 { break }
                let prefixLength = commonPrefix(longText.sub(i), shortText.sub(j))
                let suffixLength = commonSuffix(longText.sub(0, i), shortText.sub(0, j))
                if bestCommon < suffixLength + prefixLength {
                    bestCommon = suffixLength + prefixLength
                    best = (
                        longText.sub(0, i - suffixLength), longText.sub(i + prefixLength),
                        shortText.sub(0, j - suffixLength), shortText.sub(j + prefixLength),
                        bestCommon, j - suffixLength
                    )
                }
            }
            if bestCommon * 2 >= longText.count { return best }
            return nil
        }
        // Check whether the second quarter, then the third, is the seed of a half-match.
        let hm1 = halfMatchI((longText.count + 3) / 4)
        let hm2 = halfMatchI((longText.count + 1) / 2)
        let hm: (longA: Units, longB: Units, shortA: Units, shortB: Units, common: Int, commonStart: Int)
        switch (hm1, hm2) {
        case (nil, nil): return nil
        case (let one?, nil): hm = one
        case (nil, let two?): hm = two
        case (let one?, let two?): hm = one.common > two.common ? one : two
        }
        let common = shortText.sub(hm.commonStart, hm.commonStart + hm.common)
        if longFirst {
            return HalfMatch(text1A: hm.longA, text1B: hm.longB, text2A: hm.shortA, text2B: hm.shortB, common: common)
        }
        return HalfMatch(text1A: hm.shortA, text1B: hm.shortB, text2A: hm.longA, text2B: hm.longB, common: common)
    }
}
