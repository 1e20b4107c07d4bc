import Foundation
import GRDB
import Logging
import NotedCore
import PostgresNIO
import Testing

@testable import NotedServer

/// The storage backends the tests run against.
enum Backend: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    case postgres

    var testDescription: String { rawValue }

    /// The PostgreSQL server of the test run, or nil (then PostgreSQL tests skip with a notice).
    static var postgresURL: String? {
        let url = ProcessInfo.processInfo.environment["NOTED_TEST_POSTGRES_URL"]
        if url == nil || url?.isEmpty == true {
            notice()
            return nil
        }
        return url
    }

    private static let noticeOnce: Void = {
        print(
            "NOTICE: NOTED_TEST_POSTGRES_URL is not set: PostgreSQL tests are skipped (scripts/test starts a throwaway server)"
        )
    }()

    private static func notice() { _ = noticeOnce }

    /// The backends available in this run.
    static var available: [Backend] {
        postgresURL == nil ? [.sqlite] : [.sqlite, .postgres]
    }
}

/// Makes a fresh, empty database for one test and removes it afterwards.
///
/// SQLite: a file in a new temporary directory. PostgreSQL: a new database on the test server,
/// so tests running in parallel (and sweeping tombstones) never see each other's rows.
func withDatabase<T>(_ backend: Backend, _ body: (DatabaseLocation) async throws -> T) async throws -> T {
    switch backend {
    case .sqlite:
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("noted-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try await body(.sqlite(path: directory.appendingPathComponent("noted.sqlite").path))
    case .postgres:
        guard let url = Backend.postgresURL, var components = URLComponents(string: url) else {
            throw TestSetupError("NOTED_TEST_POSTGRES_URL is not set")
        }
        let name = "noted_t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await adminQuery(url: url, "CREATE DATABASE \(unescaped: name)")
        components.path = "/" + name
        let result: Result<T, any Error>
        do {
            result = .success(try await body(.postgres(url: components.string ?? url)))
        } catch {
            result = .failure(error)
        }
        try? await adminQuery(url: url, "DROP DATABASE IF EXISTS \(unescaped: name) WITH (FORCE)")
        return try result.get()
    }
}

private func adminQuery(url: String, _ query: PostgresQuery) async throws {
    let configuration = try PostgresStore.configuration(from: url)
    let client = PostgresClient(configuration: configuration, backgroundLogger: Logger(label: "test-admin"))
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        try await Task.sleep(for: .milliseconds(20))
        try await client.query(query, logger: Logger(label: "test-admin"))
        group.cancelAll()
    }
}

/// Terminates, with `pg_terminate_backend`, every connection to the test database `location`
/// whose last statement was a `LISTEN` (the server nodes' notification listeners); returns how
/// many were terminated. Another test's databases are never touched.
func terminateListeners(_ location: DatabaseLocation) async throws -> Int {
    try await listenerQuery(location, terminate: true)
}

/// How many notification listeners are connected to the test database `location`.
func listenerCount(_ location: DatabaseLocation) async throws -> Int {
    try await listenerQuery(location, terminate: false)
}

private func listenerQuery(_ location: DatabaseLocation, terminate: Bool) async throws -> Int {
    guard case .postgres(let url) = location, let admin = Backend.postgresURL,
        let path = URLComponents(string: url)?.path, path.count > 1
    else { throw TestSetupError("not a PostgreSQL test database") }
    let name = String(path.dropFirst())
    let logger = Logger(label: "test-admin")
    let client = PostgresClient(configuration: try PostgresStore.configuration(from: admin), backgroundLogger: logger)
    return try await withThrowingTaskGroup(of: Int.self) { group in
        group.addTask {
            await client.run()
            return 0
        }
        try await Task.sleep(for: .milliseconds(20))
        let rows = try await client.query(
            """
            SELECT CASE WHEN \(terminate) THEN pg_terminate_backend(pid) ELSE true END FROM pg_stat_activity
            WHERE datname = \(name) AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()
            """, logger: logger)
        var count = 0
        for try await ok in rows.decode(Bool.self) where ok { count += 1 }
        group.cancelAll()
        return count
    }
}

