import Foundation
import NotedCore
import Testing

@testable import NotedServer

/// `noted-server keys rotate`: a new signing key, old ones verifying until their tokens expired.
@Suite struct KeyRotationTests {
    static let backends = Backend.available

    static func kid(of token: String) throws -> String? {
        let header = try #require(AccessTokens.json(token.split(separator: ".")[0]))
        return header["kid"]?.stringValue
    }

    @Test(arguments: backends)
    func rotationSignsWithANewKidAndDropsTheOldKeyOnlyAfterItsTokensExpired(backend: Backend) async throws {
        try await withStore(backend) { store in
            let lifetime = Duration.seconds(600)
            let tokens = try await AccessTokens.load(
                store: store, issuer: "https://noted.test", audience: "noted", lifetime: lifetime)
            let old = try await tokens.issue(userID: "u1", clientID: "noted")
            let oldKid = try #require(try Self.kid(of: old.token))

            let now = Date()
            let rotated = try await AccessTokens.rotate(store: store, lifetime: lifetime, now: now)
            #expect(rotated.kid != oldKid && rotated.dropped.isEmpty)
            // A running server picks the new key up on reload; the old token still verifies.
            try await tokens.reload(store: store)
            let new = try await tokens.issue(userID: "u1", clientID: "noted")
            #expect(try Self.kid(of: new.token) == rotated.kid)
            #expect(try await tokens.verify(old.token).userID == "u1")
            let listed = tokens.jwks["keys"]?.arrayValue?.compactMap { $0["kid"]?.stringValue } ?? []
            #expect(Set(listed) == [oldKid, rotated.kid])

            // Just before every token of the old key can have expired it stays…
            let grace = AccessTokens.reloadInterval.timeInterval + lifetime.timeInterval + 60
            #expect(
                AccessTokens.retired(
                    try await store.signingKeys(), lifetime: lifetime, now: now.addingTimeInterval(grace - 1)
                ).isEmpty)
            // …then the next rotation drops it, and keeps the one it replaces.
            let later = try await AccessTokens.rotate(
                store: store, lifetime: lifetime, now: now.addingTimeInterval(grace + 1))
            #expect(later.dropped == [oldKid])
            #expect(Set(try await store.signingKeys().map(\.kid)) == [rotated.kid, later.kid])
        }
    }

    @Test func retiredKeysAreThoseWhoseSuccessorIsOlderThanTheGrace() {
        let start = Date(timeIntervalSince1970: 1_000_000)
        let records = (0..<3).map {
            SigningKeyRecord(kid: "k\($0)", privateKeyPEM: "", createdAt: start.addingTimeInterval(Double($0) * 1000))
        }
        let lifetime = Duration.seconds(100)
        // grace = 60 + 100 + 60 = 220 s after the successor's creation.
        #expect(AccessTokens.retired(records, lifetime: lifetime, now: start.addingTimeInterval(1000 + 220)).isEmpty)
        #expect(AccessTokens.retired(records, lifetime: lifetime, now: start.addingTimeInterval(1000 + 221)) == ["k0"])
        #expect(
            AccessTokens.retired(records, lifetime: lifetime, now: start.addingTimeInterval(2000 + 221)) == [
                "k0", "k1",
            ])
    }
}
