import Foundation
import NotedCore

/// A member's role in a space (docs/protocol.md, "Spaces").
public enum SpaceRole: String, Sendable, Hashable, CaseIterable {
    case viewer, editor, admin, owner
}

/// A space as its member sees it in their list.
public struct SpaceInfo: Sendable, Hashable {
    public var id: String
    public var name: String
    public var personal: Bool
    /// The caller's role.
    public var role: SpaceRole
    /// The owner's username.
    public var owner: String
    public var memberCount: Int
    /// The space's latest `seq`.
    public var seq: Int64
    public var createdAt: Date?

    /// A role this client does not know reads as `viewer` (it may only read).
    init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue, !id.isEmpty else { return nil }
        self.id = id
        name = json["name"]?.stringValue ?? id
        role = json["role"]?.stringValue.flatMap(SpaceRole.init(rawValue:)) ?? .viewer
        personal = json["personal"]?.boolValue ?? false
        owner = json["owner"]?.stringValue ?? ""
        memberCount = Int(json["members"]?.intValue ?? 1)
        seq = json["seq"]?.intValue ?? 0
        createdAt = json["createdAt"]?.stringValue.flatMap(Timestamp.parseRFC3339)
    }
}

/// An invitation waiting for the caller's answer.
public struct SpaceInvitationInfo: Sendable, Hashable {
    public var space: String
    public var name: String
    public var role: SpaceRole
    public var invitedBy: String
    public var createdAt: Date?

    init?(json: JSONValue) {
        guard let space = json["space"]?.stringValue, let name = json["name"]?.stringValue,
            let role = json["role"]?.stringValue.flatMap(SpaceRole.init(rawValue:))
        else { return nil }
        self.space = space
        self.name = name
        self.role = role
        invitedBy = json["invitedBy"]?.stringValue ?? ""
        createdAt = json["createdAt"]?.stringValue.flatMap(Timestamp.parseRFC3339)
    }
}

/// A member of a space, or an invited user (``SpaceDetails/invitations``).
public struct SpaceMemberInfo: Sendable, Hashable {
    public var id: String
    public var username: String
    public var role: SpaceRole
    /// When they joined (members) or were invited (invitations).
    public var since: Date?

    init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue, let username = json["username"]?.stringValue,
            let role = json["role"]?.stringValue.flatMap(SpaceRole.init(rawValue:))
        else { return nil }
        self.id = id
        self.username = username
        self.role = role
        since = (json["joinedAt"] ?? json["createdAt"])?.stringValue.flatMap(Timestamp.parseRFC3339)
    }
}

/// A link to join a space by; its secret and URL only when it was just made.
public struct SpaceLinkInfo: Sendable, Hashable {
    public var id: String
    public var role: SpaceRole
    public var createdAt: Date?
    public var expiresAt: Date?
    public var maxUses: Int?
    public var uses: Int
    public var revoked: Bool
    public var secret: String?
    public var url: String?

    init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue,
            let role = json["role"]?.stringValue.flatMap(SpaceRole.init(rawValue:))
        else { return nil }
        self.id = id
        self.role = role
        createdAt = json["createdAt"]?.stringValue.flatMap(Timestamp.parseRFC3339)
        expiresAt = json["expiresAt"]?.stringValue.flatMap(Timestamp.parseRFC3339)
        maxUses = json["maxUses"]?.intValue.map(Int.init)
        uses = Int(json["uses"]?.intValue ?? 0)
        revoked = json["revoked"]?.boolValue ?? false
        secret = json["secret"]?.stringValue
        url = json["url"]?.stringValue
    }
}

/// A space with its members; invitations and links for those who manage it.
public struct SpaceDetails: Sendable, Hashable {
    public var space: SpaceInfo
    public var members: [SpaceMemberInfo]
    /// Nil unless the caller is an admin or the owner.
    public var invitations: [SpaceMemberInfo]?
    public var links: [SpaceLinkInfo]?
}

/// Spaces over HTTP (docs/protocol.md, "Spaces").
extension NotedAPI {
    /// `GET /v1/spaces`: the caller's spaces (the personal one first) and pending invitations.
    public func spaces(token: String) async throws -> (spaces: [SpaceInfo], invitations: [SpaceInvitationInfo]) {
        let response = try await call("GET", "/v1/spaces", token: token)
        return (
            (response["spaces"]?.arrayValue ?? []).compactMap(SpaceInfo.init(json:)),
            (response["invitations"]?.arrayValue ?? []).compactMap(SpaceInvitationInfo.init(json:))
        )
    }

    /// `POST /v1/spaces`.
    public func createSpace(name: String, token: String) async throws -> SpaceInfo {
        let response = try await call("POST", "/v1/spaces", body: ["name": .string(name)], token: token)
        guard let space = SpaceInfo(json: response) else { throw NotedClientError(.server, "the server sent no space") }
        return space
    }

    /// `GET /v1/spaces/{id}`.
    public func space(_ id: String, token: String) async throws -> SpaceDetails {
        let response = try await call("GET", try Self.spacePath(id), token: token)
        guard let space = SpaceInfo(json: response) else { throw NotedClientError(.server, "the server sent no space") }
        return SpaceDetails(
            space: space, members: (response["members"]?.arrayValue ?? []).compactMap(SpaceMemberInfo.init(json:)),
            invitations: response["invitations"]?.arrayValue?.compactMap(SpaceMemberInfo.init(json:)),
            links: response["links"]?.arrayValue?.compactMap(SpaceLinkInfo.init(json:)))
    }

