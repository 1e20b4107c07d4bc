import Foundation
import Logging
import NotedCore
import Testing

@testable import NotedServer

/// One contract every storage backend keeps; run over SQLite and (when available) PostgreSQL.
@Suite struct StoreContractTests {
    static let backends = Backend.available

    func makeUser(_ store: any NotedStore) async throws -> String {
        let id = UUID().uuidString.lowercased()
        let name = "user-\(id.prefix(8))"
        let created = try await store.createUser(
            UserAccount(id: id, username: name, usernameKey: name, passwordHash: "x"), now: Date())
        #expect(created)
        return id
    }

    func push(_ store: any NotedStore, user: String, _ json: JSONValue, at now: Date = Date()) async throws -> JSONValue
    {
        let change = try ChangeParser().parse(json)
        return try await store.push(
            change, context: PushContext(userID: user, device: nil, now: now, bodyHash: change.json.jsonString)
        ).reply.json
    }

    func create(_ id: String, title: String) -> JSONValue {
        [
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id), "baseRev": 0,
            "op": "upsert",
            "fields": ["title": ["set": .string(title)]],
        ]
    }

    @Test(arguments: backends) func usernamesAreUniqueWithoutCase(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let first = UserAccount(
                id: UUID().uuidString.lowercased(), username: "Ann", usernameKey: "ann", passwordHash: "h")
            let second = UserAccount(
                id: UUID().uuidString.lowercased(), username: "ANN", usernameKey: "ann", passwordHash: "h")
            #expect(try await store.createUser(first, now: Date()))
            #expect(try await store.createUser(second, now: Date()) == false)
            #expect(try await store.user(usernameKey: "ann")?.id == first.id)
        }
    }

    @Test(arguments: backends) func createThenUpdateAdvancesRevAndSeq(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let id = UUID().uuidString.lowercased()
            let ack = try await push(store, user: user, create(id, title: "a"))
            #expect(ack["status"] == "applied")
            #expect(ack["rev"] == 1)
            #expect(ack["seq"] == 1)
            let update: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                "baseRev": 1, "op": "upsert", "fields": ["title": ["set": "b"]],
            ]
            let second = try await push(store, user: user, update)
            #expect(second["rev"] == 2)
            #expect(second["seq"] == 2)
            let record = try #require(try await store.record(userID: user, collection: "notes", id: id))
            #expect(record.fields["title"] == "b")
            #expect(record.fields["pinned"] == false)
            #expect(try await store.latestSeq(userID: user) == 2)
        }
    }

    @Test(arguments: backends) func userAndSeqReadsTheAccountWithItsLatestSeq(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            #expect(try await store.userAndSeq(id: UUID().uuidString.lowercased()) == nil)
            let user = try await makeUser(store)
            let fresh = try #require(try await store.userAndSeq(id: user))
            #expect(fresh.user == (try await store.user(id: user)))
            #expect(fresh.seq == 0)
            for title in ["a", "b", "c"] {
                _ = try await push(store, user: user, create(UUID().uuidString.lowercased(), title: title))
            }
            _ = try await store.setUserDisabled(id: user, disabled: true, now: Date())
            try await store.setTwoFactorPending(userID: user, secret: "JBSWY3DPEHPK3PXP")
            #expect(try await store.enableTwoFactor(userID: user, secret: "JBSWY3DPEHPK3PXP", recoveryHashes: []))
            let later = try #require(try await store.userAndSeq(id: user))
            #expect(later.seq == 3)
            #expect(later.seq == (try await store.latestSeq(userID: user)))
            #expect(later.user.disabled && later.user.twoFactor)
            #expect(later.user == (try await store.user(id: user)))
        }
    }

    @Test(arguments: backends) func resendOfAppliedChangeIsAnsweredWithTheOriginalResult(backend: Backend) async throws
    {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let change = create(UUID().uuidString.lowercased(), title: "once")
            _ = try await push(store, user: user, change)
            let again = try await push(store, user: user, change)
            #expect(again["status"] == "duplicate")
            #expect(again["rev"] == 1)
            #expect(try await store.latestSeq(userID: user) == 1)
            guard case .object(var altered) = change else { return }
            altered["fields"] = ["title": ["set": "different"]]
            let reused = try await push(store, user: user, .object(altered))
            #expect(reused["code"] == "ccid_reused")
        }
    }

    @Test(arguments: backends) func anotherUsersRecordIsNotFound(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let alice = try await makeUser(store)
            let bob = try await makeUser(store)
            let id = UUID().uuidString.lowercased()
            _ = try await push(store, user: alice, create(id, title: "secret"))
            #expect(try await store.record(userID: bob, collection: "notes", id: id) == nil)
            let edit: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                "baseRev": 1, "op": "upsert", "fields": ["title": ["set": "mine"]],
            ]
            #expect(try await push(store, user: bob, edit)["code"] == "not_found")
            #expect(try await store.changes(userID: bob, since: 0, limit: 10).records.isEmpty)
        }
    }

    @Test(arguments: backends) func concurrentPushesOfOneUserGetDistinctSeqs(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let acks = try await withThrowingTaskGroup(of: JSONValue.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        try await push(store, user: user, create(UUID().uuidString.lowercased(), title: "n\(index)"))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let seqs = Set(acks.compactMap { $0["seq"]?.intValue })
            #expect(seqs == Set(1...40))
            #expect(try await store.latestSeq(userID: user) == 40)
        }
    }

    /// Every edit below is made from revision 1 and they race: on SQLite each is decided on a
    /// reader before the write transaction, so most find the note changed by the time they
    /// write and must be decided again inside, never written from the stale decision.
    @Test(arguments: backends) func racingStaleEditsOfOneNoteAreEachMergedOnce(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let id = UUID().uuidString.lowercased()
            // Words far enough apart that one edit's patch context never takes in another's word.
            let words = (0..<24).map { "word\($0)" }
            let segments = words.enumerated().map { "\($1) is followed by padding number \($0)." }
            let text = segments.joined(separator: " ")
            let created: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                "baseRev": 0, "op": "upsert", "fields": ["body": ["set": .string(text)]],
            ]
            #expect(try await push(store, user: user, created)["rev"] == 1)
            let acks = try await withThrowingTaskGroup(of: JSONValue.self) { group in
                for (index, word) in words.enumerated() {
                    // A delta against revision 1 replacing one word with its upper case.
                    let offset = segments[..<index].reduce(0) { $0 + $1.count + 1 }
                    let rest = text.count - offset - word.count
                    let delta = (offset > 0 ? "=\(offset)\t" : "") + "-\(word.count)\t+\(word.uppercased())\t=\(rest)"
                    let edit: JSONValue = [
                        "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                        "baseRev": 1, "op": "upsert", "fields": ["body": ["delta": .string(delta)]],
                    ]
                    group.addTask { try await push(store, user: user, edit) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(acks.allSatisfy { $0["type"] == "ack" && ($0["conflicts"]?.arrayValue ?? []).isEmpty }, "\(acks)")
            #expect(Set(acks.compactMap { $0["rev"]?.intValue }) == Set(2...25))
            let record = try #require(try await store.record(userID: user, collection: "notes", id: id))
            let expected = words.enumerated().map { "\($1.uppercased()) is followed by padding number \($0)." }.joined(
                separator: " ")
            #expect(record.fields["body"]?.stringValue == expected)
            #expect(record.rev == 25)
        }
    }

    /// One push message through the store's group commit, as the sync service sends it.
    func pushMessage(_ store: any NotedStore, user: String, _ changes: [JSONValue]) async throws -> [Result<
        JSONValue, any Error
    >] {
        let parsed = try changes.map { json -> (change: Change, context: PushContext) in
            let change = try ChangeParser().parse(json)
            return (change, PushContext(userID: user, device: nil, now: Date(), bodyHash: change.json.jsonString))
        }
        return try await store.push(parsed).map { $0.map(\.reply.json) }
    }

    func update(_ id: String, baseRev: Int64, _ fields: JSONValue) -> JSONValue {
        [
            "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
            "baseRev": .int(baseRev),
            "op": "upsert", "fields": fields,
        ]
    }

    /// Many users' push messages at once (group commit: their changes share transactions): each
    /// change gets its own answer, in its message's order, a record changed twice in one message
    /// and a `ccid` sent twice in it are each decided after the change before them, and every
    /// user's `seq` runs without a gap.
    @Test(arguments: backends) func manyUsersPushingAtOnceEachGetTheirOwnAnswersInOrder(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            var users: [String] = []
            for _ in 0..<24 { users.append(try await makeUser(store)) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for user in users {
                    group.addTask {
                        for round in 0..<3 {
                            let a = UUID().uuidString.lowercased()
                            let b = UUID().uuidString.lowercased()
                            let createA = create(a, title: "a\(round)")
                            let answers = try await pushMessage(
                                store, user: user,
                                [
                                    createA, create(b, title: "b\(round)"),
                                    update(a, baseRev: 1, ["title": ["set": .string("a\(round)'")]]),
                                    createA,
                                    update(b, baseRev: 1, ["title": ["set": .string("b\(round)'")]]),
                                    update(UUID().uuidString.lowercased(), baseRev: 3, ["title": ["set": "nowhere"]]),
                                ]
                            ).map { try $0.get() }
                            let first = Int64(round * 4)
                            #expect(
                                answers.map { $0["status"] ?? $0["code"] } == [
                                    "applied", "applied", "applied", "duplicate", "applied", "not_found",
                                ])
                            #expect(
                                answers.map { $0["seq"] } == [
                                    .int(first + 1), .int(first + 2), .int(first + 3), .int(first + 1), .int(first + 4),
                                    nil,
                                ])
                            #expect(answers.map { $0["rev"] } == [1, 1, 2, 1, 2, nil])
                            #expect(
                                try await store.record(userID: user, collection: "notes", id: a)?.fields["title"]
                                    == .string("a\(round)'"))
                            #expect(
                                try await store.record(userID: user, collection: "notes", id: b)?.fields["title"]
                                    == .string("b\(round)'"))
                        }
                    }
                }
                try await group.waitForAll()
            }
            for user in users {
                #expect(try await store.latestSeq(userID: user) == 12)
                let page = try await store.changes(userID: user, since: 0, limit: 100)
                #expect(page.records.count == 6)
            }
        }
    }

    /// PostgreSQL's group commit: changes that wait while a transaction is in flight share the
    /// next one (here 400 changes of 40 users in far fewer transactions than changes).
    @Test func postgresCommitsWaitingChangesTogether() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await withStore(.postgres) { (store: any NotedStore) async throws in
            let postgres = try #require(store as? PostgresStore)
            var users: [String] = []
            for _ in 0..<40 { users.append(try await makeUser(store)) }
            let before = await postgres.commits.committed
            try await withThrowingTaskGroup(of: Void.self) { group in
                for user in users {
                    group.addTask {
                        for _ in 0..<2 {
                            let answers = try await pushMessage(
                                store, user: user,
                                (0..<5).map { create(UUID().uuidString.lowercased(), title: "t\($0)") })
                            #expect(answers.allSatisfy { (try? $0.get())?["status"] == "applied" })
                        }
                    }
                }
                try await group.waitForAll()
            }
            let after = await postgres.commits.committed
            #expect(after.changes - before.changes == 400)
            #expect(
                after.transactions - before.transactions < 100,
                "\(after.transactions - before.transactions) transactions")
            for user in users { #expect(try await store.latestSeq(userID: user) == 10) }
        }
    }

    /// A PostgreSQL batch takes changes only up to about ``PostgresGroupCommit/maxBatchBytes`` of
    /// records: thirty notes of 190,000 characters in one message take at least two
    /// transactions, and keep their order.
    @Test func postgresBatchesAreBoundedInBytes() async throws {
        guard Backend.available.contains(.postgres) else { return }
        try await withStore(.postgres) { (store: any NotedStore) async throws in
            let postgres = try #require(store as? PostgresStore)
            let user = try await makeUser(store)
            let body = String(repeating: "lorem ipsum ", count: 190_000 / 12)
            let before = await postgres.commits.committed
            let answers = try await pushMessage(
                store, user: user,
                (0..<30).map { _ in
                    update(UUID().uuidString.lowercased(), baseRev: 0, ["body": ["set": .string(body)]])
                }
            ).map { try $0.get() }
            let after = await postgres.commits.committed
            #expect(answers.map { $0["seq"] } == (1...30).map { .int(Int64($0)) })
            #expect(after.changes - before.changes == 30)
            #expect(
                after.transactions - before.transactions >= 2,
                "\(after.transactions - before.transactions) transactions")
        }
    }

    /// A change that is costly to decide (a merge into a long text) is decided outside the
    /// transactions while other users' changes commit, and its user's changes keep their order
    /// around it (SQLite decides the cheap ones inside its transaction: the costly one and those
    /// after it leave that transaction and are queued again).
    @Test(arguments: backends) func aCostlyMergeKeepsItsPlaceInItsUsersOrder(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let heavy = try await makeUser(store)
            let others = [try await makeUser(store), try await makeUser(store), try await makeUser(store)]
            let id = UUID().uuidString.lowercased()
            let words = (0..<6000).map { "w\($0)" }
            let text = words.joined(separator: " ")  // about 40 KB: costly (PushAlgorithm.costlyTextBytes)
            #expect(
                try await push(store, user: heavy, update(id, baseRev: 0, ["body": ["set": .string(text)]]))["rev"] == 1
            )
            #expect(try await push(store, user: heavy, update(id, baseRev: 1, ["title": ["set": "t"]]))["rev"] == 2)
            // Against revision 1: merged with revision 2's title.
            let delta = "=3\t-2\t+W1\t=\(text.utf16.count - 5)"
            let (earlier, later) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
            async let heavyAnswers = pushMessage(
                store, user: heavy,
                [
                    create(earlier, title: "before"), update(id, baseRev: 1, ["body": ["delta": .string(delta)]]),
                    create(later, title: "after"),
                ])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for user in others {
                    group.addTask {
                        for index in 0..<20 {
                            let answer = try await push(
                                store, user: user, create(UUID().uuidString.lowercased(), title: "n\(index)"))
                            #expect(answer["seq"] == .int(Int64(index + 1)))
                        }
                    }
                }
                try await group.waitForAll()
            }
            let answers = try await heavyAnswers.map { try $0.get() }
            #expect(answers.map { $0["status"] } == ["applied", "merged", "applied"], "\(answers)")
            #expect(answers.map { $0["seq"] } == [3, 4, 5])
            let record = try #require(try await store.record(userID: heavy, collection: "notes", id: id))
            #expect(record.fields["title"] == "t")
            #expect(record.fields["body"]?.stringValue?.hasPrefix("w0 W1 w2 ") == true)
        }
    }

    /// A change the database itself refuses (here a trigger standing for any statement error)
    /// fails alone: the changes committed with it in one transaction are tried again without it.
    @Test(arguments: backends) func aChangeTheDatabaseRefusesFailsAlone(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let other = try await makeUser(store)
            switch backend {
            case .sqlite:
                try await executeRaw(
                    store,
                    [
                        (
                            "CREATE TRIGGER poison BEFORE INSERT ON records WHEN NEW.id = 'deadbeef-0000-4000-8000-000000000000' BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
                            []
                        )
                    ])
            case .postgres:
                try await executeRaw(
                    store,
                    [
                        (
                            "CREATE FUNCTION poison() RETURNS trigger AS $$ BEGIN IF NEW.id = 'deadbeef-0000-4000-8000-000000000000' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
                            []
                        ),
                        ("CREATE TRIGGER poison BEFORE INSERT ON records FOR EACH ROW EXECUTE FUNCTION poison()", []),
                    ])
            }
            let fine = UUID().uuidString.lowercased()
            let poisoned = "deadbeef-0000-4000-8000-000000000000"
            async let theOther = pushMessage(
                store, user: other, (0..<50).map { create(UUID().uuidString.lowercased(), title: "o\($0)") })
            let answers = try await pushMessage(
                store, user: user,
                [
                    create(fine, title: "before"), create(poisoned, title: "p"),
                    create(UUID().uuidString.lowercased(), title: "after"),
                ])
            #expect(try answers[0].get()["seq"] == 1)
            #expect(throws: (any Error).self) { try answers[1].get() }
            #expect(try answers[2].get()["seq"] == 2)
            #expect(try await theOther.allSatisfy { try $0.get()["status"] == "applied" })
            #expect(try await store.latestSeq(userID: user) == 2)
            #expect(try await store.latestSeq(userID: other) == 50)
            #expect(try await store.record(userID: user, collection: "notes", id: poisoned) == nil)
        }
    }

    @Test(arguments: backends) func changesArePagedInSeqOrder(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            for index in 0..<5 {
                _ = try await push(store, user: user, create(UUID().uuidString.lowercased(), title: "\(index)"))
            }
            let first = try await store.changes(userID: user, since: 0, limit: 2)
            #expect(first.records.map(\.seq) == [1, 2])
            #expect(first.more && first.cursor == 2 && !first.reset)
            let second = try await store.changes(userID: user, since: first.cursor, limit: 2)
            #expect(second.records.map(\.seq) == [3, 4])
            let last = try await store.changes(userID: user, since: second.cursor, limit: 2)
            #expect(last.records.map(\.seq) == [5])
            #expect(!last.more && last.cursor == 5)
        }
    }

    @Test(arguments: backends) func aPageIsBoundedInBytesAndHoldsAtLeastOneRecord(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let big = String(repeating: "x", count: 190_000)
            for index in 0..<30 {
                _ = try await push(store, user: user, create(UUID().uuidString.lowercased(), title: "\(index)" + big))
            }
            var since: Int64 = 0
            var pages: [Int] = []
            while true {
                let page = try await store.changes(userID: user, since: since, limit: 500)
                pages.append(page.records.count)
                let bytes = page.records.reduce(0) { $0 + JSONValue.object($1.fields).jsonString.utf8.count }
                #expect(bytes <= 4 << 20, "a page of \(bytes) bytes")
                since = page.cursor
                if !page.more { break }
            }
            #expect(pages.reduce(0, +) == 30 && pages.count >= 2, "\(pages)")
        }
    }

    @Test func aRecordLargerThanThePageBoundStillComesAlone() {
        let huge = String(repeating: "y", count: 5 << 20)
        let records = (1...3).map { seq in
            Record(
                collection: "notes", id: "r\(seq)", rev: 1, seq: Int64(seq), deleted: false,
                fields: ["body": .string(huge)],
                createdAt: Date(), updatedAt: Date())
        }
        let page = ChangesQuery(since: 0, limit: 500, latest: 3, purgedSeq: 0).page(from: records)
        #expect(page.records.map(\.seq) == [1] && page.more && page.cursor == 1)
    }

    @Test(arguments: backends) func sweptTombstonesMakeAnOldCursorReset(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let keep = UUID().uuidString.lowercased()
            let gone = UUID().uuidString.lowercased()
            _ = try await push(store, user: user, create(keep, title: "keep"))
            _ = try await push(store, user: user, create(gone, title: "gone"))
            let delete: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(gone),
                "baseRev": 1, "op": "delete", "fields": [:],
            ]
            #expect(try await push(store, user: user, delete)["status"] == "applied")
            let beforeSweep = try await store.changes(userID: user, since: 2, limit: 10)
            #expect(beforeSweep.records.map(\.deleted) == [true])
            try await store.sweep(
                tombstonesBefore: Date().addingTimeInterval(1), appliedChangesBefore: Date.distantPast)
            // A cursor older than the purge: a reset that sends the client back to 0, holding
            // nothing itself (so it is as small as any page), and from 0 the snapshot pages on.
            let page = try await store.changes(userID: user, since: 1, limit: 10)
            #expect(page.reset && page.more)
            #expect(page.records.isEmpty && page.cursor == 0)
            let next = try await store.changes(userID: user, since: page.cursor, limit: 10)
            #expect(!next.reset && next.records.map(\.id) == [keep] && next.cursor == 3 && !next.more)
        }
    }

    /// A new device's first sync of an account larger than a page, after a tombstone was swept:
    /// every page of the snapshot follows the one before, never a reset back to 0 (before, the
    /// second page was a reset, for ever), and every live note comes exactly once.
    @Test(arguments: backends) func aSnapshotAfterASweepEndsWithEveryNoteOnce(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            var ids: [String] = []
            for index in 0..<30 {
                let id = UUID().uuidString.lowercased()
                ids.append(id)
                _ = try await push(store, user: user, create(id, title: "n\(index)"))
            }
            let delete: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(ids[4]),
                "baseRev": 1, "op": "delete", "fields": [:],
            ]
            #expect(try await push(store, user: user, delete)["status"] == "applied")
            for index in 30..<40 {
                let id = UUID().uuidString.lowercased()
                ids.append(id)
                _ = try await push(store, user: user, create(id, title: "n\(index)"))
            }
            try await store.sweep(
                tombstonesBefore: Date().addingTimeInterval(1), appliedChangesBefore: Date.distantPast)
            var seen: [String] = []
            var since: Int64 = 0
            var pages = 0
            while true {
                let page = try await store.changes(userID: user, since: since, limit: 10, snapshot: true)
                #expect(!page.reset, "page \(pages + 1) from \(since) is a reset")
                if page.reset { break }
                #expect(page.records.count <= 10, "a client that says snapshot gets bounded pages")
                seen += page.records.map(\.id)
                pages += 1
                guard page.more, pages < 20 else { break }
                since = page.cursor
            }
            #expect(
                seen.count == 39 && Set(seen) == Set(ids).subtracting([ids[4]]), "\(seen.count) seen in \(pages) pages")
            #expect(pages == 4, "pages of 10")
            // Not saying it (a client of an earlier version): the second page is a reset, as
            // before; every page stays bounded.
            let first = try await store.changes(userID: user, since: 0, limit: 10, snapshot: false)
            #expect(first.records.count == 10)
            #expect(try await store.changes(userID: user, since: first.cursor, limit: 10, snapshot: false).reset)
            // A cursor from before the sweep, not in a snapshot, is still reset.
            #expect(try await store.changes(userID: user, since: 3, limit: 10, snapshot: false).reset)
        }
    }

    @Test(arguments: backends) func oldSavesAreThinnedByTimeAndAThinnedBaseIsUnavailable(backend: Backend) async throws
    {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let id = UUID().uuidString.lowercased()
            let start = Date(timeIntervalSince1970: 1_790_000_000)  // a 10-minute stretch begins here
            _ = try await push(store, user: user, create(id, title: "0"), at: start)
            for rev in 1...3 {
                let edit: JSONValue = [
                    "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                    "baseRev": .int(Int64(rev)), "op": "upsert", "fields": ["title": ["set": .string("\(rev)")]],
                ]
                _ = try await push(store, user: user, edit, at: start.addingTimeInterval(Double(rev)))
            }
            let policy = HistoryPolicy(days: 90)
            // Within 10 minutes every save is kept (and compacted).
            _ = try await store.thinHistory(now: start.addingTimeInterval(60), policy: policy, limit: 100)
            #expect(
                try #require(try await store.revisions(userID: user, collection: "notes", id: id)).map(\.rev) == [
                    1, 2, 3, 4,
                ])
            for rev in Int64(1)...4 {
                #expect(
                    try await store.revision(userID: user, collection: "notes", id: id, rev: rev, conflict: false)?
                        .fields["title"] == .string("\(rev - 1)"))
            }
            // An hour later the stretch keeps its newest save only.
            _ = try await store.thinHistory(now: start.addingTimeInterval(3600), policy: policy, limit: 100)
            #expect(
                try #require(try await store.revisions(userID: user, collection: "notes", id: id)).map(\.rev) == [4])
            let stale: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                "baseRev": 1, "op": "upsert", "fields": ["title": ["delta": "=1\t+x"]],
            ]
            #expect(
                try await push(store, user: user, stale, at: start.addingTimeInterval(3601))["code"]
                    == "base_unavailable")
        }
    }

    @Test(arguments: backends) func conflictRevisionsAreKeptUpToTheNewestFew(backend: Backend) async throws {
        try await withStore(backend, conflictRevisionsKept: 2) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let id = UUID().uuidString.lowercased()
            _ = try await push(store, user: user, create(id, title: "0"))
            func edit(_ title: String, baseRev: Int64) -> JSONValue {
                [
                    "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                    "baseRev": .int(baseRev), "op": "upsert", "fields": ["title": ["set": .string(title)]],
                ]
            }
            // Each round: an edit, then another device's edit from the revision before it (a conflict).
            var rev: Int64 = 1
            for round in 1...5 {
                _ = try await push(store, user: user, edit("mine \(round)", baseRev: rev))
                let stale = try await push(store, user: user, edit("theirs \(round)", baseRev: rev))
                #expect(stale["status"] == "merged", "\(stale)")
                rev += 2
            }
            let revisions = try #require(try await store.revisions(userID: user, collection: "notes", id: id))
            let conflicts = revisions.filter(\.conflict)
            #expect(conflicts.count == 2, "\(revisions.map { ($0.rev, $0.conflict) })")
            var titles: [JSONValue?] = []
            for conflict in conflicts.sorted(by: { $0.rev < $1.rev }) {
                titles.append(
                    try await store.revision(
                        userID: user, collection: "notes", id: id, rev: conflict.rev, conflict: true)?.fields["title"])
            }
            #expect(titles == ["mine 4", "mine 5"].map { JSONValue.string($0) }, "the newest stay")
        }
    }

    @Test(arguments: backends) func nulCharactersInTextAreStoredFaithfully(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let id = UUID().uuidString.lowercased()
            _ = try await push(store, user: user, create(id, title: "a\u{0}b"))
            let record = try #require(try await store.record(userID: user, collection: "notes", id: id))
            #expect(record.fields["title"] == "a\u{0}b")
        }
    }

    @Test(arguments: backends) func refreshTokenReuseRevokesTheFamily(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let user = try await makeUser(store)
            let family = RefreshFamily(id: UUID().uuidString, userID: user, clientID: "noted", device: nil)
            let later = Date().addingTimeInterval(3600)
            try await store.createRefreshFamily(family, firstTokenHash: "h1", expiresAt: later, now: Date())
            #expect(
                try await store.rotateRefreshToken(hash: "h1", replacementHash: "h2", expiresAt: later, now: Date())
                    == .rotated(family))
            #expect(
                try await store.rotateRefreshToken(hash: "h1", replacementHash: "h3", expiresAt: later, now: Date())
                    == .reused(familyID: family.id))
            #expect(
                try await store.rotateRefreshToken(hash: "h2", replacementHash: "h4", expiresAt: later, now: Date())
                    == .invalid)
            #expect(
                try await store.rotateRefreshToken(
                    hash: "unknown", replacementHash: "h5", expiresAt: later, now: Date()) == .invalid)
        }
    }

    @Test(arguments: backends) func signingKeysPersist(backend: Backend) async throws {
        try await withStore(backend) { (store: any NotedStore) async throws in
            let key = SigningKeyRecord(kid: "k1", privateKeyPEM: "pem", createdAt: Date(millis: 1000))
            try await store.addSigningKey(key)
            try await store.addSigningKey(SigningKeyRecord(kid: "k1", privateKeyPEM: "other", createdAt: Date()))
            #expect(try await store.signingKeys() == [key])
        }
    }
}

