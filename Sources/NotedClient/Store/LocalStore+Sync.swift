import Foundation
import GRDB
import NotedCore

/// A change from the outbox, ready to push.
public struct OutboxChange: Sendable, Hashable {
    public var recordID: String
    public var ccid: String
    /// The change object as sent, encoded once when the change was made (a `Change`'s `json`)
    /// and stored with the record: a resend carries the identical text.
    public var body: String

    public init(recordID: String, ccid: String, body: String) {
        self.recordID = recordID
        self.ccid = ccid
        self.body = body
    }
}

/// What a sync step did to the local notes, for the event stream.
public struct StoreEffect: Sendable, Hashable {
    public var changed: [String] = []
    public var removed: [String] = []
    /// Notes created to keep text whose record was purged elsewhere: (purged id, new id).
    public var forked: [(String, String)] = []
    /// The change must be pulled before this record can sync again.
    public var needsPull = false
    /// The shared space to pull for `needsPull` (nil: the personal space).
    public var pullSpace: String?
    /// The in-flight change was kept to be resent later (e.g. `rate_limited`).
    public var retryLater = false
    /// The server refused a change for good; the edit stays local.
    public var refused: [(id: String, message: String)] = []
    /// Merges that could not place all of an edit: (note id, text fields).
    public var conflicts: [(id: String, fields: [String])] = []

    /// The collection of every id in `changed` and `removed`.
    public var collections: [String: String] = [:]
    /// The ids in `changed` that are new on this device.
    public var added: Set<String> = []

    mutating func change(_ id: String, in collection: String) {
        changed.append(id)
        collections[id] = collection
    }

    mutating func add(_ id: String, in collection: String) {
        change(id, in: collection)
        added.insert(id)
    }

    mutating func remove(_ id: String, in collection: String) {
        removed.append(id)
        collections[id] = collection
    }

    /// `ids` grouped by collection, each group in the order of `ids`, groups by name.
    func byCollection(_ ids: [String]) -> [(String, [String])] {
        Dictionary(grouping: ids) { collections[$0] ?? LocalStore.collection }.sorted { $0.key < $1.key }.map {
            ($0.key, $0.value)
        }
    }

    public var isEmpty: Bool {
        changed.isEmpty && removed.isEmpty && forked.isEmpty && refused.isEmpty && conflicts.isEmpty
    }

    public static func == (a: StoreEffect, b: StoreEffect) -> Bool {
        a.changed == b.changed && a.removed == b.removed && a.forked.map(\.0) == b.forked.map(\.0)
            && a.forked.map(\.1) == b.forked.map(\.1) && a.needsPull == b.needsPull && a.retryLater == b.retryLater
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(changed)
        hasher.combine(removed)
    }
}

extension LocalStore {
    /// The pull cursor: the `seq` to send as `since`.
    public func cursor() async throws -> Int64 {
        try await writer.read { db in try meta(db, "cursor").flatMap(Int64.init) ?? 0 }
    }

    /// Stores one `changes` page and advances the cursor, in one transaction.
    ///
    /// The records the page inserts are indexed for search by one statement at its end rather
    /// than by the insert trigger, one statement each (see migrations v9 and v10): FTS5 writes a
    /// segment at every statement's savepoint.
    /// - Parameter space: the shared space the page is of (nil: the personal space); its
    ///   records are marked as in it and the cursor stored is that space's.
    public func storePage(records: [NotedCore.Record], cursor: Int64, space: String? = nil) async throws
        -> StoreEffect
    {
        let deferral = searchIndexDeferred
        return try await writer.write { db in
            // A page of a space the user left while it was on the way: not taken.
            if let space, try !Self.isListed(db, space: space) { return StoreEffect() }
            let before = try Int64.fetchOne(db, sql: "SELECT max(rowKey) FROM record") ?? 0
            var effect = StoreEffect()
            try deferral.whileDeferred(above: before) {
                // Which of the page's ids this store holds or buried, asked once for the page
                // rather than twice for each record (most of a first sync's are new).
                let ids = records.map(\.id)
                let held = try Self.ids(db, in: "record", among: ids)
                let buried = try Self.ids(db, in: "tombstone", among: ids)
                var seen: Set<String> = []
                for record in records where schemas[record.collection] != nil {
                    // An id the page brings twice is looked up again the second time.
                    let known =
                        seen.insert(record.id).inserted && !held.contains(record.id)
                        ? Known(held: false, buried: buried.contains(record.id)) : nil
                    try absorb(db, record: record, effect: &effect, known: known)
                }
                // Rows inserted in this transaction have keys above every key before it; their
                // text was kept as they were inserted (`noted_page_search_text`, while deferred).
                try db.execute(
                    sql: """
                        INSERT INTO record_fts(rowid, content)
                        SELECT rowKey, noted_page_search_text(rowKey, collection, local) FROM record WHERE rowKey > ?
                        """, arguments: [before])
            }
            if let space {
                try Self.setSpace(db, ids: records.map(\.id), space: space)
                try db.execute(sql: "UPDATE space SET cursor = ? WHERE id = ?", arguments: [cursor, space])
            } else {
                try setMeta(db, "cursor", String(cursor))
            }
            return effect
        }
    }

