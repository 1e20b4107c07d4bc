import Foundation

/// Two-factor sign-in (TOTP, RFC 6238, with one-time recovery codes): docs/protocol.md,
/// "Accounts", and docs/security.md.
extension Accounts {
    /// The issuer an authenticator app shows beside the account name.
    static let twoFactorIssuer = "Noted"

    /// After the password: the code a user with two-factor sign-in must give too, a current
    /// TOTP code (each time step's code signs in once) or an unused recovery code (used up).
    /// Wrong codes count as failed sign-ins for the user and the address.
    func verifySecondFactor(_ user: UserAccount, code: String?, address: String) async throws {
        guard user.twoFactor else { return }
        guard let code, !code.isEmpty else { throw AuthError(kind: .otpRequired) }
        let keys = ["otp-user:\(user.id)", "signin-address:\(address)"]
        // Reserved before the awaits: guesses sent at once count as they are judged.
        try await limiter.reserving(keys: keys, isFailure: { if case .invalidOTP = $0.kind { true } else { false } }) {
            // Turned off since the user was read: the password was enough.
            guard let state = try await store.twoFactor(userID: user.id), let secret = state.secret else { return }
            if code.count <= 64 {
                if let step = TOTP.matchingStep(code, secret: secret, now: tokens.clock.now()),
                    try await store.useTwoFactorStep(userID: user.id, step: step)
                {
                    return
                }
                if let hash = RecoveryCodes.hash(code), try await store.useRecoveryCode(userID: user.id, hash: hash) {
                    return
                }
            }
            throw AuthError(kind: .invalidOTP)
        }
    }

    /// Starts enrolling an authenticator once the password is checked: a new secret, kept as
    /// pending until a first code proves the app has it (``enableTwoFactor``).
    func beginTwoFactor(userID: String, password: String, address: String) async throws -> (secret: String, uri: String)
    {
        let user = try await checkPassword(userID: userID, password: password, address: address)
        guard !user.twoFactor else { throw AuthError(kind: .twoFactorEnabled) }
        let secret = TOTP.newSecret()
        try await store.setTwoFactorPending(userID: userID, secret: secret)
        return (secret, TOTP.uri(secret: secret, account: user.username, issuer: Self.twoFactorIssuer))
    }

    /// Turns two-factor sign-in on once `code` is the pending secret's current code; returns
    /// the recovery codes, shown this once (only their hashes are kept).
    func enableTwoFactor(userID: String, code: String, address: String) async throws -> [String] {
        guard let state = try await store.twoFactor(userID: userID) else { throw AuthError(kind: .invalidCredentials) }
        guard state.secret == nil else { throw AuthError(kind: .twoFactorEnabled) }
        guard let pending = state.pending else { throw AuthError(kind: .noTwoFactorSetup) }
        let keys = ["otp-user:\(userID)", "signin-address:\(address)"]
        let step = try await limiter.reserving(
            keys: keys, isFailure: { if case .invalidCode = $0.kind { true } else { false } }
        ) {
            guard code.count <= 64, let step = TOTP.matchingStep(code, secret: pending, now: tokens.clock.now()) else {
                throw AuthError(kind: .invalidCode)
            }
            return step
        }
        let codes = RecoveryCodes.generate()
        guard
            try await store.enableTwoFactor(
                userID: userID, secret: pending, recoveryHashes: codes.compactMap(RecoveryCodes.hash))
        else {
            throw AuthError(kind: .noTwoFactorSetup)
        }
        // The code that proved the app cannot also sign someone in.
        _ = try await store.useTwoFactorStep(userID: userID, step: step)
        return codes
    }

    /// Turns two-factor sign-in off: the password and a current code (or a recovery code).
    /// Off already: nothing to do.
    func disableTwoFactor(userID: String, password: String, code: String, address: String) async throws {
        let user = try await checkPassword(userID: userID, password: password, address: address)
        guard user.twoFactor else { return }
        try await verifyCode(user, code: code, address: address)
        try await store.disableTwoFactor(userID: userID)
    }

    /// A signed-in user's code confirming a change to their account: as a sign-in's second
    /// factor (the same limits, each step once, recovery codes used up), but a wrong or missing
    /// one is `invalidCode` (400), not a failed sign-in (401).
    func verifyCode(_ user: UserAccount, code: String, address: String) async throws {
        do {
            try await verifySecondFactor(user, code: code, address: address)
        } catch let error as AuthError {
            switch error.kind {
            case .otpRequired, .invalidOTP: throw AuthError(kind: .invalidCode)
            default: throw error
            }
        }
    }
}
