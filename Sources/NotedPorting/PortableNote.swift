import Crypto
import Foundation
import NotedCore

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
    /// Files the note carries (images, PDFs…), which the body shows with
    /// `![name](attachment:SHA256)` or `[name](attachment:SHA256)`.
    public var attachments: [PortableAttachment] = []

    public init(
        id: String, title: String, body: String, tags: [String] = [], folder: String? = nil, pinned: Bool = false,
        trashed: Bool = false, created: Date?, updated: Date?, attachments: [PortableAttachment] = []
    ) {
        self.attachments = attachments
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

/// A file of a note, as an export holds it.
public struct PortableAttachment: Sendable, Hashable {
    public var name: String
    /// A lower-case MIME type (`application/octet-stream` when the source gave none usable).
    public var type: String
    /// The bytes, in memory; empty when they are in the file `source` instead.
    public var data: Data
    /// The lower-case hex SHA-256 of the bytes: the name Noted stores it under.
    public let sha256: String
    /// The number of bytes.
    public let size: Int64
    /// A file holding the bytes, for an export too large to hold in memory (the server's).
    public var source: URL?

    public init(name: String, type: String?, data: Data) {
        self.name = name.isEmpty ? "attachment" : name
        self.type = Self.cleanType(type, name: name)
        self.data = data
        self.sha256 = Array(SHA256.hash(data: data)).lowercaseHex
        self.size = Int64(data.count)
    }

    /// Bytes already hashed (an importer hashes each file of an export once, however many notes
    /// name it).
    init(name: String, type: String?, data: Data, sha256: String) {
        self.name = name.isEmpty ? "attachment" : name
        self.type = Self.cleanType(type, name: name)
        self.data = data
        self.sha256 = sha256
        self.size = Int64(data.count)
    }

    /// A file whose bytes are in `source` (already checked to hash to `sha256`).
    public init(name: String, type: String?, sha256: String, size: Int64, source: URL) {
        self.name = name.isEmpty ? "attachment" : name
        self.type = Self.cleanType(type, name: name)
        self.data = Data()
        self.sha256 = sha256
        self.size = size
        self.source = source
    }

    static func cleanType(_ type: String?, name: String) -> String {
        let cleaned =
            (type ?? "").split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            } ?? ""
        return AttachmentReference.isMediaType(cleaned) ? cleaned : guessType(name)
    }

    /// The Markdown that shows it in a body: inline for an image, a link for anything else.
    public var markdown: String {
        let label = name.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "]", with: "\\]")
            .replacingOccurrences(of: "[", with: "\\[")
        return (type.hasPrefix("image/") ? "!" : "") + "[\(label)](attachment:\(sha256))"
    }

    /// The element of a note's `attachments` field for it, its name shortened to fit `limit`.
    public func reference(limit: Int) -> AttachmentReference? {
        guard let fitted = AttachmentReference.fittedName(name, sha256: sha256, size: size, type: type, limit: limit)
        else { return nil }
        return AttachmentReference(sha256: sha256, size: size, type: type, name: fitted)
    }

    /// A type from the file name's extension, for sources (and `noted attach`) that give none.
    public static func guessType(_ name: String) -> String {
        let known = [
            "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
            "avif": "image/avif", "bmp": "image/bmp", "heic": "image/heic", "heif": "image/heif",
            "svg": "image/svg+xml",
            "pdf": "application/pdf", "txt": "text/plain", "md": "text/markdown", "csv": "text/csv",
            "html": "text/html",
            "json": "application/json", "zip": "application/zip",
            "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "ogg": "audio/ogg", "oga": "audio/ogg",
            "wav": "audio/wav",
            "flac": "audio/flac", "mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime",
            "webm": "video/webm",
            "doc": "application/msword",
            "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ]
        return known[(name as NSString).pathExtension.lowercased()] ?? "application/octet-stream"
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
