import Foundation
import NotedCore

/// Opens sync connections to a server: the seam between the sync engine and the network.
///
/// ``WebSocketTransport`` is the real one; tests may substitute their own.
public protocol SyncTransport: Sendable {
    /// Opens a WebSocket to `url` (`ws://host:port/v1/sync`).
    func connect(to url: URL) async throws -> any SyncConnection
}

/// One open sync connection.
public protocol SyncConnection: Sendable {
    /// Messages from the server in order; finishes when the connection closes.
    var messages: AsyncStream<JSONValue> { get }
    /// Sends one message as a JSON text frame.
    func send(_ message: JSONValue) async throws
    /// Sends a text frame of JSON encoded already (the sync engine's messages: a change is
    /// encoded once, when it is made). By default, decoded and sent as `send(_:)` does.
    func send(text: String) async throws
    /// Closes the connection; `messages` then finishes.
    func close() async
}

extension SyncConnection {
    public func send(text: String) async throws {
        try await send(JSONValue.parse(text))
    }
}

/// The WebSocket URL of a server's sync endpoint.
public func syncURL(server: URL) -> URL? {
    guard var components = URLComponents(url: server, resolvingAgainstBaseURL: false) else { return nil }
    switch components.scheme?.lowercased() {
    case "http": components.scheme = "ws"
    case "https": components.scheme = "wss"
    case "ws", "wss": break
    default: return nil
    }
    let base = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
    components.path = base + "/v1/sync"
    return components.url
}
