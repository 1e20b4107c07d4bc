/// The kind of a record field, which decides its value type, its ops and its merge rule.
public enum FieldKind: String, Sendable, Hashable {
    /// A string edited with whole-value `set` or diff-match-patch `delta` ops; merged with patches.
    case text
    /// An unordered array of distinct strings edited with `set` or `add`/`remove`.
    case set
    /// A single JSON scalar replaced with `set`; the later change wins.
    case scalar
}

/// Which JSON scalars a `scalar` field accepts.
public struct ScalarTypes: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let string = ScalarTypes(rawValue: 1)
    public static let number = ScalarTypes(rawValue: 2)
    public static let bool = ScalarTypes(rawValue: 4)
    public static let null = ScalarTypes(rawValue: 8)
    public static let any: ScalarTypes = [.string, .number, .bool, .null]

    func accepts(_ value: JSONValue) -> Bool {
        switch value {
        case .null: contains(.null)
        case .bool: contains(.bool)
        case .int, .double: contains(.number)
        case .string: contains(.string)
        case .array, .object: false
        }
    }
}

/// One field of a collection schema (docs/collections.md).
public struct FieldSpec: Sendable, Hashable {
    public var kind: FieldKind
    public var scalarTypes: ScalarTypes
    /// The value a missing field reads as.
    public var defaultValue: JSONValue
    /// Text clients index for full-text search.
    public var searchable = false
    /// A scalar clients filter and sort on.
    public var indexed = false
    /// The only values a scalar may take (`enum`), when given.
    public var allowed: [JSONValue]?
    /// Bounds of a number scalar, inclusive.
    public var minimum: Double?
    public var maximum: Double?
    /// The longest string a scalar may hold, in UTF-16 code units.
    public var maxLength: Int?
    /// A set field whose elements are files stored as blobs (``AttachmentReference``): each
    /// element must be one, and a change may add one only when its blob is on the server.
    public var attachments = false

    public init(kind: FieldKind, scalarTypes: ScalarTypes, defaultValue: JSONValue) {
        self.kind = kind
        self.scalarTypes = scalarTypes
        self.defaultValue = defaultValue
    }

    public static let text = FieldSpec(kind: .text, scalarTypes: [], defaultValue: "")
    public static let set = FieldSpec(kind: .set, scalarTypes: [], defaultValue: [])
    public static func scalar(_ types: ScalarTypes, default value: JSONValue) -> FieldSpec {
        FieldSpec(kind: .scalar, scalarTypes: types, defaultValue: value)
    }

    /// Why a scalar value breaks this field's constraints (beyond its type), or nil.
    public func violation(of value: JSONValue) -> String? {
        if let allowed, !allowed.contains(where: { $0.sameValue(as: value) }) {
            return "is not one of \(JSONValue.array(allowed).jsonString)"
        }
        if let number = value.numberValue {
            if let minimum, number < minimum { return "is less than \(JSONValue.number(minimum).jsonString)" }
            if let maximum, number > maximum { return "is more than \(JSONValue.number(maximum).jsonString)" }
        }
        if let maxLength, let text = value.stringValue, text.utf16.count > maxLength {
            return "is longer than \(maxLength) UTF-16 code units"
        }
        return nil
    }
}

/// The schema of a collection: its name, version and fields.
public struct CollectionSchema: Sendable, Hashable {
    public var name: String
    /// The version the schema's author gives it; informational, served with the schema.
    public var version: Int64
    public var fields: [String: FieldSpec]

    public init(name: String, version: Int64 = 1, fields: [String: FieldSpec]) {
        self.name = name
        self.version = version
        self.fields = fields
    }

    /// The `notes` collection of protocol v1.
    public static let notes: CollectionSchema = {
        var schema = CollectionSchema(
            name: "notes",
            fields: [
                "title": .text,
                "body": .text,
                "tags": .set,
                "folder": .scalar([.string, .null], default: .null),
                "pinned": .scalar(.bool, default: false),
                "trashed": .scalar(.bool, default: false),
                // The dates a note brought from the app it was imported from (milliseconds
                // since 1970), null for notes written here: docs/protocol.md section 1.
                "created": .scalar([.number, .null], default: .null),
                "modified": .scalar([.number, .null], default: .null),
                // Files stored as blobs (AttachmentReference): docs/protocol.md, "Attachments".
                "attachments": .set,
            ]
        )
        schema.fields["attachments"]?.attachments = true
        for name in ["created", "modified"] {
            schema.fields[name]?.minimum = 0
            schema.fields[name]?.maximum = Double(Self.latestDate)
        }
        schema.fields["title"]?.searchable = true
        schema.fields["body"]?.searchable = true
        for name in ["folder", "pinned", "trashed"] { schema.fields[name]?.indexed = true }
        return schema
    }()

    /// 9999-12-31T23:59:59.999Z in milliseconds: the latest date a `created` or `modified`
    /// field may hold.
    public static let latestDate: Int64 = 253_402_300_799_999

    /// Every field with its value in `fields` or its default when missing.
    public func completed(_ fields: [String: JSONValue]) -> [String: JSONValue] {
        var result = fields
        for (name, spec) in self.fields where result[name] == nil {
            result[name] = spec.defaultValue
        }
        return result
    }
}

/// The collections a server knows.
public struct SchemaRegistry: Sendable {
    public var schemas: [String: CollectionSchema]

    public init(_ schemas: [CollectionSchema]) {
        self.schemas = Dictionary(schemas.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public static let v1 = SchemaRegistry([.notes])

    public subscript(name: String) -> CollectionSchema? { schemas[name] }
}
