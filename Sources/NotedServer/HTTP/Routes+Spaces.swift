import Foundation
import HTTPTypes
import Hummingbird
import NotedCore

/// Spaces, members, invitations and links over HTTP (docs/protocol.md, "Spaces").
extension Routes {
    func addSpaceRoutes(to router: some RouterMethods<NotedRequestContext>) {
        router.get("/v1/spaces") { _, context -> Response in
            let user = try context.requireIdentity().userID
            async let spaces = store.spaces(userID: user)
            async let invitations = store.invitations(userID: user)
            return .json([
                "spaces": .array(try await spaces.map(\.json)),
                "invitations": .array(try await invitations.map(\.json)),
            ])
        }
        router.post("/v1/spaces") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            guard let name = body["name"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "name must be a string")
            }
            let space = try await Self.spaceChecked { try await spaces.create(name: name, ownerID: user) }
            let summary = SpaceSummary(space: space, role: .owner, ownerName: "", memberCount: 1, seq: 0)
            var json = summary.json.objectValue ?? [:]
            json["owner"] = try await store.user(id: user).map { .string($0.username) } ?? .null
            return .json(.object(json), status: .created)
        }
        router.get("/v1/spaces/:space") { _, context -> Response in
            let user = try context.requireIdentity().userID
            let (state, role) = try await Self.spaceChecked {
                try await spaces.state(try Self.spaceID(context), for: user)
            }
            return .json(state.json(for: role))
        }
        router.patch("/v1/spaces/:space") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            guard let name = body["name"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "name must be a string")
            }
            let space = try Self.spaceID(context)
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.rename(&state, by: user, to: name)
                }
            }
            return .json([:])
        }
        router.delete("/v1/spaces/:space") { _, context -> Response in
            let user = try context.requireIdentity().userID
            let space = try Self.spaceID(context)
            try await Self.spaceChecked { try await spaces.delete(space, by: user) }
            return Response(status: .noContent)
        }
        addSpaceMemberRoutes(to: router)
        addSpaceLinkRoutes(to: router)
    }

    /// Invitations, answers, roles, removals, leaving and handing over.
    func addSpaceMemberRoutes(to router: some RouterMethods<NotedRequestContext>) {
        router.post("/v1/spaces/:space/invitations") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            guard let username = body["username"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "username must be a string")
            }
            let role = try Self.role(body["role"], default: .editor)
            let space = try Self.spaceID(context)
            try await Self.spaceChecked {
                try await spaces.invite(space, by: user, username: username, role: role)
            }
            return .json([:], status: .created)
        }
        router.delete("/v1/spaces/:space/invitations/:user") { _, context -> Response in
            let user = try context.requireIdentity().userID
            let space = try Self.spaceID(context)
            let invitee = try context.parameters.require("user")
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.cancelInvitation(&state, by: user, of: invitee)
                }
            }
            return Response(status: .noContent)
        }
        for (path, accept) in [("accept", true), ("decline", false)] {
            router.post("/v1/spaces/:space/\(path)") { _, context -> Response in
                let user = try context.requireIdentity().userID
                let space = try Self.spaceID(context)
                let now = configuration.clock.now()
                let role = try await Self.spaceChecked {
                    try await spaces.update(space) { state throws(SpaceError) in
                        try SpaceRules.answer(&state, by: user, accept: accept, now: now)
                    }
                }
                return .json(["role": role.map { .string($0.rawValue) } ?? .null])
            }
        }
        router.put("/v1/spaces/:space/members/:user") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            guard let roleValue = body["role"] else { throw APIError(.badRequest, "bad_request", "role is required") }
            let role = try Self.role(roleValue, default: .viewer)
            let space = try Self.spaceID(context)
            let member = try context.parameters.require("user")
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.setRole(&state, by: user, of: member, to: role)
                }
            }
            return .json([:])
        }
        router.delete("/v1/spaces/:space/members/:user") { _, context -> Response in
            let user = try context.requireIdentity().userID
            let space = try Self.spaceID(context)
            let member = try context.parameters.require("user")
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.remove(&state, by: user, member: member)
                }
            }
            return Response(status: .noContent)
        }
        router.post("/v1/spaces/:space/leave") { _, context -> Response in
            let user = try context.requireIdentity().userID
            let space = try Self.spaceID(context)
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.remove(&state, by: user, member: user)
                }
            }
            return Response(status: .noContent)
        }
        router.post("/v1/spaces/:space/transfer") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            guard let target = body["user"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "user must be a member's id")
            }
            let space = try Self.spaceID(context)
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.transfer(&state, by: user, to: target)
                }
            }
            return .json([:])
        }
    }

    /// Links: made and revoked by managers, used by anyone signed in who has the secret.
    func addSpaceLinkRoutes(to router: some RouterMethods<NotedRequestContext>) {
        router.post("/v1/spaces/:space/links") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            let role = try Self.role(body["role"], default: .viewer)
            var expiresAt: Date?
            if let days = body["expiresInDays"], days != .null {
                guard let days = days.numberValue, days > 0, days <= 365 else {
                    throw APIError(.badRequest, "bad_request", "expiresInDays must be a number from 0 to 365")
                }
                expiresAt = configuration.clock.now().addingTimeInterval(days * 86400)
            }
            var maxUses: Int64?
            if let uses = body["maxUses"], uses != .null {
                guard let value = uses.numberValue, value == value.rounded(), value >= 1,
                    value <= Double(SpaceRules.maxLinkUses)
                else {
                    throw APIError(
                        .badRequest, "bad_request", "maxUses must be an integer from 1 to \(SpaceRules.maxLinkUses)")
                }
                maxUses = Int64(value)
            }
            let space = try Self.spaceID(context)
            let (link, secret) = try await Self.spaceChecked {
                try await spaces.addLink(space, by: user, role: role, expiresAt: expiresAt, maxUses: maxUses)
            }
            var json = link.json.objectValue ?? [:]
            json["secret"] = .string(secret)
            json["url"] = .string("\(tokens.issuer)/#join=\(secret)")
            var response = Response.json(.object(json), status: .created)
            response.headers[.cacheControl] = "no-store"
            return response
        }
        router.delete("/v1/spaces/:space/links/:link") { _, context -> Response in
            let user = try context.requireIdentity().userID
            let space = try Self.spaceID(context)
            let link = try context.parameters.require("link")
            let now = configuration.clock.now()
            try await Self.spaceChecked {
                try await spaces.update(space) { state throws(SpaceError) in
                    try SpaceRules.revokeLink(&state, by: user, link: link, now: now)
                }
            }
            return Response(status: .noContent)
        }
        router.post("/v1/join") { request, context -> Response in
            let user = try context.requireIdentity().userID
            let body = try await jsonBody(request)
            guard let secret = body["secret"]?.stringValue, !secret.isEmpty, secret.utf8.count <= 200 else {
                throw APIError(.badRequest, "bad_request", "secret must be the link's secret")
            }
            let (space, role) = try await Self.spaceChecked { try await spaces.join(secret: secret, userID: user) }
            return .json(["space": .string(space.id), "name": .string(space.name), "role": .string(role.rawValue)])
        }
    }

    static func spaceID(_ context: NotedRequestContext) throws -> String {
        let id = try context.parameters.require("space")
        guard !id.isEmpty, id.utf8.count <= 200 else { throw APIError(.notFound, "not_found", "no such space") }
        return id
    }

    static func role(_ value: JSONValue?, default fallback: SpaceRole) throws -> SpaceRole {
        guard let value, value != .null else { return fallback }
        guard let text = value.stringValue, let role = SpaceRole(rawValue: text), role != .owner else {
            throw APIError(.badRequest, "bad_request", "role must be \"viewer\", \"editor\" or \"admin\"")
        }
        return role
    }

    /// Runs a space action, answering its refusal as an HTTP error.
    static func spaceChecked<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as SpaceError {
            throw APIError(error)
        }
    }
}

