/// The reference's cleanups on UTF-16 diffs, step for step.
extension DiffMatchPatch {
    /// Reorders and merges like edit sections and factors out common prefixes and suffixes.
    func cleanupMerge(_ diffs: inout [UDiff]) {
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
                pointer += 1
            case .delete:
                countDelete += 1
                textDelete += diffs[pointer].text
                pointer += 1
            case .equal:
                if countDelete + countInsert > 1 {
                    if countDelete != 0 && countInsert != 0 {
                        var common = withUnits(textInsert, textDelete) { commonPrefix($0, $1) }
                        if common != 0 {
                            let before = pointer - countDelete - countInsert
                            if before > 0 && diffs[before - 1].op == .equal {
                                diffs[before - 1].text += textInsert[0..<common]
                            } else {
                                diffs.insert(UDiff(.equal, textInsert[0..<common]), at: 0)
                                pointer += 1
                            }
                            textInsert.removeFirst(common)
                            textDelete.removeFirst(common)
                        }
                        common = withUnits(textInsert, textDelete) { commonSuffix($0, $1) }
                        if common != 0 {
                            diffs[pointer].text =
                                Array(textInsert[(textInsert.count - common)...]) + diffs[pointer].text
                            textInsert.removeLast(common)
                            textDelete.removeLast(common)
                        }
                    }
                    pointer -= countDelete + countInsert
                    diffs.removeSubrange(pointer..<(pointer + countDelete + countInsert))
                    if !textDelete.isEmpty {
                        diffs.insert(UDiff(.delete, textDelete), at: pointer)
                        pointer += 1
                    }
                    if !textInsert.isEmpty {
                        diffs.insert(UDiff(.insert, textInsert), at: pointer)
                        pointer += 1
                    }
                    pointer += 1
                } else if pointer != 0 && diffs[pointer - 1].op == .equal {
                    diffs[pointer - 1].text += diffs[pointer].text
                    diffs.remove(at: pointer)
                } else {
                    pointer += 1
                }
                countInsert = 0
                countDelete = 0
                textDelete = []
                textInsert = []
            }
        }
        if diffs.last?.text.isEmpty == true {
            diffs.removeLast()
        }

        // Second pass: single edits surrounded by equalities that can be shifted sideways to
        // eliminate an equality, e.g. A<ins>BA</ins>C -> <ins>AB</ins>AC.
        var changes = false
        pointer = 1
        while pointer < diffs.count - 1 {
            if diffs[pointer - 1].op == .equal && diffs[pointer + 1].op == .equal {
                let previous = diffs[pointer - 1].text
                let edit = diffs[pointer].text
                let next = diffs[pointer + 1].text
                if edit.count >= previous.count && edit[(edit.count - previous.count)...].elementsEqual(previous) {
                    // Shift the edit over the previous equality.
                    diffs[pointer].text = previous + edit[0..<(edit.count - previous.count)]
                    diffs[pointer + 1].text = previous + next
                    diffs.remove(at: pointer - 1)
                    changes = true
                } else if edit.count >= next.count && edit[0..<next.count].elementsEqual(next) {
                    // Shift the edit over the next equality.
                    diffs[pointer - 1].text += next
                    diffs[pointer].text = Array(edit[next.count...]) + next
                    diffs.remove(at: pointer + 1)
                    changes = true
                }
            }
            pointer += 1
        }
        if changes {
            cleanupMerge(&diffs)
        }
    }

    /// Removes semantically trivial equalities, then aligns edits to word boundaries and
    /// factors out overlaps between deletions and insertions.
    func cleanupSemantic(_ diffs: inout [UDiff]) {
        var changes = false
        var equalities = EqualityStack()
        var lastEquality: [UInt16]? = nil
        var pointer = 0
        var lengthInsertions1 = 0
        var lengthDeletions1 = 0
        var lengthInsertions2 = 0
        var lengthDeletions2 = 0
        while pointer < diffs.count {
            if diffs[pointer].op == .equal {
                equalities.push(pointer)
                lengthInsertions1 = lengthInsertions2
                lengthDeletions1 = lengthDeletions2
                lengthInsertions2 = 0
                lengthDeletions2 = 0
                lastEquality = diffs[pointer].text
            } else {
                if diffs[pointer].op == .insert {
                    lengthInsertions2 += diffs[pointer].text.count
                } else {
                    lengthDeletions2 += diffs[pointer].text.count
                }
                // An equality no longer than the edits on both sides of it is eliminated.
                if let equality = lastEquality, !equality.isEmpty,
                    equality.count <= max(lengthInsertions1, lengthDeletions1),
                    equality.count <= max(lengthInsertions2, lengthDeletions2)
                {
                    let at = equalities.top
                    diffs.insert(UDiff(.delete, equality), at: at)
                    diffs[at + 1].op = .insert
                    // Throw away the equality just deleted, and the previous one: it needs
                    // reevaluating.
                    equalities.pop()
                    equalities.pop()
                    pointer = equalities.length > 0 ? equalities.top : -1
                    lengthInsertions1 = 0
                    lengthDeletions1 = 0
                    lengthInsertions2 = 0
                    lengthDeletions2 = 0
                    lastEquality = nil
                    changes = true
                }
            }
            pointer += 1
        }
        if changes {
            cleanupMerge(&diffs)
        }
        cleanupSemanticLossless(&diffs)

        // Find overlaps between deletions and insertions: <del>abcxxx</del><ins>xxxdef</ins>
        // -> <del>abc</del>xxx<ins>def</ins>, and <del>xxxabc</del><ins>defxxx</ins>
        // -> <ins>def</ins>xxx<del>abc</del>. Only when the overlap is as big as the edit
        // ahead or behind it.
        pointer = 1
        while pointer < diffs.count {
            if diffs[pointer - 1].op == .delete && diffs[pointer].op == .insert {
                let deletion = diffs[pointer - 1].text
                let insertion = diffs[pointer].text
                let (overlap1, overlap2) = withUnits(deletion, insertion) {
                    (commonOverlap($0, $1), commonOverlap($1, $0))
                }
                if overlap1 >= overlap2 {
                    if Double(overlap1) >= Double(deletion.count) / 2 || Double(overlap1) >= Double(insertion.count) / 2
                    {
                        diffs.insert(UDiff(.equal, insertion[0..<overlap1]), at: pointer)
                        diffs[pointer - 1].text = Array(deletion[0..<(deletion.count - overlap1)])
                        diffs[pointer + 1].text = Array(insertion[overlap1...])
                        pointer += 1
                    }
                } else {
                    if Double(overlap2) >= Double(deletion.count) / 2 || Double(overlap2) >= Double(insertion.count) / 2
                    {
                        diffs.insert(UDiff(.equal, deletion[0..<overlap2]), at: pointer)
                        diffs[pointer - 1] = UDiff(.insert, insertion[0..<(insertion.count - overlap2)])
                        diffs[pointer + 1] = UDiff(.delete, deletion[overlap2...])
                        pointer += 1
                    }
                }
                pointer += 1
            }
            pointer += 1
        }
    }

    /// Slides single edits surrounded by equalities to the best word or line boundary,
    /// e.g. `The c<ins>at c</ins>ame.` -> `The <ins>cat </ins>came.`
    func cleanupSemanticLossless(_ diffs: inout [UDiff]) {
        var pointer = 1
        while pointer < diffs.count - 1 {
            if diffs[pointer - 1].op == .equal && diffs[pointer + 1].op == .equal {
                var equality1 = diffs[pointer - 1].text
                var edit = diffs[pointer].text
                var equality2 = diffs[pointer + 1].text

                // First, shift the edit as far left as possible.
                let commonOffset = withUnits(equality1, edit) { commonSuffix($0, $1) }
                if commonOffset > 0 {
                    let common = Array(edit[(edit.count - commonOffset)...])
                    equality1.removeLast(commonOffset)
                    edit = common + edit[0..<(edit.count - commonOffset)]
                    equality2 = common + equality2
                }

                // Then step right one unit at a time, keeping the best fit.
                var bestEquality1 = equality1
                var bestEdit = edit
                var bestEquality2 = equality2
                var bestScore = Self.semanticScore(equality1, edit) + Self.semanticScore(edit, equality2)
                var offset2 = 0
                while !edit.isEmpty && offset2 < equality2.count && edit[0] == equality2[offset2] {
                    let unit = edit[0]
                    equality1.append(unit)
                    edit.removeFirst()
                    edit.append(equality2[offset2])
                    offset2 += 1
                    let rest = equality2[offset2...]
                    let score = Self.semanticScore(equality1, edit) + Self.semanticScore(edit, rest)
                    if score >= bestScore {
                        bestScore = score
                        bestEquality1 = equality1
                        bestEdit = edit
                        bestEquality2 = Array(rest)
                    }
                }

                if diffs[pointer - 1].text != bestEquality1 {
                    // An improvement was found: save it.
                    if !bestEquality1.isEmpty {
                        diffs[pointer - 1].text = bestEquality1
                    } else {
                        diffs.remove(at: pointer - 1)
                        pointer -= 1
                    }
                    diffs[pointer].text = bestEdit
                    if !bestEquality2.isEmpty {
                        diffs[pointer + 1].text = bestEquality2
                    } else {
                        diffs.remove(at: pointer + 1)
                        pointer -= 1
                    }
                }
            }
            pointer += 1
        }
    }

    /// How good a boundary between `one` and `two` is: 6 (text edge) down to 0 (mid-word).
    static func semanticScore<A: RandomAccessCollection, B: RandomAccessCollection>(_ one: A, _ two: B) -> Int
    where A.Element == UInt16, B.Element == UInt16 {
        guard let char1 = one.last, let char2 = two.first else { return 6 }
        let nonAlphaNumeric1 = !isAlphaNumeric(char1)
        let nonAlphaNumeric2 = !isAlphaNumeric(char2)
        let whitespace1 = nonAlphaNumeric1 && isWhitespace(char1)
        let whitespace2 = nonAlphaNumeric2 && isWhitespace(char2)
        let lineBreak1 = whitespace1 && (char1 == 0x0D || char1 == 0x0A)
        let lineBreak2 = whitespace2 && (char2 == 0x0D || char2 == 0x0A)
        let blankLine1 = lineBreak1 && endsWithBlankLine(one)
        let blankLine2 = lineBreak2 && startsWithBlankLine(two)
        if blankLine1 || blankLine2 { return 5 }
        if lineBreak1 || lineBreak2 { return 4 }
        if nonAlphaNumeric1 && !whitespace1 && whitespace2 { return 3 }
        if whitespace1 || whitespace2 { return 2 }
        if nonAlphaNumeric1 || nonAlphaNumeric2 { return 1 }
        return 0
    }

    /// `/[a-zA-Z0-9]/`
    @inline(__always)
    static func isAlphaNumeric(_ u: UInt16) -> Bool {
        (u >= 0x30 && u <= 0x39) || (u >= 0x41 && u <= 0x5A) || (u >= 0x61 && u <= 0x7A)
    }

    /// JavaScript's `/\s/`: WhiteSpace and LineTerminator code units.
    static func isWhitespace(_ u: UInt16) -> Bool {
        switch u {
        case 0x09...0x0D, 0x20, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
            return true
        default:
            return false
        }
    }

    /// `/\n\r?\n$/`
    private static func endsWithBlankLine<C: RandomAccessCollection>(_ text: C) -> Bool where C.Element == UInt16 {
        let units = Array(text.suffix(3))
        if units.count >= 2 && units[units.count - 1] == 0x0A && units[units.count - 2] == 0x0A { return true }
        return units.count == 3 && units[0] == 0x0A && units[1] == 0x0D && units[2] == 0x0A
    }

    /// `/^\r?\n\r?\n/`
    private static func startsWithBlankLine<C: RandomAccessCollection>(_ text: C) -> Bool where C.Element == UInt16 {
        var units = Array(text.prefix(4))[...]
        if units.first == 0x0D { units = units.dropFirst() }
        guard units.first == 0x0A else { return false }
        units = units.dropFirst()
        if units.first == 0x0D { units = units.dropFirst() }
        return units.first == 0x0A
    }

    /// Removes equalities that cost more to keep than to fold into the surrounding edits.
    func cleanupEfficiency(_ diffs: inout [UDiff]) {
        var changes = false
        var equalities = EqualityStack()
        var lastEquality: [UInt16]? = nil
        var pointer = 0
        var preIns = false
        var preDel = false
        var postIns = false
        var postDel = false
        let editCost = configuration.diffEditCost
        while pointer < diffs.count {
            if diffs[pointer].op == .equal {
                if diffs[pointer].text.count < editCost && (postIns || postDel) {
                    equalities.push(pointer)
                    preIns = postIns
                    preDel = postDel
                    lastEquality = diffs[pointer].text
                } else {
                    equalities.length = 0
                    lastEquality = nil
                }
                postIns = false
                postDel = false
            } else {
                if diffs[pointer].op == .delete {
                    postDel = true
                } else {
                    postIns = true
                }
                // Five kinds to split:
                // <ins>A</ins><del>B</del>XY<ins>C</ins><del>D</del>
                // <ins>A</ins>X<ins>C</ins><del>D</del>
                // <ins>A</ins><del>B</del>X<ins>C</ins>
                // <del>A</del>X<ins>C</ins><del>D</del>
                // <ins>A</ins><del>B</del>X<del>C</del>
                let sides = (preIns ? 1 : 0) + (preDel ? 1 : 0) + (postIns ? 1 : 0) + (postDel ? 1 : 0)
                if let equality = lastEquality, !equality.isEmpty,
                    (preIns && preDel && postIns && postDel)
                        || (Double(equality.count) < Double(editCost) / 2 && sides == 3)
                {
                    let at = equalities.top
                    diffs.insert(UDiff(.delete, equality), at: at)
                    diffs[at + 1].op = .insert
                    equalities.pop()
                    lastEquality = nil
                    if preIns && preDel {
                        // No changes made that could affect previous entries: keep going.
                        postIns = true
                        postDel = true
                        equalities.length = 0
                    } else {
                        equalities.pop()
                        pointer = equalities.length > 0 ? equalities.top : -1
                        postIns = false
                        postDel = false
                    }
                    changes = true
                }
            }
            pointer += 1
        }
        if changes {
            cleanupMerge(&diffs)
        }
    }
}

/// The reference's stack of equality indices, including its quirk: its length may drop below
/// zero, and later pushes then fill negative slots. Reproduced so cleanups match it exactly.
struct EqualityStack {
    private var storage: [Int: Int] = [:]
    var length = 0

    mutating func push(_ index: Int) {
        storage[length] = index
        length += 1
    }

    mutating func pop() {
        length -= 1
    }

    var top: Int { storage[length - 1] ?? -1 }
}
