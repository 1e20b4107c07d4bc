#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A message from the server over the sync WebSocket (docs/protocol.md sections 3–5).
///
/// The server builds these and sends ``json``; the client reads every server message through
/// ``decode(_:)``. Those two are the only places that know the wire form.
public enum ServerMessage: Sendable, Hashable {
    case welcome(Welcome)
    case changes(ChangesPage)
    case ack(Ack)
    case reject(Reject)
    /// A broadcast of a change committed by another connection of the same user.
    case change(Broadcast)
    case error(ServerError)
    /// Protocol 2: the user's spaces changed.
    case spaces(SpacesUpdate)

    /// The request id the message answers, if any.
    public var rid: RequestID? {
        switch self {
        case .welcome(let message): message.rid
        case .changes(let message): message.rid
        case .ack(let message): message.rid
        case .reject(let message): message.rid
        case .change, .spaces: nil
        case .error(let message): message.rid
        }
    }

    /// The same message answering `rid` (a stored `ack` replayed for another request, say).
    public func with(rid: RequestID?) -> ServerMessage {
        switch self {
        case .welcome(var message):
            message.rid = rid
            return .welcome(message)
        case .changes(var message):
            message.rid = rid
            return .changes(message)
        case .ack(var message):
            message.rid = rid
            return .ack(message)
        case .reject(var message):
            message.rid = rid
            return .reject(message)
        case .change, .spaces: return self
        case .error(var message):
            message.rid = rid
            return .error(message)
        }
    }

    /// The wire form.
    public var json: JSONValue {
        var object: [String: JSONValue]
        switch self {
        case .welcome(let message): object = message.wireObject
        case .changes(let message): object = message.wireObject
        case .ack(let message): object = message.wireObject
        case .reject(let message): object = message.wireObject
        case .change(let message): object = message.wireObject
        case .error(let message): object = message.wireObject
        case .spaces(let message): object = message.wireObject
        }
        object["rid"] = rid?.json
        return .object(object)
    }

    /// Reads a server message; nil for a message type this client does not know (ignored, so
    /// that a newer server may add messages).
    public static func decode(_ value: JSONValue) throws(ProtocolError) -> ServerMessage? {
        guard let object = value.objectValue, let type = object["type"]?.stringValue else {
            throw ProtocolError(.invalidMessage, "a server message must be an object with a \"type\"")
        }
        var reader = MessageReader(object: object, type: type)
        let rid = ClientMessage.requestID(of: value)
        switch type {
        case "welcome": return .welcome(try Welcome(reader: &reader, rid: rid))
        case "changes": return .changes(try ChangesPage(reader: &reader, rid: rid))
        case "ack": return .ack(try Ack(reader: &reader, rid: rid))
        case "reject": return .reject(try Reject(reader: &reader, rid: rid))
        case "change": return .change(try Broadcast(reader: &reader))
        case "error": return .error(try ServerError(reader: &reader, rid: rid))
        case "spaces": return .spaces(SpacesUpdate(spaces: object["spaces"]?.arrayValue ?? []))
        default: return nil
        }
    }
}

/// The answer to `hello` and `reauth`.
public struct Welcome: Sendable, Hashable {
    public var user: String
    /// The user's latest `seq`.
    public var seq: Int64
    /// When the access token expires.
    public var expiresAt: Date?
    public var limits: Limits
    public var rid: RequestID?
    /// The protocol the session speaks (1 or 2).
    public var version: Int64 = 1
    /// Protocol 2: the spaces the user is a member of (docs/protocol.md, "Spaces"), as
    /// `GET /v1/spaces` lists them.
    public var spaces: [JSONValue]?

    public init(user: String, seq: Int64, expiresAt: Date?, limits: Limits, rid: RequestID? = nil) {
        self.user = user
        self.seq = seq
        self.expiresAt = expiresAt
        self.limits = limits
        self.rid = rid
    }

    var wireObject: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "type": "welcome", "protocol": .int(version), "user": .string(user), "seq": .int(seq),
            "limits": limits.json,
        ]
        object["expiresAt"] = expiresAt.map { .string(Timestamp.format($0)) }
        object["spaces"] = spaces.map(JSONValue.array)
        return object
    }

    init(reader: inout MessageReader, rid: RequestID?) throws(ProtocolError) {
        user = try reader.string("user")
        seq = try reader.int("seq")
        expiresAt = try reader.optionalDate("expiresAt")
        limits = reader.object["limits"].map(Limits.init(json:)) ?? Limits()
        version = reader.object["protocol"]?.intValue ?? 1
        spaces = reader.object["spaces"]?.arrayValue
        self.rid = rid
    }
}

