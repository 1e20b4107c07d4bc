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
        /// The shared spaces followed by sessions here (protocol 2), each with its followers
        /// and the highest `seq` of the space accounted for (as for a user's sessions).
        var spaces: [String: UserSessions] = [:]
        /// The shared spaces each protocol-2 session follows (none for protocol 1).
        var spacesOf: [UUID: Set<String>] = [:]

        /// Removes one session of `user`, and the user once they have none left.
        mutating func remove(_ session: UUID, of user: String) {
            userOf[session] = nil
            users[user]?.sessions[session] = nil
            if users[user]?.sessions.isEmpty == true { users[user] = nil }
            follow(session, [], continuation: nil)
            spacesOf[session] = nil
        }

        /// Makes `session` follow exactly `spaces`; `seqs` are their latest `seq`s, the mark a
        /// newly followed space starts from.
        mutating func follow(
            _ session: UUID, _ followed: Set<String>, continuation: Outbox?, seqs: [String: Int64] = [:]
        ) {
            let before = spacesOf[session] ?? []
            for space in before.subtracting(followed) {
                spaces[space]?.sessions[session] = nil
                if spaces[space]?.sessions.isEmpty == true { spaces[space] = nil }
            }
            guard let continuation else { return }
            for space in followed.subtracting(before) {
                if spaces[space] == nil { spaces[space] = UserSessions(seenSeq: seqs[space] ?? 0) }
                spaces[space]?.sessions[session] = Member(continuation: continuation)
            }
            spacesOf[session] = followed
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

    /// A protocol-2 session follows the user's shared spaces (`seqs`: each one's latest `seq`).
    func follow(session: UUID, spaces seqs: [String: Int64]) {
        members.withLockedValue { members in
            guard let user = members.userOf[session],
                let continuation = members.users[user]?.sessions[session]?.continuation
            else { return }
            members.follow(session, Set(seqs.keys), continuation: continuation, seqs: seqs)
        }
    }

    /// The user's membership changed: each of their protocol-2 sessions here follows `spaces`
    /// (id → latest `seq`) from now on and is sent `message` (the `spaces` list).
    func membershipChanged(user: String, spaces seqs: [String: Int64], message: JSONValue) {
        let targets = members.withLockedValue { members in
            var targets: [Outbox] = []
            for (session, member) in members.users[user]?.sessions ?? [:] where members.spacesOf[session] != nil {
                members.follow(session, Set(seqs.keys), continuation: member.continuation, seqs: seqs)
                targets.append(member.continuation)
            }
            return targets
        }
        guard !targets.isEmpty else { return }
        let text = message.jsonString
        for continuation in targets { continuation.yield(.text(text)) }
    }

    /// How many times each user's membership was announced here (``bumpMembership(_:)``): a
    /// session that read the user's spaces compares it before and after it follows them, and
    /// reads again only when it moved.
    /// A catch-up after listening restarted (``bumpEveryMembership()``) moves every user's
    /// generation at once: whose membership changed meanwhile is not known.
    private struct Generations {
        var users: [String: UInt64] = [:]
        var epoch: UInt64 = 0
    }
    private let membershipGenerations = NIOLockedValueBox(Generations())

    func membershipGeneration(_ user: String) -> UInt64 {
        membershipGenerations.withLockedValue { ($0.users[user] ?? 0) &+ $0.epoch }
    }

    /// The users' membership changed (before their sessions are told). One number per user
    /// whose membership changed while this node ran.
    func bumpMembership(_ users: Set<String>) {
        membershipGenerations.withLockedValue { generations in
            for user in users { generations.users[user, default: 0] &+= 1 }
        }
    }

    /// Membership may have changed for anyone (notices were missed while not listening).
    func bumpEveryMembership() {
        membershipGenerations.withLockedValue { $0.epoch &+= 1 }
    }

    /// Every user with protocol-2 sessions here.
    func followingUsers() -> Set<String> {
        members.withLockedValue { members in Set(members.spacesOf.keys.compactMap { members.userOf[$0] }) }
    }

    /// The users with protocol-2 sessions here among `users`.
    func followingUsers(among users: Set<String>) -> Set<String> {
        members.withLockedValue { members in
            users.filter { user in
                (members.users[user]?.sessions.keys).map { $0.contains { members.spacesOf[$0] != nil } } ?? false
            }
        }
    }

    /// Sends a change of a shared space to its followers here (but `except`).
    func publish(space: String, message: JSONValue, except: UUID?) {
        let targets = members.withLockedValue { members in
            (members.spaces[space]?.sessions ?? [:]).filter { $0.key != except }.map(\.value.continuation)
        }
        guard !targets.isEmpty else { return }
        let text = message.jsonString
        for continuation in targets { continuation.yield(.text(text)) }
    }

    /// As ``advanceSeenSeq(user:to:)``, for a shared space followed here.
    func advanceSeenSeq(space: String, to seq: Int64) -> Int64? {
        members.withLockedValue { members in
            guard let previous = members.spaces[space]?.seenSeq else { return nil }
            members.spaces[space]?.seenSeq = max(previous, seq)
            return previous
        }
    }

    /// Every shared space followed here and its mark.
    func seenSpaceSeqs() -> [String: Int64] {
        members.withLockedValue { $0.spaces.mapValues(\.seenSeq) }
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
            let sessions = members.users[user]?.sessions ?? [:]
            for id in sessions.keys { members.remove(id, of: user) }
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
