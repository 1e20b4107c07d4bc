import Foundation
import NotedClient
import NotedCore

@testable import NotedServer

/// New databases for a run, copied from ones migrated once per test process.
///
/// A profile of ten seeds put a quarter of the simulation's CPU in migrating new databases:
/// every client's (one client migration drops fourteen columns, one `ALTER TABLE` each, and
/// SQLite reads the whole schema again for each) and the server's. A copy of a database just
/// migrated and closed is the file a migration makes; what a run writes after (its users,
/// devices, signing key) it still writes itself.
enum SimulationTemplates {
    private static let directory: String = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        atexit { try? FileManager.default.removeItem(atPath: SimulationTemplates.directory) }
        return base + "/noted-sim-templates-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))"
    }()

    /// A migrated client database, made on first use.
    private static let client: Result<String, any Error> = Result {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/client.sqlite"
        do {
            _ = try LocalStore.open(path: path, collections: [World.clientJournal])
        }  // closed as it goes: SQLite folds its WAL into the file when the last connection closes
        return path
    }

    private static let server = ServerTemplate()

    /// Puts a new client database at `path` (nothing when one is there: a client reopened).
    static func client(at path: String) throws {
        try copy(client.get(), to: path)
    }

    /// Puts a new server database at `path` (nothing when one is there: a server restarted).
    static func server(at path: String) async throws {
        try copy(await server.path(), to: path)
    }

    private static func copy(_ template: String, to path: String) throws {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: template + suffix) {
            try FileManager.default.copyItem(atPath: template + suffix, toPath: path + suffix)
        }
    }

    /// Made once: runs that start together wait for the same one.
    private actor ServerTemplate {
        private var making: Task<String, any Error>?

        func path() async throws -> String {
            if let making { return try await making.value }
            let task = Task {
                try FileManager.default.createDirectory(
                    atPath: SimulationTemplates.directory, withIntermediateDirectories: true)
                let path = SimulationTemplates.directory + "/server.sqlite"
                let store = try SQLiteStore(
                    path: path, schemas: SchemaRegistry([.notes, World.journal]), limits: World.configuration.limits)
                try await store.migrate()
                await store.shutdown()
                return path
            }
            making = task
            return try await task.value
        }
    }
}
