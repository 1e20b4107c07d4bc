import Foundation
import NotedCore
import Testing

/// `shelf`, the example app of docs/collections.md, driven as a user would: real `shelf` and
/// `noted-server` processes, the server serving shelf's own schema files. One test at a time:
/// each starts a debug server and signs in twice (bcrypt at the server's cost), and run
/// together they took the CPU the in-process server suites' timeouts need.
@Suite(.serialized) struct ShelfTests {
    /// shelf's schema files, as shipped (Sources/shelf/collections).
    static let collections = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("Sources/shelf/collections").path

    struct ShelfHome {
        let path: String
        let server: String

        @discardableResult
        func shelf(_ arguments: String..., stdin: String? = nil, expectFailure: Bool = false) async throws -> String {
            let result = try await run("shelf", ["--home", path, "--server", server] + arguments, stdin: stdin)
            if expectFailure {
                #expect(result.status != 0, "shelf \(arguments) should have failed")
                return result.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard result.status == 0 else {
                throw E2EFailure("shelf \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
            }
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func json(_ arguments: String...) async throws -> JSONValue {
            let result = try await run("shelf", ["--home", path, "--server", server, "--json"] + arguments)
            guard result.status == 0 else {
                throw E2EFailure(
                    "shelf \(arguments.joined(separator: " ")) --json exited \(result.status): \(result.stderr)")
            }
            return try JSONValue.parse(result.stdout)
        }

        /// The books by id, without what is local to this device.
        func books() async throws -> [String: JSONValue] {
            var result: [String: JSONValue] = [:]
            for book in try await json("list").arrayValue ?? [] {
                guard var object = book.objectValue, let id = object["id"]?.stringValue else { continue }
                object["pending"] = nil
                result[id] = .object(object)
            }
            return result
        }
    }

    func withShelves(_ body: (ShelfHome, ShelfHome) async throws -> Void) async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(
                directory: dir + "/server", arguments: ["--collections", Self.collections])
            defer { server.stop() }
            let a = ShelfHome(path: dir + "/a", server: server.url)
            let b = ShelfHome(path: dir + "/b", server: server.url)
            let user = "reader-" + UUID().uuidString.prefix(8).lowercased()
            try await a.shelf("register", "--username", user, "--password-stdin", stdin: "correct horse battery\n")
            // --json works on every command, sign-in included.
            let login = try await run(
                "shelf",
                ["--home", b.path, "--server", b.server, "--json", "login", "--username", user, "--password-stdin"],
                stdin: "correct horse battery\n")
            #expect(login.status == 0)
            let signedIn = try JSONValue.parse(login.stdout)
            #expect(signedIn["username"] == .string(user) && signedIn["user"]?.stringValue?.isEmpty == false)
            #expect(try await b.json("sync")["synced"] == true)
            try await body(a, b)
        }
    }

    @Test func twoHomesOfflineThenConverged() async throws {
        try await withShelves { a, b in
            let dune = try await a.shelf("--offline", "add", "Dune", "--author", "Frank Herbert", "--folder", "sf")
            let emma = try await b.shelf("--offline", "add", "Emma", "--author", "Jane Austen", "--status", "reading")
            try await b.shelf(
                "--offline", "add", "Middlemarch", "--author", "George Eliot", "--status", "finished", "--folder",
                "classics")
            #expect(try await a.books().count == 1)
            #expect(try await a.json("list").arrayValue?.first?["pending"] == true)
            for _ in 0..<2 {
                try await a.shelf("sync")
                try await b.shelf("sync")
            }
            let (booksA, booksB) = (try await a.books(), try await b.books())
            #expect(booksA.count == 3)
            #expect(booksA == booksB)
            #expect(booksA[dune]?["folder"] == "sf")
            #expect(booksB[emma]?["status"] == "reading")
            #expect(try await a.json("list", "--status", "finished").arrayValue?.map { $0["title"] } == ["Middlemarch"])
            #expect(try await b.json("list", "--folder", "sf").arrayValue?.map { $0["title"] } == ["Dune"])
            let stats = try await a.json("stats")
            #expect(stats["books"] == ["want": 1, "reading": 1, "finished": 1, "abandoned": 0])
        }
    }

