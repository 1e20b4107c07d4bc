import Foundation
import GRDB
import NotedCore

/// What an import did to one note.
public enum ImportOutcome: Sendable, Hashable {
    /// A new note.
    case created
    /// The note existed with other content: its fields are now the imported ones.
    case updated
    /// The note existed with the same content: nothing written.
    case unchanged
    /// Not written, and why: beyond a limit of the schema, deleted on this device, or the id
    /// of another kind of record.
    case refused(String)
}

extension LocalStore {
    /// Writes imported notes under the ids given: created when new, updated when their fields
    /// differ, left alone when equal (tags compared without order). Each batch is one local
    /// transaction, so a note is written whole or not at all and a failure leaves the notes of
    /// earlier batches in place (importing again goes on from there). With `dryRun`, only reads.
    public func importNotes(_ notes: [(id: String, fields: NoteFields)], dryRun: Bool = false) async throws -> (outcomes: [ImportOutcome], effect: StoreEffect) {
        if dryRun {
            var outcomes: [ImportOutcome] = []
            for (id, fields) in notes {
                let existing = try await record(Self.collection, id: id)
                outcomes.append(existing.map { Self.sameContent(NoteFields(json: $0.fields), fields) ? .unchanged : .updated } ?? .created)
            }
            return (outcomes, StoreEffect())
        }
        let (outcomes, effect) = try await transaction { transaction -> [ImportOutcome] in
            var outcomes: [ImportOutcome] = []
            for (id, fields) in notes {
                // A note the schema refuses (checked before anything of it is written) is
                // reported and the others go on.
                do {
                    guard let row = try RecordRow.find(transaction.db, id: id) else {
                        try transaction.create(Self.collection, fields: fields.json, id: id)
                        outcomes.append(.created)
                        continue
                    }
                    guard row.collection == Self.collection else {
                        outcomes.append(.refused("the id belongs to a record of another collection"))
                        continue
                    }
                    guard !row.state.purging else {
                        outcomes.append(.refused("deleted on this device"))
                        continue
                    }
                    let current = NoteFields(json: CollectionSchema.notes.completed(row.localFields))
                    if Self.sameContent(current, fields) {
                        outcomes.append(.unchanged)
                    } else {
                        try transaction.update(Self.collection, id: id) { $0 = fields.json }
                        outcomes.append(.updated)
                    }
                } catch let error as NotedClientError where error.kind == .invalidInput {
                    outcomes.append(.refused(error.message))
                }
            }
            return outcomes
        }
        return (outcomes, effect)
    }

    static func sameContent(_ a: NoteFields, _ b: NoteFields) -> Bool {
        a.title == b.title && a.body == b.body && Set(a.tags) == Set(b.tags) && a.folder == b.folder && a.pinned == b.pinned && a.trashed == b.trashed
    }
}
