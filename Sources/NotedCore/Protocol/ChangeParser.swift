/// Validates one change of a push against the schemas and limits.
///
/// Everything a client sends is checked here before anything is stored; a failure carries the
/// reject code the protocol prescribes.
public struct ChangeParser: Sendable {
    public var schemas: SchemaRegistry
    public var limits: Limits

    public init(schemas: SchemaRegistry = .v1, limits: Limits = Limits()) {
        self.schemas = schemas
        self.limits = limits
    }

    /// The largest `rev`/`seq` a client may name: every integer up to it is exact in JavaScript.
    public static let maxSafeInteger: Int64 = (1 << 53) - 1

    /// Reads what identifies a change, even when the rest is invalid.
    public static func identity(of value: JSONValue) -> ChangeIdentity {
        ChangeIdentity(
            ccid: value["ccid"]?.stringValue, collection: value["collection"]?.stringValue, id: value["id"]?.stringValue
        )
    }

    public func parse(_ value: JSONValue) throws(ProtocolError) -> Change {
        guard let object = value.objectValue else {
            throw ProtocolError(.badRequest, "a change must be a JSON object")
        }
        guard let ccid = object["ccid"]?.stringValue, UUIDText.isCanonical(ccid) else {
            throw ProtocolError(.badRequest, "ccid must be a lower-case UUID string")
        }
        guard let collection = object["collection"]?.stringValue else {
            throw ProtocolError(.badRequest, "collection must be a string")
        }
        guard let id = object["id"]?.stringValue, UUIDText.isCanonical(id) else {
            throw ProtocolError(.badRequest, "id must be a lower-case UUID string")
        }
        guard let baseRevValue = object["baseRev"] else {
            throw ProtocolError(.badRequest, "baseRev is missing")
        }
        guard let baseRev = baseRevValue.intValue, baseRev >= 0, baseRev <= Self.maxSafeInteger else {
            throw ProtocolError(.badRequest, "baseRev must be an integer from 0 to 2^53-1")
        }
        guard let opName = object["op"]?.stringValue, let op = Change.Operation(rawValue: opName) else {
            throw ProtocolError(.badRequest, "op must be \"upsert\" or \"delete\"")
        }
        guard let schema = schemas[collection] else {
            throw ProtocolError(.unknownCollection, "unknown collection")
        }
        let fieldsValue = object["fields"] ?? .object([:])
        guard let rawFields = fieldsValue.objectValue else {
            throw ProtocolError(.badRequest, "fields must be a JSON object")
        }
        var fields: [String: FieldOp] = [:]
        switch op {
        case .delete:
            guard rawFields.isEmpty else {
                throw ProtocolError(.badRequest, "a delete carries no fields")
            }
            guard baseRev > 0 else {
                throw ProtocolError(.badRequest, "a delete needs the baseRev of an existing record")
            }
        case .upsert:
            fields = try parse(fields: rawFields, of: schema)
        }
        return Change(ccid: ccid, collection: collection, id: id, baseRev: baseRev, op: op, fields: fields)
    }

    /// Validates the ops of an upsert (or of a `change` broadcast) on a record of `schema`.
    public func parse(fields rawFields: [String: JSONValue], of schema: CollectionSchema) throws(ProtocolError)
        -> [String: FieldOp]
    {
        var fields: [String: FieldOp] = [:]
        for name in rawFields.keys.sorted() {
            guard let spec = schema.fields[name] else {
                throw ProtocolError(.invalidField, "unknown field \"\(name)\"")
            }
            // Cannot be nil: the key comes from the dictionary.
            let raw = rawFields[name] ?? .null
            fields[name] = try parseOp(raw, field: name, spec: spec)
        }
        return fields
    }

