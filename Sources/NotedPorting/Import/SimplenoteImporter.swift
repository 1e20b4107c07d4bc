import Foundation
import NotedCore

/// Simplenote's export: `source/notes.json` (in the zip, or the folder it unpacks to) with
/// `activeNotes` and `trashedNotes`; each note's `content` is its whole text (the first line is
/// what Simplenote shows as its title), with `tags`, `pinned` and ISO 8601 dates. The `.txt`
/// copies beside it carry nothing more and are not read.
enum SimplenoteImporter {
    static func read(_ source: ImportSource) throws -> Importer.Result {
        let candidates = source.files.filter { $0.path.lowercased().hasSuffix(".json") }
        guard
            let file = candidates.first(where: {
                String(decoding: $0.data.prefix(4096), as: UTF8.self).contains("\"activeNotes\"")
            })
                ?? candidates.first(where: { $0.path.lowercased().hasSuffix("notes.json") })
        else {
            throw ImportError(source.origin, "no Simplenote notes.json in it")
        }
        let document = try Importer.json(file, in: source)
        guard document.objectValue != nil, document["activeNotes"] != nil || document["trashedNotes"] != nil else {
            throw ImportError(file.path, "not a Simplenote export: no activeNotes or trashedNotes")
        }
        var notes: [Importer.Imported] = []
        var skipped = SkippedList(limit: source.budget.maxSkipped)
        for (key, trashed) in [("activeNotes", false), ("trashedNotes", true)] {
            guard let list = document[key] else { continue }
            guard let items = list.arrayValue else { throw ImportError(file.path, "\(key) is not a list") }
            for (index, item) in items.enumerated() {
                let place = "\(file.path) \(key)[\(index)]"
                guard let content = item["content"]?.stringValue else {
                    skipped.append(Importer.Skipped(source: place, reason: "no content"))
                    continue
                }
                // A note without an id (a damaged file) still comes in, named by where it is
                // and what it says.
                let id = item["id"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } ?? "\(key)[\(index)]:\(content)"
                let (title, body) = Importer.splitFirstLine(content)
                let created = Importer.isoDate(item["creationDate"]?.stringValue)
                let updated = Importer.isoDate(item["lastModified"]?.stringValue) ?? created
                let tags = (item["tags"]?.arrayValue ?? []).compactMap(\.stringValue).filter { !$0.isEmpty }
                try notes.append(
                    charging: source.budget,
                    Importer.Imported(
                        note: PortableNote(
                            id: Importer.noteID(format: .simplenote, sourceID: id), title: title, body: body,
                            tags: tags,
                            pinned: item["pinned"]?.boolValue ?? false, trashed: trashed, created: created ?? updated,
                            updated: updated),
                        source: "\(file.path) \(id)"))
            }
        }
        return Importer.Result(format: .simplenote, notes: notes, skipped: skipped)
    }
}
