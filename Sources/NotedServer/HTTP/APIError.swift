import Foundation
import HTTPTypes
import Hummingbird
import NotedCore

/// An HTTP error answered as `{"error":"<code>","message":"…"}`.
public struct APIError: HTTPResponseError {
    public let status: HTTPResponse.Status
    let code: String
    let message: String
    var headers: HTTPFields = [:]
    /// RFC 6749 errors use `error_description` instead of `message`.
    var oauth = false

    init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body: JSONValue =
            oauth
            ? ["error": .string(code), "error_description": .string(message)]
            : ["error": .string(code), "message": .string(message)]
        var response = Response.json(body, status: status)
        response.headers.append(contentsOf: headers)
        if oauth { response.headers[.cacheControl] = "no-store" }
        return response
    }

    /// The HTTP form of a protocol error.
    init(_ error: ProtocolError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .notFound: .notFound
            case .gone: .gone
            case .tooLarge, .quotaExceeded: .contentTooLarge
            case .rateLimited: .tooManyRequests
            case .unauthenticated, .tokenExpired: .unauthorized
            case .alreadyExists, .ccidReused, .invalidVersion: .conflict
            default: .badRequest
            }
        self.init(status, error.code.rawValue, error.message)
    }

    init(_ error: AuthError, oauth: Bool = false) {
        switch error.kind {
        case .invalidRequest(let message): self.init(.badRequest, oauth ? "invalid_request" : "bad_request", message)
        case .usernameTaken: self.init(.conflict, "username_taken", error.description)
        case .registrationClosed: self.init(.forbidden, "registration_closed", error.description)
        case .invalidCredentials: self.init(.unauthorized, "invalid_credentials", error.description)
        case .invalidGrant: self.init(.badRequest, "invalid_grant", error.description)
        case .unsupportedGrantType: self.init(.badRequest, "unsupported_grant_type", error.description)
        case .rateLimited(let retryAfter):
            self.init(.tooManyRequests, "rate_limited", error.description)
            headers[.retryAfter] = String(retryAfter)
        case .accountDisabled: self.init(.forbidden, "account_disabled", error.description)
        case .otpRequired: self.init(.unauthorized, "otp_required", error.description)
        case .invalidOTP: self.init(.unauthorized, "invalid_otp", error.description)
        case .twoFactorEnabled: self.init(.conflict, "two_factor_enabled", error.description)
        case .noTwoFactorSetup: self.init(.conflict, "no_two_factor_setup", error.description)
        case .invalidCode: self.init(.badRequest, "invalid_code", error.description)
        case .codeRequired: self.init(.forbidden, "code_required", error.description)
        }
        self.oauth = oauth
    }
}

extension Response {
    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: value.jsonString)))
    }
}
