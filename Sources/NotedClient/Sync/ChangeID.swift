import Foundation

/// The `ccid`s this process gives its changes (docs/protocol.md, "Push"): canonical lower-case
/// UUIDs of version 8 (RFC 9562), 74 random bits drawn once per process, then a 48-bit counter:
/// `rrrrrrrr-rrrr-8rrr-Vrrr-cccccccccccc`.
///
/// A random v4 `ccid` per change costs about 18 bytes of every push even with permessage-deflate
/// (32 random hex digits do not compress); consecutive ids of one sequence differ only in the
/// counter's last digits, so deflate's context takeover sends the rest as a back-reference and a
/// keystroke's push takes about 25 bytes on the wire instead of 62 (docs/benchmarks.md, "Bytes
/// per keystroke"). Uniqueness, which is all the protocol asks of a `ccid`: the counter keeps one
/// process's ids apart, the random prefix two processes' (or devices'); a `ccid` is stored with
/// its change before the first send, so a restart, which draws a new prefix, never needs the
/// old counter.
public enum ChangeID {
    private static let state = State()

    /// The next id of this process's sequence.
    public static func next() -> String {
        state.next()
    }

    /// A sequence of its own (tests): `prefix` as the random part.
    static func sequence(prefix: [UInt8]) -> () -> String {
        let state = State(prefix: prefix)
        return { state.next() }
    }

    private final class State: @unchecked Sendable {
        private let lock = NSLock()
        private let head: String
        private var counter: UInt64 = 0

        init(prefix: [UInt8]? = nil) {
            var random = SystemRandomNumberGenerator()
            let bytes = prefix ?? (0..<10).map { _ in UInt8.random(in: 0...255, using: &random) }
            precondition(bytes.count == 10, "a ccid prefix is 10 bytes")
            let hex = bytes.map { byte in
                let text = String(byte, radix: 16)
                return text.count == 1 ? "0" + text : text
            }.joined()
            let digits = Array(hex)
            // 18 random hex digits, the version digit 8 and the variant digit 8...b (two more
            // random bits, from the last byte).
            let variant = String(8 | (bytes[9] & 3), radix: 16)
            head =
                String(digits[0..<8]) + "-" + String(digits[8..<12]) + "-8" + String(digits[12..<15])
                + "-" + variant + String(digits[15..<18]) + "-"
        }

        func next() -> String {
            let value: UInt64 = lock.withLock {
                counter += 1
                return counter
            }
            let text = String(value & 0xFFFF_FFFF_FFFF, radix: 16)
            return head + String(repeating: "0", count: 12 - text.count) + text
        }
    }
}
