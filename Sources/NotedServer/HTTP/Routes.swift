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
            let bearer = request.headers[.authorization].flatMap {
                $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil
            }
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
        addAccountRoutes(to: router)
        addImportRoute(to: router)
        addExportRoute(to: router)
        addBlobRoutes(to: router)
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
        router.get("/v1/changes") { request, context -> Response in
            let user = try await authenticate(request)
            let query = request.uri.queryParameters
            guard let since = query.get("since").flatMap(Int64.init), since >= 0, since <= ChangeParser.maxSafeInteger
            else {
                throw APIError(.badRequest, "bad_request", "since must be an integer from 0 to 2^53-1")
            }
            var limit = ClientMessage.defaultPullLimit
            if let text = query.get("limit") {
                guard let value = Int(text), (1...ClientMessage.maxPullLimit).contains(value) else {
                    throw APIError(
                        .badRequest, "bad_request", "limit must be an integer from 1 to \(ClientMessage.maxPullLimit)")
                }
                limit = value
            }
            let snapshot = query.get("snapshot") == "true"
            var page =
                try await sync.pull(userID: user.userID, since: since, limit: limit, snapshot: snapshot, rid: nil)
                .objectValue ?? [:]
            page["type"] = nil
            return .json(.object(page))
        }
        // The WebSocket's per-connection push limit, per user over HTTP (no connection to count on).
        let pushLimiter = RateLimiter(limit: configuration.maxPushesPerSecond, window: 1)
        router.post("/v1/push") { request, context -> Response in
            let user = try await authenticate(request)
            do throws(AuthError) {
                try pushLimiter.check(keys: ["push:\(user.userID)"])
            } catch {
                if case .rateLimited(let retryAfter) = error.kind {
                    var limited = APIError(.tooManyRequests, "rate_limited", "too many pushes; slow down")
                    limited.headers[.retryAfter] = String(retryAfter)
                    throw limited
                }
                throw APIError(error)
            }
            let body = try await jsonBody(request)
            guard let changes = body["changes"]?.arrayValue else {
                throw APIError(.badRequest, "bad_request", "the body needs a \"changes\" array")
            }
            guard changes.count <= configuration.limits.maxChangesPerPush else {
                throw APIError(
                    .contentTooLarge, "too_large",
                    "a push holds at most \(configuration.limits.maxChangesPerPush) changes")
            }
            let device = request.headers[HTTPField.Name("Noted-Device")!].flatMap {
                UUIDText.isCanonical($0) ? $0 : nil
            }
            do {
                let results = try await sync.push(
                    changes: changes, userID: user.userID, device: device, session: nil, rid: nil,
                    logger: context.logger)
                return .json(["results": .array(results)])
            } catch is AccountDeleted {
                throw APIError(.unauthorized, "unauthenticated", SessionHub.accountDeleted)
            }
        }
        router.get("/v1/collections") { request, _ -> Response in
            _ = try await authenticate(request)
            let schemas = sync.parser.schemas.schemas.values.sorted { $0.name < $1.name }
            return .json(["collections": .array(schemas.map(\.json))])
        }
        router.get("/v1/records/:collection/:id") { request, context -> Response in
            let user = try await authenticate(request)
            let (collection, id) = try recordPath(context)
            guard let record = try await store.record(userID: user.userID, collection: collection, id: id) else {
                throw APIError(.notFound, "not_found", "no such record")
            }
            if record.deleted { throw APIError(.gone, "gone", "the record was purged") }
            return .json(record.json)
        }
        router.get("/v1/records/:collection/:id/revisions") { request, context -> Response in
            let user = try await authenticate(request)
            let (collection, id) = try recordPath(context)
            guard let revisions = try await store.revisions(userID: user.userID, collection: collection, id: id) else {
                throw APIError(.notFound, "not_found", "no such record")
            }
            return .json(["revisions": .array(revisions.map(\.summaryJSON))])
        }
        router.get("/v1/records/:collection/:id/revisions/:rev") { request, context -> Response in
            let user = try await authenticate(request)
            let (collection, id) = try recordPath(context)
            guard let rev = context.parameters.get("rev").flatMap(Int64.init), rev >= 1 else {
                throw APIError(.badRequest, "bad_request", "rev must be a positive integer")
            }
            let conflict = request.uri.queryParameters.get("conflict") == "true"
            guard
                let revision = try await store.revision(
                    userID: user.userID, collection: collection, id: id, rev: rev, conflict: conflict)
            else {
                throw APIError(.notFound, "not_found", "no such revision")
            }
            return .json(revision.fullJSON)
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
                environment: environment, headerToken: bearerToken(context.request), logger: context.logger)
            let channel = context.requestContext.channel
            try await session.run(inbound: inbound, outbound: outbound) { channel.close(promise: nil) }
        }
    }

    /// A browser origin must be the server's own or an allowed one; no `Origin`: a native client.
    func originAllowed(_ request: Request) -> Bool {
        OriginPolicy(allowedOrigins: configuration.allowedOrigins).allows(
            origins: request.headers[values: .origin], authority: request.head.authority)
    }

    private func bearerToken(_ request: Request) -> String? {
        guard let header = request.headers[.authorization] else { return nil }
        let prefix = "Bearer "
        guard header.count > prefix.count, header.lowercased().hasPrefix(prefix.lowercased()) else { return nil }
        return String(header.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces)
    }

    /// The signed-in user's own account (docs/protocol.md, "Accounts").
    private func addAccountRoutes(to router: Router<NotedRequestContext>) {
        router.get("/v1/account") { request, _ -> Response in
            let token = try await authenticate(request)
            guard let user = try await store.user(id: token.userID),
                let twoFactor = try await store.twoFactor(userID: token.userID)
            else {
                throw APIError(.unauthorized, "unauthenticated", "invalid access token")
            }
            let usage = try await store.usage(userID: token.userID)
            let quota = configuration.quota
            return .json([
                "id": .string(user.id), "username": .string(user.username),
                "two_factor": [
                    "enabled": .bool(user.twoFactor),
                    "recovery_codes_left": .int(Int64(user.twoFactor ? twoFactor.recoveryCodesLeft : 0)),
                ],
                // What the account stores, as the quota counts it (docs/security.md, "Storage per account").
                "usage": [
                    "bytes": .int(usage.bytes + usage.history), "history_bytes": .int(usage.history),
                    "records": .int(usage.records),
                    "quota_bytes": quota.bytes.map(JSONValue.int) ?? .null,
                    "quota_records": quota.records.map(JSONValue.int) ?? .null,
                ],
            ])
        }
        router.post("/v1/account/2fa/setup") { request, context -> Response in
            let user = try await authenticate(request)
            let body = try await jsonBody(request)
            guard let password = body["password"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "password must be a string")
            }
            let (secret, uri) = try await Self.passwordChecked {
                try await accounts.beginTwoFactor(
                    userID: user.userID, password: password, address: accounts.addresses.key(request, context))
            }
            var response = Response.json(["secret": .string(secret), "uri": .string(uri)])
            response.headers[.cacheControl] = "no-store"
            return response
        }
        router.post("/v1/account/2fa/enable") { request, context -> Response in
            let user = try await authenticate(request)
            let body = try await jsonBody(request)
            guard let code = body["code"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "code must be a string")
            }
            let codes = try await Self.passwordChecked {
                try await accounts.enableTwoFactor(
                    userID: user.userID, code: code, address: accounts.addresses.key(request, context))
            }
            context.logger.info("two-factor sign-in turned on", metadata: ["user": .string(user.userID)])
            var response = Response.json(["recovery_codes": .array(codes.map(JSONValue.string))])
            response.headers[.cacheControl] = "no-store"
            return response
        }
        router.post("/v1/account/2fa/disable") { request, context -> Response in
            let user = try await authenticate(request)
            let body = try await jsonBody(request)
            guard let password = body["password"]?.stringValue, let code = body["code"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "password and code must be strings")
            }
            try await Self.passwordChecked {
                try await accounts.disableTwoFactor(
                    userID: user.userID, password: password, code: code,
                    address: accounts.addresses.key(request, context))
            }
            context.logger.info("two-factor sign-in turned off", metadata: ["user": .string(user.userID)])
            return .json([:])
        }
        router.post("/v1/account/password") { request, context -> Response in
            let user = try await authenticate(request)
            let body = try await jsonBody(request)
            guard let current = body["current_password"]?.stringValue, let new = body["new_password"]?.stringValue
            else {
                throw APIError(.badRequest, "bad_request", "current_password and new_password must be strings")
            }
            let ended = try await Self.passwordChecked {
                try await accounts.changePassword(
                    userID: user.userID, current: current, code: body["code"]?.stringValue, new: new,
                    keeping: user.sessionID,
                    address: accounts.addresses.key(request, context))
            }
            context.logger.info(
                "password changed", metadata: ["user": .string(user.userID), "endedSessions": "\(ended)"])
            return .json(["signed_out": .int(Int64(ended))])
        }
        router.get("/v1/account/devices") { request, _ -> Response in
            let user = try await authenticate(request)
            let sessions = try await store.signInSessions(userID: user.userID, now: Date())
            return .json(["devices": .array(sessions.map { $0.json(current: user.sessionID) })])
        }
        router.delete("/v1/account/devices/:id") { request, context -> Response in
            let user = try await authenticate(request)
            let id = try context.parameters.require("id")
            guard try await !accounts.signOut(userID: user.userID, only: id).isEmpty else {
                throw APIError(.notFound, "not_found", "no such signed-in device")
            }
            return Response(status: .noContent)
        }
        router.delete("/v1/account/devices") { request, _ -> Response in
            let user = try await authenticate(request)
            let ended = try await accounts.signOut(userID: user.userID, only: nil)
            return .json(["signed_out": .int(Int64(ended.count))])
        }
        router.delete("/v1/account") { request, context -> Response in
            let user = try await authenticate(request)
            let body = try await jsonBody(request)
            guard let password = body["password"]?.stringValue else {
                throw APIError(.badRequest, "bad_request", "password must be a string")
            }
            try await Self.passwordChecked {
                try await accounts.deleteAccount(
                    userID: user.userID, password: password, code: body["code"]?.stringValue,
                    address: accounts.addresses.key(request, context)
                ) {
                    sync.hub.closeUser(user.userID, reason: SessionHub.accountDeleted)
                }
            }
            context.logger.info("account deleted", metadata: ["user": .string(user.userID)])
            return Response(status: .noContent)
        }
    }

    /// Runs an account operation that checks the user's password. A wrong password is 403,
    /// not 401: the access token is fine, and a client must not take the answer for a reason
    /// to refresh it or sign in again.
    private static func passwordChecked<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as AuthError {
            if case .invalidCredentials = error.kind {
                throw APIError(.forbidden, "invalid_credentials", "the password is not right")
            }
            throw APIError(error)
        }
    }

    func authenticate(_ request: Request) async throws -> VerifiedToken {
        guard let token = bearerToken(request) else {
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

    private func recordPath(_ context: NotedRequestContext) throws -> (String, String) {
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

    private func jsonBody(_ request: Request) async throws -> JSONValue {
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
