import Foundation
import Logging
import NIOConcurrencyHelpers
import NotedCore
import PostgresNIO

/// Group commit for the PostgreSQL store (issue 18): the changes that arrive while a transaction
/// is in flight, from every connection and user of this node, go into the next transaction
/// together, which reads and writes them with a fixed number of set-based statements (about
/// seven round trips for the whole batch, where one change alone took about a dozen), and one
/// commit (one WAL flush) makes them all durable.
///
/// - Each change is answered only once the transaction holding it has committed, with its own
///   result (`applied_changes` keeps it, as for a change committed alone).
/// - The users' `seq` rows are locked in one statement, in `user_id` order (two nodes' batches
///   cannot deadlock), for as long as the transaction lasts: every push of one user still
///   serializes on every node.
/// - One user's changes keep their order. A batch holds a record, and a `ccid`, at most once:
///   a later change of the same record (or a resend of the same `ccid`) waits for the next
///   batch, and so does everything after it from the same user.
/// - The costly decisions (``PushAlgorithm/isCostly(_:current:)``: a merge, a diff of long
///   texts) are made outside every transaction: such a change leaves its batch (with the
///   user's later changes) with what the batch read, is decided on a task of its own while
///   other batches commit, and then joins a batch that uses the decision if nothing it was
///   made from has changed (``PushAlgorithm/run(_:context:reads:prepared:)``).
/// - A change refused by the algorithm (a reject, an account deleted) writes nothing and is
///   answered alone; the others of its batch go on. An error PostgreSQL reports for the batch
///   (a constraint, a deadlock) rolls it back, and its changes are tried again each in a
///   transaction of its own, so one change cannot fail the others; a connection lost or a
///   database that does not answer within ``PostgresStore/pushDeadline`` fails the batch.
actor PostgresGroupCommit {
    typealias Answer = @Sendable (Result<PushResult, any Error>) -> Void

    /// The most changes one transaction holds: a bound on its statements' size and on how long
    /// the first change of a batch waits for the others.
    static let maxBatch = 256
    /// The most batches committed at once, each on a connection of its own and with users no
    /// other one has: while one waits for PostgreSQL the next is read and written, and their
    /// commits share WAL flushes. One batch at a time would make every change wait for the
    /// round trips of the batch before its own.
    static let maxInFlight = 4
    /// The record bytes (the stored fields of the records its changes touch, or the changes'
    /// own size when larger) past which a batch takes no further change: what one statement
    /// carries stays bounded when the records are large (each up to the size limit).
    static let maxBatchBytes = 4 << 20

    /// A change waiting to be committed; it leaves ``waiting`` when answered.
    private final class Item {
        let number: UInt64
        let change: Change
        let context: PushContext
        let answer: Answer
        var prepared: PushAlgorithm.Prepared?
        /// Being decided outside the transactions: not eligible for a batch until it is.
        var preparing = false
        /// Its batch failed as a whole: it runs in a transaction of its own.
        var alone = false
        /// In a batch being committed.
        var inFlight = false
        /// Transactions of its own that PostgreSQL ended as a deadlock or serialization victim,
        /// and batches of it whose `BEGIN` failed.
        var retries = 0

        init(number: UInt64, change: Change, context: PushContext, answer: @escaping Answer) {
            self.number = number
            self.change = change
            self.context = context
            self.answer = answer
        }
    }

    private let client: PostgresClient
    private let algorithm: PushAlgorithm
    private let nodeID: String
    private let logger: Logger
    /// In arrival order.
    private var waiting: [Item] = []
    /// Batches being committed.
    private var inFlight = 0
    private var numbered: UInt64 = 0
    /// Transactions committed and the changes answered from them (tests, diagnostics).
    private(set) var committed: (transactions: Int, changes: Int) = (0, 0)

    init(client: PostgresClient, algorithm: PushAlgorithm, nodeID: String, logger: Logger) {
        self.client = client
        self.algorithm = algorithm
        self.nodeID = nodeID
        self.logger = logger
    }

    /// Commits `changes` in this order, after every change queued before them; returns their
    /// results once the transactions holding them have committed.
    func run(_ changes: [(change: Change, context: PushContext)]) async -> [Result<PushResult, any Error>] {
        guard !changes.isEmpty else { return [] }
        return await withCheckedContinuation { continuation in
            let gather = Gather(count: changes.count, continuation: continuation)
            for (index, (change, context)) in changes.enumerated() {
                numbered += 1
                waiting.append(Item(number: numbered, change: change, context: context) { gather.set(index, $0) })
            }
            kick()
        }
    }

    /// Starts batches while fewer than ``maxInFlight`` are running and changes are eligible.
    private func kick() {
        while inFlight < Self.maxInFlight, let batch = nextBatch() {
            inFlight += 1
            for item in batch { item.inFlight = true }
            let jobs = batch.map { Job(change: $0.change, context: $0.context, prepared: $0.prepared) }
            let (client, algorithm, nodeID, logger) = (self.client, self.algorithm, self.nodeID, self.logger)
            Task {
                let result: Result<[Outcome], any Error>
                do {
                    result = .success(
                        try await withDeadline(PostgresStore.pushDeadline, "PostgreSQL") {
                            try await client.withTransaction(logger: logger) { connection in
                                try await Self.commit(
                                    jobs, algorithm: algorithm, nodeID: nodeID, connection: connection, logger: logger)
                            }
                        })
                } catch {
                    result = .failure(error)
                }
                self.finished(batch, result)
            }
        }
    }

    private func finished(_ batch: [Item], _ result: Result<[Outcome], any Error>) {
        inFlight -= 1
        for item in batch { item.inFlight = false }
        switch result {
        case .failure(let error):
            if (error as? PostgresTransactionError)?.beginError != nil, batch.allSatisfy({ $0.retries < 3 }) {
                // `BEGIN` failed: nothing of the batch reached PostgreSQL, and the connection it
                // was leased is gone (ended by PostgreSQL while in the pool): tried again.
                logger.notice(
                    "a batch's transaction could not begin; trying again",
                    metadata: ["changes": "\(batch.count)", "error": .string(String(describing: error))])
                for item in batch { item.retries += 1 }
            } else if batch.count > 1, Self.sqlState(error) != nil {
                logger.notice(
                    "a batch of changes failed as a whole; trying each alone",
                    metadata: [
                        "changes": "\(batch.count)", "error": .string(String(describing: error)),
                    ])
                for item in batch { item.alone = true }
            } else if let item = batch.first, batch.count == 1, ["40P01", "40001"].contains(Self.sqlState(error)),
                item.retries < 3
            {
                // A deadlock or serialization victim (another transaction's locks, not the
                // change): tried again.
                item.retries += 1
            } else {
                answer(batch.map { ($0, Result<PushResult, any Error>.failure(error)) })
            }
        case .success(let outcomes):
            var answered: [(Item, Result<PushResult, any Error>)] = []
            committed.transactions += 1
            committed.changes += outcomes.count { if case .answered = $0 { true } else { false } }
            for (item, outcome) in zip(batch, outcomes) {
                switch outcome {
                case .answered(let result):
                    answered.append((item, result))
                case .deferred:
                    continue
                case .decideOutside(let reads):
                    item.preparing = true
                    prepare(item, reads: reads)
                }
            }
            answer(answered)
        }
        kick()
    }

    /// The next batch: the eligible changes in arrival order, each record and `ccid` once, a
    /// user's changes only up to the first of them that cannot join (one in a batch being
    /// committed, one being decided outside, a second change of a record): so no two batches in
    /// flight hold the same user, and each user's changes commit in their order.
    private func nextBatch() -> [Item]? {
        var batch: [Item] = []
        var closed = Set<String>()
        var records = Set<[String]>()
        var ccids = Set<[String]>()
        for item in waiting {
            let user = item.context.userID
            guard !closed.contains(user) else { continue }
            let record = [user, item.change.collection, item.change.id]
            let ccid = [user, item.change.ccid]
            if item.preparing || item.inFlight || records.contains(record) || ccids.contains(ccid)
                || (item.alone && !batch.isEmpty)
            {
                closed.insert(user)
                continue
            }
            batch.append(item)
            records.insert(record)
            ccids.insert(ccid)
            if item.alone || batch.count == Self.maxBatch { break }
        }
        return batch.isEmpty ? nil : batch
    }

    private func answer(_ results: [(Item, Result<PushResult, any Error>)]) {
        guard !results.isEmpty else { return }
        let done = Set(results.map { ObjectIdentifier($0.0) })
        waiting.removeAll { done.contains(ObjectIdentifier($0)) }
        for (item, result) in results { item.answer(result) }
    }

    /// Decides `item` on a task of its own, from what its batch read.
    private func prepare(_ item: Item, reads: PrefetchedPushReads) {
        let (algorithm, change, context, number) = (self.algorithm, item.change, item.context, item.number)
        Task.detached {
            var reads = reads
            let prepared = Result { try algorithm.prepare(change, context: context, reads: &reads) }
            await self.finishPreparing(number, prepared)
        }
    }

    private func finishPreparing(_ number: UInt64, _ prepared: Result<PushAlgorithm.Prepared, any Error>) {
        guard let item = waiting.first(where: { $0.number == number }) else { return }
        switch prepared {
        case .success(let decision):
            item.prepared = decision
            item.preparing = false
            kick()
        case .failure(let error):
            answer([(item, .failure(error))])
        }
    }

    /// The SQLSTATE of the error PostgreSQL reported for a batch (a change of it may be to
    /// blame); nil when the connection or the deadline failed it.
    private static func sqlState(_ error: any Error) -> String? {
        var error = error
        if let transaction = error as? PostgresTransactionError {
            guard let inner = transaction.closureError ?? transaction.commitError else { return nil }
            error = inner
        }
        return (error as? PSQLError)?.serverInfo?[.sqlState]
    }
}

