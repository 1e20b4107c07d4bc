import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NotedCore

/// `/v1/blobs/{sha256}`: attachments' bytes, content-addressed and kept once per user
/// (docs/protocol.md, "Attachments"). `PUT` uploads a whole file, `PATCH` continues an
/// interrupted upload from the offset `HEAD` reports (tus 1.0 core's `Upload-Offset` and
/// `Upload-Length`), `GET` reads with `Range` support.
extension Routes {
    /// How much of a request body is gathered before it is written: one piece of the upload.
    static let blobPieceBytes = 1 << 20

    /// Types served as themselves (shown by a browser); any other is served as
    /// `application/octet-stream` with `Content-Disposition: attachment`. No HTML, no SVG, no
    /// XML, nothing a browser would run.
    static let inlineBlobTypes: Set<String> = [
        "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp", "image/heic", "image/heif",
        "application/pdf", "text/plain",
        "audio/mpeg", "audio/mp4", "audio/aac", "audio/ogg", "audio/wav", "audio/webm", "audio/flac",
        "video/mp4", "video/webm", "video/ogg", "video/quicktime",
    ]

    func addBlobRoutes(to router: some RouterMethods<NotedRequestContext>) {
        router.put("/v1/blobs/:sha256") { request, context -> Response in
            let (user, sha256) = try await blobRequest(request, context)
            guard let declared = request.headers[.contentLength].flatMap({ Int64($0) }), declared >= 0 else {
                throw APIError(.lengthRequired, "length_required", "send the file with a Content-Length")
            }
            try checkBlobSize(declared)
            if let blob = try await store.storedBlob(userID: user.userID, sha256: sha256) {
                // Already here: nothing to write (the body is not read).
                return blobStoredResponse(blob, status: .ok)
            }
            let type = Self.mediaType(request.headers[.contentType])
            let upload = try await beginUpload(user: user.userID, sha256: sha256, length: declared, type: type)
            // A PUT resends the whole file: what an interrupted upload already holds is skipped.
            let offset = try await receive(
                request.body, user: user.userID, sha256: sha256, skip: upload.offset, from: upload.offset,
                length: declared)
            guard offset == declared else {
                throw APIError(
                    .badRequest, "incomplete",
                    "the body ended after \(offset) of \(declared) bytes; continue with PATCH from Upload-Offset")
            }
            return blobStoredResponse(try await finish(user: user.userID, sha256: sha256), status: .created)
        }

        router.patch("/v1/blobs/:sha256") { request, context -> Response in
            let (user, sha256) = try await blobRequest(request, context)
            let contentType = request.headers[.contentType].map {
                $0.split(separator: ";")[0].trimmingCharacters(in: .whitespaces).lowercased()
            }
            guard contentType == "application/offset+octet-stream" else {
                throw APIError(
                    .unsupportedMediaType, "unsupported_media_type",
                    "a PATCH carries Content-Type: application/offset+octet-stream")
            }
            guard let offset = request.headers[Self.uploadOffset].flatMap({ Int64($0) }), offset >= 0 else {
                throw APIError(
                    .badRequest, "bad_request", "Upload-Offset (the bytes the server has, from HEAD) is required")
            }
            guard let length = request.headers[Self.uploadLength].flatMap({ Int64($0) }), length >= 0 else {
                throw APIError(.badRequest, "bad_request", "Upload-Length (the file's size) is required")
            }
            try checkBlobSize(length)
            if let blob = try await store.storedBlob(userID: user.userID, sha256: sha256) {
                var response = Response(status: .noContent)
                response.headers[Self.uploadOffset] = String(blob.size)
                return response
            }
            let type = Self.mediaType(request.headers[Self.blobType])
            let upload = try await beginUpload(user: user.userID, sha256: sha256, length: length, type: type)
            guard upload.offset == offset else { throw Self.offsetMismatch(upload.offset) }
            // A piece that does not end the upload carries at least `minimumPieceBytes`: each
            // piece is a row of its own on PostgreSQL, and a read is a query per row
            // (security-3 M4: a 25 MiB file sent as 1 KiB PATCHes was 25,600 rows).
            if let declared = request.headers[.contentLength].flatMap({ Int64($0) }), declared < Self.minimumPieceBytes,
                offset + declared < length
            {
                throw APIError(
                    .badRequest, "piece_too_small",
                    "a PATCH that does not end the upload carries at least \(Self.minimumPieceBytes) bytes")
            }
            let reached = try await receive(
                request.body, user: user.userID, sha256: sha256, skip: 0, from: offset, length: length)
            if reached == length { _ = try await finish(user: user.userID, sha256: sha256) }
            var response = Response(status: .noContent)
            response.headers[Self.uploadOffset] = String(reached)
            return response
        }

        router.head("/v1/blobs/:sha256") { request, context -> Response in
            let (user, sha256) = try await blobRequest(request, context)
            var response = Response(status: .ok)
            response.headers[.cacheControl] = "no-store"
            if let blob = try await store.storedBlob(userID: user.userID, sha256: sha256) {
                response.headers[.contentLength] = String(blob.size)
                response.headers[.contentType] = Self.servedType(blob.type)
                response.headers[Self.uploadOffset] = String(blob.size)
                response.headers[Self.uploadLength] = String(blob.size)
                return response
            }
            response.status = .notFound
            if let upload = try await store.blobUpload(userID: user.userID, sha256: sha256) {
                response.headers[Self.uploadOffset] = String(upload.offset)
                response.headers[Self.uploadLength] = String(upload.length)
            } else {
                response.headers[Self.uploadOffset] = "0"
            }
            return response
        }

        let readers = UserSlots(perUser: Self.blobReadsPerUser)
        router.get("/v1/blobs/:sha256") { request, context -> Response in
            let (user, sha256) = try await blobRequest(request, context)
            // A few reads of one user at once: on PostgreSQL each is queries on the shared pool.
            let reading: UserSlots.Slot
            do {
                reading = try readers.take(user.userID)
            } catch {
                var busy = APIError(
                    .tooManyRequests, "rate_limited",
                    "this account is reading \(Self.blobReadsPerUser) files at once; try again when one is done")
                busy.headers[.retryAfter] = "1"
                throw busy
            }
            guard let blob = try await store.storedBlob(userID: user.userID, sha256: sha256) else {
                throw APIError(.notFound, "not_found", "no such blob")
            }
            var headers = Self.blobHeaders(blob)
            var status = HTTPResponse.Status.ok
            var range: Range<Int64> = 0..<blob.size
            switch Self.byteRange(request.headers[.range], size: blob.size) {
            case .whole:
                break
            case .part(let part):
                range = part
                status = .partialContent
                headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(blob.size)"
            case .unsatisfiable:
                var error = APIError(.rangeNotSatisfiable, "range_not_satisfiable", "the blob is \(blob.size) bytes")
                error.headers[.contentRange] = "bytes */\(blob.size)"
                throw error
            }
            headers[.contentLength] = String(range.count)
            guard let pieces = try await store.readBlob(userID: user.userID, sha256: sha256, range: range) else {
                throw APIError(.notFound, "not_found", "no such blob")
            }
            // Each piece is written (and the client has taken it) before the next is asked for:
            // a client that does not read holds one piece, not the whole file.
            return Response(
                status: status, headers: headers,
                body: ResponseBody { writer in
                    defer { withExtendedLifetime(reading) {} }
                    for try await piece in pieces { try await writer.write(piece) }
                    try await writer.finish(nil)
                })
        }

        // A page of the user's files by hash (`after`, `limit` up to 1,000); `limit=0` answers
        // the limits alone (the web app's check before an upload).
        router.get("/v1/blobs") { request, context -> Response in
            let user = try context.requireIdentity()
            let query = request.uri.queryParameters
            var limit = 1000
            if let text = query.get("limit") {
                guard let value = Int(text), (0...1000).contains(value) else {
                    throw APIError(.badRequest, "bad_request", "limit is a number from 0 to 1000")
                }
                limit = value
            }
            let after = query.get("after").map { String($0) }
            if let after, !AttachmentReference.isSHA256(after) {
                throw APIError(
                    .badRequest, "bad_request", "after is a blob's SHA-256, as the page before gave it in next")
            }
            let blobs =
                limit == 0 ? [] : try await store.storedBlobs(userID: user.userID, after: after, limit: limit + 1)
            let page = blobs.prefix(limit)
            let usage = try await store.usage(userID: user.userID)
            var body: [String: JSONValue] = [
                "blobs": .array(
                    page.map { blob in
                        [
                            "sha256": .string(blob.sha256), "size": .int(blob.size), "type": .string(blob.type),
                            "createdAt": .string(Timestamp.format(blob.createdAt)),
                        ]
                    }),
                "next": blobs.count > limit ? page.last.map { .string($0.sha256) } ?? .null : .null,
                "storedBytes": .int(usage.bytes + usage.history),
                "maxBlobBytes": .int(Int64(configuration.maxBlobBytes)),
                "blobCount": .int(Int64(try await store.blobCount(userID: user.userID))),
            ]
            body["quotaBytes"] = configuration.quota.bytes.map(JSONValue.int) ?? .null
            body["maxBlobs"] = configuration.maxBlobs.map { .int(Int64($0)) } ?? .null
            return .json(.object(body))
        }
    }

