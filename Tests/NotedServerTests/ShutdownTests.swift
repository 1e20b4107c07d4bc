import Foundation
import TestSupport
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NotedCore
import Testing

/// The real executable: its one stdout line and its graceful shutdown.
@Suite struct ExecutableTests {
    static var executable: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/noted-server")
    }

    @Test func sigtermClosesSessionsWith1001AndExitsZero() async throws {
        let binary = Self.executable
        try #require(FileManager.default.isExecutableFile(atPath: binary.path), "build noted-server first (scripts/test does)")
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("noted-exec-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let process = Process()
        process.executableURL = binary
        process.arguments = ["--port", "0", "--data", data.path, "--log-level", "error"]
        process.environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin"]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try await process.runWhenFewFilesAreOpen()
        defer { if process.isRunning { process.interrupt(); process.terminate() } }

        var output = Data()
        while !output.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            output.append(chunk)
        }
        let line = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .newlines)
        let prefix = "noted-server listening on http://127.0.0.1:"
        #expect(line.hasPrefix(prefix), "\(line)")
        let port = try #require(Int(line.dropFirst(prefix.count)))
        #expect(port > 0)

        let base = "http://127.0.0.1:\(port)"
        func post(_ path: String, _ body: JSONValue) async throws -> JSONValue {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.jsonString.utf8)
            let (data, _) = try await URLSession.shared.data(for: request)
            return try JSONValue.parse(Array(data))
        }
        _ = try await post("/v1/accounts", ["username": "shutdown", "password": "12345678 and more"])
        let token = try #require(try await post("/v1/sessions", ["username": "shutdown", "password": "12345678 and more"])["access_token"]?.stringValue)
        let connection = try await SyncConnection.open(port: port)
        try await connection.send(["type": "hello", "protocol": 1, "token": .string(token)])
        #expect(try await connection.receive()["type"] == "welcome")

        kill(process.processIdentifier, SIGTERM)
        let code = try await connection.closeCode()
        #expect(code == 1001)
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning)
        #expect(process.terminationStatus == 0)
        let rest = stdout.fileHandleForReading.readDataToEndOfFile()
        #expect(rest.isEmpty, "stdout carries exactly one line")
    }
}
