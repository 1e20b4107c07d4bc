import Foundation
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NotedCore

/// One sync WebSocket connection: the session state machine of docs/protocol.md section 3.
///
/// Messages are handled in order by the reading task; everything sent goes through one
/// ``Outbox``, whose writer (a task only while something is queued) writes it in order, so
/// replies and broadcasts never interleave inside a frame. ``SessionDeadlines`` enforces the
/// hello deadline and the token's expiry, and sends the heartbeats.
///
/// A class: the session's tasks and their closures share one reference to it instead of each
/// holding a copy of it and of the server's configuration (an idle connection's memory,
/// issue 18).
final class SyncSession: Sendable {
    /// What every session of a server shares, held by reference (one per server).
    final class Environment: Sendable {
        let sync: SyncService
        let tokens: AccessTokens
        let configuration: ServerConfiguration
        let deadlines: SessionDeadlines

        init(sync: SyncService, tokens: AccessTokens, configuration: ServerConfiguration) {
            self.sync = sync
            self.tokens = tokens
            self.configuration = configuration
            self.deadlines = SessionDeadlines(
                heartbeatInterval: configuration.heartbeatInterval, clock: configuration.clock)
        }
    }

    let id = UUID()
    let environment: Environment
    let headerToken: String?
    /// The connection's logger, shared with the request (no copy per session).
    let connectionLogger: Logger
    /// The logger with the session's id as metadata, made when something is logged: a copy of
    /// the logger with metadata of its own per session cost about 750 bytes of every idle
    /// connection (issue 18, docs/benchmarks.md "Idle connections").
    var logger: Logger {
        var logger = connectionLogger
        logger[metadataKey: "session"] = .string(id.uuidString.lowercased())
        return logger
    }
    var sync: SyncService { environment.sync }
    var tokens: AccessTokens { environment.tokens }

    init(environment: Environment, headerToken: String?, logger: Logger) {
        self.environment = environment
        self.headerToken = headerToken
        self.connectionLogger = logger
    }

    convenience init(
        sync: SyncService, tokens: AccessTokens, configuration: ServerConfiguration, headerToken: String?,
        logger: Logger
    ) {
        self.init(
            environment: Environment(sync: sync, tokens: tokens, configuration: configuration),
            headerToken: headerToken, logger: logger)
    }

    /// The session's deadline (``SessionDeadlines`` enforces it): the hello deadline, then
    /// the token's expiry.
    struct Shared {
        var deadline: Date
        var deadlineCode: ErrorCode
    }

