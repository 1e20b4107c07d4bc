import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

/// Spaces (issue 42, docs/protocol.md "Spaces"): every user's personal space, including the
/// data of a database from before spaces; shared spaces with roles, invitations and links over
/// HTTP on a live server, on both backends; the rules keep one owner whatever happens.
@Suite struct SpaceTests {
    static let backends = Backend.available
    let contract = StoreContractTests()

    /// What the version before spaces stored (a user, their records and `seq`) is the user's
    /// personal space after the upgrade; pushes go on from it, and shared spaces can be made.
    @Test(arguments: backends) func aDatabaseFromBeforeSpacesKeepsEverythingInPersonalSpaces(backend: Backend)
        async throws
    {
        try await withDatabase(backend) { location in
            let old = try openStore(location)
            try await migrate(old, upTo: "blob-charge")
            let user = try await makeUserOfEarlierVersion(old)
            let id = uuid()
            // A note as that version's push wrote it.
            let fields = FieldsCoding.encode(["body": "kept"])
            try await executeRaw(
                old,
                [
                    ("UPDATE user_seq SET seq = 1, stored_records = 1 WHERE user_id = $1", [user]),
                    (
                        "INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at) VALUES ($1, 'notes', $2, 1, 1, $3, $4, 0, 0)",
                        [user, id, false, fields]
                    ),
                    (
                        "INSERT INTO revisions (user_id, collection, record_id, rev, conflict, seq, fields, device, ccid, updated_at, size) VALUES ($1, 'notes', $2, 1, $3, 1, $4, NULL, NULL, 0, $5)",
                        [user, id, false, fields, Int64(fields.utf8.count)]
                    ),
                ])
            await old.shutdown()

            let store = try openStore(location)
            try await store.migrate()
            let spaces = try await store.spaces(userID: user)
            #expect(spaces.count == 1)
            let personal = try #require(spaces.first)
            #expect(personal.space.id == user && personal.space.personal && personal.role == .owner)
            #expect(personal.space.name == SpaceDefaults.personalName && personal.seq == 1)
            #expect(try await store.record(userID: user, collection: "notes", id: id)?.fields["body"] == "kept")
            #expect(
                try await contract.push(store, user: user, change(id, baseRev: 1, ["body": ["set": "on"]]))["status"]
                    == "applied")
            // Revisions from before name no author; new ones name the user.
            let revisions = try #require(try await store.revisions(userID: user, collection: "notes", id: id))
            #expect(revisions.map(\.author) == [nil, user])
            #expect(revisions.map(\.authorName) == [nil, "user-\(user.prefix(8))"])
            let shared = Space(id: uuid(), name: "Family", ownerID: user, personal: false, createdAt: Date())
            try await store.createSpace(shared)
            #expect(try await store.spaces(userID: user).map(\.space.name) == [SpaceDefaults.personalName, "Family"])
            await store.shutdown()
        }
    }

    /// Two admins acting at once on one space: the store applies one update after the other,
    /// so the space keeps exactly one owner and both changes.
    @Test(arguments: backends) func concurrentUpdatesOfOneSpaceApplyOneAfterTheOther(backend: Backend) async throws {
        try await withStore(backend) { store in
            let owner = try await contract.makeUser(store)
            let others = [try await contract.makeUser(store), try await contract.makeUser(store)]
            let space = Space(id: uuid(), name: "Team", ownerID: owner, personal: false, createdAt: Date())
            try await store.createSpace(space)
            for other in others {
                _ = try await store.updateSpace(id: space.id) { state in
                    state.members[other] = SpaceMember(userID: other, username: "", role: .admin, joinedAt: Date())
                }
            }
            // Each admin makes 20 role changes of the other while the owner hands over and back.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (actor, target) in [(others[0], others[1]), (others[1], others[0])] {
                    group.addTask {
                        for index in 0..<20 {
                            _ = try? await store.updateSpace(id: space.id) { state in
                                try SpaceRules.setRole(
                                    &state, by: actor, of: target, to: index.isMultiple(of: 2) ? .editor : .admin)
                            }
                        }
                    }
                }
                group.addTask {
                    for _ in 0..<5 {
                        _ = try await store.updateSpace(id: space.id) { state in
                            try SpaceRules.transfer(&state, by: owner, to: others[0])
                        }
                        _ = try await store.updateSpace(id: space.id) { state in
                            try SpaceRules.transfer(&state, by: others[0], to: owner)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let state = try #require(try await store.spaceState(id: space.id))
            #expect(state.members.values.filter { $0.role == .owner }.map(\.userID) == [owner])
            #expect(state.space.ownerID == owner && state.members.count == 3)
        }
    }

    /// Random actions by random members (seeded: `NOTED_TEST_SEED`): the rules never leave a
    /// space without exactly one owner who is its `ownerID`, nor let a non-manager manage.
    @Test func theRulesKeepOneOwnerWhateverMembersDo() throws {
        let seed =
            ProcessInfo.processInfo.environment["NOTED_TEST_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let users = (0..<6).map { "u\($0)" }
        let now = Date()
        var state = SpaceState(
            space: Space(id: "s", name: "S", ownerID: "u0", personal: false, createdAt: now),
            members: ["u0": SpaceMember(userID: "u0", username: "u0", role: .owner, joinedAt: now)])
        for step in 0..<5000 {
            let actor = users[Int(random.next() % 6)]
            let target = users[Int(random.next() % 6)]
            let role = [SpaceRole.viewer, .editor, .admin, .owner][Int(random.next() % 4)]
            let before = state
            let actorRole = state.members[actor]?.role
            let action = random.next() % 7
            do throws(SpaceError) {
                switch action {
                case 0: try SpaceRules.invite(&state, by: actor, user: (target, target), role: role, now: now)
                case 1: _ = try SpaceRules.answer(&state, by: target, accept: random.next() % 3 != 0, now: now)
                case 2: try SpaceRules.setRole(&state, by: actor, of: target, to: role)
                case 3: try SpaceRules.remove(&state, by: actor, member: target)
                case 4: try SpaceRules.transfer(&state, by: actor, to: target)
                case 5: try SpaceRules.rename(&state, by: actor, to: "S\(step)")
                default:
                    let link = SpaceLink(
                        id: "l\(step)", secretHash: "h\(step)", role: role, createdBy: actor, createdAt: now,
                        expiresAt: nil, maxUses: 1)
                    try SpaceRules.addLink(&state, by: actor, link: link)
                    _ = try SpaceRules.join(&state, user: (target, target), link: link.id, now: now)
                }
            } catch {
                #expect(
                    state == before || action == 6, "a refused action changed the space (seed \(seed), step \(step))")
            }
            let owners = state.members.values.filter { $0.role == .owner }
            #expect(owners.count == 1 && owners.first?.userID == state.space.ownerID, "seed \(seed), step \(step)")
            if state != before {
                switch action {
                case 0, 2, 5, 6: #expect(actorRole?.manages == true, "seed \(seed), step \(step)")
                case 3 where actor != target: #expect(actorRole?.manages == true, "seed \(seed), step \(step)")
                case 4: #expect(actorRole == .owner, "seed \(seed), step \(step)")
                default: break
                }
            }
            if owners.count != 1 { break }
        }
    }

    // MARK: Over HTTP, on a live server

    struct Client {
        let server: TestServer
        let user: TestServer.User

        func call(_ method: HTTPRequest.Method, _ path: String, _ json: JSONValue? = nil) async throws
            -> TestServer.HTTPResult
        {
            try await server.request(
                method, path, json: json ?? (method == .post || method == .put ? [:] : nil), token: user.accessToken)
        }

        func spaces() async throws -> JSONValue { try await call(.get, "/v1/spaces").json }
    }

    @Test(arguments: backends) func ownersAdminsEditorsAndViewersDoWhatTheirRolesAllow(backend: Backend)
        async throws
    {
        try await TestServer.with(backend) { server in
            let ann = Client(server: server, user: try await server.makeUser("ann"))
            let bob = Client(server: server, user: try await server.makeUser("bob"))
            let cat = Client(server: server, user: try await server.makeUser("cat"))
            let eve = Client(server: server, user: try await server.makeUser("eve"))

            // Everyone has a personal space, which is not shared.
            let personal = try await ann.spaces()["spaces"]?[0]
            #expect(personal?["id"] == .string(ann.user.id) && personal?["personal"] == true)
            #expect(personal?["role"] == "owner" && personal?["name"] == .string(SpaceDefaults.personalName))
            let sharePersonal = try await ann.call(
                .post, "/v1/spaces/\(ann.user.id)/invitations", ["username": "bob", "role": "editor"])
            #expect(sharePersonal.status == .conflict && sharePersonal.json["error"] == "personal_space")

            let created = try await ann.call(.post, "/v1/spaces", ["name": "  Shopping  "])
            #expect(created.status == .created && created.json["name"] == "Shopping" && created.json["role"] == "owner")
            let space = try #require(created.json["id"]?.stringValue)
            #expect(try await ann.call(.post, "/v1/spaces", ["name": "   "]).status == .badRequest)

            // A non-member learns nothing: the same 404 as for no space at all.
            for path in ["/v1/spaces/\(space)", "/v1/spaces/\(uuid())"] {
                let seen = try await eve.call(.get, path)
                #expect(seen.status == .notFound && seen.json["error"] == "not_found", "\(path)")
            }
            let eveInvites = try await eve.call(.post, "/v1/spaces/\(space)/invitations", ["username": "cat"])
            #expect(eveInvites.status == .notFound)
            let unknownFromOutside = try await eve.call(
                .post, "/v1/spaces/\(space)/invitations", ["username": "nobody-at-all"])
            #expect(unknownFromOutside.status == .notFound && unknownFromOutside.json["error"] == "not_found")

            // Invitations by username: seen by the invitee, accepted or declined.
            #expect(
                try await ann.call(.post, "/v1/spaces/\(space)/invitations", ["username": "BOB", "role": "viewer"])
                    .status == .created)
            #expect(
                try await ann.call(.post, "/v1/spaces/\(space)/invitations", ["username": "cat", "role": "admin"])
                    .status == .created)
            let unknown = try await ann.call(.post, "/v1/spaces/\(space)/invitations", ["username": "nobody-at-all"])
            #expect(unknown.status == .notFound && unknown.json["error"] == "unknown_user")
            let asOwner = try await ann.call(
                .post, "/v1/spaces/\(space)/invitations", ["username": "cat", "role": "owner"])
            #expect(asOwner.status == .badRequest)
            let invitation = try await bob.spaces()["invitations"]?[0]
            #expect(invitation?["space"] == .string(space) && invitation?["name"] == "Shopping")
            #expect(invitation?["role"] == "viewer" && invitation?["invitedBy"] == "ann")
            #expect(try await bob.call(.get, "/v1/spaces/\(space)").status == .notFound)
            #expect(try await bob.call(.post, "/v1/spaces/\(space)/accept").json["role"] == "viewer")
            #expect(try await cat.call(.post, "/v1/spaces/\(space)/decline").json["role"] == .null)
            #expect(try await cat.call(.post, "/v1/spaces/\(space)/accept").status == .notFound)
            let listed = try await bob.spaces()["spaces"]?.arrayValue ?? []
            #expect(listed.map { $0["name"] } == [.string(SpaceDefaults.personalName), "Shopping"])
            #expect(listed.last?["role"] == "viewer" && listed.last?["members"] == 2 && listed.last?["owner"] == "ann")

            // A viewer sees the members but manages nothing.
            let asViewer = try await bob.call(.get, "/v1/spaces/\(space)")
            #expect(asViewer.json["members"]?.arrayValue?.map { $0["username"] } == ["ann", "bob"])
            #expect(asViewer.json["invitations"] == nil && asViewer.json["links"] == nil)
            let viewerInvites = try await bob.call(.post, "/v1/spaces/\(space)/invitations", ["username": "cat"])
            #expect(viewerInvites.status == .forbidden && viewerInvites.json["error"] == "forbidden")
            #expect(try await bob.call(.patch, "/v1/spaces/\(space)", ["name": "Mine"]).status == .forbidden)
            #expect(try await bob.call(.delete, "/v1/spaces/\(space)").status == .forbidden)

            // Roles: the owner makes an admin; an admin manages those below, not the owner.
            #expect(
                try await ann.call(.post, "/v1/spaces/\(space)/invitations", ["username": "cat", "role": "admin"])
                    .status == .created)
            #expect(try await cat.call(.post, "/v1/spaces/\(space)/accept").json["role"] == "admin")
            #expect(
                try await cat.call(.put, "/v1/spaces/\(space)/members/\(bob.user.id)", ["role": "editor"]).status
                    == .ok)
            #expect(
                try await cat.call(.put, "/v1/spaces/\(space)/members/\(ann.user.id)", ["role": "viewer"]).status
                    == .forbidden)
            #expect(
                try await cat.call(.put, "/v1/spaces/\(space)/members/\(bob.user.id)", ["role": "owner"]).status
                    == .badRequest)
            #expect(try await cat.call(.delete, "/v1/spaces/\(space)/members/\(ann.user.id)").status == .forbidden)
            #expect(
                try await cat.call(.post, "/v1/spaces/\(space)/transfer", ["user": .string(cat.user.id)]).status
                    == .forbidden)
            let asAdmin = try await cat.call(.get, "/v1/spaces/\(space)")
            #expect(asAdmin.json["members"]?.arrayValue?.map { $0["role"] } == ["owner", "admin", "editor"])
            #expect(asAdmin.json["invitations"] == [] && asAdmin.json["links"] == [])

            // The owner cannot leave before handing over; then leaves as an admin would.
            let ownerLeaves = try await ann.call(.post, "/v1/spaces/\(space)/leave")
            #expect(ownerLeaves.status == .forbidden)
            #expect(
                try await ann.call(.post, "/v1/spaces/\(space)/transfer", ["user": .string(cat.user.id)]).status == .ok)
            #expect(try await ann.call(.get, "/v1/spaces/\(space)").json["role"] == "admin")
            #expect(try await ann.call(.post, "/v1/spaces/\(space)/leave").status == .noContent)
            #expect(try await ann.call(.get, "/v1/spaces/\(space)").status == .notFound)
            #expect(try await cat.call(.delete, "/v1/spaces/\(space)/members/\(bob.user.id)").status == .noContent)
            #expect((try await bob.spaces()["spaces"]?.arrayValue?.count) == 1)

            // Only the owner deletes, and then the space is gone for everyone.
            #expect(try await cat.call(.delete, "/v1/spaces/\(space)").status == .noContent)
            #expect(try await cat.call(.get, "/v1/spaces/\(space)").status == .notFound)
            #expect(try await cat.call(.delete, "/v1/spaces/\(cat.user.id)").status == .conflict)
        }
    }

    @Test(arguments: backends) func linksJoinWithTheirRoleUntilRevokedExpiredOrUsedUp(backend: Backend) async throws {
        let clock = ManualClock()
        try await TestServer.with(backend, clock: clock) { server in
            var ann = Client(server: server, user: try await server.makeUser("ann"))
            let space = try #require(
                try await ann.call(.post, "/v1/spaces", ["name": "Runbook"]).json["id"]?.stringValue)
            let made = try await ann.call(
                .post, "/v1/spaces/\(space)/links", ["role": "editor", "expiresInDays": 7, "maxUses": 2])
            #expect(made.status == .created && made.headers[.cacheControl] == "no-store")
            let secret = try #require(made.json["secret"]?.stringValue)
            #expect(made.json["url"]?.stringValue?.hasSuffix("/#join=\(secret)") == true)
            #expect(made.json["role"] == "editor" && made.json["maxUses"] == 2 && made.json["uses"] == 0)
            for bad: JSONValue in [
                ["role": "admin"], ["role": "owner"], ["expiresInDays": 0], ["expiresInDays": 400], ["maxUses": 0],
                ["maxUses": 1.5], ["role": 3],
            ] {
                #expect(try await ann.call(.post, "/v1/spaces/\(space)/links", bad).status == .badRequest, "\(bad)")
            }

            var joiners: [Client] = []
            for name in ["bob", "cat", "dan"] {
                joiners.append(Client(server: server, user: try await server.makeUser(name)))
            }
            let joined = try await joiners[0].call(.post, "/v1/join", ["secret": .string(secret)])
            #expect(joined.json["space"] == .string(space) && joined.json["role"] == "editor")
            // Joining again uses nothing up.
            #expect(try await joiners[0].call(.post, "/v1/join", ["secret": .string(secret)]).status == .ok)
            #expect(try await joiners[1].call(.post, "/v1/join", ["secret": .string(secret)]).status == .ok)
            let usedUp = try await joiners[2].call(.post, "/v1/join", ["secret": .string(secret)])
            #expect(usedUp.status == .gone && usedUp.json["error"] == "link_unusable")
            let wrong = try await joiners[2].call(.post, "/v1/join", ["secret": "not-a-secret"])
            #expect(wrong.status == .notFound)

            // Expiry on the server's clock; revocation at once.
            let weekLink = try await ann.call(.post, "/v1/spaces/\(space)/links", ["expiresInDays": 7])
            let expiring = try #require(weekLink.json["secret"]?.stringValue)
            clock.advance(by: .seconds(7 * 86400 + 1))
            // Access tokens expired too: signed in again.
            ann = Client(server: server, user: try await server.signIn(ann.user))
            joiners[2] = Client(server: server, user: try await server.signIn(joiners[2].user))
            let expired = try await joiners[2].call(.post, "/v1/join", ["secret": .string(expiring)])
            #expect(expired.status == .gone && expired.json["error"] == "link_unusable")
            let openLink = try await ann.call(.post, "/v1/spaces/\(space)/links", [:])
            let open = try #require(openLink.json["secret"]?.stringValue)
            let linkID = try #require(openLink.json["id"]?.stringValue)
            #expect(try await ann.call(.delete, "/v1/spaces/\(space)/links/\(linkID)").status == .noContent)
            #expect(try await joiners[2].call(.post, "/v1/join", ["secret": .string(open)]).status == .gone)

            let links = try await ann.call(.get, "/v1/spaces/\(space)").json["links"]?.arrayValue ?? []
            #expect(links.count == 3 && links.allSatisfy { $0["secret"] == nil })
            #expect(links.first { $0["id"] == made.json["id"] }?["uses"] == 2)
            #expect(links.first { $0["id"] == .string(linkID) }?["revoked"] == true)
            let members = try await ann.call(.get, "/v1/spaces/\(space)").json["members"]?.arrayValue ?? []
            #expect(members.map { $0["username"] } == ["ann", "bob", "cat"])
            #expect(members.map { $0["role"] } == ["owner", "editor", "editor"])
        }
    }

    /// Deleting an account hands each shared space it owns to its longest-standing admin, or
    /// deletes the space when nobody else is in it.
    @Test(arguments: backends) func deletingAnAccountHandsItsSpacesOver(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let alone = try await TestServer.withNode(location) { server in
                let ann = Client(server: server, user: try await server.makeUser("ann"))
                let bob = Client(server: server, user: try await server.makeUser("bob"))
                let cat = Client(server: server, user: try await server.makeUser("cat"))
                let shared = try #require(
                    try await ann.call(.post, "/v1/spaces", ["name": "Shared"]).json["id"]?.stringValue)
                let alone = try #require(
                    try await ann.call(.post, "/v1/spaces", ["name": "Alone"]).json["id"]?.stringValue)
                for (client, role) in [(bob, "editor"), (cat, "admin")] {
                    #expect(
                        try await ann.call(
                            .post, "/v1/spaces/\(shared)/invitations",
                            ["username": .string(client.user.username), "role": .string(role)]
                        ).status == .created)
                    #expect(try await client.call(.post, "/v1/spaces/\(shared)/accept").status == .ok)
                }
                let deleted = try await ann.call(.delete, "/v1/account", ["password": .string(ann.user.password)])
                #expect(deleted.status.code < 300, "\(deleted.json)")
                let space = try await cat.call(.get, "/v1/spaces/\(shared)").json
                #expect(space["role"] == "owner" && space["owner"] == "cat")
                #expect(space["members"]?.arrayValue?.map { $0["username"] } == ["cat", "bob"])
                return alone
            }
            let store = try openStore(location)
            #expect(try await store.spaceState(id: alone) == nil)
            await store.shutdown()
        }
    }
}
