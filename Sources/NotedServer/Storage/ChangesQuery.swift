import Foundation
import NotedCore

/// The paging rules of a pull, shared by the backends.
///
/// A page reads records with `lowerBound < seq <= upperBound`, where `upperBound` is the user's
/// seq read first: a change commits its record and the seq together, so every record at or
/// below that seq is visible. When `since` is older than the purged tombstones, the page is a
/// reset: every live record up to the purge point in one page (it may exceed `limit`), and the
/// cursor moves past the purge point so the next pull pages normally.
struct ChangesQuery {
    var since: Int64
    var limit: Int
    var latest: Int64
    var purgedSeq: Int64

    var reset: Bool { since > 0 && since < purgedSeq }
    var lowerBound: Int64 { reset ? 0 : since }
    var upperBound: Int64 { reset ? purgedSeq : latest }
    var includeTombstones: Bool { !(reset || since == 0) }
    var fetchLimit: Int { reset ? Int(Int32.max) : limit + 1 }

    func page(from records: [Record]) -> ChangesPage {
        if reset {
            return ChangesPage(records: records, cursor: purgedSeq, more: latest > purgedSeq, reset: true)
        }
        if records.count > limit {
            let page = Array(records.prefix(limit))
            return ChangesPage(records: page, cursor: page.last?.seq ?? since, more: true, reset: false)
        }
        return ChangesPage(records: records, cursor: max(since, latest), more: false, reset: false)
    }
}

extension Date {
    /// Milliseconds since 1970, as the stores keep time.
    var millis: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }

    init(millis: Int64) {
        self.init(timeIntervalSince1970: Double(millis) / 1000)
    }
}
