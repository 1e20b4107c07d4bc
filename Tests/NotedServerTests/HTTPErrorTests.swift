import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

@Suite struct HTTPErrorTests {
    static let backends = Backend.available

    @Test(arguments: backends) func httpErrorsHaveFittingStatusesAndChangeNothing(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.limits.maxChangesPerPush = 2 }) { server in
            let user = try await server.makeUser()
            let token = user.accessToken
            let tooMany = try await server.request(
                .post, "/v1/push",
                json: [
                    "changes": [change(uuid(), baseRev: 0), change(uuid(), baseRev: 0), change(uuid(), baseRev: 0)]
                ], token: token)
            #expect(tooMany.status == .contentTooLarge && tooMany.json["error"] == "too_large")
            let form = try await server.request(.post, "/v1/push", body: "changes=1", token: token)
            #expect(form.status == .unsupportedMediaType && form.json["error"] == "unsupported_media_type")
            let notJSON = try await server.request(
                .post, "/v1/push", body: "changes=1", token: token, headers: [.contentType: "application/json"])
            #expect(notJSON.status == .badRequest && notJSON.json["error"] == "bad_request")
            #expect(try await server.request(.get, "/v1/changes?since=-1", token: token).status == .badRequest)
            #expect(
                try await server.request(.get, "/v1/changes?since=0&limit=5000", token: token).status == .badRequest)
            #expect(
                try await server.request(.get, "/v1/records/todos/\(uuid())", token: token).json["error"]
                    == "unknown_collection")
            #expect(try await server.request(.get, "/v1/records/notes/NOT-A-UUID", token: token).status == .badRequest)
            #expect(try await server.request(.get, "/v1/changes?since=0", token: "garbage").status == .unauthorized)
            // Every signed-in route is behind the one authenticator: no token is 401 before the
            // handler reads anything (a bad path or query included), and the scheme's case and
            // the spaces around the token do not matter (RFC 9110 section 11.1).
            for (method, path) in [
                (HTTPRequest.Method.get, "/v1/changes?since=-1"), (.post, "/v1/push"), (.get, "/v1/collections"),
                (.get, "/v1/records/notes/NOT-A-UUID"), (.get, "/v1/account"), (.get, "/v1/account/devices"),
                (.get, "/v1/blobs"), (.put, "/v1/blobs/nothex"), (.post, "/v1/import"), (.get, "/v1/export"),
            ] {
                let answer = try await server.request(method, path)
                #expect(answer.status == .unauthorized && answer.json["error"] == "unauthenticated", "\(path)")
            }
            for header in ["bearer \(token)", "BEARER   \(token)  ", "Bearer \(token)"] {
                let answer = try await server.request(.get, "/v1/collections", headers: [.authorization: header])
                #expect(answer.status == .ok, "\(header.prefix(9))")
            }
            for header in ["Bearer", "Bearer  ", "Basic \(token)", "Bearer\(token)"] {
                let answer = try await server.request(.get, "/v1/collections", headers: [.authorization: header])
                #expect(answer.status == .unauthorized, "\(header.prefix(9))")
            }
            let changes = try await server.request(.get, "/v1/changes?since=0", token: token)
            #expect(changes.json["records"] == [] && changes.json["cursor"] == 0)

            let id = uuid()
            _ = try await server.request(.post, "/v1/push", json: ["changes": [change(id, baseRev: 0)]], token: token)
            _ = try await server.request(
                .post, "/v1/push", json: ["changes": [change(id, baseRev: 1, op: "delete")]], token: token)
            let gone = try await server.request(.get, "/v1/records/notes/\(id)", token: token)
            #expect(gone.status == .gone && gone.json["error"] == "gone")
            let plain = try await server.request(.get, "/v1/sync")
            #expect(plain.status == .upgradeRequired)
        }
    }

    /// HTTP pushes are limited per user as WebSocket pushes are per connection: beyond
    /// `maxPushesPerSecond` in a second, 429 `rate_limited` with Retry-After, nothing stored.
    /// The limit is 0 here, so that the outcome does not depend on how fast the machine is (a
    /// limit of 2 with 8 pushes at once let all through on a loaded machine, each in its own
    /// second); other tests push over HTTP under the default limit.
    @Test(arguments: backends) func httpPushesBeyondTheRateAreRefusedAndStoreNothing(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.maxPushesPerSecond = 0 }) { server in
            let user = try await server.makeUser()
            let refused = try await server.request(
                .post, "/v1/push", json: ["changes": [change(uuid(), baseRev: 0)]], token: user.accessToken)
            #expect(refused.status.code == 429 && refused.json["error"] == "rate_limited")
            #expect(refused.headers[.retryAfter] != nil)
            let stored = try await server.request(.get, "/v1/changes?since=0", token: user.accessToken)
            #expect(stored.json["records"] == [])
        }
    }
}
