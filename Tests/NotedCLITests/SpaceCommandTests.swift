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

    /// Two people's devices share notes in a space (protocol 2): a note written in it reaches
    /// the other member, both edit it offline and both edits are kept, a viewer's edit is
    /// refused and stays on their device, and a removed member's device lets go of the space's
    /// notes while keeping an edit the server never took.
    @Test func membersShareNotesAndMergeOfflineEdits() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let ann = Home(path: dir + "/ann", server: server.url)
            let bob = Home(path: dir + "/bob", server: server.url)
            for (home, name) in [(ann, "ann"), (bob, "bob")] {
                try await home.noted("register", "--username", name, "--password-stdin", stdin: Self.password + "\n")
            }
            _ = try await ann.noted("space", "create", "Trip")
            _ = try await ann.noted("space", "invite", "Trip", "bob")
            _ = try await bob.noted("space", "accept", "Trip")
            let mine = try await ann.noted("new", "--title", "Only mine", "--body", "personal")

            // Ann's device learns of the space by syncing, then writes in it.
            let id = try await ann.noted("new", "--space", "trip", "--title", "Packing", "--body", "tent\nstove\n")
            #expect(try await failure(ann, "new", "--space", "Nowhere", "--title", "x").contains("no space called"))
            _ = try await bob.noted("sync")
            let shared = try JSONValue.parse(try await bob.noted("--json", "list", "--space", "Trip"))
            #expect(shared.arrayValue?.map { $0["id"] } == [.string(id)])
            #expect(shared.arrayValue?.first?["body"] == "tent\nstove\n")
            #expect(shared.arrayValue?.first?["space"] != nil)
            #expect(try await bob.noted("list", "--space", "personal").isEmpty)
            #expect(!(try await bob.noted("list")).contains(String(mine.prefix(8))))

            // Both edit offline, then sync: both lines are kept on both devices.
            _ = try await ann.noted("edit", id, "--offline", "--body", "tent\nstove\nmap\n")
            _ = try await bob.noted("edit", id, "--offline", "--body", "tent\nsleeping bags\nstove\n")
            _ = try await ann.noted("sync")
            _ = try await bob.noted("sync")
            _ = try await ann.noted("sync")
            let merged = "tent\nsleeping bags\nstove\nmap\n"
            #expect(try JSONValue.parse(try await ann.noted("--json", "show", id))["body"] == .string(merged))
            #expect(try JSONValue.parse(try await bob.noted("--json", "show", id))["body"] == .string(merged))
            // Its history names who wrote each revision.
            let history = try await bob.noted("history", id)
            #expect(history.contains("by ann") && history.contains("by bob"), "\(history)")

            // A viewer's edit is refused and stays on their device, marked.
            _ = try await ann.noted("space", "role", "Trip", "bob", "viewer")
            _ = try await bob.noted("sync")
            #expect(try await failure(bob, "new", "--space", "Trip", "--title", "x").contains("viewer"))
            _ = try await bob.noted("edit", id, "--body", "bob was here\n")
            let refused = try JSONValue.parse(try await bob.noted("--json", "show", id))
            #expect(refused["refusal"]?.stringValue?.contains("read_only") == true, "\(refused)")
            #expect(try JSONValue.parse(try await ann.noted("--json", "show", id))["body"] == .string(merged))

            // Removed: the space's notes leave bob's device, but for the one he changed.
            _ = try await bob.noted("discard", id)
            _ = try await ann.noted("space", "role", "Trip", "bob", "editor")
            let second = try await ann.noted("new", "--space", "Trip", "--title", "Route", "--body", "north")
            _ = try await bob.noted("sync")
            _ = try await bob.noted("edit", second, "--offline", "--body", "south")
            _ = try await ann.noted("space", "remove", "Trip", "bob")
            #expect(try await failure(bob, "sync").contains("no longer a member"))
            let left = try JSONValue.parse(try await bob.noted("--json", "list"))
            #expect(left.arrayValue?.map { $0["id"] } == [.string(second)], "\(left)")
            #expect(left.arrayValue?.first?["refusal"]?.stringValue?.contains("no longer a member") == true)
            #expect(try await bob.noted("spaces").contains("Trip") == false)
            // Saved to his own space, what he wrote syncs; the original leaves his device.
            let copy = try await bob.noted("copy", String(second.prefix(8)))
            _ = try await bob.noted("sync")
            let kept = try JSONValue.parse(try await bob.noted("--json", "list"))
            #expect(kept.arrayValue?.map { $0["id"] } == [.string(copy)], "\(kept)")
            #expect(kept.arrayValue?.first?["body"] == "south" && kept.arrayValue?.first?["pending"] == false)
            #expect(try JSONValue.parse(try await ann.noted("--json", "show", second))["body"] == "north")
        }
    }
}
