import Foundation
import NotedCore

/// The paging rules of a pull, shared by the backends.
///
/// A page reads records with `lowerBound < seq <= upperBound`, where `upperBound` is the user's
/// seq read first: a change commits its record and the seq together, so every record at or
/// below that seq is visible. When `since` is older than the purged tombstones, the answer is
/// a reset: a page with no records, `reset: true`, `more: true` and cursor 0, so that the
/// client pulls on from 0 and those pages, paged like any pull, are the snapshot
/// (docs/protocol.md). (It used to hold every live record up to the purge point in one page,
/// however many: a page of unbounded size.)
///
/// A snapshot (a pull from 0) continued from a cursor below the purge point must not be answered
/// with a reset, which sends the client back to 0 for ever (an account with more than a page of
/// notes and one tombstone swept found no end to its first sync). A client says a pull starts
/// or continues a snapshot (`snapshot: true`): then no reset. Every page stays bounded: a
/// first page reaching to the purge point for clients that do not say it was tried and left
/// out, since any account could make it as large as everything it stores.
struct ChangesQuery {
    var since: Int64
    var limit: Int
    var latest: Int64
    var purgedSeq: Int64
    /// The client says this pull starts or continues a snapshot: no reset.
    var snapshot = false

    var reset: Bool { since > 0 && since < purgedSeq && !snapshot }
    var lowerBound: Int64 { since }
    var upperBound: Int64 { latest }
    var includeTombstones: Bool { since != 0 }
    /// A reset reads no records.
    var fetchLimit: Int { reset ? 0 : limit + 1 }

    /// A page holds at most `limit` records and about `maxPageBytes` of them (at least one),
    /// so that a page of large notes cannot be a message of hundreds of megabytes
    /// (docs/protocol.md section 4: "the server also bounds a page's size").
    static let maxPageBytes = 4 << 20

    func page(from records: [Record]) -> ChangesPage {
        if reset {
            return ChangesPage(records: [], cursor: 0, more: true, reset: true)
        }
        var count = 0
        var bytes = 0
        while count < min(records.count, limit) {
            bytes += records[count].fields.approximateSize + 200
            if count > 0 && bytes > Self.maxPageBytes { break }
            count += 1
        }
        if records.count > count {
            let page = Array(records.prefix(count))
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

extension Dictionary where Key == String, Value == JSONValue {
    /// About the bytes of the fields as JSON (strings by their UTF-8 length): cheap enough to
    /// bound every page with.
    var approximateSize: Int {
        reduce(2) { $0 + $1.key.utf8.count + 4 + $1.value.approximateSize }
    }
}

extension JSONValue {
    var approximateSize: Int {
        switch self {
        case .null, .bool: 5
        case .int, .double: 20
        case .string(let text): text.utf8.count + 2
        case .array(let values): values.reduce(2) { $0 + $1.approximateSize + 1 }
        case .object(let object): object.approximateSize
        }
    }
}
