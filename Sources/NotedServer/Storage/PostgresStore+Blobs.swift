import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NotedCore
import PostgresNIO

/// Blobs in PostgreSQL: rows of metadata and the bytes in chunks (`blob_chunks`, one row per
/// piece an upload wrote, keyed by its offset), so that every node serves every blob and an
/// upload begun on one node resumes on another. Each piece commits on its own: what an upload
/// wrote survives a crash of the node or the connection.
extension PostgresStore: BlobStore {
    /// What the user stores in the shared spaces they own, as the quota counts it.
    static func ownedElsewhere(_ userID: String, _ connection: PostgresConnection, logger: Logger) async throws
        -> Int64
    {
        for try await bytes in try await connection.query(
            """
            SELECT COALESCE(SUM(q.stored_bytes + q.history_bytes), 0)::bigint FROM user_seq q
            WHERE q.user_id IN (SELECT id FROM spaces WHERE owner_id = \(userID) AND id <> \(userID))
            """, logger: logger
        ).decode(Int64.self) {
            return bytes
        }
        return 0
    }

    static let blobsMigration: (String, [PostgresQuery]) = (
        "blobs",
        [
            """
            CREATE TABLE blobs (
                user_id TEXT NOT NULL, sha256 TEXT NOT NULL, size BIGINT NOT NULL, type TEXT NOT NULL, created_at BIGINT NOT NULL,
                PRIMARY KEY (user_id, sha256))
            """,
            "CREATE INDEX blobs_by_age ON blobs(created_at)",
            """
            CREATE TABLE blob_uploads (
                user_id TEXT NOT NULL, sha256 TEXT NOT NULL, length BIGINT NOT NULL, received BIGINT NOT NULL DEFAULT 0,
                type TEXT NOT NULL, updated_at BIGINT NOT NULL,
                PRIMARY KEY (user_id, sha256))
            """,
            """
            CREATE TABLE blob_chunks (
                user_id TEXT NOT NULL, sha256 TEXT NOT NULL, position BIGINT NOT NULL, data BYTEA NOT NULL,
                PRIMARY KEY (user_id, sha256, position))
            """,
        ]
    )

    public func storedBlob(userID: String, sha256: String) async throws -> StoredBlob? {
        let rows = try await client.query(
            "SELECT sha256, size, type, created_at FROM blobs WHERE user_id = \(userID) AND sha256 = \(sha256)",
            logger: logger)
        for try await (hash, size, type, created) in rows.decode((String, Int64, String, Int64).self) {
            return StoredBlob(sha256: hash, size: size, type: type, createdAt: Date(millis: created))
        }
        return nil
    }

    public func storedBlobs(userID: String, after: String?, limit: Int) async throws -> [StoredBlob] {
        let rows = try await client.query(
            """
            SELECT sha256, size, type, created_at FROM blobs WHERE user_id = \(userID) AND sha256 > \(after ?? "")
            ORDER BY sha256 LIMIT \(Int64(min(limit, Int(Int32.max))))
            """, logger: logger)
        var blobs: [StoredBlob] = []
        for try await (hash, size, type, created) in rows.decode((String, Int64, String, Int64).self) {
            blobs.append(StoredBlob(sha256: hash, size: size, type: type, createdAt: Date(millis: created)))
        }
        return blobs
    }

    public func blobCount(userID: String) async throws -> Int {
        let rows = try await client.query(
            """
            SELECT (SELECT COUNT(*) FROM blobs WHERE user_id = \(userID)) + (SELECT COUNT(*) FROM blob_uploads WHERE user_id = \(userID))
            """, logger: logger)
        for try await count in rows.decode(Int64.self) { return Int(count) }
        return 0
    }

