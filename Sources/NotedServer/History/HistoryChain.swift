import Foundation
import NotedCore

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

    var entry: HistoryPolicy.Entry { HistoryPolicy.Entry(rev: rev, at: updatedAt) }

    func info(fields: [String: JSONValue]) -> RevisionInfo {
        RevisionInfo(rev: rev, seq: seq, updatedAt: updatedAt, device: device, ccid: ccid, conflict: conflict, fields: fields, size: size)
    }
}

/// The ordinary revisions of a record form a chain: the newest is stored whole, each older one
/// as a delta from its newer neighbour, with a whole one (an anchor) now and then so that
/// reading any revision applies a bounded number of deltas (``maxRun``). Conflict revisions are
/// always whole and outside the chain.
enum HistoryChain {
    /// At most this many deltas between two whole rows (a whole row that has at least half as
    /// many below it stays whole, so that anchors do not move with every save). A delta is never
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
            guard let delta = row.delta else { fields = row.fields; continue }
            fields = try delta.apply(to: fields)
        }
        return fields
    }

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
    static func plan(_ rows: [StoredRevision], policy: HistoryPolicy, now: Date, deadline: ContinuousClock.Instant? = nil) throws -> Rewrite {
        let ordinary = rows.filter { !$0.conflict }.sorted { $0.rev < $1.rev }
        let conflicts = rows.filter(\.conflict)
        var rewrite = Rewrite()
        let keptConflicts = policy.keptConflicts(conflicts.map(\.entry), now: now)
        for row in conflicts where !keptConflicts.contains(row.rev) { rewrite.deletes.append((row.rev, true)) }
        let kept = policy.keptOrdinary(ordinary.map(\.entry), now: now)

        // Whole fields on demand: from the nearest whole row above (at most ``maxRun`` deltas).
        var whole: [Int64: [String: JSONValue]] = [:]
        let position = Dictionary(uniqueKeysWithValues: ordinary.enumerated().map { ($1.rev, $0) })
        func fields(of rev: Int64) throws -> [String: JSONValue] {
            if let known = whole[rev] { return known }
            guard let start = position[rev] else { throw StoreError.corrupt("no revision \(rev)") }
            var index = start
            while ordinary[index].delta != nil, whole[ordinary[index].rev] == nil {
                index += 1
                guard index < ordinary.count else { throw StoreError.corrupt("the newest revision is stored as a delta") }
            }
            var current = whole[ordinary[index].rev] ?? ordinary[index].fields
            whole[ordinary[index].rev] = current
            while index > start {
                index -= 1
                current = try ordinary[index].delta.map { try $0.apply(to: current) } ?? ordinary[index].fields
                whole[ordinary[index].rev] = current
            }
            return current
        }

        // The stored row above each row before the rewrite, to know which deltas still hold.
        var storedAbove: [Int64: Int64] = [:]
        for (index, row) in ordinary.enumerated() where index + 1 < ordinary.count { storedAbove[row.rev] = ordinary[index + 1].rev }

        let keptRows = ordinary.filter { kept.contains($0.rev) }.reversed()
        var newerKept: StoredRevision?
        var run = 0 // deltas since the last whole row above
        for row in keptRows {
            defer { newerKept = row }
            guard let newer = newerKept else {
                // The newest: whole.
                if row.delta != nil { rewrite.updates.append((row.rev, try fields(of: row.rev), nil)) }
                run = 0
                continue
            }
            if row.delta == nil && run >= maxRun / 2 {
                // An anchor that has earned its place stays whole (anchors do not move with every save).
                run = 0
                continue
            }
            if run + 1 >= maxRun {
                if row.delta != nil { rewrite.updates.append((row.rev, try fields(of: row.rev), nil)) }
                run = 0
                continue
            }
            if row.delta == nil || storedAbove[row.rev] != newer.rev {
                let delta = RevisionDelta.make(from: try fields(of: newer.rev), to: try fields(of: row.rev), deadline: deadline)
                rewrite.updates.append((row.rev, delta.values, delta))
            }
            run += 1
        }
        for row in ordinary where !kept.contains(row.rev) { rewrite.deletes.append((row.rev, false)) }
        let remaining = ordinary.filter { kept.contains($0.rev) }
        rewrite.nextReview = policy.nextChange(ordinary: remaining.map(\.entry),
                                               conflicts: conflicts.filter { keptConflicts.contains($0.rev) }.map(\.entry), now: now)
        return rewrite
    }
}

extension HistoryThinning {
    /// Counts one record's pass: written, or left due because a save came meanwhile.
    mutating func count(_ rewrite: HistoryChain.Rewrite, written: Bool) {
        guard written else {
            retried += 1
            return
        }
        records += 1
        deleted += rewrite.deletes.count
        rewritten += rewrite.updates.count
    }
}
