import Testing

@testable import DiffMatchPatch

/// Emoji and other astral characters at the edges of diffs and hunks: no output ever splits a
/// surrogate pair, where the reference would (it then throws `URIError` on encoding).
struct UnicodeSafetyTests {
    let dmp = DiffMatchPatch.with { $0.diffTimeout = 0 }

    /// Pairs whose code-unit diff would cut through a surrogate pair.
    static let edgePairs: [(String, String)] = [
        // Same high surrogate (U+1F600, U+1F601).
        ("😀", "😁"),
        ("a😀b", "a😁b"),
        ("😀😀😀", "😀😁😀"),
        // Same low surrogate (U+1F200, U+1F600, U+1D600).
        ("🈀", "😀"),
        ("x🈀", "y😀"),
        ("𝘀z", "😀z"),
        // Insertions and deletions next to astral characters.
        ("😀", "😀😀"),
        ("😀😀", "😀"),
        ("ab", "a😀b"),
        ("a😀b", "ab"),
        ("😀", ""),
        ("", "😀"),
        // Flags (regional indicators share a high surrogate), skin tones, ZWJ sequences.
        ("🇫🇷", "🇫🇮"),
        ("I 🇫🇷 it", "I 🇫🇮 it"),
        ("👍", "👍🏽"),
        ("👨‍👩‍👧", "👨‍👩‍👦"),
        ("𝒜𝒝𝒞", "𝒜𝒞"),
        ("\u{10000}\u{10FFFF}", "\u{10FFFF}\u{10000}"),
        // Around the patch margin: an astral character four code units from an edit.
        ("😀a😀x😀a😀", "😀a😀y😀a😀"),
        ("abc😀xabc😀", "abc😀yabc😀"),
        ("x😀abcd", "y😀abcd"),
        ("abcd😀x", "abcd😀y"),
        ("a😀😀😀x😀😀😀a", "a😀😀😀y😀😀😀a"),
        (
            String(repeating: "😀", count: 40),
            String(repeating: "😀", count: 20) + "😁" + String(repeating: "😀", count: 19)
        ),
        (
            String(repeating: "a😀", count: 30),
            String(repeating: "a😀", count: 15) + "b😁" + String(repeating: "a😀", count: 14)
        ),
    ]

    @Test(arguments: edgePairs)
    func noOutputSplitsASurrogatePair(text1: String, text2: String) {
        let problems = roundTripProblems(dmp, text1, text2)
        #expect(problems.isEmpty, "\(text1.debugDescription) → \(text2.debugDescription): \(problems)")
    }

    @Test func diffOfAstralCharactersSharingAHighSurrogateKeepsThemWhole() {
        #expect(dmp.diff("a😀b", "a😁b", checkLines: false) == [eq("a"), del("😀"), ins("😁"), eq("b")])
        #expect(dmp.toDelta(dmp.diff("a😀b", "a😁b", checkLines: false)) == "=1\t-2\t+%F0%9F%98%81\t=1")
    }

    @Test func diffOfAstralCharactersSharingALowSurrogateKeepsThemWhole() {
        #expect(dmp.diff("x🈀", "x😀", checkLines: false) == [eq("x"), del("🈀"), ins("😀")])
    }

    /// An edit at every offset from an astral character, so that every patch margin and every
    /// context boundary lands once on each half of the pair.
    @Test func patchContextNeverSplitsAPairAtAnyOffset() {
        for before in 0..<10 {
            for after in 0..<10 {
                for emojiCount in 1...3 {
                    let left = String(repeating: "ab", count: before / 2) + (before % 2 == 1 ? "c" : "")
                    let right = String(repeating: "de", count: after / 2) + (after % 2 == 1 ? "f" : "")
                    let astral = String(repeating: "😀", count: emojiCount)
                    for (text1, text2) in [
                        (astral + left + "x" + right + astral, astral + left + "y" + right + astral),
                        (left + astral + "x" + astral + right, left + astral + "y" + astral + right),
                        (left + astral + right, left + right),
                        (left + right, left + astral + right),
                        (
                            astral + left + astral + "x" + astral + right + astral,
                            astral + left + astral + astral + right + astral
                        ),
                    ] {
                        let problems = roundTripProblems(dmp, text1, text2)
                        #expect(problems.isEmpty, "\(text1.debugDescription) → \(text2.debugDescription): \(problems)")
                    }
                }
            }
        }
    }

    @Test(arguments: [2, 3, 4, 5, 6, 7, 8])
    func patchAddContextNeverSplitsAPairWithAnyMargin(margin: Int) {
        let dmp = DiffMatchPatch.with {
            $0.diffTimeout = 0
            $0.patchMargin = margin
        }
        for shift in 0..<6 {
            let filler = String(repeating: "·", count: shift)
            let text1 = "😀😀😀" + filler + "😀x😀" + filler + "😀😀😀"
            let text2 = "😀😀😀" + filler + "😀y😀" + filler + "😀😀😀"
            let problems = roundTripProblems(dmp, text1, text2)
            #expect(problems.isEmpty, "margin \(margin), \(text1.debugDescription): \(problems)")
        }
    }

    @Test func patchSplitMaxNeverSplitsAPairInLongAstralHunks() {
        for offset in 0..<4 {
            let prefix = String(repeating: "a", count: offset)
            let text1 = prefix + String(repeating: "😀", count: 60)
            let text2 = prefix + String(repeating: "😁", count: 60)
            var patches = dmp.patchMake(text1, text2)
            dmp.patchSplitMax(&patches)
            let text = dmp.patchToText(patches)
            #expect(escapedSurrogateProblems(text).isEmpty, "offset \(offset): \(text)")
            for patch in patches {
                #expect(
                    !patch.diffs.contains { $0.text.contains(replacementCharacter) }, "offset \(offset): \(patch.diffs)"
                )
            }
            #expect(dmp.patchApply(patches, to: text1).text == text2, "offset \(offset)")
        }
    }

    @Test func prettyHTMLOfAstralEditsKeepsCharactersWhole() {
        let html = dmp.prettyHTML(dmp.diff("a😀b", "a😁b", checkLines: false))
        #expect(!html.contains(replacementCharacter))
        #expect(html.contains("😀") && html.contains("😁"))
    }
}