    /// Serves the connection until the client leaves or the session closes it.
    ///
    /// The reading runs in the caller's task and the writing in an ``Outbox`` writer that exists
    /// only while something is queued: an idle session holds no task of its own, nor a shutdown
    /// handler (``SyncSessions/closeOnShutdown(timeout:)`` closes every session through the
    /// hub; issue 18, docs/benchmarks.md "Idle connections").
    /// - Parameter close: closes the connection without a handshake (on shutdown, for a client
    ///   that does not answer the 1001 close in time).
    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, close: @escaping @Sendable () -> Void)
        async throws
    {
        let metrics = sync.metrics
        let continuation = Outbox(
            limit: environment.configuration.maxQueuedBytesPerSession,
            write: { item in
                switch item {
                case .message(let message):
                    metrics.messagesOut.increment()
                    try await outbound.write(.text(message.jsonString))
                case .text(let text):
                    metrics.messagesOut.increment()
                    try await outbound.write(.text(text))
                case .close(let code, let reason):
                    try await outbound.close(.init(codeNumber: Int(code)), reason: reason)
                case .heartbeat:
                    try await outbound.write(.pong)
                }
            }, closeConnection: close)
        let shared = NIOLockedValueBox(
            Shared(
                deadline: environment.configuration.clock.now().addingTimeInterval(
                    environment.configuration.helloTimeout.timeInterval),
                deadlineCode: .unauthenticated))
        sync.hub.track(session: id, continuation: continuation)
        sync.metrics.connections.increment()
        defer {
            sync.hub.leave(session: id)
            sync.metrics.connections.decrement()
            continuation.finish()
        }
        try await serve(inbound: inbound, continuation: continuation, shared: shared)
    }

    private func serve(inbound: WebSocketInboundStream, continuation: Outbox, shared: NIOLockedValueBox<Shared>)
        async throws
    {
        armTimer(shared, continuation)
        defer { environment.deadlines.unwatch(id) }
        var state = State()
        for try await message in inbound.messages(maxSize: environment.configuration.limits.maxMessageBytes) {
            sync.metrics.messagesIn.increment()
            let keepGoing = try await handleAside(message, state: &state, shared: shared, continuation: continuation)
            // A client that does not read what it asked for: stop reading it too.
            if !keepGoing || continuation.overflowed { break }
        }
        // The reader ended: let the writer send what is queued (and a close), within a bound.
        await continuation.finishAndWait(upTo: .seconds(5))
    }

    /// ``handle(_:state:shared:continuation:)`` in a child task that ends with it. A task keeps
    /// the memory its deepest call needed until it ends (the concurrency runtime's task
    /// allocator keeps its slabs), and verifying a token, reading the store or merging a push
    /// goes deep: handled in the reading task, that memory stayed with every idle connection
    /// for its whole life (issue 18, docs/benchmarks.md "Idle connections").
    private func handleAside(
        _ message: WebSocketMessage, state: inout State, shared: NIOLockedValueBox<Shared>, continuation: Outbox
    ) async throws -> Bool {
        let before = state
        let (keepGoing, after) = try await withThrowingTaskGroup(of: (Bool, State).self) { group in
            group.addTask {
                var state = before
                let keepGoing = try await self.handle(
                    message, state: &state, shared: shared, continuation: continuation)
                return (keepGoing, state)
            }
            return try await group.next()!
        }
        state = after
        return keepGoing
    }

    /// Has the session's deadline (changed in `shared`) enforced: called again whenever it changes.
    private func armTimer(_ shared: NIOLockedValueBox<Shared>, _ continuation: Outbox) {
        environment.deadlines.watch(id, shared: shared, continuation: continuation)
    }

    /// Per-connection state owned by the reading task.
    struct State {
        var userID: String?
        var device: String?
        /// The protocol the session speaks: 2 follows the user's shared spaces.
        var version: Int64 = 1
        var errors: [Date] = []
        var pushes: [Date] = []
    }

    /// Where one message's answers go: the session's outgoing stream, with the abuse limit.
    struct Replies {
        let continuation: Outbox
        let maxErrorsPerMinute: Int
        let session: SyncSession

        func send(_ message: ServerMessage) { continuation.yield(.message(message.json)) }

        /// Counts an error toward the abuse limit; false (and a 1008 close) when it is reached.
        func countError(_ state: inout State) -> Bool {
            let now = session.environment.configuration.clock.now()
            state.errors = state.errors.filter { now.timeIntervalSince($0) < 60 } + [now]
            guard state.errors.count < maxErrorsPerMinute else {
                session.logger.notice("closing session after repeated errors")
                continuation.yield(.close(code: 1008, reason: "too many errors"))
                return false
            }
            return true
        }

        /// Sends an error and counts it toward the abuse limit.
        func fail(_ error: ProtocolError, rid: RequestID? = nil, _ state: inout State) -> Bool {
            send(.error(ServerError(error, rid: rid)))
            return countError(&state)
        }

        /// Sends an error and closes the session with `closeCode`.
        func close(_ code: ErrorCode, _ text: String, closeCode: UInt16) -> Bool {
            send(.error(ServerError(ProtocolError(code, text))))
            continuation.yield(.close(code: closeCode, reason: text))
            return false
        }
    }

    /// Handles one message; false when the session is closing. Everything it sends goes to
    /// `continuation` (the deterministic simulation drives sessions through this directly).
    func handle(
        _ message: WebSocketMessage, state: inout State, shared: NIOLockedValueBox<Shared>,
        continuation: Outbox
    ) async throws -> Bool {
        let replies = Replies(
            continuation: continuation, maxErrorsPerMinute: environment.configuration.maxErrorsPerMinute, session: self)
        guard case .text(let text) = message else {
            return replies.fail(
                ProtocolError(.badRequest, "binary frames are not supported; send JSON text frames"), &state)
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(text)
        } catch {
            return replies.fail(ProtocolError(.badRequest, "the message is not valid JSON"), &state)
        }
        let rid = ClientMessage.requestID(of: value)
        let parsed: ClientMessage
        do {
            parsed = try ClientMessage.parse(value)
        } catch {
            return replies.fail(error, rid: rid, &state)
        }
        guard let userID = state.userID else {
            return try await hello(parsed, rid: rid, state: &state, shared: shared, replies: replies)
        }
        switch parsed {
        case .hello:
            return replies.fail(ProtocolError(.badRequest, "already authenticated"), rid: rid, &state)
        case .reauth(let token):
            return try await reauth(
                token: token, userID: userID, rid: rid, state: &state, shared: shared, replies: replies)
        case .pull(let since, let limit, let snapshot, let space):
            guard space == nil || state.version >= 2 else {
                return replies.fail(
                    ProtocolError(.badRequest, "space needs protocol 2"), rid: rid, &state)
            }
            do {
                replies.send(
                    .changes(
                        try await sync.pull(
                            userID: userID, since: since, limit: limit, snapshot: snapshot, space: space, rid: rid)))
            } catch let error as ProtocolError {
                return replies.fail(error, rid: rid, &state)
            }
            return true
        case .push(let changes):
            do {
                return try await push(changes, userID: userID, rid: rid, state: &state, replies: replies)
            } catch is AccountDeleted {
                // Deleted on a node whose notice this one missed: closed as the others were.
                return replies.close(.unauthenticated, SessionHub.accountDeleted, closeCode: 4001)
            }
        }
    }

    /// The first message must be a valid `hello`: the session is then authenticated.
    private func hello(
        _ message: ClientMessage, rid: RequestID?, state: inout State, shared: NIOLockedValueBox<Shared>,
        replies: Replies
    ) async throws -> Bool {
        guard case .hello(let version, let token, let device, _) = message else {
            return replies.fail(ProtocolError(.unauthenticated, "send hello first"), rid: rid, &state)
        }
        guard version == 1 || version == 2 else {
            return replies.close(.unsupportedProtocol, "this server speaks protocols 1 and 2", closeCode: 4002)
        }
        guard let token = token ?? headerToken else {
            return replies.close(.unauthenticated, "no access token", closeCode: 4001)
        }
        let verified: VerifiedToken
        do {
            verified = try await tokens.verify(token)
        } catch {
            return replies.close(
                error.isExpired ? .tokenExpired : .unauthenticated,
                error.isExpired ? "the access token expired" : "invalid access token", closeCode: 4001)
        }
        guard let (user, seq) = try await sync.store.userAndSeq(id: verified.userID), !user.disabled else {
            return replies.close(.unauthenticated, "invalid access token", closeCode: 4001)
        }
        // One account cannot hold every connection: the newest beyond the cap is refused.
        guard sync.hub.sessionCount(user: verified.userID) < environment.configuration.maxSessionsPerUser else {
            return replies.close(
                .rateLimited,
                "too many sync connections for this user (at most \(environment.configuration.maxSessionsPerUser)); close another first",
                closeCode: 4029)
        }
        state.userID = verified.userID
        state.device = device
        state.version = version
        let generation = sync.hub.membershipGeneration(verified.userID)
        let spaces = version >= 2 ? try await sync.store.spaces(userID: verified.userID) : []
        shared.withLockedValue {
            $0.deadline = verified.expiresAt
            $0.deadlineCode = .tokenExpired
        }
        armTimer(shared, replies.continuation)
        // `welcome` first: `change` messages only ever follow it. A change committed between
        // reading the seq (with the user, above) and joining is not broadcast to us, but the
        // client pulls after welcome and finds it there.
        replies.send(welcome(verified, seq: seq, version: version, spaces: spaces, rid: rid))
        sync.hub.join(
            user: verified.userID, session: id, continuation: replies.continuation, seenSeq: seq,
            signInSession: verified.sessionID)
        if version >= 2 {
            sync.hub.follow(session: id, spaces: Self.shared(spaces))
            // A membership change between the read above and following is told now (in the
            // user's membership turn, so that it cannot undo a newer one); read again only if
            // one was announced meanwhile.
            if sync.hub.membershipGeneration(verified.userID) != generation {
                try await sync.membershipTurns.run(verified.userID) {
                    let now = try await sync.store.spaces(userID: verified.userID)
                    if now.map(\.space.id) != spaces.map(\.space.id) || now.map(\.role) != spaces.map(\.role) {
                        sync.hub.membershipChanged(
                            user: verified.userID, spaces: Self.shared(now), message: Self.spacesMessage(now))
                    }
                }
            }
        }
        logger.info("session authenticated", metadata: ["user": .string(verified.userID)])
        return true
    }

    /// A new token for the same user keeps the session open past the old token's expiry.
    private func reauth(
        token: String, userID: String, rid: RequestID?, state: inout State, shared: NIOLockedValueBox<Shared>,
        replies: Replies
    ) async throws -> Bool {
        let verified: VerifiedToken
        do {
            verified = try await tokens.verify(token)
        } catch {
            return replies.fail(
                ProtocolError(error.isExpired ? .tokenExpired : .unauthenticated, "the new token is not valid"),
                rid: rid, &state)
        }
        guard verified.userID == userID else {
            return replies.close(.unauthenticated, "the token belongs to another user", closeCode: 4001)
        }
        shared.withLockedValue { $0.deadline = verified.expiresAt }
        armTimer(shared, replies.continuation)
        sync.hub.reauthenticated(user: userID, session: id, signInSession: verified.sessionID)
        let spaces = state.version >= 2 ? try await sync.store.spaces(userID: userID) : []
        replies.send(
            welcome(
                verified, seq: try await sync.store.latestSeq(userID: userID), version: state.version, spaces: spaces,
                rid: rid))
        return true
    }

    /// The shared spaces among `spaces`, with their latest `seq`.
    static func shared(_ spaces: [SpaceSummary]) -> [String: Int64] {
        Dictionary(spaces.filter { !$0.space.personal }.map { ($0.space.id, $0.seq) }, uniquingKeysWith: max)
    }

    /// `{"type":"spaces","spaces":[Space…]}`: the user's spaces, after their membership changed.
    static func spacesMessage(_ spaces: [SpaceSummary]) -> JSONValue {
        ["type": "spaces", "spaces": .array(spaces.map(\.json))]
    }

    /// Answers every change of a push, in order, unless the push is too large or too frequent.
    private func push(_ changes: [JSONValue], userID: String, rid: RequestID?, state: inout State, replies: Replies)
        async throws -> Bool
    {
        guard changes.count <= environment.configuration.limits.maxChangesPerPush else {
            return replies.fail(
                ProtocolError(
                    .tooLarge, "a push holds at most \(environment.configuration.limits.maxChangesPerPush) changes"),
                rid: rid, &state)
        }
        let now = environment.configuration.clock.now()
        state.pushes = state.pushes.filter { now.timeIntervalSince($0) < 1 } + [now]
        if state.pushes.count > environment.configuration.maxPushesPerSecond {
            for reply in sync.rejectAll(
                changes: changes, error: ProtocolError(.rateLimited, "too many pushes; slow down"), rid: rid)
            {
                replies.send(reply)
            }
            return replies.countError(&state)
        }
        if state.version < 2, changes.contains(where: { $0["space"] != nil }) {
            for reply in sync.rejectAll(
                changes: changes, error: ProtocolError(.badRequest, "space needs protocol 2"), rid: rid)
            {
                replies.send(reply)
            }
            return replies.countError(&state)
        }
        for reply in try await sync.push(
            changes: changes, userID: userID, device: state.device, session: id, rid: rid, logger: logger)
        {
            replies.send(reply)
        }
        return true
    }

    /// The `welcome` message, reporting the user's latest `seq`.
    private func welcome(
        _ token: VerifiedToken, seq: Int64, version: Int64, spaces: [SpaceSummary], rid: RequestID?
    ) -> ServerMessage {
        var welcome = Welcome(
            user: token.userID, seq: seq, expiresAt: token.expiresAt, limits: environment.configuration.limits, rid: rid
        )
        welcome.version = version
        if version >= 2 { welcome.spaces = spaces.map(\.json) }
        return .welcome(welcome)
    }
}