    /// Blobs stored before charges counted their size; from now on ``BlobCharge``.
    static let blobChargeMigration: (String, [PostgresQuery]) = (
        "blob-charge",
        [
            PostgresQuery(
                unsafeSQL: """
                    UPDATE user_seq SET stored_bytes = stored_bytes + (
                        SELECT COALESCE(SUM(\(BlobCharge.sql("b.size")) - b.size), 0) FROM blobs b WHERE b.user_id = user_seq.user_id)
                    """)
        ]
    )

    public func blobUpload(userID: String, sha256: String) async throws -> BlobUploadState? {
        let rows = try await client.query(
            "SELECT received, length, type FROM blob_uploads WHERE user_id = \(userID) AND sha256 = \(sha256)",
            logger: logger)
        for try await (received, length, type) in rows.decode((Int64, Int64, String).self) {
            return BlobUploadState(offset: received, length: length, type: type)
        }
        return nil
    }

    public func beginBlobUpload(userID: String, sha256: String, length: Int64, type: String, quota: Int64?, now: Date)
        async throws -> BlobUploadState
    {
        let logger = self.logger
        return try await blobTransaction { connection in
            // The user's row, locked as pushes and the collector lock it.
            var stored: Int64?
            for try await bytes in try await connection.query(
                "SELECT stored_bytes + history_bytes FROM user_seq WHERE user_id = \(userID) FOR UPDATE", logger: logger
            ).decode(Int64.self) {
                stored = bytes
            }
            guard let stored else { throw AccountDeleted() }
            for try await (received, existing, kept) in try await connection.query(
                "SELECT received, length, type FROM blob_uploads WHERE user_id = \(userID) AND sha256 = \(sha256)",
                logger: logger
            ).decode((Int64, Int64, String).self) {
                guard existing == length else { throw BlobError.lengthMismatch(expected: existing) }
                try await connection.query(
                    "UPDATE blob_uploads SET updated_at = \(now.millis) WHERE user_id = \(userID) AND sha256 = \(sha256)",
                    logger: logger)
                return BlobUploadState(offset: received, length: length, type: kept)
            }
            if let quota {
                // Every space the user owns counts (docs/security.md, "Storage per account").
                let stored = stored + (try await Self.ownedElsewhere(userID, connection, logger: logger))
                var pending: Int64 = 0
                for try await sum in try await connection.query(
                    "SELECT COALESCE(SUM(\(unescaped: BlobCharge.sql("length"))), 0)::BIGINT FROM blob_uploads WHERE user_id = \(userID)",
                    logger: logger
                ).decode(Int64.self) {
                    pending = sum
                }
                if stored + pending + BlobCharge.of(length) > quota {
                    throw BlobError.quotaExceeded(quota: quota, stored: stored + pending)
                }
            }
            // Pieces left by an upload that was collected start over.
            try await connection.query(
                """
                DELETE FROM blob_chunks WHERE user_id = \(userID) AND sha256 = \(sha256)
                  AND NOT EXISTS (SELECT 1 FROM blobs WHERE user_id = \(userID) AND sha256 = \(sha256))
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO blob_uploads (user_id, sha256, length, received, type, updated_at)
                VALUES (\(userID), \(sha256), \(length), 0, \(type), \(now.millis))
                """, logger: logger)
            return BlobUploadState(offset: 0, length: length, type: type)
        }
    }

    public func appendBlobUpload(userID: String, sha256: String, offset: Int64, bytes: ByteBuffer, now: Date)
        async throws -> Int64
    {
        let logger = self.logger
        return try await blobTransaction { connection in
            var received: Int64?
            var length: Int64 = 0
            for try await (at, total) in try await connection.query(
                "SELECT received, length FROM blob_uploads WHERE user_id = \(userID) AND sha256 = \(sha256) FOR UPDATE",
                logger: logger
            ).decode((Int64, Int64).self) {
                received = at
                length = total
            }
            guard let received else { throw BlobError.noUpload }
            guard received == offset else { throw BlobError.offsetMismatch(expected: received) }
            let end = offset + Int64(bytes.readableBytes)
            guard end <= length else { throw BlobError.beyondLength }
            try await connection.query(
                """
                INSERT INTO blob_chunks (user_id, sha256, position, data) VALUES (\(userID), \(sha256), \(offset), \(bytes))
                """, logger: logger)
            try await connection.query(
                """
                UPDATE blob_uploads SET received = \(end), updated_at = \(now.millis) WHERE user_id = \(userID) AND sha256 = \(sha256)
                """, logger: logger)
            return end
        }
    }

