import Foundation
import GRDB
import NotedCore
import TestSupport
import Testing

@testable import NotedClient

/// The full-text index holds no copy of the text (client migration v10): a row leaves it only
/// when told the words it held, so an index that missed one write keeps stale words for good.
/// Random mixes of local writes and pulled pages (a record twice in one page too), checked
/// against the records themselves after every step.
@Suite struct SearchIndexTests {
    static let words = [
        "apricot", "bramble", "chestnut", "damson", "elder", "fennel", "ginger", "hazel", "juniper", "kale",
    ]

    @Test func theIndexAgreesWithTheRecordsThroughAnyMixOfWrites() async throws {
        var random = TestSeed.generator(for: "theIndexAgreesWithTheRecordsThroughAnyMixOfWrites")
        let store = try LocalStore.inMemory()
        // Enough ids that pages keep bringing new ones (and a new one twice) to the end.
        let pool = (0..<400).map { String(format: "00000000-0000-4000-8000-%012d", $0) }
        var rev: Int64 = 0
        var cursor: Int64 = 0
        func text(_ count: ClosedRange<Int>) -> String {
            (0..<Int.random(in: count, using: &random)).map { _ in Self.words.randomElement(using: &random)! }.joined(
                separator: " ")
        }
        for step in 0..<250 {
            var did = ""
            switch Int.random(in: 0..<10, using: &random) {
            case 0...1:
                try await store.create(NoteFields(title: text(0...2), body: text(1...4)))
                did = "create"
            case 2:
                if let note = try await store.list().randomElement(using: &random) {
                    let body = text(0...4)
                    try await store.update(note.id) { $0.body = body }
                    did = "update \(note.id)"
                }
            case 3:
                if let note = try await store.list().randomElement(using: &random) {
                    try await store.purge(note.id)
                    did = "purge \(note.id)"
                }
            case 4:
                let all = try await store.list().map(\.id)
                let keep = Set(all.filter { _ in Bool.random(using: &random) })
                _ = try await store.dropAbsent(keeping: keep)
                did = "dropAbsent"
            default:
                // A page: new records, newer states, tombstones; an id may come twice.
                var records: [NotedCore.Record] = []
                var ids: [String] = []
                for _ in 0..<Int.random(in: 1...6, using: &random) {
                    rev += 1
                    // Now and then an id the page already brought.
                    let id =
                        !ids.isEmpty && Bool.random(using: &random)
                        ? ids.randomElement(using: &random)! : pool.randomElement(using: &random)!
                    ids.append(id)
                    let deleted = Int.random(in: 0..<5, using: &random) == 0
                    records.append(
                        server(id, rev: rev, NoteFields(title: text(0...1), body: text(1...3)), deleted: deleted))
                }
                cursor = rev
                _ = try await store.storePage(records: records, cursor: cursor)
                did = "page \(records.map { "\($0.id.suffix(2))@\($0.rev)\($0.deleted ? "x" : "")" })"
            }
            try await expectIndexMatchesRecords(store, step: step, did: did)
        }
    }

    @Test func aNewRecordThatAPageBringsTwiceIsIndexedWithItsLastText() async throws {
        let store = try LocalStore.inMemory()
        let id = "00000000-0000-4000-8000-000000000001"
        _ = try await store.storePage(
            records: [
                server(id, rev: 1, NoteFields(title: "", body: "apricot")),
                server(id, rev: 2, NoteFields(title: "", body: "bramble")),
            ], cursor: 2)
        #expect(try await store.search("apricot").isEmpty)
        #expect(try await store.search("bramble").map(\.id) == [id])
        // Its next text replaces the indexed one exactly (a stale index fails here or in SQLite).
        _ = try await store.storePage(records: [server(id, rev: 3, NoteFields(title: "", body: "chestnut"))], cursor: 3)
        #expect(try await store.search("bramble").isEmpty)
        #expect(try await store.search("chestnut").map(\.id) == [id])
    }

