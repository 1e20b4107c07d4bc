import GRDB

extension LocalStore {
    /// The notes matching `filter`, now and after every change to the database (local edits and
    /// synced ones alike): the way to drive a list view.
    ///
    /// ```swift
    /// for try await notes in store.observe(NoteFilter(tag: "work")) { render(notes) }
    /// ```
    public func observe(_ filter: NoteFilter = NoteFilter()) -> AsyncValueObservation<[Note]> {
        ValueObservation.tracking { db in try LocalStore.fetchList(db, filter) }
            .removeDuplicates()
            .values(in: writer)
    }
}
