/// Builders for the messages the server sends.
public enum ServerMessage {
    public static func error(_ error: ProtocolError, rid: RequestID? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "type": "error",
            "code": .string(error.code.rawValue),
            "message": .string(error.message),
        ]
        object["rid"] = rid?.json
        return .object(object)
    }

    public static func reject(_ error: ProtocolError, identity: ChangeIdentity, current: Record? = nil, rid: RequestID? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "type": "reject",
            "code": .string(error.code.rawValue),
            "message": .string(error.message),
        ]
        object["ccid"] = identity.ccid.map(JSONValue.string)
        object["collection"] = identity.collection.map(JSONValue.string)
        object["id"] = identity.id.map(JSONValue.string)
        object["current"] = current?.json
        object["rid"] = rid?.json
        return .object(object)
    }

    public static func changes(records: [Record], cursor: Int64, more: Bool, reset: Bool, rid: RequestID? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "type": "changes",
            "records": .array(records.map(\.json)),
            "cursor": .int(cursor),
            "more": .bool(more),
            "reset": .bool(reset),
        ]
        object["rid"] = rid?.json
        return .object(object)
    }

    /// Adds (or replaces) `rid` in a message object.
    public static func with(rid: RequestID?, _ message: JSONValue) -> JSONValue {
        guard var object = message.objectValue else { return message }
        object["rid"] = rid?.json
        return .object(object)
    }
}
