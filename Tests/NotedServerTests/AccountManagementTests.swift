import Foundation
import GRDB
import HTTPTypes
import Logging
import NotedCore
import PostgresNIO
import Testing

@testable import NotedServer

/// A signed-in user's own account (docs/protocol.md, "Accounts"): changing the password signs
/// out every other device, devices are listed and signed out one by one or all at once, and
/// deleting the account leaves nothing of it in the database, on either backend, and closes
/// its connections on every node (issues 14 and 16).
@Suite struct AccountManagementTests {
    static let backends = Backend.available

    /// A fresh database, a live node on it, and the location to look into afterwards.
    func withServer(_ backend: Backend, _ body: @escaping @Sendable (TestServer, DatabaseLocation) async throws -> Void)
        async throws
    {
        try await withDatabase(backend) { location in
            try await TestServer.withNode(location) { server in try await body(server, location) }
        }
    }

    func signIn(_ server: TestServer, _ user: TestServer.User, password: String? = nil, device: String? = nil)
        async throws -> TestServer.User
    {
        try await server.signIn(user, password: password, device: device)
    }

    func status(_ server: TestServer, _ user: TestServer.User) async throws -> HTTPResponse.Status {
        try await server.request(.get, "/v1/changes?since=0", token: user.accessToken).status
    }

    /// The connection gets an `unauthenticated` error whose message contains `reason`, then
    /// close 4001, within a second.
    func expectClosed(_ connection: SyncConnection, saying reason: String) async throws {
        let started = ContinuousClock.now
        // Broadcasts already queued come first.
        var error = try await connection.receive(timeout: .seconds(1))
        while error["type"] == "change" { error = try await connection.receive(timeout: .seconds(1)) }
        #expect(error["type"] == "error" && error["code"] == "unauthenticated", "\(error)")
        #expect(error["message"]?.stringValue?.contains(reason) == true, "\(error)")
        #expect(try await connection.closeCode(timeout: .seconds(1)) == 4001)
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    @Test(arguments: backends) func changingThePasswordSignsOutEveryOtherDeviceAtOnce(backend: Backend) async throws {
        try await withServer(backend) { server, _ in
            let phone = try await server.makeUser()
            let laptop = try await signIn(server, phone)
            let phoneConnection = try await server.connect(phone)
            let laptopConnection = try await server.connect(laptop)
            let path = "/v1/account/password"

            let wrong = try await server.request(
                .post, path, json: ["current_password": "not it at all", "new_password": "a new passphrase"],
                token: phone.accessToken)
            #expect(wrong.status == .forbidden)
            #expect(wrong.json["error"] == "invalid_credentials")
            let weak = try await server.request(
                .post, path, json: ["current_password": .string(phone.password), "new_password": "short"],
                token: phone.accessToken)
            #expect(weak.status == .badRequest)
            #expect(weak.json["message"]?.stringValue?.contains("8 to 1024") == true)
            #expect(try await status(server, laptop) == .ok, "a refused change signs nobody out")
            let noToken = try await server.request(
                .post, path, json: ["current_password": .string(phone.password), "new_password": "a new passphrase"])
            #expect(noToken.status == .unauthorized)

            let changed = try await server.request(
                .post, path, json: ["current_password": .string(phone.password), "new_password": "a new passphrase"],
                token: phone.accessToken)
            #expect(changed.status == .ok)
            #expect(changed.json["signed_out"] == 1)
            try await expectClosed(laptopConnection, saying: "revoked")
            #expect(try await status(server, laptop) == .unauthorized)
            let refreshed = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(laptop.refreshToken)")
            #expect(refreshed.json["error"] == "invalid_grant")

            // The device that changed it stays signed in.
            #expect(try await status(server, phone) == .ok)
            try await phoneConnection.send(["type": "pull", "since": 0, "rid": 1])
            #expect(try await phoneConnection.receive()["type"] == "changes")
            let old = try await server.request(
                .post, "/v1/sessions", json: ["username": .string(phone.username), "password": .string(phone.password)])
            #expect(old.status == .unauthorized)
            _ = try await signIn(server, phone, password: "a new passphrase")
            await phoneConnection.close()
        }
    }

    @Test(arguments: backends) func devicesAreListedAndSignedOutOneByOneOrAllAtOnce(backend: Backend) async throws {
        try await withServer(backend) { server, _ in
            let first = try await server.makeUser()
            let phoneDevice = uuid()
            let phone = try await signIn(server, first, device: phoneDevice)
            let laptop = try await signIn(server, first)
            let listed = try await server.request(.get, "/v1/account/devices", token: phone.accessToken)
            #expect(listed.status == .ok)
            let devices = listed.json["devices"]?.arrayValue ?? []
            #expect(devices.count == 3)
            #expect(devices.filter { $0["current"] == true }.count == 1)
            let current = try #require(devices.first { $0["current"] == true })
            #expect(current["device"]?.stringValue == phoneDevice)
            #expect(current["client"] == "noted")
            #expect((current["last_seen"]?.intValue ?? 0) >= (current["signed_in_at"]?.intValue ?? .max))

            // Another user cannot see or end them.
            let stranger = try await server.makeUser()
            let strangers = try await server.request(.get, "/v1/account/devices", token: stranger.accessToken)
            #expect(strangers.json["devices"]?.arrayValue?.count == 1)
            let laptopID = try #require(
                devices.first { $0["current"] != true && $0["device"] == .null && $0["id"] != devices[0]["id"] }?["id"]?
                    .stringValue
                    ?? devices.last?["id"]?.stringValue)
            let notTheirs = try await server.request(
                .delete, "/v1/account/devices/\(laptopID)", token: stranger.accessToken)
            #expect(notTheirs.status == .notFound)
            #expect(try await status(server, laptop) == .ok)

            // Sign out one: its tokens stop working, the list shrinks, the others go on.
            let laptopConnection = try await server.connect(laptop)
            let ended = try await server.request(.delete, "/v1/account/devices/\(laptopID)", token: phone.accessToken)
            #expect(ended.status == .noContent)
            try await expectClosed(laptopConnection, saying: "revoked")
            #expect(try await status(server, laptop) == .unauthorized)
            let again = try await server.request(.delete, "/v1/account/devices/\(laptopID)", token: phone.accessToken)
            #expect(again.status == .notFound)
            let after = try await server.request(.get, "/v1/account/devices", token: phone.accessToken)
            #expect(after.json["devices"]?.arrayValue?.count == 2)
            #expect(try await status(server, phone) == .ok)
            #expect(try await status(server, first) == .ok)

            // All of them, this one too.
            let all = try await server.request(.delete, "/v1/account/devices", token: phone.accessToken)
            #expect(all.json["signed_out"] == 2)
            #expect(try await status(server, phone) == .unauthorized)
            #expect(try await status(server, first) == .unauthorized)
            #expect(try await status(server, stranger) == .ok)
        }
    }

