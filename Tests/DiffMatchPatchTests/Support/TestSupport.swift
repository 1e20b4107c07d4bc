import Foundation
import Testing

@testable import DiffMatchPatch

/// An equality, in the short form the tables below read best with.
func eq(_ text: String) -> Diff { Diff(.equal, text) }
/// A deletion.
func del(_ text: String) -> Diff { Diff(.delete, text) }
/// An insertion.
func ins(_ text: String) -> Diff { Diff(.insert, text) }

extension DiffMatchPatch {
    /// A `DiffMatchPatch` whose default configuration is changed by `configure`.
    static func with(_ configure: (inout Configuration) -> Void) -> DiffMatchPatch {
        var configuration = Configuration()
        configure(&configuration)
        return DiffMatchPatch(configuration: configuration)
    }
}

/// The two texts a list of diffs was made from (the reference's `diff_rebuildtexts`).
func rebuildTexts(_ diffs: [Diff]) -> [String] {
    var text1 = ""
    var text2 = ""
    for diff in diffs {
        if diff.operation != .insert { text1 += diff.text }
        if diff.operation != .delete { text2 += diff.text }
    }
    return [text1, text2]
}

/// A string made of the given UTF-16 code units (which must not hold a lone surrogate).
func string(utf16 units: [UInt16]) -> String {
    String(decoding: units, as: UTF16.self)
}

extension UInt16 {
    var isHighSurrogate: Bool { self & 0xFC00 == 0xD800 }
    var isLowSurrogate: Bool { self & 0xFC00 == 0xDC00 }
}

/// Whether cutting `units` at `offset` would separate the two halves of a surrogate pair.
func splitsSurrogatePair(_ units: [UInt16], at offset: Int) -> Bool {
    offset > 0 && offset < units.count && units[offset - 1].isHighSurrogate && units[offset].isLowSurrogate
}

/// The replacement character: a Swift `String` built from half a surrogate pair shows one.
let replacementCharacter: Character = "\u{FFFD}"

/// Where a delta cuts the source text: the offset after every `=n` and `-n` (and before each).
///
/// Returns `nil` when the delta cannot be read as such.
func deltaCutOffsets(_ delta: String) -> [Int]? {
    var offsets: [Int] = [0]
    var position = 0
    for token in delta.split(separator: "\t", omittingEmptySubsequences: true) {
        guard let op = token.first else { continue }
        switch op {
        case "=", "-":
            guard let n = Int(token.dropFirst()) else { return nil }
            position += n
            offsets.append(position)
        case "+":
            continue
        default:
            return nil
        }
    }
    return offsets
}

/// Problems a serialized output shows when it split a surrogate pair, described for a failure
/// message; empty when it did not.
///
/// Escaped text is checked for the UTF-8 of a surrogate (`%ED%A0`…`%ED%BF`) and for an escaped
/// replacement character (`%EF%BF%BD`), which is what a port writes for half a pair; the
/// inputs of these tests never contain U+FFFD themselves.
func escapedSurrogateProblems(_ text: String) -> [String] {
    var problems: [String] = []
    let upper = text.uppercased()
    for prefix in ["%ED%A", "%ED%B"] where upper.contains(prefix) {
        problems.append("escaped surrogate \(prefix)… in \(text.debugDescription)")
    }
    if upper.contains("%EF%BF%BD") {
        problems.append("escaped U+FFFD in \(text.debugDescription)")
    }
    if text.contains(replacementCharacter) {
        problems.append("U+FFFD in \(text.debugDescription)")
    }
    return problems
}

/// Problems of a delta of `text1` that split a surrogate pair; empty when it does not.
func deltaSurrogateProblems(_ delta: String, text1: String) -> [String] {
    var problems = escapedSurrogateProblems(delta)
    let units = Array(text1.utf16)
    guard let offsets = deltaCutOffsets(delta) else {
        return problems + ["delta does not parse: \(delta.debugDescription)"]
    }
    for offset in offsets where splitsSurrogatePair(units, at: offset) {
        problems.append("delta cuts text1 at \(offset), inside a surrogate pair")
    }
    return problems
}

/// The header numbers of every hunk of a patch text: (start1, length1, start2, length2), with
/// starts zero-based as in `Patch`.
func patchHeaders(_ text: String) -> [(start1: Int, length1: Int, start2: Int, length2: Int)] {
    func coords(_ field: Substring) -> (Int, Int)? {
        let parts = field.dropFirst().split(separator: ",", omittingEmptySubsequences: false)
        guard let first = parts.first, let start = Int(first) else { return nil }
        if parts.count == 1 { return (start - 1, 1) }
        guard parts.count == 2, let length = Int(parts[1]) else { return nil }
        return length == 0 ? (start, 0) : (start - 1, length)
    }
    var headers: [(Int, Int, Int, Int)] = []
    for line in text.split(separator: "\n") where line.hasPrefix("@@ ") {
        let fields = line.split(separator: " ")
        guard fields.count == 4, let a = coords(fields[1]), let b = coords(fields[2]) else { continue }
        headers.append((a.0, a.1, b.0, b.1))
    }
    return headers
}

/// Problems of patches made by `patchMake(text1, text2)` and of their text that split a
/// surrogate pair; empty when they do not.
///
/// Hunk boundaries are checked against `text2` for `start2` (which counts in the result text)
/// and against `text1` for the first hunk's `start1` (later hunks' `start1` count in the text
/// with the earlier hunks applied). A hunk's trailing context comes from the text before later
/// hunks, so its content need not be found at `start2`.
func patchSurrogateProblems(_ patches: [Patch], patchText: String, text1: String, text2: String) -> [String] {
    var problems = escapedSurrogateProblems(patchText)
    let units1 = Array(text1.utf16)
    let units2 = Array(text2.utf16)
    for (index, patch) in patches.enumerated() {
        for diff in patch.diffs where diff.text.contains(replacementCharacter) {
            problems.append("hunk \(index) has U+FFFD in \(diff)")
        }
        let end2 = patch.start2 + patch.length2
        for offset in [patch.start2, end2] where splitsSurrogatePair(units2, at: offset) {
            problems.append("hunk \(index) cuts text2 at \(offset), inside a surrogate pair")
        }
        if index == 0 {
            for offset in [patch.start1, patch.start1 + patch.length1] where splitsSurrogatePair(units1, at: offset) {
                problems.append("hunk 0 cuts text1 at \(offset), inside a surrogate pair")
            }
        }
    }
    return problems
}

extension DiffMatchPatch {
    /// Line mode's encoding of two texts, as the reference's `diff_linesToChars_` on strings.
    func linesToChars(_ text1: String, _ text2: String) -> (chars1: [UInt16], chars2: [UInt16], lineArray: [[UInt16]]) {
        linesToChars(Array(text1.utf16), Array(text2.utf16))
    }

    /// Line mode's decoding, as the reference's `diff_charsToLines_` on diffs of strings.
    func charsToLines(_ diffs: inout [Diff], _ lineArray: [[UInt16]]) {
        var units = diffs.map(\.udiff)
        charsToLines(&units, lineArray)
        diffs = units.map(Diff.init)
    }
}