    /// Every piece commits as it is written.
    public func syncBlobUpload(userID: String, sha256: String) async throws {}

    public func finishBlobUpload(userID: String, sha256: String, now: Date) async throws -> StoredBlob {
        guard let upload = try await blobUpload(userID: userID, sha256: sha256) else {
            if let blob = try await storedBlob(userID: userID, sha256: sha256) { return blob }
            throw BlobError.noUpload
        }
        var hasher = SHA256()
        var counted: Int64 = 0
        let rows = try await client.query(
            "SELECT data FROM blob_chunks WHERE user_id = \(userID) AND sha256 = \(sha256) ORDER BY position",
            logger: logger)
        for try await data in rows.decode(ByteBuffer.self) {
            data.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            counted += Int64(data.readableBytes)
        }
        let hex = Array(hasher.finalize()).lowercaseHex
        let logger = self.logger
        let size = counted
        guard hex == sha256, size == upload.length else {
            try await blobTransaction { connection in
                try await connection.query(
                    "DELETE FROM blob_uploads WHERE user_id = \(userID) AND sha256 = \(sha256)", logger: logger)
                try await connection.query(
                    """
                    DELETE FROM blob_chunks WHERE user_id = \(userID) AND sha256 = \(sha256)
                      AND NOT EXISTS (SELECT 1 FROM blobs WHERE user_id = \(userID) AND sha256 = \(sha256))
                    """, logger: logger)
            }
            throw BlobError.hashMismatch(actual: hex)
        }
        return try await blobTransaction { connection in
            var exists = false
            for try await _ in try await connection.query(
                "SELECT seq FROM user_seq WHERE user_id = \(userID) FOR UPDATE", logger: logger
            ).decode(Int64.self) {
                exists = true
            }
            guard exists else { throw AccountDeleted() }
            try await connection.query(
                "DELETE FROM blob_uploads WHERE user_id = \(userID) AND sha256 = \(sha256)", logger: logger)
            for try await (hash, size, type, created) in try await connection.query(
                "SELECT sha256, size, type, created_at FROM blobs WHERE user_id = \(userID) AND sha256 = \(sha256)",
                logger: logger
            ).decode((String, Int64, String, Int64).self) {
                return StoredBlob(sha256: hash, size: size, type: type, createdAt: Date(millis: created))
            }
            // Checked again now that it is whole (security-3 L1).
            if let quota = processor.quota.bytes {
                let elsewhere = try await Self.ownedElsewhere(userID, connection, logger: logger)
                for try await own in try await connection.query(
                    "SELECT stored_bytes + history_bytes FROM user_seq WHERE user_id = \(userID)", logger: logger
                ).decode(Int64.self) where own + elsewhere + BlobCharge.of(size) > quota {
                    throw BlobError.quotaExceeded(quota: quota, stored: own + elsewhere)
                }
            }
            try await connection.query(
                """
                INSERT INTO blobs (user_id, sha256, size, type, created_at) VALUES (\(userID), \(sha256), \(size), \(upload.type), \(now.millis))
                """, logger: logger)
            try await connection.query(
                "UPDATE user_seq SET stored_bytes = stored_bytes + \(BlobCharge.of(size)) WHERE user_id = \(userID)",
                logger: logger)
            return StoredBlob(sha256: sha256, size: size, type: upload.type, createdAt: now)
        }
    }

