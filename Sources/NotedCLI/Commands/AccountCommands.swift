import ArgumentParser
import Foundation
import NotedClient
import NotedCore

/// `noted account …`: the signed-in account itself (docs/protocol.md, "Accounts").
struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Change the password, list or sign out devices, two-factor sign-in, delete the account.",
        subcommands: [
            AccountUsageCommand.self, AccountPassword.self, AccountDevices.self, AccountSignOut.self,
            AccountDelete.self, AccountTwoFactor.self,
        ])
}

struct AccountUsageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "usage",
        abstract: "What the account stores on the server (notes and records, files, their history) and its quota.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try await signedInClient(options, for: "reading the account's usage")
        let account = try await cli { try await client.account() }
        guard let usage = account.usage else { throw CLIError("this server does not say what the account uses") }
        if options.json {
            printJSON([
                "bytes": .int(usage.bytes), "historyBytes": .int(usage.historyBytes), "records": .int(usage.records),
                "quotaBytes": usage.quotaBytes.map(JSONValue.int) ?? .null,
                "quotaRecords": usage.quotaRecords.map(JSONValue.int) ?? .null,
            ])
            return
        }
        let of = usage.quotaBytes.map { " of \($0) (\(usage.bytes * 100 / max($0, 1))%)" } ?? " (no limit)"
        print("stored:  \(usage.bytes) bytes\(of), of which history \(usage.historyBytes)")
        print("records: \(usage.records)" + (usage.quotaRecords.map { " of \($0)" } ?? " (no limit)"))
        if let quota = usage.quotaBytes, usage.bytes >= quota {
            print("the account is full: edits are refused until something is deleted (a note's history goes with it)")
        }
    }
}

/// The client of a home signed in to its server, or a clear error.
func signedInClient(_ options: GlobalOptions, for what: String) async throws -> NotedClient {
    guard !options.offline else { throw CLIError("\(what) needs the server; drop --offline") }
    let client = try await options.openClient(requireSync: true)
    guard client.server != nil, client.tokens != nil else {
        throw CLIError("\(what) needs a sign-in: run `noted login`")
    }
    return client
}

/// Lines of standard input, without their line ends.
private func readLines(_ count: Int, naming names: String) throws -> [String] {
    let lines = try readStandardInput().split(separator: "\n", omittingEmptySubsequences: false)
        .map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
    guard lines.count >= count, lines.prefix(count).allSatisfy({ !$0.isEmpty }) else {
        throw CLIError("give \(names) on standard input, one per line")
    }
    return Array(lines.prefix(count))
}

struct AccountPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password",
        abstract: "Change the password: reads the current and the new one from standard input, one per line.",
        discussion: "Every other device signed in to the account is signed out; this one stays signed in.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "With two-factor sign-in on: a current code of the authenticator app (or a recovery code).") var code:
        String?

    func run() async throws {
        let lines = try readLines(2, naming: "the current password and the new one")
        guard (8...1024).contains(lines[1].count) else {
            throw CLIError("the new password must be 8 to 1024 characters")
        }
        let client = try await signedInClient(options, for: "changing the password")
        let ended = try await cli { try await client.changePassword(current: lines[0], new: lines[1], code: code) }
        if options.json {
            printJSON(["signed_out": .int(Int64(ended))])
        } else {
            print("password changed; \(ended) other device(s) signed out")
        }
    }
}

struct AccountDevices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices", abstract: "List the devices signed in to the account (client, device, last seen).")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let client = try await signedInClient(options, for: "listing devices")
        let devices = try await cli { try await client.devices() }
        if options.json {
            printJSON(
                .array(
                    devices.map { device in
                        [
                            "id": .string(device.id), "client": .string(device.client),
                            "device": device.device.map(JSONValue.string) ?? .null,
                            "signedInAt": .string(device.signedInAt.iso8601),
                            "lastSeen": .string(device.lastSeen.iso8601), "current": .bool(device.current),
                        ]
                    }))
            return
        }
        for device in devices {
            print(
                "\(device.id)\t\(device.client)\t\(device.device ?? "-")\tlast seen \(device.lastSeen.iso8601)\(device.current ? "\tthis device" : "")"
            )
        }
    }
}