    @Test(arguments: backends) func deletingTheAccountLeavesNothingAndFreesTheUsername(backend: Backend) async throws {
        try await withServer(backend) { server, location in
            let user = try await server.makeUser()
            let other = try await signIn(server, user)
            let bystander = try await server.makeUser()
            let connection = try await server.connect(user)
            let note = uuid()
            #expect(
                try await connection.push(
                    change(note, baseRev: 0, ["title": ["set": "mine"], "body": ["set": "a secret"]]))["type"] == "ack")
            #expect(
                try await connection.push(change(note, baseRev: 1, ["body": ["set": "a second secret"]]))["rev"] == 2)
            let otherConnection = try await server.connect(other)
            let bystanderConnection = try await server.connect(bystander)
            #expect(try await connection.push(change(uuid(), baseRev: 0, ["title": ["set": "x"]]))["type"] == "ack")
            #expect(try await Self.rows(of: user.id, in: location) > 0)

            let wrong = try await server.request(
                .delete, "/v1/account", json: ["password": "not the password"], token: user.accessToken)
            #expect(wrong.status == .forbidden)
            let missing = try await server.request(.delete, "/v1/account", json: [:], token: user.accessToken)
            #expect(missing.status == .badRequest)
            #expect(try await status(server, user) == .ok, "nothing is deleted on a refusal")

            let deleted = try await server.request(
                .delete, "/v1/account", json: ["password": .string(user.password)], token: other.accessToken)
            #expect(deleted.status == .noContent)
            try await expectClosed(connection, saying: "deleted")
            try await expectClosed(otherConnection, saying: "deleted")
            #expect(try await status(server, user) == .unauthorized)
            #expect(try await status(server, other) == .unauthorized)
            let signIn = try await server.request(
                .post, "/v1/sessions", json: ["username": .string(user.username), "password": .string(user.password)])
            #expect(signIn.status == .unauthorized)
            let refreshed = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(refreshed.json["error"] == "invalid_grant")
            #expect(try await Self.rows(of: user.id, in: location) == 0)

