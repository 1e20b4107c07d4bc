import Foundation
import NotedClient
import NotedCore

/// The directory where `noted` keeps its database, configuration and credentials.
public struct Home: Sendable {
    public var path: String

    public init(path: String) {
        self.path = path
    }

    /// `--home`, else `NOTED_HOME`, else the user's data directory.
    public static func resolve(option: String?, environment: [String: String]) -> Home {
        if let option, !option.isEmpty { return Home(path: option) }
        if let value = environment["NOTED_HOME"], !value.isEmpty { return Home(path: value) }
        #if os(macOS) || os(iOS)
            let base = (environment["HOME"] ?? NSHomeDirectory()) + "/Library/Application Support"
        #else
            let base =
                environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/share")
        #endif
        return Home(path: base + "/noted")
    }

    /// Each account's database, apart (`noted.sqlite` for the first, docs/client.md).
    var accounts: AccountDirectory { AccountDirectory(path: path) }

    /// The database of the account last signed in (or of the only one before any sign-in).
    func databasePath() throws -> String {
        do {
            return try accounts.databasePath()
        } catch let error as NotedClientError {
            throw CLIError(error.message)
        }
    }
    var configPath: String { path + "/config.json" }
    var credentialsPath: String { path + "/credentials.json" }

    func create() throws {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CLIError("cannot create the home directory \(path): \(error.localizedDescription)")
        }
    }

    /// The server remembered by `login`.
    func savedServer() -> String? {
        guard let data = FileManager.default.contents(atPath: configPath), let value = try? JSONValue.parse(Array(data))
        else { return nil }
        return value["server"]?.stringValue
    }

    func saveServer(_ server: String) throws {
        try write(JSONValue.object(["server": .string(server)]).jsonString, to: configPath, mode: 0o600)
    }

    func credentials() throws -> Credentials? {
        guard let data = FileManager.default.contents(atPath: credentialsPath) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        do {
            return try decoder.decode(Credentials.self, from: data)
        } catch {
            throw CLIError("the credentials file \(credentialsPath) is damaged; run `noted login` again")
        }
    }

    func saveCredentials(_ credentials: Credentials) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(credentials)
        try write(String(decoding: data, as: UTF8.self), to: credentialsPath, mode: 0o600)
    }

    func removeCredentials() throws {
        if FileManager.default.fileExists(atPath: credentialsPath) {
            try FileManager.default.removeItem(atPath: credentialsPath)
        }
    }

    private func write(_ text: String, to file: String, mode: Int) throws {
        try create()
        let temporary = file + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        else {
            throw CLIError("cannot write \(temporary)")
        }
        // rename(2) replaces the old file atomically: a crash leaves the old or the new one.
        guard rename(temporary, file) == 0 else {
            throw CLIError("cannot write \(file): \(String(cString: strerror(errno)))")
        }
    }
}

/// A user mistake or an unusable environment: printed as one line, exit status 1.
public struct CLIError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
