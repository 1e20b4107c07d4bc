import ArgumentParser
import Foundation
import NotedClient
import NotedCore

/// `noted spaces`: the account's spaces and the invitations waiting for an answer.
struct SpacesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spaces", abstract: "List your spaces (personal first) and the invitations waiting for you.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try await signedInClient(options, for: "listing spaces")
        let (spaces, invitations) = try await cli { try await client.spaces() }
        if options.json {
            printJSON(["spaces": .array(spaces.map(\.json)), "invitations": .array(invitations.map(\.json))])
            return
        }
        for space in spaces {
            print(
                "\(space.name)\t\(space.role.rawValue)\t\(space.memberCount) member(s)\towner \(space.owner)\t\(space.id)"
            )
        }
        for invitation in invitations {
            print(
                "invited to \(invitation.name) as \(invitation.role.rawValue) by \(invitation.invitedBy)\t\(invitation.space)"
            )
        }
    }
}

/// `noted space …`: one space, its members, invitations and links.
struct SpaceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "space",
        abstract: "Create, share and manage a space (a notebook shared with roles).",
        discussion: """
            SPACE is a space's name (as `noted spaces` lists it) or its id; USER a username. Roles: \
            viewer (reads), editor (reads and writes), admin (also manages members and links), owner.
            """,
        subcommands: [
            SpaceCreate.self, SpaceRename.self, SpaceInvite.self, SpaceAccept.self, SpaceDecline.self,
            SpaceMembers.self, SpaceRole_.self, SpaceRemove.self, SpaceLeave.self, SpaceDelete.self,
            SpaceTransfer.self, SpaceLink.self, SpaceUnlink.self, SpaceJoin.self,
        ])
}

/// A role as a command-line argument.
extension SpaceRole: ExpressibleByArgument {}

/// The signed-in client and the space an argument names.
private func resolve(_ options: GlobalOptions, _ space: String, for what: String) async throws -> (
    NotedClient, SpaceInfo
) {
    let client = try await signedInClient(options, for: what)
    return (client, try await cli { try await client.space(named: space) })
}

/// A member's id by username (the server's member routes take ids).
private func memberID(_ client: NotedClient, _ space: SpaceInfo, _ username: String) async throws -> String {
    let details = try await cli { try await client.spaceDetails(space.id) }
    guard let member = details.members.first(where: { $0.username.lowercased() == username.lowercased() }) else {
        throw CLIError("\(username) is not a member of \(space.name)")
    }
    return member.id
}

/// Does `action` to the member `user` of `space` (the client, the space's id, the member's id);
/// returns the space.
private func onMember(
    _ options: GlobalOptions, _ space: String, _ user: String, for what: String,
    _ action: @escaping (NotedClient, String, String) async throws -> Void
) async throws -> SpaceInfo {
    let (client, found) = try await resolve(options, space, for: what)
    let id = try await memberID(client, found, user)
    try await cli { try await action(client, found.id, id) }
    return found
}

/// Says what was done: the line, or with `--json` the object given (else `{"message": line}`).
private func done(_ options: GlobalOptions, _ text: String, _ json: JSONValue? = nil) {
    if options.json { printJSON(json ?? ["message": .string(text)]) } else { print(text) }
}

struct SpaceCreate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "create", abstract: "Create a shared space.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "Its name (1 to 100 characters).") var name: String

    func run() async throws {
        let client = try await signedInClient(options, for: "creating a space")
        let space = try await cli { try await client.createSpace(name: name) }
        done(options, "created \(space.name)\t\(space.id)", space.json)
    }
}

struct SpaceRename: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a space (admins).")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Argument(help: "The new name.") var name: String

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "renaming a space")
        try await cli { try await client.renameSpace(found.id, to: name) }
        done(options, "renamed")
    }
}

struct SpaceInvite: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite", abstract: "Invite a user by username (admins); they accept with `noted space accept`.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Argument var user: String
    @Option(help: "viewer, editor or admin.") var role: SpaceRole = .editor

    func validate() throws {
        guard role != .owner else { throw ValidationError("a space has one owner: use `noted space transfer`") }
    }

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "inviting")
        try await cli { try await client.invite(username: user, role: role, to: found.id) }
        done(options, "invited \(user) to \(found.name) as \(role.rawValue)")
    }
}