extension PostgresGroupCommit {
    /// What one change of a batch carries into the transaction.
    struct Job: Sendable {
        let change: Change
        let context: PushContext
        let prepared: PushAlgorithm.Prepared?
    }

    /// What became of one change of a batch.
    enum Outcome: Sendable {
        /// Committed with the batch (or refused, writing nothing).
        case answered(Result<PushResult, any Error>)
        /// Left for a later batch: an earlier change of its user left this one, or the batch
        /// reached ``PostgresGroupCommit/maxBatchBytes``.
        case deferred
        /// Costly to decide: to be decided outside, from these reads.
        case decideOutside(PrefetchedPushReads)
    }

    /// Reads everything the batch's changes need (the users' `seq` rows locked), runs the
    /// algorithm over each in order, then writes what it decided for the whole batch
    /// (``BatchWrites/execute(users:connection:logger:)``).
    static func commit(
        _ jobs: [Job], algorithm: PushAlgorithm, nodeID: String, connection: PostgresConnection, logger: Logger
    ) async throws -> [Outcome] {
        var state = try await BatchReads.read(
            jobs, schemas: algorithm.processor.schemas, connection: connection, logger: logger)
        var outcomes: [Outcome] = []
        var writes = BatchWrites()
        var closed = Set<String>()
        var bytes = 0
        for (index, job) in jobs.enumerated() {
            let user = job.context.userID
            guard !closed.contains(user), bytes <= PostgresGroupCommit.maxBatchBytes else {
                // Past the byte bound every later change waits, so each user's order holds.
                outcomes.append(.deferred)
                continue
            }
            bytes += max(state.sizes[index] ?? 0, job.change.estimatedBytes)
            var reads = state.reads(for: index, of: job)
            if job.prepared == nil, reads.seq != nil, algorithm.isCostly(job.change, current: reads.record) {
                closed.insert(user)
                outcomes.append(.decideOutside(reads))
                continue
            }
            do {
                let (result, list) = try algorithm.run(
                    job.change, context: job.context, reads: &reads, prepared: job.prepared)
                for write in list {
                    state.apply(write, user: user)
                    writes.add(write, user: user, nodeID: nodeID)
                }
                outcomes.append(.answered(.success(result)))
            } catch {
                outcomes.append(.answered(.failure(error)))
            }
        }
        try await writes.execute(users: state, connection: connection, logger: logger)
        return outcomes
    }
}

