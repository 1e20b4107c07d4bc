/// A collection schema as a JSON document: the format apps and tools write
/// (docs/collections.md), read strictly so that a typo is an error and not a silently ignored key.
///
/// ```json
/// {"name": "worries", "version": 1, "fields": {
///   "text":      {"kind": "text", "searchable": true},
///   "intensity": {"kind": "scalar", "types": ["number"], "min": 0, "max": 10, "default": 0, "indexed": true}
/// }}
/// ```
public struct SchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

extension CollectionSchema {
    /// Collection names: `[a-z][a-z0-9_]{0,63}`. Field names follow the same pattern and may
    /// also hold upper-case letters (`remindAt`); both are case-sensitive as written.
    public static func isValidName(_ name: String, field: Bool = false) -> Bool {
        let bytes = Array(name.utf8)
        func isLetter(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (field && (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte))
        }
        guard let first = bytes.first, isLetter(first), bytes.count <= 64 else { return false }
        return bytes.allSatisfy { byte in
            isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
        }
    }

    /// Reads a schema document; every error names the key at fault.
    public init(json: JSONValue) throws(SchemaError) {
        guard let object = json.objectValue else { throw SchemaError("a schema must be a JSON object") }
        try Self.checkKeys(object, allowed: ["name", "version", "fields", "description"], in: "the schema")
        guard let name = object["name"]?.stringValue else { throw SchemaError("\"name\" must be a string") }
        guard Self.isValidName(name) else {
            throw SchemaError("collection name \"\(name)\" must match [a-z][a-z0-9_]{0,63}")
        }
        guard let version = object["version"]?.intValue, version >= 1 else {
            throw SchemaError("\(name): \"version\" must be a positive integer")
        }
        guard let rawFields = object["fields"]?.objectValue else {
            throw SchemaError("\(name): \"fields\" must be an object of field specifications")
        }
        var fields: [String: FieldSpec] = [:]
        for fieldName in rawFields.keys.sorted() {
            guard Self.isValidName(fieldName, field: true) else {
                throw SchemaError("\(name): field name \"\(fieldName)\" must match [a-zA-Z][a-zA-Z0-9_]{0,63}")
            }
            do {
                fields[fieldName] = try FieldSpec(json: rawFields[fieldName] ?? .null)
            } catch {
                throw SchemaError("\(name).\(fieldName): \(error.message)")
            }
        }
        self.init(name: name, version: version, fields: fields)
    }

    /// The document form, as `GET /v1/collections` serves it (every key explicit).
    public var json: JSONValue {
        .object(["name": .string(name), "version": .int(version), "fields": .object(fields.mapValues(\.json))])
    }

    /// What in `new` would break records stored under `self` (empty: `new` is a safe evolution).
    /// Adding fields, adding scalar types and changing defaults, flags or bounds are safe; a
    /// field removed, its kind changed or a scalar type taken away are not.
    public func breakingChanges(to new: CollectionSchema) -> [String] {
        var problems: [String] = []
        for (fieldName, old) in fields.sorted(by: { $0.key < $1.key }) {
            guard let spec = new.fields[fieldName] else {
                problems.append("\(name).\(fieldName) was removed")
                continue
            }
            if spec.kind != old.kind {
                problems.append("\(name).\(fieldName) changed kind from \(old.kind.rawValue) to \(spec.kind.rawValue)")
            } else if spec.kind == .scalar, !spec.scalarTypes.isSuperset(of: old.scalarTypes) {
                let lost = old.scalarTypes.subtracting(spec.scalarTypes).names.joined(separator: ", ")
                problems.append("\(name).\(fieldName) no longer accepts \(lost)")
            }
        }
        return problems
    }

    static func checkKeys(_ object: [String: JSONValue], allowed: Set<String>, in place: String) throws(SchemaError) {
        // Keys of others' tools go under "x-"; anything else unknown is most likely a typo.
        for key in object.keys.sorted() where !allowed.contains(key) && !key.hasPrefix("x-") {
            throw SchemaError(
                "unknown key \"\(key)\" in \(place) (allowed: \(allowed.sorted().joined(separator: ", ")), or x-…)")
        }
    }
}

extension ScalarTypes {
    static let byName: [(String, ScalarTypes)] = [
        ("string", .string), ("number", .number), ("bool", .bool), ("null", .null),
    ]

    /// The type names, in the document's spelling.
    public var names: [String] { Self.byName.filter { contains($0.1) }.map(\.0) }
}

