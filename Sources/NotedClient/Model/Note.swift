import Foundation
import NotedCore

/// A note as the user sees it: the local state of a record of the `notes` collection.
public struct Note: Sendable, Hashable, Identifiable {
    /// The lower-case UUID of the record.
    public var id: String
    public var title: String
    public var body: String
    /// Tags in the order they were added; no duplicates.
    public var tags: [String]
    public var folder: String?
    public var pinned: Bool
    public var trashed: Bool
    /// The server revision the local state is based on; 0 until the server first acknowledged it.
    public var rev: Int64
    /// When the note was written: its `created` field when it came from another app, else
    /// when it was first stored.
    public var createdAt: Date
    /// When the note last changed, locally or on the server (or in the app it was imported
    /// from, until it is edited here: its `modified` field).
    public var updatedAt: Date
    /// The `created` and `modified` fields themselves (nil for notes written here).
    public var created: Date? = nil
    public var modified: Date? = nil
    /// The `attachments` field: one ``AttachmentReference`` element per file.
    public var attachments: [String] = []
    /// True while local edits are not yet acknowledged by the server.
    public var pending: Bool
    /// Why the server refused this device's last change for good: the local version stays
    /// here, unsynced, until it is edited into shape (then it syncs) or discarded
    /// (`NotedClient.discardLocalChanges`, then the server's version returns).
    public var refusal: String? = nil
    /// The shared space the note is in (protocol 2, docs/protocol.md "Spaces"); nil for the
    /// personal space.
    public var space: String? = nil

    /// The wire fields of the note.
    public var fields: [String: JSONValue] {
        NoteFields(
            title: title, body: body, tags: tags, folder: folder, pinned: pinned, trashed: trashed, created: created,
            modified: modified,
            attachments: attachments
        ).json
    }

    /// A JSON object for the command line and for apps: id, title, body, tags, folder, pinned,
    /// trashed, rev, createdAt, updatedAt, pending, refusal (null unless refused), attachments
    /// (objects with sha256, size, type and name), and space (the shared space's id; only for a
    /// note in one).
    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(id), "title": .string(title), "body": .string(body),
            "tags": .array(tags.map(JSONValue.string)), "folder": folder.map(JSONValue.string) ?? .null,
            "pinned": .bool(pinned), "trashed": .bool(trashed), "rev": .int(rev),
            "createdAt": .string(Timestamp.format(createdAt)), "updatedAt": .string(Timestamp.format(updatedAt)),
            "pending": .bool(pending), "refusal": refusal.map(JSONValue.string) ?? .null,
            "attachments": .array(attachments.compactMap(AttachmentReference.init(element:)).map(\.json)),
        ]
        object["space"] = space.map(JSONValue.string)
        return .object(object)
    }
}

extension AttachmentReference {
    /// `{"sha256","size","type","name"}`: how the command line and apps show an attachment.
    public var json: JSONValue {
        ["sha256": .string(sha256), "size": .int(size), "type": .string(type), "name": .string(name)]
    }
}

/// The typed fields of a note, converted from and to the wire's JSON object.
public struct NoteFields: Sendable, Hashable {
    public var title: String = ""
    public var body: String = ""
    public var tags: [String] = []
    public var folder: String? = nil
    public var pinned: Bool = false
    public var trashed: Bool = false

    /// When the note was written and last changed in the app it was imported from (the
    /// `created` and `modified` fields); nil for notes written here, whose dates are the
    /// record's. An edit of the note's content here clears `modified`.
    public var created: Date? = nil
    public var modified: Date? = nil
    /// The files attached (the `attachments` field): one ``AttachmentReference`` element each
    /// (docs/protocol.md, "Attachments"). ``NotedClient/attach(_:data:name:type:)`` adds one.
    public var attachments: [String] = []

    public init(
        title: String = "", body: String = "", tags: [String] = [], folder: String? = nil, pinned: Bool = false,
        trashed: Bool = false,
        created: Date? = nil, modified: Date? = nil, attachments: [String] = []
    ) {
        self.attachments = attachments
        self.title = title
        self.body = body
        self.tags = tags
        self.folder = folder
        self.pinned = pinned
        self.trashed = trashed
        self.created = created
        self.modified = modified
    }

    /// Reads fields as the server sends them; missing or mistyped fields read as their defaults.
    public init(json: [String: JSONValue]) {
        title = json["title"]?.stringValue ?? ""
        body = json["body"]?.stringValue ?? ""
        tags = (json["tags"]?.arrayValue ?? []).compactMap(\.stringValue)
        folder = json["folder"]?.stringValue
        pinned = json["pinned"]?.boolValue ?? false
        trashed = json["trashed"]?.boolValue ?? false
        created = Self.date(json["created"])
        modified = Self.date(json["modified"])
        attachments = (json["attachments"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    /// The attachments that are well-formed references, in the field's order.
    public var attachmentReferences: [AttachmentReference] {
        attachments.compactMap(AttachmentReference.init(element:))
    }

    /// A date field (milliseconds since 1970) as a date; nil when missing or not a number.
    static func date(_ value: JSONValue?) -> Date? {
        guard let millis = value?.numberValue else { return nil }
        return Date(timeIntervalSince1970: millis / 1000)
    }

    /// A date as a date field holds it: whole milliseconds since 1970.
    static func millis(_ date: Date?) -> JSONValue {
        guard let date else { return .null }
        return .int(Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// Whether `other` has the same content: text, tags (in any order), folder.
    func sameContent(as other: NoteFields) -> Bool {
        title == other.title && body == other.body && Set(tags) == Set(other.tags) && folder == other.folder
    }

    /// Every field of the `notes` schema.
    public var json: [String: JSONValue] {
        [
            "title": .string(title), "body": .string(body), "tags": .array(tags.map(JSONValue.string)),
            "folder": folder.map(JSONValue.string) ?? .null, "pinned": .bool(pinned), "trashed": .bool(trashed),
            "created": Self.millis(created), "modified": Self.millis(modified),
            "attachments": .array(attachments.map(JSONValue.string)),
        ]
    }
}

/// Notes are one collection among others: `client.records(NoteFields.self)` is the typed API
/// of the `notes` collection, the same one every app's collection has.
extension NoteFields: SyncedRecord {
    public static var schema: CollectionSchema { .notes }

    public init(fields: [String: JSONValue]) {
        self.init(json: fields)
    }

    public func fields() -> [String: JSONValue] {
        json
    }

    public init(from decoder: any Decoder) throws {
        self.init(json: try JSONValue(from: decoder).objectValue ?? [:])
    }

    public func encode(to encoder: any Encoder) throws {
        try JSONValue.object(json).encode(to: encoder)
    }
}
