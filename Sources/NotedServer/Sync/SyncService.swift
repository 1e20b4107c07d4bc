import Crypto
import Foundation
import Logging
import NotedCore

/// Pull and push, shared by the WebSocket sessions and the HTTP endpoints.
struct SyncService: Sendable {
    /// What the sync path reads and writes: records and changes, and the account a session
    /// signs in as.
    let store: any RecordStore & AccountStore & SpaceStore
    let parser: ChangeParser
    let hub: SessionHub
    let metrics: ServerMetrics
    /// One push at a time per user.
    var turns = UserTurns()
    /// One membership update at a time per user and node, so that an older list never
    /// replaces a newer one.
    var membershipTurns = UserTurns()
    /// One pull at a time per user and node: a user's many connections cannot hold every
    /// database connection with pages at once (on PostgreSQL, the pool has 20).
    var pullTurns = UserTurns()
    /// The server's clock: the time a change's revision is saved at (the simulation's is virtual).
    var clock: @Sendable () -> Date = { Date() }

    var limits: Limits { parser.limits }

    /// A page of the user's personal space, or with `space` of a shared space the user is a
    /// member of (`not_found` otherwise, as for a space that does not exist).
    func pull(
        userID: String, since: Int64, limit: Int, snapshot: Bool = false, space: String? = nil, rid: RequestID?
    ) async throws -> ChangesPage {
        let shared = space.flatMap { $0 == userID ? nil : $0 }
        if let shared, try await store.role(spaceID: shared, userID: userID) == nil {
            throw ProtocolError(.notFound, "no such space")
        }
        let key = shared ?? userID
        var page = try await pullTurns.run(key) {
            try await store.changes(userID: key, since: since, limit: limit, snapshot: snapshot)
        }
        page.rid = rid
        page.space = shared
        return page
    }

    /// The space a raw change names (protocol 2's `"space"`).
    enum ChangeSpace: Equatable {
        case personal
        case shared(String)
        /// Not a space's id: the change is refused `bad_request`.
        case invalid
    }

    static func space(of raw: JSONValue, userID: String) -> ChangeSpace {
        guard let value = raw["space"], value != .null else { return .personal }
        guard let space = value.stringValue, !space.isEmpty, space.utf8.count <= ClientMessage.maxSpaceIDBytes else {
            return .invalid
        }
        return space == userID ? .personal : .shared(space)
    }

    /// Answers each change in order; commits are broadcast to the user's other sessions.
    /// Protocol 2: a change may name a shared space (`"space"`); the changes of one push are
    /// answered in order, each run of changes to one space pushed to that space, whose members'
    /// sessions hear of them (the author's role is checked in the push's transaction).
    func push(changes: [JSONValue], userID: String, device: String?, session: UUID?, rid: RequestID?, logger: Logger)
        async throws -> [ServerMessage]
    {
        var replies: [ServerMessage] = []
        var start = changes.startIndex
        while start < changes.endIndex {
            let space = Self.space(of: changes[start], userID: userID)
            var end = start + 1
            while end < changes.endIndex && Self.space(of: changes[end], userID: userID) == space { end += 1 }
            let run = Array(changes[start..<end])
            start = end
            let shared: String?
            switch space {
            case .personal:
                shared = nil
            case .invalid:
                replies += rejectAll(
                    changes: run, error: ProtocolError(.badRequest, "space must be a space's id"), rid: rid)
                continue
            case .shared(let id):
                // Not even a turn or a lock for a space the user is not in (the role is read
                // again in the push's transaction, where it counts).
                guard try await store.role(spaceID: id, userID: userID) != nil else {
                    replies += rejectAll(changes: run, error: ProtocolError(.notFound, "no such space"), rid: rid)
                    continue
                }
                shared = id
            }
            replies += try await turns.run(shared ?? userID) {
                try await pushInTurn(
                    changes: run, userID: userID, space: shared, device: device, session: session, rid: rid,
                    logger: logger)
            }
        }
        return replies
    }

