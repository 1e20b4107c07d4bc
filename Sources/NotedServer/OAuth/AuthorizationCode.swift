import Foundation

/// An authorization code as stored: only its hash, and what it was issued for.
public struct AuthorizationCode: Sendable, Hashable {
    /// SHA-256 of the code.
    public var hash: String
    public var clientID: String
    public var redirectURI: String
    /// The PKCE S256 challenge the code is bound to.
    public var challenge: String
    public var userID: String
    public var expiresAt: Date

    public init(hash: String, clientID: String, redirectURI: String, challenge: String, userID: String, expiresAt: Date)
    {
        self.hash = hash
        self.clientID = clientID
        self.redirectURI = redirectURI
        self.challenge = challenge
        self.userID = userID
        self.expiresAt = expiresAt
    }
}

/// What presenting an authorization code found.
public enum AuthorizationCodeUse: Sendable, Hashable {
    /// First use of a live code: it is now used up.
    case valid(AuthorizationCode)
    /// The code was used before; the refresh-token family issued then, if any, must be revoked.
    case reused(familyID: String?)
    /// Unknown or expired.
    case invalid
}

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
