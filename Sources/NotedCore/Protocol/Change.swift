/// One operation on one field of a record.
public enum FieldOp: Sendable, Hashable {
    /// Replace a text field.
    case textSet(String)
    /// Edit a text field with a diff-match-patch delta against its value at `baseRev`.
    case textDelta(String)
    /// Replace a set field.
    case setReplace([String])
    /// Add and remove elements of a set field.
    case setAddRemove(add: [String], remove: [String])
    /// Replace a scalar field.
    case scalarSet(JSONValue)

    /// The wire form of this op.
    public var json: JSONValue {
        switch self {
        case .textSet(let text): ["set": .string(text)]
        case .textDelta(let delta): ["delta": .string(delta)]
        case .setReplace(let values): ["set": .array(values.map(JSONValue.string))]
        case .setAddRemove(let add, let remove):
            ["add": .array(add.map(JSONValue.string)), "remove": .array(remove.map(JSONValue.string))]
        case .scalarSet(let value): ["set": value]
        }
    }

    /// The op that replaces a field of `kind` with `value` (not checked against the schema's
    /// rules: a parser does that).
    public static func replacing(with value: JSONValue, kind: FieldKind) -> FieldOp {
        switch kind {
        case .text: .textSet(value.stringValue ?? "")
        case .set: .setReplace(value.arrayValue?.compactMap(\.stringValue) ?? [])
        case .scalar: .scalarSet(value)
        }
    }

    /// The elements a set op adds: those of a replacement, or of an `add`.
    public var addedElements: [String] {
        switch self {
        case .setReplace(let values): values
        case .setAddRemove(let add, _): add
        case .textSet, .textDelta, .scalarSet: []
        }
    }
}

/// A validated change from a client's push.
public struct Change: Sendable, Hashable {
    public enum Operation: String, Sendable, Hashable {
        case upsert
        case delete
    }

    public var ccid: String
    public var collection: String
    public var id: String
    public var baseRev: Int64
    public var op: Operation
    public var fields: [String: FieldOp]

    public init(ccid: String, collection: String, id: String, baseRev: Int64, op: Operation, fields: [String: FieldOp])
    {
        self.ccid = ccid
        self.collection = collection
        self.id = id
        self.baseRev = baseRev
        self.op = op
        self.fields = fields
    }

    /// The wire form of this change; equal changes give equal `jsonString`s.
    public var json: JSONValue {
        .object([
            "ccid": .string(ccid),
            "collection": .string(collection),
            "id": .string(id),
            "baseRev": .int(baseRev),
            "op": .string(op.rawValue),
            "fields": .object(fields.mapValues(\.json)),
        ])
    }
}

/// Identity of a change as far as it could be read, for a `reject` of a change that failed validation.
public struct ChangeIdentity: Sendable, Hashable {
    public var ccid: String?
    public var collection: String?
    public var id: String?

    public init(ccid: String?, collection: String?, id: String?) {
        self.ccid = ccid
        self.collection = collection
        self.id = id
    }
}
