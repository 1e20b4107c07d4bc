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
        var skipped = SkippedList(limit: source.budget.maxSkipped)
        let files = source.files.filter { $0.path.lowercased().hasSuffix(".json") }
        guard !files.isEmpty else { throw ImportError(source.origin, "no Google Keep .json notes in it") }
        let index = FileIndex(source)
        var hashes: [String: String] = [:]  // path → SHA-256: each file hashed once
        for file in files {
            let item: JSONValue
            do {
                item = try Importer.json(file, in: source)
            } catch let error as ImportError {
                // One file picked on its own is the export: unreadable, it is refused.
                if files.count == 1 { throw error }
                skipped.append(Importer.Skipped(source: file.path, reason: error.reason))
                continue
            }
            let keys = [
                "title", "textContent", "listContent", "userEditedTimestampUsec", "createdTimestampUsec", "isTrashed",
                "isPinned", "isArchived",
            ]
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
                guard let found = index.attachmentFile(path, beside: file.path) else {
                    marks.append("[attachment skipped: \(path)]")
                    skipped.append(
                        Importer.Skipped(
                            source: "\(file.path) \(path)", reason: "the attachment's file is not in the export"))
                    continue
                }
                let sha256 = hashes[found.path] ?? Importer.sha256(found.data)
                hashes[found.path] = sha256
                let portable = PortableAttachment(
                    name: (path as NSString).lastPathComponent, type: attachment["mimetype"]?.stringValue,
                    data: found.data, sha256: sha256)
                marks.append(portable.markdown)
                if !attachments.contains(where: { $0.sha256 == portable.sha256 }) { attachments.append(portable) }
            }
            // Where an attachment was, the note says so (after a blank line when there is text).
            if !marks.isEmpty { body += (body.isEmpty ? "" : "\n\n") + marks.joined(separator: "\n") }
            try notes.append(
                charging: source.budget,
                Importer.Imported(
                    note: PortableNote(
                        id: Importer.noteID(format: .keep, sourceID: name), title: item["title"]?.stringValue ?? "",
                        body: body, tags: tags,
                        pinned: item["isPinned"]?.boolValue ?? false, trashed: item["isTrashed"]?.boolValue ?? false,
                        created: created, updated: updated,
                        attachments: attachments),
                    source: file.path))
        }
        return Importer.Result(format: .keep, notes: notes, skipped: skipped)
    }

    /// The files of an export by path, by name and by name without its extension, read once
    /// (a lookup per attachment was three scans of every file).
    struct FileIndex {
        var byPath: [String: ImportSource.File] = [:]
        var byName: [String: ImportSource.File] = [:]
        var byStem: [String: ImportSource.File] = [:]

        init(_ source: ImportSource) {
            for file in source.files {
                byPath[file.path] = byPath[file.path] ?? file
                let name = (file.path as NSString).lastPathComponent
                if byName[name] == nil { byName[name] = file }
                let lower = name.lowercased()
                let stem = (name as NSString).deletingPathExtension
                if !lower.hasSuffix(".json"), !lower.hasSuffix(".html"), byStem[stem] == nil { byStem[stem] = file }
            }
        }

        /// A note's attachment: the file `path` names beside the note's JSON, or anywhere in
        /// the export by that name (Takeout puts them beside the notes; a zip picked apart may
        /// not), or by its name without the extension (Takeout writes `.jpeg` files that the
        /// JSON names `.jpg`).
        func attachmentFile(_ path: String, beside note: String) -> ImportSource.File? {
            let folder = (note as NSString).deletingLastPathComponent
            if let file = byPath[(folder as NSString).appendingPathComponent(path)] { return file }
            let name = (path as NSString).lastPathComponent
            if let file = byName[name] { return file }
            let stem = (name as NSString).deletingPathExtension
            return stem.isEmpty ? nil : byStem[stem]
        }
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