    private func parseOp(_ raw: JSONValue, field: String, spec: FieldSpec) throws(ProtocolError) -> FieldOp {
        guard let object = raw.objectValue else {
            throw ProtocolError(.invalidField, "the op of \"\(field)\" must be a JSON object")
        }
        switch spec.kind {
        case .text:
            if object.count == 1, let value = object["set"] {
                guard let text = value.stringValue else {
                    throw ProtocolError(.invalidField, "\"\(field)\" is a text field: set takes a string")
                }
                try checkText(text, field: field)
                return .textSet(text)
            }
            if object.count == 1, let value = object["delta"] {
                guard let delta = value.stringValue else {
                    throw ProtocolError(.invalidField, "\"\(field)\": delta takes a string")
                }
                return .textDelta(delta)
            }
            throw ProtocolError(
                .invalidField, "\"\(field)\" is a text field: use {\"set\": text} or {\"delta\": delta}")
        case .set:
            if object.count == 1, let value = object["set"] {
                let values = try strings(value, field: field, op: "set")
                if spec.attachments { try checkAttachments(values, field: field) }
                guard Set(values).count == values.count else {
                    throw ProtocolError(.invalidField, "\"\(field)\": set elements must be distinct")
                }
                guard values.count <= limits.maxTags else {
                    throw ProtocolError(.tooLarge, "\"\(field)\" has more than \(limits.maxTags) elements")
                }
                return .setReplace(values)
            }
            let allowed: Set<String> = ["add", "remove"]
            if !object.isEmpty, object.keys.allSatisfy(allowed.contains) {
                let add =
                    try object["add"].map { v throws(ProtocolError) in try strings(v, field: field, op: "add") } ?? []
                let remove =
                    try object["remove"].map { v throws(ProtocolError) in try strings(v, field: field, op: "remove") }
                    ?? []
                if spec.attachments { try checkAttachments(add, field: field) }
                guard add.count <= limits.maxTags, remove.count <= limits.maxTags else {
                    throw ProtocolError(.tooLarge, "\"\(field)\" has more than \(limits.maxTags) elements")
                }
                return .setAddRemove(add: uniqued(add), remove: uniqued(remove))
            }
            throw ProtocolError(
                .invalidField,
                "\"\(field)\" is a set field: use {\"set\": [...]} or {\"add\": [...], \"remove\": [...]}")
        case .scalar:
            guard object.count == 1, let value = object["set"] else {
                throw ProtocolError(.invalidField, "\"\(field)\" is a scalar field: use {\"set\": value}")
            }
            guard spec.scalarTypes.accepts(value) else {
                throw ProtocolError(.invalidField, "\"\(field)\" does not accept a \(value.typeName)")
            }
            if case .string(let text) = value {
                try checkText(text, field: field)
            }
            if let problem = spec.violation(of: value) {
                let shown = value.jsonString
                throw ProtocolError(
                    .invalidField, "\"\(field)\": \(shown.count > 60 ? shown.prefix(57) + "…" : shown) \(problem)")
            }
            return .scalarSet(value)
        }
    }

    /// Checks a whole field value as a record would hold it (what a `set` op may carry), by the
    /// same rules as changes: clients validate local edits with it before they are stored.
    public func validate(value: JSONValue, field: String, in collection: String) throws(ProtocolError) {
        guard let schema = schemas[collection] else {
            throw ProtocolError(.unknownCollection, "unknown collection \"\(collection)\"")
        }
        guard let spec = schema.fields[field] else { throw ProtocolError(.invalidField, "unknown field \"\(field)\"") }
        let op = try parseOp(["set": value], field: field, spec: spec)
        if case .setReplace(let values) = op, values.contains("") {
            throw ProtocolError(.invalidField, "\"\(field)\": an element is empty")
        }
    }

    private func strings(_ value: JSONValue, field: String, op: String) throws(ProtocolError) -> [String] {
        guard let array = value.arrayValue else {
            throw ProtocolError(.invalidField, "\"\(field)\": \(op) takes an array of strings")
        }
        var result: [String] = []
        result.reserveCapacity(array.count)
        for element in array {
            guard let text = element.stringValue else {
                throw ProtocolError(.invalidField, "\"\(field)\": \(op) takes an array of strings")
            }
            guard text.utf16.count <= limits.maxTagLength else {
                throw ProtocolError(
                    .tooLarge, "\"\(field)\": an element is longer than \(limits.maxTagLength) UTF-16 code units")
            }
            result.append(text)
        }
        return result
    }

    /// Each element of an attachments field must be an ``AttachmentReference`` (removing any
    /// string is allowed: it removes nothing when it is not there).
    private func checkAttachments(_ values: [String], field: String) throws(ProtocolError) {
        for value in values {
            if let problem = AttachmentReference.problem(element: value) {
                throw ProtocolError(.invalidField, "\"\(field)\": \(problem)")
            }
        }
    }

    func checkText(_ text: String, field: String) throws(ProtocolError) {
        guard text.utf16.count <= limits.maxTextLength else {
            throw ProtocolError(.tooLarge, "\"\(field)\" is longer than \(limits.maxTextLength) UTF-16 code units")
        }
    }

    private func uniqued(_ values: [String]) -> [String] {
        var seen = Set<String>()
        return values.filter { seen.insert($0).inserted }
    }
}

/// Checks for the canonical text form of a UUID.
public enum UUIDText {
    /// True for 36 characters `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` of lower-case hex digits.
    public static func isCanonical(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                if byte != UInt8(ascii: "-") { return false }
            default:
                let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
                let isHex = byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")
                if !isDigit && !isHex { return false }
            }
        }
        return true
    }
}
