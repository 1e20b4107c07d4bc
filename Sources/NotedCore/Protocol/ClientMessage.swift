/// A request id a client attached to a message, echoed on every answer.
public enum RequestID: Sendable, Hashable {
    case string(String)
    case int(Int64)

    public var json: JSONValue {
        switch self {
        case .string(let value): .string(value)
        case .int(let value): .int(value)
        }
    }
}

/// A message from a client over the sync WebSocket.
public enum ClientMessage: Sendable, Hashable {
    case hello(protocol: Int64, token: String?, device: String?, client: String?)
    case reauth(token: String)
    /// `snapshot`: this pull starts (`since` 0) or continues a snapshot (docs/protocol.md,
    /// section 8, "Pull"): its pages are bounded and a cursor below the purge point is no reset.
    /// `space`: protocol 2, a shared space's id (nil: the personal space).
    case pull(since: Int64, limit: Int, snapshot: Bool = false, space: String? = nil)
    /// The raw changes: each is validated on its own so that one bad change gets its own reject.
    case push(changes: [JSONValue])

    /// The default and largest `limit` of a pull.
    public static let defaultPullLimit = 500
    public static let maxPullLimit = 1000
    /// The longest space id a message may name.
    public static let maxSpaceIDBytes = 200

    /// The wire form, answered with `rid`: what a client sends.
    public func json(rid: RequestID?) -> JSONValue {
        var object: [String: JSONValue]
        switch self {
        case .hello(let version, let token, let device, let client):
            object = ["type": "hello", "protocol": .int(version)]
            object["token"] = token.map(JSONValue.string)
            object["device"] = device.map(JSONValue.string)
            object["client"] = client.map(JSONValue.string)
        case .reauth(let token):
            object = ["type": "reauth", "token": .string(token)]
        case .pull(let since, let limit, let snapshot, let space):
            object = ["type": "pull", "since": .int(since), "limit": .int(Int64(limit))]
            if snapshot { object["snapshot"] = true }
            object["space"] = space.map(JSONValue.string)
        case .push(let changes):
            object = ["type": "push", "changes": .array(changes)]
        }
        object["rid"] = rid?.json
        return .object(object)
    }

    /// The text of a `push` of changes encoded already (each a change object's JSON text, as a
    /// client stores it when it makes the change): spliced in, not decoded and encoded again.
    public static func pushText(changes: [String], rid: RequestID?) -> String {
        var text = #"{"type":"push","changes":["# + changes.joined(separator: ",") + "]"
        if let rid { text += #","rid":"# + rid.json.jsonString }
        return text + "}"
    }

    /// Reads the request id of a message, if it has a valid one.
    public static func requestID(of value: JSONValue) -> RequestID? {
        switch value["rid"] {
        case .string(let text)?: .string(text)
        case .int(let number)?: .int(number)
        default: nil
        }
    }

    /// Validates a parsed message.
    public static func parse(_ value: JSONValue) throws(ProtocolError) -> ClientMessage {
        guard let object = value.objectValue else {
            throw ProtocolError(.badRequest, "a message must be a JSON object")
        }
        if let rid = object["rid"] {
            switch rid {
            case .string, .int: break
            default: throw ProtocolError(.badRequest, "rid must be a string or an integer")
            }
        }
        guard let typeValue = object["type"] else {
            throw ProtocolError(.badRequest, "the message has no \"type\"")
        }
        guard let type = typeValue.stringValue else {
            throw ProtocolError(.badRequest, "\"type\" must be a string")
        }
        switch type {
        case "hello":
            guard let version = object["protocol"]?.intValue else {
                throw ProtocolError(.badRequest, "hello needs \"protocol\": 1")
            }
            let token = try optionalString(object, "token")
            let device = try optionalString(object, "device")
            if let device, !UUIDText.isCanonical(device) {
                throw ProtocolError(.badRequest, "device must be a lower-case UUID string")
            }
            let client = try optionalString(object, "client")
            return .hello(protocol: version, token: token, device: device, client: client)
        case "reauth":
            guard let token = object["token"]?.stringValue else {
                throw ProtocolError(.badRequest, "reauth needs a \"token\" string")
            }
            return .reauth(token: token)
        case "pull":
            guard let since = object["since"]?.intValue, since >= 0, since <= ChangeParser.maxSafeInteger else {
                throw ProtocolError(.badRequest, "since must be an integer from 0 to 2^53-1")
            }
            var limit = defaultPullLimit
            if let limitValue = object["limit"] {
                guard let number = limitValue.intValue, number >= 1, number <= Int64(maxPullLimit) else {
                    throw ProtocolError(.badRequest, "limit must be an integer from 1 to \(maxPullLimit)")
                }
                limit = Int(number)
            }
            var snapshot = false
            if let flag = object["snapshot"] {
                guard let value = flag.boolValue else {
                    throw ProtocolError(.badRequest, "snapshot must be true or false")
                }
                snapshot = value
            }
            let space = try optionalString(object, "space")
            if let space, space.isEmpty || space.utf8.count > maxSpaceIDBytes {
                throw ProtocolError(.badRequest, "space must be a space's id")
            }
            return .pull(since: since, limit: limit, snapshot: snapshot, space: space)
        case "push":
            guard let changes = object["changes"]?.arrayValue else {
                throw ProtocolError(.badRequest, "push needs a \"changes\" array")
            }
            return .push(changes: changes)
        default:
            throw ProtocolError(.unknownType, "unknown message type")
        }
    }

    private static func optionalString(_ object: [String: JSONValue], _ key: String) throws(ProtocolError) -> String? {
        guard let value = object[key], value != .null else { return nil }
        guard let text = value.stringValue else {
            throw ProtocolError(.badRequest, "\"\(key)\" must be a string")
        }
        return text
    }
}
