/// A small, fast, seedable random number generator, so that whatever uses it (backoff jitter,
/// randomised tests, the simulation) replays exactly from a seed.
///
/// The algorithm is Steele, Lea and Flood's SplitMix64. The helpers draw numbers with their own
/// arithmetic rather than the standard library's `random(in:using:)`, whose way of consuming the
/// generator is not part of its contract.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `range` (the tiny modulo bias does not matter here).
    public mutating func int(in range: Range<Int>) -> Int {
        precondition(!range.isEmpty)
        return range.lowerBound + Int(next() % UInt64(range.count))
    }

    /// A number in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        int(in: range.lowerBound..<(range.upperBound + 1))
    }

    /// True with probability `numerator / denominator`.
    public mutating func chance(_ numerator: Int, in denominator: Int) -> Bool {
        int(in: 0..<denominator) < numerator
    }

    /// One element of a non-empty collection.
    public mutating func pick<C: Collection>(_ elements: C) -> C.Element {
        let offset = int(in: 0..<elements.count)
        return elements[elements.index(elements.startIndex, offsetBy: offset)]
    }
}
