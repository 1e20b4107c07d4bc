import Foundation
import NotedCore

/// Google Keep from Google Takeout: `Takeout/Keep/*.json`, one note per file, with `title`,
/// `textContent` or `listContent` (a checklist: `- [ ]`/`- [x]` lines), `labels`, `isPinned`,
/// `isTrashed`, `isArchived` (kept as the tag `archived`: Noted has no archive) and times in
/// microseconds. The `.html` twins and attachments are not read (attachments are reported).
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
                skipped.append(Importer.Skipped(source: file.path, reason: error.reason))
                continue
            }
            guard item.objectValue != nil, item["userEditedTimestampUsec"] != nil || item["textContent"] != nil || item["listContent"] != nil else {
                // Takeout puts other JSON beside the notes (e.g. Labels.json is text, not JSON).
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
            let updated = micros(item["userEditedTimestampUsec"]) ?? Date(timeIntervalSince1970: 0)
            let created = micros(item["createdTimestampUsec"]) ?? updated
            let name = (file.path as NSString).lastPathComponent
            for attachment in item["attachments"]?.arrayValue ?? [] {
                skipped.append(Importer.Skipped(
                    source: "\(file.path) \(attachment["filePath"]?.stringValue ?? "attachment")", reason: "attachments are not imported yet"))
            }
            notes.append(Importer.Imported(
                note: PortableNote(
                    id: Importer.noteID(format: .keep, sourceID: name), title: item["title"]?.stringValue ?? "", body: body, tags: tags,
                    pinned: item["isPinned"]?.boolValue ?? false, trashed: item["isTrashed"]?.boolValue ?? false, created: created, updated: updated),
                source: file.path))
        }
        return Importer.Result(format: .keep, notes: notes, skipped: skipped)
    }

    static func micros(_ value: JSONValue?) -> Date? {
        guard let value else { return nil }
        let number: Double?
        switch value {
        case .int(let micros): number = Double(micros)
        case .double(let micros): number = micros
        case .string(let text): number = Double(text)
        default: number = nil
        }
        return number.map { Date(timeIntervalSince1970: $0 / 1_000_000) }
    }
}
