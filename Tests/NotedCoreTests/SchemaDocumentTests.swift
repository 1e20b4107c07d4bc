import Testing

@testable import NotedCore

@Suite struct SchemaDocumentTests {
    /// The contract's example, exactly as docs/collections.md and the issue give it.
    static let worries = """
        {"name": "worries", "version": 1, "fields": {
          "text":      {"kind": "text", "searchable": true},
          "intensity": {"kind": "scalar", "types": ["number"], "min": 0, "max": 10, "default": 0, "indexed": true},
          "category":  {"kind": "scalar", "types": ["string"], "enum": ["health", "work", "other"], "default": "other", "indexed": true},
          "tags":      {"kind": "set"},
          "resolved":  {"kind": "scalar", "types": ["bool"], "default": false},
          "remindAt":  {"kind": "scalar", "types": ["string", "null"], "default": null}
        }}
        """

    func schema(_ text: String) throws -> CollectionSchema {
        try CollectionSchema(json: JSONValue.parse(text))
    }

    func error(_ text: String) -> String? {
        do {
            _ = try schema(text)
            return nil
        } catch let error as SchemaError {
            return error.message
        } catch {
            return "not JSON: \(error)"
        }
    }

    @Test func theContractsExampleReadsAsWritten() throws {
        let worries = try schema(Self.worries)
        #expect(worries.name == "worries")
        #expect(worries.version == 1)
        #expect(Set(worries.fields.keys) == ["text", "intensity", "category", "tags", "resolved", "remindAt"])
        #expect(worries.fields["text"]?.kind == .text)
        #expect(worries.fields["text"]?.searchable == true)
        #expect(worries.fields["intensity"]?.scalarTypes == .number)
        #expect(worries.fields["intensity"]?.minimum == 0)
        #expect(worries.fields["intensity"]?.maximum == 10)
        #expect(worries.fields["intensity"]?.indexed == true)
        #expect(worries.fields["category"]?.allowed == ["health", "work", "other"])
        #expect(worries.fields["category"]?.defaultValue == "other")
        #expect(worries.fields["tags"]?.kind == .set)
        #expect(worries.fields["tags"]?.defaultValue == [])
        #expect(worries.fields["resolved"]?.defaultValue == false)
        #expect(worries.fields["remindAt"]?.scalarTypes == [.string, .null])
        #expect(worries.fields["remindAt"]?.defaultValue == .null)
        // Field names are case-sensitive as written: remindAt is not remindat.
        #expect(worries.fields["remindat"] == nil)
    }

    @Test func theServedDocumentReadsBackToTheSameSchema() throws {
        for schema in [try schema(Self.worries), .notes] {
            #expect(try CollectionSchema(json: JSONValue.parse(schema.json.jsonString)) == schema)
        }
    }

    @Test func notesIsADocumentLikeAnyOther() throws {
        let notes = try schema(
            """
            {"name": "notes", "version": 1, "fields": {
              "title": {"kind": "text", "searchable": true}, "body": {"kind": "text", "searchable": true},
              "tags": {"kind": "set"},
              "folder": {"kind": "scalar", "types": ["string", "null"], "default": null, "indexed": true},
              "pinned": {"kind": "scalar", "types": ["bool"], "default": false, "indexed": true},
              "trashed": {"kind": "scalar", "types": ["bool"], "default": false, "indexed": true},
              "created": {"kind": "scalar", "types": ["number", "null"], "default": null, "min": 0, "max": 253402300799999},
              "modified": {"kind": "scalar", "types": ["number", "null"], "default": null, "min": 0, "max": 253402300799999},
              "attachments": {"kind": "set", "attachments": true}}}
            """)
        #expect(notes == .notes)
    }

