import Foundation

/// Why an action on a space was refused (docs/protocol.md, "Spaces").
public struct SpaceError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// No such space, or the caller is not a member: the two are indistinguishable.
        case notFound = "not_found"
        /// A member whose role does not allow the action.
        case forbidden
        /// Personal spaces are not shared, left, deleted or handed over.
        case personalSpace = "personal_space"
        case alreadyMember = "already_member"
        case unknownUser = "unknown_user"
        /// A link that expired, was revoked or was used up.
        case linkUnusable = "link_unusable"
        case badRequest = "bad_request"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    static let notFound = SpaceError(.notFound, "no such space")
}

/// Who may do what to a space, decided on its ``SpaceState`` alone: written once, for every
/// backend and every way in (HTTP, the CLI's and the web app's calls).
///
/// An owner does everything; an admin manages invitations, links and the members below admin
/// (and makes admins); editors and viewers only leave. Everything a non-member asks about a
/// space is `not_found`, as for a space that does not exist.
public enum SpaceRules {
    /// The longest space name, in characters.
    public static let maxNameLength = 100

    /// A name as stored: trimmed, 1 to ``maxNameLength`` characters, no control characters.
    public static func validName(_ name: String) throws(SpaceError) -> String {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= maxNameLength,
            !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw SpaceError(
                .badRequest, "a space's name is 1 to \(maxNameLength) characters, without control characters")
        }
        return trimmed
    }

    /// The caller's membership; `not_found` for a non-member.
    static func member(_ state: SpaceState, _ userID: String) throws(SpaceError) -> SpaceMember {
        guard let member = state.members[userID] else { throw SpaceError.notFound }
        return member
    }

    /// The caller, who must manage the space (admin or owner) of a shared space.
    static func manager(_ state: SpaceState, _ userID: String) throws(SpaceError) -> SpaceMember {
        let actor = try member(state, userID)
        guard actor.role.manages else { throw SpaceError(.forbidden, "only the space's owner and admins may do that") }
        guard !state.space.personal else { throw SpaceError(.personalSpace, "a personal space is not shared") }
        return actor
    }

    /// Whether `actor` may change or remove `target`: an owner anyone but themselves, an admin
    /// those below admin.
    static func outranks(_ actor: SpaceMember, _ target: SpaceMember) -> Bool {
        actor.userID != target.userID && target.role != .owner && (actor.role == .owner || target.role < actor.role)
    }

    static func grantable(_ role: SpaceRole) throws(SpaceError) {
        guard role != .owner else {
            throw SpaceError(.badRequest, "a space has one owner: hand it over with transfer")
        }
    }

    public static func rename(_ state: inout SpaceState, by userID: String, to name: String) throws(SpaceError) {
        _ = try manager(state, userID)
        state.space.name = try validName(name)
    }

    public static func invite(
        _ state: inout SpaceState, by userID: String, user invitee: (id: String, username: String),
        role: SpaceRole, now: Date
    ) throws(SpaceError) {
        _ = try manager(state, userID)
        try grantable(role)
        guard state.members[invitee.id] == nil else {
            throw SpaceError(.alreadyMember, "\(invitee.username) is already a member")
        }
        state.invitations[invitee.id] = SpaceInvitation(
            userID: invitee.id, username: invitee.username, role: role, invitedBy: userID, createdAt: now)
    }

    public static func cancelInvitation(_ state: inout SpaceState, by userID: String, of invitee: String)
        throws(SpaceError)
    {
        _ = try manager(state, userID)
        guard state.invitations.removeValue(forKey: invitee) != nil else {
            throw SpaceError(.notFound, "no such invitation")
        }
    }

    /// The invitee accepts (a member in the invited role) or declines; `not_found` without an
    /// invitation, as for a space they cannot see.
    public static func answer(_ state: inout SpaceState, by userID: String, accept: Bool, now: Date)
        throws(SpaceError) -> SpaceRole?
    {
        guard let invitation = state.invitations.removeValue(forKey: userID) else { throw SpaceError.notFound }
        guard accept else { return nil }
        state.members[userID] = SpaceMember(
            userID: userID, username: invitation.username, role: invitation.role, joinedAt: now)
        return invitation.role
    }

    public static func setRole(_ state: inout SpaceState, by userID: String, of targetID: String, to role: SpaceRole)
        throws(SpaceError)
    {
        let actor = try manager(state, userID)
        guard var target = state.members[targetID] else { throw SpaceError(.notFound, "no such member") }
        try grantable(role)
        guard outranks(actor, target) else {
            throw SpaceError(.forbidden, "only the owner changes the role of the owner or an admin")
        }
        target.role = role
        state.members[targetID] = target
    }

    /// Removes a member, or with `targetID` the caller's own id, leaves; the owner cannot
    /// leave before handing the space over.
    public static func remove(_ state: inout SpaceState, by userID: String, member targetID: String)
        throws(SpaceError)
    {
        let actor = try member(state, userID)
        guard !state.space.personal else { throw SpaceError(.personalSpace, "a personal space cannot be left") }
        if targetID == userID {
            guard actor.role != .owner else {
                throw SpaceError(.forbidden, "the owner hands the space over (transfer) before leaving")
            }
        } else {
            _ = try manager(state, userID)
            guard let target = state.members[targetID] else { throw SpaceError(.notFound, "no such member") }
            guard outranks(actor, target) else {
                throw SpaceError(.forbidden, "only the owner removes an admin; nobody removes the owner")
            }
        }
        state.members[targetID] = nil
    }

    /// Hands the space to another member; the former owner stays as an admin.
    public static func transfer(_ state: inout SpaceState, by userID: String, to targetID: String) throws(SpaceError) {
        let actor = try member(state, userID)
        guard actor.role == .owner else { throw SpaceError(.forbidden, "only the owner hands the space over") }
        guard !state.space.personal else { throw SpaceError(.personalSpace, "a personal space is not handed over") }
        guard var target = state.members[targetID], targetID != userID else {
            throw SpaceError(.notFound, "no such member")
        }
        target.role = .owner
        state.members[targetID] = target
        state.members[userID]?.role = .admin
        state.space.ownerID = targetID
    }

    /// Checks that the caller may delete the space (its owner; never a personal one).
    public static func checkDelete(_ state: SpaceState, by userID: String) throws(SpaceError) {
        let actor = try member(state, userID)
        guard actor.role == .owner else { throw SpaceError(.forbidden, "only the owner deletes the space") }
        guard !state.space.personal else { throw SpaceError(.personalSpace, "a personal space is not deleted") }
    }

    /// The longest a link lives, and the most uses it may allow.
    public static let maxLinkLifetime: TimeInterval = 365 * 86400
    public static let maxLinkUses: Int64 = 10000

    public static func addLink(_ state: inout SpaceState, by userID: String, link: SpaceLink) throws(SpaceError) {
        _ = try manager(state, userID)
        guard link.role == .editor || link.role == .viewer else {
            throw SpaceError(.badRequest, "a link's role is editor or viewer")
        }
        if let expiresAt = link.expiresAt {
            guard expiresAt > link.createdAt, expiresAt.timeIntervalSince(link.createdAt) <= maxLinkLifetime else {
                throw SpaceError(.badRequest, "a link expires within a year")
            }
        }
        if let maxUses = link.maxUses, !(1...maxLinkUses).contains(maxUses) {
            throw SpaceError(.badRequest, "a link's maximum uses is 1 to \(maxLinkUses)")
        }
        state.links[link.id] = link
    }

    public static func revokeLink(_ state: inout SpaceState, by userID: String, link id: String, now: Date)
        throws(SpaceError)
    {
        _ = try manager(state, userID)
        guard var link = state.links[id] else { throw SpaceError(.notFound, "no such link") }
        link.revokedAt = link.revokedAt ?? now
        state.links[id] = link
    }

    /// Joins by a link (counted as one use); a member already keeps their role and uses nothing.
    public static func join(
        _ state: inout SpaceState, user: (id: String, username: String), link id: String, now: Date
    ) throws(SpaceError) -> SpaceRole {
        if let member = state.members[user.id] { return member.role }
        guard var link = state.links[id], link.usable(at: now) else {
            throw SpaceError(.linkUnusable, "this link expired, was revoked or was used up")
        }
        link.uses += 1
        state.links[id] = link
        state.invitations[user.id] = nil
        state.members[user.id] = SpaceMember(userID: user.id, username: user.username, role: link.role, joinedAt: now)
        return link.role
    }
}
