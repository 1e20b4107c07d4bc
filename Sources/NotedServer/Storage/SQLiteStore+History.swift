import Foundation
import GRDB
import NotedCore

/// Revision history by time, stored as deltas (``HistoryPolicy``, ``HistoryChain``).
extension SQLiteStore {
    static func registerHistoryMigration(_ migrator: inout DatabaseMigrator) {
        // Rows written before stay whole (`delta` NULL) and are compacted by the history service;
        // every record with revisions is due at once.
        migrator.registerMigration("history") { db in
            try db.execute(
                sql: """
                    ALTER TABLE revisions ADD COLUMN delta TEXT;
                    ALTER TABLE revisions ADD COLUMN size INTEGER;
                    UPDATE revisions SET size = length(CAST(fields AS BLOB));
                    CREATE TABLE history_due (
                        user_id TEXT NOT NULL,
                        collection TEXT NOT NULL,
                        record_id TEXT NOT NULL,
                        due_at INTEGER NOT NULL,
                        PRIMARY KEY (user_id, collection, record_id)
                    );
                    CREATE INDEX history_due_by_time ON history_due(due_at);
                    INSERT INTO history_due (user_id, collection, record_id, due_at)
                        SELECT DISTINCT user_id, collection, record_id, 0 FROM revisions;
                    """)
        }
    }

