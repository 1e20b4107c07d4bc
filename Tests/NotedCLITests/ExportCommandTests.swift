import Foundation
import NotedClient
import NotedCore
import TestSupport
import Testing

/// `noted export` as a user runs it (issue 16): every note, the trash too, to a folder or a
/// zip, as Markdown or JSON, offline; an existing path refused with nothing written.
@Suite struct ExportCommandTests {
    @Test func exportsEveryNoteAsMarkdownOrJSONToAFolderOrAZip() async throws {
        try await withTemporaryDirectory { dir in
            let home = Home(path: dir + "/home", server: "http://127.0.0.1:9")
            let groceries = try await home.noted(
                "new", "--offline", "--title", "Groceries 🛒", "--body=- [ ] milk\n- [x] eggs", "--tag", "home",
                "--folder", "Home/Lists", "--pin")
            let old = try await home.noted("new", "--offline", "--title", "Old idea", "--body", "gone soon")
            try await home.noted("trash", "--offline", old)
            try await home.noted("new", "--offline", "--title", "", "--body", "")

            #expect(try await home.noted("--offline", "export", dir + "/md") == "exported 3 note(s) to \(dir)/md")
            let text = try String(contentsOfFile: dir + "/md/Home/Lists/Groceries 🛒.md", encoding: .utf8)
            #expect(
                text.contains("title: \"Groceries 🛒\"\n") && text.contains("tags: [\"home\"]\n")
                    && text.contains("pinned: true\n"))
            #expect(text.contains("id: \(groceries)\n") && text.hasSuffix("---\n\n- [ ] milk\n- [x] eggs"))
            #expect(try String(contentsOfFile: dir + "/md/Old idea.md", encoding: .utf8).contains("trashed: true\n"))
            #expect(FileManager.default.fileExists(atPath: dir + "/md/Untitled.md"))

            let summary = try JSONValue.parse(
                try await home.noted("--offline", "--json", "export", "--format", "json", dir + "/all.zip"))
            #expect(summary["exported"] == 3 && summary["format"] == "json")
            let unzip = try await run(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    "import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read('notes.json').decode())",
                    dir + "/all.zip",
                ])
            let document = try JSONValue.parse(unzip.stdout)
            let notes = document["notes"]?.arrayValue ?? []
            #expect(notes.count == 3)
            #expect(notes.first { $0["id"]?.stringValue == groceries }?["folder"] == "Home/Lists")

            // Refusals: an existing path, --with-history without JSON; nothing written.
            let again = try await run("noted", ["--home", home.path, "--offline", "export", dir + "/md"])
            #expect(again.status != 0 && again.stderr.contains("already exists"))
            let history = try await run(
                "noted", ["--home", home.path, "--offline", "export", "--with-history", dir + "/h"])
            #expect(history.status != 0 && history.stderr.contains("--format json"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/h"))
        }
    }
}

extension ExportCommandTests {
    /// `--with-history`: each note's revisions as the server keeps them, oldest first.
    @Test func withHistoryHoldsTheServersRevisionsOfEachNote() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted(
                "register", "--username", "historian", "--password-stdin", stdin: "correct horse battery\n")
            let id = try await home.noted("new", "--title", "Draft", "--body", "one")
            try await home.noted("edit", id, "--append", "two")
            try await home.noted("edit", id, "--append", "three")
            try await home.noted("sync")
            #expect(
                try await home.noted("--json", "export", "--format", "json", "--with-history", dir + "/out").contains(
                    "\"exported\":1"))
            let document = try JSONValue.parse(try Data(contentsOf: URL(fileURLWithPath: dir + "/out/notes.json")))
            let note = try #require(document["notes"]?.arrayValue?.first)
            let history = note["history"]?.arrayValue ?? []
            #expect(history.compactMap { $0["rev"]?.intValue } == [1, 2, 3], "\(history)")
            #expect(
                history.first?["body"] == "one" && history.last?["body"]?.stringValue?.hasSuffix("three") == true,
                "\(history)")
            #expect(history.allSatisfy { $0["conflict"] == false && $0["title"] == "Draft" })
        }
    }

    /// At the size people bring: 10,000 notes of 2 KB in 100 folders, every one in the export,
    /// byte for byte. Prints how long the export took (no time limit: shared machines).
    @Test func tenThousandNotesOfTwoKilobytesAreAllExported() async throws {
        try await withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/home", withIntermediateDirectories: true)
            let client = try NotedClient(databasePath: dir + "/home/noted.sqlite", server: nil, credentials: nil)
            let paragraph = String(repeating: "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", count: 36)
                .prefix(2_000)
            for index in 0..<10_000 {
                _ = try await client.create(
                    NoteFields(
                        title: "Note \(index)", body: "\(index) " + paragraph, tags: ["t\(index % 7)"],
                        folder: "Folder \(index % 100)"))
            }
            let home = Home(path: dir + "/home", server: "http://127.0.0.1:9")
            let started = ContinuousClock.now
            #expect(
                try await home.noted("--offline", "export", dir + "/out.zip")
                    == "exported 10000 note(s) to \(dir)/out.zip")
            print("export of 10,000 notes of 2 KB to a zip: \(ContinuousClock.now - started)")
            let listing = try await run(
                "/usr/bin/env",
                [
                    "python3", "-c",
                    """
                    import sys, zipfile
                    z = zipfile.ZipFile(sys.argv[1])
                    names = z.namelist()
                    print(len(names), len({n.split('/')[0] for n in names}), sum(len(z.read(n)) for n in names) // 1000)
                    """, dir + "/out.zip",
                ])
            let numbers = listing.stdout.split(separator: " ").compactMap {
                Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            #expect(
                numbers.count == 3 && numbers[0] == 10_000 && numbers[1] == 100 && numbers[2] > 20_000,
                "\(listing.stdout) \(listing.stderr)")
        }
    }
}
