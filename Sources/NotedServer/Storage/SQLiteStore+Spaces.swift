import Foundation
import GRDB

/// Spaces, their members, invitations and links, in SQLite.
extension SQLiteStore {
    /// Every user gets a personal space whose id is their own, holding what they stored
    /// (records, history and blobs are keyed by space id from now on, so they stay where they
    /// are); `user_seq` becomes the sequence of any space, so its rows no longer name a user.
    static func registerSpacesMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("spaces") { db in
            try db.execute(
                sql: """
                    DROP TRIGGER revisions_bytes_insert;
                    DROP TRIGGER revisions_bytes_delete;
                    DROP TRIGGER revisions_bytes_update;
                    CREATE TABLE space_seq (
                        user_id TEXT PRIMARY KEY,
                        seq INTEGER NOT NULL DEFAULT 0,
                        purged_seq INTEGER NOT NULL DEFAULT 0,
                        stored_bytes INTEGER NOT NULL DEFAULT 0,
                        stored_records INTEGER NOT NULL DEFAULT 0,
                        history_bytes INTEGER NOT NULL DEFAULT 0
                    );
                    INSERT INTO space_seq (user_id, seq, purged_seq, stored_bytes, stored_records, history_bytes)
                        SELECT user_id, seq, purged_seq, stored_bytes, stored_records, history_bytes FROM user_seq;
                    DROP TABLE user_seq;
                    ALTER TABLE space_seq RENAME TO user_seq;
                    \(historyBytesTriggers)
                    \(spacesSchema)
                    INSERT INTO spaces (id, name, owner_id, personal, created_at)
                        SELECT id, '\(SpaceDefaults.personalName)', id, 1, created_at FROM users;
                    INSERT INTO space_members (space_id, user_id, role, joined_at)
                        SELECT id, id, 'owner', created_at FROM users;
                    """)
        }
    }

    static let spacesSchema = """
        CREATE TABLE spaces (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            owner_id TEXT NOT NULL,
            personal INTEGER NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX spaces_by_owner ON spaces(owner_id);
        CREATE TABLE space_members (
            space_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            role TEXT NOT NULL,
            joined_at INTEGER NOT NULL,
            PRIMARY KEY (space_id, user_id)
        );
        CREATE INDEX space_members_by_user ON space_members(user_id);
        CREATE TABLE space_invitations (
            space_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            role TEXT NOT NULL,
            invited_by TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (space_id, user_id)
        );
        CREATE INDEX space_invitations_by_user ON space_invitations(user_id);
        CREATE TABLE space_links (
            id TEXT PRIMARY KEY,
            space_id TEXT NOT NULL,
            secret_hash TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL,
            created_by TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER,
            max_uses INTEGER,
            uses INTEGER NOT NULL DEFAULT 0,
            revoked_at INTEGER
        );
        CREATE INDEX space_links_by_space ON space_links(space_id);
        """

    /// The personal space of a new user, in the transaction that inserts them.
    static func insertPersonalSpace(_ db: Database, userID: String, now: Date) throws {
        try db.execute(
            sql: "INSERT INTO spaces (id, name, owner_id, personal, created_at) VALUES (?, ?, ?, 1, ?)",
            arguments: [userID, SpaceDefaults.personalName, userID, now.millis])
        try db.execute(
            sql: "INSERT INTO space_members (space_id, user_id, role, joined_at) VALUES (?, ?, 'owner', ?)",
            arguments: [userID, userID, now.millis])
    }

    public func createSpace(_ space: Space) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO spaces (id, name, owner_id, personal, created_at) VALUES (?, ?, ?, 0, ?)",
                arguments: [space.id, space.name, space.ownerID, space.createdAt.millis])
            try db.execute(
                sql: "INSERT INTO space_members (space_id, user_id, role, joined_at) VALUES (?, ?, 'owner', ?)",
                arguments: [space.id, space.ownerID, space.createdAt.millis])
            try db.execute(sql: "INSERT INTO user_seq (user_id) VALUES (?)", arguments: [space.id])
        }
    }

    public func spaceState(id: String) async throws -> SpaceState? {
        try await pool.read { db in try Self.spaceState(db, id: id) }
    }

    public func updateSpace<T: Sendable>(
        id: String, _ change: @escaping @Sendable (inout SpaceState) throws -> T
    ) async throws -> (value: T, changed: Set<String>)? {
        try await pool.write { db in
            guard let old = try Self.spaceState(db, id: id) else { return nil }
            var state = old
            let value = try change(&state)
            let changes = state.changes(from: old)
            try Self.write(changes, spaceID: id, db)
            return (value, changes.affectedUsers)
        }
    }

    public func deleteSpace(id: String, check: @escaping @Sendable (SpaceState) throws -> Void) async throws
        -> [String]?
    {
        let members = try await pool.write { db -> [String]? in
            guard let state = try Self.spaceState(db, id: id) else { return nil }
            try check(state)
            try Self.deleteSpaceData(db, id)
            for statement in [
                "DELETE FROM space_members WHERE space_id = ?",
                "DELETE FROM space_invitations WHERE space_id = ?",
                "DELETE FROM space_links WHERE space_id = ?",
                "DELETE FROM spaces WHERE id = ?",
            ] {
                try db.execute(sql: statement, arguments: [id])
            }
            return Array(state.members.keys)
        }
        if members != nil { await blobLocks.withLock(id) { blobFiles.removeUser(id) } }
        return members
    }

    /// Deletes what a space holds: its records, history, `ccid` results, blobs' rows and `seq`
    /// (the files go after the transaction, ``BlobFiles/removeUser(_:)``).
    static func deleteSpaceData(_ db: Database, _ id: String) throws {
        for table in ["revisions", "history_due", "records", "applied_changes", "blobs", "blob_uploads", "user_seq"] {
            try db.execute(sql: "DELETE FROM \(table) WHERE user_id = ?", arguments: [id])
        }
    }

    public func spaces(userID: String) async throws -> [SpaceSummary] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT s.id, s.name, s.owner_id, s.personal, s.created_at, m.role,
                           COALESCE(o.username, '') AS owner_name,
                           (SELECT COUNT(*) FROM space_members c WHERE c.space_id = s.id) AS members,
                           COALESCE((SELECT q.seq FROM user_seq q WHERE q.user_id = s.id), 0) AS seq
                    FROM space_members m JOIN spaces s ON s.id = m.space_id LEFT JOIN users o ON o.id = s.owner_id
                    WHERE m.user_id = ?
                    ORDER BY s.personal DESC, s.name, s.id
                    """, arguments: [userID]
            ).map { row in
                SpaceSummary(
                    space: Self.space(row), role: SpaceRole(rawValue: row["role"]) ?? .viewer,
                    ownerName: row["owner_name"], memberCount: row["members"], seq: row["seq"])
            }
        }
    }

    public func invitations(userID: String) async throws -> [PendingInvitation] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT i.space_id, s.name, i.role, COALESCE(u.username, '') AS inviter, i.created_at
                    FROM space_invitations i JOIN spaces s ON s.id = i.space_id LEFT JOIN users u ON u.id = i.invited_by
                    WHERE i.user_id = ? ORDER BY i.created_at, i.space_id
                    """, arguments: [userID]
            ).map { row in
                PendingInvitation(
                    spaceID: row["space_id"], spaceName: row["name"], role: SpaceRole(rawValue: row["role"]) ?? .viewer,
                    invitedByName: row["inviter"], createdAt: Date(millis: row["created_at"]))
            }
        }
    }

    /// One node uses a SQLite database: its sessions were told directly.
    public func announceMembership(userID: String) async throws {}

    public func role(spaceID: String, userID: String) async throws -> SpaceRole? {
        try await pool.read { db in
            try String.fetchOne(
                db, sql: "SELECT role FROM space_members WHERE space_id = ? AND user_id = ?",
                arguments: [spaceID, userID]
            ).flatMap(SpaceRole.init(rawValue:))
        }
    }

    public func spaceLink(secretHash: String) async throws -> (spaceID: String, linkID: String)? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT space_id, id FROM space_links WHERE secret_hash = ?", arguments: [secretHash]
            ).map { ($0["space_id"], $0["id"]) }
        }
    }

    static func space(_ row: Row) -> Space {
        Space(
            id: row["id"], name: row["name"], ownerID: row["owner_id"], personal: row["personal"],
            createdAt: Date(millis: row["created_at"]))
    }

    static func spaceState(_ db: Database, id: String) throws -> SpaceState? {
        guard
            let space = try Row.fetchOne(
                db, sql: "SELECT id, name, owner_id, personal, created_at FROM spaces WHERE id = ?", arguments: [id]
            ).map(space)
        else { return nil }
        var state = SpaceState(space: space)
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT m.user_id, COALESCE(u.username, '') AS username, m.role, m.joined_at
                FROM space_members m LEFT JOIN users u ON u.id = m.user_id WHERE m.space_id = ?
                """, arguments: [id])
        {
            let member = SpaceMember(
                userID: row["user_id"], username: row["username"], role: SpaceRole(rawValue: row["role"]) ?? .viewer,
                joinedAt: Date(millis: row["joined_at"]))
            state.members[member.userID] = member
        }
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT i.user_id, COALESCE(u.username, '') AS username, i.role, i.invited_by, i.created_at
                FROM space_invitations i LEFT JOIN users u ON u.id = i.user_id WHERE i.space_id = ?
                """, arguments: [id])
        {
            let invitation = SpaceInvitation(
                userID: row["user_id"], username: row["username"], role: SpaceRole(rawValue: row["role"]) ?? .viewer,
                invitedBy: row["invited_by"], createdAt: Date(millis: row["created_at"]))
            state.invitations[invitation.userID] = invitation
        }
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT id, secret_hash, role, created_by, created_at, expires_at, max_uses, uses, revoked_at
                FROM space_links WHERE space_id = ?
                """, arguments: [id])
        {
            let link = SpaceLink(
                id: row["id"], secretHash: row["secret_hash"], role: SpaceRole(rawValue: row["role"]) ?? .viewer,
                createdBy: row["created_by"], createdAt: Date(millis: row["created_at"]),
                expiresAt: (row["expires_at"] as Int64?).map(Date.init(millis:)), maxUses: row["max_uses"],
                uses: row["uses"], revokedAt: (row["revoked_at"] as Int64?).map(Date.init(millis:)))
            state.links[link.id] = link
        }
        return state
    }

    static func write(_ changes: SpaceStateChanges, spaceID: String, _ db: Database) throws {
        if let space = changes.space {
            try db.execute(
                sql: "UPDATE spaces SET name = ?, owner_id = ? WHERE id = ?",
                arguments: [space.name, space.ownerID, spaceID])
        }
        for member in changes.upsertedMembers {
            try db.execute(
                sql: """
                    INSERT INTO space_members (space_id, user_id, role, joined_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (space_id, user_id) DO UPDATE SET role = excluded.role
                    """, arguments: [spaceID, member.userID, member.role.rawValue, member.joinedAt.millis])
        }
        for userID in changes.removedMembers {
            try db.execute(
                sql: "DELETE FROM space_members WHERE space_id = ? AND user_id = ?", arguments: [spaceID, userID])
        }
        for invitation in changes.upsertedInvitations {
            try db.execute(
                sql: """
                    INSERT INTO space_invitations (space_id, user_id, role, invited_by, created_at) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (space_id, user_id) DO UPDATE SET role = excluded.role, invited_by = excluded.invited_by,
                        created_at = excluded.created_at
                    """,
                arguments: [
                    spaceID, invitation.userID, invitation.role.rawValue, invitation.invitedBy,
                    invitation.createdAt.millis,
                ])
        }
        for userID in changes.removedInvitations {
            try db.execute(
                sql: "DELETE FROM space_invitations WHERE space_id = ? AND user_id = ?", arguments: [spaceID, userID])
        }
        for link in changes.upsertedLinks {
            try db.execute(
                sql: """
                    INSERT INTO space_links (id, space_id, secret_hash, role, created_by, created_at, expires_at, max_uses, uses, revoked_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET uses = excluded.uses, revoked_at = excluded.revoked_at
                    """,
                arguments: [
                    link.id, spaceID, link.secretHash, link.role.rawValue, link.createdBy, link.createdAt.millis,
                    link.expiresAt?.millis, link.maxUses, link.uses, link.revokedAt?.millis,
                ])
        }
        for id in changes.removedLinks {
            try db.execute(sql: "DELETE FROM space_links WHERE space_id = ? AND id = ?", arguments: [spaceID, id])
        }
    }
}
