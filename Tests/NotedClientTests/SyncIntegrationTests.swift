import Foundation
import NotedClient
import NotedCore
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Two `NotedClient`s of one user against the real server, in process.
@Suite(.serialized) struct SyncIntegrationTests {
    @Test func aNoteCreatedOnOneClientReachesTheOtherLive() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let b = try server.client(user)
            await a.startSync()
            await b.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            #expect(await b.waitUntilSynced(timeout: .seconds(30)))
            let events = await b.events()
            let note = try await a.create(NoteFields(title: "Hello", body: "from A", tags: ["x"]))
            var received = false
            for await event in events {
                if case .added("notes", let ids, .remote) = event, ids.contains(note.id) {
                    received = true
                    break
                }
            }
            #expect(received)
            let copy = try #require(try await b.note(note.id))
            #expect(copy.title == "Hello")
            #expect(copy.body == "from A")
            #expect(copy.rev == 1)
            #expect(!copy.pending)
            await a.stopSync()
            await b.stopSync()
        }
    }

    /// `waitUntilSynced` waits on the engine's steps, not a timer: it still ends when its task
    /// is cancelled (here with the server gone, so it would otherwise wait out its two minutes),
    /// and it ends as an edit's ack is applied.
    @Test func waitingForSyncEndsWithTheSyncOrWhenCancelled() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("noted-wait-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/client.sqlite"
        let (user, port) = try await LiveServer.runReturning(directory: directory) { server in
            let user = try await server.makeUser()
            let client = try server.client(user, path: path)
            await client.startSync()
            #expect(await client.waitUntilSynced(timeout: .seconds(30)))
            let note = try await client.create(NoteFields(title: "T", body: "B"))
            #expect(await client.waitUntilSynced(timeout: .seconds(30)))
            #expect(try await client.note(note.id)?.pending == false)
            await client.stopSync()
            return (user, server.port)
        }
        // The server is gone: a client of it never syncs an edit.
        let client = try LiveServer.offlineClient(user, path: path, port: port)
        await client.startSync()
        _ = try await client.create(NoteFields(title: "never sent"))
        let waiting = Task { await client.waitUntilSynced(timeout: .seconds(120)) }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let cancelled = clock.now
        waiting.cancel()
        #expect(await waiting.value == false)
        #expect(
            clock.now - cancelled < .seconds(30), "a cancelled wait ends (a bound for liveness, not a speed target)")
        await client.stopSync()
    }

    @Test func offlineEditsOnBothClientsConvergeAndKeepBothEdits() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let b = try server.client(user)
            let note = try await a.create(NoteFields(title: "Shared", body: "line one\nline two\nline three\n"))
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await b.startSync()
            #expect(await b.waitUntilSynced(timeout: .seconds(30)))
            await a.stopSync()
            await b.stopSync()
            // Both offline: non-overlapping edits of the same note, and a new note each.
            try await a.setBody(note.id, "LINE ONE\nline two\nline three\n")
            try await a.tag(note.id, add: ["from-a"])
            try await b.setBody(note.id, "line one\nline two\nLINE THREE\n")
            try await b.tag(note.id, add: ["from-b"])
            try await b.setPinned(note.id, true)
            let onlyA = try await a.create(NoteFields(title: "A offline"))
            let onlyB = try await b.create(NoteFields(title: "B offline"))
            await a.startSync()
            await b.startSync()
            try await eventually("both clients hold the same notes", on: [a, b]) {
                let (sa, sb) = (try await snapshot(a), try await snapshot(b))
                let pendingA = try await a.store.pendingCount()
                let pendingB = try await b.store.pendingCount()
                return sa == sb && sa.count == 3 && pendingA == 0 && pendingB == 0
            }
            let merged = try #require(try await a.note(note.id))
            #expect(merged.body == "LINE ONE\nline two\nLINE THREE\n")
            #expect(Set(merged.tags) == ["from-a", "from-b"])
            #expect(merged.pinned)
            #expect(try await b.note(onlyA.id)?.title == "A offline")
            #expect(try await a.note(onlyB.id)?.title == "B offline")
            await a.stopSync()
            await b.stopSync()
        }
    }

    @Test func aPurgeElsewhereKeepsUnsyncedTextAsANewNote() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let b = try server.client(user)
            let note = try await a.create(NoteFields(title: "Doomed", body: "text"))
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await b.startSync()
            #expect(await b.waitUntilSynced(timeout: .seconds(30)))
            await b.stopSync()
            try await b.setBody(note.id, "text and precious unsynced words")
            try await a.purge(note.id)
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await b.startSync()
            #expect(await b.waitUntilSynced(timeout: .seconds(30)))
            #expect(try await b.note(note.id) == nil)
            let kept = try await b.list().filter { $0.body == "text and precious unsynced words" }
            #expect(kept.count == 1)
            try await eventually("A received the kept copy", on: [a]) {
                try await a.list().contains { $0.body == "text and precious unsynced words" }
            }
            await a.stopSync()
            await b.stopSync()
        }
    }

    /// A client offline for longer than the server keeps tombstones: its cursor is older than
    /// the purge point, the server answers `reset` (an empty page sending it back to 0), and
    /// the pull from 0 is its snapshot: the purged note goes, the rest stays, and a note it
    /// wrote offline meanwhile still syncs.
    @Test func aClientBackAfterTheTombstonesWereSweptResetsAndKeepsItsOfflineNote() async throws {
        try await LiveServer.with(configure: {
            $0.tombstoneRetention = .milliseconds(1)
            $0.sweepInterval = .milliseconds(100)
        }) { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let b = try server.client(user)
            let keep = try await a.create(NoteFields(title: "Keep"))
            let doomed = try await a.create(NoteFields(title: "Doomed"))
            let later = try await a.create(NoteFields(title: "Later"))
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await a.stopSync()
            await b.startSync()
            #expect(await b.waitUntilSynced(timeout: .seconds(30)))
            try await b.purge(doomed.id)
            try await b.setBody(later.id, "edited on B")
            #expect(await b.waitUntilSynced(timeout: .seconds(30)))
            await b.stopSync()
            // The tombstone is swept: a pull from A's cursor is now a reset.
            var request = URLRequest(url: URL(string: server.url.absoluteString + "/v1/changes?since=1")!)
            request.setValue("Bearer \(user.accessToken)", forHTTPHeaderField: "Authorization")
            try await pollServer("the server swept the tombstone") {
                let (data, _) = try await URLSession.shared.data(for: request)
                let page = try JSONValue.parse(Array(data))
                return page["reset"] == true && page["records"] == [] && page["cursor"] == 0
            }
            let offline = try await a.create(NoteFields(title: "Written offline"))
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            #expect(try await a.note(doomed.id) == nil, "purged elsewhere, dropped by the snapshot")
            #expect(try await a.note(keep.id)?.title == "Keep")
            #expect(try await a.note(later.id)?.body == "edited on B", "the snapshot brought what changed")
            #expect(try await a.note(offline.id)?.pending == false, "the offline note was sent")
            await a.stopSync()
            await b.startSync()
            try await eventually("B has A's offline note", on: [b]) { try await b.note(offline.id) != nil }
            await b.stopSync()
        }
    }

    /// A new device's first sync of an account larger than its page, after a tombstone was
    /// swept: every note arrives and the sync ends (before, the second page of the snapshot
    /// was a reset back to 0, for ever).
    @Test func aNewDeviceSyncsAnAccountOfManyPagesAfterASweep() async throws {
        try await LiveServer.with(configure: {
            $0.tombstoneRetention = .milliseconds(1)
            $0.sweepInterval = .milliseconds(100)
        }) { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            var ids: [String] = []
            for index in 0..<25 { ids.append(try await a.create(NoteFields(title: "n\(index)")).id) }
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            try await a.purge(ids[2])
            for index in 25..<35 { ids.append(try await a.create(NoteFields(title: "n\(index)")).id) }
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await a.stopSync()
            var request = URLRequest(url: URL(string: server.url.absoluteString + "/v1/changes?since=1")!)
            request.setValue("Bearer \(user.accessToken)", forHTTPHeaderField: "Authorization")
            try await pollServer("the server swept the tombstone") {
                let (data, _) = try await URLSession.shared.data(for: request)
                return try JSONValue.parse(Array(data))["reset"] == true
            }
            let fresh = try server.client(user) { $0.sync.pullLimit = 5 }
            await fresh.startSync()
            #expect(await fresh.waitUntilSynced(timeout: .seconds(60)))
            let notes = try await fresh.list()
            #expect(Set(notes.map(\.id)) == Set(ids).subtracting([ids[2]]))
            await fresh.stopSync()
        }
    }

    @Test func syncResumesAfterTheServerRestarts() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-client-test-\(UUID().uuidString)"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let dbA = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-client-\(UUID().uuidString).sqlite"
        ).path
        let first = Box<(Int, Credentials)>()
        try await LiveServer.run(directory: directory, port: 0) { server in
            let credentials = try await server.makeUser()
            let a = try server.client(credentials, path: dbA)
            _ = try await a.create(NoteFields(title: "before restart"))
            await a.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await a.stopSync()
            await first.set((server.port, credentials))
        }
        let (restarted, credentials) = try #require(await first.value)
        try await LiveServer.run(directory: directory, port: restarted) { server in
            let a = try server.client(credentials, path: dbA)
            // Another device of the same user: its own sign-in (refresh tokens are per device).
            let b = try server.client(try await server.signIn(credentials.username, userID: credentials.userID))
            _ = try await a.create(NoteFields(title: "after restart"))
            await a.startSync()
            await b.startSync()
            try await eventually("B holds both notes", on: [b]) { try await b.list().count == 2 }
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            await a.stopSync()
            await b.stopSync()
        }
    }

    @Test func randomConcurrentEditsConverge() async throws {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "") ?? UInt64.random(in: 0...UInt64.max)
        print("randomConcurrentEditsConverge: NOTED_TEST_SEED=\(seed)")
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let clients = [try server.client(user), try server.client(user)]
            var random = SplitMix64(seed: seed)
            let note = try await clients[0].create(
                NoteFields(title: "random", body: "alpha beta gamma delta epsilon zeta eta theta"))
            for client in clients { await client.startSync() }
            try await eventually("both have the note", on: clients) { try await clients[1].note(note.id) != nil }
            let words = ["red", "green", "blue", "cyan", "magenta", "yellow"]
            for step in 0..<40 {
                let client = clients[Int(random.next() % 2)]
                let word = words[Int(random.next() % UInt64(words.count))]
                switch random.next() % 5 {
                case 0: try await client.update(note.id) { $0.body = word + " " + $0.body }
                case 1: try await client.update(note.id) { $0.body += " " + word }
                case 2: try await client.tag(note.id, add: [word])
                case 3: try await client.tag(note.id, remove: [word])
                default: try await client.setTitle(note.id, "title \(step) \(word)")
                }
                if random.next() % 3 == 0 { try await Task.sleep(for: .milliseconds(Int(random.next() % 60))) }
            }
            try await eventually("both clients converge (seed \(seed))", on: clients, timeout: .seconds(20)) {
                let (s0, s1) = (try await snapshot(clients[0]), try await snapshot(clients[1]))
                let pending0 = try await clients[0].store.pendingCount()
                let pending1 = try await clients[1].store.pendingCount()
                return pending0 == 0 && pending1 == 0 && s0 == s1
            }
            let final = try #require(try await clients[0].note(note.id))
            // Words prepended and appended by either side all survive in the merged body.
            #expect(final.body.contains("alpha beta gamma delta epsilon zeta eta theta"))
            for client in clients { await client.stopSync() }
        }
    }
}

