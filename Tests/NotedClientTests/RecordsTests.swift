import Foundation
import NotedClient
import NotedCore
import Testing

/// An app's own records on Noted's engine: the generic, typed API (`SyncedRecord`, `Records`,
/// `LocalTransaction`), locally and against the real server.
@Suite struct RecordsTests {
    static let worriesSchema = try! CollectionSchema(
        json: JSONValue.parse(
            """
            {"name": "worries", "version": 1, "fields": {
              "text":      {"kind": "text", "searchable": true},
              "intensity": {"kind": "scalar", "types": ["number"], "min": 0, "max": 10, "default": 0, "indexed": true},
              "category":  {"kind": "scalar", "types": ["string"], "enum": ["health", "work", "other"], "default": "other", "indexed": true},
              "tags":      {"kind": "set"},
              "resolved":  {"kind": "scalar", "types": ["bool"], "default": false},
              "remindAt":  {"kind": "scalar", "types": ["string", "null"], "default": null}
            }}
            """))

    struct Worry: SyncedRecord {
        static let schema = RecordsTests.worriesSchema
        var text = ""
        var intensity = 0
        var category = "other"
        var tags: [String] = []
        var resolved = false
        var remindAt: String?
    }

    static let booksSchema = try! CollectionSchema(
        json: JSONValue.parse(
            """
            {"name": "books", "version": 1, "fields": {
              "title": {"kind": "text", "searchable": true},
              "status": {"kind": "scalar", "types": ["string"], "enum": ["want", "reading", "finished", "abandoned"], "default": "want", "indexed": true},
              "trashed": {"kind": "scalar", "types": ["bool"], "default": false, "indexed": true}
            }}
            """))

    struct Book: SyncedRecord {
        static let schema = RecordsTests.booksSchema
        var title = ""
        var status = "want"
        var trashed = false
    }

    func store() throws -> LocalStore {
        try LocalStore.inMemory(collections: [Self.worriesSchema, Self.booksSchema])
    }

