import Foundation
import GRDB
import NotedCore
import Testing

@testable import NotedClient

/// What `missing_blob` goes by: the files the change sent adds, not the note's files now.
@Suite struct MissingBlobTests {
    static func refusal(_ change: OutboxChange) -> Reject {
        Reject(
            ProtocolError(.missingBlob, "the server does not have a file"),
            identity: ChangeIdentity(ccid: change.ccid, collection: "notes", id: change.recordID))
    }

    /// Attaches a file, sends the change adding it (uploaded: the device believes the server
    /// has it), then removes the file from the note while the change is in flight.
    static func sentThenRemoved() async throws -> (LocalStore, OutboxChange, AttachmentReference) {
        let store = try LocalStore.inMemory()
        let note = try await store.create(NoteFields(title: "scan"))
        let (reference, _) = try await store.attach(
            note.id, data: Data("the scan".utf8), name: "scan.txt", type: "text/plain")
        try await store.blobUploaded(reference.sha256)
        let (changes, _) = try await store.outbox(excluding: [], limit: 10)
        let change = try #require(changes.first)
        #expect(change.sent["fields"]?["attachments"] == ["set": [.string(reference.element)]])
        _ = try await store.detach(note.id, sha256: reference.sha256)
        return (store, change, reference)
    }

    @Test func aFileRemovedAfterTheSendStillGoesUpAgain() async throws {
        let (store, change, reference) = try await Self.sentThenRemoved()
        // Kept though the note no longer names it: the change in flight does.
        #expect(try await store.forgetBlobs(keepingBytes: 0) == 0)
        _ = try await store.applyReject(Self.refusal(change))
        #expect(try await store.pendingBlobs().map(\.sha256) == [reference.sha256], "the change's file goes up again")
        let (held, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(held.isEmpty, "the change waits for its file")
        try await store.blobUploaded(reference.sha256)
        let (again, _) = try await store.outbox(excluding: [], limit: 10)
        #expect(again.map(\.body) == [change.body], "then the same change goes again")
    }

    @Test func aFileRemovedAfterTheSendAndGoneFromThisDeviceGivesTheChangeUp() async throws {
        let (store, change, _) = try await Self.sentThenRemoved()
        let database = store.writer
        try await database.write { db in try db.execute(sql: "DELETE FROM blob") }
        _ = try await store.applyReject(Self.refusal(change))
        // Not resent for ever: the change is given up; the edit made since (the removal) is
        // the correction, and goes out as a new change that does not name the file.
        let note = try #require(try await store.list().first)
        #expect(note.refusal == nil && note.attachments.isEmpty && note.pending)
        let (next, _) = try await store.outbox(excluding: [], limit: 10)
        let sent = try #require(next.first)
        #expect(sent.ccid != change.ccid)
        #expect(sent.sent["fields"]?["attachments"]?["set"]?.arrayValue?.isEmpty ?? true, "\(sent.body)")
    }
}
