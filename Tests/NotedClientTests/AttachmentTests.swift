import Foundation
import GRDB
import NotedClient
import NotedCore
import Testing

/// Attachments on the client (issue 17), against the real server: a file attached offline is
/// kept with the edit, uploaded when sync starts and before the change naming it; another
/// device fetches identical bytes and keeps them; a file the server lost is uploaded again on
/// `missing_blob`; editing a note never drops its attachments.
@Suite(.serialized) struct AttachmentTests {
    static func bytes(_ count: Int, seed: UInt64) -> Data {
        var state = seed &+ 0x2545_F491_4F6C_DD1D
        return Data(
            (0..<count).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 33)
            })
    }

    func serverHas(_ server: LiveServer, _ credentials: Credentials, _ sha256: String) async throws -> Bool {
        let url = server.url.appendingPathComponent("v1/blobs/\(sha256)")
        let response = try await DefaultHTTPTransport().send(
            HTTPRequestData(method: "HEAD", url: url, headers: ["Authorization": "Bearer \(credentials.accessToken)"]))
        return response.status == 200
    }

    @Test func aFileAttachedOfflineGoesUpBeforeItsChangeAndReachesAnotherDeviceWhole() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let b = try server.client(user)
            let data = Self.bytes(1_500_000, seed: 1)
            let note = try await a.create(NoteFields(title: "Whiteboard", body: "before"))
            // Offline: kept here with the edit, pending.
            let reference = try await a.attach(
                note.id, data: data, name: "whiteboard 2024-03-05.jpg", type: "image/jpeg")
            #expect(reference.sha256 == LocalStore.sha256(data) && reference.size == 1_500_000)
            #expect(try await a.note(note.id)?.attachments == [reference.element])
            #expect(try await a.store.pendingBlobs().map(\.sha256) == [reference.sha256])
            // The change adding it is held back while the file waits.
            let (held, _) = try await a.store.outbox(excluding: [], limit: 10)
            #expect(held.isEmpty, "a change naming a file the server lacks was composed: \(held)")
            try await a.setBody(note.id, "before\n\n![whiteboard](attachment:\(reference.sha256))")

            await a.startSync()
            try await eventually("A uploaded the file and synced the note", on: [a]) {
                let blobs = try await a.store.pendingBlobs()
                let count = try await a.store.pendingCount()
                return blobs.isEmpty && count == 0
            }
            #expect(try await serverHas(server, user, reference.sha256))
            await b.startSync()
            try await eventually("B has the note with its attachment", on: [b]) {
                try await b.note(note.id)?.attachments == [reference.element]
            }
            // B fetches the file once; then it is here, offline too.
            let fetched = try await b.attachmentData(reference.sha256)
            #expect(fetched.data == data && fetched.type == "image/jpeg")
            await b.stopSync()
            let offline = try await b.store.blobData(reference.sha256)
            #expect(offline?.data == data)
            // Editing the text keeps the attachment, on both devices.
            try await b.setBody(note.id, "after")
            await b.startSync()
            try await eventually("A has B's edit", on: [a]) { try await a.note(note.id)?.body == "after" }
            #expect(try await a.note(note.id)?.attachments == [reference.element])
            await a.stopSync()
            await b.stopSync()
        }
    }

    @Test func aFileTheServerLostIsUploadedAgainWhenItsChangeIsRefused() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let data = Self.bytes(200_000, seed: 2)
            let first = try await a.create(NoteFields(title: "First"))
            let reference = try await a.attach(first.id, data: data, name: "scan.pdf", type: "application/pdf")
            await a.startSync()
            try await eventually("synced", on: [a]) {
                let count = try await a.store.pendingCount()
                let blobs = try await a.store.pendingBlobs()
                return count == 0 && blobs.isEmpty
            }
            await a.stopSync()
            // The server loses the file (as a collection racing the device would leave it).
            let database = try DatabaseQueue(path: server.directory + "/noted.sqlite")
            try await database.write { db in
                try db.execute(sql: "DELETE FROM blobs WHERE sha256 = ?", arguments: [reference.sha256])
            }
            try database.close()
            #expect(try await serverHas(server, user, reference.sha256) == false)
            // The device believes the server has it: the change goes, is refused `missing_blob`,
            // the file goes up again, and the same change is accepted.
            let second = try await a.create(NoteFields(title: "Second"))
            _ = try await a.attach(second.id, data: data, name: "scan again.pdf", type: "application/pdf")
            await a.startSync()
            try await eventually("uploaded again and synced", on: [a]) {
                let count = try await a.store.pendingCount()
                let blobs = try await a.store.pendingBlobs()
                return count == 0 && blobs.isEmpty
            }
            #expect(try await serverHas(server, user, reference.sha256))
            #expect(try await a.note(second.id)?.refusal == nil)
            await a.stopSync()
        }
    }

    @Test func aFileTheServerWillNotTakeRefusesItsNoteUntilItIsRemoved() async throws {
        try await LiveServer.with(configure: { $0.maxBlobBytes = 1000 }) { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let note = try await a.create(NoteFields(title: "Too big"))
            let reference = try await a.attach(
                note.id, data: Self.bytes(2000, seed: 3), name: "big.png", type: "image/png")
            await a.startSync()
            try await eventually("the note refused, saying why", on: [a]) {
                let refusal = try await a.note(note.id)?.refusal
                return refusal?.contains("too_large") == true
            }
            #expect(try await a.store.pendingBlobs().isEmpty, "a refused file is not offered again")
            // Removing the file is an edit: the note syncs.
            try await a.detach(note.id, sha256: reference.sha256)
            try await eventually("synced without the file", on: [a]) {
                let count = try await a.store.pendingCount()
                let refusal = try await a.note(note.id)?.refusal
                return count == 0 && refusal == nil
            }
            await a.stopSync()
        }
    }

    @Test func aChangeNamingAFileNeitherTheServerNorThisDeviceHasIsRefused() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let stray = try #require(
                AttachmentReference(
                    sha256: LocalStore.sha256(Data("nowhere".utf8)), size: 7, type: "text/plain", name: "nowhere.txt"))
            let note = try await a.create(NoteFields(title: "Stray", attachments: [stray.element]))
            await a.startSync()
            try await eventually("refused: the file is nowhere", on: [a]) {
                let refusal = try await a.note(note.id)?.refusal
                return refusal?.contains("neither on the server nor on this device") == true
            }
            await a.stopSync()
        }
    }

    @Test func namesAreShortenedToFitAndBadTypesRefused() async throws {
        let store = try LocalStore.open(
            path: FileManager.default.temporaryDirectory.appendingPathComponent("noted-att-\(UUID().uuidString).sqlite")
                .path)
        let note = try await store.create(NoteFields(title: "n"))
        let long = String(repeating: "très long nom ", count: 30) + ".tar.gz"
        let (reference, _) = try await store.attach(note.id, data: Data("x".utf8), name: long, type: "application/gzip")
        #expect(reference.element.utf16.count <= Limits().maxTagLength)
        #expect(reference.name.hasSuffix(".gz"))
        let (odd, _) = try await store.attach(note.id, data: Data("y".utf8), name: "a/b\\c\n.txt", type: "text/plain")
        #expect(odd.name == "a_b_c_.txt")
        await #expect(throws: NotedClientError.self) {
            _ = try await store.attach(note.id, data: Data("z".utf8), name: "z", type: "Text/Plain")
        }
        // The field holds both, and the local file store both, pending.
        #expect(try await store.note(note.id)?.attachments.count == 2)
        #expect(try await store.pendingBlobs().count == 2)
        // Fetched files are dropped oldest first beyond a cap; pending ones never.
        try await store.keepFetchedBlob(
            Data(repeating: 1, count: 1000), sha256: LocalStore.sha256(Data(repeating: 1, count: 1000)),
            type: "image/png")
        try await store.keepFetchedBlob(
            Data(repeating: 2, count: 1000), sha256: LocalStore.sha256(Data(repeating: 2, count: 1000)),
            type: "image/png")
        #expect(try await store.forgetBlobs(keepingBytes: 1500) == 1000)
        #expect(try await store.localBlobs().count == 3)
        await #expect(throws: NotedClientError.self) {
            try await store.keepFetchedBlob(
                Data("not it".utf8), sha256: LocalStore.sha256(Data("other".utf8)), type: "text/plain")
        }
    }
}
