import Foundation
import NotedCore
import TestSupport

/// Random texts and edited copies of them, for the randomised and differential suites.
///
/// Texts are built from Unicode scalars, so they are always valid; edits are made on scalars
/// of the same alphabet, which keeps two texts similar enough for interesting diffs.
/// No alphabet contains U+FFFD, so a replacement character in any output means a split pair.
enum RandomText {
    enum Kind: String, CaseIterable, Sendable {
        /// Printable ASCII, with spaces and newlines.
        case ascii
        /// The Basic Multilingual Plane beyond ASCII: accents, CJK, symbols, controls.
        case bmp
        /// Emoji and other astral characters mixed with ASCII, including neighbours that share a
        /// high or a low surrogate.
        case emoji
        /// Lines of words, as in notes.
        case lines

        /// Whether the kind's texts stay in the Basic Multilingual Plane (as the Python port
        /// needs: it counts code points, the reference counts UTF-16 code units).
        var isBMPOnly: Bool { self != .emoji }
    }

    static let asciiAlphabet: [Unicode.Scalar] = Array(
        "abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789 .,;:!?-_'\"()[]{}%+=/\\#&*<>~`@$^|\t\n".unicodeScalars)

    static let bmpAlphabet: [Unicode.Scalar] = Array(
        "aeiou xyz.é ñ ü ß Ω λ д ж 中 文 字 日 本 € ‰ → ∑ \u{00A0}\u{0301}\u{200D}\u{2028}\u{FEFF}\u{0000}\u{0001}\u{007F}\u{E000}\u{FFFF}\n"
            .unicodeScalars)

    /// Astral characters chosen to share surrogates: U+1F600…U+1F602 share their high
    /// surrogate, U+1F200/U+1F600/U+1D600 share their low surrogate.
    static let emojiAlphabet: [Unicode.Scalar] = Array("ab c\n😀😁😂🈀𝘀🙂👍🏽🇫🇷🇫🇮\u{200D}👨👩𝒜𠀋\u{10FFFF}\u{10000}é".unicodeScalars)

    static let words = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "note", "sync", "edit", "merge",
        "- [ ] todo", "# Heading", "", "  indented", "café", "naïve", "日本語",
    ]

    static func alphabet(for kind: Kind) -> [Unicode.Scalar] {
        switch kind {
        case .ascii: asciiAlphabet
        case .bmp: bmpAlphabet
        case .emoji: emojiAlphabet
        case .lines: asciiAlphabet
        }
    }

    static func text(_ scalars: [Unicode.Scalar]) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    /// A random text of the given kind, up to about `maxLength` scalars.
    static func make(_ kind: Kind, maxLength: Int, using random: inout SplitMix64) -> String {
        if kind == .lines {
            var lines: [String] = []
            for _ in 0..<random.int(in: 0...max(1, maxLength / 12)) {
                let count = random.int(in: 0...6)
                lines.append((0..<count).map { _ in random.pick(words) }.joined(separator: " "))
            }
            return lines.joined(separator: "\n") + (random.chance(1, in: 2) ? "\n" : "")
        }
        let alphabet = alphabet(for: kind)
        return text((0..<random.int(in: 0...maxLength)).map { _ in random.pick(alphabet) })
    }

    /// A copy of `text` with a few random edits: insertions, deletions, replacements, and for
    /// line texts whole lines moved, added or dropped.
    static func edit(_ original: String, _ kind: Kind, using random: inout SplitMix64) -> String {
        if kind == .lines, random.chance(1, in: 2) {
            var lines = original.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for _ in 0..<random.int(in: 1...4) {
                let index = random.int(in: 0...lines.count)
                switch random.int(in: 0..<3) {
                case 0: lines.insert(make(.lines, maxLength: 12, using: &random).trimmingNewlines, at: index)
                case 1 where index < lines.count: lines.remove(at: index)
                default:
                    if index < lines.count {
                        lines[index] = edit(lines[index], .ascii, using: &random)
                    }
                }
            }
            return lines.joined(separator: "\n")
        }
        let alphabet = alphabet(for: kind)
        var scalars = Array(original.unicodeScalars)
        let edits = random.chance(1, in: 10) ? 0 : random.int(in: 1...6)
        for _ in 0..<edits {
            let position = random.int(in: 0...scalars.count)
            let length = random.int(in: 1...8)
            let replacement = (0..<random.int(in: 0...length)).map { _ in random.pick(alphabet) }
            switch random.int(in: 0..<3) {
            case 0:
                scalars.insert(contentsOf: replacement, at: position)
            case 1:
                scalars.removeSubrange(position..<min(scalars.count, position + length))
            default:
                scalars.replaceSubrange(position..<min(scalars.count, position + length), with: replacement)
            }
        }
        if random.chance(1, in: 20) {
            // Sometimes a completely different text.
            return make(kind, maxLength: max(8, scalars.count), using: &random)
        }
        return text(scalars)
    }

    /// A random pair: a text and an edited copy (or, rarely, the same text or an empty one).
    static func pair(_ kind: Kind, maxLength: Int, using random: inout SplitMix64) -> (String, String) {
        let a = make(kind, maxLength: maxLength, using: &random)
        switch random.int(in: 0..<40) {
        case 0: return (a, a)
        case 1: return (a, "")
        case 2: return ("", a)
        default: return (a, edit(a, kind, using: &random))
        }
    }
}

extension String {
    fileprivate var trimmingNewlines: String { replacingOccurrences(of: "\n", with: " ") }
}
