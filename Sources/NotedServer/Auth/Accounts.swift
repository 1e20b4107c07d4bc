import Crypto
import Foundation
import Logging
import NIOPosix
import NotedCore

/// A failure of an account or token operation, mapped to HTTP at the edge.
public struct AuthError: Error, Sendable, CustomStringConvertible {
    enum Kind: Sendable {
        case invalidRequest(String)
        case usernameTaken
        case registrationClosed
        case invalidCredentials
        case invalidGrant
        case unsupportedGrantType
        case rateLimited(retryAfter: Int)
        /// The password was right but the operator disabled the account.
        case accountDisabled
        /// The password was right; the account asks a second factor, not given.
        case otpRequired
        /// The password was right; the second factor was not.
        case invalidOTP
        /// Two-factor sign-in is on already (a new setup would replace the secret in use).
        case twoFactorEnabled
        /// Enabling two-factor sign-in without a setup begun (or it was replaced).
        case noTwoFactorSetup
        /// The code that should turn two-factor sign-in on or off (or confirm a change to an
        /// account with it) is not right.
        case invalidCode
        /// A change to an account with two-factor sign-in (password, deletion) given no code.
        case codeRequired
    }
    let kind: Kind

    public var description: String {
        switch kind {
        case .invalidRequest(let message): message
        case .usernameTaken: "this username is taken"
        case .registrationClosed: "registration is switched off on this server"
        case .invalidCredentials: "wrong username or password"
        case .invalidGrant: "the refresh token is invalid, expired or revoked"
        case .unsupportedGrantType: "unsupported grant_type"
        case .rateLimited: "too many attempts; try again later"
        case .accountDisabled: "this account is disabled; ask the server's operator"
        case .otpRequired:
            "this account has two-factor sign-in: give the code from the authenticator app (or a recovery code)"
        case .codeRequired:
            "this account has two-factor sign-in: give a current code from the authenticator app (or a recovery code) too"
        case .invalidOTP: "the authentication code is not right (or was used already)"
        case .twoFactorEnabled: "two-factor sign-in is on already; turn it off first to set up a new authenticator"
        case .noTwoFactorSetup: "no two-factor setup is under way; start again"
        case .invalidCode: "the code is not right; check the authenticator app's clock and try the current code"
        }
    }
}

/// A token response of RFC 6749 section 5.1.
public struct TokenResponse: Sendable {
    public var accessToken: String
    public var expiresIn: Int
    public var refreshToken: String

    public var json: JSONValue {
        [
            "access_token": .string(accessToken), "token_type": "Bearer", "expires_in": .int(Int64(expiresIn)),
            "refresh_token": .string(refreshToken),
        ]
    }
}

/// Registration, sign-in and refresh-token rotation.
public struct Accounts: Sendable {
    let store: any AccountStore & TwoFactorStore & OAuthStore
    let tokens: AccessTokens
    let registrationOpen: Bool
    let passwords: PasswordHasher
    let refreshLifetime: TimeInterval
    /// The longest a sign-in (refresh-token family) lasts, refreshed or not.
    var familyLifetime: TimeInterval = 90 * 86_400
    let limiter: RateLimiter
    /// Where requests come from, for the limits (trusted proxies).
    var addresses = ClientAddresses()
    /// A hash checked for unknown usernames, so that timing does not tell them apart.
    let dummyHash: String
    /// Runs before an account is deleted: its shared spaces are handed over or deleted
    /// (``Spaces/release(userID:)``).
    var beforeDeletion: @Sendable (_ userID: String) async throws -> Void = { _ in }

    /// The client id of first-party sign-in (`POST /v1/sessions`).
    static let firstPartyClient = "noted"

    /// Usernames: 1–64 letters, digits, `.`, `_`, `-`, `@`.
    static func validUsername(_ name: String) -> Bool {
        guard (1...64).contains(name.count) else { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isAlphabetic && !scalar.properties.isWhitespace || ("0"..."9").contains(scalar)
                || scalar.properties.numericType == .decimal || ".-_@".unicodeScalars.contains(scalar)
        }
    }

    func register(username: String, password: String, address: String) async throws -> UserAccount {
        guard registrationOpen else { throw AuthError(kind: .registrationClosed) }
        guard username.utf8.count <= 256 else {
            throw AuthError(kind: .invalidRequest("usernames are 1 to 64 letters, digits, '.', '_', '-' or '@'"))
        }
        try limiter.check(keys: ["register-address:\(address)", "register-user:\(username.lowercased())"])
        guard Self.validUsername(username) else {
            throw AuthError(kind: .invalidRequest("usernames are 1 to 64 letters, digits, '.', '_', '-' or '@'"))
        }
        if let problem = Self.newPasswordProblem(password) { throw AuthError(kind: .invalidRequest(problem)) }
        let hash = try await hashPassword(password)
        let user = UserAccount(
            id: UUID().uuidString.lowercased(), username: username, usernameKey: username.lowercased(),
            passwordHash: hash)
        guard try await store.createUser(user, now: tokens.clock.now()) else { throw AuthError(kind: .usernameTaken) }
        return user
    }

    func signIn(username: String, password: String, otp: String? = nil, device: String?, address: String) async throws
        -> TokenResponse
    {
        let user = try await verifyPassword(username: username, password: password, address: address)
        try await verifySecondFactor(user, code: otp, address: address)
        return try await issueTokens(userID: user.id, clientID: Self.firstPartyClient, device: device).0
    }

    /// The refresh grant. `clientID`, when the request names one, must be the client the
    /// token was issued to: a token presented by another client has leaked, and its whole
    /// sign-in session is revoked.
    func refresh(token: String, clientID: String? = nil) async throws -> TokenResponse {
        let replacement = Self.newRefreshToken()
        let now = tokens.clock.now()
        let result = try await store.rotateRefreshToken(
            hash: Self.hash(token), replacementHash: Self.hash(replacement),
            expiresAt: now.addingTimeInterval(refreshLifetime), now: now)
        switch result {
        case .rotated(let family):
            // A sign-in lasts at most `familyLifetime` (90 days by default), however often it is
            // refreshed; then the user signs in again.
            let started = try await store.refreshFamilyCreatedAt(id: family.id)
            if let started, now.timeIntervalSince(started) > familyLifetime {
                try await store.revokeRefreshFamily(id: family.id, now: now)
                try await revoked(family.id)
                throw AuthError(kind: .invalidGrant)
            }
            if let clientID, clientID != family.clientID {
                try await store.revokeRefreshFamily(id: family.id, now: now)
                try await revoked(family.id)
                throw AuthError(kind: .invalidGrant)
            }
            // A sign-in that raced the operator disabling the account ends here.
            if try await store.user(id: family.userID)?.disabled ?? true {
                try await store.revokeRefreshFamily(id: family.id, now: now)
                try await revoked(family.id)
                throw AuthError(kind: .invalidGrant)
            }
            let access = try await tokens.issue(
                userID: family.userID, clientID: family.clientID, sessionID: family.id, now: now)
            return TokenResponse(
                accessToken: access.token, expiresIn: Int(tokens.lifetime.timeInterval.rounded(.up)),
                refreshToken: replacement)
        case .reused(let familyID):
            try await revoked(familyID)
            throw AuthError(kind: .invalidGrant)
        case .invalid:
            throw AuthError(kind: .invalidGrant)
        }
    }

    /// 256 random bits, base64url.
    static func newRefreshToken() -> String {
        let key = SymmetricKey(size: .bits256)
        return key.withUnsafeBytes { Data($0) }.base64URLEncodedString
    }

    static func hash(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).lowercaseHex
    }
}
