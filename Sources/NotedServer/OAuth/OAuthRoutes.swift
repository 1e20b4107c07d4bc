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

    /// The query's parameters, or the page refusing a repeated one.
    private static func parameters(_ request: Request) -> Result<[String: String], RequestRefused> {
        var parameters: [String: String] = [:]
        for (name, value) in request.uri.queryParameters {
            let key = String(name)
            guard parameters[key] == nil else {
                return .failure(
                    RequestRefused(
                        response: page(
                            SignInPage.error("The parameter \(key.prefix(40)) appears more than once."),
                            status: .badRequest)))
            }
            parameters[key] = String(value)
        }
        return .success(parameters)
    }

    struct RequestRefused: Error { let response: Response }

    func add(to router: Router<NotedRequestContext>) {
        router.get("/oauth/authorize") { request, _ -> Response in
            switch Self.parameters(request) {
            case .failure(let refused): return refused.response
            case .success(let parameters): return show(parameters)
            }
        }
        router.get("/oauth/register") { request, _ -> Response in
            switch Self.parameters(request) {
            case .failure(let refused):
                return refused.response
            case .success(let parameters):
                do throws(AuthorizationServer.RequestFailure) {
                    return register(try server.validate(parameters))
                } catch {
                    return Self.failure(error)
                }
            }
        }
        router.post("/oauth/register") { request, context -> Response in
            let buffer = try await request.body.collect(upTo: 64 * 1024)
            let form = FormDecoding.decode(String(buffer: buffer))
            if let name = FormDecoding.duplicate(in: String(buffer: buffer)) {
                return Self.failure(.page("The form was sent with \(name) twice. Please start again."))
            }
            let authorization: AuthorizationServer.Request
            do throws(AuthorizationServer.RequestFailure) {
                authorization = try server.validate(form)
            } catch {
                return Self.failure(error)
            }
            let username = form["username"] ?? ""
            let cookie = Self.cookie(csrfCookieName, in: request)
            guard let cookie, let field = form["csrf"], constantTimeEqual(cookie, field) else {
                return register(
                    authorization, username: username, error: "Your form expired. Please try again.",
                    status: .badRequest)
            }
            guard server.accounts.registrationOpen else { return register(authorization, status: .forbidden) }
            let password = form["password"] ?? ""
            guard password == form["confirm"] ?? "" else {
                return register(
                    authorization, username: username, error: "The passwords do not match.", status: .badRequest)
            }
            do {
                let location = try await server.register(
                    authorization, username: username, password: password,
                    address: server.accounts.addresses.key(request, context))
                return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
            } catch let error as AuthError {
                switch error.kind {
                case .rateLimited(let retryAfter):
                    var response = register(
                        authorization, username: username,
                        error: "Too many attempts. Try again in \(retryAfter) seconds.", status: .tooManyRequests)
                    response.headers[.retryAfter] = String(retryAfter)
                    return response
                case .usernameTaken:
                    return register(
                        authorization, username: username, error: "That username is taken. Choose another, or sign in.",
                        status: .conflict)
                case .registrationClosed:
                    return register(authorization, status: .forbidden)
                case .invalidRequest(let message):
                    return register(
                        authorization, username: username, error: Self.sentence(message), status: .badRequest)
                default:
                    return register(authorization, username: username, error: error.description, status: .badRequest)
                }
            }
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
                return signIn(
                    authorization, error: "Your sign-in form expired. Please sign in again.", status: .badRequest)
            }
            let username = form["username"] ?? ""
            let address = server.accounts.addresses.key(request, context)
            if let step = form["second_factor"] {
                return try await secondFactor(authorization, step: step, code: form["otp"] ?? "", address: address)
            }
            do {
                switch try await server.authorize(
                    authorization, username: username, password: form["password"] ?? "", address: address)
                {
                case .redirect(let location):
                    return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
                case .secondFactor(let step):
                    return codeForm(authorization, step: step)
                }
            } catch let error as AuthError {
                switch error.kind {
                case .rateLimited(let retryAfter):
                    var response = signIn(
                        authorization, username: username,
                        error: "Too many attempts. Try again in \(retryAfter) seconds.", status: .tooManyRequests)
                    response.headers[.retryAfter] = String(retryAfter)
                    return response
                case .accountDisabled:
                    return signIn(
                        authorization, username: username, error: Self.sentence(error.description), status: .forbidden)
                default:
                    return signIn(
                        authorization, username: username, error: "Wrong username or password.", status: .unauthorized)
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

    /// The code form's answer: signed in, the form again with what was wrong, or the sign-in
    /// page when the step expired.
    private func secondFactor(_ authorization: AuthorizationServer.Request, step: String, code: String, address: String)
        async throws -> Response
    {
        do {
            guard
                let location = try await server.finishSecondFactor(
                    authorization, step: step, code: code, address: address)
            else {
                return signIn(authorization, error: "Your sign-in expired. Please sign in again.", status: .badRequest)
            }
            return Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
        } catch let error as AuthError {
            switch error.kind {
            case .rateLimited(let retryAfter):
                var response = codeForm(
                    authorization, step: step, error: "Too many attempts. Try again in \(retryAfter) seconds.",
                    status: .tooManyRequests)
                response.headers[.retryAfter] = String(retryAfter)
                return response
            default:
                return codeForm(
                    authorization, step: step,
                    error:
                        "That code is not right, or was used already. Enter the current code from your authenticator app, or a recovery code.",
                    status: .unauthorized)
            }
        }
    }

    /// The second step of a sign-in: the code form, with a fresh CSRF token.
    func codeForm(
        _ request: AuthorizationServer.Request, step: String, error: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        let csrf = Accounts.newRefreshToken()
        var response = Self.page(
            SignInPage.secondFactor(request: request, csrf: csrf, step: step, error: error), status: status)
        response.headers[.setCookie] = csrfCookie(csrf)
        return response
    }

    private func show(_ parameters: [String: String]) -> Response {
        do throws(AuthorizationServer.RequestFailure) {
            return signIn(try server.validate(parameters))
        } catch {
            return Self.failure(error)
        }
    }

    /// The sign-in page with a fresh CSRF token in a cookie and in the form (double submit).
    func signIn(
        _ request: AuthorizationServer.Request, username: String = "", error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) -> Response {
        let csrf = Accounts.newRefreshToken()
        var response = Self.page(
            SignInPage.render(request: request, csrf: csrf, username: username, error: error), status: status)
        response.headers[.setCookie] = csrfCookie(csrf)
        return response
    }

    /// The registration page, with a fresh CSRF token as on the sign-in page.
    func register(
        _ request: AuthorizationServer.Request, username: String = "", error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) -> Response {
        let csrf = Accounts.newRefreshToken()
        var response = Self.page(
            SignInPage.register(
                request: request, csrf: csrf, open: server.accounts.registrationOpen, username: username, error: error),
            status: status)
        response.headers[.setCookie] = csrfCookie(csrf)
        return response
    }

    /// The double-submit cookie: `__Host-` and `Secure` over https.
    private func csrfCookie(_ value: String) -> String {
        secure
            ? "\(Self.secureCSRFCookie)=\(value); Path=/; Secure; HttpOnly; SameSite=Strict"
            : "\(Self.csrfCookie)=\(value); Path=/oauth; HttpOnly; SameSite=Strict"
    }

    /// A rule's message as a sentence on the page: capitalised, with a full stop.
    static func sentence(_ message: String) -> String {
        guard let first = message.first else { return message }
        return first.uppercased() + message.dropFirst() + (message.hasSuffix(".") ? "" : ".")
    }

    static func failure(_ error: AuthorizationServer.RequestFailure) -> Response {
        switch error {
        case .page(let message):
            return page(SignInPage.error(message), status: .badRequest)
        case .redirect(let uri, let code, let description, let state):
            var items = [("error", code), ("error_description", description)]
            if let state { items.append(("state", state)) }
            return Response(
                status: .seeOther,
                headers: [.location: AuthorizationServer.appending(items, to: uri), .cacheControl: "no-store"])
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
