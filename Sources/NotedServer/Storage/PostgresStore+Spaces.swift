import Foundation
import PostgresNIO

/// Spaces, their members, invitations and links, in PostgreSQL (the same tables as SQLite's).
extension PostgresStore {
    /// Every user gets a personal space whose id is their own (SQLiteStore+Spaces); `user_seq`
    /// rows may now be a shared space's, so they no longer reference `users`.
    static let spacesMigration: (String, [PostgresQuery]) = (
        "spaces",
        [
            "ALTER TABLE user_seq DROP CONSTRAINT IF EXISTS user_seq_user_id_fkey",
            """
            CREATE TABLE spaces (
                id TEXT PRIMARY KEY, name TEXT NOT NULL, owner_id TEXT NOT NULL, personal BOOLEAN NOT NULL,
                created_at BIGINT NOT NULL)
            """,
            "CREATE INDEX spaces_by_owner ON spaces(owner_id)",
            """
            CREATE TABLE space_members (
                space_id TEXT NOT NULL, user_id TEXT NOT NULL, role TEXT NOT NULL, joined_at BIGINT NOT NULL,
                PRIMARY KEY (space_id, user_id))
            """,
            "CREATE INDEX space_members_by_user ON space_members(user_id)",
            """
            CREATE TABLE space_invitations (
                space_id TEXT NOT NULL, user_id TEXT NOT NULL, role TEXT NOT NULL, invited_by TEXT NOT NULL,
                created_at BIGINT NOT NULL, PRIMARY KEY (space_id, user_id))
            """,
            "CREATE INDEX space_invitations_by_user ON space_invitations(user_id)",
            """
            CREATE TABLE space_links (
                id TEXT PRIMARY KEY, space_id TEXT NOT NULL, secret_hash TEXT NOT NULL UNIQUE, role TEXT NOT NULL,
                created_by TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT, max_uses BIGINT,
                uses BIGINT NOT NULL DEFAULT 0, revoked_at BIGINT)
            """,
            "CREATE INDEX space_links_by_space ON space_links(space_id)",
            """
            INSERT INTO spaces (id, name, owner_id, personal, created_at)
            SELECT id, \(SpaceDefaults.personalName), id, TRUE, created_at FROM users
            """,
            "INSERT INTO space_members (space_id, user_id, role, joined_at) SELECT id, id, 'owner', created_at FROM users",
        ]
    )

    /// The personal space of a new user, in the transaction that inserts them.
    static func insertPersonalSpace(_ connection: PostgresConnection, userID: String, now: Date, logger: Logger)
        async throws
    {
        try await connection.query(
            """
            INSERT INTO spaces (id, name, owner_id, personal, created_at)
            VALUES (\(userID), \(SpaceDefaults.personalName), \(userID), TRUE, \(now.millis))
            """, logger: logger)
        try await connection.query(
            "INSERT INTO space_members (space_id, user_id, role, joined_at) VALUES (\(userID), \(userID), 'owner', \(now.millis))",
            logger: logger)
    }

