import Foundation
import NotedCore
import PostgresNIO

/// Revision history by time, stored as deltas (``HistoryPolicy``, ``HistoryChain``), on
/// PostgreSQL: several nodes thin at once, never the same record (a node claims due records
/// with `SKIP LOCKED`, and writes a record's history holding its row, after checking that
/// nothing changed since it read it).
extension PostgresStore {
    static let historyMigration: (String, [PostgresQuery]) = (
        "history",
        [
            "ALTER TABLE revisions ADD COLUMN delta TEXT",
            "ALTER TABLE revisions ADD COLUMN size BIGINT",
            "UPDATE revisions SET size = octet_length(fields)",
            """
            CREATE TABLE history_due (
                user_id TEXT NOT NULL, collection TEXT NOT NULL, record_id TEXT NOT NULL, due_at BIGINT NOT NULL,
                PRIMARY KEY (user_id, collection, record_id))
            """,
            "CREATE INDEX history_due_by_time ON history_due(due_at)",
            "INSERT INTO history_due (user_id, collection, record_id, due_at) SELECT DISTINCT user_id, collection, record_id, 0 FROM revisions",
        ]
    )

    /// History counts toward the account's bytes: `user_seq.history_bytes`, the bytes its
    /// revisions hold as stored, kept by a trigger on every write of `revisions` and computed
    /// from the rows on upgrade (SQLiteStore's "history-bytes" does the same).
    static let historyBytesMigration: (String, [PostgresQuery]) = (
        "history-bytes",
        [
            "ALTER TABLE user_seq ADD COLUMN history_bytes BIGINT NOT NULL DEFAULT 0",
            """
            UPDATE user_seq SET history_bytes = (
                SELECT COALESCE(SUM(octet_length(r.fields) + COALESCE(octet_length(r.delta), 0)), 0) FROM revisions r
                WHERE r.user_id = user_seq.user_id)
            """,
            """
            CREATE FUNCTION noted_revision_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'INSERT' THEN
                    UPDATE user_seq SET history_bytes = history_bytes + octet_length(NEW.fields) + COALESCE(octet_length(NEW.delta), 0)
                    WHERE user_id = NEW.user_id;
                ELSIF TG_OP = 'DELETE' THEN
                    UPDATE user_seq SET history_bytes = history_bytes - octet_length(OLD.fields) - COALESCE(octet_length(OLD.delta), 0)
                    WHERE user_id = OLD.user_id;
                ELSE
                    UPDATE user_seq SET history_bytes = history_bytes
                        + octet_length(NEW.fields) + COALESCE(octet_length(NEW.delta), 0)
                        - octet_length(OLD.fields) - COALESCE(octet_length(OLD.delta), 0)
                    WHERE user_id = NEW.user_id;
                END IF;
                RETURN NULL;
            END $$
            """,
            """
            CREATE TRIGGER revisions_bytes AFTER INSERT OR DELETE OR UPDATE OF fields, delta ON revisions
            FOR EACH ROW EXECUTE FUNCTION noted_revision_bytes()
            """,
        ]
    )

    /// How long a node's claim on a due record lasts (it thins it well within that).
    static let historyLease: TimeInterval = 60

    static func storedRevisions(_ rows: PostgresRowSequence) async throws -> [StoredRevision] {
        var result: [StoredRevision] = []
        for try await (rev, conflict, seq, fields, delta, size, device, ccid, updated)
            in rows.decode((Int64, Bool, Int64, String, String?, Int64?, String?, String?, Int64).self)
        {
            let values = try FieldsCoding.decode(fields)
            result.append(
                StoredRevision(
                    rev: rev, conflict: conflict, seq: seq, updatedAt: Date(millis: updated), device: device,
                    ccid: ccid, fields: values,
                    delta: try delta.map { try RevisionDelta(values: values, column: $0) },
                    size: size ?? Int64(fields.utf8.count)))
        }
        return result
    }

