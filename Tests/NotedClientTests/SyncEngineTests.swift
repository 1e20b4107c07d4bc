import Foundation
import NotedCore
import TestSupport
import Testing

@testable import NotedClient

/// A scripted server: the test reads what the engine sends and answers by hand.
actor FakeServer: SyncTransport {
    private(set) var connections: [FakeConnection] = []
    var refuse = false
    private let wakeups = Wakeups()

    nonisolated func connect(to url: URL) async throws -> any SyncConnection {
        try await open()
    }

    private func open() throws -> FakeConnection {
        if refuse { throw NotedClientError(.server, "refused") }
        let connection = FakeConnection()
        connections.append(connection)
        wakeups.wake()
        return connection
    }

    func setRefuse(_ value: Bool) { refuse = value }

    /// Waits for the `index`-th connection.
    func connection(_ index: Int) async throws -> FakeConnection {
        let deadline = ContinuousClock.now + .seconds(10)
        while connections.count <= index {
            guard ContinuousClock.now < deadline else { throw TestFailure("no connection #\(index)") }
            await wakeups.wait(until: deadline)
        }
        return connections[index]
    }
}

final class FakeConnection: SyncConnection, Sendable {
    let messages: AsyncStream<JSONValue>
    private let continuation: AsyncStream<JSONValue>.Continuation
    private let outbox = Outbox()

    actor Outbox {
        var sent: [JSONValue] = []
        var closed = false
        let wakeups = Wakeups()
        func add(_ value: JSONValue) {
            sent.append(value)
            wakeups.wake()
        }
        func close() {
            closed = true
            wakeups.wake()
        }

        /// Whether the engine closed the connection by `deadline`.
        func waitClosed(before deadline: ContinuousClock.Instant) async -> Bool {
            while !closed {
                guard ContinuousClock.now < deadline else { return false }
                await wakeups.wait(until: deadline)
            }
            return true
        }

        /// The first message of `type` from `index` on, and the index after it; nil at `deadline`.
        func first(_ type: String, from index: Int, before deadline: ContinuousClock.Instant) async -> (JSONValue, Int)?
        {
            var index = index
            while true {
                while index < sent.count {
                    index += 1
                    if sent[index - 1]["type"]?.stringValue == type { return (sent[index - 1], index) }
                }
                guard ContinuousClock.now < deadline else { return nil }
                await wakeups.wait(until: deadline)
            }
        }
    }

    init() {
        (messages, continuation) = AsyncStream.makeStream(of: JSONValue.self)
    }

    func send(_ message: JSONValue) async throws {
        guard await !outbox.closed else { throw TestFailure("closed") }
        await outbox.add(message)
    }

    func close() async {
        await outbox.close()
        continuation.finish()
    }

    /// Waits until the engine closes the connection; fails after 10 seconds.
    func closed() async throws {
        guard await outbox.waitClosed(before: ContinuousClock.now + .seconds(10)) else {
            throw TestFailure("the engine kept the connection open")
        }
    }

    /// The server side: deliver a message to the engine.
    func deliver(_ message: JSONValue) {
        continuation.yield(message)
    }

    /// The next message of `type` the engine sent, in order.
    func next(_ type: String, after index: inout Int) async throws -> JSONValue {
        guard let (message, after) = await outbox.first(type, from: index, before: ContinuousClock.now + .seconds(10))
        else {
            throw TestFailure("the engine sent no \(type)")
        }
        index = after
        return message
    }

    /// Answers hello and the first pull: an empty account.
    func handshake(cursor: Int64 = 0, index: inout Int) async throws {
        let hello = try await next("hello", after: &index)
        deliver([
            "type": "welcome", "protocol": 1, "user": "u", "seq": 0, "rid": hello["rid"] ?? .null,
            "expiresAt": .string(Timestamp.format(Date().addingTimeInterval(3600))),
            "limits": [
                "maxMessageBytes": 1_000_000, "maxChangesPerPush": 100, "maxTextLength": 200_000, "maxTags": 100,
            ],
        ])
        let pull = try await next("pull", after: &index)
        deliver([
            "type": "changes", "records": [], "cursor": .int(cursor), "more": false, "reset": false,
            "rid": pull["rid"] ?? .null,
        ])
    }
}

