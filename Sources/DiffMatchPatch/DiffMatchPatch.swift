/// Diff, match and patch for plain text, wire-compatible with Google's diff-match-patch.
///
/// Every index and length is in UTF-16 code units, exactly as the JavaScript reference counts
/// them, so deltas, patch text and `patchApply` results are byte-identical to it for the same
/// inputs and settings. Unlike the reference, no result ever splits a surrogate pair.
///
/// ```swift
/// let dmp = DiffMatchPatch()
/// let diffs = dmp.diff("The cat sat.", "The dog sat.")
/// let delta = dmp.toDelta(diffs)                 // "=4\t-3\t+dog\t=5"
/// let patches = dmp.patchMake("The cat sat.", "The dog sat.")
/// let (text, applied) = dmp.patchApply(patches, to: "The cat sat down.")
/// ```
public struct DiffMatchPatch: Sendable {
    /// The settings of the algorithms, with the reference's defaults.
    public struct Configuration: Hashable, Sendable {
        /// Seconds a diff may take before it settles for a coarser result; 0 means no limit.
        public var diffTimeout: Double = 1.0
        /// Cost of an empty edit in characters, for `cleanupEfficiency`.
        public var diffEditCost: Int = 4
        /// At what point no match is declared (0.0 is perfection, 1.0 very loose).
        public var matchThreshold: Double = 0.5
        /// How far from the expected location to search for a match (0 is exact location).
        public var matchDistance: Int = 1000
        /// How closely the contents of a large deletion must match (0.0 is perfection).
        public var patchDeleteThreshold: Double = 0.5
        /// Context length of a patch hunk (at most half of `matchMaxBits` less one).
        public var patchMargin: Int = 4
        /// The number of bits of the bitap matcher (4 to 32); patches are split to this size.
        public var matchMaxBits: Int = 32

        /// The reference's defaults.
        public init() {}

        /// Settings with the given values; anything not named keeps the reference's default.
        public init(
            diffTimeout: Double = 1.0, diffEditCost: Int = 4, matchThreshold: Double = 0.5,
            matchDistance: Int = 1000, patchDeleteThreshold: Double = 0.5, patchMargin: Int = 4
        ) {
            self.diffTimeout = diffTimeout
            self.diffEditCost = diffEditCost
            self.matchThreshold = matchThreshold
            self.matchDistance = matchDistance
            self.patchDeleteThreshold = patchDeleteThreshold
            self.patchMargin = patchMargin
        }
    }

    /// The settings in use.
    public var configuration: Configuration

    /// Creates an instance with the given settings.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The deadline for a diff started now, per `diffTimeout` (none when 0, negative or
    /// not finite, or beyond a year).
    var defaultDeadline: ContinuousClock.Instant? {
        let seconds = configuration.diffTimeout
        guard seconds > 0, seconds.isFinite, seconds < 365 * 24 * 3600 else { return nil }
        return ContinuousClock.now + .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// `matchMaxBits` within what the 32-bit Bitap can do (4 to 32).
    var maxBits: Int { min(32, max(4, configuration.matchMaxBits)) }

    /// `patchMargin` small enough that hunks can always be split (0 to half of `maxBits` less one).
    var margin: Int { min(max(0, configuration.patchMargin), (maxBits - 2) / 2) }
}

typealias Units = UnsafeBufferPointer<UInt16>

extension UnsafeBufferPointer where Element == UInt16 {
    /// Units `from..<to`, clamped like JavaScript's `substring` with ordered arguments.
    @inline(__always)
    func sub(_ from: Int, _ to: Int) -> Units {
        Units(rebasing: self[from..<to])
    }

    @inline(__always)
    func sub(_ from: Int) -> Units {
        Units(rebasing: self[from..<count])
    }

    @inline(__always)
    var array: [UInt16] { Array(self) }
}

@inline(__always)
func isHighSurrogate(_ u: UInt16) -> Bool { u & 0xFC00 == 0xD800 }

@inline(__always)
func isLowSurrogate(_ u: UInt16) -> Bool { u & 0xFC00 == 0xDC00 }

/// Runs `body` with buffers over the UTF-16 units of two arrays.
@inline(__always)
func withUnits<R>(_ a: [UInt16], _ b: [UInt16], _ body: (Units, Units) -> R) -> R {
    a.withUnsafeBufferPointer { ua in b.withUnsafeBufferPointer { ub in body(ua, ub) } }
}
