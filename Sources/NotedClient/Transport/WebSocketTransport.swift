import Foundation
import NotedCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

#if canImport(HummingbirdWSClient) && !NOTED_URLSESSION
    import HummingbirdWSClient
    import HummingbirdWSCompression
    import Logging

    /// The platform's WebSocket transport: NIO on Linux, URLSession on Apple platforms.
    public typealias WebSocketTransport = NIOWebSocketTransport

    /// The sync transport over hummingbird-websocket's NIO client (Linux, and any platform with NIO).
    public struct NIOWebSocketTransport: SyncTransport {
        public var connectTimeout: Duration
        public var maxFrameSize: Int

        public init(connectTimeout: Duration = .seconds(10), maxFrameSize: Int = 1 << 24) {
            self.connectTimeout = connectTimeout
            self.maxFrameSize = maxFrameSize
        }

        public func connect(to url: URL) async throws -> any SyncConnection {
            let (messages, messageContinuation) = AsyncStream.makeStream(of: JSONValue.self)
            let (ready, readyContinuation) = AsyncStream.makeStream(of: WebSocketOutboundWriter?.self)
            let maxFrameSize = maxFrameSize
            let task = Task {
                // permessage-deflate: a keystroke's push and its broadcast shrink from about 210 bytes
                // on the wire to about 60 and 30 (docs/benchmarks.md).
                var configuration = WebSocketClientConfiguration(
                    maxFrameSize: maxFrameSize,
                    extensions: [.perMessageDeflate(maxDecompressedFrameSize: maxFrameSize, minFrameSizeToCompress: 24)]
                )
                configuration.autoPing = .disabled
                var logger = Logger(label: "noted-client.websocket")
                logger.logLevel = .critical
                do {
                    try await WebSocketClient.connect(
                        url: url.absoluteString, configuration: configuration, logger: logger
                    ) { inbound, outbound, _ in
                        readyContinuation.yield(outbound)
                        for try await message in inbound.messages(maxSize: maxFrameSize) {
                            if case .text(let text) = message, let value = try? JSONValue.parse(text) {
                                messageContinuation.yield(value)
                            }
                        }
                    }
                } catch {}
                readyContinuation.yield(nil)
                readyContinuation.finish()
                messageContinuation.finish()
            }
            let timeout = connectTimeout
            let writer: WebSocketOutboundWriter? = await withTaskGroup(of: WebSocketOutboundWriter??.self) { group in
                group.addTask {
                    var iterator = ready.makeAsyncIterator()
                    return .some(await iterator.next() ?? nil)
                }
                group.addTask {
                    try? await Task.sleep(for: timeout)
                    return .none
                }
                let first = await group.next() ?? .none
                group.cancelAll()
                return first ?? nil
            }
            guard let writer else {
                task.cancel()
                throw NotedClientError(.server, "cannot open a sync connection to \(url.absoluteString)")
            }
            return WebSocketConnection(messages: messages, writer: writer, task: task)
        }
    }

    struct WebSocketConnection: SyncConnection {
        let messages: AsyncStream<JSONValue>
        let writer: WebSocketOutboundWriter
        let task: Task<Void, Never>

        func send(_ message: JSONValue) async throws {
            try await send(text: message.jsonString)
        }

        func send(text: String) async throws {
            try await writer.write(.text(text))
        }

        func close() async {
            try? await writer.close(.normalClosure, reason: nil)
            // A dead peer never answers the close handshake: do not wait for it.
            task.cancel()
        }
    }

#else

    /// The platform's WebSocket transport: NIO on Linux, URLSession on Apple platforms.
    public typealias WebSocketTransport = URLSessionWebSocketTransport

#endif

/// The sync transport over `URLSessionWebSocketTask` (the default on Apple platforms; also
/// works with swift-corelibs-foundation on Linux).
public struct URLSessionWebSocketTransport: SyncTransport {
    public var connectTimeout: Duration

    public init(connectTimeout: Duration = .seconds(10), maxFrameSize: Int = 1 << 24) {
        self.connectTimeout = connectTimeout
    }

    public func connect(to url: URL) async throws -> any SyncConnection {
        let task = URLSession.shared.webSocketTask(with: url)
        task.maximumMessageSize = 1 << 24
        task.resume()
        // A ping answered means the handshake is done; no answer in time means no connection.
        let opened = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    task.sendPing { error in continuation.resume(returning: error == nil) }
                }
            }
            group.addTask { [connectTimeout] in
                try? await Task.sleep(for: connectTimeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        guard opened else {
            task.cancel(with: .goingAway, reason: nil)
            throw NotedClientError(.server, "cannot open a sync connection to \(url.absoluteString)")
        }
        let (messages, continuation) = AsyncStream.makeStream(of: JSONValue.self)
        let reader = Task {
            while !Task.isCancelled {
                guard let message = try? await task.receive() else { break }
                if case .string(let text) = message, let value = try? JSONValue.parse(text) {
                    continuation.yield(value)
                }
            }
            continuation.finish()
        }
        return URLSessionConnection(messages: messages, task: task, reader: reader)
    }
}

struct URLSessionConnection: SyncConnection, @unchecked Sendable {
    // URLSessionWebSocketTask is thread-safe (Foundation documents its methods as callable from any thread).
    let messages: AsyncStream<JSONValue>
    let task: URLSessionWebSocketTask
    let reader: Task<Void, Never>

    func send(_ message: JSONValue) async throws {
        try await send(text: message.jsonString)
    }

    func send(text: String) async throws {
        try await task.send(.string(text))
    }

    func close() async {
        task.cancel(with: .normalClosure, reason: nil)
        reader.cancel()
    }
}