/// What a batch's transaction read, by change (in the batch's order) and by user; the users'
/// `seq` and usage move as the algorithm decides each change.
struct BatchReads: Sendable {
    var seqs: [String: Int64] = [:]
    var usage: [String: StorageUsage] = [:]
    var applied: [Int: (bodyHash: String, reply: String)] = [:]
    var records: [Int: Record] = [:]
    var bases: [Int: (rev: Int64, fields: [String: JSONValue])] = [:]
    var blobs: [String: [String: Int64]] = [:]
    /// What each space's owner stores in their other spaces, by space.
    var elsewhere: [String: StorageUsage] = [:]
    /// The roles of the authors of changes to shared spaces, by [space, user].
    var roles: [[String]: SpaceRole] = [:]
    /// The stored size of each change's record (its fields' JSON), for the batch's byte bound.
    var sizes: [Int: Int] = [:]
    /// The users whose `seq` row a change of the batch wrote, in the order first written.
    var written: [String] = []

    func reads(for index: Int, of job: PostgresGroupCommit.Job) -> PrefetchedPushReads {
        let user = job.context.userID
        var reads = PrefetchedPushReads(seq: seqs[user])
        reads.stored = usage[user] ?? StorageUsage()
        reads.applied = applied[index]
        reads.record = records[index]
        reads.base = bases[index]
        reads.blobs = blobs[user] ?? [:]
        if let author = job.context.sharedAuthor { reads.authorRole = roles[[user, author]] }
        reads.elsewhere = elsewhere[user] ?? StorageUsage()
        return reads
    }

