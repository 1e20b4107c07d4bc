import NotedCore

/// Follows a pull that is a full snapshot, so that records the server no longer has are
/// dropped at its end.
///
/// Two pulls are snapshots: `since: 0`, which returns every live record and no tombstones
/// (docs/protocol.md section 4), and one answered `reset: true`. Either way a record deleted on the
/// server does not appear in it, so a client that already holds records (received in `change`
/// broadcasts before its first pull found anything, say) must drop the synced ones that no page
/// of the snapshot named. While a snapshot is under way the stored cursor stays where the
/// snapshot started: a client that crashes halfway pulls the whole snapshot again, rather than
/// resuming after it and never dropping anything.
public struct SnapshotPull: Sendable {
    private var seen: Set<String>?
    private var startCursor: Int64 = 0

    public init() {}

    /// Takes one page of a pull made with `since`.
    /// - Returns: the cursor to store with the page, and, when the page ends a snapshot, the ids
    ///   it named (drop every synced record without local edits that is not among them).
    public mutating func page(records: [Record], since: Int64, cursor: Int64, more: Bool, reset: Bool) -> (storeCursor: Int64, keep: Set<String>?) {
        if since == 0 || reset {
            seen = []
            startCursor = since
        }
        guard var ids = seen else { return (cursor, nil) }
        ids.formUnion(records.map(\.id))
        if more {
            seen = ids
            return (startCursor, nil)
        }
        seen = nil
        return (cursor, ids)
    }
}