    @Test(arguments: [
        (#"[]"#, "a schema must be a JSON object"),
        (#"{"name": "Worries", "version": 1, "fields": {}}"#, "must match [a-z][a-z0-9_]{0,63}"),
        (#"{"name": "9lives", "version": 1, "fields": {}}"#, "must match"),
        (#"{"name": "w", "version": 0, "fields": {}}"#, "\"version\" must be a positive integer"),
        (#"{"name": "w", "version": 1.5, "fields": {}}"#, "\"version\" must be a positive integer"),
        (#"{"name": "w", "version": 1}"#, "\"fields\" must be an object"),
        (#"{"name": "w", "version": 1, "fields": {}, "colour": 1}"#, "unknown key \"colour\""),
        (#"{"name": "w", "version": 1, "fields": {"_text": {"kind": "text"}}}"#, "field name \"_text\""),
        (#"{"name": "w", "version": 1, "fields": {"a-b": {"kind": "text"}}}"#, "field name \"a-b\""),
        (#"{"name": "w", "version": 1, "fields": {"t": {"kind": "string"}}}"#, "w.t: \"kind\" must be"),
        (
            #"{"name": "w", "version": 1, "fields": {"t": {"kind": "text", "serchable": true}}}"#,
            "unknown key \"serchable\""
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"t": {"kind": "text", "indexed": true}}}"#,
            "unknown key \"indexed\" in a text field"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"t": {"kind": "text", "searchable": "yes"}}}"#,
            "\"searchable\" must be true or false"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"t": {"kind": "text", "default": 3}}}"#,
            "default of a text field must be a string"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"s": {"kind": "set", "default": ["a", "a"]}}}"#,
            "array of distinct strings"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "default": 1}}}"#,
            "\"types\" must be a non-empty array"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["int"], "default": 1}}}"#,
            "unknown type \"int\""
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["number"]}}}"#,
            "needs a \"default\""
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["number"], "default": "1"}}}"#,
            "is not of the field's types"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["number"], "min": 5, "max": 1, "default": 3}}}"#,
            "\"min\" is greater than \"max\""
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["number"], "min": 5, "default": 3}}}"#,
            "is less than 5"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["string"], "min": 5, "default": "a"}}}"#,
            "on a field of type number"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["number"], "maxLength": 5, "default": 1}}}"#,
            "on a field of type string"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"n": {"kind": "scalar", "types": ["string"], "maxLength": 2, "default": "abc"}}}"#,
            "is longer than 2"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"c": {"kind": "scalar", "types": ["string"], "enum": ["a", 1], "default": "a"}}}"#,
            "\"enum\" value 1"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"c": {"kind": "scalar", "types": ["string"], "enum": ["a"], "default": "b"}}}"#,
            "is not one of"
        ),
        (
            #"{"name": "w", "version": 1, "fields": {"c": {"kind": "scalar", "types": ["string"], "enum": [], "default": "b"}}}"#,
            "non-empty array"
        ),
    ])
    func aBadDocumentIsRefusedNamingTheProblem(document: String, expected: String) {
        let message = error(document)
        #expect(message?.contains(expected) == true, "\(document) → \(message ?? "accepted")")
    }

    @Test func namesAreUpTo64Characters() {
        let long = String(repeating: "a", count: 64)
        #expect(CollectionSchema.isValidName(long))
        #expect(!CollectionSchema.isValidName(long + "a"))
        #expect(CollectionSchema.isValidName("reading_sessions2"))
        #expect(!CollectionSchema.isValidName(""))
        #expect(!CollectionSchema.isValidName("a-b"))
        #expect(!CollectionSchema.isValidName("é"))
        #expect(!CollectionSchema.isValidName("Worries"))
        #expect(CollectionSchema.isValidName("remindAt", field: true))
        #expect(!CollectionSchema.isValidName("1st", field: true))
    }

    @Test func keysOfOtherToolsGoUnderX() throws {
        let schema = try schema(
            #"{"name": "w", "version": 2, "x-app": {"icon": "w"}, "description": "Worries", "fields": {"t": {"kind": "text", "x-ui": "textarea"}}}"#
        )
        #expect(schema.version == 2)
    }

    @Test func changesAreValidatedAgainstTheirCollectionsSchema() throws {
        let parser = ChangeParser(schemas: SchemaRegistry([.notes, try schema(Self.worries)]))
        func check(_ fields: JSONValue) -> String? {
            let change: JSONValue = [
                "ccid": "0b4c2a6e-1f1e-4b8e-9a55-1d5f3c1e2a77", "collection": "worries",
                "id": "0b4c2a6e-1f1e-4b8e-9a55-1d5f3c1e2a78", "baseRev": 0, "op": "upsert", "fields": fields,
            ]
            do {
                _ = try parser.parse(change)
                return nil
            } catch {
                return "\(error.code.rawValue): \(error.message)"
            }
        }
        #expect(
            check([
                "text": ["delta": "+hi"], "intensity": ["set": 7], "category": ["set": "work"], "tags": ["add": ["x"]],
                "resolved": ["set": true], "remindAt": ["set": "2026-11-25T09:00"],
            ]) == nil)
        #expect(check(["intensity": ["set": 10.0]]) == nil)
        #expect(check(["remindAt": ["set": nil]]) == nil)
        #expect(check(["intensity": ["set": 11]]) == "invalid_field: \"intensity\": 11 is more than 10")
        #expect(check(["intensity": ["set": -0.5]]) == "invalid_field: \"intensity\": -0.5 is less than 0")
        #expect(check(["intensity": ["set": "7"]]) == "invalid_field: \"intensity\" does not accept a string")
        #expect(
            check(["category": ["set": "fun"]])
                == "invalid_field: \"category\": \"fun\" is not one of [\"health\",\"work\",\"other\"]")
        #expect(check(["resolved": ["set": nil]]) == "invalid_field: \"resolved\" does not accept a null")
        #expect(check(["title": ["set": "a note field"]]) == "invalid_field: unknown field \"title\"")
        #expect(check(["tags": ["set": "x"]])?.hasPrefix("invalid_field: \"tags\"") == true)
        #expect(check(["text": ["set": 3]]) == "invalid_field: \"text\" is a text field: set takes a string")
    }

    @Test func evolutionAllowsAddingAndWideningButNotBreaking() throws {
        let old = try schema(Self.worries)
        var added = old
        added.fields["mood"] = .scalar([.string, .null], default: .null)
        added.fields["intensity"]?.scalarTypes.insert(.null)
        added.fields["intensity"]?.maximum = 100
        #expect(old.breakingChanges(to: added) == [])

        var broken = old
        broken.fields["tags"] = nil
        broken.fields["text"] = .scalar(.string, default: "")
        broken.fields["remindAt"]?.scalarTypes = .string
        #expect(
            old.breakingChanges(to: broken) == [
                "worries.remindAt no longer accepts null",
                "worries.tags was removed",
                "worries.text changed kind from text to scalar",
            ])
    }
}
