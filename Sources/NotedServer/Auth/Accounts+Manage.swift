import Foundation
import NotedCore
import NotedPorting

/// What a signed-in user does to their own account: change the password, see and end their
/// sign-in sessions, delete the account (docs/protocol.md, "Accounts").
extension Accounts {
    /// Why `password` cannot be a new password; nil when it can (``PasswordRules``).
    static func newPasswordProblem(_ password: String) -> String? {
        PasswordRules.problem(password)
    }

    /// Checks the password of a signed-in user, under the sign-in limits (a password check is
    /// a guess like any other).
    func checkPassword(userID: String, password: String, address: String) async throws -> UserAccount {
        guard let user = try await store.user(id: userID) else { throw AuthError(kind: .invalidCredentials) }
        return try await verifyPassword(username: user.username, password: password, address: address)
    }

    /// Checks the password and, for an account with two-factor sign-in, a current code (or a
    /// recovery code, used up) as well: a leaked token and a phished password are not enough to
    /// change the password or delete the account (security-3 L4).
    func checkBothFactors(userID: String, password: String, code: String?, address: String) async throws -> UserAccount
    {
        let user = try await checkPassword(userID: userID, password: password, address: address)
        guard user.twoFactor else { return user }
        guard let code, !code.isEmpty else { throw AuthError(kind: .codeRequired) }
        try await verifyCode(user, code: code, address: address)
        return user
    }

    /// Replaces the password once the current one (and with two-factor sign-in, a code) is
    /// checked; every sign-in session of the user but `keeping` (the caller's) is revoked.
    /// Returns how many were.
    func changePassword(
        userID: String, current: String, code: String? = nil, new: String, keeping session: String?, address: String
    ) async throws -> Int {
        if let problem = Self.newPasswordProblem(new) { throw AuthError(kind: .invalidRequest(problem)) }
        _ = try await checkBothFactors(userID: userID, password: current, code: code, address: address)
        let hash = try await hashPassword(new)
        try await store.setPasswordHash(userID: userID, hash: hash)
        let ended = try await store.revokeSignInSessions(
            userID: userID, only: nil, except: session, now: tokens.clock.now())
        for family in ended { try await revoked(family) }
        return ended.count
    }

    /// Ends one sign-in session of the user (`only`), or every one; returns those ended.
    func signOut(userID: String, only session: String?) async throws -> [String] {
        let ended = try await store.revokeSignInSessions(
            userID: userID, only: session, except: nil, now: tokens.clock.now())
        for family in ended { try await revoked(family) }
        return ended
    }

    /// Deletes the account once its password (and with two-factor sign-in, a code) is checked: everything the store keeps for the
    /// user goes, and every node closes the user's connections (this one through
    /// `closeConnections`, first, so that they hear why). The username is free again.
    func deleteAccount(
        userID: String, password: String, code: String? = nil, address: String, closeConnections: () -> Void
    ) async throws {
        _ = try await checkBothFactors(userID: userID, password: password, code: code, address: address)
        try await beforeDeletion(userID)
        let families = try await store.deleteUser(id: userID)
        closeConnections()
        // Committed: what follows is best effort and cannot make the answer a failure. The
        // tokens name a user who no longer exists and are refused for that alone; revoked all
        // the same, as every ended sign-in is; other nodes that miss the notice find the user
        // gone when they next check (their listener's catch-up, or any request).
        for family in families { tokens.revoked.insert(family) }
        try? await store.announceAccountDeletion(userID: userID)
        for family in families { try? await store.announceRevocation(familyID: family) }
    }
}

extension SignInSession {
    /// As `GET /v1/account/devices` lists it.
    func json(current: String?) -> JSONValue {
        [
            "id": .string(id), "client": .string(clientID), "device": device.map(JSONValue.string) ?? .null,
            "signed_in_at": .int(signedInAt.millis), "last_seen": .int(lastSeen.millis),
            "current": .bool(id == current),
        ]
    }
}

extension PortableNote {
    /// A stored note as an export writes it.
    init(_ record: Record) {
        let fields = CollectionSchema.notes.completed(record.fields)
        self.init(
            id: record.id, title: fields["title"]?.stringValue ?? "", body: fields["body"]?.stringValue ?? "",
            tags: (fields["tags"]?.arrayValue ?? []).compactMap(\.stringValue), folder: fields["folder"]?.stringValue,
            pinned: fields["pinned"]?.boolValue ?? false, trashed: fields["trashed"]?.boolValue ?? false,
            created: Self.date(fields["created"]) ?? record.createdAt,
            updated: Self.date(fields["modified"]) ?? record.updatedAt)
    }

    /// A date field of a note (milliseconds since 1970, or null).
    private static func date(_ value: JSONValue?) -> Date? {
        value?.numberValue.map { Date(timeIntervalSince1970: $0 / 1000) }
    }
}
