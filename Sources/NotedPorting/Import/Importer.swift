import Crypto
import Foundation
import NotedCore

/// Reads the exports of the apps people leave into notes (docs/import-export.md).
public enum Importer {
    public enum Format: String, Sendable, CaseIterable {
        case simplenote, evernote, keep, standardnotes, joplin, markdown
    }

    /// A note read from an export, and where in it.
    public struct Imported: Sendable, Hashable {
        public var note: PortableNote
        /// The file (and note) it came from, for reports.
        public var source: String
    }

    /// Something of the export that is not imported, and why.
    public struct Skipped: Sendable, Hashable {
        public var source: String
        public var reason: String

        public init(source: String, reason: String) {
            self.source = source
            self.reason = reason
        }
    }

    public struct Result: Sendable {
        public var format: Format
        public var notes: [Imported]
        /// What was skipped, up to the budget's `maxSkipped`.
        public var skipped: [Skipped]
        /// How many things were skipped in all (`skipped` holds the first of them).
        public var skippedCount: Int

        public init(format: Format, notes: [Imported], skipped: SkippedList) {
            self.format = format
            self.notes = notes
            self.skipped = skipped.items
            self.skippedCount = skipped.count
        }
    }

    /// Reads `source` as `format`, or as the format it is recognised as.
    public static func read(_ source: ImportSource, as format: Format? = nil) throws -> Result {
        guard !source.files.isEmpty else { throw ImportError(source.origin, "nothing to import: no files") }
        let format = try format ?? detect(source)
        var result: Result
        switch format {
        case .simplenote: result = try SimplenoteImporter.read(source)
        case .evernote: result = try EvernoteImporter.read(source)
        case .keep: result = try KeepImporter.read(source)
        case .standardnotes: result = try StandardNotesImporter.read(source)
        case .joplin: result = try JoplinImporter.read(source)
        case .markdown: result = try MarkdownImporter.read(source)
        }
        result.format = format
        // One note per id: an export that names one twice keeps the last.
        var seen: [String: Int] = [:]
        var unique: [Imported] = []
        for var item in result.notes {
            // A date Noted cannot hold (before 1970, after 9999: a damaged export) is dropped,
            // not the note.
            item.note.created = item.note.created.flatMap(Self.holdable)
            item.note.updated = item.note.updated.flatMap(Self.holdable)
            if let at = seen[item.note.id] {
                unique[at] = item
            } else {
                seen[item.note.id] = unique.count
                unique.append(item)
            }
        }
        result.notes = unique
        return result
    }

    /// What a note read from an export holds in memory, for the budget: its text, its tags,
    /// and a little for the rest.
    static func cost(_ note: PortableNote) -> Int {
        note.title.utf8.count + note.body.utf8.count + note.tags.reduce(0) { $0 + $1.utf8.count + 16 }
            + (note.folder?.utf8.count ?? 0) + 256
    }

    /// The lower-case hex SHA-256 of `data`.
    static func sha256(_ data: Data) -> String { Array(SHA256.hash(data: data)).lowercaseHex }

    /// `date` if the notes' date fields can hold it (docs/protocol.md section 1).
    static func holdable(_ date: Date) -> Date? {
        let millis = date.timeIntervalSince1970 * 1000
        return millis >= 0 && millis <= Double(CollectionSchema.latestDate) ? date : nil
    }

    /// The format of an export, from its files' names and first bytes.
    public static func detect(_ source: ImportSource) throws -> Format {
        let paths = source.files.map { $0.path.lowercased() }
        func head(_ file: ImportSource.File) -> String { String(decoding: file.data.prefix(4096), as: UTF8.self) }
        if paths.contains(where: { $0.hasSuffix(".enex") }) { return .evernote }
        if source.files.contains(where: {
            $0.path.lowercased().hasSuffix(".json") && head($0).contains("\"activeNotes\"")
        }) {
            return .simplenote
        }
        if source.files.contains(where: {
            $0.path.lowercased().hasSuffix(".json") && head($0).contains("\"userEditedTimestampUsec\"")
        }) {
            return .keep
        }
        if source.files.contains(where: {
            let h = head($0)
            return h.contains("\"items\"") && h.contains("\"content_type\"")
        }) {
            return .standardnotes
        }
        if source.files.contains(where: {
            $0.path.lowercased().hasSuffix(".md") && JoplinImporter.looksLikeItem($0.data)
        }) {
            return .joplin
        }
        if source.files.contains(where: {
            [".md", ".markdown", ".txt", ".text"].contains(where: $0.path.lowercased().hasSuffix)
        }) {
            return .markdown
        }
        throw ImportError(
            source.origin,
            "not an export this version reads (Simplenote, Evernote .enex, Google Keep, Standard Notes, Joplin, Markdown); give --from"
        )
    }

    // MARK: Shared

