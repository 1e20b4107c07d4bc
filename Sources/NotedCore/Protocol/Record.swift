#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A record as the server holds it and sends it.
public struct Record: Sendable, Hashable {
    public var collection: String
    public var id: String
    public var rev: Int64
    public var seq: Int64
    public var deleted: Bool
    public var fields: [String: JSONValue]
    public var createdAt: Date
    public var updatedAt: Date

    public init(collection: String, id: String, rev: Int64, seq: Int64, deleted: Bool, fields: [String: JSONValue], createdAt: Date, updatedAt: Date) {
        self.collection = collection
        self.id = id
        self.rev = rev
        self.seq = seq
        self.deleted = deleted
        self.fields = fields
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The wire form: `{"collection","id","rev","seq","deleted","fields","createdAt","updatedAt"}`.
    public var json: JSONValue {
        .object([
            "collection": .string(collection),
            "id": .string(id),
            "rev": .int(rev),
            "seq": .int(seq),
            "deleted": .bool(deleted),
            "fields": .object(deleted ? [:] : fields),
            "createdAt": .string(Timestamp.format(createdAt)),
            "updatedAt": .string(Timestamp.format(updatedAt)),
        ])
    }
}

/// RFC 3339 timestamps with milliseconds in UTC, as the protocol writes them.
public enum Timestamp {
    public static func format(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let fraction = millis - seconds * 1000
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        let (year, month, day) = civil(fromDays: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(fraction, 3))Z"
    }

    /// Gregorian date from days since 1970-01-01 (Howard Hinnant's algorithm).
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}
