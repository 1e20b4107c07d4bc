import Foundation
import GRDB

/// Deleting an account, and the account's sign-in sessions, in SQLite.
extension SQLiteStore {
    public func deleteUser(id: String) async throws -> [String] {
        let families = try await pool.write { db -> [String] in
            // The write transaction holds SQLite's only writer: no push of the user is half-way.
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE id = ?", arguments: [id]) != nil else {
                return []
            }
            let families = try String.fetchAll(
                db, sql: "SELECT id FROM refresh_families WHERE user_id = ?", arguments: [id])
            for statement in [
                "DELETE FROM refresh_tokens WHERE family_id IN (SELECT id FROM refresh_families WHERE user_id = ?)",
                "DELETE FROM refresh_families WHERE user_id = ?",
                "DELETE FROM oauth_codes WHERE user_id = ?",
                "DELETE FROM recovery_codes WHERE user_id = ?",
                // Shared spaces it owned were handed over or deleted first (``Spaces/release(userID:)``).
                "DELETE FROM space_members WHERE user_id = ?",
                "DELETE FROM space_invitations WHERE user_id = ?",
                "DELETE FROM spaces WHERE id = ?",
                "DELETE FROM users WHERE id = ?",
            ] {
                try db.execute(sql: statement, arguments: [id])
            }
            try Self.deleteSpaceData(db, id)
            return families
        }
        await blobLocks.withLock(id) { blobFiles.removeUser(id) }
        return families
    }

    public func signInSessions(userID: String, now: Date) async throws -> [SignInSession] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT f.id, f.client_id, f.device, f.created_at, MAX(t.created_at) AS last_seen
                    FROM refresh_families f JOIN refresh_tokens t ON t.family_id = f.id
                    WHERE f.user_id = ? AND f.revoked_at IS NULL
                    GROUP BY f.id
                    HAVING MAX(t.expires_at) > ?
                    ORDER BY f.created_at, f.id
                    """, arguments: [userID, now.millis]
            ).map { row in
                SignInSession(
                    id: row["id"], clientID: row["client_id"], device: row["device"],
                    signedInAt: Date(millis: row["created_at"]), lastSeen: Date(millis: row["last_seen"]))
            }
        }
    }

    public func revokeSignInSessions(userID: String, only: String?, except: String?, now: Date) async throws -> [String]
    {
        try await pool.write { db in
            let ids = try String.fetchAll(
                db,
                sql: """
                    SELECT id FROM refresh_families
                    WHERE user_id = ? AND revoked_at IS NULL AND (? IS NULL OR id = ?) AND (? IS NULL OR id <> ?)
                    """, arguments: [userID, only, only, except, except])
            for id in ids {
                try db.execute(
                    sql: "UPDATE refresh_families SET revoked_at = ? WHERE id = ?", arguments: [now.millis, id])
            }
            return ids
        }
    }

    public func announceAccountDeletion(userID: String) async throws {
        try await recordAccountEvent(kind: "deleted", subject: userID)
    }
}
