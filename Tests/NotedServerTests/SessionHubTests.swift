import Foundation
import NotedCore
import Testing

@testable import NotedServer

/// The in-process fan-out, as one piece: a broadcast reaches every other session of the user,
/// as the same JSON text, encoded once.
@Suite struct SessionHubTests {
    /// What a session's stream holds once its continuation is finished.
    private static func drain(_ stream: AsyncStream<Outgoing>) async -> [String] {
        var texts: [String] = []
        for await item in stream {
            switch item {
            case .text(let text): texts.append(text)
            case .message(let value): texts.append("message:" + value.jsonString)
            case .close(let code, _): texts.append("close:\(code)")
            case .heartbeat: texts.append("heartbeat")
            }
        }
        return texts
    }

    @Test func publishSendsTheEncodedTextToTheUsersOtherSessionsOnly() async throws {
        let hub = SessionHub()
        var streams: [AsyncStream<Outgoing>] = []
        var continuations: [AsyncStream<Outgoing>.Continuation] = []
        var ids: [UUID] = []
        for index in 0..<4 {
            let (stream, continuation) = AsyncStream.makeStream(of: Outgoing.self)
            let id = UUID()
            hub.track(session: id, continuation: Outbox(continuation))
            hub.join(user: index < 3 ? "ada" : "bob", session: id, continuation: Outbox(continuation), seenSeq: 0)
            streams.append(stream)
            continuations.append(continuation)
            ids.append(id)
        }
        let change: JSONValue = [
            "type": "change", "id": "0b0e3c1a-7c5e-4a39-9d43-2f1f4d8f0a11", "rev": 3,
            "fields": ["body": ["delta": "=3\t+x"]],
        ]
        hub.publish(user: "ada", message: change, except: ids[0])
        for continuation in continuations { continuation.finish() }
        var received: [[String]] = []
        for stream in streams { received.append(await Self.drain(stream)) }

        #expect(received[0].isEmpty, "the author's own session gets no broadcast")
        #expect(received[1] == [change.jsonString])
        #expect(received[2] == [change.jsonString])
        #expect(received[3].isEmpty, "another user's session gets nothing")
        let decoded = try JSONValue.parse(Array(received[1][0].utf8))
        #expect(decoded == change)
    }

    @Test func publishToAUserWithoutSessionsDoesNothing() {
        let hub = SessionHub()
        hub.publish(user: "nobody", message: ["type": "change"], except: nil)
        #expect(!hub.hasMembers(user: "nobody"))
    }

    @Test func aSessionThatEndsLeavesOnlyItselfWhateverClosedItsUserBefore() {
        let hub = SessionHub()
        func outbox() -> Outbox { Outbox(AsyncStream.makeStream(of: Outgoing.self).continuation) }
        // 1,000 users of two sessions each, the second of each signed in with sign-in session "s<user>".
        var sessions: [String: [UUID]] = [:]
        for index in 0..<1000 {
            let user = "user-\(index)"
            let ids = [UUID(), UUID()]
            hub.join(user: user, session: ids[0], continuation: outbox(), seenSeq: Int64(index))
            hub.join(
                user: user, session: ids[1], continuation: outbox(), seenSeq: Int64(index), signInSession: "s\(index)")
            sessions[user] = ids
        }
        hub.leave(session: sessions["user-0"]![0])
        #expect(hub.sessionCount(user: "user-0") == 1)
        #expect(hub.sessionCount(user: "user-1") == 2)
        hub.leave(session: sessions["user-0"]![1])
        #expect(!hub.hasMembers(user: "user-0"))
        #expect(hub.seenSeqs()["user-0"] == nil, "a user without sessions is forgotten")
        // Closed by an account deletion or a revoked sign-in session, then ended: nothing else moves.
        hub.closeUser("user-2", reason: SessionHub.accountDeleted)
        hub.closeRevoked(signInSession: "s3")
        #expect(hub.sessionCount(user: "user-3") == 1)
        for id in sessions["user-2"]! + sessions["user-3"]! { hub.leave(session: id) }
        #expect(!hub.hasMembers(user: "user-2") && !hub.hasMembers(user: "user-3"))
        #expect(hub.sessionCount(user: "user-4") == 2)
        // A session id that joins again under another user belongs to that user only.
        hub.join(user: "user-5", session: sessions["user-4"]![0], continuation: outbox(), seenSeq: 0)
        #expect(hub.sessionCount(user: "user-4") == 1)
        #expect(hub.sessionCount(user: "user-5") == 3)
        // Everyone else leaves: no user is left behind.
        for (user, ids) in sessions where !["user-0", "user-2", "user-3"].contains(user) {
            for id in ids { hub.leave(session: id) }
        }
        #expect(hub.seenSeqs().isEmpty)
    }
}
