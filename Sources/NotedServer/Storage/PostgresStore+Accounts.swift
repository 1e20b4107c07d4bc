import Foundation
import PostgresNIO

/// Deleting an account, and the account's sign-in sessions, in PostgreSQL.
extension PostgresStore {
    public func deleteUser(id: String) async throws -> [String] {
        try await client.withTransaction(logger: logger) { connection in
            // The user's `seq` row, locked as a push locks it: a push under way ends first, a
            // later one finds no row and is refused (``AccountDeleted``).
            var exists = false
            for try await _ in try await connection.query(
                "SELECT seq FROM user_seq WHERE user_id = \(id) FOR UPDATE", logger: logger
            ).decode(Int64.self) {
                exists = true
            }
            guard exists else { return [] }
            var families: [String] = []
            for try await family in try await connection.query(
                "SELECT id FROM refresh_families WHERE user_id = \(id)", logger: logger
            ).decode(String.self) {
                families.append(family)
            }
            try await connection.query(
                "DELETE FROM refresh_tokens WHERE family_id IN (SELECT id FROM refresh_families WHERE user_id = \(id))",
                logger: logger)
            try await connection.query("DELETE FROM refresh_families WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM oauth_codes WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM recovery_codes WHERE user_id = \(id)", logger: logger)
            // The records' rows first: the history service holds a record's row before its
            // revisions and due row (PostgresStore+History), so the same order cannot deadlock.
            try await connection.run("SELECT 1 FROM records WHERE user_id = \(id) FOR UPDATE", logger: logger)
            try await connection.query("DELETE FROM revisions WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM history_due WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM records WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM applied_changes WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM blob_chunks WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM blobs WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM blob_uploads WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM user_seq WHERE user_id = \(id)", logger: logger)
            // Shared spaces it owned were handed over or deleted first (``Spaces/release(userID:)``).
            try await connection.query("DELETE FROM space_members WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM space_invitations WHERE user_id = \(id)", logger: logger)
            try await connection.query("DELETE FROM spaces WHERE id = \(id)", logger: logger)
            try await connection.query("DELETE FROM users WHERE id = \(id)", logger: logger)
            return families
        }
    }

    public func signInSessions(userID: String, now: Date) async throws -> [SignInSession] {
        var sessions: [SignInSession] = []
        let rows = try await client.query(
            """
            SELECT f.id, f.client_id, f.device, f.created_at, MAX(t.created_at)
            FROM refresh_families f JOIN refresh_tokens t ON t.family_id = f.id
            WHERE f.user_id = \(userID) AND f.revoked_at IS NULL
            GROUP BY f.id, f.client_id, f.device, f.created_at
            HAVING MAX(t.expires_at) > \(now.millis)
            ORDER BY f.created_at, f.id
            """, logger: logger)
        for try await (id, client, device, created, lastSeen) in rows.decode(
            (String, String, String?, Int64, Int64).self)
        {
            sessions.append(
                SignInSession(
                    id: id, clientID: client, device: device, signedInAt: Date(millis: created),
                    lastSeen: Date(millis: lastSeen)))
        }
        return sessions
    }

    public func revokeSignInSessions(userID: String, only: String?, except: String?, now: Date) async throws -> [String]
    {
        let rows: PostgresRowSequence
        switch (only, except) {
        case (let only?, _):
            rows = try await client.query(
                """
                UPDATE refresh_families SET revoked_at = \(now.millis)
                WHERE user_id = \(userID) AND revoked_at IS NULL AND id = \(only) AND id <> \(except ?? "")
                RETURNING id
                """, logger: logger)
        case (nil, let except?):
            rows = try await client.query(
                """
                UPDATE refresh_families SET revoked_at = \(now.millis)
                WHERE user_id = \(userID) AND revoked_at IS NULL AND id <> \(except)
                RETURNING id
                """, logger: logger)
        case (nil, nil):
            rows = try await client.query(
                """
                UPDATE refresh_families SET revoked_at = \(now.millis)
                WHERE user_id = \(userID) AND revoked_at IS NULL
                RETURNING id
                """, logger: logger)
        }
        var ids: [String] = []
        for try await id in rows.decode(String.self) { ids.append(id) }
        return ids
    }

    public func announceAccountDeletion(userID: String) async throws {
        try await client.run(
            "SELECT pg_notify(\(Self.commitChannel), \(nodeID + " deleted " + userID))", logger: logger)
    }
}
