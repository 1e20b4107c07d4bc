import Foundation
import NotedCore
import Testing

/// `Timestamp.parse` reads what `Timestamp.format` writes, exactly, and nothing malformed.
@Suite struct TimestampTests {
    @Test func parsesWhatFormatWritesToTheMillisecond() throws {
        let seed = ProcessInfo.processInfo.environment["NOTED_TEST_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
        var generator = SeededGenerator(seed: seed)
        // From 1601 to 2400, whole milliseconds, plus the edges of days, months and leap years.
        var samples: [Int64] = [0, -1, 951_782_400_000, 951_868_799_999, 4_107_542_400_000, -11_644_473_600_000]
        for _ in 0..<20_000 {
            samples.append(Int64.random(in: -11_644_473_600_000...13_569_465_600_000, using: &generator))
        }
        for millis in samples {
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            let text = Timestamp.format(date)
            let parsed = try #require(Timestamp.parse(text), "seed \(seed): \(text)")
            // `Date` keeps a Double counted from 2001, so an exact `==` is not to be had: the date
            // must be within a microsecond and the text must survive.
            #expect(abs(parsed.timeIntervalSince1970 - date.timeIntervalSince1970) < 0.000001, "seed \(seed): \(text)")
            #expect(Timestamp.format(parsed) == text, "seed \(seed)")
        }
    }

    @Test func agreesWithISO8601DateFormatter() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for text in ["2026-11-22T10:41:07.123Z", "2000-02-29T23:59:59.999Z", "1970-01-01T00:00:00.000Z", "2024-12-31T00:00:00.5Z"] {
            let expected = try #require(formatter.date(from: text))
            #expect(Timestamp.parse(text)?.timeIntervalSince1970 == expected.timeIntervalSince1970, "\(text)")
        }
        #expect(Timestamp.parse("2026-11-22T10:41:07Z") == formatter.date(from: "2026-11-22T10:41:07.000Z"))
        #expect(Timestamp.parse("2026-11-22T10:41:07.1234567Z") == Timestamp.parse("2026-11-22T10:41:07.123Z"))
    }

    @Test(arguments: [
        "", "2026-11-22", "2026-11-22T10:41:07", "2026-11-22T10:41:07.Z", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z", "2026-00-10T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T10:60:00Z", "2026-11-22T10:41:07+01:00",
        "2026-11-22 10:41:07Z", "２026-11-22T10:41:07Z", "2026-11-22T10:41:07.123Zjunk", "-026-11-22T10:41:07Z", "2026-1-22T10:41:07Z",
    ])
    func refusesWhatItDoesNotWrite(text: String) {
        #expect(Timestamp.parse(text) == nil)
    }
}

/// SplitMix64: a small seeded generator.
private struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
