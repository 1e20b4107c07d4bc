import Foundation
import NotedCore

/// A Standard Notes decrypted backup: `{"items":[…]}` of `Note` items (`content.title`,
/// `content.text`, pinned/archived in `content.appData["org.standardnotes.sn"]` or, in newer
/// versions, on `content` itself, `content.trashed`) and `Tag` items whose `references` name
/// the notes they tag. Other item types (editors, themes, settings) are not notes and are
/// left out without a word; an encrypted backup is refused with the reason.
enum StandardNotesImporter {
    static func read(_ source: ImportSource) throws -> Importer.Result {
        guard let file = source.files.first(where: {
            let head = String(decoding: $0.data.prefix(4096), as: UTF8.self)
            return head.contains("\"items\"")
        }) else {
            throw ImportError(source.origin, "no Standard Notes backup in it")
        }
        let document = try Importer.json(file)
        guard let items = document["items"]?.arrayValue else { throw ImportError(file.path, "not a Standard Notes backup: no items list") }
        if document["keyParams"] != nil || items.contains(where: { $0["content"]?.stringValue?.hasPrefix("00") == true }) {
            throw ImportError(file.path, "an encrypted backup: export a decrypted one (Standard Notes: Preferences, Backups, Decrypted)")
        }
        // Tags reference notes: note uuid → tag titles.
        var tagsOf: [String: [String]] = [:]
        for item in items where item["content_type"]?.stringValue == "Tag" {
            guard let title = item["content"]?["title"]?.stringValue, !title.isEmpty, item["deleted"]?.boolValue != true else { continue }
            for reference in item["content"]?["references"]?.arrayValue ?? [] where reference["content_type"]?.stringValue == "Note" {
                if let uuid = reference["uuid"]?.stringValue { tagsOf[uuid, default: []].append(title) }
            }
        }
        var notes: [Importer.Imported] = []
        var skipped: [Importer.Skipped] = []
        for (index, item) in items.enumerated() where item["content_type"]?.stringValue == "Note" {
            let place = "\(file.path) items[\(index)]"
            guard let uuid = item["uuid"]?.stringValue, let content = item["content"], content.objectValue != nil else {
                skipped.append(Importer.Skipped(source: place, reason: "a note without uuid or content"))
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
            let updated = Importer.isoDate(app?["client_updated_at"]?.stringValue) ?? Importer.isoDate(item["updated_at"]?.stringValue) ?? created
                ?? Date(timeIntervalSince1970: 0)
            notes.append(Importer.Imported(
                note: PortableNote(
                    id: Importer.noteID(format: .standardnotes, sourceID: uuid), title: content["title"]?.stringValue ?? "",
                    body: content["text"]?.stringValue ?? "", tags: tags, pinned: pinned, trashed: trashed, created: created ?? updated, updated: updated),
                source: "\(file.path) \(uuid)"))
        }
        return Importer.Result(format: .standardnotes, notes: notes, skipped: skipped)
    }
}
