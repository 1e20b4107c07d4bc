import Foundation
import GRDB

extension SQLiteStore {
    static func registerOAuthMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("oauth-codes") { db in
            try db.execute(
                sql: """
                    CREATE TABLE oauth_codes (
                        hash TEXT PRIMARY KEY,
                        client_id TEXT NOT NULL,
                        redirect_uri TEXT NOT NULL,
                        challenge TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id),
                        created_at INTEGER NOT NULL,
                        expires_at INTEGER NOT NULL,
                        used_at INTEGER,
                        family_id TEXT
                    );
                    CREATE INDEX oauth_codes_created ON oauth_codes(created_at);
                    """)
        }
    }

    public func createAuthorizationCode(_ code: AuthorizationCode, now: Date) async throws {
        try await pool.write { db in
            // Codes are kept a day after issue so that a late replay is still recognised.
            try db.execute(sql: "DELETE FROM oauth_codes WHERE created_at < ?", arguments: [now.millis - 86_400_000])
            try db.execute(
                sql: """
                    INSERT INTO oauth_codes (hash, client_id, redirect_uri, challenge, user_id, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    code.hash, code.clientID, code.redirectURI, code.challenge, code.userID, now.millis,
                    code.expiresAt.millis,
                ])
        }
    }

    public func consumeAuthorizationCode(hash: String, now: Date, familyID: String) async throws -> AuthorizationCodeUse
    {
        try await pool.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM oauth_codes WHERE hash = ?", arguments: [hash])
            else {
                return .invalid
            }
            if (row["used_at"] as Int64?) != nil {
                return .reused(familyID: row["family_id"])
            }
            try db.execute(
                sql: "UPDATE oauth_codes SET used_at = ?, family_id = ? WHERE hash = ?",
                arguments: [now.millis, familyID, hash])
            let expiresAt: Int64 = row["expires_at"]
            guard expiresAt > now.millis else { return .invalid }
            return .valid(
                AuthorizationCode(
                    hash: hash, clientID: row["client_id"], redirectURI: row["redirect_uri"],
                    challenge: row["challenge"],
                    userID: row["user_id"], expiresAt: Date(millis: expiresAt)))
        }
    }

    public func revokeRefreshFamily(id: String, now: Date) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE refresh_families SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                arguments: [now.millis, id])
        }
    }

    public func revokeRefreshToken(hash: String, now: Date) async throws -> String? {
        try await pool.write { db in
            guard
                let family = try String.fetchOne(
                    db, sql: "SELECT family_id FROM refresh_tokens WHERE hash = ?", arguments: [hash])
            else {
                return nil
            }
            try db.execute(
                sql: "UPDATE refresh_families SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                arguments: [now.millis, family])
            return family
        }
    }

    public func refreshFamilyCreatedAt(id: String) async throws -> Date? {
        try await pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT created_at FROM refresh_families WHERE id = ?", arguments: [id]).map(
                Date.init(millis:))
        }
    }

    public func revokedFamilies(since: Date) async throws -> [String] {
        try await pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT id FROM refresh_families WHERE revoked_at >= ?", arguments: [since.millis])
        }
    }

    public func announceRevocation(familyID: String) async throws {
        try await recordAccountEvent(kind: "revoke", subject: familyID)
    }
}
