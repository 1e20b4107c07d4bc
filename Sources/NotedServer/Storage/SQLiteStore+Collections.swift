import GRDB

extension SQLiteStore {
    static func registerCollectionsMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("collections") { db in
            try db.execute(sql: "CREATE TABLE collection_schemas (name TEXT PRIMARY KEY, document TEXT NOT NULL)")
        }
    }

    public func serveCollections(
        _ documents: [String: String],
        check: @escaping @Sendable (_ stored: [String: String], _ holdingRecords: Set<String>) throws -> Void
    ) async throws {
        try await pool.write { db in
            var stored: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT name, document FROM collection_schemas") {
                stored[row["name"]] = row["document"]
            }
            let holding = Set(try String.fetchAll(db, sql: "SELECT DISTINCT collection FROM records WHERE deleted = 0"))
            try check(stored, holding)
            try db.execute(sql: "DELETE FROM collection_schemas")
            for (name, document) in documents.sorted(by: { $0.key < $1.key }) {
                try db.execute(
                    sql: "INSERT INTO collection_schemas (name, document) VALUES (?, ?)", arguments: [name, document])
            }
        }
    }
}
