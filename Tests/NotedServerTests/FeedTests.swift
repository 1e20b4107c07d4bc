import DiffMatchPatch
import Foundation
import NotedCore
import Testing

@testable import NotedServer

@Suite struct FeedTests {
    static let backends = Backend.available

    @Test(arguments: backends) func pullPagesFollowTheCursor(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            var ids: [String] = []
            for index in 0..<5 {
                let id = uuid()
                ids.append(id)
                _ = try await connection.push(change(id, baseRev: 0, ["title": ["set": .string("note \(index)")]]))
            }
            // Editing the first note moves it to the end of the feed, once.
            _ = try await connection.push(change(ids[0], baseRev: 1, ["title": ["set": "first, edited"]]))
            var since: Int64 = 0
            var seen: [String] = []
            var pages = 0
            while true {
                let page = try await connection.pull(since: since, limit: 2)
                pages += 1
                let records = page["records"]?.arrayValue ?? []
                #expect(records.count <= 2)
                seen += records.compactMap { $0["id"]?.stringValue }
                since = try #require(page["cursor"]?.intValue)
                if page["more"] != true { break }
            }
            #expect(pages == 3)
            #expect(seen == Array(ids[1...]) + [ids[0]])
            #expect(since == 6)
            let empty = try await connection.pull(since: since)
            #expect(empty["records"] == [])
            #expect(empty["more"] == false)
            #expect(empty["cursor"] == 6)
            await connection.close()
        }
    }

    @Test(arguments: backends) func aCursorOlderThanTombstoneRetentionResets(backend: Backend) async throws {
        try await TestServer.with(
            backend,
            configure: {
                $0.tombstoneRetention = .zero
                $0.sweepInterval = .milliseconds(100)
            }
        ) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let kept = uuid()
            let purged = uuid()
            _ = try await connection.push(change(kept, baseRev: 0, ["title": ["set": "kept"]]))
            _ = try await connection.push(change(purged, baseRev: 0, ["title": ["set": "purged"]]))
            #expect(try await connection.push(change(purged, baseRev: 1, op: "delete"))["status"] == "applied")
            var page: JSONValue = .null
            for _ in 0..<50 {
                page = try await connection.pull(since: 1)
                if page["reset"] == true { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            // The reset sends the client back to 0 and holds nothing itself; from 0, the snapshot.
            #expect(page["reset"] == true && page["more"] == true && page["cursor"] == 0 && page["records"] == [])
            let cursor = try #require(page["cursor"]?.intValue)
            let next = try await connection.pull(since: cursor)
            #expect(next["reset"] == false && next["more"] == false)
            #expect(next["records"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [kept])
            await connection.close()
        }
    }

    @Test(arguments: backends) func sinceZeroOmitsTombstones(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            _ = try await connection.push(change(id, baseRev: 0, ["title": ["set": "x"]]))
            _ = try await connection.push(change(id, baseRev: 1, op: "delete"))
            let all = try await connection.pull(since: 0)
            #expect(all["records"] == [])
            let recent = try await connection.pull(since: 1)
            #expect(recent["records"]?[0]?["deleted"] == true)
            #expect(recent["records"]?[0]?["fields"] == [:])
            await connection.close()
        }
    }

    @Test(arguments: backends) func broadcastReachesTheUsersOtherConnectionsOnly(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let alice = try await server.makeUser()
            let bob = try await server.makeUser()
            let first = try await server.connect(alice)
            let second = try await server.connect(alice)
            let other = try await server.connect(bob)
            let id = uuid()
            let ack = try await first.push(change(id, baseRev: 0, ["body": ["set": "Hello world"]]))
            let created = try await second.receive(type: "change")
            #expect(created["id"] == .string(id))
            #expect(created["rev"] == 1 && created["prevRev"] == 0)
            #expect(created["seq"] == ack["seq"])
            #expect(created["op"] == "upsert")
            #expect(created["fields"]?["body"] == ["set": "Hello world"])
            #expect(created["updatedAt"]?.stringValue != nil)
            let body = String(repeating: "A long paragraph of text. ", count: 20)
            _ = try await first.push(change(id, baseRev: 1, ["body": ["set": .string(body)]]))
            _ = try await second.receive(type: "change")
            _ = try await first.push(change(id, baseRev: 2, ["body": ["set": .string(body + "!")]]))
            let edited = try await second.receive(type: "change")
            #expect(edited["prevRev"] == 2)
            let deltaText = try #require(edited["fields"]?["body"]?["delta"]?.stringValue)
            let applied = try DiffMatchPatch().fromDelta(body, deltaText)
            #expect(DiffMatchPatch().text2(applied) == body + "!")
            try await other.expectSilence()
            try await first.expectSilence(for: .milliseconds(200))
            // An HTTP push reaches every connection of the user.
            _ = try await server.request(
                .post, "/v1/push", json: ["changes": [change(uuid(), baseRev: 0)]], token: alice.accessToken)
            #expect(try await first.receive(type: "change")["prevRev"] == 0)
            #expect(try await second.receive(type: "change")["prevRev"] == 0)
            try await other.expectSilence()
            await first.close()
            await second.close()
            await other.close()
        }
    }

    @Test(arguments: backends) func revisionsAreListedAndReadable(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            _ = try await connection.push(change(id, baseRev: 0, ["title": ["set": "one"]]))
            _ = try await connection.push(change(id, baseRev: 1, ["title": ["set": "two"]]))
            let list = try await server.request(.get, "/v1/records/notes/\(id)/revisions", token: user.accessToken)
            let revisions = try #require(list.json["revisions"]?.arrayValue)
            #expect(revisions.map { $0["rev"] } == [1, 2])
            #expect(
                revisions.allSatisfy {
                    $0["device"]?.stringValue != nil && $0["ccid"]?.stringValue != nil && $0["conflict"] == false
                })
            let first = try await server.request(.get, "/v1/records/notes/\(id)/revisions/1", token: user.accessToken)
            #expect(first.json["fields"]?["title"] == "one")
            let missing = try await server.request(.get, "/v1/records/notes/\(id)/revisions/9", token: user.accessToken)
            #expect(missing.status == .notFound)
            await connection.close()
        }
    }

    @Test(arguments: backends) func healthAndMetricsAnswer(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            #expect(try await server.request(.get, "/health").status == .ok)
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            _ = try await connection.push(change(uuid(), baseRev: 0))
            _ = try await connection.push(change("bad", baseRev: 0))
            let response = try await server.client.execute(uri: "/metrics", method: .get, headers: [:], body: nil)
            let text = String(buffer: response.body)
            for name in [
                "noted_sync_connections", "noted_sync_messages_in_total", "noted_pushes_total{status=\"applied\"}",
                "noted_rejects_total{code=\"bad_request\"}", "noted_push_to_ack_seconds_bucket", "noted_merges_total",
            ] {
                #expect(text.contains(name), "metrics lack \(name)")
            }
            await connection.close()
        }
    }
}
