import Foundation
import NotedCore

/// A folder (or zip) of Markdown and text files, Noted's own export among them: front matter
/// when present (`title`, `tags`, `folder`, `pinned`, `trashed`, `created`, `updated`, `id`,
/// and `attachments`, whose files Noted's export keeps in `attachments/<sha256>/<name>`),
/// the folder from the file's path, the title from the front matter, else the first `#`
/// heading, else the file name.
enum MarkdownImporter {
    static let textExtensions = [".md", ".markdown", ".txt", ".text"]

    static func read(_ source: ImportSource) throws -> Importer.Result {
        var notes: [Importer.Imported] = []
        var skipped = SkippedList(limit: source.budget.maxSkipped)
        // A zip of one folder: that folder is the export's root, not a folder of every note.
        let root = commonRoot(source.files.map(\.path))
        // Noted's own export keeps the notes' files in `attachments/<sha256>/<name>`.
        var attachmentFiles: [String: ImportSource.File] = [:]
        for file in source.files {
            let parts = file.path.dropFirst(root.count).split(separator: "/")
            if parts.count == 3, parts[0] == "attachments", AttachmentReference.isSHA256(String(parts[1])) {
                attachmentFiles[String(parts[1])] = file
            }
        }
        let attachmentPaths = Set(attachmentFiles.values.map(\.path))
        // Whether the file under `attachments/<sha256>/` hashes to its folder's name: checked
        // once, however many notes name it.
        var whole: [String: Bool] = [:]
        for file in source.files where !attachmentPaths.contains(file.path) {
            // The text, its copy without CRs, the front matter and the body: a few times the file.
            try source.budget.charge(file.data.count * 3, origin: file.path)
            guard textExtensions.contains(where: file.path.lowercased().hasSuffix) else {
                skipped.append(Importer.Skipped(source: file.path, reason: "not a Markdown or text file"))
                continue
            }
            // UTF-8, else (a file from an older editor) Windows-1252, which every byte decodes.
            guard
                var text = String(data: file.data, encoding: .utf8) ?? String(data: file.data, encoding: .windowsCP1252)
            else {
                skipped.append(Importer.Skipped(source: file.path, reason: "not text"))
                continue
            }
            if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
            text = text.replacingOccurrences(of: "\r\n", with: "\n")
            let isText = [".txt", ".text"].contains(where: file.path.lowercased().hasSuffix)
            let (matter, body) = isText ? ([:], text) : frontMatter(text)
            let relative = String(file.path.dropFirst(root.count))
            let components = relative.split(separator: "/").map(String.init)
            let name = components.last.map { ($0 as NSString).deletingPathExtension } ?? relative
            var folder = components.count > 1 ? components.dropLast().joined(separator: "/") : nil
            if let given = matter["folder"]?.stringValue { folder = given.isEmpty ? nil : given }
            var bodyText = body
            var title = matter["title"]?.stringValue
            if title == nil, !isText, let heading = firstHeading(body) {
                title = heading.title
                bodyText = heading.rest
            }
            let tags: [String] = {
                if let list = matter["tags"]?.arrayValue { return list.compactMap(\.stringValue) }
                if let text = matter["tags"]?.stringValue {
                    return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                        !$0.isEmpty
                    }
                }
                return []
            }()
            let created = date(matter["created"])
            let updated = date(matter["updated"]) ?? created
            let id: String
            if let given = matter["id"]?.stringValue, UUIDText.isCanonical(given) {
                id = given  // Noted's own export: the same note again
            } else {
                id = Importer.noteID(format: .markdown, sourceID: relative)
            }
            var attachments: [PortableAttachment] = []
            for element in (matter["attachments"]?.arrayValue ?? []).compactMap(\.stringValue) {
                guard let reference = AttachmentReference(element: element) else {
                    skipped.append(
                        Importer.Skipped(
                            source: file.path,
                            reason: "an attachment that is not \"<sha256> <size> <type> <name>\": \(element.prefix(80))"
                        ))
                    continue
                }
                let found = attachmentFiles[reference.sha256]
                if let found, whole[reference.sha256] == nil {
                    whole[reference.sha256] = Importer.sha256(found.data) == reference.sha256
                }
                guard let found, whole[reference.sha256] == true else {
                    skipped.append(
                        Importer.Skipped(
                            source: "\(file.path) \(reference.name)",
                            reason: "the attachment's file is not in the export, or not whole"))
                    continue
                }
                attachments.append(
                    PortableAttachment(
                        name: reference.name, type: reference.type, data: found.data, sha256: reference.sha256))
            }
            try notes.append(
                charging: source.budget,
                Importer.Imported(
                    note: PortableNote(
                        id: id, title: title ?? name, body: bodyText, tags: tags, folder: folder,
                        pinned: matter["pinned"]?.boolValue ?? false,
                        trashed: matter["trashed"]?.boolValue ?? false, created: created ?? updated, updated: updated,
                        attachments: attachments),
                    source: file.path))
        }
        return Importer.Result(format: .markdown, notes: notes, skipped: skipped)
    }

    /// The folder every path is inside (with its `/`), or "" when they are not in one.
    static func commonRoot(_ paths: [String]) -> String {
        guard let first = paths.first, let top = first.split(separator: "/").first, first.contains("/") else {
            return ""
        }
        let prefix = String(top) + "/"
        return paths.allSatisfy { $0.hasPrefix(prefix) } ? prefix : ""
    }

    /// The first line when it is a `# heading`: its text, and the body after it and the empty
    /// lines that follow it.
    static func firstHeading(_ body: String) -> (title: String, rest: String)? {
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.first, first.hasPrefix("# ") else { return nil }
        let title = first.dropFirst(2).trimmingCharacters(in: .whitespaces)
        var rest = lines.dropFirst()
        while rest.count > 1, rest.first?.trimmingCharacters(in: .whitespaces).isEmpty == true {
            rest = rest.dropFirst()
        }
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
    /// JSON-style scalars, flow `[a, b]` and block `- a` lists) and the text after it. A front
    /// matter that never closes, or that is not such a mapping, is no front matter: the whole
    /// file is the body. After it, the body is the rest with leading empty lines dropped.
    static func frontMatter(_ text: String) -> ([String: JSONValue], String) {
        guard text.hasPrefix("---\n") else { return ([:], text) }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let end = lines.dropFirst().firstIndex(where: { $0 == "---" }) else { return ([:], text) }
        var result: [String: JSONValue] = [:]
        // Block lists grow here, in place, and go into `result` at the end.
        var lists: [String: [JSONValue]] = [:]
        var listKey: String?
        for line in lines[1..<end] {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if let key = listKey, trimmed.hasPrefix("- ") || trimmed == "-" {
                guard let item = scalar(String(trimmed.dropFirst(2))) else { return ([:], text) }
                lists[key, default: []].append(item)
                continue
            }
            listKey = nil
            // Anything but `key: value` at the left margin is not the YAML read here.
            guard !line.hasPrefix(" "), !line.hasPrefix("\t"), let colon = line.firstIndex(of: ":") else {
                return ([:], text)
            }
            let key = line[..<colon].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty, !key.contains(" ") || key.hasPrefix("\"") else { return ([:], text) }
            lists[key] = nil
            if value.isEmpty {
                listKey = key
                result[key] = .array([])
            } else if value.hasPrefix("[") {
                guard value.hasSuffix("]") else { return ([:], text) }
                if let parsed = try? JSONValue.parse(value), parsed.arrayValue != nil {
                    result[key] = parsed
                } else {
                    let items = value.dropFirst().dropLast().split(separator: ",").map {
                        scalar($0.trimmingCharacters(in: .whitespaces))
                    }
                    guard !items.contains(where: { $0 == nil }) else { return ([:], text) }
                    result[key] = .array(items.compactMap { $0 })
                }
            } else {
                guard let parsed = scalar(value) else { return ([:], text) }
                result[key] = parsed
            }
        }
        for (key, list) in lists { result[key] = .array(list) }
        var body = lines[(end + 1)...]
        while body.count > 1, body.first?.isEmpty == true { body = body.dropFirst() }
        return (result, body.joined(separator: "\n"))
    }

    /// A YAML scalar; nil for an unclosed quote.
    static func scalar(_ text: String) -> JSONValue? {
        if text.hasPrefix("\"") {
            guard let value = try? JSONValue.parse(text), value.stringValue != nil else { return nil }
            return value
        }
        if text.hasPrefix("'") {
            guard text.hasSuffix("'"), text.count >= 2 else { return nil }
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
