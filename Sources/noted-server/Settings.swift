import ArgumentParser
import Configuration
import Foundation
import NIOConcurrencyHelpers
import NotedCore
import SystemPackage

/// noted-server's settings, read through one swift-configuration `ConfigReader` over three
/// sources, the first that has a setting winning: the flags given (`--max-pushes-per-second`),
/// the environment (`NOTED_MAX_PUSHES_PER_SECOND`), and the config file named by `--config` or
/// `NOTED_CONFIG` (a JSON object, `{"max-pushes-per-second": 100}`); then the default.
///
/// A setting's name is its flag's long name. A value of the wrong type, a setting the file
/// does not know, or a file that is not a JSON object is an error naming where it came from;
/// nothing starts.
struct Settings: Sendable {
    /// Every setting a config file may hold (each value's type is checked as it is read).
    static let known = Set(ServerSetting.all.map(\.name))
    /// Lists whose items hold commas (an OAuth client's redirect URIs, a trusted issuer's
    /// parts): their environment variables separate items by spaces, the others by commas.
    static let spaceSeparated = Set(ServerSetting.all.filter { $0.kind == .list(separator: " ") }.map(\.name))
    /// The flags, by setting name (a list's flag is given once per item).
    static let flagNames = Dictionary(uniqueKeysWithValues: ServerSetting.all.map { ($0.name, $0.flag) })
    /// Read as secrets: never printed by swift-configuration's access logging.
    static let secret = Set(ServerSetting.all.filter(\.isSecret).map(\.name))

    private let reader: ConfigReader
    private let spacedReader: ConfigReader
    private let events: Events
    /// The config file, when one was named.
    let file: String?

    /// The settings of `flags` (by setting name; only those given), `environment` and the
    /// config file it or `configFlag` names.
    static func load(flags: [String: ConfigContent], configFlag: String?, environment: [String: String]) async throws
        -> Settings
    {
        // An empty variable is as good as unset (NOTED_METRICS_TOKEN= in a unit file, say).
        let environment = environment.filter { $0.key.hasPrefix("NOTED_") && !$0.value.isEmpty }
        let file = configFlag ?? environment["NOTED_CONFIG"]
        var fileProvider: FileProvider<JSONSnapshot>?
        if let file {
            try checkFile(file)
            let options = JSONSnapshot.ParsingOptions(secretsSpecifier: .specific(secret))
            do {
                fileProvider = try await FileProvider<JSONSnapshot>(parsingOptions: options, filePath: FilePath(file))
            } catch {
                throw ValidationError("the config file \(file) could not be read: \(error)")
            }
        }
        let values = Dictionary(
            uniqueKeysWithValues: flags.map {
                (AbsoluteConfigKey([$0.key]), ConfigValue($0.value, isSecret: secret.contains($0.key)))
            })
        func providers(separator: Character) -> [any ConfigProvider] {
            let flagProvider = InMemoryProvider(name: "flags", values: values)
            let environmentProvider = EnvironmentVariablesProvider(
                environmentVariables: environment,
                secretsSpecifier: .specific(Set(ServerSetting.all.filter(\.isSecret).map(\.variable))),
                arraySeparator: separator
            ).prefixKeys(with: "noted")
            return [flagProvider, environmentProvider] + (fileProvider.map { [$0] } ?? [])
        }
        let events = Events()
        return Settings(
            reader: ConfigReader(providers: providers(separator: ","), accessReporter: events),
            spacedReader: ConfigReader(providers: providers(separator: " "), accessReporter: events),
            events: events, file: file)
    }

    /// A config file must be a JSON object of known settings; each value's type is checked as
    /// it is read.
    private static func checkFile(_ file: String) throws {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("the config file \(file) could not be read (no such file, or not readable)")
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(data)
        } catch {
            throw ValidationError("the config file \(file) is not valid JSON: \(error)")
        }
        guard case .object(let members) = value else {
            throw ValidationError("the config file \(file) must hold a JSON object of settings, like {\"port\": 8080}")
        }
        if let unknown = members.keys.sorted().first(where: { !known.contains($0) }) {
            throw ValidationError(
                "the config file \(file) has an unknown setting \"\(unknown)\"; settings are named as the flags are: \(known.sorted().joined(separator: ", "))"
            )
        }
    }

    // MARK: Reading

    /// Where a setting's value came from, for error messages: `--port`, `NOTED_PORT`, or
    /// `"port" in FILE`.
    private func source(of key: String) -> String {
        switch events.lastProvider(of: key) {
        case 0: return "--" + (Self.flagNames[key] ?? key)
        case 1: return ServerSetting.all.first { $0.name == key }?.variable ?? key
        default: return "\"\(key)\" in \(file ?? "the config file")"
        }
    }

    /// Throws when the last read of `key` met a value of the wrong type.
    private func checked<T>(_ key: String, _ value: T?, expected: String) throws -> T? {
        if events.failed(key) {
            throw ValidationError("\(source(of: key)): \(expected)")
        }
        return value
    }

    func string(_ key: String) throws -> String? {
        try checked(
            key, reader.string(forKey: ConfigKey([key]), isSecret: Self.secret.contains(key)), expected: "expected text"
        )
    }

    func bool(_ key: String) throws -> Bool? {
        try checked(
            key, reader.bool(forKey: ConfigKey([key])),
            expected: "expected true or false (in the environment also 1, 0, yes, no)")
    }

    func list(_ key: String) throws -> [String] {
        let reader = Self.spaceSeparated.contains(key) ? spacedReader : reader
        let items =
            try checked(key, reader.stringArray(forKey: ConfigKey([key])), expected: "expected a list of text") ?? []
        return items.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// An integer setting that must satisfy `valid`; `rule` says what it must be.
    func int(_ key: String, _ rule: String, _ valid: (Int) -> Bool) throws -> Int? {
        guard let value = try checked(key, reader.int(forKey: ConfigKey([key])), expected: rule) else { return nil }
        guard valid(value) else { throw ValidationError("\(source(of: key)): \(rule), not \(value)") }
        return value
    }

    /// A text setting that must satisfy `parse`; `rule` says what it must be.
    func parsed<T>(_ key: String, _ rule: String, _ parse: (String) -> T?) throws -> T? {
        guard let text = try string(key) else { return nil }
        guard let value = parse(text) else { throw ValidationError("\(source(of: key)): \(rule)") }
        return value
    }

    /// Fails with `message`, naming where `key`'s value came from.
    func refuse(_ key: String, _ message: String) -> ValidationError {
        ValidationError("\(source(of: key)): \(message)")
    }

    /// What the reads met, by setting name: which source answered, and whether its value
    /// could not be read as the type asked for.
    private final class Events: AccessReporter, Sendable {
        private let last = NIOLockedValueBox([String: (provider: Int, failed: Bool)]())

        func report(_ event: AccessEvent) {
            guard let key = event.metadata.key.components.last else { return }
            let providerFailed: Bool
            if case .failure = event.result {
                providerFailed = true
            } else {
                providerFailed = event.providerResults.contains { if case .failure = $0.result { true } else { false } }
            }
            let failed = providerFailed || event.conversionError != nil
            last.withLockedValue { $0[key] = (max(0, event.providerResults.count - 1), failed) }
        }

        func lastProvider(of key: String) -> Int { last.withLockedValue { $0[key]?.provider ?? 0 } }
        func failed(_ key: String) -> Bool { last.withLockedValue { $0[key]?.failed ?? false } }
    }
}