    private func pushInTurn(
        changes: [JSONValue], userID: String, space: String?, device: String?, session: UUID?, rid: RequestID?,
        logger: Logger
    ) async throws -> [ServerMessage] {
        let started = ContinuousClock.now
        // Parsed first; the valid ones go to the store together, in order (one transaction on
        // SQLite, usually: group commit), and every answer takes its place.
        var parsed: [(change: Change, context: PushContext)] = []
        var replies: [ServerMessage?] = []
        var positions: [Int] = []
        for raw in changes {
            do throws(ProtocolError) {
                let change = try parser.parse(raw)
                if space != nil,
                    !PushAlgorithm.namedAttachments(change, schema: parser.schemas[change.collection]).isEmpty
                {
                    throw ProtocolError(
                        .invalidField,
                        "attachments in shared spaces are not supported yet (docs/protocol.md, \"Spaces\")")
                }
                let hash = SHA256.hash(data: Data(change.json.jsonString.utf8)).lowercaseHex
                let context = PushContext(
                    userID: space ?? userID, device: device, now: clock(), bodyHash: hash,
                    author: space == nil ? nil : userID)
                parsed.append((change: change, context: context))
                positions.append(replies.count)
                replies.append(nil)
            } catch {
                replies.append(ServerMessage.reject(Reject(error, identity: ChangeParser.identity(of: raw))))
                logger.debug("change rejected", metadata: ["code": .string(error.code.rawValue)])
            }
        }
        let results = try await store.push(parsed)
        for index in results.indices {
            let change = parsed[index].change
            let result: PushResult
            do {
                result = try results[index].get()
            } catch let error as ProtocolError {
                replies[positions[index]] = ServerMessage.reject(
                    Reject(error, identity: ChangeParser.identity(of: change.json)))
                logger.debug("change rejected", metadata: ["code": .string(error.code.rawValue)])
                continue
            }
            replies[positions[index]] = result.reply
            if let broadcast = result.broadcast {
                if let space {
                    hub.publish(space: space, message: Self.change(broadcast, space: space), except: session)
                } else {
                    hub.publish(user: userID, message: ServerMessage.change(broadcast).json, except: session)
                }
            }
            logger.debug(
                "change answered",
                metadata: [
                    "ccid": .string(change.ccid), "record": .string(change.id), "result": .string(result.status),
                ])
        }
        let elapsed = ContinuousClock.now - started
        return replies.map { reply in
            let reply = reply!
            metrics.countResult(reply)
            metrics.pushToAck.record(elapsed)
            return reply.with(rid: rid)
        }
    }

    /// Tells the users' protocol-2 sessions on this node their spaces now (a `spaces`
    /// message), and has them follow those spaces from now on.
    func membershipChanged(users: Set<String>) async {
        hub.bumpMembership(users)
        for user in hub.followingUsers(among: users) {
            try? await membershipTurns.run(user) {
                let spaces = try await store.spaces(userID: user)
                hub.membershipChanged(
                    user: user, spaces: SyncSession.shared(spaces), message: SyncSession.spacesMessage(spaces))
            }
        }
    }

    /// A `change` message of a shared space: the protocol-1 form with `"space"`.
    static func change(_ broadcast: Broadcast, space: String) -> JSONValue {
        var object = ServerMessage.change(broadcast).json.objectValue ?? [:]
        object["space"] = .string(space)
        return .object(object)
    }

    /// Rejects every change of a push with the same error (rate limiting).
    func rejectAll(changes: [JSONValue], error: ProtocolError, rid: RequestID?) -> [ServerMessage] {
        changes.map { raw in
            let reply = ServerMessage.reject(Reject(error, identity: ChangeParser.identity(of: raw), rid: rid))
            metrics.countResult(reply)
            return reply
        }
    }
}