struct AccountSignOut: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-out",
        abstract: "Sign out one device (an id from `noted account devices`), or --all (this one too).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The device's id, as `noted account devices` lists it.") var device: String?
    @Flag(help: "Sign out every device of the account, this one too.") var all = false

    func validate() throws {
        guard (device == nil) != !all else { throw ValidationError("give a device id or --all, not both") }
        if let device, !UUIDText.isCanonical(device) {
            throw ValidationError("a device id is a lower-case UUID, as `noted account devices` lists it")
        }
    }

    func run() async throws {
        let client = try await signedInClient(options, for: "signing out devices")
        let current = all ? nil : try await cli { try await client.devices() }.first(where: \.current)?.id
        let ended = try await cli { try await client.signOut(device: device) }
        // This device's sign-in ended too: forget its tokens, as `noted logout` does.
        if all || device == current { try options.resolvedHome.removeCredentials() }
        if options.json {
            printJSON(["signed_out": .int(Int64(ended))])
        } else {
            print(
                all
                    ? "\(ended) device(s) signed out, this one too"
                    : device == current ? "this device signed out" : "device signed out")
        }
    }
}

struct AccountDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete the account and everything in it, on the server: reads the password from standard input.",
        discussion:
            "Every note and record, their history and every sign-in of the account are gone; other devices are signed out. This home's copy of the account's notes is removed too. The username can be registered again."
    )
    @OptionGroup var options: GlobalOptions
    @Flag(help: "Confirm: this cannot be undone.") var yes = false
    @Option(help: "With two-factor sign-in on: a current code of the authenticator app (or a recovery code).") var code:
        String?

    func run() async throws {
        guard yes else { throw ValidationError("deleting the account cannot be undone: give --yes to confirm") }
        let password = try readPassword()
        let client = try await signedInClient(options, for: "deleting the account")
        try await cli { try await client.deleteAccount(password: password, code: code) }
        let home = options.resolvedHome
        if let credentials = try home.credentials() {
            try home.removeCredentials()
            try await cli { try home.accounts.forget(server: credentials.server, userID: credentials.userID) }
        }
        print("account deleted")
    }
}

/// One line of standard input, as it comes (an exchange: the next line may answer what this
/// command prints); nil at its end.
private func nextLine() -> String? {
    guard let line = readLine(strippingNewline: true) else { return nil }
    return line.hasSuffix("\r") ? String(line.dropLast()) : line
}

/// `noted account 2fa status|enable|disable`: two-factor sign-in (TOTP).
struct AccountTwoFactor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "2fa", abstract: "Two-factor sign-in with an authenticator app (TOTP).",
        subcommands: [Status.self, Enable.self, Disable.self], defaultSubcommand: Status.self)

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Say whether two-factor sign-in is on.")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let client = try await signedInClient(options, for: "two-factor sign-in")
            let account = try await cli { try await client.account() }
            if options.json {
                printJSON([
                    "enabled": .bool(account.twoFactor), "recoveryCodesLeft": .int(Int64(account.recoveryCodesLeft)),
                ])
            } else {
                print(
                    account.twoFactor
                        ? "two-factor sign-in is on; \(account.recoveryCodesLeft) recovery code(s) left"
                        : "two-factor sign-in is off")
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Turn two-factor sign-in on: reads the password from standard input, prints an otpauth:// URI for the authenticator app, then reads the app's first code from the next line.",
            discussion: "Prints the recovery codes once: keep them somewhere safe; each signs in once without the app.")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            guard let password = nextLine(), !password.isEmpty else {
                throw CLIError("give the password on standard input")
            }
            let client = try await signedInClient(options, for: "two-factor sign-in")
            let (secret, uri) = try await cli { try await client.beginTwoFactor(password: password) }
            print(uri)
            FileHandle.standardError.write(
                Data(
                    """
                    Add this to your authenticator app (as a QR code: `qrencode -t ansiutf8 'URI'`; or type the key \(secret)).
                    Then enter the code it shows:\n
                    """.utf8))
            fflush(nil)
            guard let code = nextLine(), !code.isEmpty else {
                throw CLIError("no code on standard input: two-factor sign-in stays off")
            }
            let codes = try await cli { try await client.enableTwoFactor(code: code) }
            if options.json {
                printJSON(["recoveryCodes": .array(codes.map(JSONValue.string))])
                return
            }
            print("two-factor sign-in is on. Recovery codes (each signs in once; shown only now):")
            for code in codes { print(code) }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Turn two-factor sign-in off: reads the password and a current (or recovery) code from standard input, one per line."
        )
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let lines = try readLines(2, naming: "the password and a code")
            let client = try await signedInClient(options, for: "two-factor sign-in")
            try await cli { try await client.disableTwoFactor(password: lines[0], code: lines[1]) }
            print("two-factor sign-in is off")
        }
    }
}

extension Date {
    /// `2026-11-25T18:49:29.123Z` (RFC 3339, as the protocol writes times).
    var iso8601: String { Timestamp.format(self) }
}