extension SyncIntegrationTests {
    @Test func shortLivedTokensAreRefreshedAndSyncCarriesOn() async throws {
        try await LiveServer.with(configure: { $0.accessTokenLifetime = .seconds(2) }) { server in
            let user = try await server.makeUser()
            let a = try server.client(user)
            let b = try server.client(try await server.signIn(user.username, userID: user.userID))
            await a.startSync()
            await b.startSync()
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            let first = try await a.create(NoteFields(title: "before expiry"))
            try await eventually("B got the first note", on: [b]) { try await b.note(first.id) != nil }
            // Past several lifetimes: both refreshed (and re-authenticated in place) on their own.
            try await Task.sleep(for: .seconds(5))
            let second = try await a.create(NoteFields(title: "after expiry"))
            try await eventually("B got the second note", on: [b]) { try await b.note(second.id) != nil }
            #expect(await a.tokens?.credentials.accessToken != user.accessToken)
            await a.stopSync()
            await b.stopSync()
        }
    }
}

extension SyncIntegrationTests {
    /// URLSession's HTTP (the Apple-platform default) works here too, through
    /// swift-corelibs-foundation. (Its WebSocket task needs a libcurl built with WebSocket
    /// support, which Debian's is not, so the sync connection stays on NIO here.)
    @Test func urlSessionHTTPTransportSignsInAndReadsHistory() async throws {
        try await LiveServer.with { server in
            let user = try await server.makeUser()
            let api = NotedAPI(server: server.url, http: URLSessionHTTPTransport())
            let tokens = try await api.signIn(
                username: user.username, password: "correct horse battery", device: UUID().uuidString.lowercased())
            let credentials = Credentials(
                server: server.url.absoluteString, username: user.username, userID: user.userID,
                accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, expiresAt: tokens.expiresAt)
            let a = try server.client(credentials) { $0.http = URLSessionHTTPTransport() }
            await a.startSync()
            let note = try await a.create(NoteFields(title: "over URLSession"))
            #expect(await a.waitUntilSynced(timeout: .seconds(30)))
            #expect(try await a.history(note.id).map(\.rev) == [1])
            #expect(try await a.revision(note.id, rev: 1).title == "over URLSession")
            let refreshed = try await #require(a.tokens).refresh()
            #expect(refreshed.refreshToken != tokens.refreshToken)
            await #expect(throws: NotedClientError.self) {
                try await api.signIn(
                    username: user.username, password: "wrong password!", device: UUID().uuidString.lowercased())
            }
            await a.stopSync()
        }
    }
}

/// A value handed out of a `@Sendable` closure.
actor Box<Value: Sendable> {
    var value: Value?
    func set(_ value: Value) { self.value = value }
}
