extension Sequence where Element == UInt8 {
    /// The bytes as lower-case hexadecimal (a digest as text). `String(format: "%02x")` per
    /// byte cost a server 6% of its time hashing every change it takes.
    public var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
