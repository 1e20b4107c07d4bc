import Crypto
import Foundation
import NotedCore
import Testing

@testable import NotedPorting

/// Every importer against sample exports in the shapes the real apps write
/// (Fixtures/FORMATS.md says where each shape comes from), compared with the notes a correct
/// importer makes of them (Fixtures/EXPECTED.json); and the damaged files people pick by
/// mistake: refused with a reason, or read in part with what was skipped named.
@Suite struct FixtureTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        .path
    static let expected: JSONValue = {
        (try? JSONValue.parse(Array(FileManager.default.contents(atPath: root + "/EXPECTED.json") ?? Data()))) ?? .null
    }()

    static var fixtures: [String] { (expected["fixtures"]?.arrayValue ?? []).compactMap { $0["path"]?.stringValue } }
    static var malformed: [String] { (expected["malformed"]?.arrayValue ?? []).compactMap { $0["path"]?.stringValue } }

    static func entry(_ path: String, in list: String) -> JSONValue? {
        expected[list]?.arrayValue?.first { $0["path"]?.stringValue == path }
    }

    /// The expected notes of a fixture (following `sameAs`).
    static func notes(of path: String) -> [JSONValue] {
        guard let entry = entry(path, in: "fixtures") else { return [] }
        if let same = entry["sameAs"]?.stringValue { return notes(of: same) }
        return entry["notes"]?.arrayValue ?? []
    }

    /// Compares what was read with what is expected, note for note (matched by title and
    /// position among notes of that title), printing every difference. A null date is "none"
    /// in an export, "not asserted" in a damaged file (`nullDatesAsserted` false).
    func compare(_ read: [Importer.Imported], _ expected: [JSONValue], _ label: String, nullDatesAsserted: Bool = true)
    {
        #expect(
            read.count == expected.count,
            "\(label): \(read.count) notes read, \(expected.count) expected: \(read.map(\.note.title))")
        var pool = read.map(\.note)
        for want in expected {
            let title = want["title"]?.stringValue ?? ""
            guard let index = pool.firstIndex(where: { $0.title == title }) else {
                Issue.record("\(label): no note titled \"\(title)\" among \(pool.map(\.title))")
                continue
            }
            let got = pool.remove(at: index)
            let name = "\(label) \"\(title.prefix(30))\""
            #expect(
                got.body == want["body"]?.stringValue,
                "\(name) body: got \(String(reflecting: got.body.suffix(60))) want \(String(reflecting: (want["body"]?.stringValue ?? "").suffix(60)))"
            )
            #expect(
                Set(got.tags) == Set((want["tags"]?.arrayValue ?? []).compactMap(\.stringValue)),
                "\(name) tags \(got.tags)")
            #expect(got.folder == want["folder"]?.stringValue, "\(name) folder \(got.folder ?? "nil")")
            #expect(got.pinned == (want["pinned"]?.boolValue ?? false), "\(name) pinned")
            #expect(got.trashed == (want["trashed"]?.boolValue ?? false), "\(name) trashed")
            // Attachments: the files themselves (their hash is of their bytes), named and typed.
            let files = got.attachments.map { file -> JSONValue in
                [
                    "name": .string(file.name), "type": .string(file.type), "sha256": .string(file.sha256),
                    "size": .int(Int64(file.data.count)),
                ]
            }
            #expect(files == (want["attachments"]?.arrayValue ?? []), "\(name) attachments \(files)")
            for file in got.attachments {
                #expect(
                    file.sha256 == Array(SHA256.hash(data: file.data)).lowercaseHex
                        && got.body.contains("(attachment:\(file.sha256))"), "\(name) \(file.name)")
            }
            for key in ["created", "updated"] {
                // No date in the source (null): none made up, so a second import changes nothing.
                guard let expected = want[key], nullDatesAsserted || expected != .null else { continue }
                let date = key == "created" ? got.created : got.updated
                #expect(date.map(Exporter.timestamp) == expected.stringValue, "\(name) \(key)")
            }
        }
    }

    @Test(arguments: fixtures) func anExportIsReadAsItsAppMeantIt(path: String) throws {
        let entry = try #require(Self.entry(path, in: "fixtures"))
        let format = try #require(entry["format"]?.stringValue.flatMap(Importer.Format.init(rawValue:)))
        let source = try ImportSource.load(Self.root + "/" + path)
        #expect(try Importer.detect(source) == format, "\(path) recognised")
        let result = try Importer.read(source, as: format)
        compare(result.notes, Self.notes(of: path), path)
        // Read twice, the same ids: a second import finds the same notes.
        #expect(try Importer.read(source, as: format).notes.map(\.note.id) == result.notes.map(\.note.id))
    }

    @Test(arguments: malformed) func aDamagedOrWrongFileIsRefusedOrReadInPart(path: String) throws {
        let entry = try #require(Self.entry(path, in: "malformed"))
        let format = (Self.root + "/" + path).split(separator: "/").dropLast().last.flatMap {
            Importer.Format(rawValue: String($0))
        }
        let outcome = Result { try Importer.read(try ImportSource.load(Self.root + "/" + path), as: format) }
        switch (entry["expect"]?.stringValue, outcome) {
        case ("error", .failure(let error)):
            let message = String(describing: error)
            #expect(error is ImportError, "\(path): \(message)")
            #expect(!message.isEmpty && !message.contains("\n"), "one line: \(message)")
        case ("error", .success(let result)):
            Issue.record(
                "\(path) should be refused (\(entry["why"]?.stringValue ?? "")), read \(result.notes.count) notes")
        case ("partial", .success(let result)):
            compare(result.notes, entry["notes"]?.arrayValue ?? [], path, nullDatesAsserted: false)
            if let skipped = entry["skipped"]?.intValue {
                #expect(
                    result.skipped.filter { !$0.reason.contains("attachments") }.count == Int(skipped),
                    "\(path) skipped: \(result.skipped)")
            }
        case ("partial", .failure(let error)):
            Issue.record("\(path) should be read in part (\(entry["why"]?.stringValue ?? "")): \(error)")
        default:
            Issue.record("\(path): unknown expectation")
        }
    }
}
