import Foundation
import HTTPTypes
import Hummingbird
import NotedCore

/// `/oauth/authorize` (the sign-in page and its form) and `/oauth/revoke`.
struct OAuthRoutes: Sendable {
    let server: AuthorizationServer

    static let csrfCookie = "noted_csrf"
    /// On https the cookie is `Secure` with the `__Host-` prefix: only this origin over TLS can
    /// have set it (no sibling subdomain, no plain-http page).
    static let secureCSRFCookie = "__Host-noted_csrf"

    /// Whether the server is reached over https (its issuer says so).
    var secure: Bool { server.accounts.tokens.issuer.lowercased().hasPrefix("https://") }
    var csrfCookieName: String { secure ? Self.secureCSRFCookie : Self.csrfCookie }
    static let pagePolicy = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"

    func add(to router: Router<NotedRequestContext>) {
        router.get("/oauth/authorize") { request, _ -> Response in
            var parameters: [String: String] = [:]
            for (name, value) in request.uri.queryParameters {
                let key = String(name)
                guard parameters[key] == nil else {
                    return Self.page(SignInPage.error("The parameter \(key.prefix(40)) appears more than once."), status: .badRequest)
                }
                parameters[key] = String(value)
            }
            return show(parameters)
        }
        router.post("/oauth/authorize") { request, context -> Response in
            let buffer = try await request.body.collect(upTo: 64 * 1024)
            let form = FormDecoding.decode(String(buffer: buffer))
            if let name = FormDecoding.duplicate(in: String(buffer: buffer)) {
                return Self.failure(.page("The sign-in form was sent with \(name) twice. Please sign in again."))
            }
            let authorization: AuthorizationServer.Request
            do throws(AuthorizationServer.RequestFailure) {
                authorization = try server.validate(form)
            } catch {
                return Self.failure(error)
            }
            let cookie = Self.cookie(csrfCookieName, in: request)
            guard let cookie, let field = form["csrf"], constantTimeEqual(cookie, field) else {
                return signIn(authorization, error: "Your sign-in form expired. Please sign in again.", status: .badRequest)
            }
            let username = form["username"] ?? ""
            do {
                let location = try await server.authorize(
                    authorization, username: username, password: form["password"] ?? "", address: server.accounts.addresses.key(request, context))
                return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
            } catch let error as AuthError {
                switch error.kind {
                case .rateLimited(let retryAfter):
                    var response = signIn(authorization, username: username, error: "Too many attempts. Try again in \(retryAfter) seconds.", status: .tooManyRequests)
                    response.headers[.retryAfter] = String(retryAfter)
                    return response
                default:
                    return signIn(authorization, username: username, error: "Wrong username or password.", status: .unauthorized)
                }
            }
        }
        router.post("/oauth/revoke") { request, _ -> Response in
            let buffer = try await request.body.collect(upTo: 64 * 1024)
            do {
                if let name = FormDecoding.duplicate(in: String(buffer: buffer)) {
                    throw OAuthError.invalidRequest("\(name) is given more than once")
                }
                try await server.revoke(form: FormDecoding.decode(String(buffer: buffer)))
            } catch let error as OAuthError {
                throw APIError(error)
            }
            return Response(status: .ok, headers: [.cacheControl: "no-store"])
        }
    }

    private func show(_ parameters: [String: String]) -> Response {
        do throws(AuthorizationServer.RequestFailure) {
            return signIn(try server.validate(parameters))
        } catch {
            return Self.failure(error)
        }
    }

    /// The sign-in page with a fresh CSRF token in a cookie and in the form (double submit).
    func signIn(_ request: AuthorizationServer.Request, username: String = "", error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        let csrf = Accounts.newRefreshToken()
        var response = Self.page(SignInPage.render(request: request, csrf: csrf, username: username, error: error), status: status)
        response.headers[.setCookie] = secure
            ? "\(Self.secureCSRFCookie)=\(csrf); Path=/; Secure; HttpOnly; SameSite=Strict"
            : "\(Self.csrfCookie)=\(csrf); Path=/oauth; HttpOnly; SameSite=Strict"
        return response
    }

    static func failure(_ error: AuthorizationServer.RequestFailure) -> Response {
        switch error {
        case .page(let message):
            return page(SignInPage.error(message), status: .badRequest)
        case .redirect(let uri, let code, let description, let state):
            var items = [("error", code), ("error_description", description)]
            if let state { items.append(("state", state)) }
            return Response(status: .seeOther, headers: [.location: AuthorizationServer.appending(items, to: uri), .cacheControl: "no-store"])
        }
    }

    static func page(_ html: String, status: HTTPResponse.Status) -> Response {
        Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                .contentSecurityPolicy: pagePolicy, HTTPField.Name("X-Frame-Options")!: "DENY",
                HTTPField.Name("Referrer-Policy")!: "no-referrer",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    static func cookie(_ name: String, in request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for part in header.split(separator: ";") {
                let pair = part.split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces) == name {
                    return pair[1].trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return nil
    }
}

extension APIError {
    init(_ error: OAuthError) {
        switch error {
        case .invalidRequest(let message): self.init(.badRequest, "invalid_request", message)
        case .invalidClient:
            self.init(.unauthorized, "invalid_client", "unknown client_id")
        case .invalidGrant(let message): self.init(.badRequest, "invalid_grant", message)
        }
        oauth = true
    }
}
