import Foundation
import NIOPosix

extension Accounts {
    /// The account whose password this is; rate-limited per address and per username.
    /// - Throws: `AuthError` `.invalidCredentials` (the same for an unknown user) or `.rateLimited`.
    func verifyPassword(username: String, password: String, address: String) async throws -> UserAccount {
        // No username is that long; it does not become a key either.
        guard username.utf8.count <= 256 else { throw AuthError(kind: .invalidCredentials) }
        let key = username.lowercased()
        // Only failed attempts count: a user signing in often on many devices is never locked
        // out, a guesser is after `limit` failures per address and per username.
        let keys = ["signin-address:\(address)", "signin-user:\(key)"]
        // Reserved before the awaits (the user's row, the hash): guesses sent at once count as
        // they are judged, so no more than the limit are ever judged per window.
        var checked = try await limiter.reserving(
            keys: keys, isFailure: { if case .invalidCredentials = $0.kind { true } else { false } }
        ) {
            guard password.utf8.count <= 4096, PasswordHasher.problem(password) == nil else {
                throw AuthError(kind: .invalidCredentials)
            }
            let user = try await store.user(usernameKey: key)
            let storedHash = user?.passwordHash ?? dummyHash
            let result: (matches: Bool, upgrade: Bool)
            do {
                result = try await passwords.verify(password, hash: storedHash)
            } catch is PasswordHasher.Busy {
                throw AuthError(kind: .rateLimited(retryAfter: 1))
            }
            guard let user, result.matches else { throw AuthError(kind: .invalidCredentials) }
            return (user: user, hash: storedHash, upgrade: result.upgrade)
        }
        if checked.upgrade {
            // A hash of the earlier kind, verified exactly: replaced by one over every byte,
            // unless the password was changed while this one was checked.
            let upgraded = try await hashPassword(password)
            try await store.upgradePasswordHash(userID: checked.user.id, from: checked.hash, to: upgraded)
            checked.user.passwordHash = upgraded
        }
        // Said only to whoever knows the password.
        if checked.user.disabled { throw AuthError(kind: .accountDisabled) }
        return checked.user
    }

    /// A sign-in session was revoked (in the store): its access tokens are refused and its
    /// sync sessions closed here now, and on the other nodes once they hear of it.
    func revoked(_ familyID: String) async throws {
        tokens.revoked.insert(familyID)
        try await store.announceRevocation(familyID: familyID)
    }

    /// A new password hash; refused as rate-limited while too many hashes are waiting.
    func hashPassword(_ password: String) async throws -> String {
        do {
            return try await passwords.hash(password)
        } catch is PasswordHasher.Busy {
            throw AuthError(kind: .rateLimited(retryAfter: 1))
        }
    }

    /// Starts a refresh-token family for a user and client: the token response and the family id.
    func issueTokens(
        userID: String, clientID: String, device: String?,
        familyID: String = UUID().uuidString.lowercased()
    ) async throws -> (TokenResponse, familyID: String) {
        let now = tokens.clock.now()
        let refresh = Self.newRefreshToken()
        let family = RefreshFamily(id: familyID, userID: userID, clientID: clientID, device: device)
        try await store.createRefreshFamily(
            family, firstTokenHash: Self.hash(refresh), expiresAt: now.addingTimeInterval(refreshLifetime), now: now)
        let access = try await tokens.issue(userID: userID, clientID: clientID, sessionID: family.id, now: now)
        let response = TokenResponse(
            accessToken: access.token, expiresIn: Int(tokens.lifetime.timeInterval.rounded(.up)), refreshToken: refresh)
        return (response, family.id)
    }
}
