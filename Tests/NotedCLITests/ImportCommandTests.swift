import Foundation
import NotedClient
import NotedCore
import TestSupport
import Testing

/// `noted import` as a user runs it (issue 16): offline into this device's copy, synced like
/// any edit, safe to repeat, a dry run writing nothing, and Noted's own export read back.
@Suite(.serialized) struct ImportCommandTests {
    static let password = "correct horse battery\n"

    @Test func exportThenImportIntoAFreshAccountGivesTheSameNotesAndAgainChangesNothing() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let old = Home(path: dir + "/old", server: server.url)
            let groceriesID = try await old.noted(
                "new", "--offline", "--title", "Groceries 🛒", "--body=- [ ] milk\n\n- [x] eggs\n", "--tag", "home",
                "--folder", "Home/Lists", "--pin")
            // A file attached: it goes into the export and comes back with the note.
            let photo = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) })
            try photo.write(to: URL(fileURLWithPath: dir + "/shelf photo.jpg"))
            try await old.noted("attach", "--offline", groceriesID, dir + "/shelf photo.jpg")
            let trashed = try await old.noted("new", "--offline", "--title", "Old idea", "--body", "gone soon")
            try await old.noted("trash", "--offline", trashed)
            try await old.noted("new", "--offline", "--title", "", "--body", "")
            try await old.noted("--offline", "export", dir + "/export.zip")
            let before = try await old.notes(trashed: false).merging(try await old.notes(trashed: true)) { a, _ in a }

            let new = Home(path: dir + "/new", server: server.url)
            try await new.noted("register", "--username", "mover", "--password-stdin", stdin: Self.password)
            let dry = try JSONValue.parse(try await new.noted("--json", "import", "--dry-run", dir + "/export.zip"))
            #expect(dry["imported"] == 3 && dry["dryRun"] == true && dry["format"] == "markdown")
            #expect(try await new.notes().isEmpty, "a dry run writes nothing")

            #expect(
                try await new.noted("import", dir + "/export.zip")
                    == "imported 3 new note(s) from markdown, updated 0, 0 unchanged, 0 skipped")
            let after = try await new.notes(trashed: false).merging(try await new.notes(trashed: true)) { a, _ in a }
            func content(_ notes: [String: JSONValue]) -> [String: [String: JSONValue]] {
                notes.mapValues { note in
                    var object = note.objectValue ?? [:]
                    for key in ["pending", "rev", "refusal"] { object[key] = nil }
                    return object
                }
            }
            #expect(content(after) == content(before))
            // And their dates: the export's `created` and `updated` become the notes' own.
            #expect(try await old.dates() == new.dates())
            // On the server too: another device of the account gets them.
            let other = Home(path: dir + "/other", server: server.url)
            try await other.noted("login", "--username", "mover", "--password-stdin", stdin: Self.password)
            try await other.noted("sync")
            let live = try await other.notes()
            let inTrash = try await other.notes(trashed: true)
            #expect(live.count == 2 && inTrash.count == 1)
            let fetched = dir + "/fetched.jpg"
            try await other.noted("fetch", groceriesID, "shelf photo.jpg", "-o", fetched)
            #expect(
                FileManager.default.contents(atPath: fetched) == photo,
                "the attachment's bytes after export, import and sync")

            // Again: nothing new, nothing changed. A note edited since keeps its edit: the export's
            // version is added beside it, once; --replace overwrites it instead.
            let again = try JSONValue.parse(try await new.noted("--json", "import", dir + "/export.zip"))
            #expect(again["imported"] == 0 && again["updated"] == 0 && again["unchanged"] == 3 && again["copied"] == 0)
            let groceries = try #require(before.first { $0.value["title"] == "Groceries 🛒" }?.key)
            try await new.noted("edit", groceries, "--append", "bread")
            let edited = try #require(try await new.notes()[groceries]?["body"]?.stringValue)
            #expect(
                try await new.noted("import", "--dry-run", dir + "/export.zip").hasSuffix(
                    "would add 1 as new note(s) beside notes here with other content (--replace overwrites them instead)"
                ))
            let copied = try JSONValue.parse(try await new.noted("--json", "import", dir + "/export.zip"))
            #expect(copied["copied"] == 1 && copied["updated"] == 0 && copied["unchanged"] == 2, "\(copied)")
            var here = try await new.notes()
            #expect(here.count == 3 && here[groceries]?["body"]?.stringValue == edited)
            #expect(here.values.filter { $0["title"] == "Groceries 🛒" }.count == 2)
            let copyAgain = try JSONValue.parse(try await new.noted("--json", "import", dir + "/export.zip"))
            #expect(copyAgain["copied"] == 0 && copyAgain["unchanged"] == 3, "the copy is made once: \(copyAgain)")
            let replaced = try JSONValue.parse(
                try await new.noted("--json", "import", "--replace", dir + "/export.zip"))
            #expect(replaced["updated"] == 1 && replaced["copied"] == 0 && replaced["unchanged"] == 2, "\(replaced)")
            here = try await new.notes()
            #expect(here.count == 3 && here[groceries]?["body"] == before[groceries]?["body"])

            // A note deleted for good here is not brought back by importing the export again.
            try await new.noted("purge", groceries)
            let afterPurge = try JSONValue.parse(try await new.noted("--json", "import", dir + "/export.zip"))
            #expect(afterPurge["imported"] == 0 && afterPurge["unchanged"] == 2, "\(afterPurge)")
            #expect(afterPurge["skipped"]?.arrayValue?.first?["reason"] == "deleted on this device", "\(afterPurge)")
            #expect(try await new.notes()[groceries] == nil)

            // A damaged export: one line naming the file and place, non-zero exit, nothing written.
            try Data("{\"activeNotes\": [ {\"id\": 1,, } ]}".utf8).write(to: URL(fileURLWithPath: dir + "/notes.json"))
            let broken = try await run("noted", ["--home", new.path, "--offline", "import", dir + "/notes.json"])
            #expect(broken.status != 0)
            #expect(
                broken.stderr.contains("notes.json: line 1, column") && broken.stderr.contains("not valid JSON"),
                "\(broken.stderr)")
            let missing = try await run("noted", ["--home", new.path, "--offline", "import", dir + "/nothing-here"])
            #expect(missing.status != 0 && missing.stderr.contains("no such file or folder"))
        }
    }

    /// At the size people bring: a Simplenote export of 10,000 notes, imported and synced to
    /// the real server. Prints the time (issue 16's benchmark: under 10 s); no limit asserted.
    /// A Simplenote export's dates are the notes' dates, on every device, and the list sorts
    /// by them; editing a note here makes its modification date today's.
    @Test func importedNotesKeepTheirDatesUntilEditedHere() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let export = """
                {"activeNotes": [
                  {"id": "a1", "content": "Oldest written\\nin 2015", "creationDate": "2015-03-01T10:00:00.123Z", "lastModified": "2024-06-01T08:30:00.000Z", "tags": []},
                  {"id": "b2", "content": "Newest written\\nin 2020", "creationDate": "2020-01-02T00:00:00.000Z", "lastModified": "2021-01-01T00:00:00.000Z", "tags": []}
                ], "trashedNotes": []}
                """
            try Data(export.utf8).write(to: URL(fileURLWithPath: dir + "/notes.json"))
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted("register", "--username", "dated", "--password-stdin", stdin: Self.password)
            try await home.noted("import", dir + "/notes.json")
            func listed(_ home: Home, _ arguments: String...) async throws -> [JSONValue] {
                try JSONValue.parse(try await home.noted(["list", "--json"] + arguments)).arrayValue ?? []
            }
            let byUpdate = try await listed(home)
            #expect(byUpdate.map { $0["title"] } == ["Oldest written", "Newest written"])
            #expect(
                byUpdate.first?["createdAt"] == "2015-03-01T10:00:00.123Z"
                    && byUpdate.first?["updatedAt"] == "2024-06-01T08:30:00.000Z")
            #expect(
                try await listed(home, "--sort", "created").map { $0["title"] } == ["Newest written", "Oldest written"])

            // Another device of the account gets the same dates from the server.
            let other = Home(path: dir + "/other", server: server.url)
            try await other.noted("login", "--username", "dated", "--password-stdin", stdin: Self.password)
            try await other.noted("sync")
            #expect(try await other.dates() == home.dates())

            // Edited here: written in 2020 still, changed now.
            let newest = try #require(byUpdate.last?["id"]?.stringValue)
            try await other.noted("edit", newest, "--append", "more")
            try await other.noted("sync")
            try await home.noted("sync")
            let edited = try #require(try await listed(home).first)
            #expect(edited["id"]?.stringValue == newest && edited["createdAt"] == "2020-01-02T00:00:00.000Z")
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let changed = try #require(edited["updatedAt"]?.stringValue.flatMap(formatter.date(from:)))
            #expect(abs(changed.timeIntervalSinceNow) < 120, "\(edited)")
            let bogus = try await run("noted", ["--home", home.path, "list", "--sort", "bogus"])
            #expect(bogus.status != 0 && bogus.stderr.contains("--sort"), "\(bogus.stderr)")
        }
    }

    @Test func aTenThousandNoteSimplenoteExportIsImportedAndSynced() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let paragraph = String(
                String(repeating: "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", count: 36).prefix(2_000))
            let notes: [JSONValue] = (0..<10_000).map { index in
                [
                    "id": .string("sn-\(index)"), "content": .string("Note \(index)\n\(paragraph)"),
                    "creationDate": "2024-01-05T10:11:12.345Z",
                    "lastModified": "2024-02-01T00:00:00.000Z", "tags": .array([.string("t\(index % 7)")]),
                ]
            }
            let export: JSONValue = ["activeNotes": .array(notes), "trashedNotes": []]
            try FileManager.default.createDirectory(
                atPath: dir + "/simplenote/source", withIntermediateDirectories: true)
            try Data(export.jsonString.utf8).write(to: URL(fileURLWithPath: dir + "/simplenote/source/notes.json"))
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted("register", "--username", "bulk", "--password-stdin", stdin: Self.password)
            let started = ContinuousClock.now
            let summary = try JSONValue.parse(try await home.noted("--json", "import", dir + "/simplenote"))
            let imported = ContinuousClock.now - started
            #expect(summary["imported"] == 10_000 && summary["format"] == "simplenote")
            try await home.noted("sync", "--timeout", "120")
            print(
                "import of a 10,000-note Simplenote export: \(imported); with the sync to the server: \(ContinuousClock.now - started)"
            )
            let status = try JSONValue.parse(try await home.noted("--json", "status"))
            #expect(status["pending"] == 0, "\(status)")
        }
    }
}