    @Test func aTimerStartedOnOneHomeStopsOnTheOther() async throws {
        try await withShelves { a, b in
            let book = try await a.shelf("add", "Dune", "--author", "Frank Herbert")
            let started = try await a.json("start", String(book.prefix(8)))
            #expect(started["book"]?.stringValue == book)
            await #expect(try a.shelf("start", book, expectFailure: true).contains("already reading"))
            // Starting marked the book as being read, in the same transaction.
            #expect(try await a.books()[book]?["status"] == "reading")
            try await Task.sleep(for: .seconds(1.2))
            // B has never seen the session: stop syncs first, then stops A's timer.
            let stopped = try await b.json("stop", "--pages", "12", "--note", "the desert chapters")
            #expect(stopped["id"] == started["session"])
            #expect(stopped["pages"] == 12)
            #expect((stopped["seconds"]?.intValue ?? 0) >= 1)
            await #expect(try b.shelf("stop", expectFailure: true).contains("no reading session is running"))
            try await a.shelf("sync")
            let sessions = try await a.json("sessions", book)
            #expect(sessions.arrayValue?.count == 1)
            #expect(sessions.arrayValue?.first?["note"] == "the desert chapters")
            #expect(sessions.arrayValue?.first?["stoppedAt"] != .null)
            let stats = try await a.json("stats")
            #expect((stats["totalSeconds"]?.intValue ?? 0) >= 1)
            #expect(stats["read"]?.arrayValue?.first?["id"]?.stringValue == book)
        }
    }

    @Test func aStatusSetOnBothHomesAtOnceFollowsTheScalarRuleAndKeepsTheLoserInHistory() async throws {
        try await withShelves { a, b in
            let book = try await a.shelf("add", "Emma", "--author", "Jane Austen")
            try await b.shelf("sync")
            try await a.shelf("--offline", "status", book, "finished")
            try await b.shelf("--offline", "status", book, "abandoned")
            // A reaches the server first, B second: B's change is the later one and wins.
            try await a.shelf("sync")
            try await b.shelf("sync")
            try await a.shelf("sync")
            #expect(try await a.books()[book]?["status"] == "abandoned")
            #expect(try await b.books()[book]?["status"] == "abandoned")
            let history = try await a.json("history", book).arrayValue ?? []
            #expect(history.contains { $0["status"] == "finished" }, "the losing status is kept in history: \(history)")
            #expect(history.last?["status"] == "abandoned" || history.first?["status"] == "abandoned")
        }
    }

    @Test func badInputIsOneLineAndChangesNothing() async throws {
        try await withTemporaryDirectory { dir in
            let home = ShelfHome(path: dir + "/home", server: "http://127.0.0.1:9")
            let book = try await home.shelf("--offline", "add", "Dune", "--author", "Frank Herbert")
            #expect(try await home.shelf("--offline", "status", book, "lost", expectFailure: true).contains("lost"))
            #expect(
                try await home.shelf("--offline", "status", "zz", "finished", expectFailure: true).contains(
                    "not a book id"))
            #expect(try await home.shelf("--offline", "stop", "--pages", "-3", expectFailure: true).contains("--pages"))
            #expect(try await home.shelf("--offline", "history", book, expectFailure: true).contains("shelf login"))
            #expect(try await home.shelf("--offline", "sync", expectFailure: true).contains("--offline"))
            #expect(
                try await home.shelf("--offline", "add", " ", "--author", "x", expectFailure: true).contains("title"))
            #expect(try await home.books().count == 1)
            #expect(try await home.books()[book]?["status"] == "want")
        }
    }
}
