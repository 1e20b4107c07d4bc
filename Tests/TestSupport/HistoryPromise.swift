import Foundation

/// What the history policy (docs/protocol.md, "History") promises, stated over the whole
/// history as it was saved (never over what a thinning left): what the policy, the stores and
/// the simulation are held to. Written apart from `HistoryPolicy`, from the documented rules.
public struct HistoryPromise {
    public let days: Int

    public init(days: Int) {
        self.days = days
    }

    /// The ordinary revisions `saved` (every save ever made, ascending rev) that must be
    /// readable at `now`.
    public func ordinary(_ saved: [(rev: Int64, at: Date)], now: Date) -> Set<Int64> {
        guard days > 0 else { return Set(saved.map(\.rev)) }
        let period = Double(days) * 86400
        var promised = Set<Int64>()
        guard let newest = saved.last else { return [] }
        promised.insert(newest.rev)
        for (index, entry) in saved.enumerated() {
            let age = now.timeIntervalSince(entry.at)
            if age < 600 { promised.insert(entry.rev) }
            // The state before an editing session that is within the period.
            if index + 1 < saved.count {
                let next = saved[index + 1]
                if next.at.timeIntervalSince(entry.at) >= 3600 && now.timeIntervalSince(next.at) < period {
                    promised.insert(entry.rev)
                }
            }
        }
        // The newest save of each 10-minute stretch of the last day, hour of the last week, day of the period.
        for (length, maxAge) in [(600.0, 86400.0), (3600, 7 * 86400), (86400, period)] {
            var newestOf: [Int64: Int64] = [:]
            for entry in saved {
                newestOf[Int64((entry.at.timeIntervalSince1970 / length).rounded(.down))] = entry.rev
            }
            for entry in saved
            where newestOf[Int64((entry.at.timeIntervalSince1970 / length).rounded(.down))] == entry.rev {
                let age = now.timeIntervalSince(entry.at)
                if age < min(maxAge, period) { promised.insert(entry.rev) }
            }
        }
        return promised
    }

    /// The conflict revisions saved at `at` that must be readable at `now`: those of the period.
    public func conflict(at: Date, now: Date) -> Bool {
        days == 0 || now.timeIntervalSince(at) < Double(days) * 86400
    }
}
