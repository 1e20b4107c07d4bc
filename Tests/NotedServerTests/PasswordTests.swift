import Foundation
import HummingbirdBcrypt
import HummingbirdTesting
import LiveServerSupport
import Logging
import NotedCore
import Testing

@testable import NotedServer

/// Passwords where bcrypt alone falls short (issue 14): NUL, every byte of a long password,
/// hashes of the earlier kind, and a cap on concurrent hashing.
@Suite struct PasswordTests {
    static let backends = Backend.available

    func register(_ server: TestServer, _ name: String, _ password: String) async throws -> TestServer.HTTPResult {
        try await server.request(
            .post, "/v1/accounts", json: ["username": .string(name), "password": .string(password)])
    }

    func signIn(_ server: TestServer, _ name: String, _ password: String) async throws -> TestServer.HTTPResult {
        try await server.request(
            .post, "/v1/sessions", json: ["username": .string(name), "password": .string(password)])
    }

    @Test(arguments: backends) func nulIsRefusedAndEveryByteOfALongPasswordCounts(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let nul = try await register(server, "nul-user", "\u{0}abcdefgh")
            #expect(nul.status == .badRequest)
            #expect(nul.json["message"]?.stringValue?.contains("NUL") == true)

            let long = String(repeating: "x", count: 72) + "the real ending"
            #expect(try await register(server, "long-user", long).status == .created)
            #expect(try await signIn(server, "long-user", long).status == .ok)
            // Before: bcrypt read only the first 72 bytes, and any ending signed in.
            #expect(try await signIn(server, "long-user", String(repeating: "x", count: 72)).status == .unauthorized)
            #expect(
                try await signIn(server, "long-user", String(repeating: "x", count: 72) + "another ending").status
                    == .unauthorized)
            #expect(try await signIn(server, "long-user", "\u{0}" + long).status == .unauthorized)
        }
    }

    @Test(arguments: backends) func aHashOfTheEarlierKindSignsInAndIsUpgraded(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            // What the earlier version stored: plain bcrypt over the password.
            let store: any NotedStore =
                switch location {
                case .sqlite(let path): try SQLiteStore(path: path, limits: Limits())
                case .postgres(let url): try PostgresStore(url: url, limits: Limits(), logger: Logger(label: "test"))
                }
            try await store.migrate()
            let short = "correct horse battery"
            let long = String(repeating: "y", count: 80)
            for (name, password) in [("old-short", short), ("old-long", long)] {
                let user = UserAccount(
                    id: UUID().uuidString.lowercased(), username: name, usernameKey: name,
                    passwordHash: Bcrypt.hash(password, cost: 4))
                #expect(try await store.createUser(user, now: Date()))
            }
            await store.shutdown()

            let node = try await TestServer.makeNode(location)
            try await LiveNode.run(node) { (client) async throws -> Void in
                let server = TestServer(port: client.port ?? 0, client: client, database: location)
                #expect(try await signIn(server, "old-short", "wrong password").status == .unauthorized)
                #expect(try await signIn(server, "old-short", short).status == .ok)
                #expect(try await signIn(server, "old-long", long).status == .ok)
            }
            let reopened: any NotedStore =
                switch location {
                case .sqlite(let path): try SQLiteStore(path: path, limits: Limits())
                case .postgres(let url): try PostgresStore(url: url, limits: Limits(), logger: Logger(label: "test"))
                }
            let upgraded = try await reopened.user(usernameKey: "old-short")?.passwordHash
            let kept = try await reopened.user(usernameKey: "old-long")?.passwordHash
            await reopened.shutdown()
            #expect(upgraded?.hasPrefix("$noted1$") == true, "verified exactly, so rehashed over every byte")
            #expect(kept?.hasPrefix("$2") == true, "longer than bcrypt reads: not verifiable exactly, so not rehashed")

            let again = try await TestServer.makeNode(location)
            try await LiveNode.run(again) { (client) async throws -> Void in
                let server = TestServer(port: client.port ?? 0, client: client, database: location)
                #expect(try await signIn(server, "old-short", short).status == .ok, "the upgraded hash verifies")
                #expect(try await signIn(server, "old-short", short + "x").status == .unauthorized)
            }
        }
    }

    @Test func hashingBeyondTheQueueIsRefusedAtOnce() async throws {
        let hasher = PasswordHasher(cost: 10, concurrency: 1, queueLimit: 1)
        async let first = hasher.hash("one password")
        async let second = hasher.hash("two password")
        try await Task.sleep(for: .milliseconds(20))
        await #expect(throws: PasswordHasher.Busy.self) { try await hasher.hash("three password") }
        let (a, b) = try await (first, second)
        #expect(a.hasPrefix("$noted1$") && b.hasPrefix("$noted1$") && a != b)
        #expect(try await hasher.verify("one password", hash: a) == (true, false))
        #expect(try await hasher.verify("two password", hash: a) == (false, false))
    }
}
