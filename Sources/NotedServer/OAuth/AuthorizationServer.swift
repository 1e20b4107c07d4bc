import Crypto
import Foundation
import NotedCore

/// The OAuth 2.1 authorization server: authorization codes with PKCE, the token grants and
/// revocation. HTTP lives in `OAuthRoutes`; this type holds the rules.
struct AuthorizationServer: Sendable {
    let clients: OAuthClients
    let accounts: Accounts
    let store: any AccountStore & OAuthStore
    let codeLifetime: TimeInterval

    /// A validated authorization request (RFC 6749 section 4.1.1 with PKCE).
    struct Request: Sendable {
        var client: OAuthClient
        var redirectURI: String
        var challenge: String
        var state: String?

        /// The parameters to carry through the sign-in form.
        var hiddenFields: [(String, String)] {
            var fields = [
                ("response_type", "code"), ("client_id", client.id), ("redirect_uri", redirectURI),
                ("code_challenge", challenge), ("code_challenge_method", "S256"),
            ]
            if let state { fields.append(("state", state)) }
            return fields
        }
    }

    /// Why an authorization request failed: shown on a page when the redirect URI cannot be
    /// trusted, sent back to the client otherwise.
    enum RequestFailure: Error {
        case page(String)
        case redirect(uri: String, error: String, description: String, state: String?)
    }

    /// Checks an authorization request.
    func validate(_ parameters: [String: String]) throws(RequestFailure) -> Request {
        guard let clientID = parameters["client_id"], !clientID.isEmpty else {
            throw .page("The request does not say which application is asking (client_id is missing).")
        }
        guard let client = clients[clientID] else {
            throw .page("The application \"\(clientID.prefix(100))\" is not registered with this server.")
        }
        guard let redirectURI = parameters["redirect_uri"], client.allows(redirectURI: redirectURI) else {
            if client.id == OAuthClient.webClientID {
                throw .page(
                    "The web app may only be used at this server's own address (its --issuer) or at an address its operator allowed (--allowed-origin)."
                )
            }
            throw .page("The redirect address is not one registered for \(client.name).")
        }
        let state = parameters["state"]
        if let state, state.utf8.count > 2048 {
            throw .page("The state parameter is too long.")
        }
        func fail(_ error: String, _ description: String) -> RequestFailure {
            .redirect(uri: redirectURI, error: error, description: description, state: state)
        }
        guard parameters["response_type"] == "code" else {
            throw fail("unsupported_response_type", "only response_type=code is supported")
        }
        guard parameters["code_challenge_method"] == "S256" else {
            throw fail("invalid_request", "PKCE with code_challenge_method=S256 is required")
        }
        guard let challenge = parameters["code_challenge"], PKCE.isValidChallenge(challenge) else {
            throw fail("invalid_request", "code_challenge must be the base64url SHA-256 of a code verifier")
        }
        return Request(client: client, redirectURI: redirectURI, challenge: challenge, state: state)
    }

    /// Signs the user in and issues a code; returns where to send the browser.
    func authorize(_ request: Request, username: String, password: String, address: String) async throws
        -> SignInOutcome
    {
        let user = try await accounts.verifyPassword(username: username, password: password, address: address)
        if user.twoFactor {
            return .secondFactor(
                step: try await accounts.tokens.issueSecondFactorStep(userID: user.id, passwordHash: user.passwordHash))
        }
        return .redirect(try await issueCode(request, userID: user.id))
    }

    /// What the password form leads to: the client's redirect with a code, or the code form.
    enum SignInOutcome {
        case redirect(String)
        /// The account asks a second factor: the code form, carrying this signed step.
        case secondFactor(step: String)
    }

    /// The code form of a sign-in whose password was right: the redirect once `code` is; nil
    /// when the step is not valid (expired, forged, or the account gone).
    func finishSecondFactor(_ request: Request, step: String, code: String, address: String) async throws -> String? {
        // Still the password that was checked, and still an account that asks a code: a
        // password reset (or two-factor turned off by the operator) since ends this sign-in.
        guard let (userID, mark) = await accounts.tokens.verifySecondFactorStep(step),
            let user = try await store.user(id: userID), !user.disabled,
            user.twoFactor, constantTimeEqual(mark, AccessTokens.passwordMark(user.passwordHash))
        else {
            return nil
        }
        try await accounts.verifySecondFactor(user, code: code, address: address)
        return try await issueCode(request, userID: user.id)
    }