    /// `PATCH /v1/spaces/{id}`.
    public func renameSpace(_ id: String, to name: String, token: String) async throws {
        _ = try await call("PATCH", try Self.spacePath(id), body: ["name": .string(name)], token: token)
    }

    /// `DELETE /v1/spaces/{id}`: the owner deletes the space with its records.
    public func deleteSpace(_ id: String, token: String) async throws {
        _ = try await call("DELETE", try Self.spacePath(id), token: token)
    }

    /// `POST /v1/spaces/{id}/invitations`.
    public func invite(username: String, role: SpaceRole, to space: String, token: String) async throws {
        _ = try await call(
            "POST", try Self.spacePath(space, "invitations"),
            body: ["username": .string(username), "role": .string(role.rawValue)], token: token)
    }

    /// `DELETE /v1/spaces/{id}/invitations/{user}`.
    public func cancelInvitation(of user: String, to space: String, token: String) async throws {
        _ = try await call("DELETE", try Self.spacePath(space, "invitations", user), token: token)
    }

    /// `POST /v1/spaces/{id}/accept` or `…/decline`; the role when accepted.
    @discardableResult
    public func answerInvitation(to space: String, accept: Bool, token: String) async throws -> SpaceRole? {
        let response = try await call(
            "POST", try Self.spacePath(space, accept ? "accept" : "decline"), body: [:], token: token)
        return response["role"]?.stringValue.flatMap(SpaceRole.init(rawValue:))
    }

    /// `PUT /v1/spaces/{id}/members/{user}`.
    public func setRole(_ role: SpaceRole, of user: String, in space: String, token: String) async throws {
        _ = try await call(
            "PUT", try Self.spacePath(space, "members", user), body: ["role": .string(role.rawValue)], token: token)
    }

    /// `DELETE /v1/spaces/{id}/members/{user}` (the caller's own id: leaving).
    public func removeMember(_ user: String, from space: String, token: String) async throws {
        _ = try await call("DELETE", try Self.spacePath(space, "members", user), token: token)
    }

    /// `POST /v1/spaces/{id}/leave`.
    public func leaveSpace(_ space: String, token: String) async throws {
        _ = try await call("POST", try Self.spacePath(space, "leave"), body: [:], token: token)
    }

    /// `POST /v1/spaces/{id}/transfer`: the owner hands the space to a member (by id).
    public func transferSpace(_ space: String, to user: String, token: String) async throws {
        _ = try await call("POST", try Self.spacePath(space, "transfer"), body: ["user": .string(user)], token: token)
    }

    /// `POST /v1/spaces/{id}/links`: a new link, with its secret and URL (shown this once).
    public func createLink(
        in space: String, role: SpaceRole, expiresInDays: Double?, maxUses: Int?, token: String
    ) async throws -> SpaceLinkInfo {
        var body: [String: JSONValue] = ["role": .string(role.rawValue)]
        body["expiresInDays"] = expiresInDays.map(JSONValue.double)
        body["maxUses"] = maxUses.map { .int(Int64($0)) }
        let response = try await call("POST", try Self.spacePath(space, "links"), body: .object(body), token: token)
        guard let link = SpaceLinkInfo(json: response) else {
            throw NotedClientError(.server, "the server sent no link")
        }
        return link
    }

    /// `DELETE /v1/spaces/{id}/links/{link}`.
    public func revokeLink(_ link: String, in space: String, token: String) async throws {
        _ = try await call("DELETE", try Self.spacePath(space, "links", link), token: token)
    }

    /// `POST /v1/join` with a link's secret (or the whole link URL): the space joined and the role.
    public func join(link: String, token: String) async throws -> (space: String, name: String, role: SpaceRole) {
        let secret = Self.linkSecret(link)
        let response = try await call("POST", "/v1/join", body: ["secret": .string(secret)], token: token)
        guard let space = response["space"]?.stringValue,
            let role = response["role"]?.stringValue.flatMap(SpaceRole.init(rawValue:))
        else { throw NotedClientError(.server, "the server sent no space") }
        return (space, response["name"]?.stringValue ?? "", role)
    }

    /// The secret of a link: what follows `#join=` in its URL, or the text itself.
    public static func linkSecret(_ link: String) -> String {
        let text = link.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let range = text.range(of: "#join=") else { return text }
        return String(text[range.upperBound...])
    }

    /// `/v1/spaces/{id}/…`, each part a path segment that cannot leave it.
    static func spacePath(_ parts: String...) throws -> String {
        for part in parts
        where part.isEmpty || part == "." || part == ".."
            || part.unicodeScalars.contains(where: {
                !$0.isASCII || $0.value < 0x21 || $0.value == 0x7f || "/?#%\\".unicodeScalars.contains($0)
            })
        {
            throw NotedClientError(.notFound, "no such space, member or link: \(part)")
        }
        return "/v1/spaces/" + parts.joined(separator: "/")
    }

    private func call(_ method: String, _ path: String, body: JSONValue? = nil, token: String) async throws
        -> JSONValue
    {
        var headers = ["Authorization": "Bearer \(token)"]
        if body != nil { headers["Content-Type"] = "application/json" }
        let response = try await http.send(
            HTTPRequestData(
                method: method, url: try url(path), headers: headers, body: body.map { Data($0.jsonString.utf8) }))
        return try Self.checked(response)
    }
}
