import Foundation
import NIOCore
import NIOWebSocket
import NotedCore
import Testing

@testable import NotedServer

/// Every bad input gets its documented answer and changes nothing.
@Suite struct BadInputTests {
    static let backends = Backend.available

    /// A server, a signed-in user with one note (rev 1) and an open session.
    func withSession(
        _ backend: Backend, configure: @escaping (inout ServerConfiguration) -> Void = { _ in },
        _ body: @escaping @Sendable (TestServer, TestServer.User, SyncConnection, String) async throws -> Void
    ) async throws {
        try await TestServer.with(backend, configure: configure) { server in
            let user = try await server.makeUser()
            let connection = try await server.connect(user)
            let id = uuid()
            let created = try await connection.push(
                change(id, baseRev: 0, ["title": ["set": "original"], "body": ["set": "a😀b"]]))
            #expect(created["status"] == "applied")
            try await body(server, user, connection, id)
            await connection.close()
        }
    }

    /// Sends raw text and expects an `error` with `code`; the session stays usable and nothing changed.
    func expectError(_ text: String, code: String, on connection: SyncConnection) async throws {
        try await connection.sendText(text)
        let error = try await connection.receive()
        #expect(error["type"] == "error", "\(error.jsonString)")
        #expect(error["code"] == .string(code), "\(error.jsonString)")
        #expect(error["message"]?.stringValue?.isEmpty == false)
        #expect(try await connection.latestSeq() == 1)
    }

    /// Pushes one change and expects a reject with `code`, and nothing changed.
    @discardableResult
    func expectReject(_ change: JSONValue, code: String, on connection: SyncConnection, seq: Int64 = 1) async throws
        -> JSONValue
    {
        let reply = try await connection.push(change)
        #expect(reply["type"] == "reject", "\(reply.jsonString)")
        #expect(reply["code"] == .string(code), "\(reply.jsonString)")
        #expect(try await connection.latestSeq() == seq)
        return reply
    }

