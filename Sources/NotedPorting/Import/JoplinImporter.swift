import Foundation
import NotedCore

/// Joplin's RAW export (a folder of `<id>.md` items) and `.jex` (a tar of the same). Each item is
/// its title line, a blank line, its body, a blank line, then `key: value` lines (`id`,
/// `parent_id`, `created_time`, `updated_time`, `type_` …): notes are `type_: 1`, notebooks
/// `2` (nested through `parent_id`, becoming the folder path), resources `4` (attachments: their
/// files in `resources/` come along, and a note's `(:/<id>)` links become `(attachment:SHA256)`),
/// tags `5`, and note–tag links `6`. A to-do (`is_todo: 1`) is an
/// ordinary note; `deleted_time` other than 0 puts the note in the trash.
enum JoplinImporter {
    struct Item {
        var path: String
        var title: String
        var body: String
        var fields: [String: String]
        var type: Int { Int(fields["type_"] ?? "") ?? 0 }
        var id: String { fields["id"] ?? "" }
    }

    /// Whether a file ends with Joplin's metadata block.
    static func looksLikeItem(_ data: Data) -> Bool {
        guard let text = String(data: data.suffix(4096), encoding: .utf8) else { return false }
        let fields = metadata(text.split(separator: "\n", omittingEmptySubsequences: false)).fields
        return fields["type_"] != nil && (fields["id"]?.count ?? 0) == 32
    }

    /// The trailing `key: value` lines of an item, and where they start.
    static func metadata(_ lines: [Substring]) -> (fields: [String: String], start: Int) {
        var fields: [String: String] = [:]
        var index = lines.count
        while index > 0, lines[index - 1].isEmpty { index -= 1 }
        while index > 0 {
            let line = lines[index - 1]
            guard let colon = line.firstIndex(of: ":"),
                line[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }),
                !line[..<colon].isEmpty
            else { break }
            var value = line[line.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
            fields[String(line[..<colon])] = String(value)
            index -= 1
        }
        return (fields, index)
    }

    static func item(_ file: ImportSource.File) -> Item? {
        guard let text = String(data: file.data, encoding: .utf8) else { return nil }
        let lines = text.replacingOccurrences(of: "\r\n", with: "\n").split(
            separator: "\n", omittingEmptySubsequences: false)
        let (fields, start) = metadata(lines)
        guard fields["type_"] != nil, fields["id"] != nil else { return nil }
        var content = lines[..<start]
        if content.last?.isEmpty == true { content = content.dropLast() }  // the blank line before the metadata
        let title = content.first.map(String.init) ?? ""
        var body = content.dropFirst()
        if body.first?.isEmpty == true { body = body.dropFirst() }
        return Item(path: file.path, title: title, body: body.joined(separator: "\n"), fields: fields)
    }

