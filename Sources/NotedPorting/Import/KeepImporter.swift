import Foundation
import NotedCore

/// Google Keep from Google Takeout: `Takeout/Keep/*.json`, one note per file, with `title`,
/// `textContent` or `listContent` (a checklist: `- [ ]`/`- [x]` lines), `labels`, `isPinned`,
/// `isTrashed`, `isArchived` (kept as the tag `archived`: Noted has no archive) and times in
/// microseconds. The `.html` twins are not read; attachments (`filePath` beside the JSON) come
/// along as files, shown at the end of the note.
enum KeepImporter {
    static func read(_ source: ImportSource) throws -> Importer.Result {
        var notes: [Importer.Imported] = []
        var skipped: [Importer.Skipped] = []
        let files = source.files.filter { $0.path.lowercased().hasSuffix(".json") }
        guard !files.isEmpty else { throw ImportError(source.origin, "no Google Keep .json notes in it") }
        for file in files {
            let item: JSONValue
            do {
                item = try Importer.json(file)
            } catch let error as ImportError {
                // One file picked on its own is the export: unreadable, it is refused.
                if files.count == 1 { throw error }
                skipped.append(Importer.Skipped(source: file.path, reason: error.reason))
                continue
            }
            let keys = ["title", "textContent", "listContent", "userEditedTimestampUsec", "createdTimestampUsec", "isTrashed", "isPinned", "isArchived"]
            guard let object = item.objectValue, item["kind"] == nil, keys.contains(where: { object[$0] != nil }) else {
                // Takeout puts other JSON beside the notes (Google Tasks, for one).
                if files.count == 1 { throw ImportError(file.path, "not a Google Keep note (another Takeout file?)") }
                skipped.append(Importer.Skipped(source: file.path, reason: "not a Keep note"))
                continue
            }
            var body = item["textContent"]?.stringValue ?? ""
            if let list = item["listContent"]?.arrayValue {
                body = list.map { entry in
                    "- [\(entry["isChecked"]?.boolValue == true ? "x" : " ")] \(entry["text"]?.stringValue ?? "")"
                }.joined(separator: "\n")
            }
            var tags = (item["labels"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }.filter { !$0.isEmpty }
            if item["isArchived"]?.boolValue == true, !tags.contains("archived") { tags.append("archived") }
            let updated = micros(item["userEditedTimestampUsec"])
            let created = micros(item["createdTimestampUsec"]) ?? updated
            let name = (file.path as NSString).lastPathComponent
            var marks: [String] = []
            var attachments: [PortableAttachment] = []
            for attachment in item["attachments"]?.arrayValue ?? [] {
                let path = attachment["filePath"]?.stringValue ?? "attachment"
                guard let data = Self.attachmentFile(path, beside: file.path, in: source) else {
                    marks.append("[attachment skipped: \(path)]")
                    skipped.append(Importer.Skipped(source: "\(file.path) \(path)", reason: "the attachment's file is not in the export"))
                    continue
                }
                let portable = PortableAttachment(name: (path as NSString).lastPathComponent, type: attachment["mimetype"]?.stringValue, data: data)
                marks.append(portable.markdown)
                if !attachments.contains(where: { $0.sha256 == portable.sha256 }) { attachments.append(portable) }
            }
            // Where an attachment was, the note says so (after a blank line when there is text).
            if !marks.isEmpty { body += (body.isEmpty ? "" : "\n\n") + marks.joined(separator: "\n") }
            notes.append(Importer.Imported(
                note: PortableNote(
                    id: Importer.noteID(format: .keep, sourceID: name), title: item["title"]?.stringValue ?? "", body: body, tags: tags,
                    pinned: item["isPinned"]?.boolValue ?? false, trashed: item["isTrashed"]?.boolValue ?? false, created: created, updated: updated,
                    attachments: attachments),
                source: file.path))
        }
        return Importer.Result(format: .keep, notes: notes, skipped: skipped)
    }

    /// The bytes of a note's attachment: the file `path` names beside the note's JSON, or
    /// anywhere in the export by that name (Takeout puts them beside the notes; a zip picked
    /// apart may not), or by its name without the extension (Takeout writes `.jpeg` files that
    /// the JSON names `.jpg`).
    static func attachmentFile(_ path: String, beside note: String, in source: ImportSource) -> Data? {
        let folder = (note as NSString).deletingLastPathComponent
        let wanted = (folder as NSString).appendingPathComponent(path)
        if let file = source.files.first(where: { $0.path == wanted }) { return file.data }
        let name = (path as NSString).lastPathComponent
        if let file = source.files.first(where: { ($0.path as NSString).lastPathComponent == name }) { return file.data }
        let stem = (name as NSString).deletingPathExtension
        guard !stem.isEmpty else { return nil }
        return source.files.first { file in
            let other = (file.path as NSString).lastPathComponent
            return (other as NSString).deletingPathExtension == stem && !other.lowercased().hasSuffix(".json") && !other.lowercased().hasSuffix(".html")
        }?.data
    }

    static func micros(_ value: JSONValue?) -> Date? {
        guard let value else { return nil }
        // Whole milliseconds (truncated), as every other date here.
        let micros: Int64?
        switch value {
        case .int(let number): micros = number
        case .double(let number): micros = Int64(exactly: number.rounded(.towardZero))
        case .string(let text): micros = Int64(text)
        default: micros = nil
        }
        return micros.map { Date(timeIntervalSince1970: Double($0 / 1000) / 1000) }
    }
}
