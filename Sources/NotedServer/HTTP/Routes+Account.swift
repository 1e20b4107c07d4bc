import Foundation
import HTTPTypes
import Hummingbird
import NotedCore

extension Routes {
    /// The signed-in user's own account (docs/protocol.md, "Accounts").
    func addAccountRoutes(to router: some RouterMethods<NotedRequestContext>) {
        router.get("/v1/account") { request, context -> Response in
            let token = try context.requireIdentity()
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
            let user = try context.requireIdentity()
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
            let user = try context.requireIdentity()
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
            let user = try context.requireIdentity()
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
            let user = try context.requireIdentity()
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
        router.get("/v1/account/devices") { request, context -> Response in
            let user = try context.requireIdentity()
            let sessions = try await store.signInSessions(userID: user.userID, now: tokens.clock.now())
            return .json(["devices": .array(sessions.map { $0.json(current: user.sessionID) })])
        }
        router.delete("/v1/account/devices/:id") { request, context -> Response in
            let user = try context.requireIdentity()
            let id = try context.parameters.require("id")
            guard try await !accounts.signOut(userID: user.userID, only: id).isEmpty else {
                throw APIError(.notFound, "not_found", "no such signed-in device")
            }
            return Response(status: .noContent)
        }
        router.delete("/v1/account/devices") { request, context -> Response in
            let user = try context.requireIdentity()
            let ended = try await accounts.signOut(userID: user.userID, only: nil)
            return .json(["signed_out": .int(Int64(ended.count))])
        }
        router.delete("/v1/account") { request, context -> Response in
            let user = try context.requireIdentity()
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
}
