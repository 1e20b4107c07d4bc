import HTTPTypes
import Hummingbird
import HummingbirdAuth

/// The one reader of an `Authorization: Bearer` header: the scheme without regard to case
/// (RFC 9110 section 11.1), the token without the spaces around it; nil without one.
enum BearerToken {
    static func of(_ headers: HTTPFields) -> String? {
        guard let header = headers[.authorization] else { return nil }
        let prefix = "bearer "
        guard header.count > prefix.count, header.prefix(prefix.count).lowercased() == prefix else { return nil }
        let token = header.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}

/// Signs in the routes added behind it (docs/protocol.md, "Authentication"): the bearer access
/// token must be valid and its account enabled, else the request is answered 401
/// (`unauthenticated`, or `token_expired`) before any handler runs. A handler reads who it
/// serves with `context.requireIdentity()`.
struct SignedIn: AuthenticatorMiddleware {
    typealias Context = NotedRequestContext
    let tokens: AccessTokens
    let store: any AccountStore

    func authenticate(request: Request, context: Context) async throws -> VerifiedToken? {
        guard let token = BearerToken.of(request.headers) else {
            throw APIError(.unauthorized, "unauthenticated", "an Authorization: Bearer access token is required")
        }
        do {
            let verified = try await tokens.verify(token)
            guard let user = try await store.user(id: verified.userID), !user.disabled else {
                throw APIError(.unauthorized, "unauthenticated", "invalid access token")
            }
            return verified
        } catch let error as TokenError {
            throw error.isExpired
                ? APIError(.unauthorized, "token_expired", "the access token expired")
                : APIError(.unauthorized, "unauthenticated", "invalid access token")
        }
    }
}
