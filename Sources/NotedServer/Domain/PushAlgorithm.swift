import Foundation
import NotedCore

/// What a push transaction reads, in the order the push algorithm asks for it. Each backend
/// answers with its own SQL inside its own transaction; that is the whole difference between
/// them.
protocol PushReads {
    /// The user's `seq`, locked until the transaction ends (every push of one user serializes
    /// on it, on every node).
    mutating func lockedSeq() throws -> Int64
    /// The stored result of this change's `ccid`, if it was applied before.
    mutating func appliedResult() throws -> (bodyHash: String, reply: String)?
    /// The record as it stands.
    mutating func current() throws -> Record?
    /// The record's fields at revision `rev` (not a conflict revision), if still held.
    mutating func baseFields(rev: Int64) throws -> [String: JSONValue]?
    /// What the user stores (``StorageQuota``), from the row locked by ``lockedSeq()``.
    mutating func usage() throws -> StorageUsage
    /// What the space's owner stores in their other spaces: a user's quota counts every space
    /// they own (docs/security.md, "Storage per account"). Not locked: pushes to several spaces
    /// of one owner at once (on PostgreSQL, in one batch) each count the others' usage as it
    /// was before them, and may overshoot by what they add together.
    mutating func ownerElsewhere() throws -> StorageUsage
    /// The sizes of the user's stored (complete) blobs among `hashes`; absent ones are left out.
    mutating func blobSizes(_ hashes: Set<String>) throws -> [String: Int64]
    /// The role of `user` in the space (the transaction's), held until it ends so that a
    /// membership change waits for the push; nil for a non-member.
    mutating func role(of user: String) throws -> SpaceRole?
}

/// One statement of a push transaction, in the algorithm's terms; each backend writes it in
/// its SQL dialect.
enum PushWrite: Sendable, Hashable {
    case setSeq(Int64)
    case setUsage(StorageUsage)
    case upsertRecord(Record)
    /// A purge: the record's whole history goes.
    case deleteRevisions(collection: String, id: String)
    case insertRevision(collection: String, id: String, RevisionInfo)
    /// The record's history is to be compacted and thinned (``HistoryPolicy``) by `at` at the
    /// latest: the history service's work list.
    case historyDue(collection: String, id: String, at: Date)
    /// Conflict revisions beyond the newest `keeping` go (one account making conflicts on
    /// purpose must not grow the history without bound).
    case pruneConflictRevisions(collection: String, id: String, keeping: Int)
    case recordApplied(ccid: String, bodyHash: String, reply: String, at: Date)
    /// Tell every node (PostgreSQL `NOTIFY`, delivered on commit); a single node has nothing to do.
    case announce(seq: Int64)
}

/// The push algorithm, written once for every backend: read what the change needs, decide
/// (``ChangeProcessor``), and list the writes that make the decision durable, in order.
///
/// Both backends read inside their write transaction and decide there when that is cheap. A
/// costly change (``isCostly(_:current:)``: the merge and the broadcast diff of long texts, a
/// whole-text change to a note of 200,000 characters) is decided outside it, from reads outside
/// (``prepare(_:context:reads:)``), so that no writer, connection or row lock is held while it
/// computes, and one user's heavy pushes do not stall every other user's acknowledgements
/// (docs/security.md): SQLite, with one writer for everyone, has the change leave its group's
/// transaction without writing (``DecideOutside``), decides it on a reader and queues it again;
/// PostgreSQL ends that transaction, decides from what it read, and runs a second one. The
/// second transaction uses that decision when the record and the `ccid` result are as they
/// were read, and decides again, inside, when another push changed them meanwhile.
struct PushAlgorithm: Sendable {
    let processor: ChangeProcessor

    /// A decision made from reads outside the write transaction, and what it was made from.
    struct Prepared: Sendable {
        let applied: Bool
        let currentRev: Int64?
        let currentSeq: Int64?
        let decision: ChangeProcessor.Decision
    }

    /// How soon after a save its record's history is compacted (the save before it stored as a
    /// delta): soon enough that a burst of saves never holds many whole copies (about 20 at two
    /// saves a second), late enough that a note being typed in is compacted once for many saves.
    /// A pass reads every row's place in the record's history, so its cost grows with the
    /// history: at 3 s, 1,000 notes typed in took 17 % of the server's CPU in passes
    /// (docs/benchmarks.md, "History passes: fewer, and lighter").
    static let compactionDelay: TimeInterval = 10

