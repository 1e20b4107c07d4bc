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
        case .postgres(let url):
            try PostgresStore(url: url, limits: Limits(), quota: quota, logger: Logger(label: "test"))
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
        [
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
            "baseRev": .int(baseRev),
            "op": .string(op), "fields": fields,
        ]
    }

    @Test(arguments: backends) func recordsBeyondTheQuotaAreRefusedAndADeleteMakesRoom(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let store = try open(location, quota: StorageQuota(records: 2))
            try await store.migrate()
            let user = try await contract.makeUser(store)
            let (a, b, c) = (
                UUID().uuidString.lowercased(), UUID().uuidString.lowercased(), UUID().uuidString.lowercased()
            )
            #expect(try await contract.push(store, user: user, contract.create(a, title: "a"))["status"] == "applied")
            #expect(try await contract.push(store, user: user, contract.create(b, title: "b"))["status"] == "applied")
            let refused = try await contract.push(store, user: user, contract.create(c, title: "c"))
            #expect(refused["type"] == "reject" && refused["code"] == "quota_exceeded", "\(refused)")
            #expect(try await store.record(userID: user, collection: "notes", id: c) == nil)
            #expect(try await store.latestSeq(userID: user) == 2)
            // Updating an existing record does not add one; deleting one makes room.
            #expect(
                try await contract.push(store, user: user, change(a, baseRev: 1, ["title": ["set": "a2"]]))["status"]
                    == "applied")
            #expect(
                try await contract.push(store, user: user, change(b, baseRev: 1, op: "delete"))["status"] == "applied")
            #expect(try await contract.push(store, user: user, contract.create(c, title: "c"))["status"] == "applied")
            let countedStore = try await counted(store, user: user)
            #expect(try await store.usage(userID: user).recordsOnly == countedStore)
            #expect(try await store.usage(userID: user).records == 2)
            await store.shutdown()
        }
    }

    @Test(arguments: backends) func bytesBeyondTheQuotaAreRefusedAndHistoryCounts(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let probe = try open(location, quota: .unlimited)
            try await probe.migrate()
            let user = try await contract.makeUser(probe)
            let id = UUID().uuidString.lowercased()
            _ = try await contract.push(
                probe, user: user, contract.create(id, title: String(repeating: "x", count: 100)))
            let one = try await probe.usage(userID: user)
            let countedOne = try await counted(probe, user: user)
            #expect(one.recordsOnly == countedOne)
            #expect(one.records == 1 && one.bytes > 100)
            // The first save is the record's first revision: its history holds it too.
            #expect(one.history == one.bytes)
            await probe.shutdown()
            // A quota of exactly what is stored, its history, and 50 bytes more.
            let store = try open(location, quota: StorageQuota(bytes: one.bytes + one.history + 50))
            let grown = try await contract.push(
                store, user: user,
                change(id, baseRev: 1, ["title": ["set": .string(String(repeating: "x", count: 151))]]))
            #expect(grown["code"] == "quota_exceeded", "\(grown)")
            let multiByte = try await contract.push(
                store, user: user,
                change(id, baseRev: 1, ["title": ["set": .string(String(repeating: "x", count: 149) + "é")]]))
            #expect(multiByte["code"] == "quota_exceeded", "bytes, not characters: \(multiByte)")
            #expect(
                try await store.record(userID: user, collection: "notes", id: id)?.fields["title"]
                    == .string(String(repeating: "x", count: 100)))
            #expect(
                try await contract.push(
                    store, user: user,
                    change(id, baseRev: 1, ["title": ["set": .string(String(repeating: "x", count: 150))]]))["status"]
                    == "applied")
            let full = try await store.usage(userID: user)
            #expect(full.bytes == one.bytes + 50)
            #expect(full.history > one.history, "the save's revision is counted")
            // Over the quota with its history (security-3 H3: stale saves of the same size kept
            // whole revisions for free): an edit that changes no size, or shrinks, still stores
            // a revision and is refused; deleting goes through and takes the history with it.
            let same = try await contract.push(
                store, user: user,
                change(id, baseRev: 2, ["title": ["set": .string(String(repeating: "y", count: 150))]]))
            #expect(same["code"] == "quota_exceeded", "\(same)")
            let smaller = try await contract.push(
                store, user: user, change(id, baseRev: 2, ["title": ["set": "short"]]))
            #expect(smaller["code"] == "quota_exceeded", "\(smaller)")
            #expect(
                try await contract.push(store, user: user, change(id, baseRev: 2, op: "delete"))["status"] == "applied")
            let emptied = try await store.usage(userID: user)
            #expect(emptied == StorageUsage(), "\(emptied)")
            await store.shutdown()
        }
    }

    /// `history_bytes` is what the revision rows hold, whatever writes them: saves (whole),
    /// the history service (deltas, thinning) and a purge; and a database of the version before
    /// gets it computed on upgrade.
    @Test(arguments: backends) func historyBytesAreWhatTheRevisionsHold(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            // The version before, with a record and six revisions (one conflict, one a delta)
            // written the way it wrote them.
            let store = try open(location, quota: .unlimited)
            try await migrate(store, upTo: "history")
            let user = UUID().uuidString.lowercased()
            let id = UUID().uuidString.lowercased()
            let bodies = (0..<6).map { #"{"body":""# + String(repeating: "line \($0) ", count: 200) + #""}"# }
            var statements: [(String, [any Sendable])] = [
                (
                    "INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
                    [user, "hist", "hist", "x", Int64(0)]
                ),
                ("INSERT INTO user_seq (user_id, seq, purged_seq) VALUES ($1, $2, $3)", [user, Int64(6), Int64(0)]),
                (
                    "INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    [user, "notes", id, Int64(6), Int64(6), false, bodies[5], Int64(0), Int64(0)]
                ),
            ]
            for (index, body) in bodies.enumerated() {
                statements.append(
                    (
                        "INSERT INTO revisions (user_id, collection, record_id, rev, conflict, seq, fields, updated_at, size, delta) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                        [
                            user, "notes", id, Int64(index + 1), index == 3, Int64(index + 1), index == 2 ? "{}" : body,
                            Int64(index) * 1000,
                            Int64(body.utf8.count), index == 2 ? #"{"body":"=3\t-4\t+x"}"# : nil,
                        ] as [any Sendable]
                    ))
            }
            try await executeRaw(store, statements)
            let held = try await revisionBytes(store, user: user)
            #expect(held > 5 * 1000)
            var rev: Int64 = 6
            // The version with history bytes migrates on start and counts what the rows hold.
            let upgraded = try open(location, quota: .unlimited)
            try await upgraded.migrate()
            #expect(try await upgraded.usage(userID: user).history == held)
            // Pushes and the history service's pass (deltas) keep it equal to the rows.
            let saved = try await contract.push(
                upgraded, user: user, change(id, baseRev: rev, ["body": ["set": "short now"]]))
            #expect(saved["status"] == "applied", "\(saved)")
            rev += 1
            #expect(try await upgraded.usage(userID: user).history == (try await revisionBytes(upgraded, user: user)))
            _ = try await upgraded.thinHistory(
                now: Date().addingTimeInterval(3600), policy: HistoryPolicy(days: 90), limit: 100)
            let after = try await revisionBytes(upgraded, user: user)
            let counter = try await upgraded.usage(userID: user).history
            #expect(counter == after, "counter \(counter), rows \(after), before \(held)")
            #expect(after < held + 200, "compacted to deltas: \(after) of \(held)")
            await upgraded.shutdown()
        }
    }

    @Test(arguments: backends) func aDatabaseFromBeforeQuotasGetsItsCountsOnUpgrade(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            // The schema of the version before quotas, with records written the way it wrote them.
            let old = try open(location, quota: .unlimited)
            let user = UUID().uuidString.lowercased()
            let fields = [#"{"title":"a","body":"naïve"}"#, #"{"title":"b","body":""}"#, "{}"]
            let ids = fields.map { _ in UUID().uuidString.lowercased() }
            let statements: [(String, [any Sendable])] =
                [
                    (
                        "INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
                        [user, "old", "old", "x", Int64(0)]
                    ),
                    (
                        "INSERT INTO user_seq (user_id, seq, purged_seq) VALUES ($1, $2, $3)",
                        [user, Int64(3), Int64(0)]
                    ),
                ]
                + fields.enumerated().map { index, text in
                    (
                        "INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                        [user, "notes", ids[index], Int64(1), Int64(index + 1), index == 2, text, Int64(0), Int64(0)]
                    )
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
            #expect(try await store.usage(userID: user).recordsOnly == countedStore)
            // And pushes keep the counts from there.
            #expect(
                try await contract.push(store, user: user, change(ids[1], baseRev: 1, op: "delete"))["status"]
                    == "applied")
            let countedAfterDelete = try await counted(store, user: user)
            #expect(try await store.usage(userID: user).recordsOnly == countedAfterDelete)
            #expect(try await store.usage(userID: user).records == 1)
            await store.shutdown()
        }
    }

    /// Blobs stored before charges counted their size; the upgrade counts each as ``BlobCharge``.
    @Test(arguments: backends) func blobsOfTheVersionBeforeAreRecountedOnUpgrade(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let old = try open(location, quota: .unlimited)
            try await migrate(old, upTo: "history-bytes")
            let user = UUID().uuidString.lowercased()
            try await executeRaw(
                old,
                [
                    (
                        "INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
                        [user, "blobby", "blobby", "x", Int64(0)]
                    ),
                    (
                        "INSERT INTO user_seq (user_id, seq, purged_seq, stored_bytes) VALUES ($1, $2, $3, $4)",
                        [user, Int64(0), Int64(0), Int64(3 + 5000)]
                    ),
                    (
                        "INSERT INTO blobs (user_id, sha256, size, type, created_at) VALUES ($1, $2, $3, $4, $5)",
                        [user, String(repeating: "a", count: 64), Int64(3), "text/plain", Int64(0)]
                    ),
                    (
                        "INSERT INTO blobs (user_id, sha256, size, type, created_at) VALUES ($1, $2, $3, $4, $5)",
                        [user, String(repeating: "b", count: 64), Int64(5000), "text/plain", Int64(0)]
                    ),
                ])
            await old.shutdown()
            let store = try open(location, quota: .unlimited)
            try await store.migrate()
            #expect(try await store.usage(userID: user).bytes == 4096 + 8192)
            #expect(BlobCharge.of(0) == 4096 && BlobCharge.of(4096) == 4096 && BlobCharge.of(4097) == 8192)
            await store.shutdown()
        }
    }

    /// The bytes the user's revision rows hold, summed by the database itself.
    func revisionBytes(_ store: any NotedStore, user: String) async throws -> Int64 {
        switch store {
        case let sqlite as SQLiteStore:
            return try await sqlite.pool.read { db in
                try Int64.fetchOne(
                    db,
                    sql: "SELECT COALESCE(SUM(\(SQLiteStore.storedBytes("r"))), 0) FROM revisions r WHERE user_id = ?",
                    arguments: [user]) ?? 0
            }
        case let postgres as PostgresStore:
            let rows = try await postgres.client.query(
                "SELECT COALESCE(SUM(octet_length(fields) + COALESCE(octet_length(delta), 0)), 0)::BIGINT FROM revisions WHERE user_id = \(user)",
                logger: Logger(label: "test"))
            for try await value in rows.decode(Int64.self) { return value }
            return 0
        default:
            Issue.record("unknown store")
            return 0
        }
    }
}

extension StorageUsage {
    /// The records' part alone, as ``QuotaTests/counted(_:user:)`` counts it.
    var recordsOnly: StorageUsage { StorageUsage(bytes: bytes, records: records) }
}
