import Foundation
import GRDB
import NotedCore

/// A shared space this device syncs (protocol 2, docs/protocol.md "Spaces"), as the server
/// last listed it.
public struct LocalSpace: Sendable, Hashable {
    public var id: String
    public var name: String
    /// The user's role in it.
    public var role: SpaceRole
    /// The owner's username.
    public var owner: String
    /// The space's latest `seq` when last listed.
    public var seq: Int64
    /// The pull cursor: the space's records up to this `seq` are on this device.
    public var cursor: Int64
}

extension LocalStore {
    /// The shared spaces this device syncs, by name.
    public func spaces() async throws -> [LocalSpace] {
        try await writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM space ORDER BY name, id").map { row in
                LocalSpace(
                    id: row["id"], name: row["name"], role: SpaceRole(rawValue: row["role"]) ?? .viewer,
                    owner: row["owner"], seq: row["seq"], cursor: row["cursor"])
            }
        }
    }

    /// Each shared space's pull cursor.
    public func spaceCursors() async throws -> [String: Int64] {
        try await writer.read { db in
            Dictionary(
                try Row.fetchAll(db, sql: "SELECT id, cursor FROM space").map {
                    ($0["id"] as String, $0["cursor"] as Int64)
                },
                uniquingKeysWith: max)
        }
    }

    /// Takes the server's list of the user's spaces (`welcome`, or a `spaces` message): the
    /// shared ones are kept with their cursors; the records of a space no longer listed (the
    /// user left or was removed, or it was deleted) leave this device, except those with edits
    /// the server has not acknowledged: those stay, refused, for the user to copy to their
    /// personal space (``copyToPersonalSpace(_:id:)``) or discard; if the user is back in the
    /// space before that, they are sent.
    public func storeSpaces(_ list: [JSONValue]) async throws -> StoreEffect {
        // Every list names the personal space: one that does not is not taken (nothing dropped).
        guard list.contains(where: { $0["personal"]?.boolValue == true }) else { return StoreEffect() }
        let shared = list.compactMap(SpaceInfo.init(json:)).filter { !$0.personal }
        return try await writer.write { db in
            var effect = StoreEffect()
            let listed = Set(shared.map(\.id))
            for space in shared {
                try db.execute(
                    sql: """
                        INSERT INTO space (id, name, role, owner, seq) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (id) DO UPDATE SET name = excluded.name, role = excluded.role, owner = excluded.owner, seq = excluded.seq
                        """, arguments: [space.id, space.name, space.role.rawValue, space.owner, space.seq])
            }
            let gone = try String.fetchAll(db, sql: "SELECT id FROM space").filter { !listed.contains($0) }
            for id in gone { try db.execute(sql: "DELETE FROM space WHERE id = ?", arguments: [id]) }
            // Records of spaces not listed, whatever the table held (a list missed while offline).
            let inSpaces = try RecordRow.fetchAll(db, sql: "SELECT * FROM record WHERE space IS NOT NULL")
            for var row in inSpaces where listed.contains(row.space ?? "") && row.state.refusal != nil {
                // Back in the space (invited again): what was kept because the user was out goes.
                let before = row
                row.state.backInSpace()
                guard row != before else { continue }
                try row.update(db)
                effect.change(row.id, in: row.collection)
            }
            let rows = inSpaces.filter { !listed.contains($0.space ?? "") }
            for var row in rows {
                if row.state == .synced || (!row.state.pending && row.state.refusal == nil) || row.state.purging {
                    // Nothing of the user's to keep (a note being deleted included).
                    try row.delete(db)
                    effect.remove(row.id, in: row.collection)
                } else if row.state.inflight == nil && row.state.refusal == nil {
                    // Edits never sent: kept, refused, never sent to a space the user is not in.
                    row.state.outOfSpace()
                    try row.update(db)
                    if let refusal = row.state.refusal { effect.refused.append((row.id, refusal)) }
                    effect.change(row.id, in: row.collection)
                }
                // In flight: its answer (an ack, or `not_found`) comes first; the next list
                // decides again.
            }
            return effect
        }
    }

    /// A copy of a record, with its fields as this device has them, in the personal space (a
    /// new id); the original leaves the device if its space is no longer the user's (and it has
    /// no change in flight), else it stays as it is. For a record of a space the user is no
    /// longer in, the way to keep what they wrote.
    public func copyToPersonalSpace(_ collection: String, id: String) async throws -> (
        copy: StoredRecord, effect: StoreEffect
    ) {
        _ = try declared(collection)
        let (copy, effect) = try await transaction { transaction in
            guard let row = try RecordRow.find(transaction.db, id: id), row.collection == collection else {
                throw NotedClientError(.notFound, "no \(collection) record \(id)")
            }
            guard !row.state.purging else { throw NotedClientError(.notFound, "no \(collection) record \(id)") }
            return try transaction.create(collection, fields: row.localFields)
        }
        var all = effect
        let dropped = try await writer.write { db -> StoreEffect in
            var effect = StoreEffect()
            guard let row = try RecordRow.find(db, id: id) else { return effect }
            let listed =
                try row.space.map {
                    try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM space WHERE id = ?)", arguments: [$0])
                        ?? false
                } ?? true
            guard !listed, row.state.inflight == nil else { return effect }
            try row.delete(db)
            effect.remove(row.id, in: row.collection)
            return effect
        }
        for id in dropped.removed { all.remove(id, in: collection) }
        return (copy, all)
    }

    /// Throws unless the user may write records in shared space `space` (editor or above).
    static func checkWritable(_ db: Database, space: String) throws {
        guard let role = try String.fetchOne(db, sql: "SELECT role FROM space WHERE id = ?", arguments: [space]) else {
            throw NotedClientError(
                .notFound, "no shared space \(space) on this device (sync first, or check `noted spaces`)")
        }
        guard SpaceRole(rawValue: role).map({ $0 != .viewer }) ?? false else {
            throw NotedClientError(.invalidInput, "you are a viewer of this space: its records are read-only for you")
        }
    }

    /// Whether shared space `space` is one this device syncs (listed by the server last time).
    static func isListed(_ db: Database, space: String) throws -> Bool {
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM space WHERE id = ?)"), arguments: [space]) ?? false
    }

    /// Marks the records `ids` as being in shared space `space` (a page or broadcast of it).
    static func setSpace(_ db: Database, ids: [String], space: String) throws {
        for start in stride(from: 0, to: ids.count, by: 500) {
            let batch = Array(ids[start..<min(start + 500, ids.count)])
            let marks = Array(repeating: "?", count: batch.count).joined(separator: ",")
            var arguments: StatementArguments = [space]
            arguments += StatementArguments(batch)
            try db.execute(
                sql: "UPDATE record SET space = ? WHERE id IN (\(marks)) AND space IS NOT ?",
                arguments: arguments + [space])
        }
    }
}
