import Foundation
import NotedCore
import PostgresNIO

/// Revision history by time, stored as deltas (``HistoryPolicy``, ``HistoryChain``), on
/// PostgreSQL: several nodes thin at once, never the same record (a node claims due records
/// with `SKIP LOCKED`, and writes a record's history holding its row, after checking that
/// nothing changed since it read it).
extension PostgresStore {
    static let historyMigration: (String, [PostgresQuery]) = ("history", [
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
    ])

    /// How long a node's claim on a due record lasts (it thins it well within that).
    static let historyLease: TimeInterval = 60

    static func storedRevisions(_ rows: PostgresRowSequence) async throws -> [StoredRevision] {
        var result: [StoredRevision] = []
        for try await (rev, conflict, seq, fields, delta, size, device, ccid, updated)
            in rows.decode((Int64, Bool, Int64, String, String?, Int64?, String?, String?, Int64).self)
        {
            let values = try FieldsCoding.decode(fields)
            result.append(StoredRevision(
                rev: rev, conflict: conflict, seq: seq, updatedAt: Date(millis: updated), device: device, ccid: ccid, fields: values,
                delta: try delta.map { try RevisionDelta(values: values, column: $0) },
                size: size ?? Int64(fields.utf8.count)))
        }
        return result
    }

    /// The ordinary rows from `rev` up to the first whole one: what reading revision `rev` applies.
    static func revisionChain(_ connection: PostgresConnection, userID: String, collection: String, id: String, rev: Int64, logger: Logger) async throws -> [StoredRevision] {
        var chain: [StoredRevision] = []
        var from = rev
        while true {
            let page = try await storedRevisions(connection.query("""
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
            for try await (user, collection, id) in try await connection.query("""
                SELECT user_id, collection, record_id FROM history_due WHERE due_at <= \(now.millis)
                ORDER BY due_at LIMIT \(limit) FOR UPDATE SKIP LOCKED
                """, logger: logger).decode((String, String, String).self) {
                due.append((user, collection, id))
            }
            let lease = now.addingTimeInterval(Self.historyLease).millis
            for record in due {
                try await connection.query("""
                    UPDATE history_due SET due_at = \(lease)
                    WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                    """, logger: logger)
            }
            return due
        }
        return try await HistoryThinning.each(due, pass: { try await thinHistory($0, now: now, policy: policy) }, setAside: { record in
            try await client.query("""
                UPDATE history_due SET due_at = \(now.addingTimeInterval(HistoryThinning.failedRetry).millis)
                WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                """, logger: logger)
        })
    }

    /// One record's pass; throws ``HistoryRetry`` when a save (or another node) came meanwhile.
    private func thinHistory(_ record: DueHistory, now: Date, policy: HistoryPolicy) async throws -> HistoryChain.Rewrite {
        let logger = self.logger
        let rows = try await Self.storedRevisions(client.query("""
            SELECT rev, conflict, seq, fields, delta, size, device, ccid, updated_at FROM revisions
            WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id) ORDER BY rev, conflict
            """, logger: logger))
        let rewrite = try HistoryChain.plan(rows, policy: policy, now: now)
        let shape = rows.map { "\($0.rev)/\($0.conflict)/\($0.delta == nil)" }
        let written = try await client.withTransaction(logger: logger) { connection -> Bool in
            // Pushes of this record write its row: holding it, nothing changes the history.
            try await connection.run("""
                SELECT 1 FROM records WHERE user_id = \(record.userID) AND collection = \(record.collection) AND id = \(record.id) FOR UPDATE
                """, logger: logger)
            var current: [String] = []
            for try await (rev, conflict, whole) in try await connection.query("""
                SELECT rev, conflict, delta IS NULL FROM revisions
                WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id) ORDER BY rev, conflict
                """, logger: logger).decode((Int64, Bool, Bool).self) {
                current.append("\(rev)/\(conflict)/\(whole)")
            }
            guard current == shape else {
                // A save (or another node) changed it meanwhile: due again at once.
                try await connection.query("""
                    UPDATE history_due SET due_at = LEAST(due_at, \(now.millis))
                    WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                    """, logger: logger)
                return false
            }
            for (rev, conflict) in rewrite.deletes {
                try await connection.query("""
                    DELETE FROM revisions WHERE user_id = \(record.userID) AND collection = \(record.collection)
                    AND record_id = \(record.id) AND rev = \(rev) AND conflict = \(conflict)
                    """, logger: logger)
            }
            for update in rewrite.updates {
                try await connection.query("""
                    UPDATE revisions SET fields = \(FieldsCoding.encode(update.fields)), delta = \(update.delta?.columnJSON)
                    WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                    AND rev = \(update.rev) AND NOT conflict
                    """, logger: logger)
            }
            if let next = rewrite.nextReview, !rows.isEmpty {
                try await connection.query("""
                    UPDATE history_due SET due_at = \(next.millis)
                    WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                    """, logger: logger)
            } else {
                try await connection.query("""
                    DELETE FROM history_due WHERE user_id = \(record.userID) AND collection = \(record.collection) AND record_id = \(record.id)
                    """, logger: logger)
            }
            return true
        }
        guard written else { throw HistoryRetry() }
        return rewrite
    }
}
