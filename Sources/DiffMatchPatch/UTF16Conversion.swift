/// Fast conversions between `String` and UTF-16 code units.
///
/// `String(decoding:as: UTF16.self)` takes a slow per-scalar path on non-ASCII text (about
/// 30 ms per MB); transcoding by hand into UTF-8 and handing the bytes to `String` is about ten
/// times faster, which matters for patching large notes.
enum UTF16Conversion {
    /// The string of `units`; an unpaired surrogate becomes U+FFFD.
    static func string(_ units: UnsafeBufferPointer<UInt16>) -> String {
        let n = units.count
        if n == 0 { return "" }
        return String(unsafeUninitializedCapacity: n * 3) { out in
            var o = 0
            var i = 0
            while i < n {
                let u = units[i]
                if u < 0x80 {
                    out[o] = UInt8(truncatingIfNeeded: u)
                    o += 1
                    i += 1
                } else if u < 0x800 {
                    out[o] = UInt8(truncatingIfNeeded: 0xC0 | (u >> 6))
                    out[o + 1] = UInt8(truncatingIfNeeded: 0x80 | (u & 0x3F))
                    o += 2
                    i += 1
                } else if u & 0xFC00 == 0xD800, i + 1 < n, units[i + 1] & 0xFC00 == 0xDC00 {
                    let scalar = 0x10000 + ((UInt32(u) - 0xD800) << 10) + (UInt32(units[i + 1]) - 0xDC00)
                    out[o] = UInt8(truncatingIfNeeded: 0xF0 | (scalar >> 18))
                    out[o + 1] = UInt8(truncatingIfNeeded: 0x80 | ((scalar >> 12) & 0x3F))
                    out[o + 2] = UInt8(truncatingIfNeeded: 0x80 | ((scalar >> 6) & 0x3F))
                    out[o + 3] = UInt8(truncatingIfNeeded: 0x80 | (scalar & 0x3F))
                    o += 4
                    i += 2
                } else {
                    // An unpaired surrogate (never produced by the public API) becomes U+FFFD.
                    let v: UInt16 = u & 0xF800 == 0xD800 ? 0xFFFD : u
                    out[o] = UInt8(truncatingIfNeeded: 0xE0 | (v >> 12))
                    out[o + 1] = UInt8(truncatingIfNeeded: 0x80 | ((v >> 6) & 0x3F))
                    out[o + 2] = UInt8(truncatingIfNeeded: 0x80 | (v & 0x3F))
                    o += 3
                    i += 1
                }
            }
            return o
        }
    }

    static func string(_ units: [UInt16]) -> String {
        units.withUnsafeBufferPointer { string($0) }
    }

    static func string(_ units: ArraySlice<UInt16>) -> String {
        units.withUnsafeBufferPointer { string($0) }
    }

    /// The UTF-16 code units of `text`.
    static func units(_ text: String) -> [UInt16] {
        var text = text
        return text.withUTF8 { utf8 in
            let n = utf8.count
            return [UInt16](unsafeUninitializedCapacity: n) { out, count in
                var i = 0
                var o = 0
                while i < n {
                    let b = utf8[i]
                    if b < 0x80 {
                        out[o] = UInt16(b)
                        o += 1
                        i += 1
                    } else if b < 0xE0 {
                        out[o] = UInt16(b & 0x1F) << 6 | UInt16(utf8[i + 1] & 0x3F)
                        o += 1
                        i += 2
                    } else if b < 0xF0 {
                        out[o] = UInt16(b & 0x0F) << 12 | UInt16(utf8[i + 1] & 0x3F) << 6 | UInt16(utf8[i + 2] & 0x3F)
                        o += 1
                        i += 3
                    } else {
                        let scalar =
                            UInt32(b & 0x07) << 18 | UInt32(utf8[i + 1] & 0x3F) << 12
                            | UInt32(utf8[i + 2] & 0x3F) << 6 | UInt32(utf8[i + 3] & 0x3F)
                        let v = scalar - 0x10000
                        out[o] = UInt16(truncatingIfNeeded: 0xD800 + (v >> 10))
                        out[o + 1] = UInt16(truncatingIfNeeded: 0xDC00 + (v & 0x3FF))
                        o += 2
                        i += 4
                    }
                }
                count = o
            }
        }
    }
}