    public func readBlob(userID: String, sha256: String, range: Range<Int64>) async throws -> BlobPieces? {
        guard try await storedBlob(userID: userID, sha256: sha256) != nil else { return nil }
        let client = self.client
        let logger = self.logger
        return BlobPieces {
            // One row (up to a MiB) per piece, asked for when the last one was taken.
            let position = NIOLockedValueBox(range.lowerBound)
            return {
                let at = position.withLockedValue { $0 }
                guard at < range.upperBound else { return nil }
                var found: (Int64, ByteBuffer)?
                for try await (start, data) in try await client.query(
                    """
                    SELECT position, data FROM blob_chunks
                    WHERE user_id = \(userID) AND sha256 = \(sha256) AND position <= \(at)
                    ORDER BY position DESC LIMIT 1
                    """, logger: logger
                ).decode((Int64, ByteBuffer).self) {
                    found = (start, data)
                }
                guard let (start, data) = found, start + Int64(data.readableBytes) > at else {
                    throw StoreError.corrupt("blob \(sha256) has no piece at \(at)")
                }
                let from = Int(at - start)
                let count = Int(min(Int64(data.readableBytes - from), range.upperBound - at))
                guard let slice = data.getSlice(at: data.readerIndex + from, length: count) else {
                    throw StoreError.corrupt("blob piece")
                }
                position.withLockedValue { $0 = at + Int64(count) }
                return slice
            }
        }
    }

    public func collectBlobs(storedBefore: Date, uploadsBefore: Date) async throws -> BlobCollection {
        var collection = BlobCollection()
        var candidates: [String: [(sha256: String, size: Int64)]] = [:]
        for try await (user, hash, size) in try await client.query(
            "SELECT user_id, sha256, size FROM blobs WHERE created_at < \(storedBefore.millis)", logger: logger
        ).decode((String, String, Int64).self) {
            candidates[user, default: []].append((hash, size))
        }
        for (userID, blobs) in candidates {
            let removed = try await removeUnreferenced(blobs, of: userID, storedBefore: storedBefore)
            collection.blobs += removed.count
            collection.bytes += removed.bytes
        }
        collection.uploads = try await removeStaleUploads(before: uploadsBefore)
        return collection
    }

    /// Deletes those of a user's `blobs` that no record or kept revision references.
    private func removeUnreferenced(
        _ blobs: [(sha256: String, size: Int64)], of userID: String, storedBefore: Date
    ) async throws -> (count: Int, bytes: Int64) {
        let fields = processor.schemas.attachmentFields
        let logger = self.logger
        var latest: Int64 = 0
        for try await value in try await client.query(
            "SELECT seq FROM user_seq WHERE user_id = \(userID)", logger: logger
        ).decode(Int64.self) {
            latest = value
        }
        let seq = latest
        let referenced = try await Self.referencedBlobs(userID: userID, fields: fields, afterSeq: nil) {
            try await client.query($0, logger: logger)
        }
        let unreferenced = blobs.filter { !referenced.contains($0.sha256) }
        guard !unreferenced.isEmpty else { return (0, 0) }
        return try await blobTransaction { connection -> (count: Int, bytes: Int64) in
            // Locked as a push locks it: no push of this user adds a reference meanwhile, and
            // what pushes added since `seq` is looked at again.
            var locked = false
            for try await _ in try await connection.query(
                "SELECT seq FROM user_seq WHERE user_id = \(userID) FOR UPDATE", logger: logger
            ).decode(Int64.self) {
                locked = true
            }
            guard locked else { return (0, 0) }
            let recent = try await Self.referencedBlobs(userID: userID, fields: fields, afterSeq: seq) {
                try await connection.query($0, logger: logger)
            }
            var count = 0
            var bytes: Int64 = 0
            var charged: Int64 = 0
            for blob in unreferenced where !recent.contains(blob.sha256) {
                for try await size in try await connection.query(
                    """
                    DELETE FROM blobs WHERE user_id = \(userID) AND sha256 = \(blob.sha256) AND created_at < \(storedBefore.millis) RETURNING size
                    """, logger: logger
                ).decode(Int64.self) {
                    count += 1
                    bytes += size
                    charged += BlobCharge.of(size)
                    try await connection.query(
                        "DELETE FROM blob_chunks WHERE user_id = \(userID) AND sha256 = \(blob.sha256)", logger: logger)
                }
            }
            try await connection.query(
                "UPDATE user_seq SET stored_bytes = GREATEST(0, stored_bytes - \(charged)) WHERE user_id = \(userID)",
                logger: logger)
            return (count, bytes)
        }
    }

