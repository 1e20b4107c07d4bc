import Foundation
import NotedCore

/// A Standard Notes decrypted backup: `{"items":[…]}` of `Note` items (`content.title`,
/// `content.text`, pinned/archived in `content.appData["org.standardnotes.sn"]` or, in newer
/// versions, on `content` itself, `content.trashed`) and `Tag` items whose `references` name
/// the notes they tag. Other item types (editors, themes, settings) are not notes and are
/// left out without a word; an encrypted backup is refused with the reason.
enum StandardNotesImporter {
    static func read(_ source: ImportSource) throws -> Importer.Result {
        guard
            let file = source.files.first(where: {
                let head = String(decoding: $0.data.prefix(4096), as: UTF8.self)
                return head.contains("\"items\"")
            })
        else {
            throw ImportError(source.origin, "no Standard Notes backup in it")
        }
        let document = try Importer.json(file, in: source)
        guard let items = document["items"]?.arrayValue else {
            throw ImportError(file.path, "not a Standard Notes backup: no items list")
        }
        let encrypted = items.filter { $0["content"]?.stringValue != nil }
        if document["keyParams"] != nil || (!items.isEmpty && encrypted.count == items.count) {
            throw ImportError(
                file.path,
                "an encrypted backup: download a decrypted one (Standard Notes: Preferences, Backups, Decrypted)")
        }
        // Tags name their notes, and a nested tag its parent: note uuid → tag paths.
        var tags: [String: (title: String, parent: String?)] = [:]
        for item in items where item["content_type"]?.stringValue == "Tag" && item["deleted"]?.boolValue != true {
            guard let uuid = item["uuid"]?.stringValue, let title = item["content"]?["title"]?.stringValue,
                !title.isEmpty
            else { continue }
            let parent = (item["content"]?["references"]?.arrayValue ?? []).first {
                $0["content_type"]?.stringValue == "Tag" && $0["reference_type"]?.stringValue == "TagToParentTag"
            }?["uuid"]?.stringValue
            tags[uuid] = (title, parent)
        }
        // A tag's path, made once per tag (not once per reference), and charged to the budget.
        var paths: [String: String] = [:]
        func path(_ uuid: String) throws(ImportError) -> String {
            if let known = paths[uuid] { return known }
            var names: [String] = []
            var current: String? = uuid
            var seen: Set<String> = []
            while let id = current, let tag = tags[id], seen.insert(id).inserted {
                names.append(tag.title)
                current = tag.parent
            }
            let path = names.reversed().joined(separator: "/")
            try source.budget.charge(path.utf8.count + 64, origin: file.path)
            paths[uuid] = path
            return path
        }
        var tagsOf: [String: [String]] = [:]
        for item in items where item["content_type"]?.stringValue == "Tag" {
            guard let uuid = item["uuid"]?.stringValue, tags[uuid] != nil else { continue }
            for reference in item["content"]?["references"]?.arrayValue ?? []
            where reference["content_type"]?.stringValue == "Note" {
                if let note = reference["uuid"]?.stringValue {
                    try source.budget.charge(32, origin: file.path)  // the reference (its path string is shared)
                    tagsOf[note, default: []].append(try path(uuid))
                }
            }
        }
        var notes: [Importer.Imported] = []
        var skipped = SkippedList(limit: source.budget.maxSkipped)
        for (index, item) in items.enumerated() where item["content_type"]?.stringValue == "Note" {
            let place = "\(file.path) items[\(index)]"
            guard let uuid = item["uuid"]?.stringValue, let content = item["content"] else {
                skipped.append(Importer.Skipped(source: place, reason: "a note without uuid or content"))
                continue
            }
            guard content.objectValue != nil else {
                skipped.append(
                    Importer.Skipped(
                        source: place, reason: "its content is encrypted (an item the app could not decrypt)"))
                continue
            }
            if item["deleted"]?.boolValue == true { continue }
            let app = content["appData"]?["org.standardnotes.sn"]
            let pinned = content["pinned"]?.boolValue ?? app?["pinned"]?.boolValue ?? false
            let archived = content["archived"]?.boolValue ?? app?["archived"]?.boolValue ?? false
            let trashed = content["trashed"]?.boolValue ?? false
            var tags = tagsOf[uuid] ?? []
            if archived, !tags.contains("archived") { tags.append("archived") }
            let created = Importer.isoDate(item["created_at"]?.stringValue)
            let updated =
                Importer.isoDate(app?["client_updated_at"]?.stringValue) ?? Importer.isoDate(
                    item["updated_at"]?.stringValue) ?? created
                ?? Date(timeIntervalSince1970: 0)
            try notes.append(
                charging: source.budget,
                Importer.Imported(
                    note: PortableNote(
                        id: Importer.noteID(format: .standardnotes, sourceID: uuid),
                        title: content["title"]?.stringValue ?? "",
                        body: body(content), tags: tags, pinned: pinned, trashed: trashed, created: created ?? updated,
                        updated: updated),
                    source: "\(file.path) \(uuid)"))
        }
        return Importer.Result(format: .standardnotes, notes: notes, skipped: skipped)
    }

