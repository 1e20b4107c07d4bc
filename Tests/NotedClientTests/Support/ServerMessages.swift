import Foundation
import NotedCore
import Testing

@testable import NotedClient

/// A server message as a test writes it, JSON, read by the client's one decoder.
func decoded(_ json: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) -> ServerMessage {
    do {
        if let message = try ServerMessage.decode(json) { return message }
        Issue.record("not a server message: \(json.jsonString)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(error): \(json.jsonString)", sourceLocation: sourceLocation)
    }
    return .error(ServerError(ProtocolError(.badRequest, "a test message that does not decode")))
}

func decodedPage(_ json: JSONValue) -> ChangesPage {
    if case .changes(let page) = decoded(json) { return page }
    Issue.record("not a changes page: \(json.jsonString)")
    return ChangesPage(records: [], cursor: 0, more: false, reset: false)
}

func decodedAck(_ json: JSONValue) -> Ack {
    if case .ack(let ack) = decoded(json) { return ack }
    Issue.record("not an ack: \(json.jsonString)")
    return Ack(ccid: "", collection: "", id: "", rev: 0, status: .applied)
}

func decodedBroadcast(_ json: JSONValue) -> Broadcast {
    if case .change(let broadcast) = decoded(json) { return broadcast }
    Issue.record("not a change: \(json.jsonString)")
    return Broadcast(collection: "", id: "", rev: 0, prevRev: 0, op: .upsert, fields: [:], updatedAt: Date())
}

extension LocalStore {
    func applyAck(_ json: JSONValue) async throws -> StoreEffect {
        try await applyAck(decodedAck(json))
    }

    func applyReject(_ json: JSONValue) async throws -> StoreEffect {
        guard case .reject(let reject) = decoded(json) else { return StoreEffect() }
        return try await applyReject(reject)
    }

    func applyBroadcast(_ json: JSONValue, limits: Limits) async throws -> (applied: Bool, effect: StoreEffect) {
        try await applyBroadcast(decodedBroadcast(json), limits: limits)
    }
}

extension SyncStateMachine {
    mutating func received(_ json: JSONValue, now: Instant, date: Date = Date()) -> [Action] {
        received(decoded(json), now: now, date: date)
    }
}

extension OutboxChange {
    /// The change as the server reads it (`body` is its text, encoded once).
    var sent: JSONValue { (try? JSONValue.parse(body)) ?? .null }
}
