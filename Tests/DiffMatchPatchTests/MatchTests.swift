import Testing

@testable import DiffMatchPatch

/// The reference's match tests: the bitap alphabet, bitap with its threshold and distance,
/// and `match_main`.
struct MatchTests {
    let dmp = DiffMatchPatch()

    static func alphabet(_ pairs: [Character: UInt32]) -> [UInt16: UInt32] {
        var result: [UInt16: UInt32] = [:]
        for (character, mask) in pairs {
            result[character.utf16.first ?? 0] = mask
        }
        return result
    }

    @Test func alphabetOfUniqueCharactersHasOneBitEach() {
        #expect(dmp.matchAlphabet("abc") == Self.alphabet(["a": 4, "b": 2, "c": 1]))
    }

    @Test func alphabetOfRepeatedCharactersCombinesTheirBits() {
        #expect(dmp.matchAlphabet("abcaba") == Self.alphabet(["a": 37, "b": 18, "c": 8]))
    }

    @Test func alphabetIsKeyedByCodeUnit() {
        // An astral character is two code units, each with its own bit.
        #expect(dmp.matchAlphabet("😀") == [0xD83D: 2, 0xDE00: 1])
    }

    static func bitap(threshold: Double = 0.5, distance: Int = 100) -> DiffMatchPatch {
        DiffMatchPatch.with {
            $0.matchThreshold = threshold
            $0.matchDistance = distance
        }
    }

    @Test(
        arguments: [
            // Exact matches.
            ("abcdefghijk", "fgh", 5, 5),
            ("abcdefghijk", "fgh", 0, 5),
            // Fuzzy matches.
            ("abcdefghijk", "efxhi", 0, 4),
            ("abcdefghijk", "cdefxyhijk", 5, 2),
            ("abcdefghijk", "bxy", 1, nil),
            // Overflow.
            ("123456789xx0", "3456789x0", 2, 2),
            // Multiple select.
            ("abcdexyzabcde", "abccde", 3, 0),
            ("abcdexyzabcde", "abccde", 5, 8),
        ] as [(String, String, Int, Int?)])
    func bitapFindsTheBestFuzzyMatchNearTheLocation(text: String, pattern: String, location: Int, expected: Int?) {
        #expect(Self.bitap().matchBitap(text, pattern, location) == expected)
    }

    @Test(
        arguments: [
            (0.4, "abcdefghijk", "efxyhi", 1, 4),
            (0.3, "abcdefghijk", "efxyhi", 1, nil),
            (0.0, "abcdefghijk", "bcdef", 1, 1),
        ] as [(Double, String, String, Int, Int?)])
    func bitapHonoursTheThreshold(threshold: Double, text: String, pattern: String, location: Int, expected: Int?) {
        #expect(Self.bitap(threshold: threshold).matchBitap(text, pattern, location) == expected)
    }

    @Test(
        arguments: [
            // Strict location.
            (10, "abcdefghijklmnopqrstuvwxyz", "abcdefg", 24, nil),
            (10, "abcdefghijklmnopqrstuvwxyz", "abcdxxefg", 1, 0),
            // Loose location.
            (1000, "abcdefghijklmnopqrstuvwxyz", "abcdefg", 24, 0),
        ] as [(Int, String, String, Int, Int?)])
    func bitapHonoursTheDistance(distance: Int, text: String, pattern: String, location: Int, expected: Int?) {
        #expect(Self.bitap(distance: distance).matchBitap(text, pattern, location) == expected)
    }

    @Test(
        arguments: [
            // Shortcut matches.
            ("abcdef", "abcdef", 1000, 0),
            ("", "abcdef", 1, nil),
            ("abcdef", "", 3, 3),
            ("abcdef", "de", 3, 3),
            // Beyond end match.
            ("abcdef", "defy", 4, 3),
            // Oversized pattern.
            ("abcdef", "abcdefy", 0, 0),
            // Complex match.
            ("I am the very model of a modern major general.", " that berry ", 5, 4),
        ] as [(String, String, Int, Int?)])
    func matchFindsThePatternNearTheLocation(text: String, pattern: String, location: Int, expected: Int?) {
        #expect(dmp.match(text, pattern, location) == expected)
    }

    @Test func matchClampsALocationOutsideTheText() {
        #expect(dmp.match("abcdef", "", 100) == 6)
        #expect(dmp.match("abcdef", "", -5) == 0)
        #expect(dmp.match("abcdef", "ef", 1000) == 4)
    }

    @Test func matchCountsInCodeUnits() {
        #expect(dmp.match("😀😀abc", "abc", 0) == 4)
        #expect(dmp.match("a😀bc", "bc", 0) == 3)
    }
}
