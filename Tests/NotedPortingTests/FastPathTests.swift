import Foundation
import NotedCore
import Testing

@testable import NotedPorting

/// The importers' hand-written fast paths (a 10,000-note import spent two thirds of its time in
/// Foundation's date formatter and string bridging) against what they replaced: the same dates
/// as ISO8601DateFormatter, the same title and body as the Foundation splitting, over seeded
/// random inputs (NOTED_TEST_SEED; printed on failure).
struct FastPathTests {
    static let seed =
        UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max / 2)

    /// The splitting as it was written with Foundation, the reference.
    static func reference(_ content: String) -> (title: String, body: String) {
        let lines = content.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
        guard let first = lines.firstIndex(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) else {
            return ("", "")
        }
        let title = lines[first].trimmingCharacters(in: .whitespaces)
        var rest = lines[(first + 1)...]
        while let line = rest.first, line.trimmingCharacters(in: .whitespaces).isEmpty, rest.count > 1 {
            rest = rest.dropFirst()
        }
        return (String(title.prefix(200)), rest.joined(separator: "\n"))
    }

    @Test func theFirstLineSplitsAsFoundationSplitIt() {
        var random = SplitMix64(seed: Self.seed)
        let pieces = [
            "", " ", "\t", "\u{00A0}", "\u{3000}", "a", "Title", "ü", "🛒", "e\u{301}", "x y", "\n", "\n", "\r\n", "\r",
            " \n", "- [ ] milk",
        ]
        for _ in 0..<5_000 {
            let count = Int(random.next() % 12)
            let text = (0..<count).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
            let fast = Importer.splitFirstLine(text)
            let slow = Self.reference(text)
            #expect(
                fast.title == slow.title && fast.body == slow.body, "seed \(Self.seed): \(String(reflecting: text))")
            if fast.title != slow.title || fast.body != slow.body { return }
        }
        #expect(Importer.splitFirstLine(String(repeating: "long ", count: 100)).title.count == 200)
    }

    @Test func datesReadAsTheFormatterReadsThem() {
        var random = SplitMix64(seed: Self.seed)
        let formatter = ISO8601DateFormatter()
        for _ in 0..<2_000 {
            let millis = Int64(random.next() % 8_000_000_000_000) - 1_000_000_000_000
            let date = Date(timeIntervalSince1970: Double(millis) / 1000)
            for options: ISO8601DateFormatter.Options in [
                [.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime],
            ] {
                formatter.formatOptions = options
                formatter.timeZone = TimeZone(
                    secondsFromGMT: [0, 3600, -5 * 3600 - 1800, 14 * 3600][Int(random.next() % 4)])
                let text = formatter.string(from: date)
                let expected = formatter.date(from: text)
                let got = Timestamp.parse(text)
                #expect(
                    got != nil && abs(got!.timeIntervalSince1970 - expected!.timeIntervalSince1970) < 0.0005,
                    "seed \(Self.seed): \(text)")
            }
        }
        #expect(
            Timestamp.parse("2024-01-05T10:11:12.345678+01:00")?.timeIntervalSince1970 == 1_704_445_872.345,
            "milliseconds kept")
        for bad in [
            "2024-01-05", "2024-13-05T10:11:12Z", "2024-01-05T10:11:12", "2024-01-05T10:11:12.Z",
            "2024-01-05 10:11:12Z", "2024-01-05T10:11:12+0100",
        ] {
            #expect(Timestamp.parse(bad) == nil, "\(bad)")
        }
    }
}