    mutating func apply(_ write: PushWrite, user: String) {
        switch write {
        case .setSeq(let seq):
            if !written.contains(user) { written.append(user) }
            seqs[user] = seq
        case .setUsage(let stored):
            usage[user] = stored
        default:
            break
        }
    }

    static func read(
        _ jobs: [PostgresGroupCommit.Job], schemas: SchemaRegistry, connection: PostgresConnection, logger: Logger
    ) async throws -> BatchReads {
        var state = BatchReads()
        let users = Array(Set(jobs.map(\.context.userID))).sorted()
        // Locked in one order on every node, so that two batches never wait for each other.
        for try await (user, seq, bytes, records, history) in try await connection.query(
            """
            SELECT user_id, seq, stored_bytes, stored_records, history_bytes FROM user_seq WHERE user_id = ANY(\(users)) ORDER BY user_id FOR UPDATE
            """, logger: logger
        ).decode((String, Int64, Int64, Int64, Int64).self) {
            state.seqs[user] = seq
            state.usage[user] = StorageUsage(bytes: bytes, records: records, history: history)
        }
        for try await (space, bytes, records, history) in try await connection.query(
            """
            SELECT v.id, SUM(q.stored_bytes)::bigint, SUM(q.stored_records)::bigint, SUM(q.history_bytes)::bigint
            FROM unnest(\(users)::text[]) AS v(id)
            JOIN spaces me ON me.id = v.id
            JOIN spaces s ON s.owner_id = me.owner_id AND s.id <> v.id
            JOIN user_seq q ON q.user_id = s.id
            GROUP BY v.id
            """, logger: logger
        ).decode((String, Int64, Int64, Int64).self) {
            state.elsewhere[space] = StorageUsage(bytes: bytes, records: records, history: history)
        }
        let shared = jobs.compactMap { job in job.context.sharedAuthor.map { [job.context.userID, $0] } }
        if !shared.isEmpty {
            // Held until the commit: a membership change (which updates or deletes the row)
            // waits for the push, and a push after it reads the new role.
            for try await (space, user, role) in try await connection.query(
                """
                SELECT m.space_id, m.user_id, m.role FROM space_members m
                JOIN unnest(\(shared.map { $0[0] })::text[], \(shared.map { $0[1] })::text[]) AS v(space_id, user_id)
                  ON m.space_id = v.space_id AND m.user_id = v.user_id
                FOR SHARE OF m
                """, logger: logger
            ).decode((String, String, String).self) {
                state.roles[[space, user]] = SpaceRole(rawValue: role)
            }
        }
        let jobUsers = jobs.map(\.context.userID)
        let ccids = jobs.map(\.change.ccid)
        for try await (index, hash, reply) in try await connection.query(
            """
            SELECT v.i, a.body_hash, a.reply
            FROM unnest(\(jobUsers)::text[], \(ccids)::text[]) WITH ORDINALITY AS v(user_id, ccid, i)
            JOIN applied_changes a ON a.user_id = v.user_id AND a.ccid = v.ccid
            """, logger: logger
        ).decode((Int64, String, String).self) {
            state.applied[Int(index) - 1] = (hash, reply)
        }
        try await readRecords(jobs, into: &state, connection: connection, logger: logger)
        var blobUsers: [String] = []
        var blobHashes: [String] = []
        for job in jobs {
            for hash in PushAlgorithm.namedAttachments(job.change, schema: schemas[job.change.collection]) {
                blobUsers.append(job.context.userID)
                blobHashes.append(hash)
            }
        }
        if !blobHashes.isEmpty {
            for try await (user, hash, size) in try await connection.query(
                """
                SELECT DISTINCT b.user_id, b.sha256, b.size FROM unnest(\(blobUsers)::text[], \(blobHashes)::text[]) AS v(user_id, sha256)
                JOIN blobs b ON b.user_id = v.user_id AND b.sha256 = v.sha256
                """, logger: logger
            ).decode((String, String, Int64).self) {
                state.blobs[user, default: [:]][hash] = size
            }
        }
        return state
    }

