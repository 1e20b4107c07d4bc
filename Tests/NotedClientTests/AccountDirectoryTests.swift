import Foundation
import NotedCore
import Testing

@testable import NotedClient

/// Each account's database apart (`AccountDirectory`), and giving up unsent edits
/// (`discardLocalChanges`): the library side of issue 21.
@Suite struct AccountDirectoryTests {
    func withDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("noted-accounts-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try await body(path)
    }

    @Test func theFirstAccountTakesTheFirstDatabaseAndOthersGetTheirOwn() async throws {
        try await withDirectory { path in
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let directory = AccountDirectory(path: path)
            #expect(try directory.databasePath() == path + "/noted.sqlite", "before any sign-in")
            #expect(try directory.current() == nil)
            // Written before any sign-in: the first account takes it over.
            let early = try await LocalStore.open(path: try directory.databasePath()).create(NoteFields(title: "early"))

            let alice = try await directory.use(server: "http://h:1/", userID: "u-alice", username: "alice")
            #expect(alice == path + "/noted.sqlite")
            let bob = try await directory.use(server: "http://h:1", userID: "u-bob", username: "bob")
            #expect(bob != alice && bob.hasPrefix(path + "/accounts/") && bob.hasSuffix("/noted.sqlite"))
            #expect(try directory.databasePath() == bob)
            #expect(try await LocalStore.open(path: bob).list().isEmpty)
            // The same user on another server is another account.
            let elsewhere = try await directory.use(server: "http://other:1", userID: "u-alice", username: "alice")
            #expect(![alice, bob].contains(elsewhere))

            #expect(try await directory.use(server: "http://h:1", userID: "u-alice", username: "alice") == alice)
            #expect(try directory.current()?.username == "alice")
            #expect(try await LocalStore.open(path: alice).note(early.id)?.pending == true)
            #expect(try directory.accounts().map(\.username) == ["alice", "bob", "alice"])
        }
    }

    @Test func aFolderOfTheEarlierVersionKeepsItsDatabaseForItsAccount() async throws {
        try await withDirectory { path in
            // What the earlier version left: one database bound to its account, no accounts.json.
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            let old = try LocalStore.open(path: path + "/noted.sqlite")
            let pending = try await old.create(NoteFields(title: "offline"))
            try await old.setMeta("account", "http://h:1 u-alice")
            let directory = AccountDirectory(path: path)
            #expect(try directory.databasePath() == path + "/noted.sqlite")

            let bob = try await directory.use(server: "http://h:1", userID: "u-bob", username: "bob")
            #expect(bob != path + "/noted.sqlite")
            let alice = try await directory.use(server: "http://h:1", userID: "u-alice", username: "alice")
            #expect(alice == path + "/noted.sqlite")
            #expect(try await LocalStore.open(path: alice).note(pending.id)?.pending == true)
        }
    }

    @Test func aDamagedIndexIsAClearErrorAndNothingIsChanged() async throws {
        try await withDirectory { path in
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            try Data("{not json".utf8).write(to: URL(fileURLWithPath: path + "/accounts.json"))
            let directory = AccountDirectory(path: path)
            #expect(throws: NotedClientError.self) { try directory.databasePath() }
            await #expect(throws: NotedClientError.self) {
                try await directory.use(server: "http://h", userID: "u", username: "u")
            }
            #expect(try String(contentsOfFile: path + "/accounts.json", encoding: .utf8) == "{not json")
        }
    }

    @Test func discardingGivesBackTheServersVersionOrRemovesANewRecord() async throws {
        let (store, id) = try await syncedStore(NoteFields(title: "T", body: "server text"))
        try await store.update(id) { $0.body = "local edit" }
        let fresh = try await store.create(NoteFields(title: "new"))
        #expect(try await store.unsynced().map(\.id) == [id, fresh.id])

        var effect = try await store.discardLocalChanges(id)
        #expect(effect.changed.contains(id))
        #expect(try await store.note(id)?.body == "server text")
        #expect(try await store.note(id)?.pending == false)
        effect = try await store.discardLocalChanges(fresh.id)
        #expect(effect.removed.contains(fresh.id))
        #expect(try await store.note(fresh.id) == nil)
        #expect(try await store.unsynced().isEmpty)
        await #expect(throws: NotedClientError.self) { try await store.discardLocalChanges(fresh.id) }
    }

    @Test func aRefusedEditIsHeldThroughServerChangesUntilEditedOrDiscarded() async throws {
        let (store, id) = try await syncedStore(NoteFields(title: "T", body: "one two"))
        try await store.update(id) { $0.body = "one two three" }
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        _ = try await store.applyReject([
            "type": "reject", "ccid": .string(changes[0].ccid), "id": .string(id),
            "collection": "notes", "code": "invalid_field", "message": "no",
        ])
        #expect(try await store.note(id)?.refusal == "invalid_field: no")
        #expect(try await store.note(id)?.pending == false)

        // A server change meanwhile: moved under the refused edit, which is kept and not resent.
        _ = try await store.storePage(
            records: [server(id, rev: 2, NoteFields(title: "T2", body: "one two"))], cursor: 2)
        let held = try #require(try await store.note(id))
        #expect(held.title == "T2" && held.body == "one two three" && held.refusal != nil && !held.pending)
        #expect(try await store.outbox(excluding: [], limit: 10).changes.isEmpty)
        #expect(try await store.unsynced().map(\.id) == [id])

        // Edited: the refusal is over and the edit goes out against rev 2.
        try await store.update(id) { $0.body = "one two 3" }
        let (resend, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(resend.count == 1 && resend[0].sent["baseRev"] == 2)
        #expect(try await store.note(id)?.refusal == nil)
    }
}
