/// Fuzzy matching: the reference's `match_main` and Bitap, on UTF-16 units.
extension DiffMatchPatch {
    /// The best match for `pattern` near `location` in `text`, or -1.
    func matchMain(_ text: Units, _ pattern: Units, _ location: Int) -> Int {
        let loc = max(0, min(location, text.count))
        if same(text, pattern) { return 0 }
        if text.isEmpty { return -1 }
        if loc + pattern.count <= text.count && same(text.sub(loc, loc + pattern.count), pattern) {
            return loc
        }
        if pattern.count > maxBits {
            // Beyond Bitap's reach (the reference throws): the exact occurrence nearest to loc.
            let after = Search.indexOf(text, pattern, from: loc)
            let before = Search.lastIndexOf(text, pattern, from: loc)
            switch (before, after) {
            case (-1, _): return after
            case (_, -1): return before
            default: return loc - before <= after - loc ? before : after
            }
        }
        return matchBitap(text, pattern, loc)
    }

    func matchAlphabet(_ pattern: Units) -> [UInt16: UInt32] {
        var s: [UInt16: UInt32] = [:]
        let n = pattern.count
        for (i, c) in pattern.enumerated() {
            s[c, default: 0] |= 1 &<< UInt32(truncatingIfNeeded: n - i - 1)
        }
        return s
    }

    /// Bitap: the best fuzzy match of `pattern` (at most `matchMaxBits` units) near `loc`.
    ///
    /// The bit arithmetic is 32-bit with shift counts masked, as JavaScript's, so the scores
    /// and therefore the result are the reference's.
    func matchBitap(_ text: Units, _ pattern: Units, _ loc: Int) -> Int {
        let s = matchAlphabet(pattern)
        let patternLength = pattern.count
        let threshold = configuration.matchThreshold
        let distance = configuration.matchDistance

        func score(_ e: Int, _ x: Int) -> Double {
            let accuracy = Double(e) / Double(patternLength)
            let proximity = abs(loc - x)
            if distance == 0 {
                return proximity != 0 ? 1.0 : accuracy
            }
            return accuracy + Double(proximity) / Double(distance)
        }

        var scoreThreshold = threshold
        var bestLoc = Search.indexOf(text, pattern, from: loc)
        if bestLoc != -1 {
            scoreThreshold = min(score(0, bestLoc), scoreThreshold)
            bestLoc = Search.lastIndexOf(text, pattern, from: loc + patternLength)
            if bestLoc != -1 {
                scoreThreshold = min(score(0, bestLoc), scoreThreshold)
            }
        }

        let matchmask: UInt32 = 1 &<< UInt32(truncatingIfNeeded: patternLength - 1)
        bestLoc = -1
        var binMin: Int
        var binMid: Int
        var binMax = patternLength + text.count
        var lastRd: [UInt32] = []
        var rd: [UInt32] = []
        for d in 0..<patternLength {
            // How far from loc can we stray at this error level? Binary search.
            binMin = 0
            binMid = binMax
            while binMin < binMid {
                if score(d, loc + binMid) <= scoreThreshold {
                    binMin = binMid
                } else {
                    binMax = binMid
                }
                binMid = (binMax - binMin) / 2 + binMin
            }
            binMax = binMid
            var start = max(1, loc - binMid + 1)
            let finish = min(loc + binMid, text.count) + patternLength

            rd = [UInt32](repeating: 0, count: finish + 2)
            rd[finish + 1] = (1 &<< UInt32(truncatingIfNeeded: d)) &- 1
            var j = finish
            while j >= start {
                // Past the end of the text nothing matches (the reference reads `undefined`).
                let charMatch: UInt32 = j - 1 < text.count ? (s[text[j - 1]] ?? 0) : 0
                if d == 0 {
                    rd[j] = ((rd[j + 1] &<< 1) | 1) & charMatch
                } else {
                    let last1 = j + 1 < lastRd.count ? lastRd[j + 1] : 0
                    let last0 = j < lastRd.count ? lastRd[j] : 0
                    rd[j] = (((rd[j + 1] &<< 1) | 1) & charMatch) | (((last1 | last0) &<< 1) | 1) | last1
                }
                if rd[j] & matchmask != 0 {
                    let value = score(d, j - 1)
                    if value <= scoreThreshold {
                        scoreThreshold = value
                        bestLoc = j - 1
                        if bestLoc > loc {
                            // When passing loc, don't exceed our current distance from it.
                            start = max(1, 2 * loc - bestLoc)
                        } else {
                            break
                        }
                    }
                }
                j -= 1
            }
            // No hope for a better match at greater error levels.
            if score(d + 1, loc) > scoreThreshold { break }
            lastRd = rd
        }
        return bestLoc
    }
}
