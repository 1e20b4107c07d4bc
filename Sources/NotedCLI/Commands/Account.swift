import ArgumentParser
import Foundation
import NotedClient
import NotedCore

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create an account on the server, then sign in.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The username.") var username: String
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false

    func execute() async throws {
        guard passwordStdin else { throw ValidationError("give the password on standard input with --password-stdin") }
        try validateUsername(username)
        guard let server = try options.serverURL() else { throw CLIError("no server: give --server URL or set NOTED_SERVER") }
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
        discussion: "With --username and --password-stdin, signs in directly. With neither, signs in in a browser: prints the address of the server's sign-in page and waits for the browser to come back to a loopback address (OAuth authorization code with PKCE).")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The username.") var username: String?
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false
    @Option(help: "Seconds to wait for the browser sign-in.") var timeout: Int = 300

    func execute() async throws {
        guard let server = try options.serverURL() else { throw CLIError("no server: give --server URL or set NOTED_SERVER") }
        guard let username else {
            guard !passwordStdin else { throw ValidationError("--password-stdin needs --username") }
            guard (1...3600).contains(timeout) else { throw ValidationError("--timeout is 1 to 3600 seconds") }
            try await browserSignIn(options: options, server: server, timeout: .seconds(timeout))
            return
        }
        guard passwordStdin else {
            throw ValidationError("give the password on standard input with --password-stdin, or neither --username nor a password to sign in in a browser")
        }
        try validateUsername(username)
        let password = try readPassword()
        try await signIn(options: options, server: server, username: username, password: password)
        print("signed in as \(username)")
    }
}

/// Usernames as docs/protocol.md section 7 allows them: 1–64 letters, digits, `.`, `_`, `-`, `@`.
func validateUsername(_ username: String) throws {
    let allowed = username.unicodeScalars.allSatisfy { $0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_@".unicodeScalars.contains($0) }
    guard (1...64).contains(username.count), allowed else {
        throw ValidationError("a username is 1 to 64 letters, digits, '.', '_', '-' or '@'")
    }
}

/// Signs in, remembers the server and the tokens; a different user than before starts from an
/// empty local database so that no one's notes leak into another's account.
func signIn(options: GlobalOptions, server: URL, username: String, password: String) async throws {
    let home = options.resolvedHome
    try home.create()
    let store = try await cli { try LocalStore.open(path: home.databasePath) }
    let device = try await store.deviceID()
    let api = NotedAPI(server: server)
    let tokens = try await cli { try await api.signIn(username: username, password: password, device: device) }
    try await remember(tokens, options: options, server: server, username: username, store: store)
}

/// Remembers the server and the tokens of a sign-in.
func remember(_ tokens: TokenResponse, options: GlobalOptions, server: URL, username: String?, store: LocalStore) async throws {
    let home = options.resolvedHome
    let userID = Credentials.subject(ofJWT: tokens.accessToken) ?? username ?? ""
    let username = username ?? userID
    let serverText = server.absoluteString.trimmingSuffix("/")
    let previous = try await store.meta("account")
    let account = serverText + " " + userID
    if let previous, previous != account {
        try await store.eraseAll()
    }
    try await store.setMeta("account", account)
    try home.saveServer(serverText)
    try home.saveCredentials(Credentials(
        server: serverText, username: username, userID: userID, accessToken: tokens.accessToken,
        refreshToken: tokens.refreshToken, expiresAt: tokens.expiresAt))
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sign out (revokes the refresh token); local notes stay.")
    @OptionGroup var options: GlobalOptions

    func execute() async throws {
        let home = options.resolvedHome
        guard let credentials = try home.credentials() else { throw CLIError("not signed in") }
        if !options.offline, let server = URL(string: credentials.server) {
            await NotedAPI(server: server).revoke(refreshToken: credentials.refreshToken)
        }
        try home.removeCredentials()
        print("signed out")
    }
}

struct Whoami: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show who is signed in, and where.")
    @OptionGroup var options: GlobalOptions

    func execute() async throws {
        guard let credentials = try options.resolvedHome.credentials() else { throw CLIError("not signed in") }
        if options.json {
            printJSON(["username": .string(credentials.username), "user": .string(credentials.userID), "server": .string(credentials.server)])
        } else {
            print("\(credentials.username) (\(credentials.userID)) on \(credentials.server)")
        }
    }
}
