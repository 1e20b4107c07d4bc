import Foundation
import NotedCore
import TestSupport
import Testing

struct E2EFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Where `swift build` put the executables: `NOTED_BIN_DIR`, else `.build/debug` of this package.
let binDirectory: URL = {
    if let dir = ProcessInfo.processInfo.environment["NOTED_BIN_DIR"] { return URL(fileURLWithPath: dir) }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug")
}()

struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to completion (with a time limit) and captures its output.
func run(
    _ program: String, _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
    timeout: Duration = .seconds(60)
) async throws -> ProcessResult {
    // One of this package's executables, or an absolute path.
    let path = program.hasPrefix("/") ? program : binDirectory.appendingPathComponent(program).path
    var env = ProcessInfo.processInfo.environment
    env["NOTED_SERVER"] = nil
    env["NOTED_HOME"] = nil
    for (key, value) in environment { env[key] = value }
    let result = try await ChildProcess.run(path, arguments, environment: env, stdin: stdin ?? "", timeout: timeout)
    return ProcessResult(status: result.status, stdout: result.stdout, stderr: result.stderr)
}

/// A running `noted-server` process over a data directory.
final class ServerProcess: Sendable {
    let process: RunningChild
    let port: Int
    let directory: String

    init(directory: String, port: Int = 0, arguments: [String] = []) async throws {
        let process = try await RunningChild.start(
            binDirectory.appendingPathComponent("noted-server").path,
            ["--port", String(port), "--data", directory, "--log-level", "error"] + arguments)
        // The first line of standard output says where it listens.
        let line = await process.nextLine() ?? ""
        guard let portText = line.split(separator: ":").last, let actual = Int(portText) else {
            process.signal(SIGTERM)
            throw E2EFailure("noted-server did not say where it listens: \"\(line)\"")
        }
        self.process = process
        self.port = actual
        self.directory = directory
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Asks the server to stop (SIGTERM) and returns at once: for `defer`, which cannot wait.
    func stop() {
        process.signal(SIGTERM)
    }

    /// Stops the server and waits until it has exited (before another takes its directory).
    func stopAndWait() async {
        process.signal(SIGTERM)
        await process.exited()
    }

    func signal(_ value: Int32) {
        process.signal(value)
    }
}

/// A temporary directory removed afterwards.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("noted-e2e-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

/// `noted` with a home; fails the test on a non-zero exit unless `expectFailure`.
struct Home {
    let path: String
    let server: String

    @discardableResult
    func noted(_ arguments: String..., stdin: String? = nil, expectFailure: Bool = false) async throws -> String {
        try await noted(arguments, stdin: stdin, expectFailure: expectFailure)
    }

    @discardableResult
    func noted(_ arguments: [String], stdin: String? = nil, expectFailure: Bool = false) async throws -> String {
        let result = try await run("noted", ["--home", path, "--server", server] + arguments, stdin: stdin)
        if expectFailure {
            #expect(result.status != 0, "noted \(arguments) should have failed")
        } else if result.status != 0 {
            throw E2EFailure("noted \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
        }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The notes as `list --json` prints them, without local-only fields.
    /// Every note's (trash included) `createdAt` and `updatedAt` by id.
    func dates() async throws -> [String: [JSONValue?]] {
        var result: [String: [JSONValue?]] = [:]
        for text in [try await noted("list", "--json"), try await noted("list", "--json", "--trashed")] {
            for note in try JSONValue.parse(text).arrayValue ?? [] {
                if let id = note["id"]?.stringValue { result[id] = [note["createdAt"], note["updatedAt"]] }
            }
        }
        return result
    }

    func notes(trashed: Bool = false) async throws -> [String: JSONValue] {
        let text = try await trashed ? noted("list", "--json", "--trashed") : noted("list", "--json")
        var result: [String: JSONValue] = [:]
        for note in try JSONValue.parse(text).arrayValue ?? [] {
            guard var object = note.objectValue, let id = object["id"]?.stringValue else { continue }
            object["updatedAt"] = nil
            object["createdAt"] = nil
            object["tags"] = .array(
                (object["tags"]?.arrayValue ?? []).sorted { ($0.stringValue ?? "") < ($1.stringValue ?? "") })
            result[id] = .object(object)
        }
        return result
    }
}
