import PostgresNIO

extension PostgresStore {
    static let collectionsMigration: (String, [PostgresQuery]) = (
        "collections",
        [
            "CREATE TABLE collection_schemas (name TEXT PRIMARY KEY, document TEXT NOT NULL)"
        ]
    )

    public func serveCollections(
        _ documents: [String: String],
        check: @escaping @Sendable (_ stored: [String: String], _ holdingRecords: Set<String>) throws -> Void
    ) async throws {
        do {
            try await write(documents, check: check)
        } catch let error as PostgresTransactionError where error.closureError is StartupRefusal {
            // Rolled back: the refusal itself is the answer.
            throw error.closureError ?? error
        }
    }

    private func write(
        _ documents: [String: String],
        check: @escaping @Sendable (_ stored: [String: String], _ holdingRecords: Set<String>) throws -> Void
    ) async throws {
        try await client.withTransaction(logger: logger) { connection in
            // Nodes starting together check and write one after the other.
            try await connection.run("SELECT pg_advisory_xact_lock(7361627)", logger: logger)
            var stored: [String: String] = [:]
            let rows = try await connection.query("SELECT name, document FROM collection_schemas", logger: logger)
            for try await (name, document) in rows.decode((String, String).self) {
                stored[name] = document
            }
            var holding = Set<String>()
            let collections = try await connection.query(
                "SELECT DISTINCT collection FROM records WHERE NOT deleted", logger: logger)
            for try await name in collections.decode(String.self) {
                holding.insert(name)
            }
            try check(stored, holding)
            try await connection.query("DELETE FROM collection_schemas", logger: logger)
            for (name, document) in documents.sorted(by: { $0.key < $1.key }) {
                try await connection.query(
                    "INSERT INTO collection_schemas (name, document) VALUES (\(name), \(document))", logger: logger)
            }
        }
    }
}