/// The invitation an argument names, by space id or name.
private func invitation(_ client: NotedClient, _ space: String) async throws -> SpaceInvitationInfo {
    let invitations = try await cli { try await client.spaces().invitations }
    let found = invitations.filter { $0.space == space || $0.name.lowercased() == space.lowercased() }
    guard found.count == 1, let invitation = found.first else {
        throw CLIError(
            found.isEmpty
                ? "no invitation to \(space): `noted spaces` lists yours"
                : "invitations to \(found.count) spaces called \(space): give its id")
    }
    return invitation
}

struct SpaceAccept: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "accept", abstract: "Accept an invitation.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The space's name or id, as `noted spaces` lists the invitation.") var space: String

    func run() async throws {
        let client = try await signedInClient(options, for: "accepting an invitation")
        let found = try await invitation(client, space)
        let role = try await cli { try await client.answerInvitation(to: found.space, accept: true) }
        done(
            options, "joined \(found.name) as \((role ?? found.role).rawValue)",
            ["space": .string(found.space), "role": .string((role ?? found.role).rawValue)])
    }
}

struct SpaceDecline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "decline", abstract: "Decline an invitation.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String

    func run() async throws {
        let client = try await signedInClient(options, for: "declining an invitation")
        let found = try await invitation(client, space)
        try await cli { try await client.answerInvitation(to: found.space, accept: false) }
        done(options, "declined")
    }
}

struct SpaceMembers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "members", abstract: "List a space's members (and, for admins, its invitations and links).")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "listing members")
        let details = try await cli { try await client.spaceDetails(found.id) }
        if options.json {
            var json: [String: JSONValue] = [
                "space": details.space.json, "members": .array(details.members.map(\.json)),
            ]
            json["invitations"] = details.invitations.map { .array($0.map(\.json)) }
            json["links"] = details.links.map { .array($0.map(\.json)) }
            printJSON(.object(json))
            return
        }
        for member in details.members { print("\(member.username)\t\(member.role.rawValue)") }
        for invited in details.invitations ?? [] { print("\(invited.username)\tinvited as \(invited.role.rawValue)") }
        for link in details.links ?? [] where !link.revoked {
            let expiry = link.expiresAt.map { "expires \($0.iso8601)" } ?? "no expiry"
            let uses = "\(link.uses)" + (link.maxUses.map { " of \($0)" } ?? "") + " use(s)"
            print("link \(link.id)\t\(link.role.rawValue)\t\(expiry)\t\(uses)")
        }
    }
}

// `SpaceRole` is the library's type; the command is `noted space role`.
struct SpaceRole_: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "role", abstract: "Change a member's role (admins).")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Argument var user: String
    @Argument(help: "viewer, editor or admin.") var role: SpaceRole

    func validate() throws {
        guard role != .owner else { throw ValidationError("a space has one owner: use `noted space transfer`") }
    }

    func run() async throws {
        let role = role
        let found = try await onMember(options, space, user, for: "changing a role") {
            try await $0.setRole(role, of: $2, in: $1)
        }
        done(options, "\(user) is now \(role.rawValue) of \(found.name)")
    }
}

struct SpaceRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove a member, or withdraw an invitation (admins); a removed member's devices drop the space.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Argument var user: String

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "removing a member")
        let details = try await cli { try await client.spaceDetails(found.id) }
        let name = user.lowercased()
        if let member = details.members.first(where: { $0.username.lowercased() == name }) {
            try await cli { try await client.removeMember(member.id, from: found.id) }
            done(options, "removed \(user) from \(found.name)")
        } else if let invited = details.invitations?.first(where: { $0.username.lowercased() == name }) {
            try await cli { try await client.cancelInvitation(of: invited.id, to: found.id) }
            done(options, "withdrew the invitation of \(user) to \(found.name)")
        } else {
            throw CLIError("\(user) is neither a member of \(found.name) nor invited to it")
        }
    }
}

