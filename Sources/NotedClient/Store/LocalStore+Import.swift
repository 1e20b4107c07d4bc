import Foundation
import GRDB
import NotedCore

/// What an import did to one note.
public enum ImportOutcome: Sendable, Hashable {
    /// A new note.
    case created
    /// The note existed with other content: its fields are now the imported ones (only when
    /// asked to replace).
    case updated
    /// The note existed with other content and was left as it is: the imported one was added
    /// beside it as a new note, under this id.
    case copied(String)
    /// The note existed with the same content: nothing written.
    case unchanged
    /// Not written, and why: beyond a limit of the schema, deleted on this device, or the id
    /// of another kind of record.
    case refused(String)
}

extension LocalStore {
    /// Writes imported notes under the ids given: created when new, left alone when equal (tags
    /// compared without order). A note of that id with other content is kept as it is and the
    /// imported one is added beside it under `copyID` (once: nothing when that copy exists), so
    /// that an export from someone else cannot overwrite a note whose id it knows; with
    /// `replace`, its fields become the imported ones instead (docs/import-export.md). Each batch is one local
    /// transaction, so a note is written whole or not at all and a failure leaves the notes of
    /// earlier batches in place (importing again goes on from there). With `dryRun`, only reads.
    ///
    /// `files` holds the attachments' files by SHA-256: those a created or updated note names
    /// are stored with it, pending upload (``attach(_:data:name:type:now:)``).
    public func importNotes(
        _ notes: [(id: String, fields: NoteFields, copyID: String)], files: [String: (data: Data, type: String)] = [:],
        replace: Bool = false, dryRun: Bool = false
    ) async throws -> (outcomes: [ImportOutcome], effect: StoreEffect) {
        if dryRun {
            // The same decisions as below, from reads only.
            let outcomes = try await writer.read { db in
                try notes.map { note in try Self.importOutcome(db, note: note, replace: replace) ?? .created }
            }
            return (outcomes, StoreEffect())
        }
        let (outcomes, effect) = try await transaction { transaction -> [ImportOutcome] in
            var outcomes: [ImportOutcome] = []
            for note in notes {
                let (id, fields) = (note.id, note.fields)
                // A note the schema refuses (checked before anything of it is written) is
                // reported and the others go on.
                do {
                    switch try Self.importOutcome(transaction.db, note: note, replace: replace) {
                    case nil:
                        try transaction.create(Self.collection, fields: fields.json, id: id)
                        try Self.keepFiles(transaction.db, of: fields, files: files, now: transaction.now)
                        outcomes.append(.created)
                    case .copied(let copy):
                        try transaction.create(Self.collection, fields: fields.json, id: copy)
                        try Self.keepFiles(transaction.db, of: fields, files: files, now: transaction.now)
                        outcomes.append(.copied(copy))
                    case .updated:
                        try transaction.update(Self.collection, id: id) { $0 = fields.json }
                        try Self.keepFiles(transaction.db, of: fields, files: files, now: transaction.now)
                        outcomes.append(.updated)
                    case let outcome?:
                        outcomes.append(outcome)
                    }
                } catch let error as NotedClientError where error.kind == .invalidInput {
                    outcomes.append(.refused(error.message))
                }
            }
            return outcomes
        }
        return (outcomes, effect)
    }

    /// What importing `note` would do: nil to create it under its id. A note deleted on this
    /// device (purging, or gone with its tombstone kept) is refused: creating it again would
    /// bring back what the person deleted, as a copy. One with other content is updated with
    /// `replace`, else copied under `copyID` unless that copy is there already (edited or not:
    /// it is the person's own note now) or was deleted here.
    static func importOutcome(
        _ db: Database, note: (id: String, fields: NoteFields, copyID: String), replace: Bool
    ) throws -> ImportOutcome? {
        switch try existing(db, id: note.id, fields: note.fields) {
        case .updated? where !replace:
            switch try existing(db, id: note.copyID, fields: note.fields) {
            case nil: return .copied(note.copyID)
            case .refused(let reason)?: return .refused(reason)
            default: return .unchanged
            }
        case let outcome: return outcome
        }
    }

    /// What this device holds under `id`, against `fields`: nil (nothing), `.unchanged` (the
    /// same content), `.updated` (other content) or `.refused` (deleted here, or not a note).
    private static func existing(_ db: Database, id: String, fields: NoteFields) throws -> ImportOutcome? {
        guard let row = try RecordRow.find(db, id: id) else {
            let buried =
                try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM tombstone WHERE id = ?)", arguments: [id])
                ?? false
            return buried ? .refused("deleted on this device") : nil
        }
        guard row.collection == Self.collection else {
            return .refused("the id belongs to a record of another collection")
        }
        guard !row.state.purging else { return .refused("deleted on this device") }
        return sameContent(NoteFields(json: CollectionSchema.notes.completed(row.localFields)), fields)
            ? .unchanged : .updated
    }

    static func sameContent(_ a: NoteFields, _ b: NoteFields) -> Bool {
        a.sameContent(as: b) && a.pinned == b.pinned && a.trashed == b.trashed && sameDate(a.created, b.created)
            && sameDate(a.modified, b.modified)
            && Set(a.attachments) == Set(b.attachments)
    }

    /// Stores the files `fields` names that `files` holds and this device lacks, pending upload.
    static func keepFiles(_ db: Database, of fields: NoteFields, files: [String: (data: Data, type: String)], now: Date)
        throws
    {
        for reference in fields.attachmentReferences {
            guard let file = files[reference.sha256] else { continue }
            try db.execute(
                sql: """
                    INSERT INTO blob (sha256, size, type, data, pending, usedAt) VALUES (?, ?, ?, ?, 1, ?)
                    ON CONFLICT (sha256) DO NOTHING
                    """,
                arguments: [
                    reference.sha256, Int64(file.data.count), file.type, file.data,
                    Int64(now.timeIntervalSince1970 * 1000),
                ])
        }
    }

    /// Dates as the fields hold them, to the millisecond.
    private static func sameDate(_ a: Date?, _ b: Date?) -> Bool {
        NoteFields.millis(a) == NoteFields.millis(b)
    }
}
