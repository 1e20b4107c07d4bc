import ArgumentParser
import Foundation
import NotedClient
import NotedCore

/// Options every command takes.
public struct GlobalOptions: ParsableArguments {
    @Option(help: "Directory of the local database and credentials [NOTED_HOME].")
    var home: String?

    @Option(help: "Server URL, e.g. http://127.0.0.1:8080 [NOTED_SERVER]; remembered after login.")
    var server: String?

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(name: .customLong("no-sync"), help: "Do not sync after changing something.")
    var noSync = false

    @Flag(help: "Do not contact the server at all.")
    var offline = false

    public init() {}

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    var resolvedHome: Home { Home.resolve(option: home, environment: environment) }

    /// `--server`, else `NOTED_SERVER`, else the server saved at login.
    func serverURL() throws -> URL? {
        guard
            let text = server ?? environment["NOTED_SERVER"].flatMap({ $0.isEmpty ? nil : $0 })
                ?? resolvedHome.savedServer()
        else {
            return nil
        }
        return try Self.validate(server: text)
    }

    static func validate(server text: String) throws -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            url.host != nil
        else {
            throw CLIError("the server must be an http:// or https:// URL, not \"\(text)\"")
        }
        return url
    }

    /// Opens the client over this home: syncing when a server and credentials are known and
    /// `--offline` is not given.
    /// With `requireSync`, a server that is not the one signed in to is an error; otherwise
    /// the command just works locally.
    func openClient(requireSync: Bool = false) async throws -> NotedClient {
        let home = resolvedHome
        try home.create()
        let credentials = offline ? nil : try home.credentials()
        let server = offline ? nil : try serverURL()
        let usable =
            credentials.flatMap { creds in
                server.map { $0.absoluteString.trimmingSuffix("/") == creds.server.trimmingSuffix("/") }
            } ?? false
        if requireSync, let credentials, let server, !usable {
            throw CLIError(
                "signed in to \(credentials.server), not \(server.absoluteString): run `noted login` for that server, or use --offline"
            )
        }
        do {
            return try NotedClient(
                databasePath: try home.databasePath(), server: usable ? server : nil,
                credentials: usable ? credentials : nil,
                persist: { try home.saveCredentials($0) })
        } catch let error as NotedClientError {
            throw CLIError(error.message)
        }
    }

    /// After a change: sync it with a short bounded wait, unless told not to.
    func syncAfterChange(_ client: NotedClient) async {
        guard !noSync, !offline else { return }
        await client.startSync()
        _ = await client.waitUntilSynced(timeout: .seconds(5), failWhenOffline: true)
        await client.stopSync()
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

/// Reads all of standard input as UTF-8.
func readStandardInput() throws -> String {
    let data = FileHandle.standardInput.readDataToEndOfFile()
    guard let text = String(data: data, encoding: .utf8) else { throw CLIError("standard input is not valid UTF-8") }
    return text
}

/// Reads a password from standard input: the first line, without its line break.
func readPassword() throws -> String {
    let text = try readStandardInput()
    let line = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
    let password = line.hasSuffix("\r") ? String(line.dropLast()) : line
    guard !password.isEmpty else { throw CLIError("no password on standard input") }
    return password
}

func printJSON(_ value: JSONValue) {
    print(value.jsonString)
}

/// Runs a client call, turning library errors into one-line CLI errors.
@discardableResult
func cli<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as NotedClientError {
        throw CLIError(error.message)
    }
}

extension GlobalOptions {
    /// Lets global options come before the subcommand (`noted --home DIR list`): they are moved
    /// after the subcommand's name, where the parser reads them.
    public static func movingLeadingGlobalOptions(_ arguments: [String]) -> [String] {
        let withValue: Set<String> = ["--home", "--server"]
        let flags: Set<String> = ["--json", "--no-sync", "--offline"]
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            if flags.contains(argument) || (withValue.contains(name) && argument.contains("=")) {
                leading.append(argument)
                index += 1
            } else if withValue.contains(argument), index + 1 < arguments.count {
                leading += [argument, arguments[index + 1]]
                index += 2
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.count else { return arguments }
        // After the whole subcommand path (`account 2fa enable`), where its options are read.
        var command: any ParsableCommand.Type = Noted.self
        var end = index
        while end < arguments.count,
            let next = command.configuration.subcommands.first(where: { $0._commandName == arguments[end] })
        {
            command = next
            end += 1
        }
        end = max(end, index + 1)
        return Array(arguments[index..<end]) + leading + arguments[end...]
    }
}
