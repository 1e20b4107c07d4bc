#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#elseif canImport(ucrt)
    import ucrt
#endif

/// Whether two runs of units are equal.
@inline(__always)
func same(_ lhs: Units, _ rhs: Units) -> Bool {
    guard lhs.count == rhs.count else { return false }
    guard lhs.count > 0, let a = lhs.baseAddress, let b = rhs.baseAddress else { return true }
    return memcmp(a, b, lhs.count * 2) == 0
}

/// Substring search on UTF-16 units with JavaScript's `indexOf`/`lastIndexOf` semantics.
enum Search {
    /// First index `>= from` where `needle` occurs in `hay`, or -1.
    static func indexOf(_ hay: Units, _ needle: Units, from: Int = 0) -> Int {
        let start = max(0, min(from, hay.count))
        let n = needle.count
        if n == 0 { return start }
        if hay.count - start < n { return -1 }
        guard let hayBase = hay.baseAddress, let needleBase = needle.baseAddress else { return -1 }
        if n == 1 {
            let c = needleBase[0]
            var i = start
            let end = hay.count
            while i < end {
                if hayBase[i] == c { return i }
                i += 1
            }
            return -1
        }
        let hayEnd = hay.count
        if n <= 8 {
            // Short needles: scan for the first unit, then compare.
            let first = needleBase[0]
            var i = start
            let last = hayEnd - n
            while i <= last {
                if hayBase[i] == first && memcmp(hayBase + i, needleBase, n * 2) == 0 { return i }
                i += 1
            }
            return -1
        }
        // Long needles: Rabin-Karp, linear on any input barring hash collisions.
        let base: UInt64 = 0x100_0000_01B3
        var needleHash: UInt64 = 0
        var windowHash: UInt64 = 0
        var power: UInt64 = 1
        for k in 0..<n {
            needleHash = needleHash &* base &+ UInt64(needleBase[k])
            windowHash = windowHash &* base &+ UInt64(hayBase[start + k])
            if k > 0 { power = power &* base }
        }
        var i = start
        while true {
            if windowHash == needleHash && memcmp(hayBase + i, needleBase, n * 2) == 0 { return i }
            if i + n >= hayEnd { return -1 }
            windowHash = (windowHash &- UInt64(hayBase[i]) &* power) &* base &+ UInt64(hayBase[i + n])
            i += 1
        }
    }

    /// Last index `<= from` where `needle` occurs in `hay`, or -1.
    static func lastIndexOf(_ hay: Units, _ needle: Units, from: Int) -> Int {
        let n = needle.count
        var i = min(max(0, from), hay.count - n)
        if n == 0 { return max(0, min(from, hay.count)) }
        while i >= 0 {
            if hay[i] == needle[0] && same(hay.sub(i, i + n), needle) { return i }
            i -= 1
        }
        return -1
    }
}
