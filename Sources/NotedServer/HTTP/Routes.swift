import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOPosix
import NotedCore
import NotedPorting

/// The HTTP routes and the sync WebSocket route.
struct Routes: Sendable {
    let configuration: ServerConfiguration
    let sync: SyncService
    let store: any NotedStore
    let accounts: Accounts
    let tokens: AccessTokens
    let metrics: ServerMetrics
    let authorization: AuthorizationServer
    let spaces: Spaces

    /// Largest HTTP request body read.
    var maxBodyBytes: Int { configuration.limits.maxMessageBytes }

    /// 127.0.0.0/8, ::1, and IPv4-mapped loopback.
    static func isLoopback(_ address: String) -> Bool {
        address.hasPrefix("127.") || address == "::1" || address.hasPrefix("::ffff:127.")
    }

    func add(to router: Router<NotedRequestContext>) {
        router.get("/health") { _, _ -> Response in
            do {
                try await store.ping()
                return .json(["status": "ok"])
            } catch {
                return .json(["status": "unavailable"], status: .serviceUnavailable)
            }
        }
        router.get("/metrics") { request, context -> Response in
            // Counts of users' activity are not for everyone: loopback (a scraper on the same
            // machine), or the operator's token from anywhere (docs/security.md).
            let bearer = BearerToken.of(request.headers)
            let tokenOK =
                configuration.metricsToken.map { expected in bearer.map { constantTimeEqual($0, expected) } ?? false }
                ?? false
            guard tokenOK || Self.isLoopback(context.remoteAddress) else {
                return .json(
                    ["error": "forbidden", "message": "metrics are served on loopback, or with --metrics-token"],
                    status: .forbidden)
            }
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.registry.emitToBuffer())))
        }
        router.get("/.well-known/jwks.json") { _, _ in Response.json(tokens.jwks) }
        router.get("/.well-known/openid-configuration") { _, _ -> Response in
            .json([
                "issuer": .string(tokens.issuer),
                "jwks_uri": .string(tokens.issuer + "/.well-known/jwks.json"),
                "authorization_endpoint": .string(tokens.issuer + "/oauth/authorize"),
                "token_endpoint": .string(tokens.issuer + "/oauth/token"),
                "revocation_endpoint": .string(tokens.issuer + "/oauth/revoke"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "revocation_endpoint_auth_methods_supported": ["none"],
            ])
        }
        router.post("/v1/accounts") { request, context -> Response in
            let body = try await jsonBody(request)
            guard let username = body["username"]?.stringValue, let password = body["password"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "username and password must be strings")
            }
            do {
                let user = try await accounts.register(
                    username: username, password: password, address: accounts.addresses.key(request, context))
                context.logger.info("account created", metadata: ["user": .string(user.id)])
                return .json(["user": ["id": .string(user.id), "username": .string(user.username)]], status: .created)
            } catch let error as AuthError {
                throw APIError(error)
            }
        }
        router.post("/v1/sessions") { request, context -> Response in
            let body = try await jsonBody(request)
            guard let username = body["username"]?.stringValue, let password = body["password"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "username and password must be strings")
            }
            let device = body["device"]?.stringValue
            if let device, !UUIDText.isCanonical(device) {
                throw APIError(.badRequest, "bad_request", "device must be a lower-case UUID")
            }
            let otp = body["otp"]?.stringValue
            guard body["otp"] == nil || otp != nil else {
                throw APIError(.badRequest, "bad_request", "otp must be a string")
            }
            do {
                return .json(
                    try await accounts.signIn(
                        username: username, password: password, otp: otp, device: device,
                        address: accounts.addresses.key(request, context)
                    ).json)
            } catch let error as AuthError {
                throw APIError(error)
            }
        }
        // Everything of an account's own: signed in by the middleware, before any handler runs.
        let signedIn = router.group().add(middleware: SignedIn(tokens: tokens, store: store))
        addRecordRoutes(to: signedIn)
        addAccountRoutes(to: signedIn)
        addSpaceRoutes(to: signedIn)
        addImportRoute(to: signedIn)
        addExportRoute(to: signedIn)
        addBlobRoutes(to: signedIn)
        router.post("/oauth/token") { request, _ -> Response in
            let buffer = try await request.body.collect(upTo: 64 * 1024)
            let form = FormDecoding.decode(String(buffer: buffer))
            do {
                if let name = FormDecoding.duplicate(in: String(buffer: buffer)) {
                    throw AuthError(kind: .invalidRequest("\(name) is given more than once"))
                }
                guard let grant = form["grant_type"] else {
                    throw AuthError(kind: .invalidRequest("grant_type is missing"))
                }
                if grant == "authorization_code" {
                    do {
                        var response = Response.json(try await authorization.exchange(form: form).json)
                        response.headers[.cacheControl] = "no-store"
                        return response
                    } catch let error as OAuthError {
                        throw APIError(error)
                    }
                }
                guard grant == "refresh_token" else { throw AuthError(kind: .unsupportedGrantType) }
                guard let token = form["refresh_token"], !token.isEmpty else {
                    throw AuthError(kind: .invalidRequest("refresh_token is missing"))
                }
                let clientID = form["client_id"].flatMap { $0.isEmpty ? nil : $0 }
                var response = Response.json(try await accounts.refresh(token: token, clientID: clientID).json)
                response.headers[.cacheControl] = "no-store"
                return response
            } catch let error as AuthError {
                throw APIError(error, oauth: true)
            }
        }
        // Reached only when the WebSocket upgrade did not happen.
        router.get("/v1/sync") { request, _ -> Response in
            guard originAllowed(request) else {
                throw APIError(.forbidden, "forbidden_origin", "this origin may not open a sync connection")
            }
            throw APIError(.upgradeRequired, "upgrade_required", "GET /v1/sync is a WebSocket endpoint")
        }
    }

    func addWebSocket(to router: Router<NotedRequestContext>) {
        let environment = SyncSession.Environment(sync: sync, tokens: tokens, configuration: configuration)
        router.ws("/v1/sync") { request, _ in
            originAllowed(request) ? .upgrade([:]) : .dontUpgrade
        } onUpgrade: { inbound, outbound, context in
            let session = SyncSession(
                environment: environment, headerToken: BearerToken.of(context.request.headers), logger: context.logger)
            let channel = context.requestContext.channel
            try await session.run(inbound: inbound, outbound: outbound) { channel.close(promise: nil) }
        }
    }

    /// A browser origin must be the server's own or an allowed one; no `Origin`: a native client.
    func originAllowed(_ request: Request) -> Bool {
        OriginPolicy(allowedOrigins: configuration.allowedOrigins).allows(
            origins: request.headers[values: .origin], authority: request.head.authority)
    }

    /// The space a signed-in read is of: `?space=ID` when the user is a member of it (protocol
    /// 2, docs/protocol.md "Spaces"), else the user's personal space. A space the user is not in
    /// answers 404 `not_found`, as one that does not exist.
    func readableSpace(_ request: Request, _ context: NotedRequestContext) async throws -> String {
        let user = try context.requireIdentity().userID
        guard let space = request.uri.queryParameters.get("space").map { String($0) }, space != user else {
            return user
        }
        guard space.utf8.count <= ClientMessage.maxSpaceIDBytes,
            try await store.role(spaceID: space, userID: user) != nil
        else {
            throw APIError(.notFound, "not_found", "no such space")
        }
        return space
    }

    func recordPath(_ context: NotedRequestContext) throws -> (String, String) {
        let collection = try context.parameters.require("collection")
        let id = try context.parameters.require("id")
        guard sync.parser.schemas[collection] != nil else {
            throw APIError(.notFound, "unknown_collection", "unknown collection")
        }
        guard UUIDText.isCanonical(id) else {
            throw APIError(.badRequest, "bad_request", "id must be a lower-case UUID")
        }
        return (collection, id)
    }

    func jsonBody(_ request: Request) async throws -> JSONValue {
        // JSON only as JSON: a cross-site form can post text/plain that parses as JSON, but it
        // cannot send this content type without the browser asking the server first (CORS).
        let mediaType = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
            .lowercased()
        guard mediaType == "application/json" else {
            throw APIError(
                .unsupportedMediaType, "unsupported_media_type", "send the body as Content-Type: application/json")
        }
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maxBodyBytes)
        } catch {
            throw APIError(.contentTooLarge, "too_large", "the body is larger than \(maxBodyBytes) bytes")
        }
        guard let value = try? JSONValue.parse(buffer.readableBytesView), value.objectValue != nil else {
            throw APIError(.badRequest, "bad_request", "the body must be a JSON object")
        }
        return value
    }

}

/// `application/x-www-form-urlencoded` bodies.
enum FormDecoding {
    /// The first parameter name given more than once: RFC 6749 section 3.1 allows none, and
    /// which of two values a server reads is what parameter-pollution attacks play on.
    static func duplicate(in body: String) -> String? {
        var seen: Set<String> = []
        for pair in body.split(separator: "&") {
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            guard let decoded = decodeComponent(name) else { continue }
            if !seen.insert(decoded).inserted { return decoded }
        }
        return nil
    }

    static func decode(_ body: String) -> [String: String] {
        var result: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decodeComponent(parts[0]) else { continue }
            let value = parts.count > 1 ? decodeComponent(parts[1]) : ""
            if let value, result[name] == nil { result[name] = value }
        }
        return result
    }

    private static func decodeComponent(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