    /// Deletes the uploads not written to since `before`, with their chunks; how many.
    private func removeStaleUploads(before: Date) async throws -> Int {
        let logger = self.logger
        return try await blobTransaction { connection in
            var stale: [(String, String)] = []
            for try await row in try await connection.query(
                "DELETE FROM blob_uploads WHERE updated_at < \(before.millis) RETURNING user_id, sha256", logger: logger
            ).decode((String, String).self) {
                stale.append(row)
            }
            for (userID, hash) in stale {
                try await connection.query(
                    """
                    DELETE FROM blob_chunks WHERE user_id = \(userID) AND sha256 = \(hash)
                      AND NOT EXISTS (SELECT 1 FROM blobs WHERE user_id = \(userID) AND sha256 = \(hash))
                    """, logger: logger)
            }
            return stale.count
        }
    }

    /// A transaction whose refusals (``BlobError``, ``AccountDeleted``) come out as themselves.
    private func blobTransaction<T>(
        isolation: isolated (any Actor)? = #isolation, _ body: (PostgresConnection) async throws -> sending T
    ) async throws -> sending T {
        do {
            return try await client.withTransaction(logger: logger, isolation: isolation, body)
        } catch let error as PostgresTransactionError {
            if let refusal = error.closureError as? BlobError { throw refusal }
            if error.closureError is AccountDeleted { throw AccountDeleted() }
            throw error
        }
    }

    private static func referencedQuery(userID: String, collection: String, marker: String, afterSeq: Int64?)
        -> [PostgresQuery]
    {
        guard let afterSeq else {
            return [
                "SELECT fields FROM records WHERE user_id = \(userID) AND collection = \(collection) AND NOT deleted AND strpos(fields, \(marker)) > 0",
                "SELECT fields FROM revisions WHERE user_id = \(userID) AND collection = \(collection) AND strpos(fields, \(marker)) > 0",
            ]
        }
        return [
            """
            SELECT fields FROM records WHERE user_id = \(userID) AND seq > \(afterSeq) AND collection = \(collection)
              AND NOT deleted AND strpos(fields, \(marker)) > 0
            """,
            """
            SELECT v.fields FROM records r JOIN revisions v
              ON v.user_id = r.user_id AND v.collection = r.collection AND v.record_id = r.id
            WHERE r.user_id = \(userID) AND r.seq > \(afterSeq) AND r.collection = \(collection) AND v.seq > \(afterSeq)
              AND strpos(v.fields, \(marker)) > 0
            """,
        ]
    }

    /// The attachment hashes the user's live records and kept revisions name (only those
    /// changed after `afterSeq`, when given), read with `rows` (the client's pool, or a
    /// transaction's connection).
    static func referencedBlobs(
        userID: String, fields: [(collection: String, field: String)], afterSeq: Int64?,
        rows: (PostgresQuery) async throws -> PostgresRowSequence
    ) async throws -> Set<String> {
        var result = Set<String>()
        for (collection, field) in fields {
            for query in referencedQuery(
                userID: userID, collection: collection, marker: AttachmentScan.marker(field), afterSeq: afterSeq)
            {
                for try await text in try await rows(query).decode(String.self) {
                    AttachmentScan.hashes(in: text, fields: [field], into: &result)
                }
            }
        }
        return result
    }
}