    /// At the end of a snapshot pull (`since: 0`, or `reset`), stored up to its cursor: a synced
    /// record absent from the snapshot was purged on the server, and is treated as if its
    /// tombstone had arrived. Without local edits it is dropped; with unsent text edits the text
    /// is kept as a new note. A record with a change in flight (a create too) waits for the
    /// answer: an ack with a `seq` up to the snapshot's cursor means the change was applied
    /// before the snapshot, so the record has been purged since (see `applyAck`).
    /// Only the records of the snapshot's space (`space`; nil: the personal space) are looked at.
    public func dropAbsent(keeping ids: Set<String>, space: String? = nil) async throws -> StoreEffect {
        try await writer.write { db in
            var effect = StoreEffect()
            if let space, try !Self.isListed(db, space: space) { return effect }
            let cursor =
                try space.map {
                    try Int64.fetchOne(db, sql: "SELECT cursor FROM space WHERE id = ?", arguments: [$0]) ?? 0
                } ?? meta(db, "cursor").flatMap(Int64.init) ?? 0
            // The ids first: reading and decoding every synced record to find the few absent
            // ones took 2 % of an initial sync of 10,000 notes.
            let absent = try Row.fetchAll(
                db, sql: "SELECT rowKey, id FROM record WHERE (rev > 0 OR \(RecordRow.inflight)) AND space IS ?",
                arguments: [space]
            )
            .filter { !ids.contains($0["id"]) }.map { $0["rowKey"] as Int64 }
            guard !absent.isEmpty else { return effect }
            let candidates = try RecordRow.filter(keys: absent).order(RecordRow.Columns.rowKey).fetchAll(db)
            for row in candidates {
                var out = RecordTransition.Outcome(record: row, effect: effect)
                transition(row.collection).absentFromSnapshot(at: cursor, into: &out)
                try commit(db, before: row, out)
                effect = out.effect
            }
            return effect
        }
    }

    /// What a page already knows of a record's id: whether the store holds it, and whether it
    /// was buried (``storePage(records:cursor:)``).
    struct Known {
        var held: Bool
        var buried: Bool
    }

    /// The ids among `ids` that `table` (`record` or `tombstone`) holds, asked in batches.
    static func ids(_ db: Database, in table: String, among ids: [String]) throws -> Set<String> {
        var found: Set<String> = []
        for start in stride(from: 0, to: ids.count, by: 500) {
            let batch = Array(ids[start..<min(start + 500, ids.count)])
            let marks = Array(repeating: "?", count: batch.count).joined(separator: ",")
            found.formUnion(
                try String.fetchAll(
                    db, sql: "SELECT id FROM \(table) WHERE id IN (\(marks))", arguments: StatementArguments(batch)))
        }
        return found
    }

    /// Takes a server state of a record (``RecordTransition/absorb(_:buried:into:)``).
    func absorb(_ db: Database, record: NotedCore.Record, effect: inout StoreEffect, known: Known? = nil) throws {
        let row = try known?.held == false ? nil : RecordRow.find(db, id: record.id)
        let buried = try row == nil && !record.deleted ? (known?.buried ?? isBuried(db, record.id)) : false
        var out = RecordTransition.Outcome(record: row, effect: effect)
        transition(record.collection).absorb(record, buried: buried, into: &out)
        try commit(db, before: row, out)
        effect = out.effect
    }

    /// The rules for a record of `collection`, at this moment.
    func transition(_ collection: String) -> RecordTransition {
        RecordTransition(math: recordMath(collection), now: Date(), newID: { UUID().uuidString.lowercased() })
    }

