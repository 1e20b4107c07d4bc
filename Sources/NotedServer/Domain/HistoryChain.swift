import Foundation
import NotedCore

/// What one pass of ``NotedStore/thinHistory(now:policy:limit:)`` did.
public struct HistoryThinning: Sendable, Hashable {
    /// Records whose history was brought to the policy.
    public var records = 0
    /// Revisions deleted.
    public var deleted = 0
    /// Revisions stored anew (whole or as a delta).
    public var rewritten = 0
    /// Records left due because a save came while they were thinned.
    public var retried = 0
    /// Records whose history could not be read or rewritten (set aside for a day, so that the
    /// others go on): how many, and the last error.
    public var failed = 0
    public var lastFailure: String?
    public init() {}
}

/// One row of the revisions table as stored: whole fields, or (``delta`` set) the difference
/// from the next newer ordinary revision's fields.
struct StoredRevision: Sendable, Hashable {
    var rev: Int64
    var conflict: Bool
    var seq: Int64
    var updatedAt: Date
    var device: String?
    var ccid: String?
    /// The whole fields, or the delta's whole values (``RevisionDelta/values``).
    var fields: [String: JSONValue]
    var delta: RevisionDelta?
    /// Bytes of the revision's whole fields as JSON (what a client is told it weighs).
    var size: Int64
    /// False for a row read without its fields (``stub(rev:conflict:seq:updatedAt:device:ccid:whole:size:)``).
    var loaded = true

    /// A row whose fields were not read: its place, kind and storage only. A plan that needs its
    /// fields throws ``HistoryChain/Unloaded``.
    static func stub(
        rev: Int64, conflict: Bool, seq: Int64, updatedAt: Date, device: String?, ccid: String?,
        whole: Bool, size: Int64
    ) -> StoredRevision {
        StoredRevision(
            rev: rev, conflict: conflict, seq: seq, updatedAt: updatedAt, device: device, ccid: ccid,
            fields: [:], delta: whole ? nil : RevisionDelta(), size: size, loaded: false)
    }

    var entry: HistoryPolicy.Entry { HistoryPolicy.Entry(rev: rev, at: updatedAt) }

    func info(fields: [String: JSONValue]) -> RevisionInfo {
        RevisionInfo(
            rev: rev, seq: seq, updatedAt: updatedAt, device: device, ccid: ccid, conflict: conflict, fields: fields,
            size: size)
    }
}

/// The ordinary revisions of a record form a chain: the newest is stored whole, each older one
/// as a delta from its newer neighbour, with a whole one (an anchor) now and then so that
/// reading any revision applies a bounded number of deltas (``maxRun``). Conflict revisions are
/// always whole and outside the chain.
enum HistoryChain {
    /// At most this many deltas between two whole rows (anchors are counted from the oldest
    /// row, so that they do not move with every save). A delta is never
    /// larger than the text it replaces (``RevisionDelta/make(from:to:deadline:)``), so reading
    /// a revision costs at most this many patches of at most the note's size.
    static let maxRun = 100

    /// The fields of the oldest row of `rows` (ordinary rows of one record in ascending `rev`
    /// order, ending at a whole one: what a read of a revision fetches).
    static func materialize(_ rows: [StoredRevision]) throws -> [String: JSONValue] {
        guard let top = rows.last(where: { $0.delta == nil }) else {
            throw StoreError.corrupt("a revision chain has no whole revision above it")
        }
        guard let topIndex = rows.lastIndex(of: top) else { return top.fields }
        var fields = top.fields
        for row in rows[..<topIndex].reversed() {
            guard let delta = row.delta else {
                fields = row.fields
                continue
            }
            fields = try delta.apply(to: fields)
        }
        return fields
    }

    /// A plan needed the fields of a row read without them.
    struct Unloaded: Error {}

    /// What thinning and compacting a record's history writes.
    struct Rewrite: Sendable {
        /// Rows to delete.
        var deletes: [(rev: Int64, conflict: Bool)] = []
        /// Ordinary rows whose storage changes: whole fields (`delta` nil) or a new delta.
        var updates: [(rev: Int64, fields: [String: JSONValue], delta: RevisionDelta?)] = []
        /// When the policy may next decide differently (nil: never, unless a save comes).
        var nextReview: Date?

        var isEmpty: Bool { deletes.isEmpty && updates.isEmpty }
    }

