import Crypto
import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

/// Records in shared spaces over protocol 2 (issue 42, docs/protocol.md "Spaces"): members
/// pull and push them, editors' changes reach the other members' sessions at once, a viewer's
/// change is never applied, a non-member learns nothing, membership changes reach the
/// member's sessions (on another node too), and protocol 1 keeps syncing the personal space
/// as before.
@Suite struct SpaceSyncTests {
    static let backends = Backend.available

    /// A protocol-2 session of `user`; returns the connection and its welcome.
    static func connect2(_ server: TestServer, _ user: TestServer.User) async throws -> (SyncConnection, JSONValue) {
        let connection = try await SyncConnection.open(port: server.port)
        try await connection.send([
            "type": "hello", "protocol": 2, "token": .string(user.accessToken), "device": .string(uuid()),
            "client": "tests/2",
        ])
        let welcome = try await connection.receive()
        #expect(welcome["type"] == "welcome" && welcome["protocol"] == 2, "\(welcome)")
        return (connection, welcome)
    }

    /// A shared space of `owner` with `members` in their roles, over HTTP.
    static func share(
        _ server: TestServer, owner: TestServer.User, _ members: [(TestServer.User, String)], name: String = "Family"
    ) async throws -> String {
        let created = try await server.request(
            .post, "/v1/spaces", json: ["name": .string(name)], token: owner.accessToken)
        let space = try #require(created.json["id"]?.stringValue)
        for (member, role) in members {
            let invited = try await server.request(
                .post, "/v1/spaces/\(space)/invitations",
                json: ["username": .string(member.username), "role": .string(role)], token: owner.accessToken)
            #expect(invited.status == .created)
            let accepted = try await server.request(
                .post, "/v1/spaces/\(space)/accept", json: [:], token: member.accessToken)
            #expect(accepted.status == .ok)
        }
        return space
    }

    static func inSpace(_ change: JSONValue, _ space: String) -> JSONValue {
        var object = change.objectValue ?? [:]
        object["space"] = .string(space)
        return .object(object)
    }

    @Test(arguments: backends) func membersSyncASharedSpaceInTheirRoles(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let ann = try await server.makeUser("ann")
            let bob = try await server.makeUser("bob")
            let cat = try await server.makeUser("cat")
            let eve = try await server.makeUser("eve")
            let space = try await Self.share(server, owner: ann, [(bob, "editor"), (cat, "viewer")])

            let (annLink, annWelcome) = try await Self.connect2(server, ann)
            let spaces = annWelcome["spaces"]?.arrayValue ?? []
            #expect(spaces.map { $0["id"] } == [.string(ann.id), .string(space)])
            #expect(spaces.last?["role"] == "owner" && spaces.last?["seq"] == 0)
            let (bobLink, _) = try await Self.connect2(server, bob)
            let (catLink, _) = try await Self.connect2(server, cat)
            let (eveLink, _) = try await Self.connect2(server, eve)
            let annV1 = try await server.connect(ann)

            // An editor's change is applied, acknowledged, and reaches every other member's
            // protocol-2 session, with the space named; never a protocol-1 session.
            let note = uuid()
            let ack = try await bobLink.push(Self.inSpace(change(note, baseRev: 0, ["body": ["set": "milk"]]), space))
            #expect(ack["type"] == "ack" && ack["status"] == "applied" && ack["seq"] == 1, "\(ack)")
            for link in [annLink, catLink] {
                let heard = try await link.receive(type: "change")
                #expect(heard["space"] == .string(space) && heard["id"] == .string(note) && heard["rev"] == 1)
            }
            try await eveLink.expectSilence(for: .milliseconds(300))
            try await annV1.expectSilence(for: .milliseconds(100))

            // Members pull the space; a non-member is told it does not exist.
            try await catLink.send(["type": "pull", "since": 0, "space": .string(space), "rid": "p"])
            let page = try await catLink.receive(type: "changes")
            #expect(page["space"] == .string(space) && page["rid"] == "p")
            #expect(page["records"]?.arrayValue?.map { $0["fields"]?["body"] } == ["milk"])
            try await eveLink.send(["type": "pull", "since": 0, "space": .string(space), "rid": "q"])
            let refused = try await eveLink.receive(type: "error")
            #expect(refused["code"] == "not_found" && refused["rid"] == "q")
            try await eveLink.send(["type": "pull", "since": 0, "space": .string(uuid())])
            #expect(try await eveLink.receive(type: "error")["code"] == "not_found")

            // A viewer's change and a non-member's are never applied.
            let byViewer = try await catLink.push(
                Self.inSpace(change(note, baseRev: 1, ["body": ["set": "beer"]]), space))
            #expect(byViewer["type"] == "reject" && byViewer["code"] == "read_only", "\(byViewer)")
            let byOutsider = try await eveLink.push(
                Self.inSpace(change(uuid(), baseRev: 0, ["body": ["set": "spam"]]), space))
            #expect(byOutsider["type"] == "reject" && byOutsider["code"] == "not_found")
            // A space that does not exist, or a malformed one, is refused like any other
            // change: the session stays open.
            let nowhere = try await eveLink.push(
                Self.inSpace(change(uuid(), baseRev: 0, ["body": ["set": "x"]]), uuid()))
            #expect(nowhere["type"] == "reject" && nowhere["code"] == "not_found", "\(nowhere)")
            var malformed = change(uuid(), baseRev: 0, ["body": ["set": "x"]]).objectValue ?? [:]
            malformed["space"] = 5
            #expect(try await eveLink.push(.object(malformed))["code"] == "bad_request")
            let attached = try await bobLink.push(
                Self.inSpace(
                    change(
                        uuid(), baseRev: 0,
                        [
                            "attachments": [
                                "add": [
                                    .string("\(String(repeating: "a", count: 64)) 3 image/png a.png")
                                ]
                            ]
                        ]), space))
            #expect(attached["type"] == "reject" && attached["code"] == "invalid_field", "\(attached)")
            let afterRefusals = try await server.request(
                .get, "/v1/changes?since=0&space=\(space)", token: ann.accessToken)
            #expect(afterRefusals.json["records"]?.arrayValue?.count == 1 && afterRefusals.json["cursor"] == 1)
            #expect(
                try await server.request(.get, "/v1/changes?since=0&space=\(space)", token: eve.accessToken).status
                    == .notFound)

