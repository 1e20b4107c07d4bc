import Foundation
import NotedCore
import Testing

@testable import NotedPorting

/// The importers' shared rules (issue 16): stable ids, Noted's own export read back exactly,
/// malformed input named with its position, archives read.
@Suite struct ImporterTests {
    func source(_ files: [String: String]) -> ImportSource {
        ImportSource(
            origin: "test",
            files: files.map { ImportSource.File(path: $0.key, data: Data($0.value.utf8)) }.sorted { $0.path < $1.path }
        )
    }

    /// A date the notes cannot hold (a damaged export: before 1970, after 9999) is dropped,
    /// and the note imported.
    @Test func aDateOutOfRangeIsDroppedNotTheNote() throws {
        let export = """
            {"activeNotes": [{"id": "a", "content": "Old\\nbody", "creationDate": "1969-12-31T23:59:59.000Z", "lastModified": "2024-01-01T00:00:00.000Z"}],
             "trashedNotes": []}
            """
        let result = try Importer.read(source(["notes.json": export]), as: .simplenote)
        #expect(result.notes.count == 1 && result.notes.first?.note.title == "Old")
        #expect(result.notes.first?.note.created == nil)
        #expect(result.notes.first?.note.updated == Date(timeIntervalSince1970: 1_704_067_200))
    }

    @Test func idsAreVersion5UUIDsStableAcrossRunsAndDistinctAcrossSources() {
        let a = Importer.noteID(format: .simplenote, sourceID: "abc")
        #expect(a == Importer.noteID(format: .simplenote, sourceID: "abc"))
        #expect(a != Importer.noteID(format: .keep, sourceID: "abc"))
        #expect(a != Importer.noteID(format: .simplenote, sourceID: "abd"))
        #expect(UUIDText.isCanonical(a))
        let characters = Array(a)
        #expect(characters[14] == "5", "version 5")
        #expect("89ab".contains(characters[19]), "RFC 9562 variant")
    }

    @Test func aCopyIDDependsOnTheNoteAndItsContentOnly() {
        let id = UUID().uuidString.lowercased()
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let note = PortableNote(
            id: id, title: "T", body: "B", tags: ["x", "y"], folder: "F", created: date, updated: date)
        let copy = Importer.copyID(of: note)
        #expect(UUIDText.isCanonical(copy) && copy != id && Array(copy)[14] == "5")
        // The same content (tags in any order, other dates) finds the same copy again.
        let same = PortableNote(
            id: id, title: "T", body: "B", tags: ["y", "x"], folder: "F", pinned: true, created: .now, updated: .now)
        #expect(Importer.copyID(of: same) == copy)
        // Other content, or another note's id, makes another.
        for other in [
            PortableNote(id: id, title: "T", body: "B2", tags: ["x", "y"], folder: "F", created: date, updated: date),
            PortableNote(id: id, title: "TB", body: "", tags: ["x", "y"], folder: "F", created: date, updated: date),
            PortableNote(id: id, title: "T", body: "B", tags: ["x"], folder: "F", created: date, updated: date),
            PortableNote(id: id, title: "T", body: "B", tags: ["x", "y"], folder: nil, created: date, updated: date),
            PortableNote(
                id: UUID().uuidString.lowercased(), title: "T", body: "B", tags: ["x", "y"], folder: "F", created: date,
                updated: date),
        ] {
            #expect(Importer.copyID(of: other) != copy)
        }
    }

    @Test func noteDsOwnMarkdownExportReadsBackExactly() throws {
        let created = Date(timeIntervalSince1970: 1_700_000_000.123)
        let notes = [
            PortableNote(
                id: UUID().uuidString.lowercased(), title: "Quote \" colon: # x\nline",
                body: "no blank lines first\n\nends with two\n\n",
                tags: ["a b", "ü"], folder: "Work/Deep", pinned: true, trashed: false, created: created,
                updated: created.addingTimeInterval(60)),
            PortableNote(id: UUID().uuidString.lowercased(), title: "", body: "", created: created, updated: created),
            PortableNote(
                id: UUID().uuidString.lowercased(), title: "Trashed", body: "---\nnot front matter\n---", trashed: true,
                created: created, updated: created),
        ]
        let files = Exporter.markdown(notes)
        let result = try Importer.read(
            ImportSource(
                origin: "export", files: files.map { ImportSource.File(path: "noted-export/" + $0.path, data: $0.data) }
            ))
        #expect(result.format == .markdown)
        #expect(result.skipped.isEmpty)
        let read = Dictionary(uniqueKeysWithValues: result.notes.map { ($0.note.id, $0.note) })
        for note in notes {
            #expect(read[note.id] == note, "\(note.title)")
        }
    }

