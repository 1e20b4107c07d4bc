/// A JSON parser (RFC 8259) straight to `JSONValue`.
///
/// `JSONDecoder` decoding `JSONValue` tries each type in turn and throws for every miss (three
/// errors for each string, five for each object); every message the server and the clients
/// read went through that. This reads the bytes once. Numbers: an integer literal (no fraction,
/// no exponent) that fits in 64 bits is `.int`, any other number `.double`; a number too large
/// for a double, invalid UTF-8, an unpaired surrogate escape, a control character in a string,
/// nesting deeper than 512 and anything after the value are errors; so are a trailing comma
/// and a key given twice in one object (both of which `JSONDecoder` let through).
struct JSONParser {
    struct Failure: Error, CustomStringConvertible {
        var offset: Int
        var reason: String
        /// The document needs more memory than the parse was given (`budget`).
        var overBudget = false
        var description: String { "invalid JSON at byte \(offset): \(reason)" }
    }

    static let maxDepth = 512

    /// What one value of the tree costs in memory besides its string bytes, an estimate on the
    /// high side (an enum of a 16-byte payload and a tag, its slot in an array or dictionary).
    static let bytesPerValue = 32

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    /// Bytes of memory the tree may still take (`bytesPerValue` a value, plus the bytes of each
    /// string too long to be stored inline): `[0,0,…]` takes 16 times its text, so a parse of
    /// untrusted input is bounded by memory, not by the input's size.
    private(set) var budget: Int

    private init(_ bytes: UnsafeBufferPointer<UInt8>, budget: Int) {
        self.bytes = bytes
        self.budget = budget
    }

    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(Failure) -> JSONValue {
        var budget = Int.max
        return try parse(bytes, budget: &budget)
    }

    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, budget: inout Int) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes, budget: budget)
        defer { budget = parser.budget }
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.failure("unexpected text after the value") }
        return value
    }

    private mutating func charge(_ cost: Int) throws(Failure) {
        budget -= cost
        if budget < 0 { throw Failure(offset: index, reason: "more than the memory allowed for it", overBudget: true) }
    }

    /// A string's own allocation: none up to 15 UTF-8 bytes (stored inline), else its bytes and a header.
    private static func stringCost(_ count: Int) -> Int { count > 15 ? count + 32 : 0 }

    private func failure(_ reason: String) -> Failure {
        Failure(offset: index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) throws(Failure) -> JSONValue {
        guard index < bytes.count else { throw failure("unexpected end") }
        try charge(Self.bytesPerValue)
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure("unexpected end") }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
            throw failure("unexpected character")
        }
        index += count
    }

    private mutating func object(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw failure("nested too deeply") }
        index += 1
        var result: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(result)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a key") }
            let keyOffset = index
            let key = try string()
            // Two values for one key: which one counts differs between readers; refuse it.
            guard result[key] == nil else { throw Failure(offset: keyOffset, reason: "a duplicate key") }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            result[key] = try value(depth: depth)
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(result)
            } else {
                throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func array(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw failure("nested too deeply") }
        index += 1
        var result: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(result)
        }
        while true {
            skipWhitespace()
            result.append(try value(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(result)
            } else {
                throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func string() throws(Failure) -> String {
        index += 1
        let start = index
        // The common case: no escapes; the bytes are the string.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                try charge(Self.stringCost(slice.count))
                index += 1
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw Failure(offset: start, reason: "invalid UTF-8")
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("a control character in a string") }
            index += 1
        }
        var units = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                try charge(Self.stringCost(units.count))
                index += 1
                guard let text = String(validating: units, as: UTF8.self) else {
                    throw Failure(offset: start, reason: "invalid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                try escape(into: &units)
            default:
                if byte < 0x20 { throw failure("a control character in a string") }
                units.append(byte)
                index += 1
            }
        }
        throw failure("an unterminated string")
    }

    /// The escape after a backslash (at `index`), appended to `units` as UTF-8.
    private mutating func escape(into units: inout [UInt8]) throws(Failure) {
        guard index < bytes.count else { throw failure("unexpected end") }
        let escape = bytes[index]
        index += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): units.append(escape)
        case UInt8(ascii: "b"): units.append(0x08)
        case UInt8(ascii: "f"): units.append(0x0C)
        case UInt8(ascii: "n"): units.append(0x0A)
        case UInt8(ascii: "r"): units.append(0x0D)
        case UInt8(ascii: "t"): units.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hex4())
            if (0xD800...0xDBFF).contains(scalar) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else {
                    throw failure("an unpaired surrogate escape")
                }
                index += 2
                let low = UInt32(try hex4())
                guard (0xDC00...0xDFFF).contains(low) else { throw failure("an unpaired surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw failure("an unpaired surrogate escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("an invalid escape") }
            units.append(contentsOf: UTF8.encode(unicode)!)
        default:
            throw failure("an invalid escape")
        }
    }

    private mutating func hex4() throws(Failure) -> UInt16 {
        guard index + 4 <= bytes.count else { throw failure("unexpected end") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("an invalid \\u escape")
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    private mutating func number() throws(Failure) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
            throw failure("a number without digits")
        }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw failure("a fraction without digits") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw failure("an exponent without digits") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let value = Int64(text) { return .int(value) }
        guard let value = Double(text), value.isFinite else {
            throw Failure(offset: start, reason: "a number out of range")
        }
        // A whole number written with a fraction or an exponent (`1.0`, `1e2`) is an integer,
        // as `JSONDecoder` read it.
        if !integral, value == value.rounded(), let exact = Int64(exactly: value) { return .int(exact) }
        return .double(value)
    }
}
