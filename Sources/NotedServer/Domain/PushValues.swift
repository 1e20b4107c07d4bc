import Foundation
import NotedCore

// The values a push works with, below both the stores (which run it) and the sync path
// (which asks for it): see PushAlgorithm.

/// One entry of a record's history.
public struct RevisionInfo: Sendable, Hashable {
    public var rev: Int64
    public var seq: Int64
    public var updatedAt: Date
    public var device: String?
    public var ccid: String?
    public var conflict: Bool
    public var fields: [String: JSONValue]
    /// Bytes of the revision's fields as compact JSON (nil where not known).
    public var size: Int64? = nil
    /// The user whose change made it (nil for revisions saved before authors were kept).
    public var author: String? = nil
    /// The author's username, where read (nil: unknown, or the account is gone).
    public var authorName: String? = nil

    public var summaryJSON: JSONValue {
        var object: [String: JSONValue] = [
            "rev": .int(rev), "seq": .int(seq), "updatedAt": .string(Timestamp.format(updatedAt)),
            "conflict": .bool(conflict),
        ]
        object["device"] = device.map(JSONValue.string) ?? .null
        object["ccid"] = ccid.map(JSONValue.string) ?? .null
        if let size { object["size"] = .int(size) }
        object["author"] = authorName.map(JSONValue.string) ?? .null
        return .object(object)
    }

    public var fullJSON: JSONValue {
        guard case .object(var object) = summaryJSON else { return summaryJSON }
        object["fields"] = .object(fields)
        return .object(object)
    }
}

/// Who pushes, from where, and when.
public struct PushContext: Sendable {
    /// The space the change is to: its records, `seq` and history are keyed by it (a personal
    /// space's id is its user's).
    public var userID: String
    public var device: String?
    public var now: Date
    /// SHA-256 of the change's canonical JSON, to tell a resend from a reused `ccid`.
    public var bodyHash: String
    /// The user making the change when the space is a shared one: their role in it is checked
    /// in the push's transaction (nil: the space is the user's personal one).
    public var author: String?

    public init(userID: String, device: String?, now: Date, bodyHash: String, author: String? = nil) {
        self.userID = userID
        self.device = device
        self.now = now
        self.bodyHash = bodyHash
        self.author = author
    }

    /// The member whose role is to be checked, for a change to a shared space.
    var sharedAuthor: String? { author.flatMap { $0 == userID ? nil : $0 } }
}

/// The answer to one change and, when it was committed, the `change` message for other connections.
public struct PushResult: Sendable {
    /// An `ack` or `reject` message (without `rid`).
    public var reply: ServerMessage
    /// The broadcast `change` message, when the change was committed now.
    public var broadcast: Broadcast?
    /// The seq committed, when the change was committed now.
    public var committedSeq: Int64?

    /// The ack's status or the reject's code.
    public var status: String { reply.outcome }
}

extension Change {
    /// About how many bytes the change's ops carry (its texts and set elements).
    var estimatedBytes: Int {
        var bytes = 64
        for (name, op) in fields {
            bytes += name.utf8.count
            switch op {
            case .textSet(let text), .textDelta(let text): bytes += text.utf8.count
            case .setReplace(let values): bytes += values.reduce(0) { $0 + $1.utf8.count }
            case .setAddRemove(let add, let remove): bytes += (add + remove).reduce(0) { $0 + $1.utf8.count }
            case .scalarSet: bytes += 16
            }
        }
        return bytes
    }
}