extension FieldSpec {
    init(json: JSONValue) throws(SchemaError) {
        guard let object = json.objectValue else { throw SchemaError("a field must be an object with a \"kind\"") }
        guard let kindName = object["kind"]?.stringValue, let kind = FieldKind(rawValue: kindName) else {
            throw SchemaError("\"kind\" must be \"text\", \"set\" or \"scalar\"")
        }
        switch kind {
        case .text:
            try CollectionSchema.checkKeys(
                object, allowed: ["kind", "searchable", "default", "description"], in: "a text field")
            self = .text
        case .set:
            try CollectionSchema.checkKeys(
                object, allowed: ["kind", "default", "attachments", "description"], in: "a set field")
            self = .set
            attachments = try Self.flag(object, "attachments")
        case .scalar:
            try CollectionSchema.checkKeys(
                object,
                allowed: ["kind", "types", "default", "indexed", "enum", "min", "max", "maxLength", "description"],
                in: "a scalar field")
            self = try Self.scalar(object)
        }
        searchable = try Self.flag(object, "searchable")
        indexed = try Self.flag(object, "indexed")
        if let value = object["default"] { try checkDefault(value) }
    }

    private static func scalar(_ object: [String: JSONValue]) throws(SchemaError) -> FieldSpec {
        guard let names = object["types"]?.arrayValue, !names.isEmpty else {
            throw SchemaError("\"types\" must be a non-empty array of \"string\", \"number\", \"bool\", \"null\"")
        }
        var types: ScalarTypes = []
        for name in names {
            guard let type = ScalarTypes.byName.first(where: { $0.0 == name.stringValue })?.1 else {
                throw SchemaError("unknown type \(name.jsonString) in \"types\" (string, number, bool, null)")
            }
            types.insert(type)
        }
        var spec = FieldSpec.scalar(types, default: .null)
        if let allowed = object["enum"] {
            guard let values = allowed.arrayValue, !values.isEmpty else {
                throw SchemaError("\"enum\" must be a non-empty array")
            }
            for value in values where !types.accepts(value) {
                throw SchemaError("\"enum\" value \(value.jsonString) is not of the field's types")
            }
            spec.allowed = values
        }
        for (key, path) in [("min", \FieldSpec.minimum), ("max", \FieldSpec.maximum)] {
            guard let value = object[key] else { continue }
            guard types.contains(.number), let number = value.numberValue else {
                throw SchemaError("\"\(key)\" must be a number, on a field of type number")
            }
            spec[keyPath: path] = number
        }
        if let minimum = spec.minimum, let maximum = spec.maximum, minimum > maximum {
            throw SchemaError("\"min\" is greater than \"max\"")
        }
        if let value = object["maxLength"] {
            guard types.contains(.string), let length = value.intValue, length >= 0 else {
                throw SchemaError("\"maxLength\" must be a non-negative integer, on a field of type string")
            }
            spec.maxLength = Int(length)
        }
        if object["default"] == nil {
            guard types.contains(.null) else {
                throw SchemaError("a scalar without null among its types needs a \"default\"")
            }
        }
        return spec
    }

    private static func flag(_ object: [String: JSONValue], _ key: String) throws(SchemaError) -> Bool {
        guard let value = object[key] else { return false }
        guard let flag = value.boolValue else { throw SchemaError("\"\(key)\" must be true or false") }
        return flag
    }

    private mutating func checkDefault(_ value: JSONValue) throws(SchemaError) {
        switch kind {
        case .text:
            guard value.stringValue != nil else { throw SchemaError("the default of a text field must be a string") }
        case .set:
            guard let elements = value.arrayValue, elements.allSatisfy({ $0.stringValue != nil }),
                Set(elements).count == elements.count
            else { throw SchemaError("the default of a set field must be an array of distinct strings") }
        case .scalar:
            guard scalarTypes.accepts(value) else {
                throw SchemaError("the default \(value.jsonString) is not of the field's types")
            }
            if let problem = violation(of: value) { throw SchemaError("the default \(value.jsonString) \(problem)") }
        }
        defaultValue = value
    }

    var json: JSONValue {
        var object: [String: JSONValue] = ["kind": .string(kind.rawValue), "default": defaultValue]
        switch kind {
        case .text:
            object["searchable"] = .bool(searchable)
        case .set:
            object["attachments"] = .bool(attachments)
        case .scalar:
            object["types"] = .array(scalarTypes.names.map(JSONValue.string))
            object["indexed"] = .bool(indexed)
            if let allowed { object["enum"] = .array(allowed) }
            if let minimum { object["min"] = .number(minimum) }
            if let maximum { object["max"] = .number(maximum) }
            if let maxLength { object["maxLength"] = .int(Int64(maxLength)) }
        }
        return .object(object)
    }
}

extension JSONValue {
    /// A number as a `Double`, whether written as an integer or not.
    public var numberValue: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        default: nil
        }
    }

    /// A number value: an integer when it is one.
    public static func number(_ value: Double) -> JSONValue {
        if value.rounded() == value, abs(value) < 9_007_199_254_740_992 { return .int(Int64(value)) }
        return .double(value)
    }

    /// Equality in JSON's sense: `1` and `1.0` are the same number.
    public func sameValue(as other: JSONValue) -> Bool {
        if let a = numberValue, let b = other.numberValue { return a == b }
        return self == other
    }
}