    /// History counts toward the account's bytes (security-3 H3: stale whole-text saves kept
    /// gigabytes of revisions while the account's counted usage stayed under a megabyte):
    /// `user_seq.history_bytes` is the bytes its revisions hold as stored (whole fields or
    /// delta), kept by triggers on every write of `revisions` (a push, a pass of the history
    /// service, a purge, a deletion) and computed from the rows on upgrade.
    static func registerHistoryBytesMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("history-bytes") { db in
            try db.execute(
                sql: """
                    ALTER TABLE user_seq ADD COLUMN history_bytes INTEGER NOT NULL DEFAULT 0;
                    UPDATE user_seq SET history_bytes = (
                        SELECT COALESCE(SUM(\(storedBytes("r"))), 0) FROM revisions r WHERE r.user_id = user_seq.user_id);
                    \(historyBytesTriggers)
                    """)
        }
    }

    /// The triggers that keep `user_seq.history_bytes` (dropped and made again when `user_seq`
    /// is rebuilt: SQLiteStore+Spaces).
    static let historyBytesTriggers = """
        CREATE TRIGGER revisions_bytes_insert AFTER INSERT ON revisions BEGIN
            UPDATE user_seq SET history_bytes = history_bytes + \(storedBytes("NEW")) WHERE user_id = NEW.user_id;
        END;
        CREATE TRIGGER revisions_bytes_delete AFTER DELETE ON revisions BEGIN
            UPDATE user_seq SET history_bytes = history_bytes - \(storedBytes("OLD")) WHERE user_id = OLD.user_id;
        END;
        CREATE TRIGGER revisions_bytes_update AFTER UPDATE OF fields, delta ON revisions BEGIN
            UPDATE user_seq SET history_bytes = history_bytes + \(storedBytes("NEW")) - \(storedBytes("OLD"))
            WHERE user_id = NEW.user_id;
        END;
        """

    /// The bytes a revision row holds, in SQL, for the row named `row`.
    static func storedBytes(_ row: String) -> String {
        "(length(CAST(\(row).fields AS BLOB)) + COALESCE(length(CAST(\(row).delta AS BLOB)), 0))"
    }

    static let revisionColumns = "rev, conflict, seq, fields, delta, size, device, ccid, updated_at"

    /// One row of ``revisionColumns``, read by position.
    static func storedRevision(from row: Row) throws -> StoredRevision {
        let values = try FieldsCoding.decode(row[3])
        let delta: String? = row[4]
        let size: Int64? = row[5]
        return StoredRevision(
            rev: row[0], conflict: row[1], seq: row[2], updatedAt: Date(millis: row[8]),
            device: row[6], ccid: row[7], fields: values,
            delta: try delta.map { try RevisionDelta(values: values, column: $0) },
            size: size ?? Int64(FieldsCoding.encode(values).utf8.count))
    }

    /// The ordinary rows from `rev` up to the first whole one: what reading revision `rev` applies.
    static func revisionChain(_ db: Database, userID: String, collection: String, id: String, rev: Int64) throws
        -> [StoredRevision]
    {
        let cursor = try Row.fetchCursor(
            db.cachedStatement(
                sql: """
                    SELECT \(revisionColumns) FROM revisions
                    WHERE user_id = ? AND collection = ? AND record_id = ? AND conflict = 0 AND rev >= ? ORDER BY rev
                    """), arguments: [userID, collection, id, rev])
        var rows: [StoredRevision] = []
        while let row = try cursor.next() {
            let stored = try storedRevision(from: row)
            if rows.isEmpty && stored.rev != rev { return [] }
            rows.append(stored)
            if stored.delta == nil { break }
        }
        return rows
    }

    /// The fields of ordinary revision `rev`, if still held.
    static func revisionFields(_ db: Database, userID: String, collection: String, id: String, rev: Int64) throws
        -> [String: JSONValue]?
    {
        let chain = try revisionChain(db, userID: userID, collection: collection, id: id, rev: rev)
        return chain.isEmpty ? nil : try HistoryChain.materialize(chain)
    }

    static func storedRevisions(_ db: Database, userID: String, collection: String, id: String) throws
        -> [StoredRevision]
    {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(revisionColumns) FROM revisions WHERE user_id = ? AND collection = ? AND record_id = ? ORDER BY rev, conflict
                    """), arguments: [userID, collection, id]
        ).map(storedRevision(from:))
    }

    /// Every revision row of a record, with fields only for the ordinary rows above the newest
    /// stored as a delta (the rows saved since the last pass, which it turns into deltas, and
    /// the newest); the others are stubs (``StoredRevision/stub(rev:conflict:seq:updatedAt:device:ccid:whole:size:)``).
    /// A pass during sustained typing then decodes the few rows it rewrites instead of every
    /// row in the 10-minute window (2 saves a second for 10 minutes: 1,200).
    static func passRevisions(_ db: Database, userID: String, collection: String, id: String) throws -> [StoredRevision]
    {
        // Every row's place, kind and storage (a stub each), then the ordinary rows above the
        // newest delta whole, in place of their stubs.
        var rows = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT rev, conflict, delta IS NULL, updated_at FROM revisions
                    WHERE user_id = ? AND collection = ? AND record_id = ? ORDER BY rev, conflict
                    """), arguments: [userID, collection, id]
        ).map { row in
            StoredRevision.stub(
                rev: row[0], conflict: row[1], seq: 0, updatedAt: Date(millis: row[3]), device: nil, ccid: nil,
                whole: row[2], size: 0)
        }
        guard
            let top = rows.lastIndex(where: { !$0.conflict && $0.delta != nil }).map({ rows[$0].rev })
                ?? rows.first.map({ $0.rev - 1 })
        else {
            return []
        }
        let loaded = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(revisionColumns) FROM revisions
                    WHERE user_id = ? AND collection = ? AND record_id = ? AND conflict = 0 AND rev > ? ORDER BY rev
                    """), arguments: [userID, collection, id, top]
        ).map(storedRevision(from:))
        var byRev = Dictionary(loaded.map { ($0.rev, $0) }, uniquingKeysWith: { first, _ in first })
        for index in rows.indices where !rows[index].conflict {
            // (Both reads are of one snapshot: the same rows.)
            if let full = byRev.removeValue(forKey: rows[index].rev), (full.delta == nil) == (rows[index].delta == nil)
            {
                rows[index] = full
            }
        }
        return rows
    }

    /// Thins and compacts the histories that are due at `now` (at most `limit` records): each
    /// record read and decided on a reader, without the writer, then the decisions written in
    /// one transaction per batch, each only if no save came meanwhile (else it stays due and is
    /// taken again).
    public func thinHistory(now: Date, policy: HistoryPolicy, limit: Int = 100) async throws -> HistoryThinning {
        let due = try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT user_id, collection, record_id FROM history_due WHERE due_at <= ? ORDER BY due_at LIMIT ?
                    """, arguments: [now.millis, limit]
            ).map {
                (userID: $0["user_id"] as String, collection: $0["collection"] as String, id: $0["record_id"] as String)
            }
        }
        // SQLite's one writer is shared with every push: a batch holds it for its statements
        // only (a few per record), decided beforehand.
        // A batch's rows rewritten are bounded too: the writer is shared with every push, and a
        // batch of 100 records being typed in (with ``PushAlgorithm/compactionDelay`` of saves
        // each) held it for tens of milliseconds.
        return try await HistoryThinning.batched(
            due, batchRecords: 100, batchRows: 256, policy: policy, now: now,
            read: { record, partial in
                try await pool.read { db in
                    partial
                        ? try Self.passRevisions(
                            db, userID: record.userID, collection: record.collection, id: record.id)
                        : try Self.storedRevisions(
                            db, userID: record.userID, collection: record.collection, id: record.id)
                }
            },
            write: { planned, setAside in
                try await pool.write { db in
                    for record in setAside {
                        try db.execute(
                            sql:
                                "UPDATE history_due SET due_at = ? WHERE user_id = ? AND collection = ? AND record_id = ?",
                            arguments: [
                                now.addingTimeInterval(HistoryThinning.failedRetry).millis, record.userID,
                                record.collection, record.id,
                            ])
                    }
                    return try planned.map { try Self.write($0, db: db) }
                }
            })
    }

    /// Writes one record's pass, if its rows are as they were read: false when a save came meanwhile.
    private static func write(_ pass: PlannedThinning, db: Database) throws -> Bool {
        let record = pass.record
        guard try storedShape(db, userID: record.userID, collection: record.collection, id: record.id) == pass.shape
        else { return false }
        for (rev, conflict) in pass.rewrite.deletes {
            try db.cachedStatement(
                sql:
                    "DELETE FROM revisions WHERE user_id = ? AND collection = ? AND record_id = ? AND rev = ? AND conflict = ?"
            )
            .execute(arguments: [record.userID, record.collection, record.id, rev, conflict])
        }
        for update in pass.rewrite.updates {
            try db.cachedStatement(
                sql: """
                    UPDATE revisions SET fields = ?, delta = ? WHERE user_id = ? AND collection = ? AND record_id = ? AND rev = ? AND conflict = 0
                    """
            ).execute(arguments: [
                FieldsCoding.encode(update.fields), update.delta?.columnJSON, record.userID, record.collection,
                record.id, update.rev,
            ])
        }
        if let next = pass.rewrite.nextReview, pass.hadRows {
            try db.cachedStatement(
                sql: "UPDATE history_due SET due_at = ? WHERE user_id = ? AND collection = ? AND record_id = ?"
            )
            .execute(arguments: [next.millis, record.userID, record.collection, record.id])
        } else {
            try db.cachedStatement(
                sql: "DELETE FROM history_due WHERE user_id = ? AND collection = ? AND record_id = ?"
            )
            .execute(arguments: [record.userID, record.collection, record.id])
        }
        return true
    }

    /// What a thinning checks is unchanged before it writes: every row's rev, kind and storage,
    /// as ``PlannedThinning/shape(_:)`` numbers them (computed by SQLite: the writer decodes no row).
    static func storedShape(_ db: Database, userID: String, collection: String, id: String) throws -> [Int64] {
        try Int64.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT rev * 4 + conflict * 2 + (delta IS NULL) FROM revisions
                    WHERE user_id = ? AND collection = ? AND record_id = ? ORDER BY rev, conflict
                    """), arguments: [userID, collection, id])
    }
}
