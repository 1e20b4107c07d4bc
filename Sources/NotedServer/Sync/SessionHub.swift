import Foundation
import NIOConcurrencyHelpers
import NotedCore

/// What a session's writer sends: a text message, one already encoded (a broadcast, encoded
/// once for all its receivers), a close frame, or a heartbeat (an unsolicited pong frame,
/// ``SessionDeadlines``).
enum Outgoing: Sendable {
    case message(JSONValue)
    case text(String)
    case close(code: UInt16, reason: String)
    case heartbeat
}

/// The in-process fan-out: every authenticated session of a user, so that a committed change
/// reaches the user's other connections on this node.
final class SessionHub: Sendable {
    private struct Member {
        let continuation: Outbox
        /// The sign-in session (refresh-token family) of the token it authenticated with.
        var signInSession: String?
    }
    /// A user's sessions on this node, and the highest `seq` of theirs this node has accounted
    /// for: reported at `welcome` or heard of through a commit notification. After a lost
    /// notification, cross-node fan-out catches up from here.
    private struct UserSessions {
        var sessions: [UUID: Member] = [:]
        var seenSeq: Int64
    }
    /// The users with authenticated sessions here, and the user of each such session: a
    /// session that ends is found without looking through every user (which made a mass
    /// disconnect of 10,000 users' sessions quadratic).
    private struct Members {
        var users: [String: UserSessions] = [:]
        var userOf: [UUID: String] = [:]

        /// Removes one session of `user`, and the user once they have none left.
        mutating func remove(_ session: UUID, of user: String) {
            userOf[session] = nil
            users[user]?.sessions[session] = nil
            if users[user]?.sessions.isEmpty == true { users[user] = nil }
        }
    }
    private let members = NIOLockedValueBox(Members())
    /// Every connection, and how far shutdown has come: once it began, a connection that
    /// starts is closed at once (it may have been accepted just before).
    private struct Connections {
        enum Phase { case open, closing, dropping }
        var sessions: [UUID: Outbox] = [:]
        var phase = Phase.open
    }
    private let all = NIOLockedValueBox(Connections())

    /// Tracks a connection (authenticated or not) so that shutdown can close it.
    func track(session: UUID, continuation: Outbox) {
        let phase = all.withLockedValue { all in
            all.sessions[session] = continuation
            return all.phase
        }
        switch phase {
        case .open:
            break
        case .closing:
            continuation.yield(Self.goingAway)
        case .dropping:
            continuation.yield(Self.goingAway)
            continuation.closeConnection()
        }
    }

    private static let goingAway = Outgoing.close(code: 1001, reason: "server shutting down")

    /// Adds an authenticated session; `seenSeq` is the user's `seq` its `welcome` reported.
    func join(user: String, session: UUID, continuation: Outbox, seenSeq: Int64, signInSession: String? = nil) {
        members.withLockedValue { members in
            if let previous = members.userOf[session], previous != user { members.remove(session, of: previous) }
            if members.users[user] == nil {
                members.users[user] = UserSessions(seenSeq: seenSeq)
            }
            members.users[user]?.sessions[session] = Member(continuation: continuation, signInSession: signInSession)
            members.userOf[session] = user
        }
    }

    /// A session re-authenticated with a token of another sign-in session.
    func reauthenticated(user: String, session: UUID, signInSession: String?) {
        members.withLockedValue { $0.users[user]?.sessions[session]?.signInSession = signInSession }
    }

    /// Closes every connection authenticated by a token of a revoked sign-in session: an error
    /// saying so, then close 4001 (docs/protocol.md section 6).
    func closeRevoked(signInSession: String) {
        let targets = members.withLockedValue { members in
            var found: [(user: String, session: UUID, continuation: Outbox)] = []
            for (user, sessions) in members.users {
                for (id, member) in sessions.sessions where member.signInSession == signInSession {
                    found.append((user, id, member.continuation))
                }
            }
            for target in found { members.remove(target.session, of: target.user) }
            return found.map(\.continuation)
        }
        let message = "the sign-in session was revoked"
        for continuation in targets {
            continuation.yield(
                .message(ServerMessage.error(ServerError(ProtocolError(.unauthenticated, message))).json))
            continuation.yield(.close(code: 4001, reason: message))
        }
    }

    /// The reason a deleted account's connections are closed with.
    static let accountDeleted = "the account was deleted"
    static let accountDisabled = "the account was disabled by the server's operator"

    /// Closes every connection of `user` on this node (the account was deleted): an error
    /// saying why, then close 4001.
    func closeUser(_ user: String, reason: String) {
        let targets = members.withLockedValue { members in
            let sessions = members.users.removeValue(forKey: user)?.sessions ?? [:]
            for id in sessions.keys { members.userOf[id] = nil }
            return sessions.values.map(\.continuation)
        }
        for continuation in targets {
            continuation.yield(.message(ServerMessage.error(ServerError(ProtocolError(.unauthenticated, reason))).json))
            continuation.yield(.close(code: 4001, reason: reason))
        }
    }

    func leave(session: UUID) {
        all.withLockedValue { _ = $0.sessions.removeValue(forKey: session) }
        members.withLockedValue { members in
            if let user = members.userOf[session] { members.remove(session, of: user) }
        }
    }

    /// Sends `message` to every session of `user` except `except`; the JSON text is encoded
    /// once, not once per receiving session (fan-out to 1,000 connections spent a quarter of
    /// the server's CPU encoding the same `change` again).
    func publish(user: String, message: JSONValue, except: UUID?) {
        let targets = members.withLockedValue { members in
            (members.users[user]?.sessions ?? [:]).filter { $0.key != except }.map(\.value.continuation)
        }
        guard !targets.isEmpty else { return }
        let text = message.jsonString
        for continuation in targets {
            continuation.yield(.text(text))
        }
    }

    /// How many authenticated sessions `user` has on this node.
    func sessionCount(user: String) -> Int {
        members.withLockedValue { $0.users[user]?.sessions.count ?? 0 }
    }

    /// Whether `user` has an authenticated session on this node.
    func hasMembers(user: String) -> Bool {
        members.withLockedValue { $0.users[user]?.sessions.isEmpty == false }
    }

    /// Records that `user`'s commits up to `seq` are accounted for and returns the previous
    /// mark; nil when the user has no session here (nothing to deliver).
    func advanceSeenSeq(user: String, to seq: Int64) -> Int64? {
        members.withLockedValue { members in
            guard let previous = members.users[user]?.seenSeq else { return nil }
            members.users[user]?.seenSeq = max(previous, seq)
            return previous
        }
    }

    /// Every user with sessions here and their marks.
    func seenSeqs() -> [String: Int64] {
        members.withLockedValue { $0.users.mapValues(\.seenSeq) }
    }

    /// How many connections are open.
    var connectionCount: Int { all.withLockedValue { $0.sessions.count } }

    /// Closes every connection with 1001 (going away); connections that start from now on are
    /// closed as they start.
    func closeAll() {
        let targets = all.withLockedValue { all in
            all.phase = .closing
            return Array(all.sessions.values)
        }
        for continuation in targets {
            continuation.yield(Self.goingAway)
        }
    }

    /// Closes every connection still open at once, without a close handshake (a client that
    /// did not answer `closeAll`'s close in time); connections that start from now on are dropped
    /// as they start.
    func dropAll() {
        let targets = all.withLockedValue { all in
            all.phase = .dropping
            return Array(all.sessions.values)
        }
        for continuation in targets {
            continuation.closeConnection()
        }
    }
}