/// Opens a migrated store on a fresh database.
func withStore<T>(
    _ backend: Backend, limits: Limits = Limits(), conflictRevisionsKept: Int = 1000,
    _ body: (any NotedStore) async throws -> T
) async throws -> T {
    try await withDatabase(backend) { location in
        let store: any NotedStore =
            switch location {
            case .sqlite(let path):
                try SQLiteStore(path: path, limits: limits, conflictRevisionsKept: conflictRevisionsKept)
            case .postgres(let url):
                try PostgresStore(
                    url: url, limits: limits, conflictRevisionsKept: conflictRevisionsKept,
                    logger: Logger(label: "test"))
            }
        try await store.migrate()
        do {
            let result = try await body(store)
            await store.shutdown()
            return result
        } catch {
            await store.shutdown()
            throw error
        }
    }
}

struct TestSetupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs SQL statements (`$1`-style placeholders; values String, Int64 or Bool) on a store's
/// database directly: tests write what an earlier version of the schema held.
func executeRaw(_ store: any NotedStore, _ statements: [(String, [any Sendable])]) async throws {
    switch store {
    case let sqlite as SQLiteStore:
        try await sqlite.pool.write { db in
            for (sql, values) in statements {
                let arguments = StatementArguments(
                    values.map { value -> (any DatabaseValueConvertible)? in
                        switch value {
                        case let text as String: text
                        case let number as Int64: number
                        case let flag as Bool: flag
                        default: nil
                        }
                    })
                try db.execute(
                    sql: sql.replacingOccurrences(of: #"\$\d+"#, with: "?", options: .regularExpression),
                    arguments: arguments)
            }
        }
    case let postgres as PostgresStore:
        for (sql, values) in statements {
            var bindings = PostgresBindings()
            for value in values {
                switch value {
                case let text as String: bindings.append(text)
                case let number as Int64: bindings.append(number)
                case let flag as Bool: bindings.append(flag)
                case let text as String?: if let text { bindings.append(text) } else { bindings.appendNull() }
                default: break
                }
            }
            try await postgres.client.query(PostgresQuery(unsafeSQL: sql, binds: bindings), logger: postgres.logger)
        }
    default:
        Issue.record("unknown store")
    }
}

/// Opens a store (not migrated) on `location`.
func openStore(_ location: DatabaseLocation, quota: StorageQuota = .unlimited) throws -> any NotedStore {
    switch location {
    case .sqlite(let path): try SQLiteStore(path: path, limits: Limits(), quota: quota)
    case .postgres(let url): try PostgresStore(url: url, limits: Limits(), quota: quota, logger: Logger(label: "test"))
    }
}

/// Migrates `store` up to and including the migration named `last`: the schema an earlier
/// version left (tests of upgrades).
func migrate(_ store: any NotedStore, upTo last: String) async throws {
    switch store {
    case let sqlite as SQLiteStore: try await sqlite.migrate(upTo: last)
    case let postgres as PostgresStore: try await postgres.migrate(upTo: last)
    default: Issue.record("unknown store")
    }
}

/// A user as versions before spaces inserted one (a row and a `seq`, no personal space): for
/// stores migrated only up to an earlier migration.
func makeUserOfEarlierVersion(_ store: any NotedStore) async throws -> String {
    let id = UUID().uuidString.lowercased()
    let name = "user-\(id.prefix(8))"
    try await executeRaw(
        store,
        [
            (
                "INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
                [id, name, name, "x", Date().millis]
            ),
            ("INSERT INTO user_seq (user_id, seq, purged_seq) VALUES ($1, 0, 0)", [id]),
        ])
    return id
}