    /// The least a PATCH that does not end its upload carries.
    static let minimumPieceBytes: Int64 = 32 * 1024
    /// Reads of one user's blobs at once on a node; more are answered 429.
    static let blobReadsPerUser = 8

    static let uploadOffset = HTTPField.Name("Upload-Offset")!
    static let uploadLength = HTTPField.Name("Upload-Length")!
    static let blobType = HTTPField.Name("Noted-Blob-Type")!

    private func blobRequest(_ request: Request, _ context: NotedRequestContext) async throws -> (VerifiedToken, String)
    {
        let user = try context.requireIdentity()
        let sha256 = try context.parameters.require("sha256")
        guard AttachmentReference.isSHA256(sha256) else {
            throw APIError(.badRequest, "bad_request", "a blob is named by its SHA-256: 64 lower-case hex digits")
        }
        return (user, sha256)
    }

    private func checkBlobSize(_ size: Int64) throws {
        guard size <= Int64(configuration.maxBlobBytes) else {
            throw APIError(
                .contentTooLarge, "too_large",
                "the file is \(size) bytes; this server takes files of at most \(configuration.maxBlobBytes) bytes (--max-blob-bytes)"
            )
        }
    }

    private func beginUpload(user: String, sha256: String, length: Int64, type: String) async throws -> BlobUploadState
    {
        // As many files as the account may hold (counted with the uploads under way; two
        // uploads begun at the same moment may each pass the last place).
        if let maxBlobs = configuration.maxBlobs, try await store.blobUpload(userID: user, sha256: sha256) == nil,
            try await store.blobCount(userID: user) >= maxBlobs
        {
            throw Self.apiError(BlobError.tooManyBlobs(limit: maxBlobs))
        }
        do {
            return try await store.beginBlobUpload(
                userID: user, sha256: sha256, length: length, type: type, quota: configuration.quota.bytes, now: Date())
        } catch let error as BlobError {
            throw Self.apiError(error)
        } catch is AccountDeleted {
            throw APIError(.unauthorized, "unauthenticated", "the account was deleted")
        }
    }

