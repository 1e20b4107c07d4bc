import Crypto
import Foundation
import Logging
import NotedCore

/// Pull and push, shared by the WebSocket sessions and the HTTP endpoints.
struct SyncService: Sendable {
    let store: any NotedStore
    let parser: ChangeParser
    let hub: SessionHub
    let metrics: ServerMetrics
    /// One push at a time per user.
    var turns = UserTurns()
    /// One pull at a time per user and node: a user's many connections cannot hold every
    /// database connection with pages at once (on PostgreSQL, the pool has 20).
    var pullTurns = UserTurns()

    var limits: Limits { parser.limits }

    func pull(userID: String, since: Int64, limit: Int, snapshot: Bool = false, rid: RequestID?) async throws -> JSONValue {
        var page = try await pullTurns.run(userID) { try await store.changes(userID: userID, since: since, limit: limit, snapshot: snapshot) }
        page.rid = rid
        return ServerMessage.changes(page).json
    }

    /// Answers each change in order; commits are broadcast to the user's other sessions.
    func push(changes: [JSONValue], userID: String, device: String?, session: UUID?, rid: RequestID?, logger: Logger) async throws -> [JSONValue] {
        try await turns.run(userID) {
            try await pushInTurn(changes: changes, userID: userID, device: device, session: session, rid: rid, logger: logger)
        }
    }

    private func pushInTurn(changes: [JSONValue], userID: String, device: String?, session: UUID?, rid: RequestID?, logger: Logger) async throws -> [JSONValue] {
        var replies: [JSONValue] = []
        replies.reserveCapacity(changes.count)
        for raw in changes {
            let started = ContinuousClock.now
            let reply: ServerMessage
            do {
                let change = try parser.parse(raw)
                let hash = SHA256.hash(data: Data(change.json.jsonString.utf8)).lowercaseHex
                let result = try await store.push(change, context: PushContext(userID: userID, device: device, now: Date(), bodyHash: hash))
                reply = result.reply
                if let broadcast = result.broadcast {
                    hub.publish(user: userID, message: ServerMessage.change(broadcast).json, except: session)
                }
                logger.debug("change answered", metadata: [
                    "ccid": .string(change.ccid), "record": .string(change.id), "result": .string(result.status),
                ])
            } catch let error as ProtocolError {
                reply = .reject(Reject(error, identity: ChangeParser.identity(of: raw)))
                logger.debug("change rejected", metadata: ["code": .string(error.code.rawValue)])
            }
            metrics.countResult(reply)
            metrics.pushToAck.record(ContinuousClock.now - started)
            replies.append(reply.with(rid: rid).json)
        }
        return replies
    }

    /// Rejects every change of a push with the same error (rate limiting).
    func rejectAll(changes: [JSONValue], error: ProtocolError, rid: RequestID?) -> [JSONValue] {
        changes.map { raw in
            let reply = ServerMessage.reject(Reject(error, identity: ChangeParser.identity(of: raw), rid: rid))
            metrics.countResult(reply)
            return reply.json
        }
    }
}
