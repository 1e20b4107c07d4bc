import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

/// The authorization code flow with PKCE, its refusals, and revocation, against a live server.
@Suite struct OAuthTests {
    static let backends = Backend.available
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    static let redirect = "http://127.0.0.1:4711/callback"

    @Test func pkceMatchesTheRFC7636AppendixBVector() {
        #expect(PKCE.challenge(for: Self.verifier) == Self.challenge)
        #expect(PKCE.verify(Self.verifier, challenge: Self.challenge))
        #expect(!PKCE.verify(String(Self.verifier.dropLast()) + "l", challenge: Self.challenge))
    }

    @Test(arguments: [
        (String(repeating: "a", count: 42), false), (String(repeating: "a", count: 43), true),
        (String(repeating: "a", count: 128), true), (String(repeating: "a", count: 129), false),
        (String(repeating: "a", count: 42) + "+", false), (String(repeating: "a", count: 42) + " ", false),
        (String(repeating: "a", count: 42) + "é", false), ("-._~" + String(repeating: "Z9", count: 20), true),
    ])
    func verifiersAre43To128UnreservedCharacters(verifier: String, valid: Bool) {
        #expect(PKCE.isValidVerifier(verifier) == valid)
    }

    @Test(arguments: [
        ("http://127.0.0.1:4711/callback", true), ("http://127.0.0.1/callback", true),
        ("http://127.0.0.1:1/callback", true),
        ("http://[::1]:65535/callback", true), ("http://127.0.0.1:65536/callback", false),
        ("http://127.0.0.1:0/callback", false),
        ("http://127.0.0.1:04711/callback", false), ("http://127.0.0.1:4711/callback/", false),
        ("http://127.0.0.1:4711/Callback", false),
        ("HTTP://127.0.0.1:4711/callback", false), ("http://127.0.0.1:4711/callback?x=1", false),
        ("http://localhost:4711/callback", false),
        ("http://127.0.0.1:4711@evil.example/callback", false), ("http://127.0.0.1:4711/callback#f", false),
        ("https://127.0.0.1:4711/callback", false),
    ])
    func loopbackRedirectsMatchAnyPortButNothingElse(uri: String, allowed: Bool) {
        #expect(OAuthClient.cli.allows(redirectURI: uri) == allowed)
    }

    // MARK: Flow

    struct Authorization {
        var location: String
        var code: String?
        var state: String?
        var error: String?
    }

    static func query(_ parameters: [(String, String)]) -> String {
        parameters.map { "\($0.0)=\(AuthorizationServer.formEncode($0.1))" }.joined(separator: "&")
    }

    static func authorizeParameters(
        client: String = "noted-cli", redirect: String = redirect, challenge: String = challenge,
        method: String? = "S256", state: String = "xyz"
    ) -> [(String, String)] {
        var parameters = [
            ("response_type", "code"), ("client_id", client), ("redirect_uri", redirect),
            ("code_challenge", challenge), ("state", state),
        ]
        if let method { parameters.append(("code_challenge_method", method)) }
        return parameters
    }

    /// Opens the sign-in page and posts the form as a browser would.
    static func signIn(
        _ server: TestServer, _ user: TestServer.User, parameters: [(String, String)] = authorizeParameters(),
        password: String? = nil
    ) async throws -> (status: HTTPResponse.Status, authorization: Authorization?) {
        let page = try await server.request(.get, "/oauth/authorize?" + query(parameters))
        guard page.status == .ok else {
            return (page.status, page.headers[.location].map { parse($0) })
        }
        let cookie = try #require(page.headers[.setCookie]?.split(separator: ";").first.map(String.init))
        let csrf = String(cookie.split(separator: "=", maxSplits: 1)[1])
        #expect(page.headers[.contentSecurityPolicy] != nil)
        var headers = HTTPFields()
        headers[.cookie] = cookie
        let form = parameters + [("csrf", csrf), ("username", user.username), ("password", password ?? user.password)]
        let posted = try await server.request(.post, "/oauth/authorize", body: query(form), headers: headers)
        return (posted.status, posted.headers[.location].map { parse($0) })
    }

    static func parse(_ location: String) -> Authorization {
        let items = URLComponents(string: location)?.queryItems ?? []
        func item(_ name: String) -> String? { items.first { $0.name == name }?.value }
        return Authorization(location: location, code: item("code"), state: item("state"), error: item("error"))
    }

