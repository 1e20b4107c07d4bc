import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import HummingbirdWSClient
import HummingbirdWSCompression
import LiveServerSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOWebSocket
import NotedCore
import TestSupport
import Testing

@testable import NotedServer

/// A live server on a free port over a fresh database, for one test.
struct TestServer: Sendable {
    let port: Int
    let client: any TestClientProtocol
    /// The database the node uses (set by the multi-node helpers).
    var database: DatabaseLocation? = nil

    /// Runs `body` against a live server; the server and database are removed afterwards.
    /// With a `clock`, the server's time is the test's (``ManualClock``).
    static func with(
        _ backend: Backend,
        clock: ManualClock? = nil,
        configure: (inout ServerConfiguration) -> Void = { _ in },
        logger customLogger: Logger? = nil,
        _ body: @Sendable (TestServer) async throws -> Void
    ) async throws {
        try await withDatabase(backend) { location in
            var configuration = LiveNode.configuration(location)
            if let clock { configuration.clock = clock.server }
            configure(&configuration)
            try await LiveNode.run(configuration, logger: customLogger) { client in
                guard let port = client.port else { throw TestSetupError("no port") }
                try await body(TestServer(port: port, client: client))
            }
        }
    }

    // MARK: HTTP

    struct HTTPResult: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var json: JSONValue
        /// The body as text (pages).
        var text: String = ""
    }

    func request(
        _ method: HTTPRequest.Method, _ path: String, json: JSONValue? = nil, body: String? = nil,
        token: String? = nil, headers: HTTPFields = [:]
    ) async throws -> HTTPResult {
        var headers = headers
        if let token { headers[.authorization] = "Bearer \(token)" }
        var buffer: ByteBuffer?
        if let json {
            headers[.contentType] = "application/json"
            buffer = ByteBuffer(string: json.jsonString)
        } else if let body {
            if headers[.contentType] == nil { headers[.contentType] = "application/x-www-form-urlencoded" }
            buffer = ByteBuffer(string: body)
        }
        let response = try await client.execute(uri: path, method: method, headers: headers, body: buffer)
        let value = (try? JSONValue.parse(response.body.readableBytesView)) ?? .null
        return HTTPResult(
            status: response.status, headers: response.headers, json: value, text: String(buffer: response.body))
    }

    /// A signed-in user.
    struct User: Sendable {
        var id: String
        var username: String
        var password: String
        var accessToken: String
        var refreshToken: String
    }

    func makeUser(_ name: String = "user-\(UUID().uuidString.prefix(8).lowercased())") async throws -> User {
        let password = "correct horse battery"
        let created = try await request(
            .post, "/v1/accounts", json: ["username": .string(name), "password": .string(password)])
        #expect(created.status == .created)
        let signIn = try await request(
            .post, "/v1/sessions", json: ["username": .string(name), "password": .string(password)])
        #expect(signIn.status == .ok)
        return User(
            id: created.json["user"]?["id"]?.stringValue ?? "", username: name, password: password,
            accessToken: signIn.json["access_token"]?.stringValue ?? "",
            refreshToken: signIn.json["refresh_token"]?.stringValue ?? "")
    }

    /// Another sign-in of `user` (another refresh-token family), with `password` if given.
    func signIn(_ user: User, password: String? = nil, device: String? = nil) async throws -> User {
        var body: [String: JSONValue] = [
            "username": .string(user.username), "password": .string(password ?? user.password),
        ]
        body["device"] = device.map(JSONValue.string)
        let signIn = try await request(.post, "/v1/sessions", json: .object(body))
        #expect(signIn.status == .ok, "\(signIn.json)")
        var other = user
        other.accessToken = signIn.json["access_token"]?.stringValue ?? ""
        other.refreshToken = signIn.json["refresh_token"]?.stringValue ?? ""
        return other
    }

    // MARK: WebSocket

    /// Opens a sync connection; with `user`, sends hello and waits for welcome.
    func connect(_ user: User? = nil, headers: HTTPFields = [:]) async throws -> SyncConnection {
        let connection = try await SyncConnection.open(port: port, headers: headers)
        if let user {
            try await connection.send([
                "type": "hello", "protocol": 1, "token": .string(user.accessToken),
                "device": .string(UUID().uuidString.lowercased()), "client": "tests/1",
            ])
            let welcome = try await connection.receive()
            #expect(welcome["type"] == "welcome")
        }
        return connection
    }
}