    /// The records the changes name, with the revision at each update's `baseRev` when it is not
    /// the current one (the merge's base).
    private static func readRecords(
        _ jobs: [PostgresGroupCommit.Job], into state: inout BatchReads, connection: PostgresConnection, logger: Logger
    ) async throws {
        let jobUsers = jobs.map(\.context.userID)
        let collections = jobs.map(\.change.collection)
        let ids = jobs.map(\.change.id)
        // The base revision only matters for an update made against an older revision.
        let baseRevs = jobs.map { $0.change.op == .upsert ? $0.change.baseRev : -1 }
        let rows = try await connection.query(
            """
            SELECT v.i, r.rev, r.seq, r.deleted, r.fields, r.created_at, r.updated_at, b.fields, b.delta
            FROM unnest(\(jobUsers)::text[], \(collections)::text[], \(ids)::text[], \(baseRevs)::bigint[])
                 WITH ORDINALITY AS v(user_id, collection, id, base_rev, i)
            JOIN records r ON r.user_id = v.user_id AND r.collection = v.collection AND r.id = v.id
            LEFT JOIN revisions b
              ON b.user_id = r.user_id AND b.collection = r.collection AND b.record_id = r.id
             AND b.rev = v.base_rev AND NOT b.conflict AND r.rev > v.base_rev
            """, logger: logger)
        var baseIsDelta: [Int] = []
        for try await (position, rev, seq, deleted, fields, created, updated, base, delta)
            in rows.decode((Int64, Int64, Int64, Bool, String, Int64, Int64, String?, String?).self)
        {
            let index = Int(position) - 1
            let change = jobs[index].change
            state.sizes[index] = fields.utf8.count
            state.records[index] = Record(
                collection: change.collection, id: change.id, rev: rev, seq: seq, deleted: deleted,
                fields: try FieldsCoding.decode(fields), createdAt: Date(millis: created),
                updatedAt: Date(millis: updated))
            if let base {
                if delta == nil {
                    state.bases[index] = (baseRevs[index], try FieldsCoding.decode(base))
                } else {
                    baseIsDelta.append(index)
                }
            }
        }
        for index in baseIsDelta {
            // Stored as a delta (the history is compacted): read its chain up to a whole revision.
            let change = jobs[index].change
            let chain = try await PostgresStore.revisionChain(
                connection, userID: jobUsers[index], collection: change.collection, id: change.id,
                rev: baseRevs[index], logger: logger)
            if !chain.isEmpty { state.bases[index] = (baseRevs[index], try HistoryChain.materialize(chain)) }
        }
    }
}

