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
    }

    public struct Result: Sendable {
        public var format: Format
        public var notes: [Imported]
        public var skipped: [Skipped]
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
        for item in result.notes {
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

    /// The format of an export, from its files' names and first bytes.
    public static func detect(_ source: ImportSource) throws -> Format {
        let paths = source.files.map { $0.path.lowercased() }
        func head(_ file: ImportSource.File) -> String { String(decoding: file.data.prefix(4096), as: UTF8.self) }
        if paths.contains(where: { $0.hasSuffix(".enex") }) { return .evernote }
        if source.files.contains(where: { $0.path.lowercased().hasSuffix(".json") && head($0).contains("\"activeNotes\"") }) {
            return .simplenote
        }
        if source.files.contains(where: { $0.path.lowercased().hasSuffix(".json") && head($0).contains("\"userEditedTimestampUsec\"") }) {
            return .keep
        }
        if source.files.contains(where: { let h = head($0); return h.contains("\"items\"") && h.contains("\"content_type\"") }) {
            return .standardnotes
        }
        if source.files.contains(where: { $0.path.lowercased().hasSuffix(".md") && JoplinImporter.looksLikeItem($0.data) }) {
            return .joplin
        }
        if source.files.contains(where: { [".md", ".markdown", ".txt", ".text"].contains(where: $0.path.lowercased().hasSuffix) }) {
            return .markdown
        }
        throw ImportError(source.origin, "not an export this version reads (Simplenote, Evernote .enex, Google Keep, Standard Notes, Joplin, Markdown); give --from")
    }

    // MARK: Shared

    /// The id of an imported note: a name-based UUID (version 5, RFC 9562) of the format and
    /// the note's id there, so that importing the same export again finds the same notes.
    public static func noteID(format: Format, sourceID: String) -> String {
        var bytes = [UInt8](namespace)
        bytes += Array("\(format.rawValue):\(sourceID)".utf8)
        var hash = Array(Insecure.SHA1.hash(data: bytes).prefix(16))
        hash[6] = (hash[6] & 0x0f) | 0x50
        hash[8] = (hash[8] & 0x3f) | 0x80
        let hex = hash.map { String(format: "%02x", $0) }.joined()
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }

    /// Noted's namespace for imported ids (a fixed random UUID).
    static let namespace: [UInt8] = [0x6b, 0x1f, 0x3d, 0x52, 0x9a, 0x04, 0x4c, 0x7e, 0xa1, 0x58, 0x2d, 0x93, 0x40, 0xe7, 0x0c, 0x66]

    /// Parses JSON, naming the file, line and column of an error.
    static func json(_ file: ImportSource.File) throws -> JSONValue {
        do {
            return try JSONValue.parse(Array(file.data))
        } catch {
            let text = String(describing: error)
            if let range = text.range(of: "at byte "), let offset = Int(text[range.upperBound...].prefix { $0.isNumber }) {
                let (line, column) = position(of: offset, in: file.data)
                let reason = text.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "invalid"
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

    /// A date in ISO 8601 (with or without fractional seconds), or nil.
    static func isoDate(_ text: String?) -> Date? {
        guard let text else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// The first line that is not blank, trimmed, as a title (at most 200 characters), and the
    /// lines after it, leading blank lines dropped, the rest as written (line ends as LF).
    static func splitFirstLine(_ content: String) -> (title: String, body: String) {
        let lines = content.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) else { return ("", "") }
        let title = lines[first].trimmingCharacters(in: .whitespaces)
        var rest = lines[(first + 1)...]
        while let line = rest.first, line.trimmingCharacters(in: .whitespaces).isEmpty, rest.count > 1 { rest = rest.dropFirst() }
        return (String(title.prefix(200)), rest.joined(separator: "\n"))
    }
}
