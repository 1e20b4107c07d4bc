import Foundation
import NotedCore

/// The seed of the randomised tests: `NOTED_TEST_SEED` (decimal or 0x-hex) when set, else a
/// fixed default, so that every run is reproducible and a failure names its seed.
public enum TestSeed {
    public static let defaultValue: UInt64 = 0x5EED_D1FF

    public static let value: UInt64 = {
        guard
            let text = ProcessInfo.processInfo.environment["NOTED_TEST_SEED"]?
                .trimmingCharacters(in: .whitespaces), !text.isEmpty
        else { return defaultValue }
        if text.lowercased().hasPrefix("0x"), let hex = UInt64(text.dropFirst(2), radix: 16) {
            return hex
        }
        if let decimal = UInt64(text) {
            return decimal
        }
        // Any other text still gives a stable seed, so a typo does not silently change nothing.
        return text.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
    }()

    /// The generator of one test, mixed with the test's name so tests do not share streams.
    public static func generator(for test: String) -> SplitMix64 {
        let salt = test.utf8.reduce(UInt64(0xCBF2_9CE4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        return SplitMix64(seed: value ^ salt)
    }

    /// The seed from `NOTED_TEST_SEED` when set, else a fresh random one (print it on failure).
    public static var valueOrRandom: UInt64 {
        ProcessInfo.processInfo.environment["NOTED_TEST_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 1...UInt64.max / 2)
    }

    /// What a failure message says so that the failure replays.
    public static var replay: String {
        "NOTED_TEST_SEED=\(value)"
    }
}