/// A batch's writes, gathered by kind: each kind is one statement over arrays (`unnest`). A
/// batch holds a record at most once, so running the kinds in the order the algorithm lists
/// them for one change (``PushAlgorithm/run(_:context:reads:prepared:)``) writes what running
/// each change's list in turn would.
struct BatchWrites {
    private var records: [(user: String, record: Record)] = []
    private var purged: [(user: String, collection: String, id: String)] = []
    private var revisions: [(user: String, collection: String, id: String, revision: RevisionInfo)] = []
    private var due: [(user: String, collection: String, id: String, at: Date)] = []
    private var pruned: [(user: String, collection: String, id: String, keeping: Int)] = []
    private var applied: [(user: String, ccid: String, bodyHash: String, reply: String, at: Date)] = []
    private var announced: [String] = []

    mutating func add(_ write: PushWrite, user: String, nodeID: String) {
        switch write {
        case .setSeq, .setUsage:
            break  // the users' rows are written once, from their final values
        case .upsertRecord(let record):
            records.append((user, record))
        case .deleteRevisions(let collection, let id):
            purged.append((user, collection, id))
        case .insertRevision(let collection, let id, let revision):
            revisions.append((user, collection, id, revision))
        case .historyDue(let collection, let id, let at):
            due.append((user, collection, id, at))
        case .pruneConflictRevisions(let collection, let id, let keeping):
            pruned.append((user, collection, id, keeping))
        case .recordApplied(let ccid, let bodyHash, let reply, let at):
            applied.append((user, ccid, bodyHash, reply, at))
        case .announce(let seq):
            announced.append("\(nodeID) \(user) \(seq)")
        }
    }

    /// Runs the batch's writes in the order the algorithm lists them for one change: one
    /// statement whose data-modifying `WITH` clauses write the users' rows, the records, the
    /// `ccid` results and (unless a purge must delete a record's history first) the revisions,
    /// each clause a different table so that none depends on another's effect; then a purge's
    /// deletions and its revisions; then the history work list; then the pruning of conflict
    /// revisions, which must see the revisions just inserted. A record's row is locked before
    /// its history's rows, as the history thinner locks them (the other order would deadlock).
    func execute(users state: BatchReads, connection: PostgresConnection, logger: Logger) async throws {
        guard !state.written.isEmpty else { return }
        // Its rows read to the end (``PostgresConnection/run(_:logger:)``): a `WITH` clause runs
        // to completion after the main query, so its error comes after the first row.
        try await connection.run(writeStatement(state, revisions: purged.isEmpty), logger: logger)
        if !purged.isEmpty {
            let (u, c, i) = (purged.map(\.user), purged.map(\.collection), purged.map(\.id))
            try await connection.query(
                """
                DELETE FROM revisions r USING unnest(\(u)::text[], \(c)::text[], \(i)::text[]) AS v(user_id, collection, id)
                WHERE r.user_id = v.user_id AND r.collection = v.collection AND r.record_id = v.id
                """, logger: logger)
            try await connection.query(
                """
                DELETE FROM history_due h USING unnest(\(u)::text[], \(c)::text[], \(i)::text[]) AS v(user_id, collection, id)
                WHERE h.user_id = v.user_id AND h.collection = v.collection AND h.record_id = v.id
                """, logger: logger)
            if !revisions.isEmpty {
                var sql = SQL()
                sql.text = insertRevisions(&sql)
                try await connection.query(PostgresQuery(unsafeSQL: sql.text, binds: sql.binds), logger: logger)
            }
        }
        if !due.isEmpty {
            try await connection.query(
                """
                INSERT INTO history_due (user_id, collection, record_id, due_at)
                SELECT * FROM unnest(\(due.map(\.user))::text[], \(due.map(\.collection))::text[], \(due.map(\.id))::text[],
                                     \(due.map(\.at.millis))::bigint[])
                ON CONFLICT (user_id, collection, record_id) DO UPDATE SET due_at = LEAST(history_due.due_at, excluded.due_at)
                """, logger: logger)
        }
        for prune in pruned {
            try await connection.query(
                """
                DELETE FROM revisions WHERE user_id = \(prune.user) AND collection = \(prune.collection) AND record_id = \(prune.id) AND conflict
                AND rev NOT IN (SELECT rev FROM revisions WHERE user_id = \(prune.user) AND collection = \(prune.collection) AND record_id = \(prune.id)
                                AND conflict ORDER BY rev DESC LIMIT \(prune.keeping))
                """, logger: logger)
        }
    }