/// One page of a pull.
public struct ChangesPage: Sendable, Hashable {
    public var records: [Record]
    /// The `seq` to pull from next.
    public var cursor: Int64
    public var more: Bool
    /// The pages are a full snapshot (the pull's `since` was older than tombstone retention).
    public var reset: Bool
    public var rid: RequestID?
    /// The shared space the page is of (protocol 2); nil for the personal space.
    public var space: String?

    public init(records: [Record], cursor: Int64, more: Bool, reset: Bool, rid: RequestID? = nil) {
        self.records = records
        self.cursor = cursor
        self.more = more
        self.reset = reset
        self.rid = rid
    }

    var wireObject: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "type": "changes", "records": .array(records.map(\.json)), "cursor": .int(cursor), "more": .bool(more),
            "reset": .bool(reset),
        ]
        object["space"] = space.map(JSONValue.string)
        return object
    }

    init(reader: inout MessageReader, rid: RequestID?) throws(ProtocolError) {
        cursor = try reader.int("cursor")
        // A record this client cannot read is skipped, as a record of an unknown kind would be.
        records = (reader.object["records"]?.arrayValue ?? []).compactMap { try? Record(json: $0) }
        more = reader.object["more"]?.boolValue ?? false
        reset = reader.object["reset"]?.boolValue ?? false
        space = reader.object["space"]?.stringValue
        self.rid = rid
    }
}

/// A change the server applied.
public struct Ack: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        /// `baseRev` was the current `rev`: applied exactly.
        case applied
        /// The record had moved on; `fields` holds the merged state.
        case merged
        /// This `ccid` was applied before: the original result again.
        case duplicate
    }

    public var ccid: String
    public var collection: String
    public var id: String
    public var rev: Int64
    public var seq: Int64?
    public var status: Status
    /// The record's full state at `rev`, after a merge.
    public var fields: [String: JSONValue]?
    /// Text fields where part of the edit could not be placed (after a merge).
    public var conflicts: [String]?
    public var rid: RequestID?

    public init(
        ccid: String, collection: String, id: String, rev: Int64, seq: Int64? = nil, status: Status,
        fields: [String: JSONValue]? = nil, conflicts: [String]? = nil, rid: RequestID? = nil
    ) {
        self.ccid = ccid
        self.collection = collection
        self.id = id
        self.rev = rev
        self.seq = seq
        self.status = status
        self.fields = fields
        self.conflicts = conflicts
        self.rid = rid
    }

    var wireObject: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "type": "ack", "ccid": .string(ccid), "collection": .string(collection), "id": .string(id),
            "rev": .int(rev), "status": .string(status.rawValue),
        ]
        object["seq"] = seq.map(JSONValue.int)
        object["fields"] = fields.map(JSONValue.object)
        object["conflicts"] = conflicts.map { .array($0.map(JSONValue.string)) }
        return object
    }

    init(reader: inout MessageReader, rid: RequestID?) throws(ProtocolError) {
        ccid = try reader.string("ccid")
        collection = try reader.string("collection")
        id = try reader.string("id")
        rev = try reader.int("rev")
        seq = reader.object["seq"]?.intValue
        guard let status = Status(rawValue: try reader.string("status")) else {
            throw ProtocolError(.invalidMessage, "ack: unknown status")
        }
        self.status = status
        fields = reader.object["fields"]?.objectValue
        conflicts = reader.object["conflicts"]?.arrayValue.map { $0.compactMap(\.stringValue) }
        self.rid = rid
    }
}

/// A change the server refused.
public struct Reject: Sendable, Hashable {
    public var code: ErrorCode
    public var message: String
    public var ccid: String?
    public var collection: String?
    public var id: String?
    /// The record's current state, where it helps the client.
    public var current: Record?
    public var rid: RequestID?

    public init(_ error: ProtocolError, identity: ChangeIdentity, current: Record? = nil, rid: RequestID? = nil) {
        code = error.code
        message = error.message
        ccid = identity.ccid
        collection = identity.collection
        id = identity.id
        self.current = current
        self.rid = rid
    }

    var wireObject: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "type": "reject", "code": .string(code.rawValue), "message": .string(message),
        ]
        object["ccid"] = ccid.map(JSONValue.string)
        object["collection"] = collection.map(JSONValue.string)
        object["id"] = id.map(JSONValue.string)
        object["current"] = current?.json
        return object
    }

    init(reader: inout MessageReader, rid: RequestID?) throws(ProtocolError) {
        code = ErrorCode(rawValue: try reader.string("code"))
        message = reader.object["message"]?.stringValue ?? code.rawValue
        ccid = reader.object["ccid"]?.stringValue
        collection = reader.object["collection"]?.stringValue
        id = reader.object["id"]?.stringValue
        current = reader.object["current"].flatMap { try? Record(json: $0) }
        self.rid = rid
    }
}