/// A PostgreSQL URL that cannot be used fails at once with PostgreSQL's reason.
@Suite struct PostgresReachabilityTests {
    @Test func anUnreachableServerFailsAtOnceWithTheReason() async throws {
        // Port 1 on loopback: nothing listens there.
        let store = try PostgresStore(
            url: "postgres://noted@127.0.0.1:1/noted", limits: Limits(), logger: Logger(label: "test"))
        let started = ContinuousClock.now
        await #expect {
            try await store.migrate()
        } throws: { error in
            String(describing: error).contains("cannot reach the database: PostgreSQL at 127.0.0.1:1")
        }
        // The pool alone would retry for a minute or more; the probe fails on the refused
        // connection. The bound is loose: the whole suite runs beside it on two cores (it took
        // 17 and 22 s there, 5 ms alone).
        #expect(ContinuousClock.now - started < .seconds(50))
        await store.shutdown()
    }

    @Test func aMissingDatabaseOrRoleIsNamed() async throws {
        guard let url = Backend.postgresURL, var components = URLComponents(string: url) else { return }
        components.path = "/noted_no_such_database"
        let store = try PostgresStore(url: components.string ?? url, limits: Limits(), logger: Logger(label: "test"))
        await #expect {
            try await store.migrate()
        } throws: { error in
            String(describing: error).contains("database \"noted_no_such_database\" does not exist")
        }
        await store.shutdown()
    }
}
