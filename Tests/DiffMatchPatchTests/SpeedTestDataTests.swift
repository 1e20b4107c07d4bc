import Foundation
import Testing

@testable import DiffMatchPatch

/// The official speed test texts give the reference's result: the speed is the benchmarks'
/// business, the answer is a test's.
struct SpeedTestDataTests {
    /// `../shared/bench-data/dmp` beside the repository, or `NOTED_BENCH_DATA`.
    static let dataDirectory: URL = {
        if let path = ProcessInfo.processInfo.environment["NOTED_BENCH_DATA"] {
            return URL(fileURLWithPath: path)
        }
        let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return repository.deletingLastPathComponent().appendingPathComponent("shared/bench-data/dmp")
    }()

    static let available: Bool = {
        let present = FileManager.default.fileExists(
            atPath: dataDirectory.appendingPathComponent("speedtest1.txt").path)
        if !present {
            print("SpeedTestDataTests: NOTICE: \(dataDirectory.path) not found: skipped")
        }
        return present
    }()

    func text(_ name: String) throws -> String {
        try String(contentsOf: Self.dataDirectory.appendingPathComponent(name), encoding: .utf8)
    }

    @Test(.enabled(if: available))
    func speedTestDiffMatchesTheReference() throws {
        let dmp = DiffMatchPatch(configuration: .init(diffTimeout: 0))
        let a = try text("speedtest1.txt")
        let b = try text("speedtest2.txt")
        let diffs = dmp.diff(a, b, checkLines: false)
        #expect(diffs.count == 2187)
        #expect(dmp.levenshtein(diffs) == 6767)
        #expect(dmp.text1(diffs) == a)
        #expect(dmp.text2(diffs) == b)
    }

    @Test(.enabled(if: available))
    func speedTestPatchRoundTrips() throws {
        let dmp = DiffMatchPatch(configuration: .init(diffTimeout: 0))
        let a = try text("speedtest1.txt")
        let b = try text("speedtest2.txt")
        let patches = dmp.patchMake(a, b)
        #expect(patches.count == 85)
        let parsed = try dmp.patchFromText(dmp.patchToText(patches))
        #expect(parsed == patches)
        let (result, applied) = dmp.patchApply(parsed, to: a)
        #expect(result == b)
        #expect(applied.allSatisfy { $0 })
    }
}
