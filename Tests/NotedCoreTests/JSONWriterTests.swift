import Foundation
import Testing

@testable import NotedCore

/// `jsonString` is written by hand; what it writes must stay byte for byte what JSONEncoder
/// wrote (a change sent again is recognised by the hash of this text, across an upgrade too).
/// Seeded random values (NOTED_TEST_SEED; printed on failure).
struct JSONWriterTests {
    static let seed =
        UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "") ?? UInt64.random(in: 1...UInt64.max / 2)

    static func string(_ random: inout SplitMix64) -> String {
        let pieces = [
            "", "a", "Z", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}", "é",
            "e\u{301}",
            "😀", "\u{2028}", "\u{FEFF}", "<", "&", "'", "日本", "key", "B", "b", "_", "1", "10", "2",
        ]
        return (0..<Int(random.next() % 6)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }.joined()
    }

    static func value(_ random: inout SplitMix64, depth: Int = 0) -> JSONValue {
        switch random.next() % (depth > 3 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(random.next() % 2 == 0)
        case 2: return .int(Int64(bitPattern: random.next()) >> Int64(random.next() % 64))
        case 3: return .double([0.5, -1.25, 1e21, 3.141592653589793, 1e-7, 123456789.125, 0.1][Int(random.next() % 7)])
        case 4: return .string(string(&random))
        case 5: return .array((0..<Int(random.next() % 4)).map { _ in value(&random, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int(random.next() % 5) { members[string(&random)] = value(&random, depth: depth + 1) }
            return .object(members)
        }
    }

    @Test func theHandWrittenTextIsTheEncodersText() throws {
        var random = SplitMix64(seed: Self.seed)
        for _ in 0..<20_000 {
            let value = Self.value(&random)
            let fast = value.jsonString
            let encoder = value.encoderJSONString
            #expect(fast == encoder, "seed \(Self.seed): \(String(reflecting: value))")
            if fast != encoder { return }
        }
        // And it reads back as itself.
        let sample: JSONValue = ["b": [1, "x\n\u{1}", nil, true], "a": ["é": 0.5, "e\u{301}": "😀"]]
        #expect(try JSONValue.parse(sample.jsonString) == sample)
    }
}