/// A real WebSocket client connection over a real socket.
/// Messages received on a connection, in order.
actor Mailbox {
    private var buffer: [JSONValue] = []
    private var ended = false
    private let wakeups = Wakeups()

    func put(_ value: JSONValue) {
        buffer.append(value)
        wakeups.wake()
    }

    func end() {
        ended = true
        wakeups.wake()
    }

    /// The next message, nil when the connection ended; throws after `timeout`.
    func take(timeout: Duration) async throws -> JSONValue? {
        let deadline = ContinuousClock.now + timeout
        while buffer.isEmpty && !ended {
            guard ContinuousClock.now < deadline else { throw TestSetupError("no message within \(timeout)") }
            await wakeups.wait(until: deadline)
        }
        guard !buffer.isEmpty else { return Optional<JSONValue>.none }
        return buffer.removeFirst()
    }
}

/// A real WebSocket client connection over a real socket.
final class SyncConnection: Sendable {
    private let mailbox: Mailbox
    private let writer: NIOLockedValueBox<WebSocketOutboundWriter?>
    private let task: Task<WebSocketCloseFrame?, any Error>

    private init(
        mailbox: Mailbox, writer: NIOLockedValueBox<WebSocketOutboundWriter?>,
        task: Task<WebSocketCloseFrame?, any Error>
    ) {
        self.mailbox = mailbox
        self.writer = writer
        self.task = task
    }

    static func open(port: Int, headers: HTTPFields = [:], deflate: Bool = false) async throws -> SyncConnection {
        let mailbox = Mailbox()
        let writer = NIOLockedValueBox<WebSocketOutboundWriter?>(nil)
        let (ready, readyContinuation) = AsyncStream.makeStream(of: Bool.self)
        var configuration = WebSocketClientConfiguration(
            maxFrameSize: 1 << 24, additionalHeaders: headers,
            extensions: deflate ? [.perMessageDeflate(maxDecompressedFrameSize: 1 << 24)] : [])
        configuration.validateUTF8 = false
        let task = Task {
            do {
                let frame = try await WebSocketClient.connect(
                    url: "ws://127.0.0.1:\(port)/v1/sync", configuration: configuration,
                    logger: Logger(label: "test-ws")
                ) { inbound, outbound, _ in
                    writer.withLockedValue { $0 = outbound }
                    readyContinuation.yield(true)
                    for try await message in inbound.messages(maxSize: 1 << 24) {
                        switch message {
                        case .text(let text):
                            await mailbox.put((try? JSONValue.parse(text)) ?? ["unparsable": .string(text)])
                        case .binary: await mailbox.put(["binary": true])
                        }
                    }
                }
                await mailbox.end()
                readyContinuation.yield(false)
                return frame
            } catch {
                await mailbox.end()
                readyContinuation.yield(false)
                throw error
            }
        }
        var readyIterator = ready.makeAsyncIterator()
        guard await readyIterator.next() == true else {
            _ = try await task.value
            throw TestSetupError("the WebSocket upgrade was refused")
        }
        return SyncConnection(mailbox: mailbox, writer: writer, task: task)
    }

    func send(_ value: JSONValue) async throws {
        try await sendText(value.jsonString)
    }

    func sendText(_ text: String) async throws {
        guard let writer = writer.withLockedValue({ $0 }) else { throw TestSetupError("not connected") }
        try await writer.write(.text(text))
    }

    func sendFrame(_ frame: WebSocketFrame) async throws {
        guard let writer = writer.withLockedValue({ $0 }) else { throw TestSetupError("not connected") }
        try await writer.write(.custom(frame))
    }

    /// The next message; throws after `timeout` or when the connection ended.
    func receive(timeout: Duration = .seconds(10)) async throws -> JSONValue {
        guard let message = try await receiveOrEnd(timeout: timeout) else { throw TestSetupError("connection closed") }
        return message
    }

    /// The next message, or nil when the connection ended.
    func receiveOrEnd(timeout: Duration = .seconds(10)) async throws -> JSONValue? {
        try await mailbox.take(timeout: timeout)
    }

    /// Asserts that nothing arrives within `duration`.
    func expectSilence(for duration: Duration = .milliseconds(500)) async throws {
        do {
            let message = try await receive(timeout: duration)
            Issue.record("unexpected message \(message.jsonString)")
        } catch is TestSetupError {}
    }

    /// Skips messages until one of `type` arrives.
    func receive(type: String, timeout: Duration = .seconds(10)) async throws -> JSONValue {
        while true {
            let message = try await receive(timeout: timeout)
            if message["type"]?.stringValue == type { return message }
        }
    }

