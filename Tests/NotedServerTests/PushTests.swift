import DiffMatchPatch
import Foundation
import HTTPTypes
import NotedCore
import Testing

@testable import NotedServer

@Suite struct PushTests {
    static let backends = Backend.available
    let dmp = DiffMatchPatch()

    func delta(_ old: String, _ new: String) -> JSONValue {
        ["delta": .string(dmp.toDelta(dmp.diff(old, new)))]
    }

    @Test(arguments: backends) func createThenExactUpdateIsApplied(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            let created = try await connection.push(
                change(id, baseRev: 0, ["title": ["set": "Groceries"], "body": ["set": "milk"]]))
            #expect(created["type"] == "ack")
            #expect(created["status"] == "applied")
            #expect(created["rev"] == 1)
            #expect(created["seq"] == 1)
            #expect(created["collection"] == "notes" && created["id"] == .string(id))
            let updated = try await connection.push(change(id, baseRev: 1, ["body": delta("milk", "milk, eggs")]))
            #expect(updated["status"] == "applied")
            #expect(updated["rev"] == 2)
            #expect(updated["fields"] == nil)
            let record = try await server.request(.get, "/v1/records/notes/\(id)", token: user.accessToken)
            #expect(record.json["fields"]?["body"] == "milk, eggs")
            #expect(record.json["fields"]?["title"] == "Groceries")
            #expect(record.json["fields"]?["tags"] == [])
            #expect(record.json["rev"] == 2)
            await connection.close()
        }
    }

    @Test(arguments: backends) func nonOverlappingConcurrentEditsBothSurvive(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            let base = "The first paragraph talks about apples.\n\nThe last paragraph talks about pears."
            _ = try await connection.push(change(id, baseRev: 0, ["body": ["set": .string(base)]]))
            let mine = base.replacingOccurrences(of: "apples", with: "green apples")
            let theirs = base.replacingOccurrences(of: "pears", with: "ripe pears")
            #expect(
                try await connection.push(change(id, baseRev: 1, ["body": delta(base, mine)]))["status"] == "applied")
            let merged = try await connection.push(change(id, baseRev: 1, ["body": delta(base, theirs)]))
            #expect(merged["status"] == "merged")
            #expect(merged["rev"] == 3)
            #expect(merged["conflicts"] == [])
            let expected = "The first paragraph talks about green apples.\n\nThe last paragraph talks about ripe pears."
            #expect(merged["fields"]?["body"] == .string(expected))
            #expect(merged["fields"]?["pinned"] == false)
            await connection.close()
        }
    }

    @Test(arguments: backends) func overlappingEditsKeepAConflictRevision(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            let base = "The quick brown fox jumps over the lazy dog"
            _ = try await connection.push(change(id, baseRev: 0, ["body": ["set": .string(base)]]))
            let rewritten = "Something else entirely, written on another device"
            _ = try await connection.push(change(id, baseRev: 1, ["body": delta(base, rewritten)]))
            let intended = "The slow brown fox jumps over the lazy dog"
            let merged = try await connection.push(change(id, baseRev: 1, ["body": delta(base, intended)]))
            #expect(merged["status"] == "merged")
            #expect(merged["conflicts"] == ["body"])
            let rev = try #require(merged["rev"]?.intValue)
            let list = try await server.request(.get, "/v1/records/notes/\(id)/revisions", token: user.accessToken)
            let conflicts = list.json["revisions"]?.arrayValue?.filter { $0["conflict"] == true } ?? []
            #expect(conflicts.count == 1)
            #expect(conflicts.first?["rev"] == .int(rev))
            let kept = try await server.request(
                .get, "/v1/records/notes/\(id)/revisions/\(rev)?conflict=true", token: user.accessToken)
            #expect(kept.status == .ok)
            #expect(kept.json["fields"]?["body"] == .string(intended))
            await connection.close()
        }
    }

    @Test(arguments: backends) func setsMergeByAddAndRemoveAndScalarsByServerOrder(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            _ = try await connection.push(change(id, baseRev: 0, ["tags": ["set": ["a"]], "folder": ["set": "inbox"]]))
            _ = try await connection.push(change(id, baseRev: 1, ["tags": ["add": ["b"]], "folder": ["set": "work"]]))
            let merged = try await connection.push(
                change(
                    id, baseRev: 1,
                    ["tags": ["add": ["c"], "remove": ["a"]], "folder": ["set": "home"], "pinned": ["set": true]]))
            #expect(merged["status"] == "merged")
            #expect(merged["fields"]?["tags"] == ["b", "c"])
            #expect(merged["fields"]?["folder"] == "home")
            #expect(merged["fields"]?["pinned"] == true)
            await connection.close()
        }
    }

    @Test(arguments: backends) func aStaleWholeTextSetKeepsTheReplacedTextAsAConflictRevision(backend: Backend)
        async throws
    {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            _ = try await connection.push(change(id, baseRev: 0, ["body": ["set": "v1"]]))
            _ = try await connection.push(change(id, baseRev: 1, ["body": ["set": "other device"]]))
            let merged = try await connection.push(change(id, baseRev: 1, ["body": ["set": "stale"]]))
            #expect(merged["fields"]?["body"] == "stale")
            let kept = try await server.request(
                .get, "/v1/records/notes/\(id)/revisions/3?conflict=true", token: user.accessToken)
            #expect(kept.json["fields"]?["body"] == "other device")
            await connection.close()
        }
    }

    @Test(arguments: backends) func aResendIsAnsweredDuplicateAndAppliedOnce(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            let create = change(id, baseRev: 0, ["title": ["set": "once"]])
            let first = try await connection.push(create)
            let second = try await connection.push(create)
            #expect(second["status"] == "duplicate")
            #expect(second["rev"] == first["rev"])
            #expect(second["seq"] == first["seq"])
            #expect(try await connection.latestSeq() == 1)
            await connection.close()
        }
    }

    @Test(arguments: backends) func answersEchoTheRequestID(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let answers = try await connection.push(
                [change(uuid(), baseRev: 0), change("nope", baseRev: 0)], rid: "r-1")
            #expect(answers.map { $0["rid"] } == ["r-1", "r-1"])
            try await connection.send(["type": "pull", "since": 0, "rid": 42])
            #expect(try await connection.receive(type: "changes")["rid"] == 42)
            await connection.close()
        }
    }

    @Test(arguments: backends) func trashingAndEditingATrashedNoteApplies(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            _ = try await connection.push(change(id, baseRev: 0, ["title": ["set": "t"]]))
            _ = try await connection.push(change(id, baseRev: 1, ["trashed": ["set": true]]))
            let edit = try await connection.push(change(id, baseRev: 2, ["title": ["set": "edited"]]))
            #expect(edit["status"] == "applied")
            let record = try await server.request(.get, "/v1/records/notes/\(id)", token: user.accessToken)
            #expect(record.json["fields"]?["trashed"] == true)
            #expect(record.json["fields"]?["title"] == "edited")
            await connection.close()
        }
    }

    @Test(arguments: backends) func httpPushAndChangesWork(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let id = uuid()
            let pushed = try await server.request(
                .post, "/v1/push", json: ["changes": [change(id, baseRev: 0, ["title": ["set": "http"]])]],
                token: user.accessToken)
            #expect(pushed.status == .ok)
            #expect(pushed.json["results"]?[0]?["status"] == "applied")
            let changes = try await server.request(.get, "/v1/changes?since=0&limit=10", token: user.accessToken)
            #expect(changes.json["records"]?.arrayValue?.count == 1)
            #expect(changes.json["cursor"] == 1)
            #expect(changes.json["more"] == false)
            #expect(changes.json["reset"] == false)
            let unauthenticated = try await server.request(.get, "/v1/changes?since=0")
            #expect(unauthenticated.status == .unauthorized)
        }
    }
}

extension JSONValue {
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }
}
