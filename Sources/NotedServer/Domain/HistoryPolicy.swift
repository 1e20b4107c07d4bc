import Foundation

/// Which revisions of a record the server keeps, by their age (docs/protocol.md, "History"):
/// a pure function of the revisions' times and `now`, so that it can be tested on a virtual
/// clock and every node decides alike.
///
/// - Every save is kept for ``window`` (10 minutes).
/// - Older ordinary revisions are thinned to the newest of each 10-minute stretch (UTC-aligned)
///   while younger than a day, of each hour while younger than a week, of each day while younger
///   than the retention period (``days``); older ones go.
/// - The state just before an editing session (a revision followed by a quiet spell of at least
///   ``quiet`` before the next one) is kept while that session is within the period.
/// - The newest ordinary revision (the record as it stands) is always kept.
/// - Conflict revisions are kept for the whole period.
/// - `days == 0` keeps everything.
///
/// What is kept never needs what was dropped: a revision that is the newest of its stretch at
/// one granularity is the newest of its finer stretch too, so each promise made at a later time
/// is about a revision every earlier thinning kept.
public struct HistoryPolicy: Sendable, Hashable {
    /// The retention period in days; 0 keeps every revision for ever.
    public var days: Int

    /// How long every save is kept.
    public static let window: TimeInterval = 10 * 60
    /// A gap between two saves at least this long starts a new editing session.
    public static let quiet: TimeInterval = 60 * 60
    static let day: TimeInterval = 24 * 60 * 60

    public init(days: Int) {
        self.days = max(0, days)
    }

    /// A revision's rev and time (the server's clock when it was saved).
    public struct Entry: Sendable, Hashable {
        public var rev: Int64
        public var at: Date
        public init(rev: Int64, at: Date) {
            self.rev = rev
            self.at = at
        }
    }

    var period: TimeInterval { TimeInterval(days) * Self.day }

    /// The length of the stretches a revision of age `age` is thinned to, or nil when it is
    /// beyond the period (or inside the window, where nothing is thinned: 0).
    func stretch(age: TimeInterval) -> TimeInterval? {
        if days == 0 || age < Self.window { return 0 }
        if age >= period { return nil }
        if age < Self.day { return 10 * 60 }
        if age < 7 * Self.day { return 60 * 60 }
        return Self.day
    }

    /// The ordinary revisions (`ordinary`, any order) to keep at `now`.
    public func keptOrdinary(_ ordinary: [Entry], now: Date) -> Set<Int64> {
        guard days > 0 else { return Set(ordinary.map(\.rev)) }
        let sorted = ordinary.sorted { $0.rev < $1.rev }
        var kept = Set<Int64>()
        // The newest revision in each stretch, by granularity: a revision is kept when no newer
        // one falls in its stretch.
        var newestInStretch: [StretchKey: Int64] = [:]
        for entry in sorted {
            for length: TimeInterval in [10 * 60, 60 * 60, Self.day] {
                newestInStretch[StretchKey(length: length, index: Self.index(entry.at, length))] = entry.rev
            }
        }
        for (position, entry) in sorted.enumerated() {
            let age = now.timeIntervalSince(entry.at)
            if position == sorted.count - 1 {
                kept.insert(entry.rev)  // the record as it stands
                continue
            }
            let next = sorted[position + 1]
            if next.at.timeIntervalSince(entry.at) >= Self.quiet && now.timeIntervalSince(next.at) < period {
                kept.insert(entry.rev)  // the state before an editing session
                continue
            }
            guard let length = stretch(age: age) else { continue }
            if length == 0
                || newestInStretch[StretchKey(length: length, index: Self.index(entry.at, length))] == entry.rev
            {
                kept.insert(entry.rev)
            }
        }
        return kept
    }

    /// The conflict revisions to keep at `now`: those younger than the period.
    public func keptConflicts(_ conflicts: [Entry], now: Date) -> Set<Int64> {
        Set(conflicts.filter { days == 0 || now.timeIntervalSince($0.at) < period }.map(\.rev))
    }

    /// The earliest time after `now` at which ``keptOrdinary(_:now:)`` or
    /// ``keptConflicts(_:now:)`` may decide differently for these revisions (an older one
    /// leaves the window, a day, a week or the period; a session's first save leaves the
    /// period); nil when never.
    ///
    /// The newest ordinary revision is always kept, so its own age decides nothing: it counts
    /// only as the save after the one before it (whose keeping as the state before a session
    /// ends when this save leaves the period). A lone revision without conflicts therefore
    /// never needs another review.
    public func nextChange(ordinary: [Entry], conflicts: [Entry], now: Date) -> Date? {
        guard days > 0 else { return nil }
        var earliest: Date?
        func consider(_ date: Date) {
            if date > now, earliest.map({ date < $0 }) ?? true { earliest = date }
        }
        let newest = ordinary.max { $0.rev < $1.rev }
        for entry in ordinary where entry.rev != newest?.rev {
            for offset in [Self.window, Self.day, 7 * Self.day, period] {
                consider(entry.at.addingTimeInterval(offset))
            }
        }
        if let newest, ordinary.count > 1 { consider(newest.at.addingTimeInterval(period)) }
        for entry in conflicts { consider(entry.at.addingTimeInterval(period)) }
        // Rounded up to whole 5 minutes: a burst of saves is reviewed once, not once per save
        // (a revision kept a little longer than needed is allowed).
        return earliest.map {
            Date(
                timeIntervalSince1970: ($0.timeIntervalSince1970 / Self.reviewGranularity).rounded(.up)
                    * Self.reviewGranularity)
        }
    }

    /// What ``nextChange(ordinary:conflicts:now:)`` rounds up to.
    static let reviewGranularity: TimeInterval = 5 * 60

    private struct StretchKey: Hashable {
        var length: TimeInterval
        var index: Int64
    }

    private static func index(_ date: Date, _ length: TimeInterval) -> Int64 {
        Int64((date.timeIntervalSince1970 / length).rounded(.down))
    }
}
