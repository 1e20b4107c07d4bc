import Foundation
import NotedCore
import Testing
@testable import NotedServer

/// Several server nodes over one PostgreSQL database.
@Suite struct ClusterTests {
    @Test func aChangeCommittedOnOneNodeReachesTheUsersConnectionsOnAnother() async throws {
        guard Backend.postgresURL != nil else { return }
        try await TestServer.withTwoNodes(.postgres) { nodeA, nodeB in
            let user = try await nodeA.makeUser()
            let stranger = try await nodeB.makeUser()
            let onA = try await nodeA.connect(user)
            let onB = try await nodeB.connect(user)
            let strangerOnB = try await nodeB.connect(stranger)
            let id = uuid()
            let ack = try await onA.push(change(id, baseRev: 0, ["title": ["set": "from A"]]))
            let created = try await onB.receive(type: "change")
            #expect(created["id"] == .string(id))
            #expect(created["rev"] == 1 && created["prevRev"] == 0)
            #expect(created["seq"] == ack["seq"])
            #expect(created["fields"]?["title"] == ["set": "from A"])
            _ = try await onA.push(change(id, baseRev: 1, op: "delete"))
            let deleted = try await onB.receive(type: "change")
            #expect(deleted["op"] == "delete" && deleted["prevRev"] == 1)
            try await strangerOnB.expectSilence()
            try await onA.expectSilence(for: .milliseconds(200))
            await onA.close()
            await onB.close()
            await strangerOnB.close()
        }
    }

    @Test func concurrentPushesOnTwoNodesGetDistinctSeqsAndOneCCIDResult() async throws {
        guard Backend.postgresURL != nil else { return }
        try await TestServer.withTwoNodes(.postgres) { nodeA, nodeB in
            let user = try await nodeA.makeUser()
            let onA = try await nodeA.connect(user)
            let onB = try await nodeB.connect(user)
            let shared = change(uuid(), baseRev: 0, ["title": ["set": "once"]])
            async let fromA = onA.push([shared] + (0..<10).map { _ in change(uuid(), baseRev: 0) })
            async let fromB = onB.push([shared] + (0..<10).map { _ in change(uuid(), baseRev: 0) })
            let answers = try await fromA + fromB
            #expect(answers.filter { $0["status"] == "duplicate" }.count == 1)
            let seqs = answers.filter { $0["status"] == "applied" }.compactMap { $0["seq"]?.intValue }
            #expect(Set(seqs) == Set(1...21))
            await onA.close()
            await onB.close()
        }
    }
}
