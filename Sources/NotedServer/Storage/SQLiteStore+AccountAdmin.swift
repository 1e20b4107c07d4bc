import Foundation
import GRDB

/// What operators do to accounts, two-factor sign-in, and the account events a running server
/// hears from `noted-server users` run beside it, in SQLite.
extension SQLiteStore {
    static func registerAccountAdminMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("account-admin") { db in
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN disabled_at INTEGER;
                    ALTER TABLE users ADD COLUMN totp_secret TEXT;
                    ALTER TABLE users ADD COLUMN totp_pending TEXT;
                    ALTER TABLE users ADD COLUMN totp_last_step INTEGER;
                    CREATE TABLE recovery_codes (
                        user_id TEXT NOT NULL,
                        code_hash TEXT NOT NULL,
                        PRIMARY KEY (user_id, code_hash)
                    );
                    CREATE TABLE account_events (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        kind TEXT NOT NULL,
                        subject TEXT NOT NULL,
                        created_at INTEGER NOT NULL
                    );
                    """)
        }
    }

    public func users() async throws -> [UserSummary] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT u.id, u.username, u.created_at, u.disabled_at IS NOT NULL AS disabled, u.totp_secret IS NOT NULL AS two_factor,
                           COALESCE(s.stored_records, 0) AS records, COALESCE(s.stored_bytes, 0) AS bytes,
                           (SELECT MAX(t.created_at) FROM refresh_families f JOIN refresh_tokens t ON t.family_id = f.id
                            WHERE f.user_id = u.id) AS last_seen
                    FROM users u LEFT JOIN user_seq s ON s.user_id = u.id
                    ORDER BY u.username_key
                    """
            ).map { row in
                UserSummary(
                    id: row["id"], username: row["username"], createdAt: Date(millis: row["created_at"]),
                    disabled: row["disabled"],
                    twoFactor: row["two_factor"], records: row["records"], storedBytes: row["bytes"],
                    lastSeen: (row["last_seen"] as Int64?).map(Date.init(millis:)))
            }
        }
    }

    public func setUserDisabled(id: String, disabled: Bool, now: Date) async throws -> (found: Bool, revoked: [String])
    {
        try await pool.write { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM users WHERE id = ?", arguments: [id]) != nil else {
                return (false, [])
            }
            guard disabled else {
                try db.execute(sql: "UPDATE users SET disabled_at = NULL WHERE id = ?", arguments: [id])
                return (true, [])
            }
            try db.execute(
                sql: "UPDATE users SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?",
                arguments: [now.millis, id])
            let families = try String.fetchAll(
                db, sql: "SELECT id FROM refresh_families WHERE user_id = ? AND revoked_at IS NULL", arguments: [id])
            try db.execute(
                sql: "UPDATE refresh_families SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
                arguments: [now.millis, id])
            try db.execute(sql: "DELETE FROM oauth_codes WHERE user_id = ?", arguments: [id])
            return (true, families)
        }
    }

    public func twoFactor(userID: String) async throws -> TwoFactorRecord? {
        try await pool.read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT totp_secret, totp_pending, totp_last_step, (SELECT COUNT(*) FROM recovery_codes WHERE user_id = users.id) AS codes
                    FROM users WHERE id = ?
                    """, arguments: [userID]
            ).map { row in
                TwoFactorRecord(
                    secret: row["totp_secret"], pending: row["totp_pending"], lastStep: row["totp_last_step"],
                    recoveryCodesLeft: row["codes"])
            }
        }
    }

    public func setTwoFactorPending(userID: String, secret: String?) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE users SET totp_pending = ? WHERE id = ?", arguments: [secret, userID])
        }
    }

    public func enableTwoFactor(userID: String, secret: String, recoveryHashes: [String]) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE users SET totp_secret = totp_pending, totp_pending = NULL, totp_last_step = NULL
                    WHERE id = ? AND totp_pending = ? AND totp_secret IS NULL
                    """, arguments: [userID, secret])
            guard db.changesCount == 1 else { return false }
            try db.execute(sql: "DELETE FROM recovery_codes WHERE user_id = ?", arguments: [userID])
            for hash in recoveryHashes {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO recovery_codes (user_id, code_hash) VALUES (?, ?)",
                    arguments: [userID, hash])
            }
            return true
        }
    }

    public func disableTwoFactor(userID: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE users SET totp_secret = NULL, totp_pending = NULL, totp_last_step = NULL WHERE id = ?",
                arguments: [userID])
            try db.execute(sql: "DELETE FROM recovery_codes WHERE user_id = ?", arguments: [userID])
        }
    }

    public func useTwoFactorStep(userID: String, step: Int64) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE users SET totp_last_step = ? WHERE id = ? AND totp_secret IS NOT NULL AND (totp_last_step IS NULL OR totp_last_step < ?)
                    """, arguments: [step, userID, step])
            return db.changesCount == 1
        }
    }

    public func useRecoveryCode(userID: String, hash: String) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "DELETE FROM recovery_codes WHERE user_id = ? AND code_hash = ?", arguments: [userID, hash])
            return db.changesCount == 1
        }
    }

    public func announceAccountDisabled(userID: String) async throws {
        try await recordAccountEvent(kind: "disabled", subject: userID)
    }

    /// Writes an account event for the server that runs on this file: one SQLite file has one
    /// server, but `noted-server users` runs beside it as another process, and what it does
    /// (a sign-in revoked, an account disabled or deleted) must reach that server's open
    /// connections. Events older than an hour are dropped: a server hears them within seconds.
    func recordAccountEvent(kind: String, subject: String, now: Date = Date()) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM account_events WHERE created_at < ?", arguments: [now.millis - 3_600_000])
            try db.execute(
                sql: "INSERT INTO account_events (kind, subject, created_at) VALUES (?, ?, ?)",
                arguments: [kind, subject, now.millis])
        }
    }

    /// How often a running server looks for account events written by another process.
    static let accountEventInterval = Duration.seconds(1)

    /// Hears account events written after it starts, until cancelled.
    func listenForAccountEvents(
        onListening: @Sendable () async -> Void, _ handler: @Sendable (CommitNotice) async -> Void
    ) async throws {
        var last = try await pool.read { db in try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM account_events") ?? 0 }
        await onListening()
        while !Task.isCancelled {
            try await Task.sleep(for: Self.accountEventInterval)
            // A read that fails (the disk, for a moment) is tried again at the next tick.
            guard
                let events = try? await pool.read({ [last] db in
                    try Row.fetchAll(
                        db, sql: "SELECT id, kind, subject FROM account_events WHERE id > ? ORDER BY id",
                        arguments: [last]
                    )
                    .map { (id: $0["id"] as Int64, kind: $0["kind"] as String, subject: $0["subject"] as String) }
                })
            else { continue }
            for event in events {
                last = event.id
                switch event.kind {
                case "revoke":
                    await handler(CommitNotice(userID: "", seq: 0, fromThisNode: false, revokedFamily: event.subject))
                case "deleted":
                    await handler(CommitNotice(userID: "", seq: 0, fromThisNode: false, deletedUser: event.subject))
                case "disabled":
                    await handler(CommitNotice(userID: "", seq: 0, fromThisNode: false, disabledUser: event.subject))
                default: continue
                }
            }
        }
    }
}
