import Foundation

/// What one import may spend, whatever the archive claims: memory (the unpacked files, the parsed
/// trees and what the importers build from them, counted as they are made), time (a deadline,
/// checked in every loop over files, items and nodes), and how many skipped items it reports
/// (the rest are counted, not kept). Cancellable from another thread: the server cancels an
/// import whose request went away. docs/security.md lists the server's and the CLI's values.
public final class ImportBudget: @unchecked Sendable {
    /// Bytes of memory the import may hold.
    public let memoryBytes: Int
    /// When the import must have ended, or nil for no deadline.
    public let deadline: ContinuousClock.Instant?
    private let seconds: Double?
    /// Skipped items reported one by one; beyond, only their number.
    public let maxSkipped: Int

    private let lock = NSLock()
    private var used = 0
    private var cancelled = false

    public init(memoryBytes: Int = .max, seconds: Double? = nil, maxSkipped: Int = 1000) {
        self.memoryBytes = memoryBytes
        self.deadline = seconds.map { ContinuousClock.now + .milliseconds(Int64(($0 * 1000).rounded())) }
        self.seconds = seconds
        self.maxSkipped = maxSkipped
    }

    /// No bound but a thousand reported skips: a person's own machine importing their own file.
    public static var unbounded: ImportBudget { ImportBudget() }

    /// Bytes charged so far.
    public var usedBytes: Int { lock.withLock { used } }

    /// Stops the import at its next check.
    public func cancel() { lock.withLock { cancelled = true } }

    /// Counts `bytes` more of memory; throws when that is more than the budget, or when the
    /// import is past its deadline or cancelled.
    public func charge(_ bytes: Int, origin: String) throws(ImportError) {
        let over = lock.withLock { () -> Bool in
            used += max(0, bytes)
            return used > memoryBytes
        }
        if over { throw Self.overMemory(origin, memoryBytes) }
        try check(origin: origin)
    }

    /// Hands back memory charged for something no longer held.
    public func refund(_ bytes: Int) {
        lock.withLock { used = max(0, used - max(0, bytes)) }
    }

    /// Bytes the budget has left (for a parse that charges as it goes).
    public var remainingBytes: Int { lock.withLock { max(0, memoryBytes - used) } }

    /// Throws when the import is cancelled or past its deadline.
    public func check(origin: String) throws(ImportError) {
        if lock.withLock({ cancelled }) { throw ImportError(origin, "the import was cancelled") }
        if let deadline, ContinuousClock.now > deadline {
            throw ImportError(
                origin, "reading the export took longer than the \(Int(seconds ?? 0)) seconds an import may take")
        }
    }

    static func overMemory(_ origin: String, _ limit: Int) -> ImportError {
        ImportError(origin, "reading it needs more than the \(limit / (1024 * 1024)) MiB of memory an import may use")
    }
}

/// The things an import skips, kept up to a bound and counted beyond it.
public struct SkippedList: Sendable {
    public private(set) var items: [Importer.Skipped] = []
    /// Every skip, kept or not.
    public private(set) var count = 0
    public let limit: Int

    public init(limit: Int = 1000) {
        self.limit = limit
    }

    public mutating func append(_ item: Importer.Skipped) {
        count += 1
        if items.count < limit { items.append(item) }
    }

    /// Counts `more` skips that were not listed (another list's overflow).
    public mutating func countUnlisted(_ more: Int) {
        count += max(0, more)
    }
}