struct SpaceLeave: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "leave", abstract: "Leave a space (its owner hands it over first).")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "leaving a space")
        try await cli { try await client.leaveSpace(found.id) }
        done(options, "left \(found.name)")
    }
}

struct SpaceDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a space you own, with its records and their history, for everyone.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Flag(help: "Confirm: the space's records are deleted for every member.") var yes = false

    func run() async throws {
        guard yes else {
            throw CLIError("deleting a space deletes its records for every member: add --yes to confirm")
        }
        let (client, found) = try await resolve(options, space, for: "deleting a space")
        try await cli { try await client.deleteSpace(found.id) }
        done(options, "deleted \(found.name)")
    }
}

struct SpaceTransfer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transfer", abstract: "Hand a space you own to a member; you stay as an admin.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Argument var user: String

    func run() async throws {
        let found = try await onMember(options, space, user, for: "handing a space over") {
            try await $0.transferSpace($1, to: $2)
        }
        done(options, "\(user) now owns \(found.name)")
    }
}

struct SpaceLink: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "link",
        abstract: "Make a link anyone signed in can join the space by (admins); it is shown this once.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Option(help: "viewer or editor.") var role: SpaceRole = .viewer
    @Option(help: "Days until it stops working (up to 365).") var expires: Double?
    @Option(help: "How many people may join by it (1 to 10000).") var maxUses: Int?

    func validate() throws {
        guard role == .viewer || role == .editor else { throw ValidationError("a link's role is viewer or editor") }
        if let expires, !(expires > 0 && expires <= 365) {
            throw ValidationError("--expires is more than 0 and at most 365 days")
        }
        if let maxUses, !(1...10000).contains(maxUses) { throw ValidationError("--max-uses is 1 to 10000") }
    }

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "making a link")
        let link = try await cli {
            try await client.createLink(in: found.id, role: role, expiresInDays: expires, maxUses: maxUses)
        }
        done(options, link.url ?? link.secret ?? link.id, link.json)
    }
}

struct SpaceUnlink: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlink", abstract: "Revoke a link (its id from `noted space members`); it stops working at once.")
    @OptionGroup var options: GlobalOptions
    @Argument var space: String
    @Argument var link: String

    func run() async throws {
        let (client, found) = try await resolve(options, space, for: "revoking a link")
        try await cli { try await client.revokeLink(link, in: found.id) }
        done(options, "link revoked")
    }
}

struct SpaceJoin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "join", abstract: "Join a space by a link.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The link (or its secret).") var link: String

    func run() async throws {
        let client = try await signedInClient(options, for: "joining a space")
        let joined = try await cli { try await client.join(link: link) }
        done(
            options, "joined \(joined.name) as \(joined.role.rawValue)",
            ["space": .string(joined.space), "name": .string(joined.name), "role": .string(joined.role.rawValue)])
    }
}

extension SpaceInfo {
    var json: JSONValue {
        [
            "id": .string(id), "name": .string(name), "personal": .bool(personal), "role": .string(role.rawValue),
            "owner": .string(owner), "members": .int(Int64(memberCount)), "seq": .int(seq),
        ]
    }
}

extension SpaceInvitationInfo {
    var json: JSONValue {
        [
            "space": .string(space), "name": .string(name), "role": .string(role.rawValue),
            "invitedBy": .string(invitedBy),
        ]
    }
}

extension SpaceMemberInfo {
    var json: JSONValue { ["id": .string(id), "username": .string(username), "role": .string(role.rawValue)] }
}

extension SpaceLinkInfo {
    var json: JSONValue {
        var json: [String: JSONValue] = [
            "id": .string(id), "role": .string(role.rawValue), "uses": .int(Int64(uses)), "revoked": .bool(revoked),
            "expiresAt": expiresAt.map { .string($0.iso8601) } ?? .null,
            "maxUses": maxUses.map { .int(Int64($0)) } ?? .null,
        ]
        json["url"] = url.map(JSONValue.string)
        json["secret"] = secret.map(JSONValue.string)
        return .object(json)
    }
}
