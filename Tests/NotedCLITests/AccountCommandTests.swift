import Foundation
import NotedCore
import TestSupport
import Testing

/// `noted account …` as a user types it, with the real `noted-server` and `noted` processes:
/// changing the password signs out the other devices, a device is listed and signed out, and
/// a deleted account is gone from the server and from this home (issues 14 and 16).
@Suite(.serialized) struct AccountCommandTests {
    static let password = "correct horse battery"

    /// `noted` expected to fail: its standard error.
    func failure(_ home: Home, _ arguments: String..., stdin: String? = nil) async throws -> String {
        let result = try await run("noted", ["--home", home.path, "--server", home.server] + arguments, stdin: stdin)
        #expect(result.status != 0, "noted \(arguments) should have failed: \(result.stdout)")
        return result.stderr
    }

    @Test func passwordDevicesSignOutAndDelete() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/server")
            defer { server.stop() }
            let laptop = Home(path: dir + "/laptop", server: server.url)
            let phone = Home(path: dir + "/phone", server: server.url)
            try await laptop.noted("register", "--username", "dana", "--password-stdin", stdin: Self.password + "\n")
            try await phone.noted("login", "--username", "dana", "--password-stdin", stdin: Self.password + "\n")
            let note = try await laptop.noted("new", "--title", "Dana's", "--body", "kept on the server")

            let devices = try JSONValue.parse(try await laptop.noted("--json", "account", "devices")).arrayValue ?? []
            #expect(devices.count == 2)
            #expect(devices.filter { $0["current"] == true }.count == 1)

            // The password: both lines on standard input; a wrong current one changes nothing.
            #expect(
                try await failure(laptop, "account", "password", stdin: "wrong one here\nsomething new 1\n").contains(
                    "password is not right"))
            #expect(
                try await failure(laptop, "account", "password", stdin: Self.password + "\n").contains("one per line"))
            let changed = try await laptop.noted("account", "password", stdin: Self.password + "\nsomething new 1\n")
            #expect(changed == "password changed; 1 other device(s) signed out")
            #expect(try await failure(phone, "sync").contains("sign-in has ended"), "the phone's sign-in ended")
            try await phone.noted("login", "--username", "dana", "--password-stdin", stdin: "something new 1\n")
            try await phone.noted("sync")
            #expect(try await phone.notes()[note]?["body"] == "kept on the server")
            #expect(try await laptop.noted("sync") == "synced", "the laptop stays signed in")

            // Sign the phone out from the laptop.
            let listed = try JSONValue.parse(try await laptop.noted("--json", "account", "devices")).arrayValue ?? []
            let phoneID = try #require(listed.first { $0["current"] != true }?["id"]?.stringValue)
            #expect(try await failure(laptop, "account", "sign-out").contains("--all"))
            #expect(try await failure(laptop, "account", "sign-out", "not-an-id").contains("UUID"))
            #expect(try await laptop.noted("account", "sign-out", phoneID) == "device signed out")
            #expect(try await failure(laptop, "account", "sign-out", phoneID).contains("no such"))
            #expect(try await failure(phone, "sync").contains("sign-in has ended"))
            try await phone.noted("login", "--username", "dana", "--password-stdin", stdin: "something new 1\n")

            // Delete: refused without --yes or with a wrong password, then done.
            #expect(try await failure(laptop, "account", "delete", stdin: "something new 1\n").contains("--yes"))
            #expect(
                try await failure(laptop, "account", "delete", "--yes", stdin: "not it at all\n").contains(
                    "password is not right"))
            #expect(
                try await laptop.noted("account", "delete", "--yes", stdin: "something new 1\n") == "account deleted")
            #expect(try await failure(laptop, "whoami").contains("not signed in"))
            #expect(try await laptop.notes().isEmpty, "this home's copy is gone too")
            #expect(try await failure(phone, "sync").contains("sign-in has ended"), "the other device is signed out")
            #expect(
                try await failure(phone, "login", "--username", "dana", "--password-stdin", stdin: "something new 1\n")
                    .contains("wrong username or password"))

            // The username is free again, and the new account starts empty.
            try await laptop.noted("register", "--username", "dana", "--password-stdin", stdin: "a brand new one\n")
            try await laptop.noted("sync")
            #expect(try await laptop.notes().isEmpty)
        }
    }
}
