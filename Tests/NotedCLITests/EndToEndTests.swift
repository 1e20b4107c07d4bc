import Foundation
import NotedCore
import TestSupport
import Testing

/// The real `noted-server` and `noted` executables as processes: two homes of one user.
@Suite(.serialized) struct EndToEndTests {
    /// Two homes on `server`, the first registered as `username` (the second not signed in).
    static func homes(_ dir: String, on server: ServerProcess, registering username: String) async throws -> (
        Home, Home
    ) {
        let a = Home(path: dir + "/a", server: server.url)
        let b = Home(path: dir + "/b", server: server.url)
        try await a.noted("register", "--username", username, "--password-stdin", stdin: "correct horse battery\n")
        return (a, b)
    }

    @Test func loginOnANewHomePullsTheNotes() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let (a, b) = try await Self.homes(dir, on: server, registering: "first-pull")
            for i in 0..<3 { try await a.noted("new", "--offline", "--title", "Note \(i)", "--body", "body \(i)") }
            try await a.noted("sync")
            // Before, `noted list` on a second device showed nothing until `noted sync`.
            try await b.noted("login", "--username", "first-pull", "--password-stdin", stdin: "correct horse battery\n")
            #expect(try await b.noted("--offline", "list").split(separator: "\n").count == 3)
            #expect(try await b.notes() == a.notes())
            // Signing in again on a device that has the notes pulls nothing more (nor fails).
            try await a.noted("new", "--offline", "--title", "Later", "--body", "not pushed yet")
            try await a.noted("login", "--username", "first-pull", "--password-stdin", stdin: "correct horse battery\n")
            #expect(try await a.notes().values.contains { $0["pending"] == true })
        }
    }

    @Test func notesCreatedOfflineOnTwoHomesSyncToIdenticalState() async throws {
        try await withTemporaryDirectory { dir in
            var server = try await ServerProcess(directory: dir + "/server")
            let port = server.port
            let (a, b) = try await Self.homes(dir, on: server, registering: "e2e-user")
            try await b.noted("login", "--username", "e2e-user", "--password-stdin", stdin: "correct horse battery\n")
            #expect(try await b.noted("whoami").contains("e2e-user"))
            let shared = try await a.noted("new", "--title", "Shared", "--body", "one\ntwo\nthree", "--tag", "t1")
            try await b.noted("sync")

            // The server goes down; both homes keep working and return at once.
            await server.stopAndWait()
            let clock = ContinuousClock()
            let elapsed = try await clock.measure {
                try await a.noted("new", "--title", "from A offline", "--body", "a")
            }
            // "At once": one failed attempt and one retry, with slack for a loaded machine.
            #expect(elapsed < .seconds(10))
            try await b.noted("new", "--title", "from B offline", "--body", "b", "--pin")
            try await a.noted("edit", shared, "--body", "ONE\ntwo\nthree")
            try await b.noted("edit", String(shared.prefix(8)), "--body", "one\ntwo\nTHREE")
            try await b.noted("tag", shared, "+t2", "-t1")
            try await a.noted("sync", expectFailure: true)
            #expect(try await a.notes().values.contains { $0["pending"] == true })

            server = try await ServerProcess(directory: dir + "/server", port: port)
            defer { server.stop() }
            try await a.noted("sync")
            try await b.noted("sync")
            try await a.noted("sync")
            let notesA = try await a.notes()
            let notesB = try await b.notes()
            #expect(notesA == notesB)
            #expect(notesA.count == 3)
            #expect(notesA[shared]?["body"] == "ONE\ntwo\nTHREE")
            #expect(notesA[shared]?["tags"] == ["t2"])
            #expect(notesA.values.allSatisfy { $0["pending"] == false })
            let status = try JSONValue.parse(try await a.noted("status", "--json"))
            #expect(status["pending"] == 0)
        }
    }

    @Test func overlappingEditsKeepTheOtherVersionInHistory() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let (a, b) = try await Self.homes(dir, on: server, registering: "e2e-overlap")
            try await b.noted(
                "login", "--username", "e2e-overlap", "--password-stdin", stdin: "correct horse battery\n")
            let id = try await a.noted("new", "--title", "T", "--body", "the quick brown fox")
            try await b.noted("sync")
            try await a.noted("edit", id, "--body", "the slow brown fox", "--offline")
            try await b.noted("edit", id, "--body", "the fast brown fox", "--offline")
            try await a.noted("sync")
            try await b.noted("sync")
            try await a.noted("sync")
            let bodyA = try await a.notes()[id]?["body"]
            #expect(bodyA == (try await b.notes())[id]?["body"])
            let history = try JSONValue.parse(try await a.noted("history", id, "--json")).arrayValue ?? []
            #expect(history.count >= 3)
            #expect(history.allSatisfy { ($0["size"]?.intValue ?? 0) > 0 }, "\(history)")
            // As text: by day (today's, unless midnight passed meanwhile), newest first, with times and sizes.
            let listing = try await a.noted("history", id).split(separator: "\n").map(String.init)
            #expect(listing.first == "Today" || listing.first == "Yesterday", "\(listing)")
            let entries = listing.filter { $0.hasPrefix("  ") }
            #expect(entries.count == history.count, "\(listing)")
            #expect(
                entries.allSatisfy {
                    $0.range(of: #"^  \d\d:\d\d  rev \d+  \d+ B"#, options: .regularExpression) != nil
                }, "\(listing)")
            let listedRevs = entries.compactMap { $0.split(separator: " ").dropFirst(2).first.flatMap { Int64($0) } }
            #expect(listedRevs.first == history.compactMap { $0["rev"]?.intValue }.max(), "\(listing)")
            // Whatever the merge kept, both edits are in the history (a revision or a conflict revision).
            var bodies: Set<String> = []
            for entry in history {
                guard let rev = entry["rev"]?.intValue else { continue }
                var arguments = ["history", id, "--show", String(rev), "--json"]
                if entry["conflict"] == true { arguments.append("--conflict") }
                let fields = try JSONValue.parse(try await a.noted(arguments))
                if let body = fields["body"]?.stringValue { bodies.insert(body) }
            }
            #expect(bodies.contains("the slow brown fox"))
            #expect(bodies.contains("the fast brown fox"))
            // Restoring an earlier revision is a new edit that syncs everywhere.
            try await a.noted("history", id, "--restore", "1")
            try await b.noted("sync")
            #expect(try await b.notes()[id]?["body"] == "the quick brown fox")
        }
    }

    @Test func aKilledProcessLosesNothingAndAppliesOnce() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer {
                server.signal(SIGCONT)
                server.stop()
            }
            let (a, b) = try await Self.homes(dir, on: server, registering: "e2e-kill")
            try await b.noted("login", "--username", "e2e-kill", "--password-stdin", stdin: "correct horse battery\n")
            let id = try await a.noted("new", "--title", "K", "--body", "start")
            try await a.noted("edit", id, "--append", "appended once", "--no-sync")
            // The server stops answering: the change goes out, no ack comes back.
            server.signal(SIGSTOP)
            let process = try await RunningChild.start(
                binDirectory.appendingPathComponent("noted").path,
                ["--home", a.path, "--server", server.url, "sync", "--timeout", "60"])
            try await Task.sleep(for: .seconds(1))
            process.signal(SIGKILL)
            await process.exited()
            server.signal(SIGCONT)
            // The edit survived the kill, still pending; the resend (same ccid) is answered once.
            #expect(try await a.notes()[id]?["pending"] == true)
            try await a.noted("sync")
            try await b.noted("sync")
            let note = try await b.notes()[id]
            #expect(note?["body"] == "start\nappended once")
            #expect(note?["rev"] == 2)
        }
    }

    @Test func watchPrintsAChangeFromTheOtherHomeWithinASecond() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let (a, b) = try await Self.homes(dir, on: server, registering: "e2e-watch")
            try await b.noted("login", "--username", "e2e-watch", "--password-stdin", stdin: "correct horse battery\n")
            let watch = try await RunningChild.start(
                binDirectory.appendingPathComponent("noted").path, ["--home", a.path, "--server", server.url, "watch"])
            defer { watch.signal(SIGTERM) }
            let lines = watch.lines
            var iterator = lines.makeAsyncIterator()
            while let line = await iterator.next(), line != "[synced]" {}
            let id = try await b.noted("new", "--title", "watched")
            let start = ContinuousClock.now
            var seen = false
            while let line = await iterator.next() {
                if line.contains(id) {
                    seen = true
                    break
                }
            }
            #expect(seen)
            #expect(ContinuousClock.now - start < .seconds(1))
        }
    }

    @Test func errorsAreOneLineOnStandardErrorWithANonZeroExit() async throws {
        try await withTemporaryDirectory { dir in
            let result = try await run("noted", ["--home", dir, "show", "deadbeef"])
            #expect(result.status != 0)
            #expect(result.stderr.contains("no note has an id starting with deadbeef"))
            let offline = try await run("noted", ["--home", dir, "new", "--title", "x", "--body", "y"])
            #expect(offline.status == 0)
            #expect(UUIDText.isCanonical(offline.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
            let badServer = try await run("noted", ["--home", dir, "--server", "ftp://x", "sync"])
            #expect(badServer.status != 0)
            #expect(badServer.stderr.contains("http://"))
        }
    }

    @Test func editWithoutOptionsOpensTheEditorAndSavesTitleAndBody() async throws {
        try await withTemporaryDirectory { dir in
            let created = try await run(
                "noted", ["--home", dir, "new", "--title", "old title", "--body", "old body\nsecond line"])
            let id = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let edited = try await run(
                "noted", ["--home", dir, "edit", String(id.prefix(5))],
                environment: ["EDITOR": "sed -i -e s/old/new/g", "VISUAL": ""])
            #expect(edited.status == 0, "\(edited.stderr)")
            let shown = try JSONValue.parse(try await run("noted", ["--home", dir, "show", id, "--json"]).stdout)
            #expect(shown["title"] == "new title")
            #expect(shown["body"] == "new body\nsecond line")
            let failing = try await run(
                "noted", ["--home", dir, "edit", id], environment: ["EDITOR": "false", "VISUAL": ""])
            #expect(failing.status != 0)
            #expect(
                try JSONValue.parse(try await run("noted", ["--home", dir, "show", id, "--json"]).stdout)["title"]
                    == "new title")
        }
    }

    @Test func tagPlusAndMinusArguments() async throws {
        try await withTemporaryDirectory { dir in
            let id = try await run("noted", ["--home", dir, "new", "--tag", "a", "--tag", "b"]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await run("noted", ["--home", dir, "tag", id, "+c", "-a"]).status == 0)
            let shown = try JSONValue.parse(try await run("noted", ["--home", dir, "show", id, "--json"]).stdout)
            #expect(shown["tags"] == ["b", "c"])
            #expect(try await run("noted", ["--home", dir, "tag", id, "c"]).status != 0)
        }
    }

    @Test func watchReconnectsWhenTheServerRestarts() async throws {
        try await withTemporaryDirectory { dir in
            var server = try await ServerProcess(directory: dir + "/server")
            let port = server.port
            let (a, b) = try await Self.homes(dir, on: server, registering: "e2e-restart")
            try await b.noted(
                "login", "--username", "e2e-restart", "--password-stdin", stdin: "correct horse battery\n")
            let watch = try await LineReader(["--home", a.path, "--server", server.url, "watch"])
            defer { watch.stop() }
            try await watch.waitFor("[synced]")
            await server.stopAndWait()
            try await watch.waitFor("[offline")
            server = try await ServerProcess(directory: dir + "/server", port: port)
            defer { server.stop() }
            let id = try await b.noted("new", "--title", "after the restart")
            try await watch.waitFor(id, timeout: .seconds(20))
        }
    }
}

/// A running `noted` process whose standard output is read line by line.
final class LineReader: Sendable {
    let process: RunningChild
    var lines: AsyncStream<String> { process.lines }

    init(_ arguments: [String]) async throws {
        process = try await RunningChild.start(binDirectory.appendingPathComponent("noted").path, arguments)
    }

    /// Reads lines until one contains `text`; fails after `timeout`.
    func waitFor(_ text: String, timeout: Duration = .seconds(10)) async throws {
        let lines = lines
        let found = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await line in lines where line.contains(text) { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !found { throw E2EFailure("watch printed no line with \"\(text)\" within \(timeout)") }
    }

    /// Stops the process without waiting for it (for `defer`).
    func stop() {
        process.signal(SIGTERM)
    }
}
