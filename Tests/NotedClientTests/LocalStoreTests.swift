import Foundation
import NotedCore
import Testing

@testable import NotedClient

func server(_ id: String, rev: Int64, _ fields: NoteFields, deleted: Bool = false) -> NotedCore.Record {
    NotedCore.Record(
        collection: "notes", id: id, rev: rev, seq: rev, deleted: deleted, fields: deleted ? [:] : fields.json,
        createdAt: Date(), updatedAt: Date())
}

/// A store with one note acknowledged by the server at rev 1.
func syncedStore(_ fields: NoteFields) async throws -> (LocalStore, String) {
    let store = try LocalStore.inMemory()
    let note = try await store.create(fields)
    let (changes, _) = try await store.outbox(excluding: [], limit: 10)
    _ = try await store.applyAck([
        "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(note.id), "collection": "notes", "rev": 1,
        "status": "applied",
    ])
    return (store, note.id)
}

@Suite struct LocalStoreTests {
    /// A page's new records are indexed by one statement at its end (migration v9), not by the
    /// insert trigger; everything else still goes through the triggers.
    @Test func searchFindsWhatPagesAndLocalEditsBring() async throws {
        let store = try LocalStore.inMemory()
        let ids = (1...3).map { "00000000-0000-4000-8000-00000000000\($0)" }
        // A record created here before the page: indexed by the trigger as before.
        let local = try await store.create(NoteFields(title: "mine", body: "kumquat"))
        _ = try await store.storePage(
            records: [
                server(ids[0], rev: 1, NoteFields(title: "first", body: "aubergine")),
                server(ids[1], rev: 2, NoteFields(title: "second", body: "brioche")),
                server(ids[2], rev: 3, NoteFields(title: "third", body: "cardamom")),
            ], cursor: 3)
        #expect(!store.searchIndexDeferred.isOn)
        #expect(try await store.search("aubergine").map(\.id) == [ids[0]])
        #expect(try await store.search("cardamom").map(\.id) == [ids[2]])
        #expect(try await store.search("kumquat").map(\.id) == [local.id])
        // A later page moves a record's text (the update trigger) and brings a new one.
        _ = try await store.storePage(
            records: [
                server(ids[1], rev: 4, NoteFields(title: "second", body: "croissant")),
                server("00000000-0000-4000-8000-000000000004", rev: 5, NoteFields(title: "fourth", body: "dill")),
            ], cursor: 5)
        #expect(try await store.search("brioche").isEmpty)
        #expect(try await store.search("croissant").map(\.id) == [ids[1]])
        #expect(try await store.search("dill").map(\.id) == ["00000000-0000-4000-8000-000000000004"])
        // A purge in a page leaves the index (the delete trigger).
        _ = try await store.storePage(records: [server(ids[0], rev: 6, NoteFields(), deleted: true)], cursor: 6)
        #expect(try await store.search("aubergine").isEmpty)
        // Created here after the pages: the trigger indexes it.
        let later = try await store.create(NoteFields(title: "later", body: "elderflower"))
        #expect(try await store.search("elderflower").map(\.id) == [later.id])
    }

