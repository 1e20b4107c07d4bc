import Foundation
import Logging
import NIOConcurrencyHelpers
import NotedCore
import Testing

@testable import NotedServer

/// Every log line, at trace level, through a whole session: sign-up, sign-in (first-party and
/// OAuth), refresh, pushes and pulls over HTTP and WebSocket. None may hold a password, a token
/// or note text.
@Suite struct LogSecretsTests {
    final class Sink: Sendable {
        let lines = NIOLockedValueBox<[String]>([])
    }

    struct Capture: LogHandler {
        let sink: Sink
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(
            level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?, source: String,
            file: String, function: String, line: UInt
        ) {
            let all = metadata.merging(extra ?? [:]) { $1 }
            sink.lines.withLockedValue { $0.append("\(level) \(message) \(all) \(source)") }
        }
    }

    @Test(arguments: Backend.available) func logsNeverHoldSecretsOrNoteText(backend: Backend) async throws {
        let sink = Sink()
        var logger = Logger(label: "noted-log-test") { _ in Capture(sink: sink) }
        logger.logLevel = .trace
        let secrets = NIOLockedValueBox<[String]>([])
        try await TestServer.with(backend, logger: logger) { server in
            let user = try await server.makeUser("log-\(UUID().uuidString.prefix(6).lowercased())")
            let noteText = "secret-note-text-\(UUID().uuidString)"
            let titleText = "secret-title-\(UUID().uuidString)"
            let id = UUID().uuidString.lowercased()
            let create: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                "baseRev": 0, "op": "upsert",
                "fields": ["title": ["set": .string(titleText)], "body": ["set": .string(noteText)]],
            ]
            let pushed = try await server.request(
                .post, "/v1/push", json: ["changes": [create]], token: user.accessToken)
            #expect(pushed.status == .ok)
            let connection = try await server.connect(user)
            let edit: JSONValue = [
                "ccid": .string(UUID().uuidString.lowercased()), "collection": "notes", "id": .string(id),
                "baseRev": 1, "op": "upsert",
                "fields": ["body": ["delta": .string("=\(noteText.utf16.count)\t+-more-secret-text")]],
            ]
            let ack = try await connection.push(edit)
            #expect(ack["type"] == "ack")
            try await connection.send(["type": "pull", "since": 0])
            _ = try await connection.receive()
            try await connection.send(["type": "reauth", "token": .string(user.accessToken)])
            _ = try await connection.receive()
            let refreshed = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(refreshed.status == .ok)
            let wrong = try await server.request(
                .post, "/v1/sessions", json: ["username": .string(user.username), "password": "wrong-password-123"])
            #expect(wrong.status == .unauthorized)
            secrets.withLockedValue {
                $0 = [
                    user.password, "wrong-password-123", user.accessToken, user.refreshToken, noteText, titleText,
                    "-more-secret-text",
                    refreshed.json["access_token"]?.stringValue ?? "",
                    refreshed.json["refresh_token"]?.stringValue ?? "",
                ]
            }
        }
        let lines = sink.lines.withLockedValue { $0 }
        #expect(lines.count > 5, "the server logged something at trace level")
        for secret in secrets.withLockedValue({ $0 }) where !secret.isEmpty {
            let leaks = lines.filter { $0.contains(secret) }
            #expect(leaks.isEmpty, "a log line holds a secret: \(leaks.first?.prefix(200) ?? "")")
        }
    }
}