    /// The id of an imported note: a name-based UUID (version 5, RFC 9562) of the format and
    /// the note's id there, so that importing the same export again finds the same notes.
    public static func noteID(format: Format, sourceID: String) -> String {
        nameBasedID("\(format.rawValue):\(sourceID)")
    }

    /// The id under which an imported note is added beside the note of its id when that note holds
    /// other content (docs/import-export.md, "Notes that exist"): a name-based UUID of `id` and
    /// the imported content, so that importing the same export again finds the same copy and a
    /// different version of the note makes a different one.
    public static func copyID(of note: PortableNote) -> String {
        let content = ([note.title, note.body, note.folder ?? ""] + note.tags.sorted()).joined(separator: "\u{0}")
        return nameBasedID("copy:\(note.id):\(sha256(Data(content.utf8)))")
    }

    private static func nameBasedID(_ name: String) -> String {
        var bytes = [UInt8](namespace)
        bytes += Array(name.utf8)
        var hash = Array(Insecure.SHA1.hash(data: bytes).prefix(16))
        hash[6] = (hash[6] & 0x0f) | 0x50
        hash[8] = (hash[8] & 0x3f) | 0x80
        let hex = hash.lowercaseHex
        let parts = [
            hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4),
            hex.dropFirst(20),
        ]
        return parts.joined(separator: "-")
    }

    /// Noted's namespace for imported ids (a fixed random UUID).
    static let namespace: [UInt8] = [
        0x6b, 0x1f, 0x3d, 0x52, 0x9a, 0x04, 0x4c, 0x7e, 0xa1, 0x58, 0x2d, 0x93, 0x40, 0xe7, 0x0c, 0x66,
    ]

    /// Parses JSON within the import's budget, naming the file, line and column of an error.
    static func json(_ file: ImportSource.File, in source: ImportSource) throws -> JSONValue {
        let budget = source.budget
        try budget.check(origin: file.path)
        var left = budget.remainingBytes
        let before = left
        do {
            let value = try file.data.withUnsafeBytes { raw in
                try JSONValue.parse(raw.bindMemory(to: UInt8.self), memoryBudget: &left)
            }
            try budget.charge(before - left, origin: file.path)
            return value
        } catch is JSONBudgetExceeded {
            throw ImportBudget.overMemory(file.path, budget.memoryBytes)
        } catch let error as ImportError {
            throw error
        } catch {
            let text = String(describing: error)
            if let range = text.range(of: "at byte "),
                let offset = Int(text[range.upperBound...].prefix { $0.isNumber })
            {
                let (line, column) = position(of: offset, in: file.data)
                let reason =
                    text.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
                    ?? "invalid"
                throw ImportError(file.path, "line \(line), column \(column): not valid JSON (\(reason))")
            }
            throw ImportError(file.path, "not valid JSON")
        }
    }

    /// 1-based line and column of a byte offset.
    static func position(of offset: Int, in data: Data) -> (Int, Int) {
        var line = 1
        var column = 1
        for byte in data.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }

    /// A date in RFC 3339 (`Timestamp.parseRFC3339`), or nil.
    static func isoDate(_ text: String?) -> Date? {
        text.flatMap(Timestamp.parseRFC3339)
    }

    /// The first line that is not blank, trimmed, as a title (at most 200 characters), and the
    /// lines after it, leading blank lines dropped, the rest as written (line ends as LF).
    /// Reads only as far as the title (notes are long; their first lines are short).
    static func splitFirstLine(_ content: String) -> (title: String, body: String) {
        let text =
            content.utf8.contains(13)
            ? content.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n") : content
        var rest = Substring(text)
        while true {
            let end = rest.firstIndex(of: "\n") ?? rest.endIndex
            let line = rest[..<end]
            if !isBlank(line) {
                var body = end < rest.endIndex ? rest[rest.index(after: end)...] : rest[rest.endIndex...]
                // Blank lines before the body go, but not the last line (as written).
                while let next = body.firstIndex(of: "\n"), isBlank(body[..<next]) {
                    body = body[body.index(after: next)...]
                }
                return (String(trimmed(line).prefix(200)), String(body))
            }
            guard end < rest.endIndex else { return ("", "") }
            rest = rest[rest.index(after: end)...]
        }
    }

    /// Spaces (Unicode's space separators) and tabs: what `CharacterSet.whitespaces` holds.
    private static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator
    }

    private static func isBlank(_ line: Substring) -> Bool {
        line.unicodeScalars.allSatisfy(isSpace)
    }

    private static func trimmed(_ line: Substring) -> Substring {
        let scalars = line.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isSpace($0) }),
            let last = scalars.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return Substring(scalars[first...last])
    }
}

extension [Importer.Imported] {
    /// Appends a note read from an export, charging what it holds to the import's budget (and
    /// so checking its deadline once a note).
    mutating func append(charging budget: ImportBudget, _ item: Importer.Imported) throws(ImportError) {
        try budget.charge(Importer.cost(item.note), origin: item.source)
        append(item)
    }
}