    @Test func oneTransactionHoldsEditsToSeveralCollectionsOrNone() async throws {
        let store = try store()
        let worry = UUID().uuidString.lowercased()
        let (_, effect) = try await store.transaction { transaction in
            try transaction.create("worries", fields: ["text": "the exam", "intensity": 7], id: worry)
            try transaction.create("books", fields: ["title": "Dune"])
            try transaction.create("notes", fields: ["title": "reading list"])
        }
        #expect(Set(effect.collections.values) == ["worries", "books", "notes"])
        #expect(try await store.pendingCount() == 3)

        // A failure anywhere in the transaction stores none of it.
        await #expect(throws: NotedClientError.self) {
            try await store.transaction { transaction in
                try transaction.update("worries", id: worry) { $0["intensity"] = 9 }
                try transaction.create("books", fields: ["status": "lost"])
            }
        }
        #expect(try await store.record("worries", id: worry)?.fields["intensity"] == 7)
        #expect(try await store.records("books").count == 1)
    }

    @Test func editsAreCheckedAgainstTheSchemaBeforeTheyAreStored() async throws {
        let store = try store()
        func refusal(_ fields: [String: JSONValue]) async -> String? {
            do {
                _ = try await store.transaction { try $0.create("worries", fields: fields) }
                return nil
            } catch let error as NotedClientError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(await refusal(["intensity": 11]) == "worries: \"intensity\": 11 is more than 10")
        #expect(
            await refusal(["category": "fun"])
                == "worries: \"category\": \"fun\" is not one of [\"health\",\"work\",\"other\"]")
        #expect(await refusal(["resolved": "yes"]) == "worries: \"resolved\" does not accept a string")
        #expect(await refusal(["mood": "calm"]) == "worries: unknown field \"mood\"")
        #expect(await refusal(["tags": ["a", "a"]]) == "worries: \"tags\": set elements must be distinct")
        #expect(await refusal(["tags": [""]]) == "worries: \"tags\": an element is empty")
        await #expect(throws: NotedClientError.self) {
            _ = try await store.transaction { try $0.create("diaries", fields: [:]) }
        }
        #expect(try await store.records("worries").isEmpty)
    }

    @Test func queriesFilterSortAndSearch() async throws {
        let store = try store()
        let worries: [[String: JSONValue]] = [
            ["text": "The exam on Friday", "intensity": 8, "category": "work", "tags": ["school"]],
            ["text": "Dentist appointment", "intensity": 3, "category": "health"],
            [
                "text": "Exams are over", "intensity": 1, "category": "work", "resolved": true,
                "tags": ["school", "done"],
            ],
            ["text": "the cat", "intensity": 5],
        ]
        var ids: [String] = []
        for (index, fields) in worries.enumerated() {
            let record = try await store.transaction(now: Date(timeIntervalSince1970: Double(1000 + index))) {
                try $0.create("worries", fields: fields)
            }.value
            ids.append(record.id)
        }
        func query(_ query: RecordQuery) async throws -> [Int] {
            try await store.records("worries", matching: query).map { ids.firstIndex(of: $0.id) ?? -1 }
        }
        #expect(try await query(RecordQuery()) == [3, 2, 1, 0])
        #expect(try await query(RecordQuery(equal: ["category": "work"])) == [2, 0])
        // A field left out reads as its default: the cat is "other".
        #expect(try await query(RecordQuery(equal: ["category": "other"])) == [3])
        #expect(
            try await query(RecordQuery(equal: ["resolved": false], order: [.field("intensity", descending: true)]))
                == [0, 3, 1])
        #expect(
            try await query(RecordQuery(contains: ["tags": "school"], order: [.field("intensity", descending: false)]))
                == [2, 0])
        #expect(try await query(RecordQuery(search: "exam")) == [2, 0])
        #expect(try await query(RecordQuery(equal: ["resolved": false], search: "EXAM fri")) == [0])
        #expect(try await query(RecordQuery(search: "\"(unbalanced OR")).isEmpty)
        #expect(try await query(RecordQuery(order: [.field("intensity", descending: true)], limit: 2)) == [0, 3])
        await #expect(throws: NotedClientError.self) { _ = try await query(RecordQuery(equal: ["text": "x"])) }
        await #expect(throws: NotedClientError.self) {
            _ = try await query(RecordQuery(order: [.field("nope", descending: false)]))
        }
    }

    @Test func notesAreOneCollectionAmongOthers() async throws {
        let store = try store()
        let note = try await store.create(NoteFields(title: "Groceries", body: "milk"))
        _ = try await store.transaction { try $0.create("books", fields: ["title": "Groceries of the world"]) }
        #expect(try await store.list().map(\.id) == [note.id])
        #expect(try await store.search("groceries").map(\.id) == [note.id])
        #expect(try await store.records("notes").map(\.id) == [note.id])
        await #expect(throws: NotedClientError.self) {
            _ = try await store.update(note.id) { $0.folder = String(repeating: "x", count: 300_000) }
        }
    }

    @Test func twoDevicesSyncAnAppsRecordsThroughTheServer() async throws {
        try await LiveServer.with(configure: {
            $0.schemas = SchemaRegistry([.notes, Self.worriesSchema, Self.booksSchema])
        }) { server in
            let user = try await server.makeUser()
            let a = try server.client(user, collections: [Self.worriesSchema, Self.booksSchema])
            let b = try server.client(user, collections: [Self.worriesSchema, Self.booksSchema])
            let worriesA = a.records(Worry.self)
            let worriesB = b.records(Worry.self)
            // Offline on A: a worry and a book in one transaction, and a note.
            let worry = try await worriesA.create(
                Worry(text: "the exam", intensity: 7, category: "work", tags: ["school"]))
            #expect(worry.pending)
            #expect(worry.value.remindAt == nil)
            let book = try await a.transaction { transaction in
                try transaction.update("worries", id: worry.id) { $0["remindAt"] = "2026-11-26T08:00" }
                return try transaction.create("books", fields: ["title": "Dune"])
            }
            _ = try await a.create(NoteFields(title: "a note too"))

            let changes = await worriesB.observe()
            await a.startSync()
            await b.startSync()
            var heard = false
            for await change in changes {
                if case .added(let ids, .remote) = change, ids.contains(worry.id) {
                    heard = true
                    break
                }
            }
            #expect(heard)
            try await eventually("B holds the worry, the book and the note", on: [b]) {
                let synced = try await worriesB.get(worry.id)?.value.remindAt == "2026-11-26T08:00"
                let hasBook = try await b.records(Book.self).get(book.id) != nil
                let notes = try await b.list().count
                return synced && hasBook && notes == 1
            }
            // Concurrent edits: text merges, the later scalar wins, set additions union.
            await a.stopSync()
            await b.stopSync()
            try await worriesA.update(worry.id) {
                $0.text = "the exam on friday"
                $0.tags.append("a")
            }
            try await worriesB.update(worry.id) {
                $0.text = "THE exam"
                $0.intensity = 9
                $0.tags.append("b")
            }
            try await b.records(Book.self).delete(book.id)
            await a.startSync()
            await b.startSync()
            try await eventually("both converge", on: [a, b]) {
                guard await a.waitUntilSynced(timeout: .seconds(5)), await b.waitUntilSynced(timeout: .seconds(5))
                else { return false }
                let (x, y) = (try await worriesA.get(worry.id), try await worriesB.get(worry.id))
                return x?.value == y?.value && x?.rev == y?.rev && x?.pending == false
            }
            let merged = try #require(try await worriesA.get(worry.id)).value
            #expect(merged.text == "THE exam on friday")
            #expect(merged.intensity == 9)
            #expect(Set(merged.tags) == ["school", "a", "b"])
            // The schema has `trashed`: delete is to the trash, restorable.
            #expect(try await a.records(Book.self).get(book.id)?.value.trashed == true)
            // History and restore go through the same API.
            let history = try await worriesA.history(worry.id)
            #expect(history.count >= 3)
            try await worriesA.restore(worry.id, rev: 1)
            try await eventually("the restore syncs", on: [b]) {
                try await worriesB.get(worry.id)?.value
                    == Worry(
                        text: "the exam", intensity: 7, category: "work", tags: ["school"], remindAt: "2026-11-26T08:00"
                    )
            }
            // A value the server would refuse is refused locally, and nothing is stored.
            await #expect(throws: NotedClientError.self) { try await worriesA.update(worry.id) { $0.intensity = 42 } }
            await a.stopSync()
            await b.stopSync()
        }
    }

    /// A type that models only some of its collection's fields: an edit through it changes
    /// what it changed and nothing else.
    struct WorryText: SyncedRecord {
        static let schema = RecordsTests.worriesSchema
        var text = ""
        var intensity = 0
    }

    @Test func aTypedEditChangesOnlyWhatItChanged() async throws {
        let store = try store()
        let client = try NotedClient(store: store, server: nil, credentials: nil)
        let id = try await store.transaction {
            try $0.create(
                "worries",
                fields: ["text": "exam", "category": "work", "resolved": true, "remindAt": "09:00", "tags": ["a"]])
        }.value.id
        try await client.records(WorryText.self).update(id) { $0.intensity = 4 }
        let fields = try #require(try await store.record("worries", id: id)).fields
        #expect(fields["intensity"] == 4)
        #expect(
            fields["category"] == "work" && fields["resolved"] == true && fields["remindAt"] == "09:00"
                && fields["tags"] == ["a"])
        // A property set to nil stores null.
        try await client.records(Worry.self).update(id) { $0.remindAt = nil }
        #expect(try await store.record("worries", id: id)?.fields["remindAt"] == .null)
    }

    /// A field a newer schema added, written by another device, does not block edits here; and
    /// only what an edit changes is checked.
    @Test func aFieldThisSchemaDoesNotKnowDoesNotBlockEdits() async throws {
        let store = try store()
        let id = UUID().uuidString.lowercased()
        let now = Date()
        _ = try await store.storePage(
            records: [
                Record(
                    collection: "worries", id: id, rev: 1, seq: 1, deleted: false,
                    fields: ["text": "from a newer app", "rating": 5], createdAt: now, updatedAt: now)
            ], cursor: 1)
        let edited = try await store.transaction { try $0.update("worries", id: id) { $0["intensity"] = 3 } }.value
        #expect(edited.fields["intensity"] == 3 && edited.fields["rating"] == 5)
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(try JSONValue.parse(changes.first?.body ?? "")["fields"] == ["intensity": ["set": 3]])
    }

    @Test func aTransactionReportsEachRecordOnce() async throws {
        let store = try store()
        let (_, both) = try await store.transaction { transaction in
            let book = try transaction.create("books", fields: ["title": "Dune"])
            _ = try transaction.update("books", id: book.id) { $0["status"] = "reading" }
            let gone = try transaction.create("books", fields: ["title": "never mind"])
            try transaction.purge("books", id: gone.id)
        }
        #expect(both.changed.count == 1 && both.added.count == 1 && both.removed.isEmpty)
    }

    /// A store opened without a collection (an older build of the app, another tool) keeps
    /// that collection's pending records and does not send them without their fields.
    @Test func recordsOfAnUndeclaredCollectionWaitInTheOutbox() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-undeclared-\(UUID().uuidString).sqlite"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let id = try await LocalStore.open(path: path, collections: [Self.worriesSchema]).transaction {
            try $0.create("worries", fields: ["text": "kept for later"])
        }.value.id
        let without = try LocalStore.open(path: path)
        #expect(try await without.outbox(excluding: [], limit: 10).changes.isEmpty)
        let with = try LocalStore.open(path: path, collections: [Self.worriesSchema])
        let (changes, _) = try await with.outbox(excluding: [], limit: 10)
        #expect(changes.map(\.recordID) == [id])
        #expect(try JSONValue.parse(changes.first?.body ?? "")["fields"]?["text"] == ["set": "kept for later"])
    }

    /// The CloudKit app's "database reset": a device's first sync takes in a whole snapshot,
    /// and says so once it has, after the records it brought.
    @Test func aSnapshotIsAnnouncedAsAReset() async throws {
        try await LiveServer.with(configure: {
            $0.schemas = SchemaRegistry([.notes, Self.worriesSchema, Self.booksSchema])
        }) { server in
            let user = try await server.makeUser()
            let a = try server.client(user, collections: [Self.worriesSchema, Self.booksSchema])
            let worry = try await a.records(Worry.self).create(Worry(text: "the exam"))
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            let b = try server.client(user, collections: [Self.worriesSchema, Self.booksSchema])
            let changes = await b.records(Worry.self).observe()
            await b.startSync()
            var seen: [RecordChange] = []
            for await change in changes {
                seen.append(change)
                if change == .reset { break }
            }
            #expect(seen == [.added(ids: [worry.id], origin: .remote), .reset])
            await a.stopSync()
            await b.stopSync()
        }
    }

    /// The embedding example of docs/collections.md, compiled and run.
    @Test func theEmbeddingExampleWorks() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-example-\(UUID().uuidString).sqlite"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // --- docs/collections.md: embedding ---
        struct Worry: SyncedRecord {
            static let schema = try! CollectionSchema(
                json: JSONValue.parse(
                    """
                    {"name": "worries", "version": 1, "fields": {
                      "text": {"kind": "text", "searchable": true},
                      "intensity": {"kind": "scalar", "types": ["number"], "min": 0, "max": 10, "default": 0, "indexed": true},
                      "resolved": {"kind": "scalar", "types": ["bool"], "default": false, "indexed": true}}}
                    """))
            var text = ""
            var intensity = 0
            var resolved = false
        }
        // Add server: and credentials: to sync.
        let client = try NotedClient(databasePath: path, collections: [Worry.schema])
        let worries = client.records(Worry.self)
        let exam = try await worries.create(Worry(text: "the exam", intensity: 7))
        try await worries.update(exam.id) { $0.intensity = 4 }
        let open = try await worries.query(
            RecordQuery(equal: ["resolved": false], order: [.field("intensity", descending: true)]))
        let found = try await worries.query(RecordQuery(search: "exam"))
        // --- end of example ---
        #expect(open.map(\.value) == [Worry(text: "the exam", intensity: 4)])
        #expect(found.map(\.id) == [exam.id])
    }
}