    static func read(_ source: ImportSource) throws -> Importer.Result {
        var items: [Item] = []
        var skipped = SkippedList(limit: source.budget.maxSkipped)
        for file in source.files {
            guard file.path.lowercased().hasSuffix(".md") else {
                if !file.path.contains("resources/") {
                    skipped.append(Importer.Skipped(source: file.path, reason: "not a Joplin item"))
                }
                continue
            }
            guard let item = item(file) else {
                skipped.append(
                    Importer.Skipped(
                        source: file.path, reason: "not a Joplin item (no metadata block with id and type_)"))
                continue
            }
            items.append(item)
        }
        guard !items.isEmpty else { throw ImportError(source.origin, "no Joplin items in it") }
        let folders = Dictionary(
            items.filter { $0.type == 2 }.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let tagTitles = Dictionary(
            items.filter { $0.type == 5 }.map { ($0.id, $0.title) }, uniquingKeysWith: { first, _ in first })
        var tagsOf: [String: [String]] = [:]
        for link in items where link.type == 6 {
            if let note = link.fields["note_id"], let tag = link.fields["tag_id"].flatMap({ tagTitles[$0] }) {
                tagsOf[note, default: []].append(tag)
            }
        }
        // A folder's path, made once per folder (not once per note).
        var paths: [String: String?] = [:]
        func path(of folderID: String?) -> String? {
            guard let folderID else { return nil }
            if let known = paths[folderID] { return known }
            var names: [String] = []
            var current: String? = folderID
            var seen: Set<String> = []
            while let id = current, !id.isEmpty, let folder = folders[id], seen.insert(id).inserted {
                names.append(folder.title.replacingOccurrences(of: "/", with: "-"))
                current = folder.fields["parent_id"]
            }
            let path = names.isEmpty ? nil : names.reversed().joined(separator: "/")
            paths[folderID] = .some(path)
            return path
        }
        // Resources (type 4): their files are `resources/<id>.<ext>`; notes link them as `(:/<id>)`.
        var resources: [String: PortableAttachment] = [:]
        // The files under resources/ by name and by name without extension, read once.
        var byName: [String: ImportSource.File] = [:]
        var byStem: [String: ImportSource.File] = [:]
        for file in source.files where file.path.contains("resources/") {
            let name = (file.path as NSString).lastPathComponent
            if byName[name] == nil { byName[name] = file }
            let stem = (name as NSString).deletingPathExtension
            if byStem[stem] == nil { byStem[stem] = file }
        }
        for item in items where item.type == 4 {
            try source.budget.check(origin: item.path)
            let ext = item.fields["file_extension"] ?? ""
            let wanted = ext.isEmpty ? item.id : "\(item.id).\(ext)"
            guard let file = byName[wanted] ?? byStem[item.id] else {
                skipped.append(
                    Importer.Skipped(
                        source: item.path,
                        reason: "the attachment's file (resources/\(wanted)) is not in the export (\(item.title))"))
                continue
            }
            let filename = item.fields["filename"].flatMap { $0.isEmpty ? nil : $0 }
            resources[item.id] = PortableAttachment(
                name: filename ?? (item.title.isEmpty ? wanted : item.title), type: item.fields["mime"], data: file.data
            )
        }
        var notes: [Importer.Imported] = []
        for item in items {
            switch item.type {
            case 1:
                // To-dos come in as ordinary notes (their due and completed times are dropped).
                let tags = tagsOf[item.id] ?? []
                let created =
                    Importer.isoDate(item.fields["user_created_time"]) ?? Importer.isoDate(item.fields["created_time"])
                let updated =
                    Importer.isoDate(item.fields["user_updated_time"]) ?? Importer.isoDate(item.fields["updated_time"])
                    ?? created
                    ?? Date(timeIntervalSince1970: 0)
                let deleted = item.fields["deleted_time"].map { $0 != "0" && !$0.isEmpty } ?? false
                let (body, attachments) = Self.linkingAttachments(item.body, resources: resources)
                try notes.append(
                    charging: source.budget,
                    Importer.Imported(
                        note: PortableNote(
                            id: Importer.noteID(format: .joplin, sourceID: item.id), title: item.title, body: body,
                            tags: tags,
                            folder: path(of: item.fields["parent_id"]), pinned: false, trashed: deleted,
                            created: created ?? updated, updated: updated,
                            attachments: attachments),
                        source: item.path))
            default:
                continue
            }
        }
        return Importer.Result(format: .joplin, notes: notes, skipped: skipped)
    }

    /// The body with each `(:/<resource id>)` link target of a known resource made
    /// `(attachment:<sha256>)`, and those resources, in the order the body names them.
    static func linkingAttachments(_ body: String, resources: [String: PortableAttachment]) -> (
        String, [PortableAttachment]
    ) {
        guard body.contains("(:/") else { return (body, []) }
        var result = ""
        var attachments: [PortableAttachment] = []
        var rest = body[...]
        while let range = rest.range(of: "(:/") {
            result += rest[..<range.lowerBound]
            let after = rest[range.upperBound...]
            let id = String(after.prefix(32))
            if id.count == 32, id.allSatisfy(\.isHexDigit), after.dropFirst(32).first == ")",
                let attachment = resources[id]
            {
                result += "(attachment:\(attachment.sha256))"
                if !attachments.contains(where: { $0.sha256 == attachment.sha256 }) { attachments.append(attachment) }
                rest = after.dropFirst(33)
            } else {
                result += "(:/"
                rest = after
            }
        }
        result += rest
        return (result, attachments)
    }
}
