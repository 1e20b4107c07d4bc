import Foundation

/// What a member of a space may do (docs/protocol.md, "Spaces").
public enum SpaceRole: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Reads the space's records.
    case viewer
    /// Reads and writes them.
    case editor
    /// Also manages members, invitations and links.
    case admin
    /// The one owner: also deletes the space and hands it over.
    case owner

    var rank: Int {
        switch self {
        case .viewer: 0
        case .editor: 1
        case .admin: 2
        case .owner: 3
        }
    }

    public static func < (lhs: SpaceRole, rhs: SpaceRole) -> Bool { lhs.rank < rhs.rank }

    /// Whether the role writes records.
    public var writes: Bool { self >= .editor }
    /// Whether the role manages members, invitations and links.
    public var manages: Bool { self >= .admin }
}

/// A space: a personal one (its id is its user's id, holding everything the user stored before
/// spaces) or a shared one.
public struct Space: Sendable, Hashable {
    public var id: String
    public var name: String
    public var ownerID: String
    public var personal: Bool
    public var createdAt: Date

    public init(id: String, name: String, ownerID: String, personal: Bool, createdAt: Date) {
        self.id = id
        self.name = name
        self.ownerID = ownerID
        self.personal = personal
        self.createdAt = createdAt
    }
}

/// A member of a space.
public struct SpaceMember: Sendable, Hashable {
    public var userID: String
    /// Read with the space; ignored when the space is written.
    public var username: String
    public var role: SpaceRole
    public var joinedAt: Date

    public init(userID: String, username: String, role: SpaceRole, joinedAt: Date) {
        self.userID = userID
        self.username = username
        self.role = role
        self.joinedAt = joinedAt
    }
}

/// An invitation of one user, by username, not yet accepted or declined.
public struct SpaceInvitation: Sendable, Hashable {
    public var userID: String
    public var username: String
    public var role: SpaceRole
    public var invitedBy: String
    public var createdAt: Date

    public init(userID: String, username: String, role: SpaceRole, invitedBy: String, createdAt: Date) {
        self.userID = userID
        self.username = username
        self.role = role
        self.invitedBy = invitedBy
        self.createdAt = createdAt
    }
}

/// A link anyone signed in can join a space by: its secret is stored only as a hash.
public struct SpaceLink: Sendable, Hashable {
    public var id: String
    public var secretHash: String
    public var role: SpaceRole
    public var createdBy: String
    public var createdAt: Date
    public var expiresAt: Date?
    public var maxUses: Int64?
    public var uses: Int64
    public var revokedAt: Date?

    public init(
        id: String, secretHash: String, role: SpaceRole, createdBy: String, createdAt: Date, expiresAt: Date?,
        maxUses: Int64?, uses: Int64 = 0, revokedAt: Date? = nil
    ) {
        self.id = id
        self.secretHash = secretHash
        self.role = role
        self.createdBy = createdBy
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.maxUses = maxUses
        self.uses = uses
        self.revokedAt = revokedAt
    }

    /// Whether the link still lets someone join at `now`.
    public func usable(at now: Date) -> Bool {
        revokedAt == nil && (expiresAt.map { now < $0 } ?? true) && (maxUses.map { uses < $0 } ?? true)
    }
}

/// Everything about one space but its records, read and written as one value: ``SpaceRules``
/// decide on it, a store writes what changed in the same transaction it was read in
/// (``SpaceStore/updateSpace(id:_:)``), so two admins acting at once cannot leave the space
/// without its one owner.
public struct SpaceState: Sendable, Hashable {
    public var space: Space
    /// By user id.
    public var members: [String: SpaceMember]
    /// By invited user id.
    public var invitations: [String: SpaceInvitation]
    /// By link id.
    public var links: [String: SpaceLink]

    public init(
        space: Space, members: [String: SpaceMember] = [:], invitations: [String: SpaceInvitation] = [:],
        links: [String: SpaceLink] = [:]
    ) {
        self.space = space
        self.members = members
        self.invitations = invitations
        self.links = links
    }

    /// What a store writes to turn `old` into `self`.
    func changes(from old: SpaceState) -> SpaceStateChanges {
        SpaceStateChanges(
            space: space == old.space ? nil : space,
            upsertedMembers: members.values.filter { old.members[$0.userID] != $0 }.sorted { $0.userID < $1.userID },
            removedMembers: old.members.keys.filter { members[$0] == nil }.sorted(),
            upsertedInvitations: invitations.values.filter { old.invitations[$0.userID] != $0 }
                .sorted { $0.userID < $1.userID },
            removedInvitations: old.invitations.keys.filter { invitations[$0] == nil }.sorted(),
            upsertedLinks: links.values.filter { old.links[$0.id] != $0 }.sorted { $0.id < $1.id },
            removedLinks: old.links.keys.filter { links[$0] == nil }.sorted())
    }
}

/// The rows a store writes for a changed ``SpaceState``.
struct SpaceStateChanges: Sendable {
    var space: Space?
    var upsertedMembers: [SpaceMember]
    var removedMembers: [String]
    var upsertedInvitations: [SpaceInvitation]
    var removedInvitations: [String]
    var upsertedLinks: [SpaceLink]
    var removedLinks: [String]

    /// The users whose membership or role changed: their sessions are told.
    var affectedUsers: Set<String> {
        Set(upsertedMembers.map(\.userID) + removedMembers)
    }
}

/// A space as one of its members sees it in their list.
public struct SpaceSummary: Sendable, Hashable {
    public var space: Space
    public var role: SpaceRole
    public var ownerName: String
    public var memberCount: Int64
    /// The space's latest `seq`.
    public var seq: Int64

    public init(space: Space, role: SpaceRole, ownerName: String, memberCount: Int64, seq: Int64) {
        self.space = space
        self.role = role
        self.ownerName = ownerName
        self.memberCount = memberCount
        self.seq = seq
    }
}

/// An invitation as its invitee sees it.
public struct PendingInvitation: Sendable, Hashable {
    public var spaceID: String
    public var spaceName: String
    public var role: SpaceRole
    public var invitedByName: String
    public var createdAt: Date

    public init(spaceID: String, spaceName: String, role: SpaceRole, invitedByName: String, createdAt: Date) {
        self.spaceID = spaceID
        self.spaceName = spaceName
        self.role = role
        self.invitedByName = invitedByName
        self.createdAt = createdAt
    }
}