    public func createSpace(_ space: Space) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                """
                INSERT INTO spaces (id, name, owner_id, personal, created_at)
                VALUES (\(space.id), \(space.name), \(space.ownerID), FALSE, \(space.createdAt.millis))
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO space_members (space_id, user_id, role, joined_at)
                VALUES (\(space.id), \(space.ownerID), 'owner', \(space.createdAt.millis))
                """, logger: logger)
            try await connection.query("INSERT INTO user_seq (user_id) VALUES (\(space.id))", logger: logger)
        }
    }

    public func spaceState(id: String) async throws -> SpaceState? {
        try await client.withConnection { connection in
            try await Self.spaceState(connection, id: id, lock: false, logger: self.logger)
        }
    }

    public func updateSpace<T: Sendable>(
        id: String, _ change: @escaping @Sendable (inout SpaceState) throws -> T
    ) async throws -> (value: T, changed: Set<String>)? {
        // A refusal commits nothing (nothing was written before it) and is answered as itself,
        // not as a failed transaction.
        let outcome = try await client.withTransaction(logger: logger) {
            connection -> Result<(T, Set<String>), any Error>? in
            guard let old = try await Self.spaceState(connection, id: id, lock: true, logger: self.logger) else {
                return nil
            }
            var state = old
            let value: T
            do {
                value = try change(&state)
            } catch {
                return .failure(error)
            }
            let changes = state.changes(from: old)
            try await Self.write(changes, spaceID: id, connection, logger: self.logger)
            return .success((value, changes.affectedUsers))
        }
        return try outcome.map { try $0.get() }.map { (value: $0.0, changed: $0.1) }
    }

    public func deleteSpace(id: String, check: @escaping @Sendable (SpaceState) throws -> Void) async throws
        -> [String]?
    {
        // A refusal commits nothing and is answered as itself (as in updateSpace).
        let outcome = try await client.withTransaction(logger: logger) { connection -> Result<[String], any Error>? in
            // The space's row first, as updateSpace holds it: a join or a hand-over waits, or
            // finds the space gone.
            guard let state = try await Self.spaceState(connection, id: id, lock: true, logger: self.logger) else {
                return nil
            }
            do {
                try check(state)
            } catch {
                return .failure(error)
            }
            // The space's `seq` row as a push holds it, then its records' rows as the history
            // service does (PostgresStore+Accounts, deleteUser).
            try await connection.run("SELECT seq FROM user_seq WHERE user_id = \(id) FOR UPDATE", logger: self.logger)
            try await connection.run("SELECT 1 FROM records WHERE user_id = \(id) FOR UPDATE", logger: self.logger)
            for table in [
                "revisions", "history_due", "records", "applied_changes", "blob_chunks", "blobs", "blob_uploads",
                "user_seq",
            ] {
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE user_id = $1", binds: Self.binds(id)),
                    logger: self.logger)
            }
            for table in ["space_members", "space_invitations", "space_links"] {
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE space_id = $1", binds: Self.binds(id)),
                    logger: self.logger)
            }
            try await connection.query("DELETE FROM spaces WHERE id = \(id)", logger: self.logger)
            return .success(Array(state.members.keys))
        }
        return try outcome?.get()
    }

    static func binds(_ value: String) -> PostgresBindings {
        var binds = PostgresBindings()
        binds.append(value)
        return binds
    }

    public func spaces(userID: String) async throws -> [SpaceSummary] {
        let rows = try await client.query(
            """
            SELECT s.id, s.name, s.owner_id, s.personal, s.created_at, m.role, COALESCE(o.username, ''),
                   (SELECT COUNT(*) FROM space_members c WHERE c.space_id = s.id),
                   COALESCE((SELECT q.seq FROM user_seq q WHERE q.user_id = s.id), 0)
            FROM space_members m JOIN spaces s ON s.id = m.space_id LEFT JOIN users o ON o.id = s.owner_id
            WHERE m.user_id = \(userID)
            ORDER BY s.personal DESC, s.name, s.id
            """, logger: logger)
        var spaces: [SpaceSummary] = []
        for try await (id, name, owner, personal, created, role, ownerName, members, seq) in rows.decode(
            (String, String, String, Bool, Int64, String, String, Int64, Int64).self)
        {
            spaces.append(
                SpaceSummary(
                    space: Space(
                        id: id, name: name, ownerID: owner, personal: personal, createdAt: Date(millis: created)),
                    role: SpaceRole(rawValue: role) ?? .viewer, ownerName: ownerName, memberCount: members, seq: seq))
        }
        return spaces
    }

    public func invitations(userID: String) async throws -> [PendingInvitation] {
        let rows = try await client.query(
            """
            SELECT i.space_id, s.name, i.role, COALESCE(u.username, ''), i.created_at
            FROM space_invitations i JOIN spaces s ON s.id = i.space_id LEFT JOIN users u ON u.id = i.invited_by
            WHERE i.user_id = \(userID) ORDER BY i.created_at, i.space_id
            """, logger: logger)
        var invitations: [PendingInvitation] = []
        for try await (space, name, role, inviter, created) in rows.decode((String, String, String, String, Int64).self)
        {
            invitations.append(
                PendingInvitation(
                    spaceID: space, spaceName: name, role: SpaceRole(rawValue: role) ?? .viewer,
                    invitedByName: inviter, createdAt: Date(millis: created)))
        }
        return invitations
    }

    public func announceMembership(userID: String) async throws {
        try await client.run(
            "SELECT pg_notify(\(Self.commitChannel), \(nodeID + " membership " + userID))", logger: logger)
    }

    public func role(spaceID: String, userID: String) async throws -> SpaceRole? {
        let rows = try await client.query(
            "SELECT role FROM space_members WHERE space_id = \(spaceID) AND user_id = \(userID)", logger: logger)
        for try await role in rows.decode(String.self) { return SpaceRole(rawValue: role) }
        return nil
    }

    public func spaceLink(secretHash: String) async throws -> (spaceID: String, linkID: String)? {
        let rows = try await client.query(
            "SELECT space_id, id FROM space_links WHERE secret_hash = \(secretHash)", logger: logger)
        for try await (space, id) in rows.decode((String, String).self) { return (space, id) }
        return nil
    }

    static func spaceState(_ connection: PostgresConnection, id: String, lock: Bool, logger: Logger) async throws
        -> SpaceState?
    {
        let query: PostgresQuery =
            lock
            ? "SELECT id, name, owner_id, personal, created_at FROM spaces WHERE id = \(id) FOR UPDATE"
            : "SELECT id, name, owner_id, personal, created_at FROM spaces WHERE id = \(id)"
        var found: Space?
        for try await (id, name, owner, personal, created) in try await connection.query(query, logger: logger)
            .decode((String, String, String, Bool, Int64).self)
        {
            found = Space(id: id, name: name, ownerID: owner, personal: personal, createdAt: Date(millis: created))
        }
        guard let space = found else { return nil }
        var state = SpaceState(space: space)
        for try await (user, username, role, joined) in try await connection.query(
            """
            SELECT m.user_id, COALESCE(u.username, ''), m.role, m.joined_at
            FROM space_members m LEFT JOIN users u ON u.id = m.user_id WHERE m.space_id = \(id)
            """, logger: logger
        ).decode((String, String, String, Int64).self) {
            state.members[user] = SpaceMember(
                userID: user, username: username, role: SpaceRole(rawValue: role) ?? .viewer,
                joinedAt: Date(millis: joined))
        }
        for try await (user, username, role, invitedBy, created) in try await connection.query(
            """
            SELECT i.user_id, COALESCE(u.username, ''), i.role, i.invited_by, i.created_at
            FROM space_invitations i LEFT JOIN users u ON u.id = i.user_id WHERE i.space_id = \(id)
            """, logger: logger
        ).decode((String, String, String, String, Int64).self) {
            state.invitations[user] = SpaceInvitation(
                userID: user, username: username, role: SpaceRole(rawValue: role) ?? .viewer, invitedBy: invitedBy,
                createdAt: Date(millis: created))
        }
        for try await (link, hash, role, createdBy, created, expires, maxUses, uses, revoked)
            in try await connection
            .query(
                """
                SELECT id, secret_hash, role, created_by, created_at, expires_at, max_uses, uses, revoked_at
                FROM space_links WHERE space_id = \(id)
                """, logger: logger
            ).decode((String, String, String, String, Int64, Int64?, Int64?, Int64, Int64?).self)
        {
            state.links[link] = SpaceLink(
                id: link, secretHash: hash, role: SpaceRole(rawValue: role) ?? .viewer, createdBy: createdBy,
                createdAt: Date(millis: created), expiresAt: expires.map(Date.init(millis:)), maxUses: maxUses,
                uses: uses, revokedAt: revoked.map(Date.init(millis:)))
        }
        return state
    }

    static func write(_ changes: SpaceStateChanges, spaceID: String, _ connection: PostgresConnection, logger: Logger)
        async throws
    {
        if let space = changes.space {
            try await connection.query(
                "UPDATE spaces SET name = \(space.name), owner_id = \(space.ownerID) WHERE id = \(spaceID)",
                logger: logger)
        }
        for member in changes.upsertedMembers {
            try await connection.query(
                """
                INSERT INTO space_members (space_id, user_id, role, joined_at)
                VALUES (\(spaceID), \(member.userID), \(member.role.rawValue), \(member.joinedAt.millis))
                ON CONFLICT (space_id, user_id) DO UPDATE SET role = excluded.role
                """, logger: logger)
        }
        for userID in changes.removedMembers {
            try await connection.query(
                "DELETE FROM space_members WHERE space_id = \(spaceID) AND user_id = \(userID)", logger: logger)
        }
        for invitation in changes.upsertedInvitations {
            try await connection.query(
                """
                INSERT INTO space_invitations (space_id, user_id, role, invited_by, created_at)
                VALUES (\(spaceID), \(invitation.userID), \(invitation.role.rawValue), \(invitation.invitedBy),
                        \(invitation.createdAt.millis))
                ON CONFLICT (space_id, user_id) DO UPDATE SET role = excluded.role, invited_by = excluded.invited_by,
                    created_at = excluded.created_at
                """, logger: logger)
        }
        for userID in changes.removedInvitations {
            try await connection.query(
                "DELETE FROM space_invitations WHERE space_id = \(spaceID) AND user_id = \(userID)", logger: logger)
        }
        for link in changes.upsertedLinks {
            try await connection.query(
                """
                INSERT INTO space_links (id, space_id, secret_hash, role, created_by, created_at, expires_at, max_uses, uses, revoked_at)
                VALUES (\(link.id), \(spaceID), \(link.secretHash), \(link.role.rawValue), \(link.createdBy),
                        \(link.createdAt.millis), \(link.expiresAt?.millis), \(link.maxUses), \(link.uses),
                        \(link.revokedAt?.millis))
                ON CONFLICT (id) DO UPDATE SET uses = excluded.uses, revoked_at = excluded.revoked_at
                """, logger: logger)
        }
        for id in changes.removedLinks {
            try await connection.query(
                "DELETE FROM space_links WHERE space_id = \(spaceID) AND id = \(id)", logger: logger)
        }
    }
}