    /// Writes what a transition decided for a record that was `before` (nil: none held): the
    /// record inserted, updated (only when it changed), or deleted; its id buried; a copy
    /// keeping a purged record's text inserted. A record taken in new from the server is
    /// kept for the search index (``SearchIndexDeferral``, while a page is stored).
    func commit(_ db: Database, before: RecordRow?, _ out: RecordTransition.Outcome) throws {
        if var after = out.record {
            if before == nil {
                try after.insertNew(db)
                if let fields = out.newFields, let rowKey = after.rowKey {
                    searchIndexDeferred.keep(
                        searchTexts.of(collection: after.collection, fields: fields), from: after.local, of: rowKey)
                }
            } else if after != before {
                try after.update(db)
            }
        } else if let before {
            try before.delete(db)
        }
        if let id = out.buried { try bury(db, id) }
        if var fork = out.fork { try fork.insertNew(db) }
    }

    private func bury(_ db: Database, _ id: String) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO tombstone(id) VALUES (?)", arguments: [id])
    }

    private func isBuried(_ db: Database, _ id: String) throws -> Bool {
        // A cached statement: asked for every record a pull brings that this store lacks.
        try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM tombstone WHERE id = ?)"), arguments: [id]) ?? false
    }

    /// The first `limit` records (in the order they were made) whose sync flags are one of
    /// `flags`, of a declared collection, not in `excluding`: chosen through the flags index
    /// alone (it holds the collection and the id), then read. Filtering the records themselves
    /// read every waiting one, long as they are, for every batch.
    static func outboxRows(_ db: Database, flags: [Int], declared: [String], excluding: Set<String>, limit: Int) throws
        -> [RecordRow]
    {
        func marks(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ",") }
        let excluded = Array(excluding)
        // One flag value at a time: the index then yields its rows in `rowKey` order and the
        // query stops at `limit` (with several values at once SQLite read and sorted every
        // waiting row for each batch: 100,000 notes waiting made a sync quadratic).
        let sql = """
            SELECT rowKey FROM record INDEXED BY record_by_sync_flags
            WHERE syncFlags <> 0 AND syncFlags = ? AND collection IN (\(marks(declared.count))) AND id NOT IN (\(marks(excluded.count)))
            ORDER BY rowKey LIMIT ?
            """
        var keys: [Int64] = []
        for flag in flags {
            var arguments = StatementArguments([flag])
            arguments += StatementArguments(declared)
            arguments += StatementArguments(excluded)
            arguments += [limit]
            keys += try Int64.fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
        }
        keys = Array(keys.sorted().prefix(limit))
        guard !keys.isEmpty else { return [] }
        return try RecordRow.filter(keys: keys).order(RecordRow.Columns.rowKey).fetchAll(db)
    }

    /// The changes to push: first every in-flight change not in `sent` (resent unchanged),
    /// then new changes for dirty records without one, written as in-flight before returning.
    public func outbox(excluding sent: Set<String>, limit: Int) async throws -> (
        changes: [OutboxChange], effect: StoreEffect
    ) {
        try await writer.write { db in
            var effect = StoreEffect()
            // Only as many rows as can be taken are read and decoded, those in `sent` left out
            // by the query: with 10,000 notes waiting (an import), reading every one (or every
            // one already sent) for each batch of 100 made a sync of them quadratic, minutes of
            // CPU. A record of a collection this store no longer declares (opened without it)
            // waits: sent now, it would go without its fields and come back empty.
            let declared = Array(schemas.schemas.keys)
            var result = try inflightChanges(db, declared: declared, excluding: sent, limit: limit)
            // Every dirty row handled below leaves the dirty set (sent, deleted, or found to
            // have nothing to send), so pages are read until the batch is full or none is left.
            // Records whose change adds an attachment still uploading wait (left dirty, not read
            // again in this call): the server would refuse them `missing_blob`.
            var skipped = sent
            while result.count < limit {
                let handled = try Self.outboxRows(
                    db, flags: SyncState.waitingFlags, declared: declared, excluding: skipped,
                    limit: limit - result.count)
                guard !handled.isEmpty else { break }
                for row in handled {
                    guard result.count < limit else { break }
                    if let change = try newChange(db, row: row, effect: &effect, skipped: &skipped) {
                        result.append(change)
                    }
                }
            }
            return (result, effect)
        }
    }

    /// The in-flight changes of records not in `sent`, to resend unchanged, at most `limit`.
    private func inflightChanges(_ db: Database, declared: [String], excluding sent: Set<String>, limit: Int) throws
        -> [OutboxChange]
    {
        var result: [OutboxChange] = []
        let rows = try Self.outboxRows(
            db, flags: SyncState.inflightFlags, declared: declared, excluding: sent, limit: limit)
        for row in rows where result.count < limit {
            guard let change = row.state.inflight, (try? JSONValue.parse(change.body)) != nil else { continue }
            // A change refused `missing_blob` waits for its files to go up again.
            if try Self.uploadGate(db, ops: sentOps(change, in: row.collection), schema: schemas[row.collection])
                == .waiting
            {
                continue
            }
            result.append(OutboxChange(recordID: row.id, ccid: change.ccid, body: change.body))
        }
        return result
    }

    /// The ops of a change in flight, read back from the text it was sent as (empty when there
    /// is none, or when it does not read as a change of its collection's schema).
    private func sentOps(_ change: SyncState.Inflight?, in collection: String) -> [String: FieldOp] {
        guard let change, let schema = schemas[collection],
            let fields = (try? JSONValue.parse(change.body))?["fields"]?.objectValue
        else { return [:] }
        return
            (try? ChangeParser(schemas: SchemaRegistry([schema]), limits: .unbounded).parse(fields: fields, of: schema))
            ?? [:]
    }

    /// A new change for a record waiting to be sent, written as in flight. Nil when there is
    /// none to send now: a purged record the server never had is deleted, a record whose edits
    /// cancel out is synced again, one whose files are still uploading waits (added to
    /// `skipped`), one too large is refused.
    private func newChange(_ db: Database, row: RecordRow, effect: inout StoreEffect, skipped: inout Set<String>) throws
        -> OutboxChange?
    {
        var row = row
        let ccid = ChangeID.next()
        let baseRev = row.state.nextBaseRev(shadowRev: row.rev)
        var change = Change(
            ccid: ccid, collection: row.collection, id: row.id, baseRev: baseRev, op: .upsert, fields: [:])
        var sentFields: [String: JSONValue]?
        if row.state.purging {
            if row.rev == 0 {
                try row.delete(db)
                effect.remove(row.id, in: row.collection)
                return nil
            }
            change.op = .delete
        } else {
            let math = recordMath(row.collection)
            let ops = math.ops(
                from: row.shadowFields, to: row.localFields, textAsSet: row.rev == 0 || row.state.sendsTextAsSet)
            guard !ops.isEmpty || row.rev == 0 else {
                row.state.nothingToSend()
                try row.update(db)
                effect.change(row.id, in: row.collection)
                return nil
            }
            switch try Self.uploadGate(db, ops: ops, schema: schemas[row.collection]) {
            case .waiting?:
                skipped.insert(row.id)
                return nil
            case .refused(let why)?:
                row.state.refused(.tooLarge, message: why)
                try row.update(db)
                if let refusal = row.state.refusal { effect.refused.append((row.id, refusal)) }
                effect.change(row.id, in: row.collection)
                return nil
            case nil:
                break
            }
            change.fields = ops
            sentFields = math.applyExactly(ops: ops, to: row.shadowFields)
        }
        // A shared space's record names it (protocol 2); the personal space's as protocol 1.
        var json = change.json
        if let space = row.space, case .object(var object) = json {
            object["space"] = .string(space)
            json = .object(object)
        }
        let body = json.jsonString
        row.state.send(SyncState.Inflight(ccid: ccid, baseRev: baseRev, body: body, sent: sentFields))
        try row.update(db)
        return OutboxChange(recordID: row.id, ccid: ccid, body: body)
    }

    /// Takes an `ack` (``RecordTransition/ack(_:into:)``).
    public func applyAck(_ ack: Ack) async throws -> StoreEffect {
        try await writer.write { db in
            guard let row = try RecordRow.find(db, id: ack.id) else { return StoreEffect() }
            var out = RecordTransition.Outcome(record: row)
            transition(row.collection).ack(ack, into: &out)
            try commit(db, before: row, out)
            if out.effect.needsPull { out.effect.pullSpace = row.space }
            return out.effect
        }
    }

    /// Takes a `reject` as docs/protocol.md section 5 prescribes for its code.
    public func applyReject(_ reject: Reject) async throws -> StoreEffect {
        guard let id = reject.id, let ccid = reject.ccid else { return StoreEffect() }
        return try await refused(id: id, ccid: ccid, code: reject.code, text: reject.message, current: reject.current)
    }

    /// A change this client will not send (larger than the server's message limit): kept as
    /// refused, as if the server had answered `too_large`.
    public func refuse(_ change: OutboxChange, reason: String) async throws -> StoreEffect {
        try await refused(id: change.recordID, ccid: change.ccid, code: .tooLarge, text: reason, current: nil)
    }

    private func refused(id: String, ccid: String, code: ErrorCode, text: String, current: NotedCore.Record?)
        async throws -> StoreEffect
    {
        try await writer.write { db in
            guard var row = try RecordRow.find(db, id: id), row.state.inflight?.ccid == ccid else {
                return StoreEffect()
            }
            // A shared space's `not_found`: the user is no longer in it (the `spaces` message
            // saying so may come after): kept refused rather than sent again and again.
            if code == .notFound, row.space != nil {
                var effect = StoreEffect()
                if row.state.purging {
                    // A delete: nothing of the user's to keep.
                    try row.delete(db)
                    effect.remove(row.id, in: row.collection)
                    return effect
                }
                row.state.outOfSpace()
                try row.update(db)
                effect.refused.append((row.id, SyncState.outOfSpaceRefusal))
                effect.change(row.id, in: row.collection)
                return effect
            }
            // `missing_blob`: the files the change adds go up again (those of the change sent,
            // not the note's files now: one removed since is still named by the change); one
            // this device lacks too refuses the change (RecordTransition.refused).
            let absent =
                code == .missingBlob
                ? try Self.markAttachmentsPending(
                    db, ops: sentOps(row.state.inflight, in: row.collection), schema: schemas[row.collection]) : nil
            var out = RecordTransition.Outcome(record: row)
            transition(row.collection).refused(
                ccid: ccid, code: code, message: text, current: current, absentAttachment: absent, into: &out)
            try commit(db, before: row, out)
            if out.effect.needsPull { out.effect.pullSpace = row.space }
            return out.effect
        }
    }

    /// Drops this device's edits of a record that are not yet sent (a refused edit, or unsynced
    /// edits a user chose to give up): the record shows the server's version again, and a
    /// record the server never acknowledged is removed. A change already in flight is not
    /// taken back (the server may have applied it); its answer brings the server's state.
    public func discardLocalChanges(_ id: String) async throws -> StoreEffect {
        try await writer.write { db in
            guard let row = try RecordRow.find(db, id: id) else { throw NotedClientError(.notFound, "no record \(id)") }
            var out = RecordTransition.Outcome(record: row)
            transition(row.collection).discard(into: &out)
            try commit(db, before: row, out)
            return out.effect
        }
    }

    /// Applies a `change` broadcast when the record is exactly at its `prevRev`; returns false
    /// when the client must pull instead.
    public func applyBroadcast(_ broadcast: Broadcast, limits: Limits) async throws -> (
        applied: Bool, effect: StoreEffect
    ) {
        guard schemas[broadcast.collection] != nil else { return (true, StoreEffect()) }
        return try await writer.write { db in
            // A change of a space the user left (sent before the `spaces` message): not taken.
            if let space = broadcast.space, try !Self.isListed(db, space: space) { return (true, StoreEffect()) }
            let row = try RecordRow.find(db, id: broadcast.id)
            let buried = try row == nil && isBuried(db, broadcast.id)
            var out = RecordTransition.Outcome(record: row)
            let applied = transition(broadcast.collection).broadcast(
                broadcast, buried: buried, limits: limits, into: &out)
            try commit(db, before: row, out)
            if let space = broadcast.space, out.record != nil {
                try Self.setSpace(db, ids: [broadcast.id], space: space)
            }
            return (applied, out.effect)
        }
    }

    /// True when nothing waits to be sent or acknowledged.
    public func isOutboxEmpty() async throws -> Bool {
        try await pendingCount() == 0
    }

    /// Notes whose last merge could not place all of this device's edit, with the fields.
    public func conflicts() async throws -> [(id: String, fields: [String])] {
        try await writer.read { db in
            try RecordRow.filter(sql: "json_extract(sync, '$.conflicts') IS NOT NULL AND \(RecordRow.visible)")
                .fetchAll(db)
                .map { ($0.id, $0.state.conflicts) }
        }
    }

    static func date(from text: String) -> Date? {
        Timestamp.parseRFC3339(text)
    }
}
