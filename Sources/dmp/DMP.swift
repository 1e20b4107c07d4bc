import ArgumentParser
import DiffMatchPatch
import Foundation

@main
struct DMP: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dmp",
        abstract: "Diff, match and patch plain-text files, compatible with Google's diff-match-patch.",
        discussion:
            "Files are read as UTF-8. Offsets and lengths count UTF-16 code units, as the JavaScript reference does.",
        subcommands: [DiffCommand.self, PatchCommand.self, ApplyCommand.self, SpeedTest.self]
    )
}

/// Options shared by the commands that diff.
struct DiffOptions: ParsableArguments {
    @Option(help: "Seconds a diff may take before it settles for a coarser result (0: no limit).")
    var timeout: Double = 1.0

    func validate() throws {
        guard timeout.isFinite, timeout >= 0 else {
            throw ValidationError("--timeout must be a number of seconds, 0 or more.")
        }
    }
}

enum Cleanup: String, ExpressibleByArgument, CaseIterable {
    case none, semantic, efficiency

    var library: DiffMatchPatch.Cleanup {
        switch self {
        case .none: .none
        case .semantic: .semantic
        case .efficiency: .efficiency
        }
    }
}

struct DiffCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diff", abstract: "Print the delta that turns file A into file B.")

    @OptionGroup var options: DiffOptions
    @Flag(help: "Run a line-level diff first (faster on long texts, slightly less optimal).")
    var checklines = false
    @Option(
        help: "Cleanup after diffing: \(Cleanup.allCases.map(\.rawValue).joined(separator: ", ")).")
    var cleanup: Cleanup = .none
    @Argument(help: "The old file.") var a: String
    @Argument(help: "The new file.") var b: String

    func run() throws {
        try reportingFailures {
            let dmp = DiffMatchPatch(configuration: .init(diffTimeout: options.timeout))
            let diffs = dmp.diff(try readText(a), try readText(b), checkLines: checklines, cleanup: cleanup.library)
            print(dmp.toDelta(diffs))
        }
    }
}

struct PatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "patch", abstract: "Print the patch text that turns file A into file B.")

    @OptionGroup var options: DiffOptions
    @Argument(help: "The old file.") var a: String
    @Argument(help: "The new file.") var b: String

    func run() throws {
        try reportingFailures {
            let dmp = DiffMatchPatch(configuration: .init(diffTimeout: options.timeout))
            writeStdout(dmp.patchToText(dmp.patchMake(try readText(a), try readText(b))))
        }
    }
}

struct ApplyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apply",
        abstract: "Apply a patch file to a file.",
        discussion:
            "Prints the patched text on standard output and a JSON array of per-patch results on standard error; exits 1 when any patch failed."
    )

    @Argument(help: "The patch text file.") var patchFile: String
    @Argument(help: "The file to patch.") var file: String

    func run() throws {
        try reportingFailures {
            let dmp = DiffMatchPatch()
            let patches: [Patch]
            do {
                patches = try dmp.patchFromText(try readText(patchFile))
            } catch let error as DiffMatchPatchError {
                throw Failure("\(patchFile): \(error.message)")
            }
            let (text, results) = dmp.patchApply(patches, to: try readText(file))
            writeStdout(text)
            FileHandle.standardError.write(
                Data(("[" + results.map { $0 ? "true" : "false" }.joined(separator: ",") + "]\n").utf8))
            if results.contains(false) { throw ExitCode(1) }
        }
    }
}

struct SpeedTest: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "speedtest",
        abstract:
            "The official diff speed test: no timeout, no line mode, one untimed warm-up diff B→A, then a timed diff A→B.",
        discussion:
            "Prints the milliseconds, the number of diffs and the Levenshtein distance; then times patch_make(A, B) with the default settings after one warm-up."
    )

    @Argument(help: "The first file.") var a: String
    @Argument(help: "The second file.") var b: String

    func run() throws {
        try reportingFailures {
            let text1 = try readText(a)
            let text2 = try readText(b)
            let dmp = DiffMatchPatch(configuration: .init(diffTimeout: 0))
            _ = dmp.diff(text2, text1, checkLines: false)
            let clock = ContinuousClock()
            var diffs: [Diff] = []
            let elapsed = clock.measure { diffs = dmp.diff(text1, text2, checkLines: false) }
            let ms = milliseconds(elapsed)
            print(
                "speedtest: \(String(format: "%.1f", ms)) ms, \(diffs.count) diffs, levenshtein \(dmp.levenshtein(diffs))"
            )

            // patch_make with the reference's default settings, timed after one warm-up.
            let patcher = DiffMatchPatch()
            _ = patcher.patchMake(text2, text1)
            var patches: [Patch] = []
            let patchElapsed = clock.measure { patches = patcher.patchMake(text1, text2) }
            print(
                "patch_make: \(String(format: "%.1f", milliseconds(patchElapsed))) ms, \(patches.count) patches"
            )
        }
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

/// Runs a command body; a `Failure` becomes one line on standard error and exit status 2
/// (status 1 is `apply`'s "a patch did not apply").
func reportingFailures(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let failure as Failure {
        FileHandle.standardError.write(Data("dmp: \(failure.description)\n".utf8))
        throw ExitCode(2)
    }
}

/// A user-facing failure: one line on standard error, exit status 2.
struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension Failure: LocalizedError {
    var errorDescription: String? { description }
}

/// The UTF-8 text of a file; a clear error when it cannot be read or is not UTF-8.
func readText(_ path: String) throws -> String {
    let data: Data
    do {
        data = try Data(contentsOf: URL(fileURLWithPath: path))
    } catch {
        throw Failure("cannot read \(path): \((error as NSError).localizedDescription)")
    }
    // Strict validation, and a byte order mark is kept as text (U+FEFF), as node reads it.
    guard let text = String(validating: data, as: UTF8.self) else {
        throw Failure("\(path) is not valid UTF-8")
    }
    return text
}

func writeStdout(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}
