import Benchmark
import DiffMatchPatch
import Foundation

/// Benchmarks of DiffMatchPatch: the official speed test, a 1 MB document, and typing.
///
/// Run from `Benchmarks/`: `swift package benchmark`. The speed test files are read from
/// `../shared/bench-data/dmp/` beside the repository (or `NOTED_BENCH_DATA`); their
/// benchmarks are left out, with a notice, when the files are missing.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .peakMemoryResident],
        warmupIterations: 1,
        maxDuration: .seconds(10),
        maxIterations: 50
    )
    let exact = DiffMatchPatch(configuration: .init(diffTimeout: 0))
    let standard = DiffMatchPatch()

    if let (text1, text2) = BenchData.speedTest() {
        Benchmark("speedtest diff (timeout 0, no line mode)", configuration: .init(maxIterations: 10)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(exact.diff(text1, text2, checkLines: false))
            }
        }
        Benchmark("speedtest patchMake", configuration: .init(maxIterations: 10)) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(standard.patchMake(text1, text2))
            }
        }
    }

    let document = BenchData.document(bytes: 1_000_000, seed: 1)
    let editedDocument = BenchData.edit(document, edits: 40, seed: 2)
    Benchmark("1 MB document diff (40 edits)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(standard.diff(document, editedDocument))
        }
    }
    Benchmark("1 MB document patchMake (40 edits)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(standard.patchMake(document, editedDocument))
        }
    }
    let documentKeystroke = BenchData.keystroke(document)
    let documentKeystrokePatches = standard.patchMake(document, documentKeystroke)
    Benchmark("1 MB document patchApply (one keystroke)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(standard.patchApply(documentKeystrokePatches, to: document))
        }
    }

    let note = BenchData.document(bytes: 100_000, seed: 3)
    let typed = BenchData.keystroke(note)
    let typedPatches = standard.patchMake(note, typed)
    Benchmark("typing: diff (one character into 100 KB)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(standard.diff(note, typed))
        }
    }
    Benchmark("typing: patchMake (one character into 100 KB)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(standard.patchMake(note, typed))
        }
    }
    Benchmark("typing: patchApply (one character into 100 KB)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(standard.patchApply(typedPatches, to: note))
        }
    }
}

/// The inputs of the benchmarks, all deterministic.
enum BenchData {
    /// The official speed test's two texts, or nil (with a notice) when they cannot be read.
    static func speedTest() -> (String, String)? {
        let directory =
            ProcessInfo.processInfo.environment["NOTED_BENCH_DATA"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("../shared/bench-data/dmp")
        do {
            let text1 = try String(contentsOf: directory.appendingPathComponent("speedtest1.txt"), encoding: .utf8)
            let text2 = try String(contentsOf: directory.appendingPathComponent("speedtest2.txt"), encoding: .utf8)
            return (text1, text2)
        } catch {
            print(
                "NOTICE: speed test files not found in \(directory.standardized.path): \(error); their benchmarks are skipped"
            )
            return nil
        }
    }

    /// A note-like text of about `bytes` UTF-8 bytes: lines of words, some accents and emoji.
    static func document(bytes: Int, seed: UInt64) -> String {
        let words = [
            "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "note", "sync", "merge",
            "offline", "server", "client", "patch", "diff", "café", "naïve", "日本語", "😀", "- [ ]", "#",
        ]
        var random = seed
        var text = ""
        text.reserveCapacity(bytes + 64)
        var lineLength = 0
        while text.utf8.count < bytes {
            let word = words[Int(next(&random) % UInt64(words.count))]
            text += word
            lineLength += word.utf8.count + 1
            if lineLength > 40 + Int(next(&random) % 60) {
                text += "\n"
                lineLength = 0
            } else {
                text += " "
            }
        }
        return text
    }

    /// `text` with `edits` short replacements spread over it.
    static func edit(_ text: String, edits: Int, seed: UInt64) -> String {
        var random = seed
        var scalars = Array(text.unicodeScalars)
        for _ in 0..<edits {
            let position = Int(next(&random) % UInt64(max(1, scalars.count - 20)))
            let length = Int(next(&random) % 12)
            scalars.replaceSubrange(
                position..<(position + length), with: "edited \(next(&random) % 1000)".unicodeScalars)
        }
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    /// `text` with one character typed in its middle.
    static func keystroke(_ text: String) -> String {
        let middle = text.index(text.startIndex, offsetBy: text.count / 2)
        var typed = text
        typed.insert("x", at: middle)
        return typed
    }

    /// SplitMix64, so that the inputs are the same on every machine.
    static func next(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
