import ArgumentParser
import Foundation
import NotedClient
import NotedCore

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create an account on the server, then sign in.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The username.") var username: String
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false

    func run() async throws {
        guard passwordStdin else { throw ValidationError("give the password on standard input with --password-stdin") }
        try validateUsername(username)
        guard let server = try options.serverURL() else {
            throw CLIError("no server: give --server URL or set NOTED_SERVER")
        }
        let password = try readPassword()
        guard (8...1024).contains(password.count) else { throw CLIError("the password must be 8 to 1024 characters") }
        let api = NotedAPI(server: server)
        _ = try await cli { try await api.register(username: username, password: password) }
        try await signIn(options: options, server: server, username: username, password: password)
        print("registered and signed in as \(username)")
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign in to the server.",
        discussion: """
            With --username and --password-stdin, signs in directly. With neither, signs in in a browser: prints the \
            address of the server's sign-in page and waits for the browser to come back to a loopback address (OAuth \
            authorization code with PKCE). On a device that holds nothing of the account yet, the notes are then pulled \
            (a progress bar on a terminal), so that `noted list` shows them; not with --offline.
            """)
    @OptionGroup var options: GlobalOptions
    @Option(help: "The username.") var username: String?
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false
    @Option(help: "Seconds to wait for the browser sign-in.") var timeout: Int = 300
    @Option(help: "With two-factor sign-in: the authenticator app's current code, or a recovery code.") var otp: String?

    func run() async throws {
        guard let server = try options.serverURL() else {
            throw CLIError("no server: give --server URL or set NOTED_SERVER")
        }
        guard let username else {
            guard !passwordStdin else { throw ValidationError("--password-stdin needs --username") }
            guard otp == nil else {
                throw ValidationError(
                    "--otp goes with --username and --password-stdin; in a browser the sign-in page asks for the code")
            }
            guard (1...3600).contains(timeout) else { throw ValidationError("--timeout is 1 to 3600 seconds") }
            try await browserSignIn(options: options, server: server, timeout: .seconds(timeout))
            return
        }
        guard passwordStdin else {
            throw ValidationError(
                "give the password on standard input with --password-stdin, or neither --username nor a password to sign in in a browser"
            )
        }
        try validateUsername(username)
        let password = try readPassword()
        try await signIn(options: options, server: server, username: username, password: password, otp: otp)
        print("signed in as \(username)")
        await firstPull(options: options)
    }
}

/// Usernames as docs/protocol.md section 7 allows them: 1–64 letters, digits, `.`, `_`, `-`, `@`.
func validateUsername(_ username: String) throws {
    let allowed = username.unicodeScalars.allSatisfy {
        $0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_@".unicodeScalars.contains($0)
    }
    guard (1...64).contains(username.count), allowed else {
        throw ValidationError("a username is 1 to 64 letters, digits, '.', '_', '-' or '@'")
    }
}

/// Signs in, remembers the server and the tokens. Each account has its own database in the
/// home: signing in as someone else switches to theirs and erases nothing.
func signIn(options: GlobalOptions, server: URL, username: String, password: String, otp: String? = nil) async throws {
    let home = options.resolvedHome
    try home.create()
    let device = try await cli { try await LocalStore.open(path: try home.databasePath()).deviceID() }
    let api = NotedAPI(server: server)
    let tokens: TokenResponse
    do {
        tokens = try await api.signIn(username: username, password: password, otp: otp, device: device)
    } catch let error as NotedClientError where error.message.hasSuffix("(otp_required)") {
        throw CLIError(
            "\(username) has two-factor sign-in: give --otp CODE, the authenticator app's current code (or a recovery code)"
        )
    } catch let error as NotedClientError where error.message.hasSuffix("(invalid_otp)") {
        throw CLIError(
            "the --otp code is not right, or was used already: give the app's current code (or an unused recovery code)"
        )
    } catch {
        tokens = try await cli { throw error }
    }
    try await remember(tokens, options: options, server: server, username: username, device: device)
}

/// Remembers the server and the tokens of a sign-in, and makes the account's database (made on
/// first use, with this home's device id) the one the commands use.
func remember(_ tokens: TokenResponse, options: GlobalOptions, server: URL, username: String?, device: String)
    async throws
{
    let home = options.resolvedHome
    let userID = Credentials.subject(ofJWT: tokens.accessToken) ?? username ?? ""
    let username = username ?? userID
    let serverText = server.absoluteString.trimmingSuffix("/")
    let path = try await cli { try await home.accounts.use(server: serverText, userID: userID, username: username) }
    let store = try await cli { try LocalStore.open(path: path) }
    let account = serverText + " " + userID
    if let bound = try await store.meta("account"), bound != account {
        throw CLIError(
            "\(path) holds the notes of \(bound), not of \(account): \(home.accounts.indexPath) does not match it")
    }
    if try await store.meta("device") == nil { try await store.setMeta("device", device) }
    try await store.setMeta("account", account)
    try home.saveServer(serverText)
    try home.saveCredentials(
        Credentials(
            server: serverText, username: username, userID: userID, accessToken: tokens.accessToken,
            refreshToken: tokens.refreshToken, expiresAt: tokens.expiresAt))
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sign out (revokes the refresh token); local notes stay, for the next sign-in.",
        discussion:
            "Refused while notes have edits the server does not have yet (they are listed): sync first, or give --discard-unsynced to give those edits up (the server's versions stay)."
    )
    @OptionGroup var options: GlobalOptions
    @Flag(name: .customLong("discard-unsynced"), help: "Sign out even with unsynced edits, and give them up.")
    var discardUnsynced = false

    func run() async throws {
        let home = options.resolvedHome
        guard let credentials = try home.credentials() else { throw CLIError("not signed in") }
        let store = try await cli { try LocalStore.open(path: try home.databasePath()) }
        let unsynced = try await cli { try await store.unsynced() }
        if !unsynced.isEmpty {
            guard discardUnsynced else {
                let titles = unsynced.prefix(20).map { record in
                    let title = record.fields["title"]?.stringValue ?? ""
                    return
                        "\(record.id.prefix(8)) \"\(title.isEmpty ? String((record.fields["body"]?.stringValue ?? "").prefix(40)) : title)\""
                        + (record.refusal.map { " (refused: \($0))" } ?? "")
                }
                let more = unsynced.count > 20 ? "; and \(unsynced.count - 20) more" : ""
                throw CLIError(
                    "\(unsynced.count) note(s) have edits the server does not have: \(titles.joined(separator: "; "))\(more). "
                        + "Run `noted sync` first, or `noted logout --discard-unsynced` to give them up")
            }
            for record in unsynced { _ = try await cli { try await store.discardLocalChanges(record.id) } }
        }
        if !options.offline, let server = URL(string: credentials.server) {
            await NotedAPI(server: server).revoke(refreshToken: credentials.refreshToken)
        }
        try home.removeCredentials()
        print(
            unsynced.isEmpty || !discardUnsynced
                ? "signed out" : "signed out; discarded the unsynced edits of \(unsynced.count) note(s)")
    }
}

struct Whoami: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show who is signed in, and where.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        guard let credentials = try options.resolvedHome.credentials() else { throw CLIError("not signed in") }
        if options.json {
            printJSON([
                "username": .string(credentials.username), "user": .string(credentials.userID),
                "server": .string(credentials.server),
            ])
        } else {
            print("\(credentials.username) (\(credentials.userID)) on \(credentials.server)")
        }
    }
}
