import Foundation
import GRDB
import NotedCore
import Testing

@testable import NotedClient

/// A local database written by the previous version (schema v4, the sync state in 14 columns)
/// opens with this one, pending edits included.
///
/// `Fixtures/client-v4.sqlite` was written by commit 78e3c11's `LocalStore` through its own
/// API (creates, edits, outbox, acks, rejects, a page, a snapshot's `dropAbsent`), one record
/// per state: 1 synced; 2 in flight; 3 in flight with a newer server state seen and edited
/// since; 4 purge in flight; 5 refused for good; 6 merged with a conflict; 7 in flight and
/// absent from a snapshot ending at seq 40; 8 to resend as `set` after `base_unavailable`;
/// 9 purge not yet sent; 10 create not yet sent; 11 edits that did not fit onto a merged ack,
/// to resend as stale `set`s against rev 1.
@Suite struct ClientMigrationTests {
    static func id(_ n: Int) -> String { String(format: "00000000-0000-4000-8000-%012d", n) }

    func fixtureCopy() throws -> String {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "Fixtures/client-v4.sqlite")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("noted.sqlite").path
        try FileManager.default.copyItem(atPath: source.path, toPath: path)
        return path
    }

    @Test func aV4DatabaseKeepsEveryRecordAndItsPendingEdits() async throws {
        let path = try fixtureCopy()
        // What v4 stored, read by column name before the migration.
        let v4 = try DatabaseQueue(path: path)
        let oldBodies = try await v4.read { db in
            try Dictionary(
                uniqueKeysWithValues: Row.fetchAll(
                    db, sql: "SELECT id, inflightBody FROM record WHERE inflightBody IS NOT NULL"
                )
                .map { ($0["id"] as String, $0["inflightBody"] as String) })
        }
        try v4.close()
        #expect(oldBodies.count == 4)

        let store = try LocalStore.open(path: path)
        let columns = try await store.writer.read { db in try db.columns(in: "record").map(\.name) }
        #expect(
            Set(columns) == [
                "rowKey", "id", "collection", "local", "shadow", "rev", "createdAt", "updatedAt", "sync", "syncFlags",
                "space",
            ])
        // v11: every record of before is in the personal space, and no shared space is known.
        #expect(
            try await store.writer.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM record WHERE space IS NOT NULL")
            } == 0)
        #expect(try await store.spaces().isEmpty)
        #expect(try await store.cursor() == 40)
        #expect(try await store.meta("user") == "fixture-user")

        let visible = Set(try await store.list().map(\.id))
        #expect(visible == Set([1, 2, 3, 5, 6, 7, 8, 10, 11].map(Self.id)), "4 and 9 are being purged")
        #expect(try await store.pendingCount() == 8, "all but 1 (synced), 5 (refused) and 6 (merged)")
        #expect(try await store.syncErrors().map(\.id) == [Self.id(5)])
        #expect(try await store.syncErrors().first?.message == "invalid_field: title: not allowed here")
        #expect(Set(try await store.conflicts().map(\.id)) == [Self.id(6), Self.id(11)])
        #expect(try await store.note(Self.id(3))?.body == "body 3 hello world, sent, and more")
        // v6's one full-text index over every collection was built from what v4 held.
        let found = try await store.search("hello")
        #expect(found.contains { $0.id == Self.id(3) })
        #expect(Set(found.map(\.id)).isSubset(of: visible))
        #expect(try await store.search("nowhere-in-the-fixture").isEmpty)

        let (changes, _) = try await store.outbox(excluding: [], limit: 100)
        let byID = Dictionary(uniqueKeysWithValues: changes.map { ($0.recordID, $0) })
        #expect(changes.count == 8)
        for (id, body) in oldBodies {
            #expect(byID[id]?.body == body, "the change in flight for \(id) is resent byte for byte")
        }
        #expect(byID[Self.id(8)]?.sent["fields"] == ["body": ["set": "body 8 hello world!"]])
        #expect(byID[Self.id(8)]?.sent["baseRev"] == 1)
        #expect(byID[Self.id(9)]?.sent["op"] == "delete")
        #expect(byID[Self.id(10)]?.sent["baseRev"] == 0)
        #expect(byID[Self.id(10)]?.sent["fields"]?["title"] == ["set": "note 10"])
        #expect(byID[Self.id(11)]?.sent["fields"] == ["body": ["set": "alpha BETA! gamma delta"]])
        #expect(byID[Self.id(11)]?.sent["baseRev"] == 1, "the stale base v4 chose")

        // 3: the server had renamed it (rev 2, seen while in flight); the merged ack lands
        // and the edit made since the send is rebased onto it.
        let three = try #require(byID[Self.id(3)])
        _ = try await store.applyAck(
            Ack(
                ccid: three.ccid, collection: "notes", id: three.recordID, rev: 3, seq: 41, status: .merged,
                fields: NoteFields(title: "note 3 renamed", body: "body 3 hello world, sent").json))
        let note3 = try #require(try await store.note(Self.id(3)))
        #expect(note3.title == "note 3 renamed" && note3.body == "body 3 hello world, sent, and more" && note3.rev == 3)
        // 7: applied before the snapshot that no longer had it: purged since; only a pin changed.
        let seven = try #require(byID[Self.id(7)])
        let effect = try await store.applyAck(
            Ack(ccid: seven.ccid, collection: "notes", id: seven.recordID, rev: 2, seq: 39, status: .applied))
        #expect(effect.removed == [Self.id(7)] && effect.forked.isEmpty)
        // 4: the purge is acknowledged.
        let four = try #require(byID[Self.id(4)])
        _ = try await store.applyAck(
            Ack(ccid: four.ccid, collection: "notes", id: four.recordID, rev: 2, seq: 42, status: .applied))
        let remaining = try await store.writer.read { db in
            try String.fetchAll(db, sql: "SELECT id FROM record ORDER BY id")
        }
        #expect(!remaining.contains(Self.id(4)) && !remaining.contains(Self.id(7)))
    }

    @Test func aDamagedSyncStateIsAClearErrorNotACrash() async throws {
        let store = try LocalStore.open(path: try fixtureCopy())
        try await store.writer.write { db in
            try db.execute(sql: "UPDATE record SET sync = '{\"inflight\":{}}' WHERE id = ?", arguments: [Self.id(2)])
        }
        await #expect(throws: NotedClientError.self) { try await store.note(Self.id(2)) }
        #expect(try await store.note(Self.id(1))?.title == "note 1", "other records still read")
    }
}
