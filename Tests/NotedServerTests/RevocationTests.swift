import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

/// Revocation takes effect at once (issue 14): a revoked sign-in session's access tokens are
/// refused and its open sync sessions closed, on every node, while the user's other sessions
/// go on.
@Suite struct RevocationTests {
    static let backends = Backend.available

    /// A second sign-in of the same user: another refresh-token family.
    func signInAgain(_ server: TestServer, _ user: TestServer.User) async throws -> TestServer.User {
        try await server.signIn(user)
    }

    func changes(_ server: TestServer, _ user: TestServer.User) async throws -> HTTPResponse.Status {
        try await server.request(.get, "/v1/changes?since=0", token: user.accessToken).status
    }

    /// The connection gets the error, then close 4001, within `limit`.
    func expectClosedAsRevoked(_ connection: SyncConnection, within limit: Duration = .seconds(1)) async throws {
        let started = ContinuousClock.now
        let error = try await connection.receive(timeout: limit)
        #expect(error["type"] == "error" && error["code"] == "unauthenticated")
        #expect(error["message"]?.stringValue?.contains("revoked") == true)
        #expect(try await connection.closeCode(timeout: limit) == 4001)
        #expect(ContinuousClock.now - started < limit)
    }

    @Test(arguments: backends) func revokingARefreshTokenEndsItsAccessTokensAndConnectionsAtOnce(backend: Backend)
        async throws
    {
        try await TestServer.with(backend) { server in
            let phone = try await server.makeUser()
            let laptop = try await signInAgain(server, phone)
            let phoneConnection = try await server.connect(phone)
            let laptopConnection = try await server.connect(laptop)
            #expect(try await changes(server, phone) == .ok)

            let revoked = try await server.request(.post, "/oauth/revoke", body: "token=\(phone.refreshToken)")
            #expect(revoked.status == .ok)
            try await expectClosedAsRevoked(phoneConnection)
            #expect(try await changes(server, phone) == .unauthorized)
            let again = try await SyncConnection.open(port: server.port)
            try await again.send([
                "type": "hello", "protocol": 1, "token": .string(phone.accessToken), "device": .string(uuid()),
            ])
            let refused = try await again.receive()
            #expect(refused["code"] == "unauthenticated")
            #expect(try await again.closeCode(timeout: .seconds(2)) == 4001)

            // The other sign-in goes on.
            #expect(try await changes(server, laptop) == .ok)
            try await laptopConnection.send(["type": "pull", "since": 0, "rid": 7])
            #expect(try await laptopConnection.receive()["type"] == "changes")
            await laptopConnection.close()
        }
    }

    @Test(arguments: backends) func aReusedRefreshTokenEndsTheSessionsAccessTokens(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let rotated = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(rotated.status == .ok)
            var current = user
            current.accessToken = rotated.json["access_token"]?.stringValue ?? ""
            let connection = try await server.connect(current)
            // The old refresh token again: a thief or a replay. The whole family ends.
            let reused = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(reused.json["error"] == "invalid_grant")
            try await expectClosedAsRevoked(connection)
            #expect(try await changes(server, current) == .unauthorized)
            #expect(try await changes(server, user) == .unauthorized)
        }
    }

    @Test(arguments: backends) func aRefreshTokenPresentedByAnotherClientEndsTheSession(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()  // signed in by the first-party client, "noted"
            let own = try await server.request(
                .post, "/oauth/token",
                body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)&client_id=noted")
            #expect(own.status == .ok)
            var current = user
            current.accessToken = own.json["access_token"]?.stringValue ?? ""
            let next = own.json["refresh_token"]?.stringValue ?? ""
            let stolen = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(next)&client_id=noted-web")
            #expect(stolen.json["error"] == "invalid_grant")
            #expect(try await changes(server, current) == .unauthorized, "the session is revoked")
        }
    }

    @Test func aRevocationOnOneNodeReachesTheOtherWithinASecond() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await TestServer.withTwoNodes(.postgres) { first, second in
            let user = try await first.makeUser()
            let onSecond = try await second.connect(user)
            #expect(try await changes(second, user) == .ok)
            let revoked = try await first.request(.post, "/oauth/revoke", body: "token=\(user.refreshToken)")
            #expect(revoked.status == .ok)
            try await expectClosedAsRevoked(onSecond)
            #expect(try await changes(second, user) == .unauthorized)
        }
    }

    @Test func theSetForgetsWhatNoTokenCanStillNameAndTellsObserversOnce() {
        let set = RevokedSessions(keep: 60)
        let heard = NIOLockedBox<[String]>([])
        set.onRevoke { id in heard.withLock { $0.append(id) } }
        let start = Date()
        set.insert("a", now: start)
        set.insert("a", now: start.addingTimeInterval(1))
        #expect(set.contains("a"))
        set.insert("b", now: start.addingTimeInterval(61))
        #expect(!set.contains("a") && set.contains("b"))
        #expect(set.count == 1)
        #expect(heard.withLock { $0 } == ["a", "b"])
    }
}

/// A value behind a lock, for the test's observer.
final class NIOLockedBox<T: Sendable>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func withLock<R>(_ body: (inout T) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