    /// The rewrite that brings `rows` (every revision row of one record, any order) to what
    /// `policy` keeps at `now`, compacted: dropped rows deleted, the newest ordinary one whole,
    /// older kept ones as deltas from their newer kept neighbour, whole again every so often.
    /// Rows may be stubs (not ``StoredRevision/loaded``) where the plan needs no fields; it
    /// throws ``Unloaded`` if it needs those of one.
    static func plan(_ rows: [StoredRevision], policy: HistoryPolicy, now: Date, diffTimeout: Duration = .seconds(1))
        throws -> Rewrite
    {
        let ordinary = rows.filter { !$0.conflict }.sorted { $0.rev < $1.rev }
        let conflicts = rows.filter(\.conflict)
        var rewrite = Rewrite()
        let keptConflicts = policy.keptConflicts(conflicts.map(\.entry), now: now)
        for row in conflicts where !keptConflicts.contains(row.rev) { rewrite.deletes.append((row.rev, true)) }
        let kept = policy.keptOrdinary(ordinary.map(\.entry), now: now)

        // Whole fields on demand: from the nearest whole row above (at most ``maxRun`` deltas).
        var materialized: [Int64: [String: JSONValue]] = [:]
        let position = Dictionary(uniqueKeysWithValues: ordinary.enumerated().map { ($1.rev, $0) })
        func fields(of rev: Int64) throws -> [String: JSONValue] {
            if let known = materialized[rev] { return known }
            guard let start = position[rev] else { throw StoreError.corrupt("no revision \(rev)") }
            var index = start
            while ordinary[index].delta != nil, materialized[ordinary[index].rev] == nil {
                index += 1
                guard index < ordinary.count else {
                    throw StoreError.corrupt("the newest revision is stored as a delta")
                }
            }
            if materialized[ordinary[index].rev] == nil, !ordinary[index].loaded { throw Unloaded() }
            var current = materialized[ordinary[index].rev] ?? ordinary[index].fields
            materialized[ordinary[index].rev] = current
            while index > start {
                index -= 1
                guard ordinary[index].loaded else { throw Unloaded() }
                current = try ordinary[index].delta.map { try $0.apply(to: current) } ?? ordinary[index].fields
                materialized[ordinary[index].rev] = current
            }
            return current
        }

        // The stored row above each row before the rewrite, to know which deltas still hold.
        var storedAbove: [Int64: Int64] = [:]
        for (index, row) in ordinary.enumerated() where index + 1 < ordinary.count {
            storedAbove[row.rev] = ordinary[index + 1].rev
        }

        // Which kept rows are whole: the newest, and anchors chosen from the oldest end, so that
        // new saves at the top never move them: an existing whole row stays whole once at least
        // three quarters of ``maxRun`` rows separate it from the anchor below (a thinning that
        // shifts rows by a few does not move it); a new one is made when ``maxRun`` - 1 deltas
        // would otherwise follow each other. (Every previous newest row is whole until the next
        // pass; most become deltas then.)
        let keptRows = ordinary.filter { kept.contains($0.rev) }
        var whole = Set<Int64>()
        var sinceAnchor = 0
        for (index, row) in keptRows.enumerated() {
            if index == keptRows.count - 1 || (row.delta == nil && sinceAnchor >= 3 * maxRun / 4)
                || sinceAnchor + 1 >= maxRun
            {
                whole.insert(row.rev)
                sinceAnchor = 0
            } else {
                sinceAnchor += 1
            }
        }
        for (index, row) in keptRows.enumerated() {
            if whole.contains(row.rev) {
                if row.delta != nil { rewrite.updates.append((row.rev, try fields(of: row.rev), nil)) }
                continue
            }
            let newer = keptRows[index + 1]
            if row.delta == nil || storedAbove[row.rev] != newer.rev {
                let delta = RevisionDelta.make(
                    from: try fields(of: newer.rev), to: try fields(of: row.rev), deadline: .now + diffTimeout)
                rewrite.updates.append((row.rev, delta.values, delta))
            }
        }
        for row in ordinary where !kept.contains(row.rev) { rewrite.deletes.append((row.rev, false)) }
        let remaining = ordinary.filter { kept.contains($0.rev) }
        rewrite.nextReview = policy.nextChange(
            ordinary: remaining.map(\.entry),
            conflicts: conflicts.filter { keptConflicts.contains($0.rev) }.map(\.entry), now: now)
        return rewrite
    }
}

/// A record whose history is due: its user, collection and id.
typealias DueHistory = (userID: String, collection: String, id: String)

