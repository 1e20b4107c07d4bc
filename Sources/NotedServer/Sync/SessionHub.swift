import Foundation
import NIOConcurrencyHelpers
import NotedCore

/// What a session's writer sends: a text message, one already encoded (a broadcast, encoded
/// once for all its receivers), or a close frame.
enum Outgoing: Sendable {
    case message(JSONValue)
    case text(String)
    case close(code: UInt16, reason: String)
}

/// The in-process fan-out: every authenticated session of a user, so that a committed change
/// reaches the user's other connections on this node.
final class SessionHub: Sendable {
    private struct Member {
        let continuation: AsyncStream<Outgoing>.Continuation
    }
    private let members = NIOLockedValueBox<[String: [UUID: Member]]>([:])
    private let all = NIOLockedValueBox<[UUID: AsyncStream<Outgoing>.Continuation]>([:])

    /// Tracks a connection (authenticated or not) so that shutdown can close it.
    func track(session: UUID, continuation: AsyncStream<Outgoing>.Continuation) {
        all.withLockedValue { $0[session] = continuation }
    }

    func join(user: String, session: UUID, continuation: AsyncStream<Outgoing>.Continuation) {
        members.withLockedValue { $0[user, default: [:]][session] = Member(continuation: continuation) }
    }

    func leave(session: UUID) {
        all.withLockedValue { _ = $0.removeValue(forKey: session) }
        members.withLockedValue { users in
            for user in users.keys where users[user]?[session] != nil {
                users[user]?[session] = nil
                if users[user]?.isEmpty == true { users[user] = nil }
            }
        }
    }

    /// Sends `message` to every session of `user` except `except`; the JSON text is encoded
    /// once, not once per receiving session (fan-out to 1,000 connections spent a quarter of
    /// the server's CPU encoding the same `change` again).
    func publish(user: String, message: JSONValue, except: UUID?) {
        let targets = members.withLockedValue { users in
            (users[user] ?? [:]).filter { $0.key != except }.map(\.value.continuation)
        }
        guard !targets.isEmpty else { return }
        let text = message.jsonString
        for continuation in targets {
            continuation.yield(.text(text))
        }
    }

    /// Whether `user` has an authenticated session on this node.
    func hasMembers(user: String) -> Bool {
        members.withLockedValue { $0[user]?.isEmpty == false }
    }

    /// How many connections are open.
    var connectionCount: Int { all.withLockedValue { $0.count } }

    /// Closes every connection with 1001 (going away).
    func closeAll() {
        let targets = all.withLockedValue { Array($0.values) }
        for continuation in targets {
            continuation.yield(.close(code: 1001, reason: "server shutting down"))
        }
    }
}
