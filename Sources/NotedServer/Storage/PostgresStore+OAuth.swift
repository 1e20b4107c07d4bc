import Foundation
import PostgresNIO

extension PostgresStore {
    static let oauthMigration: (String, [PostgresQuery]) = (
        "oauth-codes",
        [
            """
            CREATE TABLE oauth_codes (
                hash TEXT PRIMARY KEY, client_id TEXT NOT NULL, redirect_uri TEXT NOT NULL, challenge TEXT NOT NULL,
                user_id TEXT NOT NULL REFERENCES users(id), created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,
                used_at BIGINT, family_id TEXT)
            """,
            "CREATE INDEX oauth_codes_created ON oauth_codes(created_at)",
        ]
    )

    public func createAuthorizationCode(_ code: AuthorizationCode, now: Date) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query(
                "DELETE FROM oauth_codes WHERE created_at < \(now.millis - 86_400_000)", logger: logger)
            try await connection.query(
                """
                INSERT INTO oauth_codes (hash, client_id, redirect_uri, challenge, user_id, created_at, expires_at)
                VALUES (\(code.hash), \(code.clientID), \(code.redirectURI), \(code.challenge), \(code.userID),
                        \(now.millis), \(code.expiresAt.millis))
                """, logger: logger)
        }
    }

    public func consumeAuthorizationCode(hash: String, now: Date, familyID newFamilyID: String) async throws
        -> AuthorizationCodeUse
    {
        try await client.withTransaction(logger: logger) { connection in
            let rows = try await connection.query(
                """
                SELECT client_id, redirect_uri, challenge, user_id, expires_at, used_at, family_id
                FROM oauth_codes WHERE hash = \(hash) FOR UPDATE
                """, logger: logger)
            var found: (String, String, String, String, Int64, Int64?, String?)?
            for try await row in rows.decode((String, String, String, String, Int64, Int64?, String?).self) {
                found = row
            }
            guard let (clientID, redirectURI, challenge, userID, expiresAt, usedAt, familyID) = found else {
                return .invalid
            }
            if usedAt != nil { return .reused(familyID: familyID) }
            try await connection.query(
                "UPDATE oauth_codes SET used_at = \(now.millis), family_id = \(newFamilyID) WHERE hash = \(hash)",
                logger: logger)
            guard expiresAt > now.millis else { return .invalid }
            return .valid(
                AuthorizationCode(
                    hash: hash, clientID: clientID, redirectURI: redirectURI, challenge: challenge, userID: userID,
                    expiresAt: Date(millis: expiresAt)))
        }
    }

    public func revokeRefreshFamily(id: String, now: Date) async throws {
        try await client.query(
            "UPDATE refresh_families SET revoked_at = \(now.millis) WHERE id = \(id) AND revoked_at IS NULL",
            logger: logger)
    }

    public func revokeRefreshToken(hash: String, now: Date) async throws -> String? {
        let rows = try await client.query(
            """
            UPDATE refresh_families SET revoked_at = COALESCE(revoked_at, \(now.millis))
            WHERE id = (SELECT family_id FROM refresh_tokens WHERE hash = \(hash))
            RETURNING id
            """, logger: logger)
        for try await id in rows.decode(String.self) { return id }
        return nil
    }

    public func refreshFamilyCreatedAt(id: String) async throws -> Date? {
        for try await millis in try await client.query(
            "SELECT created_at FROM refresh_families WHERE id = \(id)", logger: logger
        ).decode(Int64.self) {
            return Date(millis: millis)
        }
        return nil
    }

    public func revokedFamilies(since: Date) async throws -> [String] {
        var ids: [String] = []
        for try await id in try await client.query(
            "SELECT id FROM refresh_families WHERE revoked_at >= \(since.millis)", logger: logger
        ).decode(String.self) {
            ids.append(id)
        }
        return ids
    }

    public func announceRevocation(familyID: String) async throws {
        try await client.run(
            "SELECT pg_notify(\(Self.commitChannel), \(nodeID + " revoke " + familyID))", logger: logger)
    }
}