    private func finish(user: String, sha256: String) async throws -> StoredBlob {
        do {
            return try await store.finishBlobUpload(userID: user, sha256: sha256, now: Date())
        } catch let error as BlobError {
            throw Self.apiError(error)
        } catch is AccountDeleted {
            throw APIError(.unauthorized, "unauthenticated", "the account was deleted")
        }
    }

    /// Writes the body after its first `skip` bytes, in pieces, from `from`; answers the upload's
    /// offset when the body ends. When it breaks off (the client went away), what arrived is
    /// written and made durable first: the upload continues from there.
    private func receive(_ body: RequestBody, user: String, sha256: String, skip: Int64, from: Int64, length: Int64)
        async throws -> Int64
    {
        var offset = from
        var skipping = skip
        var pending = ByteBuffer()
        func flush() async throws {
            guard pending.readableBytes > 0 else { return }
            do {
                offset = try await store.appendBlobUpload(
                    userID: user, sha256: sha256, offset: offset, bytes: pending, now: Date())
            } catch let error as BlobError {
                throw Self.apiError(error)
            }
            pending.clear()
        }
        do {
            for try await var piece in body {
                if skipping > 0 {
                    let dropped = Int(min(Int64(piece.readableBytes), skipping))
                    piece.moveReaderIndex(forwardBy: dropped)
                    skipping -= Int64(dropped)
                }
                guard offset + Int64(pending.readableBytes) + Int64(piece.readableBytes) <= length else {
                    try await flush()
                    try await store.syncBlobUpload(userID: user, sha256: sha256)
                    throw APIError(.badRequest, "bad_request", "the body is longer than the upload's \(length) bytes")
                }
                pending.writeBuffer(&piece)
                if pending.readableBytes >= Self.blobPieceBytes { try await flush() }
            }
        } catch {
            try? await flush()
            try? await store.syncBlobUpload(userID: user, sha256: sha256)
            throw error
        }
        try await flush()
        try await store.syncBlobUpload(userID: user, sha256: sha256)
        return offset
    }

