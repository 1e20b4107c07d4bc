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

    public init(
        collection: String, id: String, rev: Int64, seq: Int64, deleted: Bool, fields: [String: JSONValue],
        createdAt: Date, updatedAt: Date
    ) {
        self.collection = collection
        self.id = id
        self.rev = rev
        self.seq = seq
        self.deleted = deleted
        self.fields = fields
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Reads the wire form. `collection`, `id` and `rev` are required; a missing `seq`,
    /// `deleted` or `fields` reads as 0, false and empty, a missing time as now.
    public init(json value: JSONValue) throws(ProtocolError) {
        guard let collection = value["collection"]?.stringValue, let id = value["id"]?.stringValue,
            let rev = value["rev"]?.intValue
        else {
            throw ProtocolError(.invalidMessage, "a record needs \"collection\", \"id\" and \"rev\"")
        }
        self.init(
            collection: collection, id: id, rev: rev, seq: value["seq"]?.intValue ?? 0,
            deleted: value["deleted"]?.boolValue ?? false,
            fields: value["fields"]?.objectValue ?? [:],
            createdAt: value["createdAt"]?.stringValue.flatMap(Timestamp.parseRFC3339) ?? Date(),
            updatedAt: value["updatedAt"]?.stringValue.flatMap(Timestamp.parseRFC3339) ?? Date())
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
        // A microsecond of slack: `Date` keeps a Double counted from 2001, so a whole
        // millisecond (as the stores keep time) can come back as a hair below it.
        let millis = Int64((date.timeIntervalSince1970 * 1000 + 0.001).rounded(.down))
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let fraction = millis - seconds * 1000
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        let (year, month, day) = civil(fromDays: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return
            "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(fraction, 3))Z"
    }

    /// Reads an RFC 3339 time (``parse(_:)``); the one reader of such times in the project.
    public static func parseRFC3339(_ text: String) -> Date? {
        parse(text)
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (RFC 3339, the form `format` writes
    /// and the forms other apps' exports use) without a formatter: creating an
    /// `ISO8601DateFormatter` per record dominated a 10,000-note initial sync, and a third of a
    /// 10,000-note import. Milliseconds are kept, further digits dropped; nil for anything
    /// else, including out-of-range fields.
    public static func parse(_ text: String) -> Date? {
        var utf8 = text.utf8[...]
        func number(_ width: Int) -> Int64? {
            guard utf8.count >= width else { return nil }
            var value: Int64 = 0
            for byte in utf8.prefix(width) {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            utf8 = utf8.dropFirst(width)
            return value
        }
        func expect(_ character: Character) -> Bool {
            guard utf8.first == character.asciiValue else { return false }
            utf8 = utf8.dropFirst()
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
            expect("T") || expect("t"), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
            let second = number(2)
        else { return nil }
        // Milliseconds, as the stores keep time; further digits are dropped.
        var millis: Int64 = 0
        if expect(".") {
            var digits = 0
            while let byte = utf8.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                if digits < 3 { millis = millis * 10 + Int64(byte - UInt8(ascii: "0")) }
                digits += 1
                utf8 = utf8.dropFirst()
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 3) { millis *= 10 }
        }
        var offset: Int64 = 0
        if !(expect("Z") || expect("z")) {
            let sign: Int64 = expect("+") ? 1 : expect("-") ? -1 : 0
            guard sign != 0, let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60
            else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        }
        guard utf8.isEmpty, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 61
        else { return nil }
        let seconds = days(fromCivil: year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds * 1000 + millis) / 1000)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a Gregorian date (Howard Hinnant's algorithm).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
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
