import Foundation
import TestSupport
import NotedCore
import Testing

struct E2EFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Where `swift build` put the executables: `NOTED_BIN_DIR`, else `.build/debug` of this package.
let binDirectory: URL = {
    if let dir = ProcessInfo.processInfo.environment["NOTED_BIN_DIR"] { return URL(fileURLWithPath: dir) }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug")
}()

struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a program to completion (with a time limit) and captures its output.
func run(_ program: String, _ arguments: [String], stdin: String? = nil, environment: [String: String] = [:], timeout: Duration = .seconds(60)) async throws -> ProcessResult {
    let process = Process()
    // One of this package's executables, or an absolute path.
    process.executableURL = program.hasPrefix("/") ? URL(fileURLWithPath: program) : binDirectory.appendingPathComponent(program)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env["NOTED_SERVER"] = nil
    env["NOTED_HOME"] = nil
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let out = Pipe()
    let err = Pipe()
    let input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try await process.runWhenFewFilesAreOpen()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    // Read while it runs so a full pipe never blocks the child.
    async let outData = readToEnd(out.fileHandleForReading)
    async let errData = readToEnd(err.fileHandleForReading)
    let deadline = ContinuousClock.now + timeout
    while process.isRunning {
        if ContinuousClock.now > deadline {
            process.terminate()
            throw E2EFailure("\(program) \(arguments.joined(separator: " ")) did not finish within \(timeout)")
        }
        try await Task.sleep(for: .milliseconds(10))
    }
    return ProcessResult(status: process.terminationStatus, stdout: String(decoding: await outData, as: UTF8.self),
                         stderr: String(decoding: await errData, as: UTF8.self))
}

/// Reads a pipe to its end on a thread of its own: a blocking read on Swift's cooperative pool
/// (or libdispatch's global queues, which it shares on Linux: as many threads as cores) holds
/// one of its two threads for as long as the child runs, and every other suite's tasks, their
/// servers' handlers among them, wait behind it.
func readToEnd(_ handle: FileHandle) async -> Data {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: handle.readDataToEndOfFile()) }
    }
}

/// A running `noted-server` process over a data directory.
final class ServerProcess: Sendable {
    let process: Process
    let port: Int
    let directory: String

    init(directory: String, port: Int = 0, arguments: [String] = []) async throws {
        let process = Process()
        process.executableURL = binDirectory.appendingPathComponent("noted-server")
        process.arguments = ["--port", String(port), "--data", directory, "--log-level", "error"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try await process.runWhenFewFilesAreOpen()
        // The first line of standard output says where it listens.
        let line = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            Thread.detachNewThread {
                var bytes: [UInt8] = []
                while let byte = try? out.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
                    bytes.append(byte)
                }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
        guard let portText = line.split(separator: ":").last, let actual = Int(portText) else {
            process.terminate()
            throw E2EFailure("noted-server did not say where it listens: \"\(line)\"")
        }
        self.process = process
        self.port = actual
        self.directory = directory
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Asks the server to stop (SIGTERM) and returns at once: for `defer`, which cannot wait
    /// without holding a thread of the cooperative pool.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
    }

    /// Stops the server and waits until it has exited (before another takes its directory).
    func stopAndWait() async {
        guard process.isRunning else { return }
        process.terminate()
        await process.exited()
    }

    func signal(_ value: Int32) {
        kill(process.processIdentifier, value)
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
            object["tags"] = .array((object["tags"]?.arrayValue ?? []).sorted { ($0.stringValue ?? "") < ($1.stringValue ?? "") })
            result[id] = .object(object)
        }
        return result
    }
}
