import Foundation
import NotedCore

/// What one user may store (`--quota-bytes`, `--quota-records`; docs/security.md): the live
/// records of every collection, counted as their stored fields (bytes of the JSON text) and
/// their number. Tombstones and revisions are not counted; revisions are bounded per record
/// by the history's own limits.
public struct StorageQuota: Sendable, Hashable {
    /// At most this many bytes of live records' fields; nil: no limit.
    public var bytes: Int64?
    /// At most this many live records; nil: no limit.
    public var records: Int64?

    public init(bytes: Int64? = nil, records: Int64? = nil) {
        self.bytes = bytes
        self.records = records
    }

    public static let unlimited = StorageQuota()
    /// The server's defaults: 1 GiB and a million records (100,000 notes of 2 KB use a fifth).
    public static let standard = StorageQuota(bytes: 1 << 30, records: 1_000_000)

    /// Why `change` may not make `usage` into `after`, if it may not: growing beyond a limit is
    /// refused, shrinking never (a user over a lowered quota can always delete and trim).
    ///
    /// History counts (``StorageUsage/history``): an account whose records, attachments and
    /// history together are over the limit may only delete (a record's history goes with it)
    /// until the history service has thinned enough; an edit of the same size, or smaller,
    /// still stores a revision, so it is refused too.
    func refusal(from usage: StorageUsage, to after: StorageUsage) -> ProtocolError? {
        if let bytes, usage.bytes + usage.history > bytes, after.records >= usage.records {
            return ProtocolError(
                .quotaExceeded,
                "this account may store at most \(bytes) bytes, and its notes, files and their history take \(usage.bytes + usage.history) (history \(usage.history)); delete something first (its history goes with it)"
            )
        }
        if let bytes, after.bytes > usage.bytes, after.bytes + after.history > bytes {
            return ProtocolError(
                .quotaExceeded,
                "this account may store at most \(bytes) bytes (it stores \(usage.bytes), and \(usage.history) of history); delete something first"
            )
        }
        if let records, after.records > usage.records, after.records > records {
            return ProtocolError(
                .quotaExceeded, "this account may store at most \(records) records; delete something first")
        }
        return nil
    }
}

/// What one user stores now, as ``StorageQuota`` counts it.
public struct StorageUsage: Sendable, Hashable {
    public var bytes: Int64
    public var records: Int64
    /// The bytes the account's revisions hold (whole or as deltas, conflict revisions too),
    /// kept by the store itself on every write of a revision; a push reads it, never sets it.
    public var history: Int64

    public init(bytes: Int64 = 0, records: Int64 = 0, history: Int64 = 0) {
        self.bytes = bytes
        self.records = records
        self.history = history
    }

    static func + (lhs: StorageUsage, rhs: StorageUsage) -> StorageUsage {
        StorageUsage(
            bytes: lhs.bytes + rhs.bytes, records: lhs.records + rhs.records, history: lhs.history + rhs.history)
    }

    /// What a live record counts for; a tombstone counts for nothing.
    static func of(_ record: Record?) -> StorageUsage {
        guard let record, !record.deleted else { return StorageUsage() }
        return StorageUsage(bytes: Int64(FieldsCoding.encode(record.fields).utf8.count), records: 1)
    }
}