    /// The note's text; a Super note's (`noteType: "super"`) is a Lexical editor state, made
    /// Markdown.
    static func body(_ content: JSONValue) -> String {
        let text = content["text"]?.stringValue ?? ""
        guard content["noteType"]?.stringValue == "super", let state = try? JSONValue.parse(text),
            let root = state["root"]
        else { return text }
        var lines: [String] = []
        for block in root["children"]?.arrayValue ?? [] { lexical(block, depth: 0, into: &lines) }
        while lines.first?.isEmpty == true { lines.removeFirst() }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines.joined(separator: "\n")
    }

    /// One Lexical block: a heading, paragraph (its text; empty: an empty line), quote, or list
    /// (bullets, numbers, checks; nested lists two spaces deeper).
    static func lexical(_ node: JSONValue, depth: Int, into lines: inout [String]) {
        switch node["type"]?.stringValue {
        case "heading":
            let level = Int(node["tag"]?.stringValue?.dropFirst() ?? "1") ?? 1
            lines.append(String(repeating: "#", count: level) + " " + inline(node["children"]))
        case "list":
            let kind = node["listType"]?.stringValue ?? "bullet"
            for item in node["children"]?.arrayValue ?? [] {
                let children = item["children"]?.arrayValue ?? []
                // A nested list sits in an item of its own.
                if let nested = children.first(where: { $0["type"]?.stringValue == "list" }) {
                    lexical(nested, depth: depth + 1, into: &lines)
                    continue
                }
                let marker =
                    switch kind {
                    case "check": item["checked"]?.boolValue == true ? "- [x] " : "- [ ] "
                    case "number": "\(item["value"]?.intValue ?? 1). "
                    default: "- "
                    }
                lines.append(String(repeating: "  ", count: depth) + marker + inline(item["children"]))
            }
        case "quote":
            lines.append("> " + inline(node["children"]))
        default:
            lines.append(contentsOf: inline(node["children"]).components(separatedBy: "\n"))
        }
    }

    /// Text runs (bold: format bit 1, italic: bit 2), links and line breaks.
    static func inline(_ children: JSONValue?) -> String {
        var out = ""
        for child in children?.arrayValue ?? [] {
            switch child["type"]?.stringValue {
            case "text":
                var text = child["text"]?.stringValue ?? ""
                let format = child["format"]?.intValue ?? 0
                if format & 2 != 0 { text = "*\(text)*" }
                if format & 1 != 0 { text = "**\(text)**" }
                out += text
            case "link", "autolink":
                out += "[\(inline(child["children"]))](\(child["url"]?.stringValue ?? ""))"
            case "linebreak":
                out += "\n"
            default:
                out += inline(child["children"])
            }
        }
        return out
    }
}
