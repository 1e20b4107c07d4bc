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
    /// The space of the snapshot under way (nil: the personal space).
    private var space: String?
    /// Records applied from `change` broadcasts that no stored page has covered yet, with the
    /// `seq` of their change.
    private var broadcast: [String: Int64] = [:]

    public init() {}

    /// A `change` broadcast was applied. The server may answer a pull from what it read before
    /// that change committed, and send the page after the broadcast (another connection's push
    /// committed in between): a snapshot ending at a cursor before the broadcast's `seq` does
    /// not name the record, and must not drop it (seen in `randomConcurrentEditsConverge`: the
    /// note was dropped, its id buried, and the next edit found no note).
    public mutating func broadcastApplied(id: String, seq: Int64?) {
        broadcast[id] = max(broadcast[id] ?? 0, seq ?? .max)
    }

    /// Takes one page of a pull made with `since`.
    /// - Returns: the cursor to store with the page, and, when the page ends a snapshot, the ids
    ///   it named (drop every synced record without local edits that is not among them).
    /// - Parameter space: the space the pull is of (protocol 2; nil: the personal space). A
    ///   snapshot of one space left unfinished (the connection lost) is not continued by another's.
    public mutating func page(
        records: [Record], since: Int64, cursor: Int64, more: Bool, reset: Bool, space: String? = nil
    ) -> (storeCursor: Int64, keep: Set<String>?) {
        if space != self.space {
            seen = nil
            self.space = space
        }
        if since == 0 || reset {
            seen = []
            startCursor = since
        }
        // Broadcasts a page's cursor covers are in that page or older than it.
        defer { broadcast = broadcast.filter { $0.value > cursor } }
        guard var ids = seen else { return (cursor, nil) }
        ids.formUnion(records.map(\.id))
        if more {
            seen = ids
            return (startCursor, nil)
        }
        seen = nil
        // Changed after the snapshot was read: newer than it, not purged.
        ids.formUnion(broadcast.filter { $0.value > cursor }.keys)
        return (cursor, ids)
    }
}