    /// Creates the account (registration's rules and limits), then answers the authorization
    /// request signed in as it: where to send the browser.
    func register(_ request: Request, username: String, password: String, address: String) async throws -> String {
        let user = try await accounts.register(username: username, password: password, address: address)
        return try await issueCode(request, userID: user.id)
    }

    /// A fresh authorization code for `userID`, and the redirect carrying it.
    private func issueCode(_ request: Request, userID: String) async throws -> String {
        let code = Accounts.newRefreshToken()
        let now = accounts.tokens.clock.now()
        try await store.createAuthorizationCode(
            AuthorizationCode(
                hash: Accounts.hash(code), clientID: request.client.id, redirectURI: request.redirectURI,
                challenge: request.challenge, userID: userID, expiresAt: now.addingTimeInterval(codeLifetime)),
            now: now)
        var query = [("code", code)]
        if let state = request.state { query.append(("state", state)) }
        return Self.appending(query, to: request.redirectURI)
    }

    /// The `authorization_code` grant.
    func exchange(form: [String: String]) async throws -> TokenResponse {
        guard let code = form["code"], !code.isEmpty else { throw OAuthError.invalidRequest("code is missing") }
        guard let redirectURI = form["redirect_uri"] else { throw OAuthError.invalidRequest("redirect_uri is missing") }
        guard let clientID = form["client_id"], !clientID.isEmpty else {
            throw OAuthError.invalidRequest("client_id is missing")
        }
        guard let verifier = form["code_verifier"] else { throw OAuthError.invalidRequest("code_verifier is missing") }
        guard clients[clientID] != nil else { throw OAuthError.invalidClient }
        let now = accounts.tokens.clock.now()
        let familyID = UUID().uuidString.lowercased()
        switch try await store.consumeAuthorizationCode(hash: Accounts.hash(code), now: now, familyID: familyID) {
        case .invalid:
            throw OAuthError.invalidGrant("the authorization code is invalid or expired")
        case .reused(let familyID):
            // A replayed code: whatever it produced the first time is revoked (RFC 6749 4.1.2).
            if let familyID {
                try await store.revokeRefreshFamily(id: familyID, now: now)
                try await accounts.revoked(familyID)
            }
            throw OAuthError.invalidGrant("the authorization code was already used")
        case .valid(let stored):
            guard constantTimeEqual(stored.clientID, clientID) else {
                throw OAuthError.invalidGrant("the authorization code was issued to another client")
            }
            guard constantTimeEqual(stored.redirectURI, redirectURI) else {
                throw OAuthError.invalidGrant("redirect_uri does not match the authorization request")
            }
            guard PKCE.verify(verifier, challenge: stored.challenge) else {
                throw OAuthError.invalidGrant("code_verifier does not match the code challenge")
            }
            // Disabled (or deleted) since the code was issued: a sign-in racing the operator.
            guard let user = try await store.user(id: stored.userID), !user.disabled else {
                throw OAuthError.invalidGrant("the account is disabled")
            }
            return try await accounts.issueTokens(
                userID: stored.userID, clientID: clientID, device: nil, familyID: familyID
            ).0
        }
    }

    /// Token revocation (RFC 7009): revokes the refresh token's family; unknown tokens are fine.
    func revoke(form: [String: String]) async throws {
        guard let token = form["token"], !token.isEmpty else { throw OAuthError.invalidRequest("token is missing") }
        if let familyID = try await store.revokeRefreshToken(
            hash: Accounts.hash(token), now: accounts.tokens.clock.now())
        {
            try await accounts.revoked(familyID)
        }
    }

    /// `uri` with query parameters added, form-encoded.
    static func appending(_ items: [(String, String)], to uri: String) -> String {
        let encoded = items.map { "\(formEncode($0.0))=\(formEncode($0.1))" }.joined(separator: "&")
        return uri + (uri.contains("?") ? "&" : "?") + encoded
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(
            CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

/// RFC 6749 section 5.2 errors of the token and revocation endpoints.
enum OAuthError: Error {
    case invalidRequest(String)
    case invalidClient
    case invalidGrant(String)
}
