import Foundation

/// Authorization codes, refresh tokens and revocation, which both backends keep in their database so that
/// several server nodes agree on them.
public protocol OAuthStore: Sendable {
    func createAuthorizationCode(_ code: AuthorizationCode, now: Date) async throws
    /// Marks the code used, atomically, recording the refresh-token family its use is about to
    /// start, so that a replay racing the first use still finds what to revoke.
    func consumeAuthorizationCode(hash: String, now: Date, familyID: String) async throws -> AuthorizationCodeUse
    func revokeRefreshFamily(id: String, now: Date) async throws
    /// Revokes the family of a refresh token and returns its id; nil when the token is unknown.
    @discardableResult
    func revokeRefreshToken(hash: String, now: Date) async throws -> String?
    /// The refresh-token families (sign-in sessions) revoked at or after `since`: what a node
    /// loads at start and after losing touch with the others (docs/security.md, "Revocation").
    func revokedFamilies(since: Date) async throws -> [String]
    /// Tells every node that a family was revoked (PostgreSQL `NOTIFY`); one node: nothing to do.
    func announceRevocation(familyID: String) async throws
    /// Tells every node that an account was deleted, so that they close its connections.
    func announceAccountDeletion(userID: String) async throws
    /// Starts a new refresh-token family with its first token.
    func createRefreshFamily(_ family: RefreshFamily, firstTokenHash: String, expiresAt: Date, now: Date) async throws
    /// Marks the token used and stores its replacement, or revokes the family of a reused token.
    func rotateRefreshToken(hash: String, replacementHash: String, expiresAt: Date, now: Date) async throws
        -> RefreshRotation
    /// When a refresh-token family (a sign-in) began; nil if unknown.
    func refreshFamilyCreatedAt(id: String) async throws -> Date?
}
