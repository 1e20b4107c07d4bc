import Foundation
import NotedCore
import TestSupport
import Testing

/// `noted spaces` and `noted space …` as people type them, with the real `noted-server` and
/// `noted` processes (issue 42): a space is created, shared by invitation and by link, its
/// members' roles changed, a member removed, the space handed over and deleted.
@Suite(.serialized) struct SpaceCommandTests {
    static let password = "correct horse battery"

    func failure(_ home: Home, _ arguments: String...) async throws -> String {
        let result = try await run("noted", ["--home", home.path, "--server", home.server] + arguments)
        #expect(result.status != 0, "noted \(arguments) should have failed: \(result.stdout)")
        return result.stderr
    }

    @Test func createShareChangeRolesAndDelete() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            var homes: [String: Home] = [:]
            for name in ["ann", "bob", "cat"] {
                let home = Home(path: dir + "/" + name, server: server.url)
                try await home.noted("register", "--username", name, "--password-stdin", stdin: Self.password + "\n")
                homes[name] = home
            }
            let ann = homes["ann"]!
            let bob = homes["bob"]!
            let cat = homes["cat"]!

            let created = try JSONValue.parse(try await ann.noted("--json", "space", "create", "Groceries"))
            #expect(created["name"] == "Groceries" && created["role"] == "owner")
            let listed = try JSONValue.parse(try await ann.noted("--json", "spaces"))
            #expect(listed["spaces"]?.arrayValue?.map { $0["name"] } == ["Personal", "Groceries"])
            #expect(try await ann.noted("spaces").contains("Groceries\towner\t1 member(s)\towner ann"))

            // By invitation: bob sees it, accepts; by link: cat joins as a viewer.
            #expect(
                try await ann.noted("space", "invite", "groceries", "bob")
                    == "invited bob to Groceries as editor")
            #expect(try await failure(ann, "space", "invite", "Groceries", "nobody-here").contains("no user"))
            #expect(
                try await ann.noted("space", "invite", "Groceries", "cat")
                    == "invited cat to Groceries as editor")
            #expect(
                try JSONValue.parse(try await ann.noted("--json", "space", "remove", "Groceries", "cat"))["message"]
                    == "withdrew the invitation of cat to Groceries")
            #expect(try await failure(ann, "space", "remove", "Groceries", "cat").contains("neither a member"))
            #expect(try await bob.noted("spaces").contains("invited to Groceries as editor by ann"))
            #expect(try await failure(bob, "space", "members", "Groceries").contains("no space is called"))
            #expect(try await bob.noted("space", "accept", "Groceries") == "joined Groceries as editor")
            let url = try await ann.noted("space", "link", "Groceries", "--expires", "7", "--max-uses", "1")
            #expect(url.hasPrefix("http") && url.contains("/#join="), "\(url)")
            #expect(
                try await failure(ann, "space", "link", "Groceries", "--role", "admin").contains("viewer or editor"))
            #expect(try await cat.noted("space", "join", url) == "joined Groceries as viewer")
            #expect(try await failure(cat, "space", "invite", "Groceries", "bob").contains("only the space's owner"))

            let members = try JSONValue.parse(try await ann.noted("--json", "space", "members", "Groceries"))
            #expect(members["members"]?.arrayValue?.map { $0["username"] } == ["ann", "bob", "cat"])
            #expect(members["links"]?.arrayValue?.first?["uses"] == 1)
            #expect(members["links"]?.arrayValue?.first?["secret"] == nil)
            #expect(
                try await ann.noted("space", "role", "Groceries", "cat", "editor") == "cat is now editor of Groceries")
            #expect(try await ann.noted("space", "remove", "Groceries", "bob") == "removed bob from Groceries")
            #expect(try await failure(bob, "space", "members", "Groceries").contains("no space is called"))

            // The owner hands over before leaving; only the owner deletes, and only with --yes.
            #expect(try await failure(ann, "space", "leave", "Groceries").contains("hands the space over"))
            #expect(try await ann.noted("space", "transfer", "Groceries", "cat") == "cat now owns Groceries")
            #expect(try await ann.noted("space", "leave", "Groceries") == "left Groceries")
            #expect(try await failure(cat, "space", "delete", "Groceries").contains("--yes"))
            #expect(try await cat.noted("space", "delete", "Groceries", "--yes") == "deleted Groceries")
            #expect(try JSONValue.parse(try await cat.noted("--json", "spaces"))["spaces"]?.arrayValue?.count == 1)
            #expect(try await failure(cat, "space", "delete", "Personal", "--yes").contains("personal space"))
        }
    }
}
