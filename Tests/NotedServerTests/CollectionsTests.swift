import Foundation
import NotedCore
import Testing

@testable import NotedServer

/// Collections served from schema documents (`--collections DIR`, docs/collections.md), on
/// both backends, over the WebSocket and HTTP.
@Suite struct CollectionsTests {
    /// An app's schema with every field kind and constraint, unknown to the server's code.
    static let journal = """
        {"name": "journal_entries", "version": 3, "fields": {
          "text": {"kind": "text", "searchable": true},
          "mood": {"kind": "scalar", "types": ["string"], "enum": ["low", "ok", "high"], "default": "ok", "indexed": true},
          "score": {"kind": "scalar", "types": ["number", "null"], "min": -5, "max": 5, "default": null},
          "done": {"kind": "scalar", "types": ["bool"], "default": false},
          "place": {"kind": "scalar", "types": ["string", "null"], "maxLength": 8, "default": null},
          "labels": {"kind": "set"}
        }}
        """

    /// A folder holding the given schema documents; removed after `body`.
    static func withFolder<T>(_ files: [String: String], _ body: (String) async throws -> T) async throws -> T {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "noted-collections-\(UUID().uuidString)"
        ).path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (name, text) in files {
            try Data(text.utf8).write(to: URL(fileURLWithPath: folder + "/" + name))
        }
        return try await body(folder)
    }

    func entry(_ id: String, baseRev: Int64 = 0, _ fields: JSONValue) -> JSONValue {
        [
            "ccid": .string(uuid()), "collection": "journal_entries", "id": .string(id), "baseRev": .int(baseRev),
            "op": "upsert", "fields": fields,
        ]
    }

    @Test(arguments: Backend.available)
    func aDroppedInSchemaIsServedOverWebSocketAndHTTP(backend: Backend) async throws {
        try await Self.withFolder(["journal.json": Self.journal, "README.txt": "not a schema"]) { folder in
            let schemas = try SchemaRegistry.load(directory: folder)
            try await TestServer.with(backend, configure: { $0.schemas = schemas }) { server in
                let user = try await server.makeUser()
                let listed = try await server.request(.get, "/v1/collections", token: user.accessToken)
                #expect(listed.status == .ok)
                let names = listed.json["collections"]?.arrayValue?.compactMap { $0["name"]?.stringValue }
                #expect(names == ["journal_entries", "notes"])
                let served = listed.json["collections"]?.arrayValue?.first
                #expect(
                    try served.map { try CollectionSchema(json: $0) }
                        == (try CollectionSchema(json: JSONValue.parse(Self.journal))))
                #expect(try await server.request(.get, "/v1/collections").status == .unauthorized)

                // Every field kind, over the WebSocket.
                let connection = try await server.connect(user)
                let id = uuid()
                let ack = try await connection.push(
                    entry(
                        id,
                        [
                            "text": ["set": "slept well"], "mood": ["set": "high"], "score": ["set": 4.5],
                            "done": ["set": true],
                            "place": ["set": "home"], "labels": ["add": ["sleep", "spring"]],
                        ]))
                #expect(ack["type"] == "ack", "\(ack.jsonString)")
                let edit = try await connection.push(
                    entry(id, baseRev: 1, ["text": ["delta": "=5\t+%20very\t=5"], "labels": ["remove": ["spring"]]]))
                #expect(edit["status"] == "applied", "\(edit.jsonString)")

                // Bad values, each refused naming its field.
                for (fields, field) in [
                    (["mood": ["set": "great"]], "mood"), (["score": ["set": 6]], "score"),
                    (["done": ["set": "yes"]], "done"),
                    (["place": ["set": "the office"]], "place"), (["labels": ["set": [1]]], "labels"),
                    (["title": ["set": "x"]], "title"),
                ] as [(JSONValue, String)] {
                    let reject = try await connection.push(entry(id, baseRev: 2, fields))
                    #expect(reject["code"] == "invalid_field", "\(fields.jsonString) → \(reject.jsonString)")
                    #expect(reject["message"]?.stringValue?.contains("\"\(field)\"") == true, "\(reject.jsonString)")
                }
                await connection.close()

                // And over HTTP: the record, its history, a push and a pull.
                let record = try await server.request(
                    .get, "/v1/records/journal_entries/\(id)", token: user.accessToken)
                #expect(record.json["rev"] == 2)
                #expect(
                    record.json["fields"] == [
                        "text": "slept very well", "mood": "high", "score": 4.5, "done": true, "place": "home",
                        "labels": ["sleep"],
                    ])
                let revisions = try await server.request(
                    .get, "/v1/records/journal_entries/\(id)/revisions", token: user.accessToken)
                #expect(revisions.json["revisions"]?.arrayValue?.count == 2)
                let pushed = try await server.request(
                    .post, "/v1/push",
                    json: [
                        "changes": [
                            entry(id, baseRev: 2, ["mood": ["set": "low"]]),
                            entry(uuid(), ["score": ["set": -6]]),
                        ]
                    ],
                    token: user.accessToken)
                #expect(pushed.json["results"]?.arrayValue?.first?["status"] == "applied", "\(pushed.json.jsonString)")
                #expect(pushed.json["results"]?.arrayValue?.last?["code"] == "invalid_field")
                let page = try await server.request(.get, "/v1/changes?since=0", token: user.accessToken)
                #expect(page.json["records"]?.arrayValue?.map { $0["collection"] } == ["journal_entries"])
                #expect(page.json["records"]?.arrayValue?.first?["fields"]?["mood"] == "low")
                #expect(
                    try await server.request(.get, "/v1/records/worries/\(id)", token: user.accessToken).json["error"]
                        == "unknown_collection")
            }
        }
    }

    @Test(arguments: Backend.available)
    func restartingWithASafeEvolutionKeepsEverythingAndABreakingOneRefusesToStart(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let id = uuid()
            let original = try CollectionSchema(json: JSONValue.parse(Self.journal))
            let user: TestServer.User = try await TestServer.withNode(
                location, configure: { $0.schemas = SchemaRegistry([.notes, original]) }
            ) { server in
                let user = try await server.makeUser()
                let connection = try await server.connect(user)
                let ack = try await connection.push(self.entry(id, ["text": ["set": "kept"], "mood": ["set": "low"]]))
                #expect(ack["type"] == "ack")
                await connection.close()
                return user
            }

            func refusal(_ schemas: SchemaRegistry) async throws -> String? {
                do {
                    _ = try await TestServer.makeNode(location, configure: { $0.schemas = schemas })
                    return nil
                } catch let refusal as StartupRefusal {
                    return refusal.description
                }
            }
            var kindChanged = original
            kindChanged.fields["mood"] = .text
            #expect(
                try await refusal(SchemaRegistry([.notes, kindChanged]))
                    == "the collections would break stored records: journal_entries.mood changed kind from scalar to text"
            )
            var narrowed = original
            narrowed.fields["labels"] = nil
            narrowed.fields["score"]?.scalarTypes = .number
            #expect(
                try await refusal(SchemaRegistry([.notes, narrowed]))
                    == "the collections would break stored records: journal_entries.labels was removed; journal_entries.score no longer accepts null"
            )
            #expect(
                try await refusal(.v1)
                    == "the collections would break stored records: collection journal_entries holds records but is no longer served"
            )

            // A field added and a scalar widened: the server starts and the record is as it was.
            var evolved = original
            evolved.version = 4
            evolved.fields["weather"] = .scalar([.string, .null], default: .null)
            evolved.fields["done"]?.scalarTypes.insert(.null)
            try await TestServer.withNode(location, configure: { $0.schemas = SchemaRegistry([.notes, evolved]) }) {
                server in
                let signIn = try await server.request(
                    .post, "/v1/sessions",
                    json: ["username": .string(user.username), "password": .string(user.password)])
                let token = signIn.json["access_token"]?.stringValue
                let record = try await server.request(.get, "/v1/records/journal_entries/\(id)", token: token)
                #expect(record.json["fields"]?["text"] == "kept")
                #expect(record.json["fields"]?["mood"] == "low")
                let served = try await server.request(.get, "/v1/collections", token: token)
                #expect(served.json["collections"]?.arrayValue?.first?["version"] == 4)
                let connection = try await server.connect(
                    TestServer.User(
                        id: user.id, username: user.username, password: user.password,
                        accessToken: token ?? "", refreshToken: ""))
                let ack = try await connection.push(
                    self.entry(id, baseRev: 1, ["weather": ["set": "rain"], "done": ["set": nil]]))
                #expect(ack["status"] == "applied", "\(ack.jsonString)")
                await connection.close()
            }
            // The evolved schema is now the stored one: going back would remove its new field.
            #expect(
                try await refusal(SchemaRegistry([.notes, original]))?.contains("journal_entries.weather was removed")
                    == true)
        }
    }

    @Test func aCollectionWithoutRecordsMayBeRemoved() async throws {
        try await withDatabase(.sqlite) { location in
            let original = try CollectionSchema(json: JSONValue.parse(Self.journal))
            try await TestServer.withNode(location, configure: { $0.schemas = SchemaRegistry([.notes, original]) }) {
                _ in
            }
            try await TestServer.withNode(location) { _ in }
        }
    }

    @Test func loadingRefusesBadFolders() async throws {
        func refusal(_ files: [String: String]) async throws -> String? {
            try await Self.withFolder(files) { folder -> String? in
                do {
                    _ = try SchemaRegistry.load(directory: folder)
                    return nil
                } catch {
                    return "\(error)".replacingOccurrences(of: folder + "/", with: "")
                }
            }
        }
        #expect(try await refusal(["a.json": "{"])?.hasPrefix("a.json: not valid JSON") == true)
        #expect(
            try await refusal(["a.json": #"{"name": "a", "version": 1, "fields": {"x": {"kind": "blob"}}}"#])
                == #"a.json: a.x: "kind" must be "text", "set" or "scalar""#)
        #expect(
            try await refusal(["a.json": #"{"name": "notes", "version": 2, "fields": {}}"#])
                == #"a.json: collection "notes" is already defined (built in)"#)
        #expect(
            try await refusal(["a.json": Self.journal, "b.json": Self.journal])?.hasPrefix(
                #"b.json: collection "journal_entries" is already defined"#) == true)
        #expect(try await refusal([:]) == nil)
        #expect(throws: StartupRefusal.self) { try SchemaRegistry.load(directory: "/nonexistent/noted-collections") }
    }
}