    private func blobStoredResponse(_ blob: StoredBlob, status: HTTPResponse.Status) -> Response {
        var response = Response.json(
            ["sha256": .string(blob.sha256), "size": .int(blob.size), "type": .string(blob.type)], status: status)
        response.headers[Self.uploadOffset] = String(blob.size)
        return response
    }

    static func offsetMismatch(_ offset: Int64) -> APIError {
        var error = APIError(
            .conflict, "offset_mismatch", "the server has \(offset) bytes of this upload; continue from there")
        error.headers[uploadOffset] = String(offset)
        return error
    }

    static func apiError(_ error: BlobError) -> APIError {
        switch error {
        case .hashMismatch(let actual):
            return APIError(
                .badRequest, "hash_mismatch",
                "the bytes received hash to \(actual), not the name they were sent under; nothing was kept")
        case .offsetMismatch(let expected):
            return offsetMismatch(expected)
        case .lengthMismatch(let expected):
            return APIError(.conflict, "length_mismatch", "the upload under way is \(expected) bytes long")
        case .quotaExceeded(let quota, let stored):
            return APIError(
                .contentTooLarge, "quota_exceeded",
                "this account may store at most \(quota) bytes (it stores \(stored)); delete something first")
        case .tooManyBlobs(let limit):
            return APIError(
                .contentTooLarge, "quota_exceeded", "this account may hold at most \(limit) files; delete some first")
        case .beyondLength:
            return APIError(.badRequest, "bad_request", "the body goes beyond the upload's length")
        case .noUpload:
            return APIError(.notFound, "not_found", "no upload of this blob is under way")
        }
    }

    /// The type a blob is stored with: the header's `type/subtype` in lower case, or
    /// `application/octet-stream` when there is none or it is not one.
    static func mediaType(_ header: String?) -> String {
        guard let header else { return "application/octet-stream" }
        let type =
            header.split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            } ?? ""
        return AttachmentReference.isMediaType(type) ? type : "application/octet-stream"
    }

    /// The `Content-Type` a blob is served with.
    static func servedType(_ type: String) -> String {
        guard inlineBlobTypes.contains(type) else { return "application/octet-stream" }
        return type == "text/plain" ? "text/plain; charset=utf-8" : type
    }

    /// What keeps a user's file from acting on the server's origin: a type from the safe list
    /// or a download, no sniffing, a sandbox, and no caching by anyone but the user's browser.
    static func blobHeaders(_ blob: StoredBlob) -> HTTPFields {
        var headers = HTTPFields()
        headers[.contentType] = servedType(blob.type)
        if !inlineBlobTypes.contains(blob.type) { headers[.contentDisposition] = "attachment" }
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[.contentSecurityPolicy] = "default-src 'none'; sandbox"
        // Not kept in a browser's HTTP cache (security-3 L2): the web app keeps the files it
        // needs in the account's own database, which signing out can remove; a cached copy
        // would outlive that for a year.
        headers[.cacheControl] = "private, no-store"
        // The answer depends on whose token asks: a browser's cache must not give one account's
        // copy to another account signed in on the same browser.
        headers[.vary] = "Authorization"
        headers[.eTag] = "\"\(blob.sha256)\""
        headers[.acceptRanges] = "bytes"
        return headers
    }

    enum ByteRange: Equatable {
        case whole
        case part(Range<Int64>)
        case unsatisfiable
    }

    /// Reads a `Range` header (RFC 9110 section 14): one `bytes=` range (`a-b`, `a-`, `-n`).
    /// Several ranges, another unit or a malformed header are ignored (the whole blob is
    /// answered, as the RFC allows); a range wholly beyond the end is unsatisfiable.
    static func byteRange(_ header: String?, size: Int64) -> ByteRange {
        guard let header, header.hasPrefix("bytes="), !header.contains(",") else { return .whole }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .whole }
        let first = parts[0].isEmpty ? nil : Int64(parts[0])
        let last = parts[1].isEmpty ? nil : Int64(parts[1])
        if !parts[0].isEmpty && first == nil || !parts[1].isEmpty && last == nil { return .whole }
        switch (first, last) {
        case (let start?, let end):
            if let end, end < start { return .whole }
            guard start < size else { return .unsatisfiable }
            // Clamped before the + 1: `bytes=0-9223372036854775807` must not overflow.
            return .part(start..<(min(size - 1, end ?? size - 1) + 1))
        case (nil, let suffix?):
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix)..<size)
        case (nil, nil):
            return .whole
        }
    }
}
