import Foundation
import GRDB
import NIOCore
import NotedCore

/// Blobs on the embedded backend: rows in the database, bytes as files (``BlobFiles``).
extension SQLiteStore: BlobStore {
    /// What a user stores in every space they own (the personal one, whose id is theirs, and
    /// their shared ones), as the quota counts it.
    static let ownedBytesSQL = """
        SELECT COALESCE(SUM(stored_bytes + history_bytes), 0) FROM user_seq
        WHERE user_id = ?1 OR user_id IN (SELECT id FROM spaces WHERE owner_id = ?1)
        """

    static func registerBlobsMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("blobs") { db in
            try db.execute(
                sql: """
                    CREATE TABLE blobs (
                        user_id TEXT NOT NULL,
                        sha256 TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        type TEXT NOT NULL,
                        created_at INTEGER NOT NULL,
                        PRIMARY KEY (user_id, sha256)
                    );
                    CREATE INDEX blobs_by_age ON blobs(created_at);
                    CREATE TABLE blob_uploads (
                        user_id TEXT NOT NULL,
                        sha256 TEXT NOT NULL,
                        length INTEGER NOT NULL,
                        type TEXT NOT NULL,
                        updated_at INTEGER NOT NULL,
                        PRIMARY KEY (user_id, sha256)
                    );
                    """)
        }
    }

    public func storedBlob(userID: String, sha256: String) async throws -> StoredBlob? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT sha256, size, type, created_at FROM blobs WHERE user_id = ? AND sha256 = ?",
                arguments: [userID, sha256]
            ).map(Self.blob)
        }
    }

    public func storedBlobs(userID: String, after: String?, limit: Int) async throws -> [StoredBlob] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql:
                    "SELECT sha256, size, type, created_at FROM blobs WHERE user_id = ? AND sha256 > ? ORDER BY sha256 LIMIT ?",
                arguments: [userID, after ?? "", min(limit, Int(Int32.max))]
            ).map(Self.blob)
        }
    }

    public func blobCount(userID: String) async throws -> Int {
        try await pool.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT (SELECT COUNT(*) FROM blobs WHERE user_id = ?1) + (SELECT COUNT(*) FROM blob_uploads WHERE user_id = ?1)
                    """, arguments: [userID]) ?? 0
        }
    }

    /// Blobs stored before charges: each counted its size; from now on ``BlobCharge``.
    static func registerBlobChargeMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("blob-charge") { db in
            try db.execute(
                sql: """
                    UPDATE user_seq SET stored_bytes = stored_bytes + (
                        SELECT COALESCE(SUM(\(BlobCharge.sql("b.size")) - b.size), 0) FROM blobs b WHERE b.user_id = user_seq.user_id)
                    """)
        }
    }

    private static func blob(_ row: Row) -> StoredBlob {
        StoredBlob(
            sha256: row["sha256"], size: row["size"], type: row["type"], createdAt: Date(millis: row["created_at"]))
    }

    public func blobUpload(userID: String, sha256: String) async throws -> BlobUploadState? {
        let row = try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT length, type FROM blob_uploads WHERE user_id = ? AND sha256 = ?",
                arguments: [userID, sha256])
        }
        guard let row else { return nil }
        return BlobUploadState(
            offset: try blobFiles.uploadOffset(userID: userID, sha256: sha256), length: row["length"], type: row["type"]
        )
    }

    public func beginBlobUpload(userID: String, sha256: String, length: Int64, type: String, quota: Int64?, now: Date)
        async throws -> BlobUploadState
    {
        let (existing, fresh) = try await pool.write { db -> (Row?, Bool) in
            if let row = try Row.fetchOne(
                db, sql: "SELECT length, type FROM blob_uploads WHERE user_id = ? AND sha256 = ?",
                arguments: [userID, sha256])
            {
                guard row["length"] == length else { throw BlobError.lengthMismatch(expected: row["length"]) }
                try db.execute(
                    sql: "UPDATE blob_uploads SET updated_at = ? WHERE user_id = ? AND sha256 = ?",
                    arguments: [now.millis, userID, sha256])
                return (row, false)
            }
            if let quota {
                let stored =
                    try Int64.fetchOne(
                        db, sql: SQLiteStore.ownedBytesSQL,
                        arguments: [userID]) ?? 0
                let pending =
                    try Int64.fetchOne(
                        db,
                        sql: "SELECT COALESCE(SUM(\(BlobCharge.sql("length"))), 0) FROM blob_uploads WHERE user_id = ?",
                        arguments: [userID]) ?? 0
                if stored + pending + BlobCharge.of(length) > quota {
                    throw BlobError.quotaExceeded(quota: quota, stored: stored + pending)
                }
            }
            try db.execute(
                sql: "INSERT INTO blob_uploads (user_id, sha256, length, type, updated_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [userID, sha256, length, type, now.millis])
            return (nil, true)
        }
        if fresh {
            // A file left by an upload whose row was collected (or a crash) starts over.
            try await blobFiles.create(userID: userID, sha256: sha256)
            return BlobUploadState(offset: 0, length: length, type: type)
        }
        return BlobUploadState(
            offset: try blobFiles.uploadOffset(userID: userID, sha256: sha256), length: length,
            type: existing?["type"] ?? type)
    }

    public func appendBlobUpload(userID: String, sha256: String, offset: Int64, bytes: ByteBuffer, now: Date)
        async throws -> Int64
    {
        try await blobFiles.append(userID: userID, sha256: sha256, offset: offset, bytes: bytes)
    }

    public func syncBlobUpload(userID: String, sha256: String) async throws {
        try await blobFiles.sync(userID: userID, sha256: sha256)
        _ = try? await pool.write { db in
            try db.execute(
                sql: "UPDATE blob_uploads SET updated_at = ? WHERE user_id = ? AND sha256 = ?",
                arguments: [Date().millis, userID, sha256])
        }
    }

    public func finishBlobUpload(userID: String, sha256: String, now: Date) async throws -> StoredBlob {
        let upload = try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT length, type FROM blob_uploads WHERE user_id = ? AND sha256 = ?",
                arguments: [userID, sha256])
        }
        guard let upload else {
            if let blob = try await storedBlob(userID: userID, sha256: sha256) { return blob }
            throw BlobError.noUpload
        }
        let (hex, size) = try await blobFiles.digest(userID: userID, sha256: sha256)
        guard hex == sha256, size == upload["length"] as Int64 else {
            try await pool.write { db in
                try db.execute(
                    sql: "DELETE FROM blob_uploads WHERE user_id = ? AND sha256 = ?", arguments: [userID, sha256])
            }
            blobFiles.removeUpload(userID: userID, sha256: sha256)
            throw BlobError.hashMismatch(actual: hex)
        }
        let blob = StoredBlob(sha256: sha256, size: size, type: upload["type"], createdAt: now)
        return try await blobLocks.withLock(userID) {
            // On disk for good before the row says so.
            try await blobFiles.promote(userID: userID, sha256: sha256)
            return try await pool.write { db in
                try db.execute(
                    sql: "DELETE FROM blob_uploads WHERE user_id = ? AND sha256 = ?", arguments: [userID, sha256])
                if let stored = try Row.fetchOne(
                    db, sql: "SELECT sha256, size, type, created_at FROM blobs WHERE user_id = ? AND sha256 = ?",
                    arguments: [userID, sha256])
                {
                    return Self.blob(stored)
                }
                // The account may have been deleted meanwhile: then no row (the file stays
                // behind, in a directory nothing reads).
                guard try Bool.fetchOne(db, sql: "SELECT 1 FROM user_seq WHERE user_id = ?", arguments: [userID]) != nil
                else {
                    throw AccountDeleted()
                }
                // Checked again now that it is whole (security-3 L1: uploads begun under the
                // quota, then pushes, then the uploads finished, made twice the quota).
                if let quota = processor.quota.bytes {
                    let stored =
                        try Int64.fetchOne(
                            db, sql: SQLiteStore.ownedBytesSQL,
                            arguments: [userID]) ?? 0
                    if stored + BlobCharge.of(size) > quota {
                        throw BlobError.quotaExceeded(quota: quota, stored: stored)
                    }
                }
                try db.execute(
                    sql: "INSERT INTO blobs (user_id, sha256, size, type, created_at) VALUES (?, ?, ?, ?, ?)",
                    arguments: [userID, sha256, size, blob.type, now.millis])
                try db.execute(
                    sql: "UPDATE user_seq SET stored_bytes = stored_bytes + ? WHERE user_id = ?",
                    arguments: [BlobCharge.of(size), userID])
                return blob
            }
        }
    }

    public func readBlob(userID: String, sha256: String, range: Range<Int64>) async throws -> BlobPieces? {
        guard try await storedBlob(userID: userID, sha256: sha256) != nil else { return nil }
        return try blobFiles.read(userID: userID, sha256: sha256, range: range)
    }

    public func collectBlobs(storedBefore: Date, uploadsBefore: Date) async throws -> BlobCollection {
        var collection = BlobCollection()
        let fields = processor.schemas.attachmentFields
        // Candidates, by user, read without the writer.
        let candidates = try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT user_id, sha256, size FROM blobs WHERE created_at < ? ORDER BY user_id",
                arguments: [storedBefore.millis]
            )
            .map { (user: $0["user_id"] as String, sha256: $0["sha256"] as String, size: $0["size"] as Int64) }
        }
        for (userID, blobs) in Dictionary(grouping: candidates, by: \.user) {
            // What the user's records and kept revisions reference, read without the writer up
            // to `seq`; the write transaction below looks again at what changed after it.
            let (seq, referenced) = try await pool.read { db in
                let seq =
                    try Int64.fetchOne(db, sql: "SELECT seq FROM user_seq WHERE user_id = ?", arguments: [userID]) ?? 0
                return (seq, try Self.referencedBlobs(db, userID: userID, fields: fields, afterSeq: nil))
            }
            let unreferenced = blobs.filter { !referenced.contains($0.sha256) }
            guard !unreferenced.isEmpty else { continue }
            let removed = try await blobLocks.withLock(userID) { () async throws -> [(sha256: String, size: Int64)] in
                let removed = try await pool.write { db -> [(sha256: String, size: Int64)] in
                    let recent = try Self.referencedBlobs(db, userID: userID, fields: fields, afterSeq: seq)
                    var removed: [(sha256: String, size: Int64)] = []
                    for blob in unreferenced where !recent.contains(blob.sha256) {
                        try db.execute(
                            sql: "DELETE FROM blobs WHERE user_id = ? AND sha256 = ? AND created_at < ?",
                            arguments: [userID, blob.sha256, storedBefore.millis])
                        if db.changesCount > 0 { removed.append((blob.sha256, blob.size)) }
                    }
                    let bytes = removed.reduce(0) { $0 + BlobCharge.of($1.size) }
                    try db.execute(
                        sql: "UPDATE user_seq SET stored_bytes = MAX(0, stored_bytes - ?) WHERE user_id = ?",
                        arguments: [bytes, userID])
                    return removed
                }
                // Unlinked before the lock goes: an upload of the same file waits for it.
                for blob in removed { blobFiles.removeBlob(userID: userID, sha256: blob.sha256) }
                return removed
            }
            for blob in removed {
                collection.blobs += 1
                collection.bytes += blob.size
            }
        }
        let stale = try await pool.write { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT user_id, sha256 FROM blob_uploads WHERE updated_at < ?",
                arguments: [uploadsBefore.millis])
            try db.execute(sql: "DELETE FROM blob_uploads WHERE updated_at < ?", arguments: [uploadsBefore.millis])
            return rows.map { (user: $0["user_id"] as String, sha256: $0["sha256"] as String) }
        }
        for upload in stale { blobFiles.removeUpload(userID: upload.user, sha256: upload.sha256) }
        collection.uploads = stale.count
        return collection
    }

    /// The attachment hashes the user's live records and kept revisions name (only those
    /// changed after `afterSeq`, when given).
    static func referencedBlobs(
        _ db: Database, userID: String, fields: [(collection: String, field: String)], afterSeq: Int64?
    ) throws -> Set<String> {
        var result = Set<String>()
        for (collection, field) in fields {
            let marker = AttachmentScan.marker(field)
            // A revision written after `afterSeq` belongs to a record whose seq is after it too:
            // those records (by the seq index) and their revisions are all that can have changed.
            let queries =
                afterSeq == nil
                ? [
                    "SELECT fields FROM records WHERE user_id = ?1 AND collection = ?2 AND deleted = 0 AND instr(fields, ?3) > 0",
                    "SELECT fields FROM revisions WHERE user_id = ?1 AND collection = ?2 AND instr(fields, ?3) > 0",
                ]
                : [
                    "SELECT fields FROM records WHERE user_id = ?1 AND seq > ?4 AND collection = ?2 AND deleted = 0 AND instr(fields, ?3) > 0",
                    """
                    SELECT v.fields FROM records r JOIN revisions v
                      ON v.user_id = r.user_id AND v.collection = r.collection AND v.record_id = r.id
                    WHERE r.user_id = ?1 AND r.seq > ?4 AND r.collection = ?2 AND v.seq > ?4 AND instr(v.fields, ?3) > 0
                    """,
                ]
            for sql in queries {
                let arguments: StatementArguments =
                    afterSeq.map { [userID, collection, marker, $0] } ?? [userID, collection, marker]
                let cursor = try String.fetchCursor(db, sql: sql, arguments: arguments)
                while let text = try cursor.next() {
                    AttachmentScan.hashes(in: text, fields: [field], into: &result)
                }
            }
        }
        return result
    }
}
