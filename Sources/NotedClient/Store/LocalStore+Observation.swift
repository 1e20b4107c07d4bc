import GRDB
import NotedCore

extension LocalStore {
    /// The notes matching `filter`, now and after every change to the database (local edits and
    /// synced ones alike): the way to drive a list view.
    ///
    /// ```swift
    /// for try await notes in store.observe(NoteFilter(tag: "work")) { render(notes) }
    /// ```
    public func observe(_ filter: NoteFilter = NoteFilter()) -> AsyncValueObservation<[Note]> {
        let query = Self.notesQuery(filter)
        let schema = CollectionSchema.notes
        return ValueObservation.tracking { db in try Self.fetch(db, Self.collection, schema: schema, query).map(\.note)
        }
        .removeDuplicates()
        .values(in: writer)
    }

    /// The records of `collection` matching `query`, now and after every change.
    public func observe(_ collection: String, matching query: RecordQuery = RecordQuery()) throws
        -> AsyncValueObservation<[StoredRecord]>
    {
        let schema = try declared(collection)
        return ValueObservation.tracking { db in try Self.fetch(db, collection, schema: schema, query) }
            .removeDuplicates()
            .values(in: writer)
    }
}