    /// Every revision row of a record, with fields only for the ordinary rows above the newest
    /// stored as a delta; the others are stubs (as ``SQLiteStore/passRevisions(_:userID:collection:id:)``).
    static func passRevisions(_ client: PostgresClient, record: DueHistory, logger: Logger) async throws
        -> [StoredRevision]
    {
        var result: [StoredRevision] = []
        for try await (rev, conflict, seq, fields, whole, size, device, ccid, updated) in try await client.query(
            """
            SELECT rev, conflict, seq,
                   CASE WHEN NOT conflict AND rev > (
                       SELECT COALESCE(MAX(rev), -1) FROM revisions
                       WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                         AND NOT conflict AND delta IS NOT NULL)
                   THEN fields END,
                   delta IS NULL, size, device, ccid, updated_at
            FROM revisions WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
            ORDER BY rev, conflict
            """, logger: logger
        ).decode((Int64, Bool, Int64, String?, Bool, Int64?, String?, String?, Int64).self) {
            guard let fields else {
                result.append(
                    .stub(
                        rev: rev, conflict: conflict, seq: seq, updatedAt: Date(millis: updated), device: device,
                        ccid: ccid,
                        whole: whole, size: size ?? 0))
                continue
            }
            // Rows above the newest delta are whole.
            result.append(
                StoredRevision(
                    rev: rev, conflict: conflict, seq: seq, updatedAt: Date(millis: updated), device: device,
                    ccid: ccid, fields: try FieldsCoding.decode(fields), delta: nil,
                    size: size ?? Int64(fields.utf8.count)))
        }
        return result
    }

    /// The ordinary rows from `rev` up to the first whole one: what reading revision `rev` applies.
    static func revisionChain(
        _ connection: PostgresConnection, userID: String, collection: String, id: String, rev: Int64, logger: Logger
    ) async throws -> [StoredRevision] {
        var chain: [StoredRevision] = []
        var from = rev
        while true {
            let page = try await storedRevisions(
                connection.query(
                    """
                    SELECT rev, conflict, seq, fields, delta, size, device, ccid, updated_at FROM revisions
                    WHERE user_id = \(userID) AND collection = \(collection) AND record_id = \(id) AND NOT conflict AND rev >= \(from)
                    ORDER BY rev LIMIT \(HistoryChain.maxRun + 1)
                    """, logger: logger))
            if chain.isEmpty && page.first?.rev != rev { return [] }
            for row in page {
                chain.append(row)
                if row.delta == nil { return chain }
            }
            guard let last = page.last, page.count == HistoryChain.maxRun + 1 else { return chain }
            from = last.rev + 1
        }
    }

