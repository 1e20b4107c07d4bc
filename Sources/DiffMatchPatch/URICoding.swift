/// The reference's `encodeURI(…).replace(/%20/g, ' ')` and `decodeURI`, on UTF-16 code units.
enum URICoding {
    /// Characters `encodeURI` leaves alone, plus the space the reference puts back.
    private static let unescaped: [Bool] = {
        var table = [Bool](repeating: false, count: 128)
        for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789;,/?:@&=+$-_.!~*'()# ".utf8 {
            table[Int(c)] = true
        }
        return table
    }()

    /// Characters `decodeURI` leaves escaped (`%3B` stays `%3B`).
    private static func isReserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: ";"), UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: ":"), UInt8(ascii: "@"),
            UInt8(ascii: "&"), UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "$"), UInt8(ascii: ","),
            UInt8(ascii: "#"):
            return true
        default:
            return false
        }
    }

    private static let hex: [UInt8] = Array("0123456789ABCDEF".utf8)

    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "%"))
        out.append(hex[Int(byte >> 4)])
        out.append(hex[Int(byte & 0xF)])
    }

    /// Appends `text` %-encoded as the reference's delta and patch text do, as UTF-8 bytes.
    ///
    /// An unpaired surrogate (which the reference cannot encode at all) is written as U+FFFD;
    /// the public API never produces one.
    static func encode(_ text: [UInt16], into out: inout [UInt8]) {
        var i = 0
        let n = text.count
        while i < n {
            let u = text[i]
            var scalar: UInt32
            if u < 0x80 {
                if unescaped[Int(u)] {
                    out.append(UInt8(u))
                } else {
                    appendEscaped(UInt8(u), to: &out)
                }
                i += 1
                continue
            } else if u & 0xFC00 == 0xD800, i + 1 < n, text[i + 1] & 0xFC00 == 0xDC00 {
                scalar = 0x10000 + ((UInt32(u) - 0xD800) << 10) + (UInt32(text[i + 1]) - 0xDC00)
                i += 2
            } else if u & 0xF800 == 0xD800 {
                scalar = 0xFFFD
                i += 1
            } else {
                scalar = UInt32(u)
                i += 1
            }
            if scalar < 0x800 {
                appendEscaped(UInt8(0xC0 | (scalar >> 6)), to: &out)
                appendEscaped(UInt8(0x80 | (scalar & 0x3F)), to: &out)
            } else if scalar < 0x10000 {
                appendEscaped(UInt8(0xE0 | (scalar >> 12)), to: &out)
                appendEscaped(UInt8(0x80 | ((scalar >> 6) & 0x3F)), to: &out)
                appendEscaped(UInt8(0x80 | (scalar & 0x3F)), to: &out)
            } else {
                appendEscaped(UInt8(0xF0 | (scalar >> 18)), to: &out)
                appendEscaped(UInt8(0x80 | ((scalar >> 12) & 0x3F)), to: &out)
                appendEscaped(UInt8(0x80 | ((scalar >> 6) & 0x3F)), to: &out)
                appendEscaped(UInt8(0x80 | (scalar & 0x3F)), to: &out)
            }
        }
    }

    /// Why a %-escape could not be decoded.
    struct DecodeFailure: Error {
        var offset: Int
    }

    private static func hexValue(_ u: UInt16) -> UInt8? {
        switch u {
        case 0x30...0x39: return UInt8(u - 0x30)
        case 0x41...0x46: return UInt8(u - 0x41 + 10)
        case 0x61...0x66: return UInt8(u - 0x61 + 10)
        default: return nil
        }
    }

    /// Decodes `text[range]` as `decodeURI` does, appending UTF-16 code units to `out`.
    ///
    /// Like the reference, escapes of reserved characters stay as they are and malformed
    /// escapes or UTF-8 are an error. Unlike the reference, and like the fix Simplenote ships,
    /// an escaped surrogate (`%ED%A0%BD`, which other ports emit for half a pair) decodes to
    /// that code unit, so deltas from those ports can be read; callers check pairing.
    static func decode(_ text: ArraySlice<UInt16>, into out: inout [UInt16]) throws(DecodeFailure) {
        var i = text.startIndex
        let end = text.endIndex
        func byte(at k: Int) throws(DecodeFailure) -> UInt8 {
            guard k + 2 < end,
                text[k] == 0x25,
                let hi = hexValue(text[k + 1]), let lo = hexValue(text[k + 2])
            else { throw DecodeFailure(offset: k - text.startIndex) }
            return hi << 4 | lo
        }
        while i < end {
            let u = text[i]
            if u != 0x25 {
                out.append(u)
                i += 1
                continue
            }
            let first = try byte(at: i)
            if first < 0x80 {
                if isReserved(first) {
                    out.append(contentsOf: text[i..<(i + 3)])
                } else {
                    out.append(UInt16(first))
                }
                i += 3
                continue
            }
            let count: Int
            var scalar: UInt32
            switch first {
            case 0xC2...0xDF:
                count = 2
                scalar = UInt32(first & 0x1F)
            case 0xE0...0xEF:
                count = 3
                scalar = UInt32(first & 0x0F)
            case 0xF0...0xF4:
                count = 4
                scalar = UInt32(first & 0x07)
            default: throw DecodeFailure(offset: i - text.startIndex)
            }
            var k = i + 3
            for _ in 1..<count {
                let next = try byte(at: k)
                guard next & 0xC0 == 0x80 else { throw DecodeFailure(offset: k - text.startIndex) }
                scalar = scalar << 6 | UInt32(next & 0x3F)
                k += 3
            }
            let minimum: UInt32 = count == 2 ? 0x80 : count == 3 ? 0x800 : 0x10000
            guard scalar >= minimum, scalar <= 0x10FFFF else { throw DecodeFailure(offset: i - text.startIndex) }
            if scalar >= 0x10000 {
                let v = scalar - 0x10000
                out.append(UInt16(0xD800 + (v >> 10)))
                out.append(UInt16(0xDC00 + (v & 0x3FF)))
            } else {
                out.append(UInt16(scalar))
            }
            i = k
        }
    }
}