    /// Waits for the server to close and returns its close code.
    func closeCode(timeout: Duration = .seconds(20)) async throws -> UInt16? {
        let frame = try await withThrowingTaskGroup(of: WebSocketCloseFrame??.self) { group in
            group.addTask { try await self.task.value }
            group.addTask {
                try await Task.sleep(for: timeout)
                return .some(nil)
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let frame else { throw TestSetupError("the connection did not close within \(timeout)") }
        return frame.map { UInt16(webSocketErrorCode: $0.closeCode) }
    }

    func close() async {
        if let writer = writer.withLockedValue({ $0 }) {
            try? await writer.close(.normalClosure, reason: nil)
        }
        _ = try? await closeCode(timeout: .seconds(5))
    }
}

extension UInt16 {
    init(webSocketErrorCode code: WebSocketErrorCode) {
        var buffer = ByteBuffer()
        buffer.write(webSocketErrorCode: code)
        self = buffer.readInteger(as: UInt16.self) ?? 0
    }
}

/// A fresh lower-case UUID.
func uuid() -> String { UUID().uuidString.lowercased() }

/// A change as sent in a push.
func change(_ id: String, baseRev: Int64, op: String = "upsert", ccid: String = uuid(), _ fields: JSONValue = [:])
    -> JSONValue
{
    [
        "ccid": .string(ccid), "collection": "notes", "id": .string(id), "baseRev": .int(baseRev), "op": .string(op),
        "fields": fields,
    ]
}

extension SyncConnection {
    /// Pushes changes and returns the answers (ack or reject), one per change, in order.
    func push(_ changes: [JSONValue], rid: JSONValue? = nil) async throws -> [JSONValue] {
        var message: [String: JSONValue] = ["type": "push", "changes": .array(changes)]
        message["rid"] = rid
        try await send(.object(message))
        var answers: [JSONValue] = []
        while answers.count < changes.count {
            let reply = try await receive()
            switch reply["type"]?.stringValue {
            case "ack", "reject": answers.append(reply)
            case "error": throw TestSetupError("push answered with error \(reply.jsonString)")
            default: continue
            }
        }
        return answers
    }

    func push(_ change: JSONValue) async throws -> JSONValue {
        try await push([change])[0]
    }

    /// Pulls one page.
    func pull(since: Int64, limit: Int? = nil) async throws -> JSONValue {
        var message: [String: JSONValue] = ["type": "pull", "since": .int(since)]
        message["limit"] = limit.map { .int(Int64($0)) }
        try await send(.object(message))
        return try await receive(type: "changes")
    }

    /// The user's latest seq as the feed reports it.
    func latestSeq() async throws -> Int64 {
        var since: Int64 = 0
        while true {
            let page = try await pull(since: since, limit: 1000)
            since = page["cursor"]?.intValue ?? since
            if page["more"] != true { return since }
        }
    }
}

extension TestServer {
    /// Two live server nodes sharing one fresh database.
    static func withTwoNodes(
        _ backend: Backend, _ body: @escaping @Sendable (TestServer, TestServer) async throws -> Void
    ) async throws {
        try await withDatabase(backend) { location in
            let first = try await makeNode(location)
            let second = try await makeNode(location)
            try await LiveNode.run(first) { firstClient in
                try await LiveNode.run(second) { secondClient in
                    guard let firstPort = firstClient.port, let secondPort = secondClient.port else {
                        throw TestSetupError("no port")
                    }
                    try await body(
                        TestServer(port: firstPort, client: firstClient, database: location),
                        TestServer(port: secondPort, client: secondClient, database: location))
                }
            }
        }
    }

    /// One server node on `location`, as every node of a multi-node test is configured.
    static func makeNode(
        _ location: DatabaseLocation, configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> some ApplicationProtocol {
        var configuration = LiveNode.configuration(location)
        configuration.issuer = "http://noted.test"
        // The multi-node tests push one change per message, faster than a real client would.
        configuration.maxPushesPerSecond = 10_000
        configure(&configuration)
        return try await buildApplication(configuration, logger: LiveNode.logger())
    }

    /// Runs `body` with a live node on `location`; the node shuts down gracefully afterwards.
    static func withNode<T: Sendable>(
        _ location: DatabaseLocation, configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: @escaping @Sendable (TestServer) async throws -> T
    ) async throws -> T {
        try await LiveNode.run(try await makeNode(location, configure: configure)) { client in
            guard let port = client.port else { throw TestSetupError("no port") }
            return try await body(TestServer(port: port, client: client, database: location))
        }
    }
}