    /// Text bytes (the change's and the stored ones of the fields it touches) beyond which
    /// deciding a change counts as costly (``isCostly(_:current:)``).
    static let costlyTextBytes = 32 * 1024

    /// Whether deciding `change` against `current` may take long: a merge against an older
    /// revision, or diffs of long texts (the revision and the broadcast delta). PostgreSQL,
    /// which reads inside its transaction, then decides outside it (``prepare(_:context:reads:)``)
    /// and runs the transaction again, so that no database connection or row lock is held while
    /// it computes.
    func isCostly(_ change: Change, current: Record?) -> Bool {
        if ChangeProcessor.needsBase(change, current: current) { return true }
        var bytes = 0
        for (name, op) in change.fields {
            switch op {
            case .textSet(let text), .textDelta(let text):
                bytes += text.utf8.count + (current?.fields[name]?.stringValue?.utf8.count ?? 0)
            case .setReplace, .setAddRemove, .scalarSet:
                continue
            }
        }
        return bytes > Self.costlyTextBytes
    }

    /// Characters a change's texts may change by (a delta's inserted and deleted ones, a
    /// whole-text set's old and new text) for ``isCheapForWriter(_:current:)``.
    static let writerChangedTextBytes = 2 * 1024

    /// Whether deciding `change` against `current` costs about what its reads and writes do, so
    /// that a backend with one writer for everyone (SQLite) decides it inside its write
    /// transaction: not costly (``isCostly(_:current:)``), and its texts change by at most
    /// ``writerChangedTextBytes``. The second bound is for the diff behind the broadcast, which
    /// is of the changed region: two unrelated texts of 16 KiB each are not costly by the
    /// first, but their diff may run to its 1 s timeout, and the writer would wait for it.
    func isCheapForWriter(_ change: Change, current: Record?) -> Bool {
        guard !isCostly(change, current: current) else { return false }
        var changed = 0
        for (name, op) in change.fields {
            switch op {
            case .textSet(let text):
                changed += text.utf8.count + (current?.fields[name]?.stringValue?.utf8.count ?? 0)
            case .textDelta(let delta):
                guard let count = Self.changedCharacters(delta) else { return false }
                changed += count
            case .setReplace, .setAddRemove, .scalarSet:
                continue
            }
        }
        return changed <= Self.writerChangedTextBytes
    }

    /// The characters a diff-match-patch delta inserts and deletes (its `+` texts as sent,
    /// percent-encoded: at least as many as they decode to; its `-` counts); nil when it is not
    /// a delta (deciding it outside rejects it with the reason).
    static func changedCharacters(_ delta: String) -> Int? {
        var count = 0
        for token in delta.utf8.split(separator: UInt8(ascii: "\t"), omittingEmptySubsequences: false) {
            guard let first = token.first else { continue }
            switch first {
            case UInt8(ascii: "+"):
                count += token.count - 1
            case UInt8(ascii: "-"):
                guard let deleted = Int(Substring(token.dropFirst())), deleted >= 0 else { return nil }
                count += deleted
            case UInt8(ascii: "="):
                continue
            default:
                return nil
            }
        }
        return count
    }

    /// Why a member in `role` may not write to a shared space: a non-member learns nothing
    /// (`not_found`, as for a space that does not exist), a viewer reads only.
    static func roleRefusal(_ role: SpaceRole?) -> ProtocolError? {
        switch role {
        case nil: ProtocolError(.notFound, "no such space")
        case .viewer?: ProtocolError(.readOnly, "a viewer of this space cannot change its records")
        default: nil
        }
    }

    /// Decides from reads made outside the write transaction (`lockedSeq` is not asked).
    func prepare(_ change: Change, context: PushContext, reads: inout some PushReads) throws -> Prepared {
        let applied = try reads.appliedResult()
        let current = try reads.current()
        let baseFields =
            ChangeProcessor.needsBase(change, current: current) ? try reads.baseFields(rev: change.baseRev) : nil
        let inputs = ChangeProcessor.Inputs(applied: applied, current: current, baseFields: baseFields)
        return Prepared(
            applied: applied != nil, currentRev: current?.rev, currentSeq: current?.seq,
            decision: processor.decide(change, inputs: inputs, context: context))
    }

    /// Thrown by ``run(_:context:reads:prepared:mayDecide:)`` when the change is to be decided
    /// outside the transaction: nothing was written.
    struct DecideOutside: Error {}

