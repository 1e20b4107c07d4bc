import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

@Suite struct SessionTests {
    static let backends = Backend.available

    @Test(arguments: backends) func welcomeAdvertisesEveryLimitAndTheUsersSeq(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect()
            try await connection.send([
                "type": "hello", "protocol": 1, "token": .string(user.accessToken), "device": .string(uuid()), "rid": 7,
            ])
            let welcome = try await connection.receive()
            #expect(welcome["type"] == "welcome")
            #expect(welcome["protocol"] == 1)
            #expect(welcome["user"] == .string(user.id))
            #expect(welcome["seq"] == 0)
            #expect(welcome["rid"] == 7)
            #expect(welcome["expiresAt"]?.stringValue?.hasSuffix("Z") == true)
            let limits = try #require(welcome["limits"]?.objectValue)
            for key in ["maxMessageBytes", "maxChangesPerPush", "maxTextLength", "maxTags"] {
                #expect(limits[key]?.intValue != nil, "limit \(key) missing")
            }
            await connection.close()
        }
    }

    @Test(arguments: backends) func permessageDeflateIsAcceptedWhenOffered(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await SyncConnection.open(port: server.port, deflate: true)
            try await connection.send(["type": "hello", "protocol": 1, "token": .string(user.accessToken)])
            #expect(try await connection.receive()["type"] == "welcome")
            let body = String(repeating: "compressible text ", count: 200)
            #expect(
                try await connection.push(change(uuid(), baseRev: 0, ["body": ["set": .string(body)]]))["status"]
                    == "applied")
            let page = try await connection.pull(since: 0)
            #expect(page["records"]?.arrayValue?.first?["fields"]?["body"] == .string(body))
            // A page over 16 KiB goes through a compressor of its own (PerMessageDeflate.swift);
            // the small messages after it through the session's, started over.
            var bodies: [String: JSONValue] = [:]
            // (15 pushes: the limit is 20 a second per connection.)
            for index in 0..<15 {
                let id = uuid()
                let text = "note \(index): " + (0..<200).map { "word\(($0 * 7 + index) % 50)" }.joined(separator: " ")
                bodies[id] = .string(text)
                #expect(
                    try await connection.push(change(id, baseRev: 0, ["body": ["set": .string(text)]]))["status"]
                        == "applied")
            }
            let large = try await connection.pull(since: 0)
            let records = try #require(large["records"]?.arrayValue)
            #expect(records.count == 16)
            for record in records where record["id"]?.stringValue.flatMap({ bodies[$0] }) != nil {
                #expect(record["fields"]?["body"] == bodies[record["id"]!.stringValue!])
            }
            #expect(
                try await connection.push(change(uuid(), baseRev: 0, ["body": ["set": .string(body)]]))["status"]
                    == "applied")
            #expect(try await connection.pull(since: 0)["records"]?.arrayValue?.count == 17)
            // Quiet for longer than the server's streams are kept (1 to 2 s, QuietStreams): both
            // sides' next messages refer to what came before, which the server now holds only
            // as its streams' windows.
            try await Task.sleep(for: .milliseconds(2_500))
            #expect(
                try await connection.push(change(uuid(), baseRev: 0, ["body": ["set": .string(body)]]))["status"]
                    == "applied")
            #expect(
                try await connection.push(change(uuid(), baseRev: 0, ["body": ["set": .string(body)]]))["status"]
                    == "applied")
            #expect(try await connection.pull(since: 0)["records"]?.arrayValue?.count == 19)
            await connection.close()
        }
    }

    @Test(arguments: backends) func tokenInTheAuthorizationHeaderAuthenticatesHello(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(headers: [.authorization: "Bearer \(user.accessToken)"])
            try await connection.send(["type": "hello", "protocol": 1])
            #expect(try await connection.receive()["type"] == "welcome")
            await connection.close()
        }
    }

    @Test(arguments: backends) func noHelloWithinTheDeadlineCloses4001(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.helloTimeout = .seconds(1) }) { server in
            let connection = try await server.connect()
            let error = try await connection.receive()
            #expect(error["type"] == "error")
            #expect(error["code"] == "unauthenticated")
            #expect(try await connection.closeCode() == 4001)
        }
    }

    @Test(arguments: backends) func aMessageBeforeHelloIsAnErrorAndNothingElse(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let connection = try await server.connect()
            try await connection.send(["type": "pull", "since": 0, "rid": "a"])
            let error = try await connection.receive()
            #expect(error["code"] == "unauthenticated")
            #expect(error["rid"] == "a")
            let user = try await server.makeUser()
            try await connection.send(["type": "hello", "protocol": 1, "token": .string(user.accessToken)])
            #expect(try await connection.receive()["type"] == "welcome")
            await connection.close()
        }
    }

    @Test(arguments: backends) func anInvalidTokenInHelloCloses4001(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let connection = try await server.connect()
            try await connection.send(["type": "hello", "protocol": 1, "token": "not-a-token"])
            #expect(try await connection.receive()["code"] == "unauthenticated")
            #expect(try await connection.closeCode() == 4001)
        }
    }

    @Test(arguments: backends) func tokenExpiryClosesTheSession(backend: Backend) async throws {
        let clock = ManualClock()
        try await TestServer.with(backend, clock: clock, configure: { $0.accessTokenLifetime = .seconds(5) }) {
            server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            // Still open 4 s in: a pull is answered.
            clock.advance(by: .seconds(4))
            try await connection.send(["type": "pull", "since": 0])
            #expect(try await connection.receive()["type"] == "changes")
            // Past the 5 s expiry, before the 15 s hello deadline the session's timer was armed
            // with first: closed as expired.
            clock.advance(by: .seconds(2))
            let error = try await connection.receive()
            #expect(error["type"] == "error")
            #expect(error["code"] == "token_expired")
            #expect(try await connection.closeCode() == 4001)
        }
    }

    @Test(arguments: backends) func reauthBeforeExpiryKeepsTheSession(backend: Backend) async throws {
        // On a clock of the test's: the tokens expire, and the session's deadline comes, when
        // the test moves time on (before, this test waited 20 s of real time).
        let clock = ManualClock()
        try await TestServer.with(backend, clock: clock, configure: { $0.accessTokenLifetime = .seconds(20) }) {
            server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            // Beside it, a session of the same token that does not reauthenticate.
            let unrenewed = try await server.connect(user)
            clock.advance(by: .seconds(1))
            let fresh = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            let token = try #require(fresh.json["access_token"]?.stringValue)
            try await connection.send(["type": "reauth", "token": .string(token), "rid": 1])
            let welcome = try await connection.receive()
            #expect(welcome["type"] == "welcome")
            #expect(welcome["rid"] == 1)
            // Past the first token's expiry the session still answers.
            let payload = try #require(Data(base64URLEncoded: String(user.accessToken.split(separator: ".")[1])))
            let firstExpiry = try #require(try JSONValue.parse(Array(payload))["exp"]?.intValue)
            clock.advance(by: .seconds(Double(firstExpiry) + 0.5 - clock.now.timeIntervalSince1970))
            try await connection.send(["type": "pull", "since": 0])
            #expect(try await connection.receive()["type"] == "changes")
            #expect(try await unrenewed.receive(type: "error")["code"] == "token_expired")
            #expect(try await unrenewed.closeCode() == 4001)
            await connection.close()
        }
    }

    @Test(arguments: backends) func aBrowserOriginThatIsNotAllowedGets403BeforeTheUpgrade(backend: Backend) async throws
    {
        try await TestServer.with(backend, configure: { $0.allowedOrigins = ["https://app.example"] }) { server in
            let refused = try await server.request(
                .get, "/v1/sync",
                headers: [
                    .origin: "https://evil.example", .connection: "Upgrade", .upgrade: "websocket",
                    .secWebSocketVersion: "13", .secWebSocketKey: "dGhlIHNhbXBsZSBub25jZQ==",
                ])
            #expect(refused.status == .forbidden)
            await #expect(throws: (any Error).self) {
                _ = try await server.connect(headers: [.origin: "https://evil.example"])
            }
            let allowed = try await server.connect(headers: [.origin: "https://app.example"])
            await allowed.close()
            let native = try await server.connect()
            await native.close()
        }
    }
}
