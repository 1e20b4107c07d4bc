import Foundation
import NotedCore
import Testing

/// Pins the wire form of every protocol message (docs/protocol.md sections 3–5): each typed
/// message encodes to exactly these bytes (keys sorted, as `jsonString` writes them), and the
/// one decoder reads these bytes back into the same value. A change to either side of the
/// contract fails here first.
@Suite struct WireGoldenTests {
    static let time = Date(timeIntervalSince1970: 1_785_000_000.123)
    static let timeText = "2026-07-25T17:20:00.123Z"
    static let id = "6f1c2a9e-0b7d-4c1e-9a3f-5d2e8b7c6a10"
    static let ccid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    static let device = "11111111-2222-4333-8444-555555555555"
    static let record = Record(
        collection: "notes", id: id, rev: 3, seq: 17, deleted: false,
        fields: ["title": "Groceries", "body": "milk", "tags": ["home"], "pinned": true],
        createdAt: time, updatedAt: time)

    static let server: [(String, ServerMessage, String)] = [
        (
            "welcome", .welcome(Welcome(user: "u1", seq: 42, expiresAt: time, limits: Limits(), rid: .int(1))),
            #"{"expiresAt":"\#(timeText)","limits":{"maxChangesPerPush":100,"maxMessageBytes":1048576,"maxTagLength":200,"maxTags":100,"maxTextLength":200000},"protocol":1,"rid":1,"seq":42,"type":"welcome","user":"u1"}"#
        ),
        (
            "changes",
            .changes(ChangesPage(records: [record], cursor: 17, more: true, reset: false, rid: .string("p1"))),
            #"{"cursor":17,"more":true,"records":[{"collection":"notes","createdAt":"\#(timeText)","deleted":false,"fields":{"body":"milk","pinned":true,"tags":["home"],"title":"Groceries"},"id":"\#(id)","rev":3,"seq":17,"updatedAt":"\#(timeText)"}],"reset":false,"rid":"p1","type":"changes"}"#
        ),
        (
            "ack applied",
            .ack(Ack(ccid: ccid, collection: "notes", id: id, rev: 4, seq: 18, status: .applied, rid: .int(7))),
            #"{"ccid":"\#(ccid)","collection":"notes","id":"\#(id)","rev":4,"rid":7,"seq":18,"status":"applied","type":"ack"}"#
        ),
        (
            "ack merged",
            .ack(
                Ack(
                    ccid: ccid, collection: "notes", id: id, rev: 5, seq: 19, status: .merged,
                    fields: ["title": "Groceries", "body": "milk and eggs"], conflicts: ["body"])),
            #"{"ccid":"\#(ccid)","collection":"notes","conflicts":["body"],"fields":{"body":"milk and eggs","title":"Groceries"},"id":"\#(id)","rev":5,"seq":19,"status":"merged","type":"ack"}"#
        ),
        (
            "ack duplicate", .ack(Ack(ccid: ccid, collection: "notes", id: id, rev: 4, seq: 18, status: .duplicate)),
            #"{"ccid":"\#(ccid)","collection":"notes","id":"\#(id)","rev":4,"seq":18,"status":"duplicate","type":"ack"}"#
        ),
        (
            "reject",
            .reject(
                Reject(
                    ProtocolError(.gone, "the record was purged"),
                    identity: ChangeIdentity(ccid: ccid, collection: "notes", id: id), current: record, rid: .int(7))),
            #"{"ccid":"\#(ccid)","code":"gone","collection":"notes","current":{"collection":"notes","createdAt":"\#(timeText)","deleted":false,"fields":{"body":"milk","pinned":true,"tags":["home"],"title":"Groceries"},"id":"\#(id)","rev":3,"seq":17,"updatedAt":"\#(timeText)"},"id":"\#(id)","message":"the record was purged","rid":7,"type":"reject"}"#
        ),
        (
            "change",
            .change(
                Broadcast(
                    collection: "notes", id: id, rev: 4, prevRev: 3, seq: 18, op: .upsert,
                    fields: ["body": ["delta": "=4\t+ and eggs"], "tags": ["add": ["shop"], "remove": []]],
                    updatedAt: time)),
            #"{"collection":"notes","fields":{"body":{"delta":"=4\t+ and eggs"},"tags":{"add":["shop"],"remove":[]}},"id":"\#(id)","op":"upsert","prevRev":3,"rev":4,"seq":18,"type":"change","updatedAt":"\#(timeText)"}"#
        ),
        (
            "change purge",
            .change(
                Broadcast(
                    collection: "notes", id: id, rev: 5, prevRev: 4, seq: 20, op: .delete, fields: [:], updatedAt: time)
            ),
            #"{"collection":"notes","fields":{},"id":"\#(id)","op":"delete","prevRev":4,"rev":5,"seq":20,"type":"change","updatedAt":"\#(timeText)"}"#
        ),
        (
            "error", .error(ServerError(ProtocolError(.tokenExpired, "the access token expired"))),
            #"{"code":"token_expired","message":"the access token expired","type":"error"}"#
        ),
    ]