    /// The users' rows, the records, the `ccid` results and (`revisions`) the revisions in one
    /// statement, ending with the commit notifications: delivered to every listening node when
    /// (and only if) the transaction commits, in the array's order.
    func writeStatement(_ state: BatchReads, revisions withRevisions: Bool) -> PostgresQuery {
        var sql = SQL()
        var clauses: [String] = []
        let users = state.written
        clauses.append(
            """
            seqs AS (UPDATE user_seq u SET seq = v.seq, stored_bytes = v.bytes, stored_records = v.records
                FROM unnest(\(sql.bind(users))::text[], \(sql.bind(users.map { state.seqs[$0] ?? 0 }))::bigint[],
                            \(sql.bind(users.map { state.usage[$0]?.bytes ?? 0 }))::bigint[],
                            \(sql.bind(users.map { state.usage[$0]?.records ?? 0 }))::bigint[]) AS v(user_id, seq, bytes, records)
                WHERE u.user_id = v.user_id)
            """)
        if !records.isEmpty {
            let all = records.map(\.record)
            clauses.append(
                """
                upserted AS (INSERT INTO records (user_id, collection, id, rev, seq, deleted, fields, created_at, updated_at)
                    SELECT * FROM unnest(\(sql.bind(records.map(\.user)))::text[], \(sql.bind(all.map(\.collection)))::text[],
                                         \(sql.bind(all.map(\.id)))::text[], \(sql.bind(all.map(\.rev)))::bigint[], \(sql.bind(all.map(\.seq)))::bigint[],
                                         \(sql.bind(all.map(\.deleted)))::bool[], \(sql.bind(all.map { FieldsCoding.encode($0.fields) }))::text[],
                                         \(sql.bind(all.map(\.createdAt.millis)))::bigint[], \(sql.bind(all.map(\.updatedAt.millis)))::bigint[])
                    ON CONFLICT (user_id, collection, id) DO UPDATE SET
                        rev = excluded.rev, seq = excluded.seq, deleted = excluded.deleted,
                        fields = excluded.fields, updated_at = excluded.updated_at)
                """)
        }
        if withRevisions, !revisions.isEmpty {
            clauses.append("revised AS (\(insertRevisions(&sql)))")
        }
        if !applied.isEmpty {
            clauses.append(
                """
                applied AS (INSERT INTO applied_changes (user_id, ccid, body_hash, reply, created_at)
                    SELECT * FROM unnest(\(sql.bind(applied.map(\.user)))::text[], \(sql.bind(applied.map(\.ccid)))::text[],
                                         \(sql.bind(applied.map(\.bodyHash)))::text[], \(sql.bind(applied.map(\.reply)))::text[],
                                         \(sql.bind(applied.map(\.at.millis)))::bigint[]))
                """)
        }
        let channel = sql.bind(PostgresStore.commitChannel)
        let payloads = sql.bind(announced)
        sql.text =
            "WITH " + clauses.joined(separator: ",\n")
            + "\nSELECT pg_notify(\(channel), p) FROM unnest(\(payloads)::text[]) AS t(p)"
        return PostgresQuery(unsafeSQL: sql.text, binds: sql.binds)
    }

