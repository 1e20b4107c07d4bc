import Foundation
import NotedCore
import TestSupport
import Testing

/// Nothing lost at the edges (issue 21), with the real `noted-server` and `noted` processes:
/// two accounts on one home, signing out with unsynced notes, changes the server refuses.
@Suite(.serialized) struct AccountEdgeTests {
    static let password = "correct horse battery\n"

    @Test func anOfflineNoteSurvivesAnotherAccountSigningInOnTheSameHome() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted("register", "--username", "alice", "--password-stdin", stdin: Self.password)
            let synced = try await home.noted("new", "--title", "Alice synced", "--body", "on the server")
            let offline = try await home.noted("new", "--offline", "--title", "Written offline", "--body", "only here")
            #expect(try await home.notes()[offline]?["pending"] == true)

            // A home made by the version that kept one database per home: no accounts.json, the
            // database bound to alice. (This version writes the same layout for the first
            // account, plus the index file.)
            try FileManager.default.removeItem(atPath: dir + "/home/accounts.json")

            #expect(
                try await home.noted("register", "--username", "bob", "--password-stdin", stdin: Self.password)
                    .contains("bob"))
            #expect(try await home.notes().isEmpty, "bob sees none of alice's notes")
            let bobs = try await home.noted("new", "--title", "Bob's note", "--body", "b")
            try await home.noted("sync")

            #expect(
                try await home.noted("login", "--username", "alice", "--password-stdin", stdin: Self.password).contains(
                    "alice"))
            let alice = try await home.notes()
            #expect(Set(alice.keys) == [synced, offline])
            #expect(alice[offline]?["pending"] == true, "still waiting to be sent")
            try await home.noted("sync")
            #expect(try await home.notes()[offline]?["pending"] == false)

            // On the server: alice's other device gets both notes, and nothing of bob's.
            let other = Home(path: dir + "/other", server: server.url)
            try await other.noted("login", "--username", "alice", "--password-stdin", stdin: Self.password)
            try await other.noted("sync")
            let onServer = try await other.notes()
            #expect(Set(onServer.keys) == [synced, offline])
            #expect(onServer[offline]?["body"] == "only here")

            // And bob, back on the shared home, finds his note.
            try await home.noted("login", "--username", "bob", "--password-stdin", stdin: Self.password)
            #expect(Set(try await home.notes().keys) == [bobs])
        }
    }

    @Test func logoutWithUnsyncedNotesRefusesUnlessTheyAreDiscarded() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted("register", "--username", "carol", "--password-stdin", stdin: Self.password)
            let kept = try await home.noted("new", "--title", "Kept", "--body", "synced text")
            let idea = try await home.noted("new", "--offline", "--title", "Unsent idea", "--body", "x")

            let refused = try await run("noted", ["--home", home.path, "logout"])
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("1 note(s)") && refused.stderr.contains("Unsent idea"), "\(refused.stderr)")
            #expect(try await home.noted("whoami").contains("carol"), "still signed in")

            // Synced first, the sign-out goes through and keeps the notes for the next sign-in.
            try await home.noted("sync")
            #expect(try await home.noted("logout") == "signed out")
            try await home.noted("login", "--username", "carol", "--password-stdin", stdin: Self.password)
            #expect(Set(try await home.notes().keys) == [kept, idea])

            // Unsynced edits given up on purpose: a new note goes, an edited one is the server's again.
            let scrap = try await home.noted("new", "--offline", "--title", "Scrap", "--body", "s")
            try await home.noted("edit", "--offline", kept, "--body", "edited offline")
            let out = try await home.noted("logout", "--discard-unsynced")
            #expect(out.contains("discarded the unsynced edits of 2 note(s)"), "\(out)")
            let left = try await home.notes()
            #expect(left[scrap] == nil)
            #expect(left[kept]?["body"] == "synced text")
            #expect(left.values.allSatisfy { $0["pending"] == false })
        }
    }

    @Test func aRefusedNoteStaysMarkedUntilItIsEditedIntoShapeOrDiscarded() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let a = Home(path: dir + "/a", server: server.url)
            let b = Home(path: dir + "/b", server: server.url)
            try await a.noted("register", "--username", "dave", "--password-stdin", stdin: Self.password)
            try await b.noted("login", "--username", "dave", "--password-stdin", stdin: Self.password)
            let first = try await a.noted("new", "--title", "Big one", "--body", "start")
            let second = try await a.noted("new", "--title", "Big two", "--body", "start")
            try await b.noted("sync")

            // Each device adds 110,000 characters (a word at the end, a word at the start), each
            // within the 200,000 limit; merged on the server they are not: the later push is
            // refused (too_large). (Glued onto "start" on both sides they would be two rewrites of
            // one word: a conflict revision, not a merge.)
            let aText = "start " + String(repeating: "a", count: 110_000)
            let bText = String(repeating: "b", count: 110_000) + " start"
            for id in [first, second] {
                try await a.noted("edit", "--offline", id, "--body-stdin", stdin: aText)
                try await b.noted("edit", "--offline", id, "--body-stdin", stdin: bText)
            }
            try await a.noted("sync")
            let sync = try await run("noted", ["--home", b.path, "--server", server.url, "sync"])
            #expect(sync.status != 0)
            #expect(
                sync.stderr.contains("refused 2 note(s)") && sync.stderr.contains("Big one")
                    && sync.stderr.contains("too_large"), "\(sync.stderr)")

            // Each command is a new process: the mark is stored, and shown in list and show.
            let notes = try await b.notes()
            for id in [first, second] {
                #expect(notes[id]?["refusal"]?.stringValue?.hasPrefix("too_large") == true)
                #expect(notes[id]?["body"]?.stringValue?.contains("bbbb") == true, "the local version is kept")
            }
            let list = try await b.noted("list")
            #expect(list.contains("! Big one") && list.contains("not synced: too_large"), "\(list)")
            #expect(try await b.noted("show", first).contains("refused by the server"))
            #expect(try await b.noted("status", "--json").contains("too_large"))

            // The server and the other device hold the version that fit.
            try await a.noted("sync")
            #expect(try await a.notes()[first]?["body"] == .string(aText))

            // Edited into shape, the first syncs; the second is given up and the server's returns.
            try await b.noted("edit", first, "--body", "short again")
            try await b.noted("discard", String(second.prefix(8)))
            try await b.noted("sync")
            let after = try await b.notes()
            #expect(after[first]?["body"] == "short again")
            #expect(after[first]?["refusal"] == .null)
            #expect(after[second]?["body"] == .string(aText))
            #expect(after.values.allSatisfy { $0["pending"] == false && $0["refusal"] == .null })
            try await a.noted("sync")
            #expect(try await a.notes()[first]?["body"] == "short again")
        }
    }
}
