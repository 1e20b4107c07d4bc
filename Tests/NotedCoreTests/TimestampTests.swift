import Foundation
import NotedCore
import Testing

/// `Timestamp.parse` reads what `Timestamp.format` writes, exactly, RFC 3339's offsets too, and
/// nothing malformed.
@Suite struct TimestampTests {
    @Test func parsesWhatFormatWritesToTheMillisecond() throws {
        let seed =
            ProcessInfo.processInfo.environment["NOTED_TEST_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 0...UInt64.max)
        var generator = SplitMix64(seed: seed)
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
        // RFC 3339's offsets too (other apps' exports write them).
        for text in [
            "2026-11-22T10:41:07.123Z", "2000-02-29T23:59:59.999Z", "1970-01-01T00:00:00.000Z",
            "2024-12-31T00:00:00.5Z",
            "2026-11-22T10:41:07.123+01:00", "2026-11-22T00:10:00.000-05:30", "2000-03-01T00:00:00.000+14:00",
            "1969-12-31T23:59:59.999-00:00",
        ] {
            let expected = try #require(formatter.date(from: text))
            #expect(Timestamp.parse(text)?.timeIntervalSince1970 == expected.timeIntervalSince1970, "\(text)")
        }
        #expect(Timestamp.parse("2026-11-22T10:41:07Z") == formatter.date(from: "2026-11-22T10:41:07.000Z"))
        #expect(Timestamp.parse("2026-11-22T10:41:07.1234567Z") == Timestamp.parse("2026-11-22T10:41:07.123Z"))
    }

    @Test(arguments: [
        "", "2026-11-22", "2026-11-22T10:41:07", "2026-11-22T10:41:07.Z", "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z", "2026-00-10T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T10:60:00Z",
        "2026-11-22T10:41:07+0100",
        "2026-11-22T10:41:07+01", "2026-11-22T10:41:07+24:00", "2026-11-22T10:41:07*01:00",
        "2026-11-22T10:41:07+01:00junk",
        "2026-11-22 10:41:07Z", "２026-11-22T10:41:07Z", "2026-11-22T10:41:07.123Zjunk", "-026-11-22T10:41:07Z",
        "2026-1-22T10:41:07Z",
    ])
    func refusesWhatItDoesNotWrite(text: String) {
        #expect(Timestamp.parse(text) == nil)
    }
}

/// The JSON parser against Foundation's `JSONDecoder` (which `JSONValue` used before): the same
/// value for every document both accept, and an error for every document `JSONDecoder` refuses.
/// Random documents from NOTED_TEST_SEED (printed on failure), plus hand-picked edge cases.
@Suite struct JSONParserTests {
    static func foundation(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    @Test(arguments: [
        "0", "-0", "1.0", "1e2", "-1.5E-3", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "1e400", "\"\\ud83d\\ude00\"", "\"\\u00e9\\n\\t\\/\"", "\"\\ud83d\"", "\"\\ude00\"", "[1,2,]", "{\"a\":1,}",
        "01", "1.", ".5",
        "+1", "tru", "nul", "\"a\u{1}b\"", "{\"a\":1 \"b\":2}", "[] x", " {\"k\" : [true , false , null] } ",
        "{\"a\":1,\"a\":2}",
        "\"é€😀\"", "", "   ", "{", "[[[]]]", "\"\\x\"", "1e", "-", "[1 2]",
    ])
    func edgeCasesAgreeWithJSONDecoder(text: String) {
        let ours = try? JSONValue.parse(text)
        // Stricter on purpose: trailing commas and duplicate keys are refused.
        let refusedOnPurpose = ["[1,2,]", "{\"a\":1,}", "{\"a\":1,\"a\":2}"]
        if refusedOnPurpose.contains(text) {
            #expect(ours == nil && Self.foundation(text) != nil, "\(text)")
        } else {
            #expect(ours == Self.foundation(text), "\(text)")
        }
    }

    @Test func deepNestingIsRefusedNotACrash() throws {
        #expect(throws: (any Error).self) { try JSONValue.parse(String(repeating: "[", count: 100_000)) }
        #expect(try JSONValue.parse(String(repeating: "[", count: 500) + String(repeating: "]", count: 500)) != .null)
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: (any Error).self) { try JSONValue.parse([0x22, 0xFF, 0x22]) }
    }

    @Test func randomDocumentsAgreeWithJSONDecoder() {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "")
            ?? UInt64.random(in: 1...UInt64.max / 2)
        var state = seed
        func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        let pieces = ["a", "é", "😀", "\\n", "\\\"", "\\u00e9", "\\ud83d\\ude00", " ", "\\\\", "/"]
        func document(_ depth: Int) -> String {
            switch next(depth > 3 ? 6 : 8) {
            case 0: return "null"
            case 1: return next(2) == 0 ? "true" : "false"
            case 2: return String(Int64(next(2_000_000)) - 1_000_000)
            case 3: return "\(next(1000)).\(next(1000))e\(next(40) - 20)"
            case 4, 5: return "\"" + (0..<next(6)).map { _ in pieces[next(pieces.count)] }.joined() + "\""
            case 6: return "[" + (0..<next(4)).map { _ in document(depth + 1) }.joined(separator: ",") + "]"
            default:
                return "{" + (0..<next(4)).map { i in "\"k\(i)\":" + document(depth + 1) }.joined(separator: " , ")
                    + "}"
            }
        }
        for _ in 0..<3_000 {
            var text = document(0)
            // Now and then a broken document: a byte dropped or doubled.
            if next(4) == 0, !text.isEmpty {
                var bytes = Array(text.utf8)
                let at = next(bytes.count)
                if next(2) == 0 { bytes.remove(at: at) } else { bytes.insert(bytes[at], at: at) }
                text = String(decoding: bytes, as: UTF8.self)
            }
            let ours = try? JSONValue.parse(text)
            #expect(ours == Self.foundation(text), "seed \(seed): \(text)")
            if ours != Self.foundation(text) { return }
        }
    }
}