    static func exchange(
        _ server: TestServer, code: String, verifier: String? = verifier, client: String = "noted-cli",
        redirect: String = redirect
    ) async throws -> TestServer.HTTPResult {
        var form = [
            ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect), ("client_id", client),
        ]
        if let verifier { form.append(("code_verifier", verifier)) }
        return try await server.request(.post, "/oauth/token", body: query(form))
    }

    @Test func overHTTPSTheCSRFCookieIsSecureWithTheHostPrefix() async throws {
        try await TestServer.with(.sqlite, configure: { $0.issuer = "https://notes.test" }) { server in
            let page = try await server.request(.get, "/oauth/authorize?" + Self.query(Self.authorizeParameters()))
            let cookie = try #require(page.headers[.setCookie])
            #expect(
                cookie.hasPrefix("__Host-noted_csrf=") && cookie.contains("; Secure") && cookie.contains("Path=/;"),
                "\(cookie)")
            // The flow goes on with it; the plain name no longer counts.
            let user = try await server.makeUser()
            let (status, authorization) = try await Self.signIn(server, user)
            #expect(status == .seeOther && authorization?.code != nil)
            let csrf = String(cookie.split(separator: ";")[0].split(separator: "=", maxSplits: 1)[1])
            var headers = HTTPFields()
            headers[.cookie] = "noted_csrf=\(csrf)"
            let form =
                Self.authorizeParameters() + [("csrf", csrf), ("username", user.username), ("password", user.password)]
            #expect(
                try await server.request(.post, "/oauth/authorize", body: Self.query(form), headers: headers).status
                    == .badRequest)
        }
    }

    @Test(arguments: backends) func codeFlowWithPKCEIssuesTokensThatWorkAndRotate(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let (status, authorization) = try await Self.signIn(server, user)
            #expect(status == .seeOther)
            let code = try #require(authorization?.code)
            #expect(authorization?.state == "xyz")
            #expect(authorization?.location.hasPrefix(Self.redirect + "?") == true)
            let tokens = try await Self.exchange(server, code: code)
            #expect(tokens.status == .ok)
            #expect(tokens.json["token_type"] == "Bearer")
            let access = try #require(tokens.json["access_token"]?.stringValue)
            let refresh = try #require(tokens.json["refresh_token"]?.stringValue)
            let feed = try await server.request(.get, "/v1/changes?since=0", token: access)
            #expect(feed.status == .ok)
            let claims = try JSONValue.parse(
                Array(try #require(Data(base64URLEncoded: String(access.split(separator: ".")[1])))))
            #expect(claims["client_id"] == "noted-cli")
            #expect(claims["sub"] == .string(user.id))
            let refreshed = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(refresh)")
            #expect(refreshed.status == .ok)
        }
    }

    @Test(arguments: backends) func aWrongPasswordShowsThePageAgain(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let (status, authorization) = try await Self.signIn(server, user, password: "not the password")
            #expect(status == .unauthorized)
            #expect(authorization == nil)
        }
    }

    @Test(arguments: backends) func theFormNeedsItsCSRFToken(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let form =
                Self.authorizeParameters() + [
                    ("csrf", "forged"), ("username", user.username), ("password", user.password),
                ]
            var headers = HTTPFields()
            headers[.cookie] = "noted_csrf=other"
            let posted = try await server.request(.post, "/oauth/authorize", body: Self.query(form), headers: headers)
            #expect(posted.status == .badRequest)
            #expect(posted.headers[.location] == nil)
            let noCookie = try await server.request(.post, "/oauth/authorize", body: Self.query(form))
            #expect(noCookie.status == .badRequest)
        }
    }

    @Test(arguments: backends) func requestsWithoutS256PKCEAreRefused(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            for parameters in [
                Self.authorizeParameters(method: "plain"), Self.authorizeParameters(method: nil),
                Self.authorizeParameters(challenge: "short"), Self.authorizeParameters(challenge: ""),
            ] {
                let (status, authorization) = try await Self.signIn(server, user, parameters: parameters)
                #expect(status == .seeOther)
                #expect(authorization?.error == "invalid_request")
                #expect(authorization?.code == nil)
                #expect(authorization?.state == "xyz")
            }
        }
    }

    @Test(arguments: backends) func unregisteredClientsAndRedirectsGetAPageNotARedirect(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            for parameters in [
                Self.authorizeParameters(client: "nobody"), Self.authorizeParameters(redirect: Self.redirect + "/"),
                Self.authorizeParameters(redirect: "http://127.0.0.1:4711/CALLBACK"),
                Self.authorizeParameters(redirect: Self.redirect + "?extra=1"),
                Self.authorizeParameters(redirect: "https://evil.example/callback"),
            ] {
                let page = try await server.request(.get, "/oauth/authorize?" + Self.query(parameters))
                #expect(page.status == .badRequest)
                #expect(page.headers[.location] == nil)
            }
        }
    }

    @Test func theWebAppRedirectsOnlyToTheIssuerAndAllowedOriginsNeverToAHostHeader() {
        let web = OAuthClient.web(origins: ["http://127.0.0.1:8080", "https://notes.example"])
        for good in [
            "http://127.0.0.1:8080/", "http://localhost:8080/", "http://[::1]:8080/", "https://notes.example/",
        ] {
            #expect(web.allows(redirectURI: good), "\(good)")
        }
        for bad in [
            "http://evil.example/", "http://localhost:8081/", "http://notes.example/", "https://notes.example.evil/",
            "https://localhost:8080/", "http://127.0.0.1:8080/x", "http://0.0.0.0:8080/",
        ] {
            #expect(!web.allows(redirectURI: bad), "\(bad)")
        }
        // A server on port 0 (the system picks one): any loopback port.
        let anyPort = OAuthClient.web(origins: ["http://127.0.0.1:0"])
        #expect(
            anyPort.allows(redirectURI: "http://127.0.0.1:54321/") && anyPort.allows(redirectURI: "http://[::1]:54321/")
        )
        #expect(
            !anyPort.allows(redirectURI: "http://evil.example:54321/")
                && !anyPort.allows(redirectURI: "http://127.0.0.1:54321/x"))
        #expect(OAuthClient.loopbackAliases(of: "http://localhost:080").isEmpty)
        #expect(OAuthClient.loopbackAliases(of: "https://127.0.0.1:8080").isEmpty)
    }

    @Test func theWebAppAtAnOriginNobodyAllowedGetsAPageThatSaysSo() async throws {
        try await TestServer.with(.sqlite) { server in
            // (The request's Host is no input to this decision any more: `validate` takes none.)
            let parameters = Self.authorizeParameters(client: "noted-web", redirect: "http://evil.example/")
            let page = try await server.request(.get, "/oauth/authorize?" + Self.query(parameters))
            #expect(page.status == .badRequest)
            #expect(page.headers[.location] == nil)
            #expect(page.text.contains("--allowed-origin"), "\(page.text)")
        }
    }

    @Test(arguments: backends) func codeExchangeRefusals(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            func freshCode() async throws -> String {
                try #require(try await Self.signIn(server, user).authorization?.code)
            }
            let cases: [(String, (String) async throws -> TestServer.HTTPResult)] = [
                (
                    "wrong verifier",
                    { try await Self.exchange(server, code: $0, verifier: String(repeating: "a", count: 43)) }
                ),
                ("missing verifier", { try await Self.exchange(server, code: $0, verifier: nil) }),
                (
                    "42-character verifier",
                    { try await Self.exchange(server, code: $0, verifier: String(Self.verifier.dropLast())) }
                ),
                (
                    "129-character verifier",
                    { try await Self.exchange(server, code: $0, verifier: String(repeating: "a", count: 129)) }
                ),
                (
                    "illegal characters",
                    { try await Self.exchange(server, code: $0, verifier: String(Self.verifier.dropLast()) + "/") }
                ),
                ("another client", { try await Self.exchange(server, code: $0, client: "noted-web") }),
                (
                    "another redirect",
                    { try await Self.exchange(server, code: $0, redirect: "http://127.0.0.1:4712/callback") }
                ),
                ("trailing slash", { try await Self.exchange(server, code: $0, redirect: Self.redirect + "/") }),
            ]
            for (name, exchange) in cases {
                let code = try await freshCode()
                let response = try await exchange(code)
                #expect(response.status == .badRequest, "\(name)")
                let error = response.json["error"]?.stringValue
                #expect(error == "invalid_grant" || error == "invalid_request", "\(name): \(String(describing: error))")
                // A refused exchange uses the code up; a malformed request (invalid_request) does not.
                let retry = try await Self.exchange(server, code: code)
                #expect(retry.status == (error == "invalid_grant" ? .badRequest : .ok), "\(name) then the right one")
            }
            let unknownClient = try await Self.exchange(server, code: try await freshCode(), client: "nobody")
            #expect(unknownClient.status == .unauthorized)
            #expect(unknownClient.json["error"] == "invalid_client")
            let garbage = try await Self.exchange(server, code: "not-a-code")
            #expect(garbage.json["error"] == "invalid_grant")
        }
    }

    @Test(arguments: backends) func aReplayedCodeRevokesWhatTheFirstUseIssued(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let code = try #require(try await Self.signIn(server, user).authorization?.code)
            let first = try await Self.exchange(server, code: code)
            #expect(first.status == .ok)
            let refresh = try #require(first.json["refresh_token"]?.stringValue)
            let replay = try await Self.exchange(server, code: code)
            #expect(replay.status == .badRequest)
            #expect(replay.json["error"] == "invalid_grant")
            let afterReplay = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(refresh)")
            #expect(afterReplay.status == .badRequest)
            #expect(afterReplay.json["error"] == "invalid_grant")
        }
    }

    @Test(arguments: backends) func aCodeReplayedWhileItsFirstUseIsUnderWayStillRevokesWhatItIssued(backend: Backend)
        async throws
    {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            var survivors = 0
            for _ in 0..<8 {
                let code = try #require(try await Self.signIn(server, user).authorization?.code)
                // Both uses at once: whichever is second must revoke what the first one issued.
                async let first = Self.exchange(server, code: code)
                async let second = Self.exchange(server, code: code)
                let answers = try await [first, second]
                #expect(answers.filter { $0.status == .ok }.count <= 1)
                for answer in answers where answer.status == .ok {
                    let refresh = try #require(answer.json["refresh_token"]?.stringValue)
                    let after = try await server.request(
                        .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(refresh)")
                    if after.status == .ok { survivors += 1 }
                }
            }
            #expect(survivors == 0, "tokens of a replayed code that outlived the replay")
        }
    }

    @Test(arguments: backends) func aSignInEndsAfterItsAbsoluteLifetimeHoweverOftenItIsRefreshed(backend: Backend)
        async throws
    {
        // On a clock of the test's: the sign-in ends when the test moves time past it.
        let clock = ManualClock()
        try await TestServer.with(backend, clock: clock, configure: { $0.signInLifetime = .seconds(5) }) { server in
            let user = try await server.makeUser()
            var refresh = user.refreshToken
            var access = user.accessToken
            for _ in 0..<2 {
                let rotated = try await server.request(
                    .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(refresh)")
                #expect(rotated.status == .ok)
                refresh = rotated.json["refresh_token"]?.stringValue ?? ""
                access = rotated.json["access_token"]?.stringValue ?? ""
            }
            clock.advance(by: .seconds(4))
            let inTime = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(refresh)")
            #expect(inTime.status == .ok, "4 s into a sign-in of 5 s")
            refresh = inTime.json["refresh_token"]?.stringValue ?? ""
            access = inTime.json["access_token"]?.stringValue ?? ""
            clock.advance(by: .seconds(1.5))
            let late = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(refresh)")
            #expect(late.json["error"] == "invalid_grant")
            #expect(
                try await server.request(.get, "/v1/changes?since=0", token: access).status == .unauthorized,
                "the sign-in is over")
        }
    }

    @Test(arguments: backends) func anExpiredCodeIsRefused(backend: Backend) async throws {
        let clock = ManualClock()
        try await TestServer.with(backend, clock: clock, configure: { $0.authorizationCodeLifetime = .seconds(60) }) {
            server in
            let user = try await server.makeUser()
            let code = try #require(try await Self.signIn(server, user).authorization?.code)
            clock.advance(by: .seconds(61))
            let response = try await Self.exchange(server, code: code)
            #expect(response.status == .badRequest)
            #expect(response.json["error"] == "invalid_grant")
        }
    }

    @Test(arguments: backends) func revocationEndsTheRefreshTokenFamily(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let revoked = try await server.request(
                .post, "/oauth/revoke", body: "token=\(user.refreshToken)&token_type_hint=refresh_token")
            #expect(revoked.status == .ok)
            let refresh = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(refresh.json["error"] == "invalid_grant")
            let unknown = try await server.request(.post, "/oauth/revoke", body: "token=unknown")
            #expect(unknown.status == .ok)
            let missing = try await server.request(.post, "/oauth/revoke", body: "")
            #expect(missing.status == .badRequest)
        }
    }

    @Test(arguments: backends) func discoveryDescribesTheFlow(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let discovery = try await server.request(.get, "/.well-known/openid-configuration")
            #expect(discovery.json["code_challenge_methods_supported"] == ["S256"])
            let issuer = try #require(discovery.json["issuer"]?.stringValue)
            #expect(discovery.json["authorization_endpoint"] == .string(issuer + "/oauth/authorize"))
            #expect(discovery.json["revocation_endpoint"] == .string(issuer + "/oauth/revoke"))
            #expect(discovery.json["jwks_uri"] == .string(issuer + "/.well-known/jwks.json"))
            let grants = discovery.json["grant_types_supported"]?.arrayValue ?? []
            #expect(grants.contains("authorization_code") && grants.contains("refresh_token"))
        }
    }
}