    /// The revisions' `INSERT`, its values bound in `sql`.
    func insertRevisions(_ sql: inout SQL) -> String {
        let all = revisions.map(\.revision)
        let fields = all.map { FieldsCoding.encode($0.fields) }
        // PostgresNIO binds no arrays with NULL elements: a flag says which device and ccid are absent.
        return """
            INSERT INTO revisions (user_id, collection, record_id, rev, conflict, seq, fields, device, ccid, updated_at, size, author)
            SELECT user_id, collection, record_id, rev, conflict, seq, fields,
                   CASE WHEN has_device THEN device END, CASE WHEN has_ccid THEN ccid END, updated_at, size,
                   CASE WHEN has_author THEN author END
            FROM unnest(\(sql.bind(revisions.map(\.user)))::text[], \(sql.bind(revisions.map(\.collection)))::text[],
                        \(sql.bind(revisions.map(\.id)))::text[], \(sql.bind(all.map(\.rev)))::bigint[], \(sql.bind(all.map(\.conflict)))::bool[],
                        \(sql.bind(all.map(\.seq)))::bigint[], \(sql.bind(fields))::text[],
                        \(sql.bind(all.map { $0.device ?? "" }))::text[], \(sql.bind(all.map { $0.device != nil }))::bool[],
                        \(sql.bind(all.map { $0.ccid ?? "" }))::text[], \(sql.bind(all.map { $0.ccid != nil }))::bool[],
                        \(sql.bind(all.map(\.updatedAt.millis)))::bigint[], \(sql.bind(fields.map { Int64($0.utf8.count) }))::bigint[],
                        \(sql.bind(all.map { $0.author ?? "" }))::text[], \(sql.bind(all.map { $0.author != nil }))::bool[])
                 AS v(user_id, collection, record_id, rev, conflict, seq, fields, device, has_device, ccid, has_ccid, updated_at, size,
                      author, has_author)
            """
    }

    /// A statement's text and its values, bound as `$1`, `$2`, … in the order bound.
    struct SQL {
        var text = ""
        var binds = PostgresBindings()

        mutating func bind<Value: PostgresDynamicTypeEncodable>(_ value: Value) -> String {
            binds.append(value)
            return "$\(binds.count)"
        }
    }
}

/// The results of one push message, gathered as its changes are answered (in any order); the
/// message's caller resumes with all of them once the last is in.
private final class Gather: Sendable {
    private let state: NIOLockedValueBox<(results: [Result<PushResult, any Error>?], remaining: Int)>
    private let continuation: CheckedContinuation<[Result<PushResult, any Error>], Never>

    init(count: Int, continuation: CheckedContinuation<[Result<PushResult, any Error>], Never>) {
        state = NIOLockedValueBox((Array(repeating: nil, count: count), count))
        self.continuation = continuation
    }

    func set(_ index: Int, _ result: Result<PushResult, any Error>) {
        let complete: [Result<PushResult, any Error>]? = state.withLockedValue { state in
            state.results[index] = result
            state.remaining -= 1
            return state.remaining == 0 ? state.results.map { $0! } : nil
        }
        if let complete { continuation.resume(returning: complete) }
    }
}

extension PostgresConnection {
    /// Runs a statement whose rows are not wanted, reading them to the end: an error PostgreSQL
    /// meets after its first row (a lock it could not take, a `WITH` clause failing) comes with
    /// the rows, and unread it would be lost (a transaction then commits as a silent rollback).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

extension PostgresClient {
    /// ``PostgresConnection/run(_:logger:)`` on a connection of the pool.
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}
