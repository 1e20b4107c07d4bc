import Foundation
import GRDB
import NotedCore
import Testing

@testable import NotedServer

/// The server acknowledges a change only after its commit; with WAL that commit is durable only
/// with `synchronous = FULL` on the writer connection. GRDB's DatabasePool sets NORMAL after
/// `prepareDatabase` (found by scripts/faults: no fdatasync per commit under strace).
@Suite struct SQLiteDurabilityTests {
    @Test func writerCommitsWithFullSynchronous() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("noted-sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try SQLiteStore(path: dir.appendingPathComponent("noted.sqlite").path, limits: Limits())
        let level = try store.pool.write { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
        #expect(level == 2, "PRAGMA synchronous on the writer: \(String(describing: level)) (2 = FULL)")
    }
}
