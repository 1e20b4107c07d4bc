import Crypto
import Foundation
import Logging
import NIOCore
import NotedCore
import Testing

@testable import NotedServer

/// Attachments' blobs (issue 17) in both stores: an upload in pieces, resumed, verified by its
/// hash; counted in the quota; read back by range; refused to a change while missing; kept
/// while a record or a kept revision references it and collected after that.
@Suite struct BlobStoreTests {
    static let backends = Backend.available
    let contract = StoreContractTests()

    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    static func sha(_ bytes: [UInt8]) -> String { Array(SHA256.hash(data: bytes)).lowercaseHex }

    /// Uploads `bytes` in pieces of `piece` bytes.
    func upload(
        _ store: any NotedStore, user: String, _ bytes: [UInt8], piece: Int = 64 * 1024, type: String = "image/png"
    ) async throws -> StoredBlob {
        let hash = Self.sha(bytes)
        let state = try await store.beginBlobUpload(
            userID: user, sha256: hash, length: Int64(bytes.count), type: type, quota: nil, now: Date())
        var offset = state.offset
        while offset < Int64(bytes.count) {
            let end = min(bytes.count, Int(offset) + piece)
            offset = try await store.appendBlobUpload(
                userID: user, sha256: hash, offset: offset, bytes: ByteBuffer(bytes: bytes[Int(offset)..<end]),
                now: Date())
        }
        try await store.syncBlobUpload(userID: user, sha256: hash)
        return try await store.finishBlobUpload(userID: user, sha256: hash, now: Date())
    }

    func read(_ store: any NotedStore, user: String, _ hash: String, _ range: Range<Int64>) async throws -> [UInt8]? {
        guard let stream = try await store.readBlob(userID: user, sha256: hash, range: range) else { return nil }
        var result: [UInt8] = []
        for try await piece in stream { result += piece.readableBytesView }
        return result
    }

    func attach(_ id: String, baseRev: Int64 = 0, add: [String] = [], remove: [String] = [], title: String? = nil)
        -> JSONValue
    {
        var fields: [String: JSONValue] = [
            "attachments": ["add": .array(add.map(JSONValue.string)), "remove": .array(remove.map(JSONValue.string))]
        ]
        if let title { fields["title"] = ["set": .string(title)] }
        return [
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
            "baseRev": .int(baseRev),
            "op": "upsert", "fields": .object(fields),
        ]
    }