    /// For every word: the rows the index finds are exactly the records whose searchable text
    /// has it, and `search` finds exactly the visible notes that have it.
    private func expectIndexMatchesRecords(_ store: LocalStore, step: Int, did: String) async throws {
        let (indexed, texts) = try await store.writer.read { db in
            var indexed: [String: Set<Int64>] = [:]
            for word in Self.words {
                indexed[word] = Set(
                    try Int64.fetchAll(
                        db, sql: "SELECT rowid FROM record_fts WHERE record_fts MATCH ?", arguments: ["\"\(word)\""]))
            }
            let rows = try Row.fetchAll(db, sql: "SELECT rowKey, local FROM record")
            let texts = Dictionary(
                uniqueKeysWithValues: rows.map { row -> (Int64, String) in
                    let fields = (try? JSONValue.parse(row["local"] as String))?.objectValue ?? [:]
                    return (
                        row["rowKey"],
                        [fields["title"]?.stringValue, fields["body"]?.stringValue].compactMap { $0 }.joined(
                            separator: " ")
                    )
                })
            return (indexed, texts)
        }
        let visible = try await store.list()
        for word in Self.words {
            let expected = Set(texts.filter { $0.value.split(separator: " ").contains(Substring(word)) }.keys)
            #expect(indexed[word] == expected, "step \(step) (\(did)): the index for \"\(word)\" (\(TestSeed.replay))")
            let found = Set(try await store.search(word).map(\.id))
            let shouldFind = Set(
                visible.filter { "\($0.title) \($0.body)".split(separator: " ").contains(Substring(word)) }.map(\.id))
            #expect(found == shouldFind, "step \(step) (\(did)): search \"\(word)\" (\(TestSeed.replay))")
        }
    }

    @Test func aStoreFromTheSearchIndexWithItsOwnCopyKeepsFindingItsNotes() async throws {
        // v9's index (a copy of the text) replaced by v10's: a store written before keeps its
        // search, and its later edits and deletes leave no stale words (the fixture test in
        // ClientMigrationTests covers a v4 store; this one the step itself, on a file).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("noted-fts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("client.sqlite").path
        do {
            let queue = try DatabaseQueue(path: path)
            let migrator = LocalStore.migrator
            try await queue.writeWithoutTransaction { db in
                db.add(function: LocalStore.searchText(SearchText(SchemaRegistry([.notes]))))
                db.add(
                    function: DatabaseFunction("noted_search_index_deferred", argumentCount: 0, pure: false) { _ in
                        false
                    })
            }
            try migrator.migrate(queue, upTo: "v9: search index written per page")
            try await queue.write { db in
                for (index, body) in ["apricot bramble", "chestnut", "damson elder"].enumerated() {
                    // Synced at rev 1, the shadow a copy of the text as v9 wrote it.
                    let local = JSONValue.object(["title": "", "body": .string(body)]).jsonString
                    try db.execute(
                        sql: """
                            INSERT INTO record (id, collection, local, shadow, rev, createdAt, updatedAt)
                            VALUES (?, 'notes', ?, ?, 1, '2026-11-26 10:00:00.000', '2026-11-26 10:00:00.000')
                            """, arguments: ["00000000-0000-4000-8000-00000000000\(index)", local, local])
                }
                // Pending edits as v9 left them: a note never sent, and a synced note edited since
                // (its shadow the older text).
                let edited = SyncState.created.json.jsonString
                try db.execute(
                    sql: """
                        INSERT INTO record (id, collection, local, shadow, rev, createdAt, updatedAt, sync)
                        VALUES ('00000000-0000-4000-8000-000000000003', 'notes', ?, NULL, 0, '2026-11-26 10:00:00.000', '2026-11-26 10:00:00.000', ?),
                               ('00000000-0000-4000-8000-000000000004', 'notes', ?, ?, 1, '2026-11-26 10:00:00.000', '2026-11-26 10:00:00.000', ?)
                        """,
                    arguments: [
                        JSONValue.object(["title": "", "body": "ginger"]).jsonString, edited,
                        JSONValue.object(["title": "", "body": "hazel juniper"]).jsonString,
                        JSONValue.object(["title": "", "body": "hazel"]).jsonString, edited,
                    ])
                #expect(
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM record_fts WHERE record_fts MATCH 'chestnut'") == 1)
            }
        }
        let store = try LocalStore.open(path: path)
        #expect(try await store.search("chestnut").map(\.id) == ["00000000-0000-4000-8000-000000000001"])
        // The pending edits are found and go out as they would have.
        #expect(try await store.search("ginger").map(\.id) == ["00000000-0000-4000-8000-000000000003"])
        #expect(try await store.search("juniper").map(\.id) == ["00000000-0000-4000-8000-000000000004"])
        #expect(try await store.pendingCount() == 2)
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let bodies = Dictionary(uniqueKeysWithValues: try changes.map { ($0.recordID, try JSONValue.parse($0.body)) })
        #expect(bodies["00000000-0000-4000-8000-000000000003"]?["baseRev"] == 0)
        #expect(bodies["00000000-0000-4000-8000-000000000003"]?["fields"]?["body"] == ["set": "ginger"])
        #expect(bodies["00000000-0000-4000-8000-000000000004"]?["baseRev"] == 1)
        #expect(bodies["00000000-0000-4000-8000-000000000004"]?["fields"]?["body"]?["delta"] != nil)
        try await store.update("00000000-0000-4000-8000-000000000000") { $0.body = "fennel" }
        // A tombstone in a page deletes the row (the delete trigger).
        _ = try await store.storePage(
            records: [server("00000000-0000-4000-8000-000000000002", rev: 2, NoteFields(), deleted: true)], cursor: 2)
        #expect(try await store.search("apricot").isEmpty)
        #expect(try await store.search("fennel").map(\.id) == ["00000000-0000-4000-8000-000000000000"])
        #expect(try await store.search("damson").isEmpty)
        let copies = try await store.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE name = 'record_fts_content'")
        }
        #expect(copies == 0)
    }
}