    public func thinHistory(now: Date, policy: HistoryPolicy, limit: Int = 100) async throws -> HistoryThinning {
        let logger = self.logger
        // Claimed for a while: another node skips these.
        let due = try await client.withTransaction(logger: logger) { connection in
            var due: [(userID: String, collection: String, id: String)] = []
            for try await (user, collection, id) in try await connection.query(
                """
                SELECT user_id, collection, record_id FROM history_due WHERE due_at <= \(now.millis)
                ORDER BY due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).decode((String, String, String).self) {
                due.append((user, collection, id))
            }
            let lease = now.addingTimeInterval(Self.historyLease).millis
            for record in due {
                try await connection.query(
                    """
                    UPDATE history_due SET due_at = \(lease)
                    WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                    """, logger: logger)
            }
            return due
        }
        return try await HistoryThinning.batched(
            due, batchRecords: Self.historyBatch, policy: policy, now: now,
            read: { record, partial in
                if partial { return try await Self.passRevisions(client, record: record, logger: logger) }
                return try await Self.storedRevisions(
                    client.query(
                        """
                        SELECT rev, conflict, seq, fields, delta, size, device, ccid, updated_at FROM revisions
                        WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id) ORDER BY rev, conflict
                        """, logger: logger))
            },
            write: { planned, setAside in
                try await client.withTransaction(logger: logger) { connection in
                    for record in setAside {
                        try await connection.query(
                            """
                            UPDATE history_due SET due_at = \(now.addingTimeInterval(HistoryThinning.failedRetry).millis)
                            WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                            """, logger: logger)
                    }
                    var written: [Bool] = []
                    for pass in planned {
                        written.append(try await Self.write(pass, now: now, connection: connection, logger: logger))
                    }
                    return written
                }
            })
    }

    /// Records whose passes one transaction writes: one. A transaction holds each record's row
    /// from its pass to the commit, and pushes of those records wait that long: with 20 records
    /// per transaction, push -> ack p99 went from 60-72 to 182 ms (1,000 users x 2 edits/s,
    /// every fsync held 2 ms). PostgreSQL commits transactions of many connections together
    /// anyway; SQLite's one writer is what batching saves.
    static let historyBatch = 1

    /// Writes one record's pass holding the record's row, if its rows are as they were read:
    /// false when a save (or another node) came meanwhile. A row a push holds is skipped, never
    /// waited for (`SKIP LOCKED`): a push batch holds its rows until its commit, and a
    /// transaction of more than one record waiting for one of them could deadlock with it. The
    /// push that holds it makes the record due again.
    private static func write(_ pass: PlannedThinning, now: Date, connection: PostgresConnection, logger: Logger)
        async throws -> Bool
    {
        let record = pass.record
        // The user's row first, as a push takes it (the trigger keeping `history_bytes` writes it
        // when the pass writes revisions): a pass that took the record's row and then waited
        // for the user's could deadlock with a push holding the user's and waiting for the record's.
        var locked =
            try await connection.query(
                """
                SELECT 1 FROM user_seq WHERE user_id = \(record.userID) FOR UPDATE SKIP LOCKED
                """, logger: logger
            ).collect().count == 1
        if locked {
            locked =
                try await connection.query(
                    """
                    SELECT 1 FROM records WHERE user_id = \(record.userID) AND collection = \(record.collection) AND id = \(record.id) FOR UPDATE SKIP LOCKED
                    """, logger: logger
                ).collect().count == 1
        }
        if !locked {
            let exists =
                try await connection.query(
                    """
                    SELECT 1 FROM records WHERE user_id = \(record.userID) AND collection = \(record.collection) AND id = \(record.id)
                    """, logger: logger
                ).collect().count == 1
            if exists { return false }
        }
        var current: [(rev: Int64, conflict: Bool, whole: Bool)] = []
        for try await (rev, conflict, whole) in try await connection.query(
            """
            SELECT rev, conflict, delta IS NULL FROM revisions
            WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id) ORDER BY rev, conflict
            """, logger: logger
        ).decode((Int64, Bool, Bool).self) {
            current.append((rev, conflict, whole))
        }
        guard PlannedThinning.shape(current) == pass.shape else {
            // A save (or another node) changed it meanwhile: due again at once.
            try await connection.query(
                """
                UPDATE history_due SET due_at = LEAST(due_at, \(now.millis))
                WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                """, logger: logger)
            return false
        }
        for (rev, conflict) in pass.rewrite.deletes {
            try await connection.query(
                """
                DELETE FROM revisions WHERE user_id = \(record.userID) AND collection = \(record.collection)
                AND record_id = \(record.id) AND rev = \(rev) AND conflict = \(conflict)
                """, logger: logger)
        }
        for update in pass.rewrite.updates {
            try await connection.query(
                """
                UPDATE revisions SET fields = \(FieldsCoding.encode(update.fields)), delta = \(update.delta?.columnJSON)
                WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                AND rev = \(update.rev) AND NOT conflict
                """, logger: logger)
        }
        if let next = pass.rewrite.nextReview, pass.hadRows {
            try await connection.query(
                """
                UPDATE history_due SET due_at = \(next.millis)
                WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                """, logger: logger)
        } else {
            try await connection.query(
                """
                DELETE FROM history_due WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                """, logger: logger)
        }
        return true
    }
}