    @Test func aCreateIsSentWithSetOpsAndResentUnchanged() async throws {
        let store = try LocalStore.inMemory()
        let note = try await store.create(NoteFields(title: "T", body: "B", tags: ["x"], pinned: true))
        #expect(note.pending)
        let (first, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(first.count == 1)
        #expect(first[0].sent["baseRev"] == 0)
        #expect(first[0].sent["fields"]?["title"] == ["set": "T"])
        #expect(first[0].sent["fields"]?["tags"] == ["set": ["x"]])
        // An edit while in flight does not change the in-flight body: the resend is identical.
        try await store.update(note.id) { $0.body = "B2" }
        let (again, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(again == first)
        let (excluded, _) = try await store.outbox(excluding: [note.id], limit: 10)
        #expect(excluded.isEmpty)
    }

    @Test func anAppliedAckMovesTheShadowAndKeepsLaterEditsPending() async throws {
        let store = try LocalStore.inMemory()
        let note = try await store.create(NoteFields(title: "T", body: "hello"))
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        try await store.update(note.id) { $0.body = "hello world" }
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(note.id), "collection": "notes", "rev": 1,
            "status": "applied",
        ])
        let after = try #require(try await store.note(note.id))
        #expect(after.rev == 1)
        #expect(after.body == "hello world")
        #expect(after.pending)
        let (next, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(next[0].sent["baseRev"] == 1)
        #expect(next[0].sent["fields"] == ["body": ["delta": "=5\t+ world"]])
    }

    @Test func squashedEditsBecomeOneDeltaAgainstTheShadow() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "abc"))
        try await store.update(id) { $0.body = "abcd" }
        try await store.update(id) { $0.body = "abcde" }
        try await store.update(id) { $0.title = "t" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(changes.count == 1)
        #expect(changes[0].sent["fields"] == ["body": ["delta": "-3\t+abcde"], "title": ["delta": "+t"]])
    }

    @Test func editsThatCancelOutSendNothing() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "abc"))
        try await store.update(id) { $0.body = "abcd" }
        try await store.update(id) { $0.body = "abc" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(changes.isEmpty)
        #expect(try await store.pendingCount() == 0)
    }

    @Test func aPulledChangeIsRebasedUnderLocalEdits() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "one\ntwo\nthree", tags: ["a"]))
        try await store.update(id) {
            $0.body = "ONE\ntwo\nthree"
            $0.tags = ["a", "mine"]
        }
        _ = try await store.storePage(
            records: [server(id, rev: 2, NoteFields(body: "one\ntwo\nTHREE", tags: ["a", "theirs"]))], cursor: 2)
        let note = try #require(try await store.note(id))
        #expect(note.body == "ONE\ntwo\nTHREE")
        #expect(Set(note.tags) == ["a", "theirs", "mine"])
        #expect(note.rev == 2)
        #expect(try await store.cursor() == 2)
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(changes[0].sent["baseRev"] == 2)
    }

    @Test func anOlderOrEqualServerStateIsIgnored() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "current"))
        _ = try await store.storePage(records: [server(id, rev: 1, NoteFields(body: "stale"))], cursor: 5)
        #expect(try await store.note(id)?.body == "current")
    }

    @Test func aServerStateSeenWhileInFlightWaitsForTheAck() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "base"))
        try await store.update(id) { $0.body = "base mine" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        // Rev 3 already contains our change (rev 2) plus someone else's edit.
        _ = try await store.storePage(records: [server(id, rev: 3, NoteFields(body: "theirs base mine"))], cursor: 3)
        #expect(try await store.note(id)?.body == "base mine")
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(id), "collection": "notes", "rev": 2,
            "status": "applied",
        ])
        let note = try #require(try await store.note(id))
        #expect(note.body == "theirs base mine")
        #expect(note.rev == 3)
        #expect(!note.pending)
    }

    @Test func aMergedAckTakesTheServersFields() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "x"))
        try await store.update(id) { $0.body = "x!" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(id), "collection": "notes", "rev": 3,
            "status": "merged", "fields": .object(NoteFields(title: "other", body: "x!").json), "conflicts": [],
        ])
        let note = try #require(try await store.note(id))
        #expect(note.title == "other")
        #expect(!note.pending)
    }

    func reject(_ code: String, _ change: OutboxChange, current: NotedCore.Record? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "type": "reject", "ccid": .string(change.ccid), "id": .string(change.recordID), "collection": "notes",
            "code": .string(code), "message": "m",
        ]
        object["current"] = current?.json
        return .object(object)
    }

    @Test func baseUnavailableResendsWithSetOps() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "abc"))
        try await store.update(id) { $0.body = "abcd" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.applyReject(
            reject("base_unavailable", changes[0], current: server(id, rev: 5, NoteFields(title: "new", body: "abc"))))
        let (retry, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(retry[0].ccid != changes[0].ccid)
        #expect(retry[0].sent["baseRev"] == 5)
        #expect(retry[0].sent["fields"] == ["body": ["set": "abcd"]])
        #expect(try await store.note(id)?.title == "new")
    }

    @Test func goneKeepsTheLocalTextAsANewNote() async throws {
        let (store, id) = try await syncedStore(NoteFields(title: "t", body: "keep me"))
        try await store.update(id) { $0.body = "keep me please" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let effect = try await store.applyReject(reject("gone", changes[0]))
        #expect(try await store.note(id) == nil)
        let newID = try #require(effect.forked.first?.1)
        let copy = try #require(try await store.note(newID))
        #expect(copy.body == "keep me please")
        #expect(copy.rev == 0)
        #expect(copy.pending)
    }

    /// Found by the simulation (seed 46): the trash toggle is in flight when the user replaces
    /// `[19]` with `[57]`; the merged ack shows another device replaced `[19]` meanwhile. The
    /// edit cannot be rebased; it must go out as a stale `set` (the server then keeps the other
    /// device's text as a conflict revision), not as a diff against the acknowledged state.
    @Test func editsThatAMergedAckCannotTakeGoOutAsAStaleSet() async throws {
        let (store, id) = try await syncedStore(NoteFields(title: "[17]", body: "[19]"))
        try await store.update(id) { $0.trashed = true }
        let (inflight, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(inflight[0].sent["baseRev"] == 1)
        try await store.update(id) { $0.body = "[57]" }
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(inflight[0].ccid), "id": .string(id), "collection": "notes", "rev": 3,
            "status": "merged", "fields": .object(NoteFields(title: "[17]", body: "[58] [44]", trashed: true).json),
            "conflicts": [],
        ])
        let note = try #require(try await store.note(id))
        #expect(note.body == "[57]" && note.rev == 3)
        let (next, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(next[0].sent["baseRev"] == 1)
        #expect(next[0].sent["fields"]?["body"] == ["set": "[57]"])
    }

    @Test(arguments: ["pin", "tag", "trash"])
    func goneWithoutATextEditDoesNotBringThePurgedNoteBack(edit: String) async throws {
        let (store, id) = try await syncedStore(NoteFields(title: "t", body: "purged elsewhere"))
        try await store.update(id) { fields in
            switch edit {
            case "pin": fields.pinned = true
            case "tag": fields.tags.append("work")
            default: fields.trashed = true
            }
        }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let effect = try await store.applyReject(reject("gone", changes[0]))
        #expect(try await store.note(id) == nil)
        #expect(effect.forked.isEmpty)
        let live = try await store.list()
        let trashed = try await store.list(NoteFilter(trashed: true))
        #expect(live.isEmpty && trashed.isEmpty)
        #expect(try await store.isOutboxEmpty())
    }

    @Test(arguments: ["already_exists", "invalid_version"])
    func versionRejectsRebaseOntoTheCurrentRecord(code: String) async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "one two"))
        try await store.update(id) { $0.body = "one two three" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.applyReject(
            reject(code, changes[0], current: server(id, rev: 4, NoteFields(body: "zero one two"))))
        let note = try #require(try await store.note(id))
        #expect(note.body == "zero one two three")
        let (retry, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(retry[0].sent["baseRev"] == 4)
    }

    @Test func versionRejectWithoutCurrentAsksForAPull() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "a"))
        try await store.update(id) { $0.body = "ab" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let effect = try await store.applyReject(reject("invalid_version", changes[0]))
        #expect(effect.needsPull)
        #expect(try await store.note(id)?.pending == true)
    }

    @Test func rateLimitedKeepsTheInFlightChange() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "a"))
        try await store.update(id) { $0.body = "ab" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let effect = try await store.applyReject(reject("rate_limited", changes[0]))
        #expect(effect.retryLater)
        let (again, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(again == changes)
    }

    @Test(arguments: ["invalid_field", "bad_request", "too_large", "unknown_collection"])
    func permanentRejectsKeepTheEditLocallyAndStopRetrying(code: String) async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "a"))
        try await store.update(id) { $0.body = "ab" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let effect = try await store.applyReject(reject(code, changes[0]))
        #expect(effect.refused.count == 1)
        #expect(try await store.note(id)?.body == "ab")
        let (again, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(again.isEmpty)
        #expect(try await store.syncErrors().count == 1)
    }

    @Test func ccidReusedSendsAgainWithANewCcid() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "a"))
        try await store.update(id) { $0.body = "ab" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.applyReject(reject("ccid_reused", changes[0]))
        let (again, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(again.count == 1)
        #expect(again[0].ccid != changes[0].ccid)
    }

    @Test func aBroadcastAppliesOnlyAtPrevRev() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "hello"))
        let skip: JSONValue = [
            "type": "change", "collection": "notes", "id": .string(id), "rev": 3, "prevRev": 2, "op": "upsert",
            "fields": ["body": ["set": "x"]],
        ]
        #expect(try await store.applyBroadcast(skip, limits: Limits()).applied == false)
        let apply: JSONValue = [
            "type": "change", "collection": "notes", "id": .string(id), "rev": 2, "prevRev": 1, "op": "upsert",
            "fields": ["body": ["delta": "=5\t+!"], "pinned": ["set": true]],
        ]
        #expect(try await store.applyBroadcast(apply, limits: Limits()).applied)
        let note = try #require(try await store.note(id))
        #expect(note.body == "hello!")
        #expect(note.pinned)
        #expect(note.rev == 2)
        // The same broadcast again is not newer: ignored, no pull needed.
        #expect(try await store.applyBroadcast(apply, limits: Limits()).applied)
    }

    @Test func aRemotePurgeRemovesACleanNote() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "bye"))
        _ = try await store.storePage(records: [server(id, rev: 2, NoteFields(), deleted: true)], cursor: 2)
        #expect(try await store.note(id) == nil)
    }

    @Test func aLocalPurgeSendsADeleteAndDisappearsOnAck() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "bye"))
        try await store.purge(id)
        #expect(try await store.note(id) == nil)
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(changes[0].sent["op"] == "delete")
        #expect(changes[0].sent["baseRev"] == 1)
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(id), "collection": "notes", "rev": 2,
            "status": "applied",
        ])
        #expect(try await store.pendingCount() == 0)
    }

    @Test func listPinsFirstThenNewestAndFilters() async throws {
        let store = try LocalStore.inMemory()
        let old = try await store.create(
            NoteFields(title: "old", tags: ["work"], folder: "f"), now: Date(timeIntervalSince1970: 100))
        let new = try await store.create(NoteFields(title: "new"), now: Date(timeIntervalSince1970: 200))
        let pinned = try await store.create(
            NoteFields(title: "pinned", pinned: true), now: Date(timeIntervalSince1970: 50))
        let trashed = try await store.create(NoteFields(title: "trashed", trashed: true))
        #expect(try await store.list().map(\.id) == [pinned.id, new.id, old.id])
        #expect(try await store.list(NoteFilter(tag: "work")).map(\.id) == [old.id])
        #expect(try await store.list(NoteFilter(folder: "f")).map(\.id) == [old.id])
        #expect(try await store.list(NoteFilter(trashed: true)).map(\.id) == [trashed.id])
    }

    @Test func searchFindsWordsByPrefixInTitleAndBody() async throws {
        let store = try LocalStore.inMemory()
        let a = try await store.create(NoteFields(title: "Groceries", body: "milk and bread"))
        _ = try await store.create(NoteFields(title: "Work", body: "quarterly report"))
        #expect(try await store.search("groc").map(\.id) == [a.id])
        #expect(try await store.search("bread milk").map(\.id) == [a.id])
        #expect(try await store.search("\"unbalanced OR (").isEmpty)
        try await store.update(a.id) { $0.body = "eggs" }
        #expect(try await store.search("milk").isEmpty)
        #expect(try await store.search("eggs").map(\.id) == [a.id])
    }

    @Test func prefixesResolveOnlyWhenUnique() async throws {
        let store = try LocalStore.inMemory()
        let a = try await store.create(NoteFields(title: "a"), id: "aaaaaaaa-0000-4000-8000-000000000001")
        _ = try await store.create(NoteFields(title: "b"), id: "aaaaaaaa-0000-4000-8000-000000000002")
        #expect(try await store.resolve(prefix: "aaaaaaaa-0000-4000-8000-000000000001") == a.id)
        await #expect(throws: NotedClientError.self) { try await store.resolve(prefix: "aaaa") }
        await #expect(throws: NotedClientError.self) { try await store.resolve(prefix: "zz'; drop") }
    }

    @Test func invalidInputIsRefusedAndChangesNothing() async throws {
        let store = try LocalStore.inMemory()
        await #expect(throws: NotedClientError.self) { try await store.create(NoteFields(tags: ["x", "x"])) }
        await #expect(throws: NotedClientError.self) {
            try await store.create(NoteFields(body: String(repeating: "a", count: 200_001)))
        }
        #expect(try await store.list().isEmpty)
    }

    @Test func aMergeWithConflictsIsRecordedUntilTheNextEdit() async throws {
        let (store, id) = try await syncedStore(NoteFields(body: "x"))
        try await store.update(id) { $0.body = "y" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let effect = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(id), "collection": "notes", "rev": 3,
            "status": "merged", "fields": .object(NoteFields(body: "z").json), "conflicts": ["body"],
        ])
        #expect(effect.conflicts.map(\.id) == [id])
        #expect(try await store.conflicts().map(\.fields) == [["body"]])
        #expect(try await store.note(id)?.body == "z")
        try await store.update(id) { $0.body = "z!" }
        #expect(try await store.conflicts().isEmpty)
    }

    @Test func aResetSnapshotDropsSyncedNotesItDoesNotHoldButKeepsPendingOnes() async throws {
        let (store, kept) = try await syncedStore(NoteFields(title: "kept"))
        _ = try await store.storePage(
            records: [server("00000000-0000-4000-8000-000000000001", rev: 1, NoteFields(title: "absent"))], cursor: 3)
        let pending = try await store.create(NoteFields(title: "local only"))
        let effect = try await store.dropAbsent(keeping: [kept])
        #expect(effect.removed == ["00000000-0000-4000-8000-000000000001"])
        #expect(try await store.note(kept) != nil)
        #expect(try await store.note(pending.id) != nil)
    }

    @Test func observationDeliversTheListAfterEachChange() async throws {
        let store = try LocalStore.inMemory()
        var iterator = store.observe().makeAsyncIterator()
        #expect(try await iterator.next()?.isEmpty == true)
        let note = try await store.create(NoteFields(title: "seen"))
        #expect(try await iterator.next()?.map(\.id) == [note.id])
    }

    @Test func localEditsAreCheckedAgainstTheLimitsTheServerAdvertised() async throws {
        let store = try LocalStore.inMemory()
        let limits: JSONValue = ["maxTextLength": 10, "maxTags": 2]
        try await store.setMeta("limits", limits.jsonString)
        await #expect(throws: NotedClientError.self) { try await store.create(NoteFields(body: "eleven char")) }
        await #expect(throws: NotedClientError.self) { try await store.create(NoteFields(tags: ["a", "b", "c"])) }
        let note = try await store.create(NoteFields(body: "ten chars!", tags: ["a", "b"]))
        await #expect(throws: NotedClientError.self) { try await store.update(note.id) { $0.body += "?" } }
        #expect(try await store.note(note.id)?.body == "ten chars!")
    }

    @Test func aPurgedNoteIsNotBroughtBackByALateBroadcastOrPage() async throws {
        let (store, id) = try await syncedStore(NoteFields(title: "gone soon"))
        try await store.purge(id)
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.applyAck([
            "type": "ack", "ccid": .string(changes[0].ccid), "id": .string(id), "collection": "notes", "rev": 2,
            "status": "applied",
        ])
        let late: JSONValue = [
            "type": "change", "collection": "notes", "id": .string(id), "rev": 1, "prevRev": 0, "op": "upsert",
            "fields": ["title": ["set": "gone soon"]], "updatedAt": "2026-01-01T00:00:00.000Z",
        ]
        #expect(try await store.applyBroadcast(late, limits: Limits()).applied)
        _ = try await store.storePage(records: [server(id, rev: 1, NoteFields(title: "gone soon"))], cursor: 9)
        #expect(try await store.note(id) == nil)
    }
}