    /// Runs the algorithm over one transaction's reads, with the decision `prepared` outside it
    /// when nothing it was made from has changed.
    /// - Parameter mayDecide: asked, with the record as read, before deciding inside the
    ///   transaction; false throws ``DecideOutside`` (nil: always decide).
    /// - Returns: the answer, and the statements to execute before committing (none when the
    ///   answer is a reject or a duplicate).
    func run(
        _ change: Change, context: PushContext, reads: inout some PushReads, prepared: Prepared? = nil,
        mayDecide: ((Record?) -> Bool)? = nil
    ) throws -> (result: PushResult, writes: [PushWrite]) {
        // A shared space's membership first: a space that does not exist (no `seq` row) is a
        // non-member's `not_found`, not a deleted account.
        if let author = context.sharedAuthor, let refusal = Self.roleRefusal(try reads.role(of: author)) {
            let identity = ChangeIdentity(ccid: change.ccid, collection: change.collection, id: change.id)
            return (
                PushResult(reply: .reject(Reject(refusal, identity: identity)), broadcast: nil, committedSeq: nil), []
            )
        }
        let seq = try reads.lockedSeq()
        let applied = try reads.appliedResult()
        let current = try reads.current()
        let decision: ChangeProcessor.Decision
        if let prepared, prepared.applied == (applied != nil), prepared.currentRev == current?.rev,
            prepared.currentSeq == current?.seq
        {
            decision = prepared.decision
        } else {
            if let mayDecide, !mayDecide(current) { throw DecideOutside() }
            let baseFields =
                ChangeProcessor.needsBase(change, current: current) ? try reads.baseFields(rev: change.baseRev) : nil
            let inputs = ChangeProcessor.Inputs(applied: applied, current: current, baseFields: baseFields)
            decision = processor.decide(change, inputs: inputs, context: context)
        }
        switch decision {
        case .reply(let reply):
            return (PushResult(reply: reply, broadcast: nil, committedSeq: nil), [])
        case .write(let plan):
            let next = seq + 1
            let written = plan.assigning(seq: next)
            let record = written.record
            if let refusal = try blobRefusal(record: record, current: current, reads: &reads) {
                let identity = ChangeIdentity(ccid: change.ccid, collection: change.collection, id: change.id)
                return (
                    PushResult(reply: .reject(Reject(refusal, identity: identity)), broadcast: nil, committedSeq: nil),
                    []
                )
            }
            let usage = try reads.usage()
            let before = StorageUsage.of(current)
            let now = StorageUsage.of(record)
            let after = StorageUsage(
                bytes: usage.bytes - before.bytes + now.bytes, records: usage.records - before.records + now.records,
                history: usage.history)
            let elsewhere = processor.quota == .unlimited ? StorageUsage() : try reads.ownerElsewhere()
            if let refusal = processor.quota.refusal(from: usage + elsewhere, to: after + elsewhere) {
                let identity = ChangeIdentity(ccid: change.ccid, collection: change.collection, id: change.id)
                return (
                    PushResult(reply: .reject(Reject(refusal, identity: identity)), broadcast: nil, committedSeq: nil),
                    []
                )
            }
            var writes: [PushWrite] = [.setSeq(next), .upsertRecord(record)]
            if after != usage { writes.append(.setUsage(after)) }
            if plan.purgeHistory {
                writes.append(.deleteRevisions(collection: record.collection, id: record.id))
            }
            for revision in written.revisions {
                writes.append(.insertRevision(collection: record.collection, id: record.id, revision))
            }
            // A new record's first save is its whole history, with nothing to compact or thin
            // (``HistoryPolicy/nextChange(ordinary:conflicts:now:)`` is nil for it): not due,
            // so that an import of 10,000 notes leaves the history service nothing to do.
            let firstSave = current == nil && written.revisions.count == 1 && !written.revisions[0].conflict
            if !written.revisions.isEmpty && !firstSave {
                writes.append(
                    .historyDue(
                        collection: record.collection, id: record.id,
                        at: context.now.addingTimeInterval(Self.compactionDelay)))
            }
            if written.revisions.contains(where: \.conflict) {
                writes.append(
                    .pruneConflictRevisions(
                        collection: record.collection, id: record.id, keeping: processor.conflictRevisionsKept))
            }
            writes.append(
                .recordApplied(
                    ccid: change.ccid, bodyHash: context.bodyHash,
                    reply: ServerMessage.ack(written.reply).json.jsonString, at: context.now))
            writes.append(.announce(seq: next))
            return (PushResult(reply: .ack(written.reply), broadcast: written.broadcast, committedSeq: next), writes)
        }
    }
}

