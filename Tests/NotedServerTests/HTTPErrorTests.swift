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
}