@Suite struct DatabaseFileTests {
    @Test func aNewStoreHasLargePagesAndAnOldOneKeepsItsOwn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-pages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fresh = try LocalStore.open(path: directory.appendingPathComponent("new.sqlite").path)
        #expect(try await fresh.writer.read { try Int.fetchOne($0, sql: "PRAGMA page_size") } == LocalStore.pageSize)
        let oldPath = directory.appendingPathComponent("old.sqlite").path
        try await DatabaseQueue(path: oldPath).write { try $0.execute(sql: "CREATE TABLE before_noted(x)") }
        let old = try LocalStore.open(path: oldPath)
        #expect(try await old.writer.read { try Int.fetchOne($0, sql: "PRAGMA page_size") } == 4096)
        let note = try await old.create(NoteFields(title: "still", body: "works"))
        #expect(try await old.search("works").map(\.id) == [note.id])
    }
}

@Suite struct SearchIndexReindexTests {
    static let worries = try! CollectionSchema(
        json: JSONValue.parse(
            """
            {"name": "worries", "version": 1, "fields": {"text": {"kind": "text", "searchable": true}}}
            """))

    /// The index holds what is `searchable` when each record was written; a store opened with
    /// other collections indexes everything again ('delete-all' on the contentless index), and
    /// the edits after that leave it exact: old words gone, new ones found.
    @Test func openingWithOtherCollectionsIndexesAgainAndEditsStayExact() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-reindex-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("client.sqlite").path
        let note: Note
        let worryID: String
        do {
            let store = try LocalStore.open(path: path, collections: [Self.worries])
            note = try await store.create(NoteFields(title: "apricot", body: "bramble"))
            worryID = try await store.transaction { try $0.create("worries", fields: ["text": "chestnut"]).id }.value
            #expect(
                try await store.records("worries", matching: RecordQuery(search: "chestnut")).map(\.id) == [worryID])
        }
        // Without the worries: their text is no longer searchable (nothing of it indexed).
        do {
            let store = try LocalStore.open(path: path)
            #expect(try await store.search("apricot").map(\.id) == [note.id])
            try await store.update(note.id) { $0.body = "damson" }
            #expect(try await store.search("bramble").isEmpty)
            #expect(try await store.search("damson").map(\.id) == [note.id])
            let hits = try await store.writer.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM record_fts WHERE record_fts MATCH 'chestnut'")
            }
            #expect(hits == 0)
        }
        // With them again: indexed again, and edits of both kinds replace their words exactly.
        let store = try LocalStore.open(path: path, collections: [Self.worries])
        #expect(try await store.records("worries", matching: RecordQuery(search: "chestnut")).map(\.id) == [worryID])
        _ = try await store.transaction { try $0.update("worries", id: worryID) { $0["text"] = "elder" } }
        try await store.update(note.id) { $0.title = "fennel" }
        #expect(try await store.records("worries", matching: RecordQuery(search: "chestnut")).isEmpty)
        #expect(try await store.records("worries", matching: RecordQuery(search: "elder")).map(\.id) == [worryID])
        #expect(try await store.search("apricot").isEmpty)
        #expect(try await store.search("fennel damson").map(\.id) == [note.id])
        try await store.writer.write { db in
            try db.execute(sql: "INSERT INTO record_fts(record_fts) VALUES ('integrity-check')")
        }
    }
}
