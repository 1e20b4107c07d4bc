import Foundation

/// Spaces: shared notebooks with roles (docs/protocol.md, "Spaces"). These manage spaces,
/// members, invitations and links on the server; syncing a shared space's records is protocol
/// 2, which this library does not speak yet (docs/client.md).
extension NotedClient {
    /// The account's spaces (the personal one first) and the invitations waiting for an answer.
    public func spaces() async throws -> (spaces: [SpaceInfo], invitations: [SpaceInvitationInfo]) {
        let (api, token) = try await authorized()
        return try await api.spaces(token: token)
    }

    /// The space named `nameOrID` among the account's: its id, or its name (compared without
    /// case; a name two spaces share must be given as an id).
    public func space(named nameOrID: String) async throws -> SpaceInfo {
        let all = try await spaces().spaces
        if let space = all.first(where: { $0.id == nameOrID }) { return space }
        let named = all.filter { $0.name.lowercased() == nameOrID.lowercased() }
        guard named.count == 1, let space = named.first else {
            throw NotedClientError(
                named.isEmpty ? .notFound : .invalidInput,
                named.isEmpty
                    ? "no space is called \(nameOrID)" : "\(named.count) spaces are called \(nameOrID): give its id")
        }
        return space
    }

    public func createSpace(name: String) async throws -> SpaceInfo {
        let (api, token) = try await authorized()
        return try await api.createSpace(name: name, token: token)
    }

    /// A space with its members; invitations and links when the account manages it.
    public func spaceDetails(_ id: String) async throws -> SpaceDetails {
        let (api, token) = try await authorized()
        return try await api.space(id, token: token)
    }

    public func renameSpace(_ id: String, to name: String) async throws {
        let (api, token) = try await authorized()
        try await api.renameSpace(id, to: name, token: token)
    }

    /// Deletes a shared space the account owns, with its records and their history.
    public func deleteSpace(_ id: String) async throws {
        let (api, token) = try await authorized()
        try await api.deleteSpace(id, token: token)
    }

    public func invite(username: String, role: SpaceRole, to space: String) async throws {
        let (api, token) = try await authorized()
        try await api.invite(username: username, role: role, to: space, token: token)
    }

    public func cancelInvitation(of user: String, to space: String) async throws {
        let (api, token) = try await authorized()
        try await api.cancelInvitation(of: user, to: space, token: token)
    }

    /// Accepts (or declines) an invitation; the role when accepted.
    @discardableResult
    public func answerInvitation(to space: String, accept: Bool) async throws -> SpaceRole? {
        let (api, token) = try await authorized()
        return try await api.answerInvitation(to: space, accept: accept, token: token)
    }

    public func setRole(_ role: SpaceRole, of user: String, in space: String) async throws {
        let (api, token) = try await authorized()
        try await api.setRole(role, of: user, in: space, token: token)
    }

    public func removeMember(_ user: String, from space: String) async throws {
        let (api, token) = try await authorized()
        try await api.removeMember(user, from: space, token: token)
    }

    public func leaveSpace(_ space: String) async throws {
        let (api, token) = try await authorized()
        try await api.leaveSpace(space, token: token)
    }

    /// Hands a space the account owns to a member (by id); the account stays as an admin.
    public func transferSpace(_ space: String, to user: String) async throws {
        let (api, token) = try await authorized()
        try await api.transferSpace(space, to: user, token: token)
    }

    /// A new link to join the space with `role`; its URL and secret are in the answer only.
    public func createLink(in space: String, role: SpaceRole, expiresInDays: Double? = nil, maxUses: Int? = nil)
        async throws -> SpaceLinkInfo
    {
        let (api, token) = try await authorized()
        return try await api.createLink(
            in: space, role: role, expiresInDays: expiresInDays, maxUses: maxUses, token: token)
    }

    public func revokeLink(_ link: String, in space: String) async throws {
        let (api, token) = try await authorized()
        try await api.revokeLink(link, in: space, token: token)
    }

    /// Joins the space of a link (its URL or its secret).
    public func join(link: String) async throws -> (space: String, name: String, role: SpaceRole) {
        let (api, token) = try await authorized()
        return try await api.join(link: link, token: token)
    }
}