            // The bystander is untouched; the username can be taken again, by a new account.
            try await bystanderConnection.send(["type": "pull", "since": 0, "rid": 1])
            #expect(try await bystanderConnection.receive()["type"] == "changes")
            let again = try await server.request(
                .post, "/v1/accounts", json: ["username": .string(user.username), "password": "another passphrase"])
            #expect(again.status == .created)
            #expect(again.json["user"]?["id"]?.stringValue != user.id)
            let fresh = try await server.request(
                .post, "/v1/sessions", json: ["username": .string(user.username), "password": "another passphrase"])
            let feed = try await server.request(
                .get, "/v1/changes?since=0", token: fresh.json["access_token"]?.stringValue)
            #expect(feed.json["records"]?.arrayValue?.isEmpty == true, "\(feed.json)")
            await bystanderConnection.close()
        }
    }

    /// A push that reaches the store after the account is gone (a node that missed the notice,
    /// a token still in flight) is refused, and writes nothing.
    @Test(arguments: backends) func aPushForADeletedAccountWritesNothing(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let id = uuid()
            #expect(
                try await store.createUser(
                    UserAccount(
                        id: id, username: "gone-\(id.prefix(6))", usernameKey: "gone-\(id.prefix(6))", passwordHash: "x"
                    ), now: Date()))
            let first = try ChangeParser().parse(change(uuid(), baseRev: 0, ["title": ["set": "t"]]))
            _ = try await store.push(first, context: PushContext(userID: id, device: nil, now: Date(), bodyHash: "a"))
            #expect(try await store.deleteUser(id: id).isEmpty)  // no sign-in sessions
            let late = try ChangeParser().parse(change(uuid(), baseRev: 0, ["title": ["set": "late"]]))
            await #expect(throws: AccountDeleted.self) {
                _ = try await store.push(
                    late, context: PushContext(userID: id, device: nil, now: Date(), bodyHash: "b"))
            }
            #expect(try await store.changes(userID: id, since: 0, limit: 10).records.isEmpty)
            #expect(try await store.deleteUser(id: id).isEmpty, "deleting twice is harmless")
        }
    }

    @Test func aDeletionOrPasswordChangeOnOneNodeClosesConnectionsOnTheOther() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await TestServer.withTwoNodes(.postgres) { first, second in
            let user = try await first.makeUser()
            let laptop = try await signIn(first, user)
            let laptopOnSecond = try await second.connect(laptop)
            let changed = try await first.request(
                .post, "/v1/account/password",
                json: ["current_password": .string(user.password), "new_password": "a new passphrase"],
                token: user.accessToken)
            #expect(changed.status == .ok)
            try await expectClosed(laptopOnSecond, saying: "revoked")
            #expect(try await status(second, laptop) == .unauthorized)

            let onSecond = try await second.connect(user)
            let deleted = try await first.request(
                .delete, "/v1/account", json: ["password": "a new passphrase"], token: user.accessToken)
            #expect(deleted.status == .noContent)
            try await expectClosed(onSecond, saying: "deleted")
            #expect(try await status(second, user) == .unauthorized)
        }
    }

    /// Rows naming `userID` in every table that holds anything of a user.
    static func rows(of userID: String, in location: DatabaseLocation) async throws -> Int {
        let tables = [
            "users WHERE id = $1", "user_seq WHERE user_id = $1", "records WHERE user_id = $1",
            "revisions WHERE user_id = $1",
            "applied_changes WHERE user_id = $1", "refresh_families WHERE user_id = $1",
            "oauth_codes WHERE user_id = $1",
            "refresh_tokens WHERE family_id IN (SELECT id FROM refresh_families WHERE user_id = $1)",
        ]
        switch location {
        case .sqlite(let path):
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            return try await queue.read { db in
                try tables.reduce(0) { total, table in
                    total
                        + (try Int.fetchOne(
                            db, sql: "SELECT COUNT(*) FROM " + table.replacingOccurrences(of: "$1", with: "?"),
                            arguments: [userID]) ?? 0)
                }
            }
        case .postgres(let url):
            let store = try PostgresStore(url: url, limits: Limits(), logger: Logger(label: "test"))
            defer { Task { await store.shutdown() } }
            var total = 0
            for table in tables {
                var query = PostgresQuery(unsafeSQL: "SELECT COUNT(*)::BIGINT FROM " + table)
                query.binds.append(userID)
                for try await count in try await store.client.query(query, logger: Logger(label: "test")).decode(
                    Int64.self)
                {
                    total += Int(count)
                }
            }
            return total
        }
    }
}
