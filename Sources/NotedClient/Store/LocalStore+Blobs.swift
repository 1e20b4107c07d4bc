import Crypto
import Foundation
import GRDB
import NotedCore

/// A file of an attachment kept on this device.
public struct LocalBlob: Sendable, Hashable {
    public var sha256: String
    public var size: Int64
    public var type: String
    /// Added here and not yet on the server.
    public var pending: Bool
}

/// Attachments' files on the device (docs/client.md, "Attachments"): a file attached here is
/// stored with the edit that references it, in one transaction, and stays `pending` until the
/// server has it; the change that adds it is not sent before (``outbox(excluding:limit:)``).
/// Files fetched from the server are kept too, so a note opened once shows them offline.
extension LocalStore {
    /// The lower-case hex SHA-256 of `data`.
    public static func sha256(_ data: Data) -> String { Array(SHA256.hash(data: data)).lowercaseHex }

    /// Attaches `data` to the note `id` as `name` (shortened to fit an element, keeping its
    /// extension) of `type`: the file is stored here, pending upload, and the note's
    /// `attachments` field gains its element, in one transaction.
    public func attach(_ id: String, data: Data, name: String, type: String, now: Date = Date()) async throws -> (
        AttachmentReference, Note
    ) {
        let sha = Self.sha256(data)
        let size = Int64(data.count)
        guard AttachmentReference.isMediaType(type) else {
            throw NotedClientError(.invalidInput, "\"\(type)\" is not a MIME type such as image/png")
        }
        let result = try await transaction(now: now) { transaction -> (AttachmentReference, Note) in
            let limit = try transaction.store.limits(transaction.db).maxTagLength
            guard let fitted = AttachmentReference.fittedName(name, sha256: sha, size: size, type: type, limit: limit),
                let reference = AttachmentReference(sha256: sha, size: size, type: type, name: fitted)
            else { throw NotedClientError(.invalidInput, "the file's type is too long to attach it") }
            try transaction.db.execute(
                sql: """
                    INSERT INTO blob (sha256, size, type, data, pending, usedAt) VALUES (?, ?, ?, ?, 1, ?)
                    ON CONFLICT (sha256) DO UPDATE SET usedAt = excluded.usedAt,
                        pending = CASE WHEN pending = 2 THEN 1 ELSE pending END, refusal = NULL
                    """, arguments: [sha, size, type, data, Int64(now.timeIntervalSince1970 * 1000)])
            let record = try transaction.update(Self.collection, id: id) { json in
                var fields = NoteFields(json: json)
                if !fields.attachments.contains(reference.element) { fields.attachments.append(reference.element) }
                json = fields.json
            }
            return (reference, record.note)
        }
        return result.value
    }

    /// Removes an attachment from the note (the file stays here until ``forgetBlobs(keepingBytes:)``).
    public func detach(_ id: String, sha256: String) async throws -> Note {
        try await update(id) { fields in
            fields.attachments.removeAll { AttachmentReference(element: $0)?.sha256 == sha256 }
        }
    }

    /// The file `sha256` when this device has it, marked as used now.
    public func blobData(_ sha256: String, now: Date = Date()) async throws -> (data: Data, type: String)? {
        try await writer.write { db in
            guard
                let row = try Row.fetchOne(db, sql: "SELECT data, type FROM blob WHERE sha256 = ?", arguments: [sha256])
            else { return nil }
            try db.execute(
                sql: "UPDATE blob SET usedAt = ? WHERE sha256 = ?",
                arguments: [Int64(now.timeIntervalSince1970 * 1000), sha256])
            return (row["data"] as Data, row["type"] as String)
        }
    }

    /// Keeps a file fetched from the server (its hash checked), not pending.
    public func keepFetchedBlob(_ data: Data, sha256: String, type: String, now: Date = Date()) async throws {
        guard Self.sha256(data) == sha256 else {
            throw NotedClientError(.server, "the server sent bytes that are not the attachment \(sha256)")
        }
        try await writer.write { db in
            try db.execute(
                sql: """
                    INSERT INTO blob (sha256, size, type, data, pending, usedAt) VALUES (?, ?, ?, ?, 0, ?)
                    ON CONFLICT (sha256) DO UPDATE SET usedAt = excluded.usedAt
                    """, arguments: [sha256, Int64(data.count), type, data, Int64(now.timeIntervalSince1970 * 1000)])
        }
    }

