#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A JSON value as it appears on the wire, kept exactly (integers stay integers).
///
/// Messages are decoded into `JSONValue` first and validated field by field, so that a wrong
/// type, a fractional number or an unknown key gets a precise error instead of a generic
/// decoding failure.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue {
    /// Parses one JSON document; throws on anything that is not well-formed JSON.
    public static func parse(_ bytes: some Collection<UInt8>) throws -> JSONValue {
        if let value = try bytes.withContiguousStorageIfAvailable({ buffer throws in try JSONParser.parse(buffer) }) {
            return value
        }
        return try Array(bytes).withUnsafeBufferPointer { buffer throws in try JSONParser.parse(buffer) }
    }

    /// Parses one JSON document whose tree may take at most `memoryBudget` bytes (an estimate:
    /// 32 bytes a value plus its strings' bytes), less what it took on return. Over it, throws
    /// `JSONBudgetExceeded`; untrusted documents (an import) are parsed this way, since the tree
    /// of `[0,0,…]` is 16 times the size of its text.
    public static func parse(_ bytes: some Collection<UInt8>, memoryBudget: inout Int) throws -> JSONValue {
        var budget = memoryBudget
        defer { memoryBudget = budget }
        do {
            if let value = try bytes.withContiguousStorageIfAvailable({ buffer throws in
                try JSONParser.parse(buffer, budget: &budget)
            }) {
                return value
            }
            return try Array(bytes).withUnsafeBufferPointer { buffer throws in
                try JSONParser.parse(buffer, budget: &budget)
            }
        } catch let failure as JSONParser.Failure where failure.overBudget {
            throw JSONBudgetExceeded(offset: failure.offset)
        }
    }

    /// Parses one JSON document from a string.
    public static func parse(_ text: String) throws -> JSONValue {
        var text = text
        return try text.withUTF8 { buffer throws in try JSONParser.parse(buffer) }
    }

    /// The compact JSON text of this value; keys sorted so that equal values give equal text.
    /// The value as JSON text: keys sorted, nothing but what JSON requires escaped, byte for
    /// byte what `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` writes (the
    /// server hashes it to recognise a change sent again, across versions too), written by hand:
    /// the encoder's generic path cost a client syncing 10,000 notes a tenth of its time.
    public var jsonString: String {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// As the encoder wrote it before (doubles go to it still: its number formatting).
    var encoderJSONString: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a JSONValue cannot fail: every case maps to a JSON value (non-finite doubles
        // never come from the parser).
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let value): out += Array((value ? "true" : "false").utf8)
        case .int(let value): out += Array(String(value).utf8)
        case .double: out += Array(encoderJSONString.utf8)
        case .string(let value): Self.write(string: value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            // The encoder's order: by the keys' UTF-8 bytes.
            for (index, key) in members.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.write(string: key, to: &out)
                out.append(UInt8(ascii: ":"))
                members[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    private static func write(string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { bytes in
            // Runs that need no escape are copied whole.
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if start < index { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index])) }
                start = index + 1
                switch byte {
                case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
                case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
                case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
                case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
                case 0x08: out += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
                case 0x0C: out += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
                default:
                    out += [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                        hex[Int(byte >> 4)], hex[Int(byte & 15)],
                    ]
                }
            }
            if start < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<bytes.count])) }
        }
        out.append(UInt8(ascii: "\""))
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The value as an exact integer (never from a fractional or out-of-range number).
    public var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    public subscript(key: String) -> JSONValue? {
        objectValue?[key]
    }

    /// A short name of the value's JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

/// A document whose tree would take more memory than its parse was given, found at byte `offset`.
public struct JSONBudgetExceeded: Error, Sendable, CustomStringConvertible {
    public var offset: Int
    public var description: String { "the document needs more memory than allowed (at byte \(offset))" }
}
