import Foundation
import GRDB
import NotedCore
import Testing

@testable import NotedServer

/// A full disk (SQLITE_FULL) during a push: the change is rejected `rate_limited` (retryable),
/// nothing is stored, reads still work, and the same change applies once space returns.
/// SQLite's `max_page_count` makes the database file full exactly like a full disk does.
/// scripts/faults does the same with a real tmpfs filled by a file.
@Suite struct DiskFullTests {
    @Test func fullDatabaseRejectsRetryablyAndRecovers() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("noted-full-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try SQLiteStore(path: dir.appendingPathComponent("noted.sqlite").path, limits: Limits())
        try await store.migrate()
        let user = UUID().uuidString.lowercased()
        #expect(
            try await store.createUser(
                UserAccount(id: user, username: "full", usernameKey: "full", passwordHash: "x"), now: Date()))
        func push(_ json: JSONValue) async throws -> JSONValue {
            let change = try ChangeParser().parse(json)
            return try await store.push(
                change, context: PushContext(userID: user, device: nil, now: Date(), bodyHash: change.json.jsonString)
            ).reply.json
        }
        let first = UUID().uuidString.lowercased()
        let ack = try await push([
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(first),
            "baseRev": 0, "op": "upsert", "fields": ["title": ["set": "before"]],
        ])
        #expect(ack["status"] == "applied")

        let pages = try await store.pool.write { try Int.fetchOne($0, sql: "PRAGMA page_count") ?? 0 }
        try await store.pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA max_page_count = \(pages)") }
        let big: JSONValue = [
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes",
            "id": .string(UUID().uuidString.lowercased()),
            "baseRev": 0, "op": "upsert", "fields": ["body": ["set": .string(String(repeating: "x", count: 200_000))]],
        ]
        var code: ErrorCode?
        do {
            _ = try await push(big)
        } catch let error as ProtocolError {
            code = error.code
        }
        #expect(code == .rateLimited, "a push on a full database: \(String(describing: code))")
        #expect(try await store.latestSeq(userID: user) == 1, "nothing stored by the failed push")
        #expect(
            try await store.record(userID: user, collection: "notes", id: first)?.fields["title"] == "before",
            "reads still served")

        try await store.pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA max_page_count = 1073741823") }
        let retried = try await push(big)
        #expect(retried["status"] == "applied", "the same change applies once space returns")
        #expect(try await store.latestSeq(userID: user) == 2)
    }
}
