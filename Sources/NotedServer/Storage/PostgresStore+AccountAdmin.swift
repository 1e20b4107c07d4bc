import Foundation
import PostgresNIO

/// What operators do to accounts, and two-factor sign-in, in PostgreSQL.
extension PostgresStore {
    static let accountAdminMigration: (String, [PostgresQuery]) = (
        "account-admin",
        [
            "ALTER TABLE users ADD COLUMN disabled_at BIGINT",
            "ALTER TABLE users ADD COLUMN totp_secret TEXT",
            "ALTER TABLE users ADD COLUMN totp_pending TEXT",
            "ALTER TABLE users ADD COLUMN totp_last_step BIGINT",
            "CREATE TABLE recovery_codes (user_id TEXT NOT NULL, code_hash TEXT NOT NULL, PRIMARY KEY (user_id, code_hash))",
        ]
    )

    public func users() async throws -> [UserSummary] {
        let rows = try await client.query(
            """
            SELECT u.id, u.username, u.created_at, u.disabled_at IS NOT NULL, u.totp_secret IS NOT NULL,
                   COALESCE(s.stored_records, 0), COALESCE(s.stored_bytes, 0),
                   (SELECT MAX(t.created_at) FROM refresh_families f JOIN refresh_tokens t ON t.family_id = f.id WHERE f.user_id = u.id)
            FROM users u LEFT JOIN user_seq s ON s.user_id = u.id
            ORDER BY u.username_key
            """, logger: logger)
        var users: [UserSummary] = []
        for try await (id, username, created, disabled, twoFactor, records, bytes, lastSeen)
            in rows.decode((String, String, Int64, Bool, Bool, Int64, Int64, Int64?).self)
        {
            users.append(
                UserSummary(
                    id: id, username: username, createdAt: Date(millis: created), disabled: disabled,
                    twoFactor: twoFactor,
                    records: records, storedBytes: bytes, lastSeen: lastSeen.map(Date.init(millis:))))
        }
        return users
    }

    public func setUserDisabled(id: String, disabled: Bool, now: Date) async throws -> (found: Bool, revoked: [String])
    {
        try await client.withTransaction(logger: logger) { connection in
            guard disabled else {
                let rows = try await connection.query(
                    "UPDATE users SET disabled_at = NULL WHERE id = \(id) RETURNING id", logger: logger)
                for try await _ in rows.decode(String.self) { return (true, []) }
                return (false, [])
            }
            var found = false
            let rows = try await connection.query(
                "UPDATE users SET disabled_at = COALESCE(disabled_at, \(now.millis)) WHERE id = \(id) RETURNING id",
                logger: logger)
            for try await _ in rows.decode(String.self) { found = true }
            guard found else { return (false, []) }
            var families: [String] = []
            let revoked = try await connection.query(
                """
                UPDATE refresh_families SET revoked_at = \(now.millis) WHERE user_id = \(id) AND revoked_at IS NULL RETURNING id
                """, logger: logger)
            for try await family in revoked.decode(String.self) { families.append(family) }
            try await connection.query("DELETE FROM oauth_codes WHERE user_id = \(id)", logger: logger)
            return (true, families)
        }
    }

    public func twoFactor(userID: String) async throws -> TwoFactorRecord? {
        let rows = try await client.query(
            """
            SELECT totp_secret, totp_pending, totp_last_step, (SELECT COUNT(*) FROM recovery_codes WHERE user_id = users.id)
            FROM users WHERE id = \(userID)
            """, logger: logger)
        for try await (secret, pending, lastStep, codes) in rows.decode((String?, String?, Int64?, Int64).self) {
            return TwoFactorRecord(secret: secret, pending: pending, lastStep: lastStep, recoveryCodesLeft: Int(codes))
        }
        return nil
    }

    public func setTwoFactorPending(userID: String, secret: String?) async throws {
        try await client.query("UPDATE users SET totp_pending = \(secret) WHERE id = \(userID)", logger: logger)
    }

    public func enableTwoFactor(userID: String, secret: String, recoveryHashes: [String]) async throws -> Bool {
        try await client.withTransaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                UPDATE users SET totp_secret = totp_pending, totp_pending = NULL, totp_last_step = NULL
                WHERE id = \(userID) AND totp_pending = \(secret) AND totp_secret IS NULL RETURNING id
                """, logger: logger)
            var enabled = false
            for try await _ in rows.decode(String.self) { enabled = true }
            guard enabled else { return false }
            try await connection.query("DELETE FROM recovery_codes WHERE user_id = \(userID)", logger: logger)
            for hash in recoveryHashes {
                try await connection.query(
                    "INSERT INTO recovery_codes (user_id, code_hash) VALUES (\(userID), \(hash)) ON CONFLICT DO NOTHING",
                    logger: logger)
            }
            return true
        }
    }

    public func disableTwoFactor(userID: String) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                "UPDATE users SET totp_secret = NULL, totp_pending = NULL, totp_last_step = NULL WHERE id = \(userID)",
                logger: logger)
            try await connection.query("DELETE FROM recovery_codes WHERE user_id = \(userID)", logger: logger)
        }
    }

    public func useTwoFactorStep(userID: String, step: Int64) async throws -> Bool {
        let rows = try await client.query(
            """
            UPDATE users SET totp_last_step = \(step)
            WHERE id = \(userID) AND totp_secret IS NOT NULL AND (totp_last_step IS NULL OR totp_last_step < \(step)) RETURNING id
            """, logger: logger)
        for try await _ in rows.decode(String.self) { return true }
        return false
    }

    public func useRecoveryCode(userID: String, hash: String) async throws -> Bool {
        let rows = try await client.query(
            "DELETE FROM recovery_codes WHERE user_id = \(userID) AND code_hash = \(hash) RETURNING code_hash",
            logger: logger)
        for try await _ in rows.decode(String.self) { return true }
        return false
    }

    public func announceAccountDisabled(userID: String) async throws {
        try await client.run(
            "SELECT pg_notify(\(Self.commitChannel), \(nodeID + " disabled " + userID))", logger: logger)
    }
}