extension APIError {
    init(_ error: SpaceError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .notFound, .unknownUser: .notFound
            case .forbidden: .forbidden
            case .personalSpace, .alreadyMember: .conflict
            case .linkUnusable: .gone
            case .badRequest: .badRequest
            }
        self.init(status, error.code.rawValue, error.message)
    }
}

extension SpaceSummary {
    /// As `GET /v1/spaces` lists it (docs/protocol.md, "Spaces").
    var json: JSONValue {
        [
            "id": .string(space.id), "name": .string(space.name), "personal": .bool(space.personal),
            "role": .string(role.rawValue), "owner": .string(ownerName), "members": .int(memberCount),
            "seq": .int(seq), "createdAt": .string(Timestamp.format(space.createdAt)),
        ]
    }
}

extension PendingInvitation {
    var json: JSONValue {
        [
            "space": .string(spaceID), "name": .string(spaceName), "role": .string(role.rawValue),
            "invitedBy": .string(invitedByName), "createdAt": .string(Timestamp.format(createdAt)),
        ]
    }
}

extension SpaceLink {
    var json: JSONValue {
        [
            "id": .string(id), "role": .string(role.rawValue), "createdAt": .string(Timestamp.format(createdAt)),
            "expiresAt": expiresAt.map { .string(Timestamp.format($0)) } ?? .null,
            "maxUses": maxUses.map(JSONValue.int) ?? .null, "uses": .int(uses),
            "revoked": .bool(revokedAt != nil),
        ]
    }
}

extension SpaceState {
    /// The space as a member sees it: its members; invitations and links only for those who
    /// manage it.
    func json(for role: SpaceRole) -> JSONValue {
        let owner = members[space.ownerID]?.username ?? ""
        var json: [String: JSONValue] = [
            "id": .string(space.id), "name": .string(space.name), "personal": .bool(space.personal),
            "role": .string(role.rawValue), "owner": .string(owner),
            "createdAt": .string(Timestamp.format(space.createdAt)),
            "members": .array(
                members.values.sorted { ($0.role, $1.username) > ($1.role, $0.username) }.map { member in
                    [
                        "id": .string(member.userID), "username": .string(member.username),
                        "role": .string(member.role.rawValue),
                        "joinedAt": .string(Timestamp.format(member.joinedAt)),
                    ]
                }),
        ]
        if role.manages {
            json["invitations"] = .array(
                invitations.values.sorted { $0.createdAt < $1.createdAt }.map { invitation in
                    [
                        "id": .string(invitation.userID), "username": .string(invitation.username),
                        "role": .string(invitation.role.rawValue),
                        "createdAt": .string(Timestamp.format(invitation.createdAt)),
                    ]
                })
            json["links"] = .array(links.values.sorted { $0.createdAt < $1.createdAt }.map(\.json))
        }
        return .object(json)
    }
}