/// One record's pass, decided outside the write transaction: the rewrite, and the rows it was
/// decided from (each row's rev, kind and storage), which must still be as they were for it to
/// be written.
struct PlannedThinning: Sendable {
    var record: DueHistory
    var shape: [Int64]
    var rewrite: HistoryChain.Rewrite
    /// Whether the record had any revision rows (none: nothing to review again).
    var hadRows: Bool

    /// What a thinning checks is unchanged before it writes.
    /// Each row as one number, `rev * 4 + conflict * 2 + whole` (``SQLiteStore`` computes it in
    /// SQL: no row decoded in the writer).
    static func shape(_ rows: some Sequence<(rev: Int64, conflict: Bool, whole: Bool)>) -> [Int64] {
        rows.map { $0.rev * 4 + ($0.conflict ? 2 : 0) + ($0.whole ? 1 : 0) }
    }
}

extension HistoryThinning {
    /// The most revision bytes (their whole size) one batch reads and decides before writing:
    /// a bound on what a pass holds in memory.
    static let batchBytes: Int64 = 8 << 20

    /// Reads and decides each due record's pass outside the writer, then writes the decisions
    /// in batches of at most `batchRecords` records (and ``batchBytes``), one transaction each
    /// (issue 18: one fsync for a batch, where a transaction per record made the history
    /// service take the single writer hundreds of times a second under sustained editing).
    ///
    /// A record whose history cannot be read or decided (``StoreError``) is counted and set
    /// aside (`write`'s second argument), so that the others go on. `write` answers, for each
    /// planned pass, whether it was written (false: a save came meanwhile, the record stays due).
    ///
    /// `read(record, false)` gives every row whole; `read(record, true)` may give stubs for the
    /// rows a pass usually leaves alone (``StoredRevision/stub(rev:conflict:seq:updatedAt:device:ccid:whole:size:)``),
    /// and the record is read again whole if its plan needs one of them.
    static func batched(
        _ due: [DueHistory], batchRecords: Int, batchRows: Int = .max, policy: HistoryPolicy, now: Date,
        read: (DueHistory, _ partial: Bool) async throws -> [StoredRevision],
        write: (_ planned: [PlannedThinning], _ setAside: [DueHistory]) async throws -> [Bool]
    ) async throws -> HistoryThinning {
        var result = HistoryThinning()
        var planned: [PlannedThinning] = []
        var setAside: [DueHistory] = []
        var bytes: Int64 = 0
        var rows = 0
        func flush() async throws {
            guard !planned.isEmpty || !setAside.isEmpty else { return }
            let written = try await write(planned, setAside)
            for (pass, done) in zip(planned, written) {
                if done { result.count(pass.rewrite) } else { result.retried += 1 }
            }
            planned = []
            setAside = []
            bytes = 0
            rows = 0
        }
        for record in due {
            do {
                var stored = try await read(record, true)
                let rewrite: HistoryChain.Rewrite
                do {
                    rewrite = try HistoryChain.plan(stored, policy: policy, now: now)
                } catch is HistoryChain.Unloaded {
                    stored = try await read(record, false)
                    rewrite = try HistoryChain.plan(stored, policy: policy, now: now)
                }
                planned.append(
                    PlannedThinning(
                        record: record,
                        shape: PlannedThinning.shape(stored.map { ($0.rev, $0.conflict, $0.delta == nil) }),
                        rewrite: rewrite, hadRows: !stored.isEmpty))
                bytes += stored.reduce(0) { $0 + ($1.loaded ? $1.size : 0) }
                rows += rewrite.deletes.count + rewrite.updates.count
            } catch let error as StoreError {
                result.failed("\(record.userID)/\(record.collection)/\(record.id)", error)
                setAside.append(record)
            }
            if planned.count >= batchRecords || bytes >= batchBytes || rows >= batchRows { try await flush() }
        }
        try await flush()
        return result
    }
}

extension HistoryThinning {
    /// How long a record whose history failed is set aside.
    static let failedRetry: TimeInterval = 24 * 60 * 60

    mutating func failed(_ key: String, _ error: any Error) {
        failed += 1
        lastFailure = "\(key): \(error)"
    }

    /// Counts one record's pass.
    mutating func count(_ rewrite: HistoryChain.Rewrite) {
        records += 1
        deleted += rewrite.deletes.count
        rewritten += rewrite.updates.count
    }
}