    @Test(arguments: server.indices)
    func serverMessagesEncodeToTheirGoldenBytesAndBack(index: Int) throws {
        let (name, message, golden) = Self.server[index]
        #expect(message.json.jsonString == golden, "\(name)")
        #expect(try ServerMessage.decode(JSONValue.parse(golden)) == message, "\(name)")
    }

    static let client: [(String, ClientMessage, RequestID?, String)] = [
        (
            "hello", .hello(protocol: 1, token: "tok", device: device, client: "noted-cli/0.1.0"), .int(1),
            #"{"client":"noted-cli/0.1.0","device":"\#(device)","protocol":1,"rid":1,"token":"tok","type":"hello"}"#
        ),
        (
            "hello, token in the header", .hello(protocol: 1, token: nil, device: device, client: nil), nil,
            #"{"device":"\#(device)","protocol":1,"type":"hello"}"#
        ),
        ("reauth", .reauth(token: "tok2"), .int(9), #"{"rid":9,"token":"tok2","type":"reauth"}"#),
        ("pull", .pull(since: 17, limit: 500), .string("p"), #"{"limit":500,"rid":"p","since":17,"type":"pull"}"#),
        (
            "push",
            .push(changes: [
                [
                    "ccid": .string(ccid), "collection": "notes", "id": .string(id), "baseRev": 3, "op": "upsert",
                    "fields": ["body": ["delta": "=4\t+ and eggs"]],
                ]
            ]), .int(2),
            #"{"changes":[{"baseRev":3,"ccid":"\#(ccid)","collection":"notes","fields":{"body":{"delta":"=4\t+ and eggs"}},"id":"\#(id)","op":"upsert"}],"rid":2,"type":"push"}"#
        ),
    ]

    @Test(arguments: client.indices)
    func clientMessagesEncodeToTheirGoldenBytesAndBack(index: Int) throws {
        let (name, message, rid, golden) = Self.client[index]
        #expect(message.json(rid: rid).jsonString == golden, "\(name)")
        let parsed = try JSONValue.parse(golden)
        #expect(try ClientMessage.parse(parsed) == message, "\(name)")
        #expect(ClientMessage.requestID(of: parsed) == rid, "\(name)")
    }

    /// A client sends each change as the text it encoded once, spliced into the push.
    @Test func aPushOfEncodedChangesIsThePushOfThoseChanges() throws {
        let change = Change(
            ccid: Self.ccid, collection: "notes", id: Self.id, baseRev: 3, op: .upsert,
            fields: ["body": .textDelta("=4\t+ and eggs"), "tags": .setAddRemove(add: ["a"], remove: [])])
        let deletion = Change(ccid: Self.ccid, collection: "notes", id: Self.id, baseRev: 4, op: .delete, fields: [:])
        for rid in [RequestID.int(2), .string("p\"q"), nil] {
            let text = ClientMessage.pushText(changes: [change.json.jsonString, deletion.json.jsonString], rid: rid)
            let parsed = try JSONValue.parse(text)
            #expect(parsed == ClientMessage.push(changes: [change.json, deletion.json]).json(rid: rid))
            guard case .push(let changes) = try ClientMessage.parse(parsed) else {
                Issue.record("not a push: \(text)")
                continue
            }
            #expect(try changes.map { try ChangeParser().parse($0) } == [change, deletion])
        }
        #expect(try JSONValue.parse(ClientMessage.pushText(changes: [], rid: nil)) == ["type": "push", "changes": []])
    }

    @Test func unknownServerMessagesAreIgnoredAndMalformedOnesRefused() throws {
        #expect(try ServerMessage.decode(JSONValue.parse(#"{"type":"presence","who":"x"}"#)) == nil)
        #expect(throws: ProtocolError.self) { try ServerMessage.decode(JSONValue.parse(#"{"type":"ack","ccid":"c"}"#)) }
        #expect(throws: ProtocolError.self) { try ServerMessage.decode(JSONValue.parse(#"["ack"]"#)) }
        #expect(throws: ProtocolError.self) {
            try ServerMessage.decode(
                JSONValue.parse(#"{"type":"ack","ccid":"c","collection":"notes","id":"i","rev":1,"status":"kept"}"#))
        }
    }
}
