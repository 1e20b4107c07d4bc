import Foundation

/// A note as it leaves or enters Noted: every field a person wrote, its id and its dates,
/// with nothing of the sync machinery. Export writes these; every importer reads into them.
public struct PortableNote: Sendable, Hashable {
    /// The note's lower-case UUID.
    public var id: String
    public var title: String
    public var body: String
    public var tags: [String]
    /// Slash-separated folder path (`Work/Projects`), or nil.
    public var folder: String?
    public var pinned: Bool
    public var trashed: Bool
    /// When the note was written and last changed, as its source says; nil when the source
    /// does not say (a plain Markdown file), so that importing it again changes nothing.
    public var created: Date?
    public var updated: Date?

    public init(
        id: String, title: String, body: String, tags: [String] = [], folder: String? = nil, pinned: Bool = false,
        trashed: Bool = false, created: Date?, updated: Date?
    ) {
        self.id = id
        self.title = title
        self.body = body
        self.tags = tags
        self.folder = folder
        self.pinned = pinned
        self.trashed = trashed
        self.created = created
        self.updated = updated
    }
}

/// One kept version of a note, for an export with history.
public struct PortableRevision: Sendable, Hashable {
    public var rev: Int64
    public var updated: String
    public var conflict: Bool
    public var title: String
    public var body: String
    public var tags: [String]

    public init(rev: Int64, updated: String, conflict: Bool, title: String, body: String, tags: [String]) {
        self.rev = rev
        self.updated = updated
        self.conflict = conflict
        self.title = title
        self.body = body
        self.tags = tags
    }
}