    @Test(arguments: backends) func anUploadInPiecesResumesIsVerifiedAndReadsBackByRange(backend: Backend) async throws
    {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let bytes = Self.bytes(3 * 1024 * 1024 + 17, seed: 1)
            let hash = Self.sha(bytes)
            // Half of it, then the upload "breaks off": what was written is reported and kept.
            _ = try await store.beginBlobUpload(
                userID: user, sha256: hash, length: Int64(bytes.count), type: "image/png", quota: nil, now: Date())
            let half = try await store.appendBlobUpload(
                userID: user, sha256: hash, offset: 0, bytes: ByteBuffer(bytes: bytes[..<1_500_000]), now: Date())
            try await store.syncBlobUpload(userID: user, sha256: hash)
            #expect(half == 1_500_000)
            #expect(
                try await store.blobUpload(userID: user, sha256: hash)
                    == BlobUploadState(offset: 1_500_000, length: Int64(bytes.count), type: "image/png"))
            #expect(try await store.storedBlob(userID: user, sha256: hash) == nil)
            // A write at the wrong offset is refused with the right one.
            await #expect(throws: BlobError.offsetMismatch(expected: 1_500_000)) {
                _ = try await store.appendBlobUpload(
                    userID: user, sha256: hash, offset: 0, bytes: ByteBuffer(bytes: bytes[..<10]), now: Date())
            }
            // Another length for the same upload is refused.
            await #expect(throws: BlobError.lengthMismatch(expected: Int64(bytes.count))) {
                _ = try await store.beginBlobUpload(
                    userID: user, sha256: hash, length: 5, type: "image/png", quota: nil, now: Date())
            }
            let usageBefore = try await store.usage(userID: user)
            let blob = try await upload(store, user: user, bytes, piece: 1 << 20)
            #expect(blob.sha256 == hash && blob.size == Int64(bytes.count) && blob.type == "image/png")
            #expect(try await store.blobUpload(userID: user, sha256: hash) == nil)
            #expect(try await store.usage(userID: user).bytes == usageBefore.bytes + BlobCharge.of(Int64(bytes.count)))
            #expect(try await read(store, user: user, hash, 0..<Int64(bytes.count)) == bytes)
            for range in [
                0..<1, 1_048_570..<1_048_590, Int64(bytes.count - 5)..<Int64(bytes.count), 1_500_000..<2_700_001,
            ] {
                #expect(
                    try await read(store, user: user, hash, range)
                        == Array(bytes[Int(range.lowerBound)..<Int(range.upperBound)]), "\(range)")
            }
            // Finishing again answers the stored blob; the count does not grow twice.
            #expect(
                try await store.finishBlobUpload(userID: user, sha256: hash, now: Date()).size == Int64(bytes.count))
            #expect(try await store.usage(userID: user).bytes == usageBefore.bytes + BlobCharge.of(Int64(bytes.count)))
            #expect(try await store.storedBlobs(userID: user).map(\.sha256) == [hash])
        }
    }

    @Test(arguments: backends) func bytesThatDoNotHashToTheNameAreDiscarded(backend: Backend) async throws {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let bytes = Self.bytes(100_000, seed: 2)
            let claimed = Self.sha(Self.bytes(100_000, seed: 3))
            _ = try await store.beginBlobUpload(
                userID: user, sha256: claimed, length: 100_000, type: "text/plain", quota: nil, now: Date())
            _ = try await store.appendBlobUpload(
                userID: user, sha256: claimed, offset: 0, bytes: ByteBuffer(bytes: bytes), now: Date())
            await #expect(throws: BlobError.hashMismatch(actual: Self.sha(bytes))) {
                _ = try await store.finishBlobUpload(userID: user, sha256: claimed, now: Date())
            }
            #expect(try await store.storedBlob(userID: user, sha256: claimed) == nil)
            #expect(try await store.blobUpload(userID: user, sha256: claimed) == nil)
            #expect(try await store.usage(userID: user).bytes == 0)
            // A fresh upload of the real bytes under that name starts from 0.
            #expect(
                try await store.beginBlobUpload(
                    userID: user, sha256: claimed, length: 100_000, type: "text/plain", quota: nil, now: Date()
                ).offset == 0)
        }
    }

    @Test(arguments: backends) func blobsAreEachUsersOwnAndCountInTheQuota(backend: Backend) async throws {
        try await withStore(backend) { store in
            let (alice, bob) = (try await contract.makeUser(store), try await contract.makeUser(store))
            let bytes = Self.bytes(50_000, seed: 4)
            let blob = try await upload(store, user: alice, bytes)
            // Bob knows the hash, and that is all: no blob, no bytes, no upload.
            #expect(try await store.storedBlob(userID: bob, sha256: blob.sha256) == nil)
            #expect(try await read(store, user: bob, blob.sha256, 0..<10) == nil)
            #expect(try await store.blobUpload(userID: bob, sha256: blob.sha256) == nil)
            // Quota: stored bytes, the lengths of uploads under way and the new one.
            let stored = try await store.usage(userID: alice).bytes
            await #expect(throws: BlobError.quotaExceeded(quota: stored + 60_000, stored: stored)) {
                _ = try await store.beginBlobUpload(
                    userID: alice, sha256: Self.sha([1]), length: 60_001, type: "image/png", quota: stored + 60_000,
                    now: Date())
            }
            _ = try await store.beginBlobUpload(
                userID: alice, sha256: Self.sha([2]), length: 40_000, type: "image/png", quota: stored + 60_000,
                now: Date())
            await #expect(
                throws: BlobError.quotaExceeded(quota: stored + 60_000, stored: stored + BlobCharge.of(40_000))
            ) {
                _ = try await store.beginBlobUpload(
                    userID: alice, sha256: Self.sha([3]), length: 20_001, type: "image/png", quota: stored + 60_000,
                    now: Date())
            }
            // Deleting the account takes its blobs.
            _ = try await store.deleteUser(id: alice)
            #expect(try await store.storedBlob(userID: alice, sha256: blob.sha256) == nil)
            #expect(try await store.storedBlobs(userID: alice).isEmpty)
        }
    }

    @Test(arguments: backends) func aChangeAddingAMissingBlobIsRefusedThenAcceptedOnceUploaded(backend: Backend)
        async throws
    {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let bytes = Self.bytes(10_000, seed: 5)
            let reference = try #require(
                AttachmentReference(sha256: Self.sha(bytes), size: 10_000, type: "image/png", name: "photo 1.png"))
            let id = UUID().uuidString.lowercased()
            let change = attach(id, add: [reference.element], title: "Receipt")
            let refused = try await contract.push(store, user: user, change)
            #expect(refused["type"] == "reject" && refused["code"] == "missing_blob", "\(refused)")
            #expect(try await store.record(userID: user, collection: "notes", id: id) == nil)
            _ = try await upload(store, user: user, bytes)
            // The same change, the same ccid: a rejected change was not remembered.
            let applied = try await contract.push(store, user: user, change)
            #expect(applied["status"] == "applied", "\(applied)")
            let record = try #require(try await store.record(userID: user, collection: "notes", id: id))
            #expect(record.fields["attachments"] == .array([.string(reference.element)]))
            // A wrong size for a stored blob is an invalid field; a malformed element too.
            var wrong = reference
            wrong.size = 9_999
            let refusedSize = try await contract.push(store, user: user, attach(id, baseRev: 1, add: [wrong.element]))
            #expect(refusedSize["code"] == "invalid_field", "\(refusedSize)")
            #expect(throws: ProtocolError.self) {
                _ = try ChangeParser().parse(attach(id, baseRev: 1, add: ["\(reference.sha256) 10000 Image/PNG x"]))
            }
            #expect(throws: ProtocolError.self) {
                _ = try ChangeParser().parse(attach(id, baseRev: 1, add: ["\(reference.sha256) 010000 image/png x"]))
            }
            #expect(throws: ProtocolError.self) {
                _ = try ChangeParser().parse(attach(id, baseRev: 1, add: ["\(reference.sha256) 10000 image/png a/b"]))
            }
            // Removing it, and a stale set keeping it, need no upload.
            #expect(
                try await contract.push(store, user: user, attach(id, baseRev: 1, remove: [reference.element]))[
                    "status"] == "applied")
        }
    }

    @Test(arguments: backends) func unreferencedBlobsAreCollectedAfterTheRetentionReferencedOnesKept(backend: Backend)
        async throws
    {
        try await withStore(backend) { store in
            let user = try await contract.makeUser(store)
            let (kept, dropped, inHistory, stray) = (
                Self.bytes(1000, seed: 6), Self.bytes(2000, seed: 7), Self.bytes(3000, seed: 8),
                Self.bytes(4000, seed: 9)
            )
            var references: [String] = []
            for bytes in [kept, dropped, inHistory, stray] {
                let blob = try await upload(store, user: user, bytes)
                references.append(
                    try #require(
                        AttachmentReference(sha256: blob.sha256, size: blob.size, type: "image/png", name: "f.png")
                    ).element)
            }
            let (noteA, noteB) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            // A keeps `kept`; B had `dropped` and then `inHistory`, and `inHistory` was removed
            // again: `inHistory` is still in a kept revision (stored as a delta once the history is
            // compacted), `dropped` was in one saved 200 days ago, thinned away.
            let longAgo = Date().addingTimeInterval(-200 * 86400)
            #expect(
                try await contract.push(store, user: user, attach(noteA, add: [references[0]]))["status"] == "applied")
            #expect(
                try await contract.push(store, user: user, attach(noteB, add: [references[1]]), at: longAgo)["status"]
                    == "applied")
            #expect(
                try await contract.push(
                    store, user: user, attach(noteB, baseRev: 1, remove: [references[1]]),
                    at: longAgo.addingTimeInterval(1))["status"] == "applied")
            for rev in Int64(2)...5 {
                #expect(
                    try await contract.push(store, user: user, attach(noteB, baseRev: rev, title: "t\(rev)"))["status"]
                        == "applied")
            }
            #expect(
                try await contract.push(store, user: user, attach(noteB, baseRev: 6, add: [references[2]]))["status"]
                    == "applied")
            #expect(
                try await contract.push(store, user: user, attach(noteB, baseRev: 7, remove: [references[2]]))["status"]
                    == "applied")
            _ = try await store.thinHistory(
                now: Date().addingTimeInterval(1), policy: HistoryPolicy(days: 90), limit: 100)
            #expect(
                try await store.revisions(userID: user, collection: "notes", id: noteB)?.map(\.rev) == [
                    2, 3, 4, 5, 6, 7, 8,
                ])
            #expect(
                try await store.revision(userID: user, collection: "notes", id: noteB, rev: 7, conflict: false)?.fields[
                    "attachments"] == .array([.string(references[2])]))
            // An upload under way that nobody continues.
            _ = try await store.beginBlobUpload(
                userID: user, sha256: Self.sha([9, 9]), length: 2, type: "image/png", quota: nil, now: Date())
            let usage = try await store.usage(userID: user).bytes

            // Within the retention nothing goes.
            let early = try await store.collectBlobs(
                storedBefore: Date().addingTimeInterval(-3600), uploadsBefore: Date().addingTimeInterval(-3600))
            #expect(early == BlobCollection())
            let collected = try await store.collectBlobs(
                storedBefore: Date().addingTimeInterval(1), uploadsBefore: Date().addingTimeInterval(1))
            #expect(collected == BlobCollection(blobs: 2, bytes: 6000, uploads: 1), "\(collected)")
            let left = Set(try await store.storedBlobs(userID: user).map(\.sha256))
            #expect(left == [Self.sha(kept), Self.sha(inHistory)])
            #expect(
                try await store.usage(userID: user).bytes == usage - BlobCharge.of(2000) - BlobCharge.of(4000),
                "each counted as BlobCharge counts it")
            #expect(try await read(store, user: user, Self.sha(kept), 0..<1000) == kept)
            #expect(try await store.blobUpload(userID: user, sha256: Self.sha([9, 9])) == nil)
            // Purging B takes its history: `inHistory` goes on the next collection.
            #expect(
                try await contract.push(
                    store, user: user,
                    [
                        "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(noteB),
                        "baseRev": 8, "op": "delete", "fields": [:],
                    ])["status"] == "applied")
            let second = try await store.collectBlobs(
                storedBefore: Date().addingTimeInterval(1), uploadsBefore: Date().addingTimeInterval(1))
            #expect(second.blobs == 1 && second.bytes == 3000, "\(second)")
            #expect(try await store.storedBlobs(userID: user).map(\.sha256) == [Self.sha(kept)])
            // A collected blob can be uploaded again, and referenced again.
            _ = try await upload(store, user: user, dropped)
            #expect(
                try await contract.push(store, user: user, attach(noteA, baseRev: 1, add: [references[1]]))["status"]
                    == "applied")
        }
    }

    /// A database of the version before attachments: its notes (written without an
    /// `attachments` field) and pending pushes keep working, and attachments work on it.
    @Test(arguments: backends) func aDatabaseFromBeforeAttachmentsUpgradesAndTakesThem(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let old = try openStore(location)
            try await migrate(old, upTo: "account-admin")
            let user = try await makeUserOfEarlierVersion(old)
            let id = UUID().uuidString.lowercased()
            // A note as that version wrote it (its push wrote these rows).
            try await executeRaw(
                old,
                [
                    ("UPDATE user_seq SET seq = 1 WHERE user_id = $1", [user]),
                    (
                        "INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at) VALUES ($1, 'notes', $2, 1, 1, $3, $4, 0, 0)",
                        [user, id, false, #"{"title":"Before"}"#]
                    ),
                    (
                        "INSERT INTO revisions (user_id, collection, record_id, rev, conflict, seq, fields, device, ccid, updated_at) VALUES ($1, 'notes', $2, 1, $3, 1, $4, NULL, NULL, 0)",
                        [user, id, false, #"{"title":"Before"}"#]
                    ),
                ])
            await old.shutdown()

            let store = try openStore(location)
            try await store.migrate()
            #expect(try await store.record(userID: user, collection: "notes", id: id)?.fields["title"] == "Before")
            let bytes = Self.bytes(5000, seed: 11)
            let blob = try await upload(store, user: user, bytes)
            let reference = try #require(
                AttachmentReference(sha256: blob.sha256, size: blob.size, type: "image/png", name: "p.png"))
            #expect(
                try await contract.push(store, user: user, attach(id, baseRev: 1, add: [reference.element]))["status"]
                    == "applied")
            #expect(try await read(store, user: user, blob.sha256, 0..<5000) == bytes)
            await store.shutdown()
        }
    }
}