    /// The files waiting to go to the server, oldest first.
    public func pendingBlobs() async throws -> [LocalBlob] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT sha256, size, type FROM blob WHERE pending = 1 ORDER BY usedAt, sha256")
                .map {
                    LocalBlob(sha256: $0["sha256"], size: $0["size"], type: $0["type"], pending: true)
                }
        }
    }

    /// The server has the file now.
    public func blobUploaded(_ sha256: String) async throws {
        try await writer.write { db in
            try db.execute(sql: "UPDATE blob SET pending = 0 WHERE sha256 = ?", arguments: [sha256])
        }
    }

    /// Every file this device keeps.
    public func localBlobs() async throws -> [LocalBlob] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT sha256, size, type, pending FROM blob ORDER BY usedAt, sha256").map {
                LocalBlob(
                    sha256: $0["sha256"], size: $0["size"], type: $0["type"], pending: ($0["pending"] as Int) == 1)
            }
        }
    }

    /// Drops the least recently used fetched files until those kept take at most `keepingBytes`;
    /// a file still pending upload is never dropped. Answers the bytes freed.
    @discardableResult
    public func forgetBlobs(keepingBytes: Int64) async throws -> Int64 {
        try await writer.write { db in
            var total = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM blob WHERE NOT pending") ?? 0
            var freed: Int64 = 0
            let rows = try Row.fetchAll(
                db, sql: "SELECT sha256, size FROM blob WHERE NOT pending ORDER BY usedAt, sha256")
            for row in rows where total > keepingBytes {
                // A file an unsent edit or a change in flight names stays: a `missing_blob`
                // answer would need it again.
                let sha = row["sha256"] as String
                if try Bool.fetchOne(
                    db,
                    sql: """
                        SELECT 1 FROM record WHERE syncFlags <> 0
                            AND (instr(local, ?1) > 0 OR instr(COALESCE(sync, ''), ?1) > 0) LIMIT 1
                        """,
                    arguments: [sha]) != nil
                {
                    continue
                }
                try db.execute(sql: "DELETE FROM blob WHERE sha256 = ?", arguments: [row["sha256"] as String])
                total -= row["size"] as Int64
                freed += row["size"] as Int64
            }
            return freed
        }
    }

    /// Whether a change's `ops` can go: `nil` when yes; `.waiting` while a file it adds is still
    /// to upload; `.refused(why)` when the server refused such a file for good (the change can
    /// never go: the note is refused until the file is removed from it or the edit discarded).
    enum UploadGate: Equatable {
        case waiting
        case refused(String)
    }

    static func uploadGate(_ db: Database, ops: [String: FieldOp], schema: CollectionSchema?) throws -> UploadGate? {
        guard let schema else { return nil }
        var gate: UploadGate?
        for (name, op) in ops where schema.fields[name]?.attachments == true {
            for element in op.addedElements {
                guard let reference = AttachmentReference(element: element),
                    let row = try Row.fetchOne(
                        db, sql: "SELECT pending, refusal FROM blob WHERE sha256 = ?", arguments: [reference.sha256])
                else { continue }
                switch row["pending"] as Int {
                case 2:
                    return .refused(
                        "the attachment \(reference.name): \(row["refusal"] as String? ?? "refused by the server")")
                case 1: gate = .waiting
                default: continue
                }
            }
        }
        return gate
    }

    /// The server refused the file `sha256` for good (too large, beyond the quota, not what its
    /// name says): it is not offered again, and every note whose unsent edit adds it is refused
    /// with `reason` (remove the attachment, or discard the edit, to sync the note again).
    public func refuseBlob(_ sha256: String, reason: String) async throws -> StoreEffect {
        try await writer.write { db in
            var effect = StoreEffect()
            try db.execute(
                sql: "UPDATE blob SET pending = 2, refusal = ? WHERE sha256 = ? AND pending = 1",
                arguments: [reason, sha256])
            let rows = try RecordRow.filter(sql: "syncFlags <> 0 AND instr(local, ?) > 0", arguments: [sha256])
                .fetchAll(db)
            for var row in rows {
                let named = row.localFields.values.contains { value in
                    (value.arrayValue ?? []).contains {
                        $0.stringValue.flatMap(AttachmentReference.init(element:))?.sha256 == sha256
                    }
                }
                guard named else { continue }
                row.state.refused(.tooLarge, message: "the attachment \(sha256.prefix(12)): \(reason)")
                try row.update(db)
                if let refusal = row.state.refusal { effect.refused.append((row.id, refusal)) }
                effect.change(row.id, in: row.collection)
            }
            return effect
        }
    }

    /// A `missing_blob` answer: the files this record's local attachments name go back to
    /// pending, so they are uploaded again before the change is resent. Answers the name of one
    /// this device does not have (then nothing can make the change go: it is refused).
    static func markAttachmentsPending(_ db: Database, ops: [String: FieldOp], schema: CollectionSchema?) throws
        -> String?
    {
        guard let schema else { return nil }
        var absent: String?
        for (name, op) in ops where schema.fields[name]?.attachments == true {
            for element in op.addedElements {
                guard let reference = AttachmentReference(element: element) else { continue }
                try db.execute(
                    sql: "UPDATE blob SET pending = 1 WHERE sha256 = ? AND pending = 0", arguments: [reference.sha256])
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM blob WHERE sha256 = ?", arguments: [reference.sha256])
                    == nil
                {
                    absent = reference.name
                }
            }
        }
        return absent
    }
}
