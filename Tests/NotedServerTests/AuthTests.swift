import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

@Suite struct AuthTests {
    static let backends = Backend.available

    @Test(arguments: backends) func registrationValidatesAndRefusesTakenNamesWithoutCase(backend: Backend) async throws
    {
        try await TestServer.with(backend) { server in
            let ok = try await server.request(
                .post, "/v1/accounts", json: ["username": "Ann.B_c-d@x", "password": "a fine passphrase"])
            #expect(ok.status == .created)
            #expect(ok.json["user"]?["username"] == "Ann.B_c-d@x")
            let taken = try await server.request(
                .post, "/v1/accounts", json: ["username": "ANN.b_C-D@X", "password": "a fine passphrase"])
            #expect(taken.status == .conflict)
            for (name, password) in [
                ("", "12345678"), ("has space", "12345678"), (String(repeating: "a", count: 65), "12345678"),
                ("semi;colon", "12345678"), ("short", "1234567"), ("long", String(repeating: "p", count: 1025)),
            ] {
                let bad = try await server.request(
                    .post, "/v1/accounts", json: ["username": .string(name), "password": .string(password)])
                #expect(bad.status == .badRequest, "\(name) / \(password.count)")
                #expect(bad.json["error"]?.stringValue != nil && bad.json["message"]?.stringValue != nil)
            }
            let wrongTypes = try await server.request(.post, "/v1/accounts", json: ["username": 5, "password": true])
            #expect(wrongTypes.status == .badRequest)
        }
    }

    /// One of the 10,000 most common passwords, in any case, is refused, saying why; so is a
    /// password change to one.
    @Test func commonPasswordsAreRefused() async throws {
        #expect(PasswordRules.common.count == 10_000)
        #expect(PasswordRules.problem("a fine passphrase") == nil)
        try await TestServer.with(.sqlite) { server in
            for common in ["password1", "QWERTYUIOP", "iloveyou1"] {
                let refused = try await server.request(
                    .post, "/v1/accounts", json: ["username": "common-user", "password": .string(common)])
                #expect(refused.status == .badRequest, "\(common)")
                #expect(refused.json["message"]?.stringValue?.contains("most common") == true, "\(refused.json)")
            }
            let user = try await server.makeUser()
            let change = try await server.request(
                .post, "/v1/account/password",
                json: ["current_password": .string(user.password), "new_password": "Password123"],
                token: user.accessToken)
            #expect(change.status == .badRequest)
            #expect(change.json["message"]?.stringValue?.contains("most common") == true)
        }
    }

    @Test(arguments: backends) func registrationCanBeSwitchedOff(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.registrationOpen = false }) { server in
            let response = try await server.request(
                .post, "/v1/accounts", json: ["username": "ann", "password": "a fine passphrase"])
            #expect(response.status == .forbidden)
        }
    }

    @Test(arguments: backends) func wrongPasswordAndUnknownUserGetTheSameAnswer(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let wrong = try await server.request(
                .post, "/v1/sessions", json: ["username": .string(user.username), "password": "wrong password"])
            let unknown = try await server.request(
                .post, "/v1/sessions", json: ["username": "nobody-here", "password": "wrong password"])
            #expect(wrong.status == .unauthorized)
            #expect(unknown.status == .unauthorized)
            #expect(wrong.json == unknown.json)
            let upper = try await server.request(
                .post, "/v1/sessions",
                json: ["username": .string(user.username.uppercased()), "password": .string(user.password)])
            #expect(upper.status == .ok)
        }
    }

    @Test(arguments: backends) func accessTokensAreES256JWTsListedInJWKS(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let parts = user.accessToken.split(separator: ".").map(String.init)
            #expect(parts.count == 3)
            let header = try JSONValue.parse(Array(try #require(Data(base64URLEncoded: parts[0]))))
            let claims = try JSONValue.parse(Array(try #require(Data(base64URLEncoded: parts[1]))))
            #expect(header["typ"] == "at+jwt")
            #expect(header["alg"] == "ES256")
            #expect(claims["sub"] == .string(user.id))
            for claim in ["iss", "aud", "exp", "iat", "jti", "client_id"] {
                #expect(claims[claim] != nil, "claim \(claim) missing")
            }
            let exp = try #require(claims["exp"]?.intValue)
            let iat = try #require(claims["iat"]?.intValue)
            #expect(exp - iat == 15 * 60)
            let jwks = try await server.request(.get, "/.well-known/jwks.json")
            let keys = try #require(jwks.json["keys"]?.arrayValue)
            #expect(keys.contains { $0["kid"] == header["kid"] && $0["kty"] == "EC" && $0["crv"] == "P-256" })
            #expect(keys.allSatisfy { $0["d"] == nil })
        }
    }

    @Test(arguments: backends) func refreshRotatesAndReuseRevokesTheFamily(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let first = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(first.status == .ok)
            #expect(first.json["token_type"] == "Bearer")
            #expect(first.json["expires_in"] == 900)
            let rotated = try #require(first.json["refresh_token"]?.stringValue)
            #expect(rotated != user.refreshToken)
            let newAccess = try #require(first.json["access_token"]?.stringValue)
            #expect(try await server.request(.get, "/v1/changes?since=0", token: newAccess).status == .ok)
            // Presenting the rotated-out token again revokes the family: the newest token dies too.
            let reuse = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(reuse.status == .badRequest)
            #expect(reuse.json["error"] == "invalid_grant")
            let afterRevoke = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(rotated)")
            #expect(afterRevoke.json["error"] == "invalid_grant")
            let unsupported = try await server.request(.post, "/oauth/token", body: "grant_type=password&username=a")
            #expect(unsupported.json["error"] == "unsupported_grant_type")
            let missing = try await server.request(.post, "/oauth/token", body: "grant_type=refresh_token")
            #expect(missing.json["error"] == "invalid_request")
        }
    }

    @Test(arguments: backends) func signInIsRateLimitedPerUsername(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.authAttemptsPerWindow = 3 }) { server in
            var last: TestServer.HTTPResult?
            for _ in 0..<4 {
                last = try await server.request(
                    .post, "/v1/sessions", json: ["username": "target", "password": "guess guess"])
            }
            #expect(last?.status == .tooManyRequests)
            #expect(last?.headers[.retryAfter] != nil)
        }
    }

    @Test(arguments: backends) func aTokenFromAnotherServerIsRefused(backend: Backend) async throws {
        try await TestServer.with(backend) { (first: TestServer) async throws in
            let token = try await first.makeUser().accessToken
            try await TestServer.with(backend) { (second: TestServer) async throws in
                #expect(try await second.request(.get, "/v1/changes?since=0", token: token).status == .unauthorized)
            }
        }
    }
}
