import GRDB
import NIOConcurrencyHelpers

/// Group commit for the SQLite store (issue 18): pushes that arrive while a commit is in flight
/// wait for the next transaction and go into it together, in the order they arrived, so that
/// one fsync makes many changes durable. Each change is still answered only once the
/// transaction holding it has committed (`synchronous=FULL`: on disk).
///
/// A push refused by the algorithm (`ProtocolError`, an account deleted) wrote nothing and is
/// answered alone; the others of its batch go on. A database error rolls the whole transaction
/// back: one a statement of a single push may have caused (a constraint) has each push of the
/// batch tried again alone, so that one cannot fail the others; one of the database as a whole
/// (a full disk) is every push's answer: none of them was stored.
actor SQLiteGroupCommit {
    /// One push's work inside the shared write transaction: its writes, and its answer.
    typealias Work = @Sendable (Database) throws -> PushResult
    typealias Answer = @Sendable (Result<PushResult, any Error>) -> Void

    /// The most pushes one transaction holds: a bound on how long the first of them waits.
    static let maxBatch = 128

    private let pool: DatabasePool
    private var waiting: [(work: Work, answer: Answer)] = []
    private var committing = false

    init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Runs each of `works`, in this order and after every push queued before, in the next
    /// transactions (one, unless more than ``maxBatch`` are waiting); returns their results
    /// once the transactions holding them have committed.
    func run(_ works: [Work]) async -> [Result<PushResult, any Error>] {
        guard !works.isEmpty else { return [] }
        return await withCheckedContinuation { continuation in
            let results = NIOLockedValueBox([Result<PushResult, any Error>?](repeating: nil, count: works.count))
            let remaining = NIOLockedValueBox(works.count)
            for (index, work) in works.enumerated() {
                waiting.append(
                    (
                        work,
                        { result in
                            results.withLockedValue { $0[index] = result }
                            if remaining.withLockedValue({
                                $0 -= 1
                                return $0
                            }) == 0 {
                                continuation.resume(returning: results.withLockedValue { $0.map { $0! } })
                            }
                        }
                    ))
            }
            if !committing {
                committing = true
                Task { await drain() }
            }
        }
    }

    private func drain() async {
        while !waiting.isEmpty {
            let batch = Array(waiting.prefix(Self.maxBatch))
            waiting.removeFirst(batch.count)
            do {
                let outcomes = try await commit(batch)
                for (job, outcome) in zip(batch, outcomes) { job.answer(outcome) }
            } catch let error as DatabaseError where batch.count > 1 && Self.mayBeOneChanges(error) {
                // One change may be to blame (a statement refused): each is tried again alone,
                // in order, so that it cannot fail the others.
                for job in batch {
                    do {
                        job.answer(try await commit([job])[0])
                    } catch {
                        job.answer(.failure(error))
                    }
                }
            } catch {
                for job in batch { job.answer(.failure(error)) }
            }
        }
        committing = false
    }

    /// Runs `batch` in one transaction; throws when the transaction as a whole fails.
    private func commit(_ batch: [(work: Work, answer: Answer)]) async throws -> [Result<PushResult, any Error>] {
        try await pool.write { db in
            try batch.map { job -> Result<PushResult, any Error> in
                do {
                    return .success(try job.work(db))
                } catch let error as DatabaseError {
                    // The transaction as a whole fails: nothing of the batch is kept.
                    throw error
                } catch {
                    // Refused before writing anything: answered alone.
                    return .failure(error)
                }
            }
        }
    }

    /// Whether a statement of one change may have caused `error` (a constraint, a trigger, a
    /// value too big), rather than the database as a whole (a full disk, an I/O error, a
    /// damaged file), which would fail every change alike.
    private static func mayBeOneChanges(_ error: DatabaseError) -> Bool {
        ![
            .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_READONLY, .SQLITE_NOMEM,
            .SQLITE_CANTOPEN, .SQLITE_BUSY,
        ]
        .contains(error.resultCode)
    }
}
