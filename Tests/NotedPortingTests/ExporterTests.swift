import Foundation
import NotedCore
import Testing

@testable import NotedPorting

/// Export (issue 16): Markdown files with front matter any YAML (and JSON) reader reads back
/// exactly, JSON with every field, folders and zips written whole or not at all.
@Suite struct ExporterTests {
    static let created = Date(timeIntervalSince1970: 1_700_000_000.123)
    static let updated = Date(timeIntervalSince1970: 1_700_086_400.5)

    func note(
        _ title: String, body: String = "text", folder: String? = nil, tags: [String] = [],
        id: String = UUID().uuidString.lowercased()
    ) -> PortableNote {
        PortableNote(
            id: id, title: title, body: body, tags: tags, folder: folder, pinned: false, trashed: false,
            created: Self.created, updated: Self.updated)
    }

    /// The front matter's lines as `key → JSON value` (every value is written as JSON).
    func frontMatter(_ text: String) throws -> [String: JSONValue] {
        let lines = text.components(separatedBy: "\n")
        try #require(lines.first == "---")
        let end = try #require(lines.dropFirst().firstIndex(of: "---"))
        var result: [String: JSONValue] = [:]
        for line in lines[1..<end] {
            let (key, value) = (
                String(line.prefix { $0 != ":" }), String(line.drop { $0 != ":" }.dropFirst().drop { $0 == " " })
            )
            result[key] = (try? JSONValue.parse(value)) ?? .string(value)
        }
        return result
    }

    @Test func aNoteBecomesFrontMatterAndItsBody() throws {
        var odd = note(
            "Quote \" colon: hash # newline\nemoji 🧭 back\\slash", body: "# Heading\n\n- [ ] a task\n",
            folder: "Work/Projects", tags: ["a b", "ünï"])
        odd.pinned = true
        odd.trashed = true
        let text = Exporter.markdownText(odd)
        let matter = try frontMatter(text)
        #expect(matter["title"]?.stringValue == odd.title)
        #expect(matter["tags"] == .array(["a b", "ünï"]))
        #expect(matter["folder"]?.stringValue == "Work/Projects")
        #expect(matter["pinned"] == true && matter["trashed"] == true)
        #expect(matter["created"]?.stringValue == "2023-11-14T22:13:20.123Z")
        #expect(matter["updated"]?.stringValue == "2023-11-15T22:13:20.500Z")
        #expect(matter["id"]?.stringValue == odd.id)
        #expect(text.hasSuffix("---\n\n# Heading\n\n- [ ] a task\n"))
        // An empty note still has its front matter; the body is written exactly.
        #expect(Exporter.markdownText(note("", body: "")).hasSuffix("---\n\n"))
        #expect(Exporter.markdownText(note("x", body: "no newline")).hasSuffix("---\n\nno newline"))
    }

    @Test func filesAreNamedAfterTitlesInTheirFoldersWithoutClashesOrEscapes() {
        let notes = [
            note("Groceries", folder: "Home"),
            note("groceries", folder: "Home", id: "0badc0de-0000-4000-8000-000000000000"),
            note("../../etc/passwd", folder: "../up"), note("", folder: nil), note("a/b\\c:d", folder: "Deep/er/still"),
            note(String(repeating: "long ", count: 40)),
        ]
        let paths = Exporter.markdown(notes).map(\.path)
        #expect(paths.count == 6)
        #expect(Set(paths.map { $0.lowercased() }).count == 6, "\(paths)")
        #expect(paths.contains("Home/Groceries.md"))
        #expect(
            paths.contains("Home/groceries (0badc0de).md"), "the second of one name (without case) takes its id's start"
        )
        #expect(paths.contains("up/-..-etc-passwd.md"), "\(paths)")
        #expect(paths.contains("Untitled.md"))
        #expect(paths.contains("Deep/er/still/a-b-c-d.md"))
        for path in paths {
            #expect(!path.split(separator: "/").contains { $0 == ".." || $0 == "." || $0.hasPrefix(".") }, "\(path)")
            #expect(path.split(separator: "/").allSatisfy { $0.count <= 103 })
        }
    }

    @Test func jsonHoldsEveryFieldAndTheHistoryWhenAsked() throws {
        let one = note("One", body: "b1", folder: "F", tags: ["t"])
        let file = Exporter.json(
            [one],
            history: [
                one.id: [
                    PortableRevision(
                        rev: 1, updated: "2023-11-14T22:13:20Z", conflict: false, title: "One", body: "b0", tags: [])
                ]
            ])
        let document = try JSONValue.parse(Array(file.data))
        #expect(document["format"] == "noted-export" && document["version"] == 1)
        let item = try #require(document["notes"]?.arrayValue?.first)
        #expect(
            item["id"]?.stringValue == one.id && item["title"] == "One" && item["body"] == "b1" && item["folder"] == "F"
        )
        #expect(item["tags"] == .array(["t"]) && item["pinned"] == false && item["trashed"] == false)
        #expect(item["history"]?.arrayValue?.first?["body"] == "b0")
        #expect(try JSONValue.parse(Array(Exporter.json([one]).data))["notes"]?.arrayValue?.first?["history"] == nil)
    }

    @Test func aFolderAndAZipHoldTheSameFilesAndAnExistingPathIsRefused() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-export-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let files = Exporter.markdown(
            (0..<50).map {
                note(
                    "Note \($0) 🧭", body: String(repeating: "line \($0)\n", count: 200),
                    folder: $0 % 2 == 0 ? "Even" : "Odd/Deeper")
            })
        try Exporter.write(files, to: directory + "/out")
        try Exporter.write(files, to: directory + "/out.zip")
        for file in files {
            #expect(FileManager.default.contents(atPath: directory + "/out/" + file.path) == file.data)
        }
        let zipped = try Zip.read(directory + "/out.zip")
        #expect(
            Dictionary(uniqueKeysWithValues: zipped.map { ($0.path, $0.data) })
                == Dictionary(uniqueKeysWithValues: files.map { ($0.path, $0.data) }))
        // Nothing is overwritten, and no partial file stays behind.
        #expect(throws: ExportError.self) { try Exporter.write(files, to: directory + "/out") }
        #expect(throws: ExportError.self) { try Exporter.write(files, to: directory + "/out.zip") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["out", "out.zip"])
        // An empty folder may be written into.
        try FileManager.default.createDirectory(atPath: directory + "/empty", withIntermediateDirectories: true)
        try Exporter.write(Array(files.prefix(1)), to: directory + "/empty")
        #expect(FileManager.default.fileExists(atPath: directory + "/empty/" + files[0].path))
    }
}
