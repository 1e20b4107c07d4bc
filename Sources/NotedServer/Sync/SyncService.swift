import Crypto
import Foundation
import Logging
import NotedCore

/// Pull and push, shared by the WebSocket sessions and the HTTP endpoints.
struct SyncService: Sendable {
    /// What the sync path reads and writes: records and changes, and the account a session
    /// signs in as.
    let store: any RecordStore & AccountStore
    let parser: ChangeParser
    let hub: SessionHub
    let metrics: ServerMetrics
    /// One push at a time per user.
    var turns = UserTurns()
    /// One pull at a time per user and node: a user's many connections cannot hold every
    /// database connection with pages at once (on PostgreSQL, the pool has 20).
    var pullTurns = UserTurns()
    /// The server's clock: the time a change's revision is saved at (the simulation's is virtual).
    var clock: @Sendable () -> Date = { Date() }

    var limits: Limits { parser.limits }

    func pull(userID: String, since: Int64, limit: Int, snapshot: Bool = false, rid: RequestID?) async throws
        -> ChangesPage
    {
        var page = try await pullTurns.run(userID) {
            try await store.changes(userID: userID, since: since, limit: limit, snapshot: snapshot)
        }
        page.rid = rid
        return page
    }

    /// Answers each change in order; commits are broadcast to the user's other sessions.
    func push(changes: [JSONValue], userID: String, device: String?, session: UUID?, rid: RequestID?, logger: Logger)
        async throws -> [ServerMessage]
    {
        try await turns.run(userID) {
            try await pushInTurn(
                changes: changes, userID: userID, device: device, session: session, rid: rid, logger: logger)
        }
    }

    private func pushInTurn(
        changes: [JSONValue], userID: String, device: String?, session: UUID?, rid: RequestID?, logger: Logger
    ) async throws -> [ServerMessage] {
        let started = ContinuousClock.now
        // Parsed first; the valid ones go to the store together, in order (one transaction on
        // SQLite, usually: group commit), and every answer takes its place.
        var parsed: [(change: Change, context: PushContext)] = []
        var replies: [ServerMessage?] = []
        var positions: [Int] = []
        for raw in changes {
            do {
                let change = try parser.parse(raw)
                let hash = SHA256.hash(data: Data(change.json.jsonString.utf8)).lowercaseHex
                parsed.append(
                    (change: change, context: PushContext(userID: userID, device: device, now: clock(), bodyHash: hash))
                )
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
                hub.publish(user: userID, message: ServerMessage.change(broadcast).json, except: session)
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

    /// Rejects every change of a push with the same error (rate limiting).
    func rejectAll(changes: [JSONValue], error: ProtocolError, rid: RequestID?) -> [ServerMessage] {
        changes.map { raw in
            let reply = ServerMessage.reject(Reject(error, identity: ChangeParser.identity(of: raw), rid: rid))
            metrics.countResult(reply)
            return reply
        }
    }
}