    @Test(arguments: backends) func nonJSONIsAnErrorAndTheConnectionStays(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            try await expectError("this is not json", code: "bad_request", on: connection)
        }
    }

    @Test(arguments: backends) func truncatedJSONIsAnError(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            try await expectError(#"{"type":"pull","since":"#, code: "bad_request", on: connection)
        }
    }

    @Test(arguments: backends) func jsonNested100000DeepIsAnError(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
            try await expectError(deep, code: "bad_request", on: connection)
            let deepObject = String(repeating: #"{"a":"#, count: 100_000) + "1" + String(repeating: "}", count: 100_000)
            try await expectError(deepObject, code: "bad_request", on: connection)
        }
    }

    @Test(arguments: backends) func anUnknownTypeIsAnError(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            try await expectError(#"{"type":"subscribe"}"#, code: "unknown_type", on: connection)
            try await expectError(#"{"no":"type"}"#, code: "bad_request", on: connection)
            try await expectError(#"["type","pull"]"#, code: "bad_request", on: connection)
        }
    }

    @Test(arguments: backends) func wrongFieldTypesAreErrors(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            try await expectError(#"{"type":"pull","since":"0"}"#, code: "bad_request", on: connection)
            try await expectError(#"{"type":"pull","since":0,"limit":0}"#, code: "bad_request", on: connection)
            try await expectError(#"{"type":"pull","since":0,"limit":1001}"#, code: "bad_request", on: connection)
            try await expectError(#"{"type":"push","changes":{}}"#, code: "bad_request", on: connection)
            try await expectError(#"{"type":5}"#, code: "bad_request", on: connection)
            try await expectError(#"{"type":"pull","since":0,"rid":[1]}"#, code: "bad_request", on: connection)
        }
    }

    @Test(arguments: backends) func repeatedErrorsClose1008(backend: Backend) async throws {
        try await withSession(backend, configure: { $0.maxErrorsPerMinute = 5 }) { _, _, connection, _ in
            for _ in 0..<4 {
                try await connection.sendText("garbage")
                #expect(try await connection.receive()["code"] == "bad_request")
            }
            try await connection.sendText("garbage")
            #expect(try await connection.closeCode() == 1008)
        }
    }

    @Test(arguments: backends) func anInvalidUTF8FrameCloses1007(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            var buffer = ByteBuffer()
            buffer.writeBytes([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x7D])
            try await connection.sendFrame(WebSocketFrame(fin: true, opcode: .text, data: buffer))
            #expect(try await connection.closeCode() == 1007)
        }
    }

    @Test(arguments: backends) func anOversizedMessageCloses1009(backend: Backend) async throws {
        try await withSession(backend, configure: { $0.limits.maxMessageBytes = 4096 }) { _, _, connection, _ in
            try await connection.sendText(
                #"{"type":"pull","since":0,"pad":""# + String(repeating: "x", count: 5000) + #""}"#)
            #expect(try await connection.closeCode() == 1009)
        }
    }

    @Test(arguments: backends) func aBinaryFrameIsAnError(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            try await connection.sendFrame(
                WebSocketFrame(fin: true, opcode: .binary, data: ByteBuffer(string: #"{"type":"pull","since":0}"#)))
            let error = try await connection.receive()
            #expect(error["type"] == "error" && error["code"] == "bad_request")
            #expect(try await connection.latestSeq() == 1)
        }
    }

    static let badBaseRevs: [String] = ["-1", "9007199254740992", "1e300", "1.5", "\"1\"", "null"]

    @Test(arguments: backends, badBaseRevs) func aBadBaseRevIsRejected(backend: Backend, baseRev: String) async throws {
        try await withSession(backend) { _, _, connection, id in
            let text =
                #"{"type":"push","changes":[{"ccid":"\#(uuid())","collection":"notes","id":"\#(id)","baseRev":\#(baseRev),"op":"upsert","fields":{"title":{"set":"x"}}}]}"#
            try await connection.sendText(text)
            let reply = try await connection.receive(type: "reject")
            #expect(reply["code"] == "bad_request")
            #expect(try await connection.latestSeq() == 1)
        }
    }

    @Test(arguments: backends) func anIDThatIsNotAUUIDIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            try await expectReject(change("note-1", baseRev: 0), code: "bad_request", on: connection)
            try await expectReject(change(id.uppercased(), baseRev: 0), code: "bad_request", on: connection)
            try await expectReject(
                change(id, baseRev: 1, ccid: "not-a-uuid", ["title": ["set": "x"]]), code: "bad_request", on: connection
            )
        }
    }

    @Test(arguments: backends) func anUnknownCollectionIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            var value = change(uuid(), baseRev: 0).objectValue ?? [:]
            value["collection"] = "todos"
            try await expectReject(.object(value), code: "unknown_collection", on: connection)
        }
    }

    @Test(arguments: backends) func anUnknownFieldIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            try await expectReject(
                change(id, baseRev: 1, ["colour": ["set": "red"]]), code: "invalid_field", on: connection)
        }
    }

    static let wrongKinds: [JSONValue] = [
        ["tags": ["set": "x"]], ["tags": ["set": ["a", "a"]]], ["tags": ["add": [1]]], ["pinned": ["set": "yes"]],
        ["folder": ["set": 3]], ["title": ["add": ["x"]]], ["title": ["set": 5]], ["title": "plain"],
        ["trashed": ["set": nil]],
    ]

    @Test(arguments: backends, wrongKinds) func aWrongFieldKindIsRejected(backend: Backend, fields: JSONValue)
        async throws
    {
        try await withSession(backend) { _, _, connection, id in
            try await expectReject(change(id, baseRev: 1, fields), code: "invalid_field", on: connection)
        }
    }

    @Test(arguments: backends) func aDeltaThatDoesNotDecodeIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            for delta in ["=abc", "+%ZZ", "?3", "=-1"] {
                try await expectReject(
                    change(id, baseRev: 1, ["title": ["delta": .string(delta)]]), code: "invalid_delta", on: connection)
            }
        }
    }

    @Test(arguments: backends) func aDeltaWhoseLengthsDoNotFitTheBaseIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            try await expectReject(
                change(id, baseRev: 1, ["title": ["delta": "=100"]]), code: "invalid_delta", on: connection)
            try await expectReject(
                change(id, baseRev: 1, ["title": ["delta": "=3"]]), code: "invalid_delta", on: connection)
        }
    }

    @Test(arguments: backends) func aDeltaThatSplitsASurrogatePairIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            // "a😀b" is a, high surrogate, low surrogate, b in UTF-16.
            try await expectReject(
                change(id, baseRev: 1, ["body": ["delta": "=2\t+x\t=2"]]), code: "invalid_delta", on: connection)
            try await expectReject(
                change(id, baseRev: 1, ["body": ["delta": "=2\t-2"]]), code: "invalid_delta", on: connection)
        }
    }

    @Test(arguments: backends) func aNulCharacterInTextIsStoredFaithfully(backend: Backend) async throws {
        try await withSession(backend) { server, user, connection, id in
            try await connection.sendText(
                #"{"type":"push","changes":[{"ccid":"\#(uuid())","collection":"notes","id":"\#(id)","baseRev":1,"op":"upsert","fields":{"body":{"set":"x\u0000y"}}}]}"#
            )
            #expect(try await connection.receive(type: "ack")["status"] == "applied")
            let record = try await server.request(.get, "/v1/records/notes/\(id)", token: user.accessToken)
            #expect(record.json["fields"]?["body"] == "x\u{0}y")
            let page = try await connection.pull(since: 1)
            #expect(page["records"]?[0]?["fields"]?["body"] == "x\u{0}y")
        }
    }

    @Test(arguments: backends) func anotherUsersRecordIsIndistinguishableFromAMissingOne(backend: Backend) async throws
    {
        try await withSession(backend) { server, _, _, id in
            let intruder = try await server.makeUser()
            let connection = try await server.connect(intruder)
            let theirs = try await connection.push(change(id, baseRev: 1, ["title": ["set": "mine now"]]))
            let missing = try await connection.push(change(uuid(), baseRev: 1, ["title": ["set": "mine now"]]))
            #expect(theirs["code"] == "not_found")
            #expect(theirs["message"] == missing["message"])
            #expect(theirs["current"] == nil)
            let read = try await server.request(.get, "/v1/records/notes/\(id)", token: intruder.accessToken)
            let readMissing = try await server.request(.get, "/v1/records/notes/\(uuid())", token: intruder.accessToken)
            #expect(read.status == .notFound && read.json == readMissing.json)
            let revisions = try await server.request(
                .get, "/v1/records/notes/\(id)/revisions", token: intruder.accessToken)
            #expect(revisions.status == .notFound)
            #expect(try await connection.latestSeq() == 0)
            await connection.close()
        }
    }

    @Test(arguments: backends) func aReplayedCCIDIsDuplicateOrReused(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            let ccid = uuid()
            let edit = change(id, baseRev: 1, ccid: ccid, ["title": ["set": "edited"]])
            #expect(try await connection.push(edit)["status"] == "applied")
            let again = try await connection.push(edit)
            #expect(again["status"] == "duplicate" && again["rev"] == 2)
            try await expectReject(
                change(id, baseRev: 1, ccid: ccid, ["title": ["set": "other"]]), code: "ccid_reused", on: connection,
                seq: 2)
        }
    }

    @Test(arguments: backends) func aBaseRevAheadOfTheServerIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            let reply = try await expectReject(
                change(id, baseRev: 7, ["title": ["set": "x"]]), code: "invalid_version", on: connection)
            #expect(reply["current"]?["rev"] == 1)
        }
    }

    @Test(arguments: backends) func baseRevZeroForAnExistingRecordIsRejected(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, id in
            let reply = try await expectReject(
                change(id, baseRev: 0, ["title": ["set": "x"]]), code: "already_exists", on: connection)
            #expect(reply["current"]?["fields"]?["title"] == "original")
        }
    }

    @Test(arguments: backends) func anEditToAPurgedRecordIsGone(backend: Backend) async throws {
        try await withSession(backend) { server, user, connection, id in
            #expect(try await connection.push(change(id, baseRev: 1, op: "delete"))["status"] == "applied")
            try await expectReject(
                change(id, baseRev: 2, ["title": ["set": "x"]]), code: "gone", on: connection, seq: 2)
            try await expectReject(
                change(id, baseRev: 0, ["title": ["set": "x"]]), code: "gone", on: connection, seq: 2)
            #expect(try await server.request(.get, "/v1/records/notes/\(id)", token: user.accessToken).status == .gone)
        }
    }

    @Test(arguments: backends) func tooManyChangesInOnePushIsOneErrorAndNothingApplied(backend: Backend) async throws {
        try await withSession(backend, configure: { $0.limits.maxChangesPerPush = 3 }) { _, _, connection, _ in
            let changes = (0..<4).map { _ in change(uuid(), baseRev: 0) }
            try await expectError(
                JSONValue.object(["type": "push", "changes": .array(changes)]).jsonString, code: "too_large",
                on: connection)
        }
    }

    @Test(arguments: backends) func textAndTagsBeyondTheLimitsAreTooLarge(backend: Backend) async throws {
        try await withSession(
            backend,
            configure: {
                $0.limits.maxTextLength = 10
                $0.limits.maxTags = 2
            }
        ) { _, _, connection, id in
            try await expectReject(
                change(id, baseRev: 1, ["body": ["set": "12345678901"]]), code: "too_large", on: connection)
            try await expectReject(
                change(id, baseRev: 1, ["tags": ["set": ["a", "b", "c"]]]), code: "too_large", on: connection)
            try await expectReject(
                change(id, baseRev: 1, ["title": ["delta": "=8\t+xxxxx"]]), code: "too_large", on: connection)
        }
    }

    @Test(arguments: backends) func aBurstOfPushesIsRateLimitedThenClosed(backend: Backend) async throws {
        try await withSession(backend) { _, _, connection, _ in
            for _ in 0..<1000 {
                do {
                    try await connection.send(["type": "push", "changes": [change(uuid(), baseRev: 0)]])
                } catch {
                    break
                }
            }
            var sawRateLimited = false
            while let message = try await connection.receiveOrEnd(timeout: .seconds(20)) {
                if message["code"] == "rate_limited" { sawRateLimited = true }
            }
            #expect(sawRateLimited)
            #expect(try await connection.closeCode() == 1008)
        }
    }
}