extension PushAlgorithm {
    /// The attachments `record` holds that `current` did not (what a change adds, merged or
    /// not), in the fields of its schema that hold attachments.
    static func addedAttachments(record: Record, current: Record?, schema: CollectionSchema?) -> [AttachmentReference] {
        guard let schema, !record.deleted else { return [] }
        var added: [AttachmentReference] = []
        for (name, spec) in schema.fields where spec.attachments {
            let before = Set(
                current.flatMap { $0.deleted ? nil : $0.fields[name]?.arrayValue }?.compactMap(\.stringValue) ?? [])
            for element in record.fields[name]?.arrayValue ?? [] {
                guard let text = element.stringValue, !before.contains(text),
                    let reference = AttachmentReference(element: text)
                else { continue }
                added.append(reference)
            }
        }
        return added
    }

    /// The attachment hashes a change's ops name (every element of an attachments field's
    /// `set` or `add`): what a backend that reads before deciding fetches for ``blobRefusal``.
    static func namedAttachments(_ change: Change, schema: CollectionSchema?) -> Set<String> {
        guard let schema else { return [] }
        var hashes = Set<String>()
        for (name, op) in change.fields where schema.fields[name]?.attachments == true {
            let elements: [String]
            switch op {
            case .setReplace(let values): elements = values
            case .setAddRemove(let add, _): elements = add
            default: elements = []
            }
            for element in elements {
                if let reference = AttachmentReference(element: element) { hashes.insert(reference.sha256) }
            }
        }
        return hashes
    }

    /// Why `record` may not be written: it adds an attachment whose blob the user has not
    /// stored (`missing_blob`: upload it and send the change again), or names a stored blob
    /// with another size (`invalid_field`).
    func blobRefusal(record: Record, current: Record?, reads: inout some PushReads) throws -> ProtocolError? {
        let added = Self.addedAttachments(
            record: record, current: current, schema: processor.schemas[record.collection])
        guard !added.isEmpty else { return nil }
        let sizes = try reads.blobSizes(Set(added.map(\.sha256)))
        for reference in added {
            guard let size = sizes[reference.sha256] else {
                return ProtocolError(
                    .missingBlob,
                    "the attachment \(reference.sha256) (\(reference.name)) is not on the server: upload it with PUT /v1/blobs/\(reference.sha256), then send the change again"
                )
            }
            guard size == reference.size else {
                return ProtocolError(
                    .invalidField,
                    "the attachment \(reference.sha256) (\(reference.name)) is \(size) bytes, not \(reference.size)")
            }
        }
        return nil
    }
}

/// Reads a PostgreSQL transaction made before the algorithm ran (PostgresNIO is asynchronous,
/// the algorithm is not): the locked `seq`, the `ccid` result, the record and, when the
/// change is an update, the revision at its `baseRev`.
struct PrefetchedPushReads: PushReads {
    /// Nil when the user has no `seq` row: the account was deleted.
    var seq: Int64?
    var stored = StorageUsage()
    var applied: (bodyHash: String, reply: String)?
    var record: Record?
    var base: (rev: Int64, fields: [String: JSONValue])?
    /// The sizes of the stored blobs the change names (``PushAlgorithm/namedAttachments(_:schema:)``).
    var blobs: [String: Int64] = [:]

    func lockedSeq() throws -> Int64 {
        guard let seq else { throw AccountDeleted() }
        return seq
    }
    func appliedResult() -> (bodyHash: String, reply: String)? { applied }
    func current() -> Record? { record }
    func baseFields(rev: Int64) -> [String: JSONValue]? { base?.rev == rev ? base?.fields : nil }
    func usage() -> StorageUsage { stored }
    /// What the space's owner stores elsewhere, read with the batch.
    var elsewhere = StorageUsage()
    func ownerElsewhere() -> StorageUsage { elsewhere }
    func blobSizes(_ hashes: Set<String>) -> [String: Int64] { blobs.filter { hashes.contains($0.key) } }
    /// The author's role, read (and held `FOR SHARE`) with the batch.
    var authorRole: SpaceRole?
    func role(of user: String) -> SpaceRole? { authorRole }
}