    @Test func plainMarkdownTakesItsTitleFromTheHeadingOrTheFileName() throws {
        let result = try Importer.read(
            source([
                "notes/Trips/Lisbon.md": "# Lisbon in May\n\nTram 28.\n",
                "notes/Trips/no heading.txt": "Just text\n",
                "notes/with matter.md":
                    "---\ntitle: 'It''s here'\ntags: trips, food\ncreated: 2024-01-05\npinned: yes\n---\nBody\n",
                "notes/picture.png": "\u{89}PNG",
            ]), as: .markdown)
        let byTitle = Dictionary(uniqueKeysWithValues: result.notes.map { ($0.note.title, $0.note) })
        #expect(byTitle["Lisbon in May"]?.body == "Tram 28.\n")
        #expect(byTitle["Lisbon in May"]?.folder == "Trips")
        #expect(byTitle["no heading"]?.body == "Just text\n")
        let matter = try #require(byTitle["It's here"])
        #expect(matter.tags == ["trips", "food"] && matter.pinned && matter.body == "Body\n" && matter.folder == nil)
        #expect(matter.created == Date(timeIntervalSince1970: 1_704_412_800))
        #expect(result.skipped.map(\.source) == ["notes/picture.png"])
    }

    @Test func simplenoteNotesAndTrashAreRead() throws {
        let json = """
            {"activeNotes":[{"id":"n1","content":"Shopping\\r\\nmilk\\neggs","creationDate":"2024-01-05T10:11:12.345Z",
              "lastModified":"2024-02-01T00:00:00.000Z","tags":["home"],"pinned":true},{"content":"no id"}],
             "trashedNotes":[{"id":"n2","content":"Old","creationDate":"2023-01-01T00:00:00Z","lastModified":"2023-01-02T00:00:00Z"}]}
            """
        let result = try Importer.read(source(["source/notes.json": json, "source/notes/Shopping.txt": "Shopping"]))
        #expect(result.format == .simplenote)
        #expect(result.notes.count == 3, "a note without an id still comes in")
        let shopping = try #require(result.notes.first { $0.note.title == "Shopping" }?.note)
        #expect(shopping.body == "milk\neggs" && shopping.tags == ["home"] && shopping.pinned && !shopping.trashed)
        #expect(shopping.id == Importer.noteID(format: .simplenote, sourceID: "n1"))
        #expect(result.notes.first { $0.note.title == "Old" }?.note.trashed == true)
        #expect(result.skipped.isEmpty)
    }