            // One push may hold changes to several spaces, answered in order.
            let mine = uuid()
            let mixed = try await annLink.push([
                change(mine, baseRev: 0, ["body": ["set": "my own"]]),
                Self.inSpace(change(note, baseRev: 1, ["body": ["set": "milk, eggs"]]), space),
            ])
            #expect(mixed.map { $0["status"] } == ["applied", "applied"])
            #expect(mixed.map { $0["seq"] } == [1, 2])
            let personalHeard = try await annV1.receive(type: "change")
            #expect(personalHeard["id"] == .string(mine) && personalHeard["space"] == nil)
            #expect(try await bobLink.receive(type: "change")["rev"] == 2)

            // Over HTTP as well: an editor pushes, a viewer is refused.
            let httpEdit = try await server.request(
                .post, "/v1/push",
                json: ["changes": [Self.inSpace(change(note, baseRev: 2, ["title": ["set": "Shopping"]]), space)]],
                token: bob.accessToken)
            #expect(httpEdit.json["results"]?[0]?["status"] == "applied", "\(httpEdit.json)")
            let httpView = try await server.request(
                .post, "/v1/push",
                json: ["changes": [Self.inSpace(change(note, baseRev: 3, ["title": ["set": "No"]]), space)]],
                token: cat.accessToken)
            #expect(httpView.json["results"]?[0]?["code"] == "read_only", "\(httpView.json)")
            // Members read the record and its history over HTTP, with who made each revision;
            // a non-member is told there is no such space.
            let path = "/v1/records/notes/\(note)"
            #expect(
                try await server.request(.get, "\(path)?space=\(space)", token: cat.accessToken).json["fields"]?[
                    "title"]
                    == "Shopping")
            let history = try await server.request(.get, "\(path)/revisions?space=\(space)", token: cat.accessToken)
            #expect(history.json["revisions"]?.arrayValue?.map { $0["author"] } == ["bob", "ann", "bob"])
            let first = try await server.request(.get, "\(path)/revisions/1?space=\(space)", token: cat.accessToken)
            #expect(first.json["fields"]?["body"] == "milk" && first.json["author"] == "bob", "\(first.json)")
            for (who, target) in [
                (eve, "\(path)?space=\(space)"), (eve, "\(path)/revisions?space=\(space)"), (ann, path),
            ] {
                let refused = try await server.request(.get, target, token: who.accessToken)
                #expect(refused.status == .notFound, "\(target)")
            }
            for link in [annLink, bobLink, catLink, eveLink, annV1] { await link.close() }
        }
    }

    @Test(arguments: backends) func membershipChangesReachTheMembersSessionsAtOnce(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let ann = try await server.makeUser("ann")
            let bob = try await server.makeUser("bob")
            let space = try await Self.share(server, owner: ann, [])
            let (bobLink, welcome) = try await Self.connect2(server, bob)
            #expect(welcome["spaces"]?.arrayValue?.count == 1)

            let started = ContinuousClock.now
            #expect(
                try await server.request(
                    .post, "/v1/spaces/\(space)/invitations", json: ["username": "bob", "role": "viewer"],
                    token: ann.accessToken
                ).status == .created)
            #expect(
                try await server.request(.post, "/v1/spaces/\(space)/accept", json: [:], token: bob.accessToken).status
                    == .ok)
            let joined = try await bobLink.receive(type: "spaces", timeout: .seconds(1))
            #expect(joined["spaces"]?.arrayValue?.last?["role"] == "viewer")
            #expect(ContinuousClock.now - started < .seconds(1))

            // Following it now: the owner's change reaches bob.
            let annLink = try await server.connect(ann)
            _ = annLink
            let note = uuid()
            let pushed = try await server.request(
                .post, "/v1/push",
                json: ["changes": [Self.inSpace(change(note, baseRev: 0, ["body": ["set": "hi"]]), space)]],
                token: ann.accessToken)
            #expect(pushed.json["results"]?[0]?["status"] == "applied")
            #expect(try await bobLink.receive(type: "change")["id"] == .string(note))

            // A role change, then removal: told at once, and nothing of the space after it.
            #expect(
                try await server.request(
                    .put, "/v1/spaces/\(space)/members/\(bob.id)", json: ["role": "editor"], token: ann.accessToken
                ).status == .ok)
            #expect(
                try await bobLink.receive(type: "spaces", timeout: .seconds(1))["spaces"]?.arrayValue?.last?["role"]
                    == "editor")
            #expect(
                try await server.request(.delete, "/v1/spaces/\(space)/members/\(bob.id)", token: ann.accessToken)
                    .status == .noContent)
            let removed = try await bobLink.receive(type: "spaces", timeout: .seconds(1))
            #expect(removed["spaces"]?.arrayValue?.map { $0["id"] } == [.string(bob.id)])
            let after = try await server.request(
                .post, "/v1/push",
                json: ["changes": [Self.inSpace(change(note, baseRev: 1, ["body": ["set": "after"]]), space)]],
                token: ann.accessToken)
            #expect(after.json["results"]?[0]?["status"] == "applied")
            try await bobLink.expectSilence(for: .milliseconds(300))
            let bobPush = try await bobLink.push(Self.inSpace(change(note, baseRev: 2, ["body": ["set": "x"]]), space))
            #expect(bobPush["code"] == "not_found")
            await bobLink.close()
            await annLink.close()
        }
    }

    /// A shared space counts toward its owner's quota, whoever writes in it; not toward the
    /// editor's, and the owner's spaces are counted together.
    @Test(arguments: backends) func aSharedSpaceCountsTowardItsOwnersQuota(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.quota = StorageQuota(records: 3) }) { server in
            let ann = try await server.makeUser("ann")
            let bob = try await server.makeUser("bob")
            let space = try await Self.share(server, owner: ann, [(bob, "editor")])
            let (annLink, _) = try await Self.connect2(server, ann)
            let (bobLink, _) = try await Self.connect2(server, bob)
            let own = try await annLink.push([
                change(uuid(), baseRev: 0, ["body": ["set": "1"]]), change(uuid(), baseRev: 0, ["body": ["set": "2"]]),
            ])
            #expect(own.map { $0["status"] } == ["applied", "applied"])
            let byBob = try await bobLink.push([
                Self.inSpace(change(uuid(), baseRev: 0, ["body": ["set": "3"]]), space),
                Self.inSpace(change(uuid(), baseRev: 0, ["body": ["set": "4"]]), space),
            ])
            #expect(byBob.map { $0["status"] } == ["applied", nil], "\(byBob)")
            #expect(byBob.last?["code"] == "quota_exceeded")
            #expect(
                try await annLink.push(change(uuid(), baseRev: 0, ["body": ["set": "5"]]))["code"] == "quota_exceeded")
            // Bob's own account is untouched by it.
            let bobs = try await bobLink.push([
                change(uuid(), baseRev: 0, ["body": ["set": "a"]]), change(uuid(), baseRev: 0, ["body": ["set": "b"]]),
                change(uuid(), baseRev: 0, ["body": ["set": "c"]]),
            ])
            #expect(bobs.map { $0["status"] } == ["applied", "applied", "applied"])
            let usage = try await server.request(.get, "/v1/account", token: ann.accessToken).json["usage"]
            #expect(usage?["records"] == 3)
            await annLink.close()
            await bobLink.close()
        }
    }

    /// Files the owner uploads count what their shared spaces hold too.
    @Test(arguments: backends) func uploadsCountTheOwnersSharedSpaces(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.quota = StorageQuota(bytes: 10_000) }) { server in
            let ann = try await server.makeUser("ann")
            let bob = try await server.makeUser("bob")
            let space = try await Self.share(server, owner: ann, [(bob, "editor")])
            func upload(_ text: String) async throws -> TestServer.HTTPResult {
                let sha = SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
                return try await server.request(
                    .put, "/v1/blobs/\(sha)", body: text, token: ann.accessToken,
                    headers: [.contentType: "text/plain", .contentLength: String(text.utf8.count)])
            }
            #expect(try await upload("first file").status == .created)
            let pushed = try await server.request(
                .post, "/v1/push",
                json: [
                    "changes": [
                        Self.inSpace(
                            change(uuid(), baseRev: 0, ["body": ["set": .string(String(repeating: "b", count: 5000))]]),
                            space)
                    ]
                ], token: bob.accessToken)
            #expect(pushed.json["results"]?[0]?["status"] == "applied", "\(pushed.json)")
            let refused = try await upload("second file")
            #expect(refused.status == .contentTooLarge && refused.json["error"] == "quota_exceeded", "\(refused.json)")
        }
    }

    /// Two nodes on one PostgreSQL database: a membership change made through one node
    /// reaches the member's session on the other within a second, and so do the space's changes.
    @Test func aMembershipChangeOnOneNodeReachesASessionOnAnother() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await TestServer.withTwoNodes(.postgres) { first, second in
            let ann = try await first.makeUser("ann")
            let bob = try await first.makeUser("bob")
            let space = try await Self.share(first, owner: ann, [])
            let (bobLink, _) = try await Self.connect2(second, bob)
            let started = ContinuousClock.now
            #expect(
                try await first.request(
                    .post, "/v1/spaces/\(space)/invitations", json: ["username": "bob", "role": "editor"],
                    token: ann.accessToken
                ).status == .created)
            #expect(
                try await first.request(.post, "/v1/spaces/\(space)/accept", json: [:], token: bob.accessToken).status
                    == .ok)
            let joined = try await bobLink.receive(type: "spaces", timeout: .seconds(1))
            #expect(joined["spaces"]?.arrayValue?.count == 2)
            #expect(ContinuousClock.now - started < .seconds(1))
            let note = uuid()
            let pushed = try await first.request(
                .post, "/v1/push",
                json: ["changes": [Self.inSpace(change(note, baseRev: 0, ["body": ["set": "hi"]]), space)]],
                token: ann.accessToken)
            #expect(pushed.json["results"]?[0]?["status"] == "applied")
            let heard = try await bobLink.receive(type: "change", timeout: .seconds(2))
            #expect(heard["id"] == .string(note) && heard["space"] == .string(space))
            await bobLink.close()
        }
    }

    /// Protocol 1 is unchanged: the welcome has no spaces, a pull naming a space is refused,
    /// and a change naming one is a change to nothing a protocol-1 client can reach.
    @Test(arguments: backends) func protocolOneSessionsKeepTheirPersonalSpace(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let ann = try await server.makeUser("ann")
            let connection = try await SyncConnection.open(port: server.port)
            try await connection.send(["type": "hello", "protocol": 1, "token": .string(ann.accessToken)])
            let welcome = try await connection.receive()
            #expect(welcome["protocol"] == 1 && welcome["spaces"] == nil)
            try await connection.send(["type": "pull", "since": 0, "space": .string(ann.id)])
            #expect(try await connection.receive(type: "error")["code"] == "bad_request")
            let note = uuid()
            let sneaky = try await connection.push(Self.inSpace(change(uuid(), baseRev: 0, [:]), uuid()))
            #expect(sneaky["type"] == "reject" && sneaky["code"] == "bad_request", "\(sneaky)")
            #expect(try await connection.push(change(note, baseRev: 0, ["body": ["set": "v1"]]))["status"] == "applied")
            #expect(try await connection.pull(since: 0)["records"]?.arrayValue?.count == 1)
            await connection.close()
            let three = try await SyncConnection.open(port: server.port)
            try await three.send(["type": "hello", "protocol": 3, "token": .string(ann.accessToken)])
            #expect(try await three.receive()["code"] == "unsupported_protocol")
        }
    }
}
