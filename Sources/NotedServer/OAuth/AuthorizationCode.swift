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
