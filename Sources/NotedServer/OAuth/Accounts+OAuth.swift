import Foundation
import HummingbirdBcrypt
import NIOPosix

extension Accounts {
    /// The account whose password this is; rate-limited per address and per username.
    /// - Throws: `AuthError` `.invalidCredentials` (the same for an unknown user) or `.rateLimited`.
    func verifyPassword(username: String, password: String, address: String) async throws -> UserAccount {
        let key = username.lowercased()
        try limiter.check(keys: ["signin-address:\(address)", "signin-user:\(key)"])
        guard password.utf8.count <= 4096 else { throw AuthError(kind: .invalidCredentials) }
        let user = try await store.user(usernameKey: key)
        let storedHash = user?.passwordHash ?? dummyHash
        let matches = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: storedHash) }
        guard let user, matches else { throw AuthError(kind: .invalidCredentials) }
        return user
    }

    /// Starts a refresh-token family for a user and client: the token response and the family id.
    func issueTokens(userID: String, clientID: String, device: String?) async throws -> (TokenResponse, familyID: String) {
        let now = Date()
        let refresh = Self.newRefreshToken()
        let family = RefreshFamily(id: UUID().uuidString.lowercased(), userID: userID, clientID: clientID, device: device)
        try await store.createRefreshFamily(family, firstTokenHash: Self.hash(refresh), expiresAt: now.addingTimeInterval(refreshLifetime), now: now)
        let access = try await tokens.issue(userID: userID, clientID: clientID, now: now)
        let response = TokenResponse(accessToken: access.token, expiresIn: Int(tokens.lifetime.timeInterval.rounded(.up)), refreshToken: refresh)
        return (response, family.id)
    }
}
