import Foundation
import NIOCore
import NotedCore

/// A file a user stored (`PUT /v1/blobs/{sha256}`): content-addressed, once per user
/// (docs/protocol.md, "Attachments").
public struct StoredBlob: Sendable, Hashable {
    public var sha256: String
    public var size: Int64
    /// The type given at upload (a lower-case MIME type, or `application/octet-stream`).
    public var type: String
    public var createdAt: Date
}

/// An upload begun and not finished: the bytes `0..<offset` of a blob of `length` bytes.
public struct BlobUploadState: Sendable, Hashable {
    public var offset: Int64
    public var length: Int64
    public var type: String
}

/// A blob's bytes as pieces, each read only when the one before has been taken: a client
/// that does not read holds one piece of memory, not the file.
public struct BlobPieces: AsyncSequence, Sendable {
    public typealias Element = ByteBuffer
    /// Makes an iterator's reader: each call answers the next piece, nil at the end.
    let reader: @Sendable () -> (@Sendable () async throws -> ByteBuffer?)

    public struct AsyncIterator: AsyncIteratorProtocol {
        let nextPiece: @Sendable () async throws -> ByteBuffer?
        public mutating func next() async throws -> ByteBuffer? { try await nextPiece() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(nextPiece: reader()) }
}

/// What ``BlobStore/collectBlobs(storedBefore:uploadsBefore:)`` removed.
public struct BlobCollection: Sendable, Hashable {
    public var blobs = 0
    public var bytes: Int64 = 0
    public var uploads = 0
}

/// Why a blob operation was refused.
public enum BlobError: Error, Sendable, Hashable {
    /// The bytes received do not hash to the name they were sent under; nothing was kept.
    case hashMismatch(actual: String)
    /// The upload's offset is not the one given (the client resumes from `expected`).
    case offsetMismatch(expected: Int64)
    /// A resumed upload names another length than the one begun.
    case lengthMismatch(expected: Int64)
    /// The blob would take the account beyond its quota.
    case quotaExceeded(quota: Int64, stored: Int64)
    /// The account holds as many files as it may (`--max-blobs`).
    case tooManyBlobs(limit: Int)
    /// More bytes than the upload's length.
    case beyondLength
    /// No upload of that blob is under way.
    case noUpload
}

/// The blobs of every user: where their bytes live is the backend's (files in the data
/// directory beside the SQLite database; chunks in PostgreSQL, so every node serves every
/// blob). Each blob's row is in the store's database with the records, so a push decides
/// `missing_blob` inside its own transaction (``PushReads/blobSizes(_:)``) and the garbage
/// collector and the pushes of one user never race.
/// What a blob counts for in the account's bytes (security-3 M4): its size rounded up to 4 KiB,
/// and at least 4 KiB, the least a file (a SQLite backend's blob) or a row takes on disk, so a
/// million three-byte files cost 4 GB of quota, not 3 MB.
public enum BlobCharge {
    public static let unit: Int64 = 4096

    public static func of(_ size: Int64) -> Int64 {
        max(unit, (size + unit - 1) / unit * unit)
    }

    /// The same, in SQL (both backends), for a column or expression `size`.
    static func sql(_ size: String) -> String {
        "(CASE WHEN \(size) <= \(unit) THEN \(unit) ELSE ((\(size) + \(unit - 1)) / \(unit)) * \(unit) END)"
    }
}

extension BlobStore {
    /// Every complete blob of the user, by hash.
    public func storedBlobs(userID: String) async throws -> [StoredBlob] {
        try await storedBlobs(userID: userID, after: nil, limit: .max)
    }
}

public protocol BlobStore {
    func storedBlob(userID: String, sha256: String) async throws -> StoredBlob?
    /// The user's complete blobs by hash, after `after` (exclusive), at most `limit` of them: a
    /// page of `GET /v1/blobs`.
    func storedBlobs(userID: String, after: String?, limit: Int) async throws -> [StoredBlob]
    /// How many blobs the user has, stored or being uploaded (`--max-blobs`).
    func blobCount(userID: String) async throws -> Int
    func blobUpload(userID: String, sha256: String) async throws -> BlobUploadState?
    /// Begins an upload of `length` bytes, or finds the one under way (whose `length` must
    /// match). Refuses `quotaExceeded` when the user's stored bytes, the lengths of their other
    /// uploads under way and this one would be more than `quota`.
    func beginBlobUpload(userID: String, sha256: String, length: Int64, type: String, quota: Int64?, now: Date)
        async throws -> BlobUploadState
    /// Writes `bytes` at `offset` (which must be the upload's offset) and answers the new one.
    func appendBlobUpload(userID: String, sha256: String, offset: Int64, bytes: ByteBuffer, now: Date) async throws
        -> Int64
    /// Makes what was written so far durable (an interrupted upload resumes from it).
    func syncBlobUpload(userID: String, sha256: String) async throws
    /// Checks the complete upload's SHA-256 and stores the blob (durably, counted in the
    /// user's stored bytes); on a mismatch the upload is discarded and `hashMismatch` thrown.
    func finishBlobUpload(userID: String, sha256: String, now: Date) async throws -> StoredBlob
    /// The bytes `range` of a complete blob, in pieces read as they are asked for; nil when the
    /// user has no such blob.
    func readBlob(userID: String, sha256: String, range: Range<Int64>) async throws -> BlobPieces?
    /// Removes blobs stored before `storedBefore` that no record and no kept revision of their
    /// user references, and uploads not written to since `uploadsBefore`.
    func collectBlobs(storedBefore: Date, uploadsBefore: Date) async throws -> BlobCollection
}

extension CollectionSchema {
    /// The names of the fields that hold attachments.
    var attachmentFields: [String] { fields.filter(\.value.attachments).map(\.key).sorted() }
}

extension SchemaRegistry {
    /// Every (collection, field) whose field holds attachments: what the garbage collector reads.
    var attachmentFields: [(collection: String, field: String)] {
        schemas.keys.sorted().flatMap { name in (schemas[name]?.attachmentFields ?? []).map { (name, $0) } }
    }
}

/// Attachment hashes named in a stored fields document's attachment fields.
enum AttachmentScan {
    /// What a fields column holds when `field` has at least one element (the compact JSON of
    /// ``FieldsCoding``): rows without it need not be parsed.
    static func marker(_ field: String) -> String { "\"\(field)\":[\"" }

    static func hashes(in fieldsJSON: String, fields: [String], into result: inout Set<String>) {
        guard let object = try? JSONValue.parse(fieldsJSON).objectValue else { return }
        for field in fields {
            for element in object[field]?.arrayValue ?? [] {
                if let text = element.stringValue, let reference = AttachmentReference(element: text) {
                    result.insert(reference.sha256)
                }
            }
        }
    }
}
