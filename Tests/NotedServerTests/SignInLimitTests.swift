import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

/// Sign-in limits that stop guessing without locking people out (issue 14): only failures
/// count, a trusted proxy's `X-Forwarded-For` is believed and no one else's, IPv6 counts by
/// /64, and the limiter's memory is bounded.
@Suite struct SignInLimitTests {
    static let backends = Backend.available

    func signIn(_ server: TestServer, _ name: String, _ password: String, from address: String? = nil) async throws
        -> HTTPResponse.Status
    {
        var headers: HTTPFields = [:]
        if let address { headers[HTTPField.Name("X-Forwarded-For")!] = address }
        return try await server.request(
            .post, "/v1/sessions", json: ["username": .string(name), "password": .string(password)], headers: headers
        ).status
    }

    @Test(arguments: backends) func onlyFailedSignInsCount(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.authAttemptsPerWindow = 3 }) { server in
            let user = try await server.makeUser()
            for _ in 0..<6 {
                #expect(
                    try await signIn(server, user.username, user.password) == .ok, "signing in often is not guessing")
            }
            for _ in 0..<3 {
                #expect(try await signIn(server, user.username, "wrong password") == .unauthorized)
            }
            #expect(try await signIn(server, user.username, user.password) == .tooManyRequests, "after three failures")
            #expect(try await signIn(server, String(repeating: "u", count: 100_000), "wrong password") == .unauthorized)
        }
    }

    @Test func aTrustedProxysForwardedAddressIsBelievedAndNoOneElses() async throws {
        let proxy = try #require(ClientAddresses.Range("127.0.0.1/32"))
        try await TestServer.with(
            .sqlite,
            configure: {
                $0.authAttemptsPerWindow = 2
                $0.trustedProxies = [proxy]
            }
        ) { (server: TestServer) async throws in
            #expect(try await signIn(server, "a", "wrong password", from: "203.0.113.5") == .unauthorized)
            #expect(try await signIn(server, "b", "wrong password", from: "203.0.113.5") == .unauthorized)
            #expect(try await signIn(server, "c", "wrong password", from: "203.0.113.5") == .tooManyRequests)
            // Someone else behind the same proxy is not locked out with them.
            #expect(try await signIn(server, "d", "wrong password", from: "198.51.100.7, 203.0.113.6") == .unauthorized)
        }
        try await TestServer.with(.sqlite, configure: { $0.authAttemptsPerWindow = 2 }) {
            (server: TestServer) async throws in
            // Without the setting, the header is anyone's to write, and ignored.
            #expect(try await signIn(server, "a", "wrong password", from: "203.0.113.5") == .unauthorized)
            #expect(try await signIn(server, "b", "wrong password", from: "203.0.113.6") == .unauthorized)
            #expect(try await signIn(server, "c", "wrong password", from: "203.0.113.7") == .tooManyRequests)
        }
    }

    @Test func addressesAreGroupedAndRangesMatch() throws {
        #expect(ClientAddresses.group("2001:db8:1:2:3:4:5:6") == ClientAddresses.group("2001:db8:1:2::9"))
        #expect(ClientAddresses.group("2001:db8:1:2:3:4:5:6") != ClientAddresses.group("2001:db8:1:3::9"))
        #expect(ClientAddresses.group("192.0.2.7") == "192.0.2.7")
        #expect(ClientAddresses.group("::ffff:192.0.2.7") == "192.0.2.7")
        let addresses = ClientAddresses(trustedProxies: [
            try #require(.init("127.0.0.1")), try #require(.init("10.0.0.0/8")),
        ])
        #expect(addresses.key(peer: "127.0.0.1", forwardedFor: "198.51.100.7, 10.1.2.3") == "198.51.100.7")
        #expect(addresses.key(peer: "192.0.2.1", forwardedFor: "198.51.100.7") == "192.0.2.1", "not a trusted peer")
        #expect(addresses.key(peer: "127.0.0.1", forwardedFor: "not an address") == "127.0.0.1")
        #expect(ClientAddresses.Range("10.0.0.0/33") == nil && ClientAddresses.Range("nonsense") == nil)
    }

    /// Attempts under way count with the failures (security-3 M1): with a limit of 3, a fourth
    /// attempt while three are being judged is refused; a success gives its place back, a
    /// failure keeps it, and three failures lock the key out as before.
    @Test func attemptsUnderWayCountAgainstTheLimit() throws {
        let limiter = RateLimiter(limit: 3, window: 60, backoff: true, maxLockout: 600)
        let start = Date(timeIntervalSince1970: 1_000_000)
        let keys = ["signin-user:a", "signin-address:1"]
        let held = try (0..<3).map { _ in try limiter.reserve(keys: keys, now: start) }
        #expect(throws: AuthError.self) { _ = try limiter.reserve(keys: keys, now: start) }
        #expect(throws: AuthError.self) {
            _ = try limiter.reserve(keys: ["signin-user:b", "signin-address:1"], now: start)
        }
        // Another user from another address is not held back.
        _ = try limiter.reserve(keys: ["signin-user:c", "signin-address:2"], now: start).succeeded(now: start)
        held[0].succeeded(now: start)
        let again = try limiter.reserve(keys: keys, now: start)
        again.failed(now: start)
        held[1].failed(now: start)
        // Two failures and one under way: full.
        #expect(throws: AuthError.self) { _ = try limiter.reserve(keys: keys, now: start) }
        held[2].failed(now: start)
        // Three failures: locked out for a window, whatever is under way.
        #expect(throws: AuthError.self) { _ = try limiter.reserve(keys: keys, now: start.addingTimeInterval(30)) }
        _ = try limiter.reserve(keys: keys, now: start.addingTimeInterval(61)).succeeded(
            now: start.addingTimeInterval(61))
    }

    @Test func eachLockoutOfTheSameKeyDoublesUpToTheMaximumAndIsForgottenAfterAQuietMaximum() throws {
        let limiter = RateLimiter(limit: 3, window: 60, backoff: true, maxLockout: 600)
        let key = ["signin-user:ada"]
        func retryAfter(_ now: Date) -> Int? {
            do {
                try limiter.reserve(keys: key, now: now).succeeded(now: now)
                return nil
            } catch {
                if case .rateLimited(let seconds) = error.kind { return seconds }
                return -1
            }
        }
        var now = Date(timeIntervalSince1970: 1_000_000)
        var lockouts: [Int] = []
        for _ in 0..<6 {
            for _ in 0..<3 { try limiter.reserve(keys: key, now: now).failed(now: now) }
            let retry = try #require(retryAfter(now.addingTimeInterval(1)))
            lockouts.append(retry + 1)
            // Locked until then, and free again right after.
            #expect(retryAfter(now.addingTimeInterval(Double(retry))) != nil)
            now = now.addingTimeInterval(Double(retry + 1))
            #expect(retryAfter(now) == nil)
        }
        #expect(lockouts == [60, 120, 240, 480, 600, 600])
        // Remembered (and not swept) for a quiet maximum after the last lockout, then forgotten.
        #expect(limiter.keyCount == 1)
        now = now.addingTimeInterval(601)
        #expect(retryAfter(now) == nil)
        #expect(limiter.keyCount == 0)
        for _ in 0..<3 { try limiter.reserve(keys: key, now: now).failed(now: now) }
        #expect(retryAfter(now.addingTimeInterval(1)) == 59, "a first lockout again")
    }

    @Test func theLimitersMemoryIsBoundedAndSwept() {
        let limiter = RateLimiter(limit: 3, window: 60)
        let start = Date()
        for index in 0..<1_000 {
            try? limiter.reserve(
                keys: ["signin-user:" + String(repeating: "x", count: 10_000) + "\(index)"], now: start
            ).failed(now: start)
        }
        #expect(limiter.keyCount == 1_000)
        try? limiter.reserve(keys: ["signin-user:someone"], now: start.addingTimeInterval(61)).succeeded(
            now: start.addingTimeInterval(61))
        #expect(limiter.keyCount == 0, "windows that ended are swept")
    }
}
