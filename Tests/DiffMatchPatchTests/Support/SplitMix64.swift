import Foundation

/// A small, fast, seedable random number generator, so that a randomised test replays exactly.
///
/// The algorithm is Steele, Lea and Flood's SplitMix64. The helpers below draw numbers with
/// their own arithmetic rather than the standard library's `random(in:using:)`, whose way of
/// consuming the generator is not part of its contract.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `range` (the tiny modulo bias does not matter to these tests).
    mutating func int(in range: Range<Int>) -> Int {
        precondition(!range.isEmpty)
        return range.lowerBound + Int(next() % UInt64(range.count))
    }

    /// A number in `range`.
    mutating func int(in range: ClosedRange<Int>) -> Int {
        int(in: range.lowerBound..<(range.upperBound + 1))
    }

    /// True with probability `numerator / denominator`.
    mutating func chance(_ numerator: Int, in denominator: Int) -> Bool {
        int(in: 0..<denominator) < numerator
    }

    /// One element of a non-empty collection.
    mutating func pick<C: Collection>(_ elements: C) -> C.Element {
        let offset = int(in: 0..<elements.count)
        return elements[elements.index(elements.startIndex, offsetBy: offset)]
    }
}

/// The seed of the randomised tests: `NOTED_TEST_SEED` (decimal or 0x-hex) when set, else a
/// fixed default, so that every run is reproducible and a failure names its seed.
enum TestSeed {
    static let defaultValue: UInt64 = 0x5EED_D1FF

    static let value: UInt64 = {
        guard let text = ProcessInfo.processInfo.environment["NOTED_TEST_SEED"]?
            .trimmingCharacters(in: .whitespaces), !text.isEmpty
        else { return defaultValue }
        if text.lowercased().hasPrefix("0x"), let hex = UInt64(text.dropFirst(2), radix: 16) {
            return hex
        }
        if let decimal = UInt64(text) {
            return decimal
        }
        // Any other text still gives a stable seed, so a typo does not silently change nothing.
        return text.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
    }()

    /// The generator of one test, mixed with the test's name so tests do not share streams.
    static func generator(for test: String) -> SplitMix64 {
        let salt = test.utf8.reduce(UInt64(0xCBF2_9CE4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        return SplitMix64(seed: value ^ salt)
    }

    /// What a failure message says so that the failure replays.
    static var replay: String {
        "NOTED_TEST_SEED=\(value)"
    }
}