/// A change committed by another connection of the same user: its ops against `prevRev`.
public struct Broadcast: Sendable, Hashable {
    public var collection: String
    public var id: String
    public var rev: Int64
    public var prevRev: Int64
    public var seq: Int64?
    public var op: Change.Operation
    /// Field ops against the record at `prevRev` (docs/protocol.md section 5).
    public var fields: [String: JSONValue]
    public var updatedAt: Date
    /// The shared space the record is in (protocol 2); nil for the personal space.
    public var space: String?

    public init(
        collection: String, id: String, rev: Int64, prevRev: Int64, seq: Int64? = nil, op: Change.Operation,
        fields: [String: JSONValue], updatedAt: Date
    ) {
        self.collection = collection
        self.id = id
        self.rev = rev
        self.prevRev = prevRev
        self.seq = seq
        self.op = op
        self.fields = fields
        self.updatedAt = updatedAt
    }

    /// A record's latest state as a broadcast: `set` ops against the previous revision.
    public init(record: Record) {
        self.init(
            collection: record.collection, id: record.id, rev: record.rev, prevRev: record.rev - 1, seq: record.seq,
            op: record.deleted ? .delete : .upsert,
            fields: record.deleted ? [:] : record.fields.mapValues { ["set": $0] },
            updatedAt: record.updatedAt)
    }

    var wireObject: [String: JSONValue] {
        var object: [String: JSONValue] = [
            "type": "change", "collection": .string(collection), "id": .string(id), "rev": .int(rev),
            "prevRev": .int(prevRev),
            "op": .string(op.rawValue), "fields": .object(fields), "updatedAt": .string(Timestamp.format(updatedAt)),
        ]
        object["seq"] = seq.map(JSONValue.int)
        object["space"] = space.map(JSONValue.string)
        return object
    }

    init(reader: inout MessageReader) throws(ProtocolError) {
        collection = try reader.string("collection")
        id = try reader.string("id")
        rev = try reader.int("rev")
        prevRev = try reader.int("prevRev")
        seq = reader.object["seq"]?.intValue
        guard let op = Change.Operation(rawValue: reader.object["op"]?.stringValue ?? "upsert") else {
            throw ProtocolError(.invalidMessage, "change: unknown op")
        }
        self.op = op
        fields = reader.object["fields"]?.objectValue ?? [:]
        updatedAt = try reader.optionalDate("updatedAt") ?? Date()
        space = reader.object["space"]?.stringValue
    }
}

/// Protocol 2: the user's spaces, sent whenever their membership changes (docs/protocol.md,
/// "Spaces"); each as `GET /v1/spaces` lists it.
public struct SpacesUpdate: Sendable, Hashable {
    public var spaces: [JSONValue]

    public init(spaces: [JSONValue]) {
        self.spaces = spaces
    }

    var wireObject: [String: JSONValue] {
        ["type": "spaces", "spaces": .array(spaces)]
    }
}

/// A request (or the session) failed.
public struct ServerError: Sendable, Hashable {
    public var code: ErrorCode
    public var message: String
    public var rid: RequestID?

    public init(_ error: ProtocolError, rid: RequestID? = nil) {
        code = error.code
        message = error.message
        self.rid = rid
    }

    var wireObject: [String: JSONValue] {
        ["type": "error", "code": .string(code.rawValue), "message": .string(message)]
    }

    init(reader: inout MessageReader, rid: RequestID?) throws(ProtocolError) {
        code = ErrorCode(rawValue: reader.object["code"]?.stringValue ?? "error")
        message = reader.object["message"]?.stringValue ?? code.rawValue
        self.rid = rid
    }
}

extension ServerMessage {
    /// The status an `ack` reports, or the code of a `reject` or `error` (for metrics and logs).
    public var outcome: String {
        switch self {
        case .ack(let ack): ack.status.rawValue
        case .reject(let reject): reject.code.rawValue
        case .error(let error): error.code.rawValue
        case .welcome: "welcome"
        case .changes: "changes"
        case .change: "change"
        case .spaces: "spaces"
        }
    }
}

/// Reads the fields of one message, with errors that name the message and the field.
struct MessageReader {
    let object: [String: JSONValue]
    let type: String

    func string(_ key: String) throws(ProtocolError) -> String {
        guard let value = object[key]?.stringValue else { throw missing(key, "a string") }
        return value
    }

    func int(_ key: String) throws(ProtocolError) -> Int64 {
        guard let value = object[key]?.intValue else { throw missing(key, "an integer") }
        return value
    }

    func optionalDate(_ key: String) throws(ProtocolError) -> Date? {
        guard let value = object[key], value != .null else { return nil }
        guard let text = value.stringValue, let date = Timestamp.parse(text) else {
            throw missing(key, "an RFC 3339 time")
        }
        return date
    }

    private func missing(_ key: String, _ kind: String) -> ProtocolError {
        ProtocolError(.invalidMessage, "\(type): \"\(key)\" must be \(kind)")
    }
}