func fakeClient(_ server: FakeServer, timeout: Duration = .seconds(2)) throws -> NotedClient {
    var configuration = NotedClient.Configuration()
    configuration.transport = server
    configuration.sync.debounce = .milliseconds(10)
    configuration.sync.requestTimeout = timeout
    configuration.sync.initialBackoff = .milliseconds(50)
    configuration.sync.maxBackoff = .milliseconds(100)
    let credentials = Credentials(
        server: "http://127.0.0.1:9", username: "u", userID: "u", accessToken: "token",
        refreshToken: "r", expiresAt: Date().addingTimeInterval(3600))
    return try NotedClient(
        store: LocalStore.inMemory(), server: URL(string: "http://127.0.0.1:9"), credentials: credentials,
        configuration: configuration)
}

@Suite struct SyncEngineTests {
    @Test func anUnansweredPushMeansADeadConnectionAndIsResentUnchanged() async throws {
        let server = FakeServer()
        let client = try fakeClient(server)
        await client.startSync()
        let first = try await server.connection(0)
        var index = 0
        try await first.handshake(index: &index)
        let note = try await client.create(NoteFields(title: "t", body: "b"))
        let push = try await first.next("push", after: &index)
        let change = try #require(push["changes"]?.arrayValue?.first)
        // No answer: after the request timeout the engine drops the connection and reconnects.
        try await first.closed()
        let second = try await server.connection(1)
        var index2 = 0
        try await second.handshake(index: &index2)
        let resend = try await second.next("push", after: &index2)
        #expect(resend["changes"]?.arrayValue?.first == change)
        second.deliver([
            "type": "ack", "ccid": change["ccid"] ?? .null, "collection": "notes", "id": .string(note.id), "rev": 1,
            "status": "duplicate", "rid": resend["rid"] ?? .null,
        ])
        try await eventually("the note is synced", on: [client]) { try await client.note(note.id)?.pending == false }
        #expect(try await client.note(note.id)?.rev == 1)
        await client.stopSync()
    }

    @Test func aBroadcastAtTheWrongRevisionMakesTheEnginePull() async throws {
        let server = FakeServer()
        let client = try fakeClient(server, timeout: .seconds(10))
        await client.startSync()
        let connection = try await server.connection(0)
        var index = 0
        try await connection.handshake(cursor: 4, index: &index)
        let id = UUID().uuidString.lowercased()
        connection.deliver([
            "type": "change", "collection": "notes", "id": .string(id), "rev": 2, "prevRev": 1, "op": "upsert",
            "fields": ["title": ["set": "x"]], "updatedAt": "2026-01-01T00:00:00.000Z",
        ])
        let pull = try await connection.next("pull", after: &index)
        #expect(pull["since"] == 4)
        let record: JSONValue = [
            "collection": "notes", "id": .string(id), "rev": 2, "seq": 5, "deleted": false,
            "fields": ["title": "x", "body": "y"], "createdAt": "2026-01-01T00:00:00.000Z",
            "updatedAt": "2026-01-01T00:00:00.000Z",
        ]
        connection.deliver([
            "type": "changes", "records": [record], "cursor": 5, "more": false, "reset": false,
            "rid": pull["rid"] ?? .null,
        ])
        try await eventually("the pulled note is stored", on: [client]) { try await client.note(id)?.body == "y" }
        #expect(try await client.store.cursor() == 5)
        // A create broadcast (prevRev 0) for an unknown note applies exactly, without a pull.
        let other = UUID().uuidString.lowercased()
        connection.deliver([
            "type": "change", "collection": "notes", "id": .string(other), "rev": 1, "prevRev": 0, "op": "upsert",
            "fields": ["title": ["set": "new"]], "updatedAt": "2026-01-01T00:00:00.000Z",
        ])
        try await eventually("the broadcast note is stored", on: [client]) {
            try await client.note(other)?.title == "new"
        }
        await client.stopSync()
    }

    @Test func anUnreachableServerIsRetriedAndSyncResumesWhenItReturns() async throws {
        let server = FakeServer()
        await server.setRefuse(true)
        let client = try fakeClient(server)
        let note = try await client.create(NoteFields(title: "queued"))
        await client.startSync()
        #expect(await client.waitUntilSynced(timeout: .seconds(5), failWhenOffline: true) == false)
        await server.setRefuse(false)
        let connection = try await server.connection(0)
        var index = 0
        try await connection.handshake(index: &index)
        let push = try await connection.next("push", after: &index)
        let change = try #require(push["changes"]?.arrayValue?.first)
        #expect(change["id"] == .string(note.id))
        await client.stopSync()
    }
}
