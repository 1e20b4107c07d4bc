import Foundation
import GRDB
import Logging
import NotedCore
import PostgresNIO
import Testing
@testable import NotedServer

/// Storage quotas (issue 14, `--quota-bytes`, `--quota-records`), on both backends: a change
/// that would take its account beyond a limit is rejected `quota_exceeded` and nothing of it is
/// stored; shrinking is always allowed; the counts stay equal to what the records hold; and a
/// database of the version before quotas gets its counts on upgrade.
@Suite struct QuotaTests {
    static let backends = Backend.available
    let contract = StoreContractTests()

    func open(_ location: DatabaseLocation, quota: StorageQuota) throws -> any NotedStore {
        switch location {
        case .sqlite(let path): try SQLiteStore(path: path, limits: Limits(), quota: quota)
        case .postgres(let url): try PostgresStore(url: url, limits: Limits(), quota: quota, logger: Logger(label: "test"))
        }
    }

    /// What the records hold, counted from them.
    func counted(_ store: any NotedStore, user: String) async throws -> StorageUsage {
        let page = try await store.changes(userID: user, since: 0, limit: 1000)
        return page.records.reduce(into: StorageUsage()) { usage, record in
            let one = StorageUsage.of(record)
            usage.bytes += one.bytes
            usage.records += one.records
        }
    }

    func change(_ id: String, baseRev: Int64, op: String = "upsert", _ fields: JSONValue = [:]) -> JSONValue {
        ["ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id), "baseRev": .int(baseRev),
         "op": .string(op), "fields": fields]
    }

    @Test(arguments: backends) func recordsBeyondTheQuotaAreRefusedAndADeleteMakesRoom(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let store = try open(location, quota: StorageQuota(records: 2))
            try await store.migrate()
            let user = try await contract.makeUser(store)
            let (a, b, c) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            #expect(try await contract.push(store, user: user, contract.create(a, title: "a"))["status"] == "applied")
            #expect(try await contract.push(store, user: user, contract.create(b, title: "b"))["status"] == "applied")
            let refused = try await contract.push(store, user: user, contract.create(c, title: "c"))
            #expect(refused["type"] == "reject" && refused["code"] == "quota_exceeded", "\(refused)")
            #expect(try await store.record(userID: user, collection: "notes", id: c) == nil)
            #expect(try await store.latestSeq(userID: user) == 2)
            // Updating an existing record does not add one; deleting one makes room.
            #expect(try await contract.push(store, user: user, change(a, baseRev: 1, ["title": ["set": "a2"]]))["status"] == "applied")
            #expect(try await contract.push(store, user: user, change(b, baseRev: 1, op: "delete"))["status"] == "applied")
            #expect(try await contract.push(store, user: user, contract.create(c, title: "c"))["status"] == "applied")
            let countedStore = try await counted(store, user: user)
            #expect(try await store.usage(userID: user) == countedStore)
            #expect(try await store.usage(userID: user).records == 2)
            await store.shutdown()
        }
    }

    @Test(arguments: backends) func bytesBeyondTheQuotaAreRefusedAndShrinkingIsAlwaysAllowed(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let probe = try open(location, quota: .unlimited)
            try await probe.migrate()
            let user = try await contract.makeUser(probe)
            let id = UUID().uuidString.lowercased()
            _ = try await contract.push(probe, user: user, contract.create(id, title: String(repeating: "x", count: 100)))
            let one = try await probe.usage(userID: user)
            let countedOne = try await counted(probe, user: user)
            #expect(one == countedOne)
            #expect(one.records == 1 && one.bytes > 100)
            await probe.shutdown()
            // A quota of exactly what is stored plus 50 bytes.
            let store = try open(location, quota: StorageQuota(bytes: one.bytes + 50))
            let grown = try await contract.push(store, user: user, change(id, baseRev: 1, ["title": ["set": .string(String(repeating: "x", count: 151))]]))
            #expect(grown["code"] == "quota_exceeded", "\(grown)")
            #expect(try await store.record(userID: user, collection: "notes", id: id)?.fields["title"] == .string(String(repeating: "x", count: 100)))
            #expect(try await contract.push(store, user: user, change(id, baseRev: 1, ["title": ["set": .string(String(repeating: "x", count: 150))]]))["status"] == "applied")
            #expect(try await store.usage(userID: user).bytes == one.bytes + 50)
            // Over a lowered quota, a smaller text still goes through.
            await store.shutdown()
            let lowered = try open(location, quota: StorageQuota(bytes: 10))
            #expect(try await contract.push(lowered, user: user, change(id, baseRev: 2, ["title": ["set": "short"]]))["status"] == "applied")
            let multiByte = try await contract.push(lowered, user: user, change(id, baseRev: 3, ["title": ["set": "shorté"]]))
            #expect(multiByte["code"] == "quota_exceeded", "bytes, not characters: \(multiByte)")
            let countedLowered = try await counted(lowered, user: user)
            #expect(try await lowered.usage(userID: user) == countedLowered)
            await lowered.shutdown()
        }
    }

    @Test(arguments: backends) func aDatabaseFromBeforeQuotasGetsItsCountsOnUpgrade(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            // The schema of the version before quotas, with records written the way it wrote them.
            let old = try open(location, quota: .unlimited)
            let user = UUID().uuidString.lowercased()
            let fields = [#"{"title":"a","body":"naïve"}"#, #"{"title":"b","body":""}"#, "{}"]
            let ids = fields.map { _ in UUID().uuidString.lowercased() }
            let statements: [(String, [any Sendable])] = [
                ("INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
                 [user, "old", "old", "x", Int64(0)]),
                ("INSERT INTO user_seq (user_id, seq, purged_seq) VALUES ($1, $2, $3)", [user, Int64(3), Int64(0)]),
            ] + fields.enumerated().map { index, text in
                ("INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                 [user, "notes", ids[index], Int64(1), Int64(index + 1), index == 2, text, Int64(0), Int64(0)])
            }
            try await migrate(old, upTo: "collections")
            try await executeRaw(old, statements)
            await old.shutdown()
            // The new version migrates on start, and counts what the records hold.
            let store = try open(location, quota: .standard)
            try await store.migrate()
            let expected = StorageUsage(bytes: Int64(fields[0].utf8.count + fields[1].utf8.count), records: 2)
            #expect(try await store.usage(userID: user) == expected)
            let countedStore = try await counted(store, user: user)
            #expect(try await store.usage(userID: user) == countedStore)
            // And pushes keep the counts from there.
            #expect(try await contract.push(store, user: user, change(ids[1], baseRev: 1, op: "delete"))["status"] == "applied")
            let countedAfterDelete = try await counted(store, user: user)
            #expect(try await store.usage(userID: user) == countedAfterDelete)
            #expect(try await store.usage(userID: user).records == 1)
            await store.shutdown()
        }
    }
}
