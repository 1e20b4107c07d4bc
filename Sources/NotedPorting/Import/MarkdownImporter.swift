import Foundation
import NotedCore

/// A folder (or zip) of Markdown and text files, Noted's own export among them: front matter
/// when present (`title`, `tags`, `folder`, `pinned`, `trashed`, `created`, `updated`, `id`),
/// the folder from the file's path, the title from the front matter, else the first `#`
/// heading, else the file name.
enum MarkdownImporter {
    static let textExtensions = [".md", ".markdown", ".txt", ".text"]

    static func read(_ source: ImportSource, now: Date = Date()) throws -> Importer.Result {
        var notes: [Importer.Imported] = []
        var skipped: [Importer.Skipped] = []
        // A zip of one folder: that folder is the export's root, not a folder of every note.
        let root = commonRoot(source.files.map(\.path))
        for file in source.files {
            guard textExtensions.contains(where: file.path.lowercased().hasSuffix) else {
                skipped.append(Importer.Skipped(source: file.path, reason: "not a Markdown or text file"))
                continue
            }
            guard var text = String(data: file.data, encoding: .utf8) else {
                skipped.append(Importer.Skipped(source: file.path, reason: "not UTF-8 text"))
                continue
            }
            if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
            text = text.replacingOccurrences(of: "\r\n", with: "\n")
            let (matter, body) = frontMatter(text)
            let relative = String(file.path.dropFirst(root.count))
            let components = relative.split(separator: "/").map(String.init)
            let name = components.last.map { ($0 as NSString).deletingPathExtension } ?? relative
            var folder = components.count > 1 ? components.dropLast().joined(separator: "/") : nil
            if let given = matter["folder"]?.stringValue { folder = given.isEmpty ? nil : given }
            var bodyText = body
            var title = matter["title"]?.stringValue
            if title == nil, let heading = firstHeading(body) {
                title = heading.title
                bodyText = heading.rest
            }
            let tags: [String] = {
                if let list = matter["tags"]?.arrayValue { return list.compactMap(\.stringValue) }
                if let text = matter["tags"]?.stringValue {
                    return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                }
                return []
            }()
            let created = date(matter["created"])
            let updated = date(matter["updated"]) ?? created ?? now
            let id: String
            if let given = matter["id"]?.stringValue, UUIDText.isCanonical(given) {
                id = given  // Noted's own export: the same note again
            } else {
                id = Importer.noteID(format: .markdown, sourceID: relative)
            }
            notes.append(Importer.Imported(
                note: PortableNote(
                    id: id, title: title ?? name, body: bodyText, tags: tags, folder: folder, pinned: matter["pinned"]?.boolValue ?? false,
                    trashed: matter["trashed"]?.boolValue ?? false, created: created ?? updated, updated: updated),
                source: file.path))
        }
        return Importer.Result(format: .markdown, notes: notes, skipped: skipped)
    }

    /// The folder every path is inside (with its `/`), or "" when they are not in one.
    static func commonRoot(_ paths: [String]) -> String {
        guard let first = paths.first, let top = first.split(separator: "/").first, first.contains("/") else { return "" }
        let prefix = String(top) + "/"
        return paths.allSatisfy { $0.hasPrefix(prefix) } ? prefix : ""
    }

    /// The first line when it is a `# heading`: its text, and the body after it.
    static func firstHeading(_ body: String) -> (title: String, rest: String)? {
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false)
        guard let index = lines.firstIndex(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }), lines[index].hasPrefix("# ") else { return nil }
        let title = lines[index].dropFirst(2).trimmingCharacters(in: .whitespaces)
        var rest = lines[(index + 1)...]
        while rest.first?.trimmingCharacters(in: .whitespaces).isEmpty == true { rest = rest.dropFirst() }
        return (title, rest.joined(separator: "\n"))
    }

    static func date(_ value: JSONValue?) -> Date? {
        guard let text = value?.stringValue else { return nil }
        if let date = Importer.isoDate(text) { return date }
        // A date alone (`2024-01-05`) or with a space before the time.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        for format in ["yyyy-MM-dd", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    /// YAML front matter (the subset notes apps write: `key: value` with plain, quoted or
    /// JSON-style scalars, flow `[a, b]` and block `- a` lists) and the text after it.
    static func frontMatter(_ text: String) -> ([String: JSONValue], String) {
        let plain = text.hasSuffix("\n") ? String(text.dropLast()) : text
        guard text.hasPrefix("---\n") else { return ([:], plain) }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let end = lines.dropFirst().firstIndex(where: { $0 == "---" || $0 == "..." }) else { return ([:], plain) }
        var result: [String: JSONValue] = [:]
        var listKey: String?
        for line in lines[1..<end] {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let key = listKey, trimmed.hasPrefix("- ") {
                var list = result[key]?.arrayValue ?? []
                list.append(scalar(String(trimmed.dropFirst(2))))
                result[key] = .array(list)
                continue
            }
            listKey = nil
            guard !line.hasPrefix(" "), let colon = line.firstIndex(of: ":") else { continue }
            let key = line[..<colon].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if value.isEmpty {
                listKey = key
                result[key] = .array([])
            } else if value.hasPrefix("["), value.hasSuffix("]") {
                result[key] = (try? JSONValue.parse(value)).flatMap { $0.arrayValue != nil ? $0 : nil }
                    ?? .array(value.dropFirst().dropLast().split(separator: ",").map { scalar($0.trimmingCharacters(in: .whitespaces)) })
            } else {
                result[key] = scalar(value)
            }
        }
        // One blank line after the front matter and one final newline belong to the file, not
        // the body (as Noted's export writes them).
        var body = lines[(end + 1)...]
        if body.first?.isEmpty == true { body = body.dropFirst() }
        var text = body.joined(separator: "\n")
        if text.hasSuffix("\n") { text.removeLast() }
        return (result, text)
    }

    static func scalar(_ text: String) -> JSONValue {
        if text.hasPrefix("\""), let value = try? JSONValue.parse(text), value.stringValue != nil { return value }
        if text.hasPrefix("'"), text.hasSuffix("'"), text.count >= 2 {
            return .string(String(text.dropFirst().dropLast()).replacingOccurrences(of: "''", with: "'"))
        }
        switch text {
        case "true", "True", "yes": return .bool(true)
        case "false", "False", "no": return .bool(false)
        case "null", "~": return .null
        default: return .string(text)
        }
    }
}
