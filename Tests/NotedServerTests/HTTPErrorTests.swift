import Foundation
import NotedCore
import Testing
@testable import NotedServer

@Suite struct HTTPErrorTests {
    static let backends = Backend.available

    @Test(arguments: backends) func httpErrorsHaveFittingStatusesAndChangeNothing(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.limits.maxChangesPerPush = 2 }) { server in
            let user = try await server.makeUser()
            let token = user.accessToken
            let tooMany = try await server.request(.post, "/v1/push", json: ["changes": [change(uuid(), baseRev: 0), change(uuid(), baseRev: 0), change(uuid(), baseRev: 0)]], token: token)
            #expect(tooMany.status == .contentTooLarge && tooMany.json["error"] == "too_large")
            let notJSON = try await server.request(.post, "/v1/push", body: "changes=1", token: token)
            #expect(notJSON.status == .badRequest && notJSON.json["error"] == "bad_request")
            #expect(try await server.request(.get, "/v1/changes?since=-1", token: token).status == .badRequest)
            #expect(try await server.request(.get, "/v1/changes?since=0&limit=5000", token: token).status == .badRequest)
            #expect(try await server.request(.get, "/v1/records/todos/\(uuid())", token: token).json["error"] == "unknown_collection")
            #expect(try await server.request(.get, "/v1/records/notes/NOT-A-UUID", token: token).status == .badRequest)
            #expect(try await server.request(.get, "/v1/changes?since=0", token: "garbage").status == .unauthorized)
            let changes = try await server.request(.get, "/v1/changes?since=0", token: token)
            #expect(changes.json["records"] == [] && changes.json["cursor"] == 0)

            let id = uuid()
            _ = try await server.request(.post, "/v1/push", json: ["changes": [change(id, baseRev: 0)]], token: token)
            _ = try await server.request(.post, "/v1/push", json: ["changes": [change(id, baseRev: 1, op: "delete")]], token: token)
            let gone = try await server.request(.get, "/v1/records/notes/\(id)", token: token)
            #expect(gone.status == .gone && gone.json["error"] == "gone")
            let plain = try await server.request(.get, "/v1/sync")
            #expect(plain.status == .upgradeRequired)
        }
    }

    /// HTTP pushes are limited per user as WebSocket pushes are per connection: beyond
    /// `maxPushesPerSecond` in a second, 429 `rate_limited` with Retry-After, nothing stored.
    @Test(arguments: backends) func httpPushesBeyondTheRateAreRefusedAndStoreNothing(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.maxPushesPerSecond = 2 }) { server in
            let user = try await server.makeUser()
            let ids = (0..<8).map { _ in uuid() }
            // Sent together, so that they fall within one second even on a slow machine.
            let statuses = try await withThrowingTaskGroup(of: (String, Int, String?).self) { group in
                for id in ids {
                    group.addTask {
                        let response = try await server.request(.post, "/v1/push", json: ["changes": [change(id, baseRev: 0)]], token: user.accessToken)
                        return (id, response.status.code, response.headers[.retryAfter])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let refused = statuses.filter { $0.1 == 429 }
            #expect(!refused.isEmpty)
            #expect(refused.allSatisfy { $0.2 != nil })
            let stored = try await server.request(.get, "/v1/changes?since=0", token: user.accessToken)
            let storedIDs = Set((stored.json["records"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
            #expect(storedIDs == Set(statuses.filter { $0.1 == 200 }.map(\.0)))
        }
    }
}