    @Test func malformedInputIsNamedWithItsPosition() {
        #expect(throws: ImportError("source/notes.json", "line 2, column 16: not valid JSON (expected a key)")) {
            try Importer.read(
                source(["source/notes.json": "{\"activeNotes\":\n  [{\"id\": \"x\", ]}"]), as: .simplenote)
        }
        #expect(throws: ImportError.self) {
            try Importer.read(source(["a.enex": "<en-export><note><title>x</title></note"]), as: .evernote)
        }
        #expect(throws: ImportError.self) {
            try Importer.read(source(["a.enex": "<en-export><note><title>x</title>"]), as: .evernote)
        }
        #expect(throws: ImportError.self) {
            try Importer.read(source(["a.enex": "<html><body>not it</body></html>"]), as: .evernote)
        }
        #expect(throws: ImportError.self) { try Importer.read(source(["picture.png": "\u{89}PNG"])) }
        #expect(throws: ImportError.self) { try Importer.read(ImportSource(origin: "empty", files: [])) }
    }

    /// A ustar header of `name` whose size field says `size` (octal digits, or anything), with
    /// a right checksum.
    static func tarHeader(_ name: String, size: String, type: UInt8 = UInt8(ascii: "0")) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 512)
        func put(_ text: String, at offset: Int) { for (i, b) in text.utf8.enumerated() { bytes[offset + i] = b } }
        put(name, at: 0)
        put("0000644", at: 100)
        put(size, at: 124)
        put("00000000000", at: 136)
        bytes[156] = type
        put("ustar", at: 257)
        put("00", at: 263)
        for i in 148..<156 { bytes[i] = 32 }
        let sum = bytes.reduce(0) { $0 + Int($1) }
        put(String(format: "%06o", sum) + "\0 ", at: 148)
        return bytes
    }

    @Test func aTarArchiveIsRead() throws {
        // A ustar archive of two files, as `tar` (and Joplin's .jex) writes it.
        func header(_ name: String, size: Int) -> [UInt8] { Self.tarHeader(name, size: String(format: "%011o", size)) }
        var tar: [UInt8] = []
        for (name, text) in [("a.md", "first"), ("dir/b.md", String(repeating: "x", count: 600))] {
            tar += header(name, size: text.utf8.count) + Array(text.utf8)
            tar += [UInt8](repeating: 0, count: (512 - text.utf8.count % 512) % 512)
        }
        tar += [UInt8](repeating: 0, count: 1024)
        let files = try Tar.files(Data(tar), origin: "t.tar")
        #expect(files.map(\.path) == ["a.md", "dir/b.md"])
        #expect(files[1].data.count == 600)
        var broken = tar
        broken[148] = UInt8(ascii: "7")
        #expect(throws: ImportError.self) { try Tar.files(Data(broken), origin: "t.tar") }
    }

    /// A header whose size field is not unsigned octal: `-1` trapped (a reversed range), `-2000`
    /// on a folder looped for ever (the offset never moved), `+1` and a size past the end.
    @Test func aTarSizeThatIsNotUnsignedOctalIsRefused() throws {
        for (size, type) in [
            ("-1", UInt8(ascii: "0")), ("-2000", UInt8(ascii: "5")), ("+1", UInt8(ascii: "0")),
            ("77777777777", UInt8(ascii: "0")), ("12 4", UInt8(ascii: "0")), ("", UInt8(ascii: "0")),
        ] {
            let tar = Self.tarHeader("a.md", size: size, type: type) + [UInt8](repeating: 0, count: 1024)
            #expect(throws: ImportError.self, "size \(size)") { try Tar.files(Data(tar), origin: "t.jex") }
        }
    }

    /// The budget: a flat list whose tree is 16 times its text is stopped for memory, not read;
    /// skipped items are listed up to the bound and counted beyond; a deadline passed stops it.
    @Test func anImportIsBoundedByItsBudget() throws {
        let flat = "{\"activeNotes\":[" + String(repeating: "0,", count: 100_000) + "0]}"
        let tight = ImportBudget(memoryBytes: 1_000_000)
        let error = #expect(throws: ImportError.self) {
            try Importer.read(
                ImportSource(origin: "x", files: [.init(path: "notes.json", data: Data(flat.utf8))], budget: tight),
                as: .simplenote)
        }
        #expect(error?.reason.contains("memory") == true)
        let roomy = ImportBudget(memoryBytes: 100_000_000, maxSkipped: 10)
        let result = try Importer.read(
            ImportSource(origin: "x", files: [.init(path: "notes.json", data: Data(flat.utf8))], budget: roomy),
            as: .simplenote)
        #expect(result.skipped.count == 10)
        #expect(result.skippedCount == 100_001)
        #expect(roomy.usedBytes >= 100_001 * 32)
        let late = ImportBudget(seconds: 0)
        Thread.sleep(forTimeInterval: 0.01)  // the deadline of a budget of 0 s, passed: no wait on anything of ours
        #expect(throws: ImportError.self) {
            try Importer.read(
                ImportSource(origin: "x", files: [.init(path: "a.md", data: Data("# a".utf8))], budget: late))
        }
        let cancelled = ImportBudget()
        cancelled.cancel()
        #expect(throws: ImportError.self) {
            try Importer.read(
                ImportSource(origin: "x", files: [.init(path: "a.md", data: Data("# a".utf8))], budget: cancelled))
        }
    }

    /// A front matter list of many items is read in one pass, and Markdown's attachments are
    /// hashed once however many notes name them.
    @Test func aLongFrontMatterListKeepsEveryItemInOrder() throws {
        let items = (0..<5000).map { "  - t\($0)" }.joined(separator: "\n")
        let text = "---\ntitle: x\ntags:\n\(items)\nfolder: f\n---\nbody"
        let result = try Importer.read(source(["a.md": text]), as: .markdown)
        #expect(result.notes.first?.note.tags == (0..<5000).map { "t\($0)" })
        #expect(result.notes.first?.note.folder == "f")
    }
}
