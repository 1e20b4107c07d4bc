import Foundation

/// What users do to spaces (docs/protocol.md, "Spaces"): ``SpaceRules`` decide, the store
/// writes in one transaction, and the users whose membership changed are told
/// (`membershipChanged`, which reaches their sessions on every node).
public struct Spaces: Sendable {
    let store: any NotedStore
    let clock: ServerClock
    /// Called with the users whose membership or role changed, once it is committed.
    var membershipChanged: @Sendable (Set<String>) async -> Void = { _ in }

    /// The most shared spaces one user may own, so that an account cannot fill the server
    /// with empty spaces.
    public static let maxOwnedSpaces = 1000

    public func create(name: String, ownerID: String) async throws -> Space {
        let name = try SpaceRules.validName(name)
        let owned = try await store.spaces(userID: ownerID).filter { $0.role == .owner && !$0.space.personal }.count
        guard owned < Self.maxOwnedSpaces else {
            throw SpaceError(.forbidden, "an account owns at most \(Self.maxOwnedSpaces) shared spaces")
        }
        let space = Space(
            id: UUID().uuidString.lowercased(), name: name, ownerID: ownerID, personal: false, createdAt: clock.now())
        try await store.createSpace(space)
        await membershipChanged([ownerID])
        return space
    }

    /// The space as `userID` may see it; `not_found` for a non-member.
    public func state(_ spaceID: String, for userID: String) async throws -> (SpaceState, SpaceRole) {
        guard let state = try await store.spaceState(id: spaceID), let member = state.members[userID] else {
            throw SpaceError.notFound
        }
        return (state, member.role)
    }

    /// Applies `change` to the space in one transaction and tells those it affected.
    @discardableResult
    public func update<T: Sendable>(
        _ spaceID: String, _ change: @escaping @Sendable (inout SpaceState) throws(SpaceError) -> T
    ) async throws -> T {
        guard let result = try await store.updateSpace(id: spaceID, { state in try change(&state) }) else {
            throw SpaceError.notFound
        }
        if !result.changed.isEmpty { await membershipChanged(result.changed) }
        return result.value
    }

    public func invite(_ spaceID: String, by userID: String, username: String, role: SpaceRole) async throws {
        guard let invitee = try await store.user(usernameKey: username.lowercased()) else {
            // A non-member learns nothing about the space, not even that a user is missing.
            _ = try await state(spaceID, for: userID)
            throw SpaceError(.unknownUser, "no user is called \(username)")
        }
        let now = clock.now()
        try await update(spaceID) { state throws(SpaceError) in
            try SpaceRules.invite(
                &state, by: userID, user: (invitee.id, invitee.username), role: role, now: now)
        }
    }

    /// A new link: its secret is returned once and stored only as a hash.
    public func addLink(
        _ spaceID: String, by userID: String, role: SpaceRole, expiresAt: Date?, maxUses: Int64?
    ) async throws -> (link: SpaceLink, secret: String) {
        let secret = Accounts.newRefreshToken()
        let link = SpaceLink(
            id: UUID().uuidString.lowercased(), secretHash: Accounts.hash(secret), role: role, createdBy: userID,
            createdAt: clock.now(), expiresAt: expiresAt, maxUses: maxUses)
        try await update(spaceID) { state throws(SpaceError) in try SpaceRules.addLink(&state, by: userID, link: link) }
        return (link, secret)
    }

    /// Joins the space a link's secret belongs to; returns the space and the role.
    public func join(secret: String, userID: String) async throws -> (Space, SpaceRole) {
        guard let user = try await store.user(id: userID) else { throw SpaceError.notFound }
        guard
            let (spaceID, linkID) = try await store.spaceLink(secretHash: Accounts.hash(secret)).map({
                ($0.spaceID, $0.linkID)
            })
        else {
            throw SpaceError(.notFound, "no such link")
        }
        let now = clock.now()
        return try await update(spaceID) { state throws(SpaceError) in
            let role = try SpaceRules.join(&state, user: (user.id, user.username), link: linkID, now: now)
            return (state.space, role)
        }
    }

    /// Deletes a shared space, its owner asking; returns its members (told, as removed).
    public func delete(_ spaceID: String, by userID: String) async throws {
        guard
            let members = try await store.deleteSpace(
                id: spaceID, check: { state in try SpaceRules.checkDelete(state, by: userID) })
        else { throw SpaceError.notFound }
        await membershipChanged(Set(members))
    }

    /// Before an account is deleted: each shared space it owns goes to its longest-standing
    /// admin (else editor, else viewer), or is deleted when it has no other member; it leaves
    /// the others. Returns what happened to each owned space, by name.
    @discardableResult
    public func release(userID: String) async throws -> [(name: String, handedTo: String?)] {
        var outcome: [(name: String, handedTo: String?)] = []
        for summary in try await store.spaces(userID: userID) where !summary.space.personal {
            let spaceID = summary.space.id
            if summary.role != .owner {
                try await update(spaceID) { state throws(SpaceError) in
                    try SpaceRules.remove(&state, by: userID, member: userID)
                }
                continue
            }
            let heir = try await update(spaceID) { state throws(SpaceError) -> String? in
                let heirs = state.members.values.filter { $0.userID != userID }.sorted { a, b in
                    if a.role != b.role { return a.role > b.role }
                    if a.joinedAt != b.joinedAt { return a.joinedAt < b.joinedAt }
                    return a.userID < b.userID
                }
                guard let heir = heirs.first else { return nil }
                try SpaceRules.transfer(&state, by: userID, to: heir.userID)
                try SpaceRules.remove(&state, by: userID, member: userID)
                return heir.username
            }
            if heir == nil { try await delete(spaceID, by: userID) }
            outcome.append((summary.space.name, heir))
        }
        return outcome
    }
}
