import Foundation
import GRDB
import NotedCore

/// A change from the outbox, ready to push.
public struct OutboxChange: Sendable, Hashable {
    public var recordID: String
    public var ccid: String
    /// The exact change object; a resend carries the identical body.
    public var body: JSONValue
}

/// What a sync step did to the local notes, for the event stream.
public struct StoreEffect: Sendable, Hashable {
    public var changed: [String] = []
    public var removed: [String] = []
    /// Notes created to keep text whose record was purged elsewhere: (purged id, new id).
    public var forked: [(String, String)] = []
    /// The change must be pulled before this record can sync again.
    public var needsPull = false
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
        Dictionary(grouping: ids) { collections[$0] ?? LocalStore.collection }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    public var isEmpty: Bool { changed.isEmpty && removed.isEmpty && forked.isEmpty && refused.isEmpty && conflicts.isEmpty }

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
    public func storePage(records: [NotedCore.Record], cursor: Int64) async throws -> StoreEffect {
        let deferral = searchIndexDeferred
        return try await writer.write { db in
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
                    let known = seen.insert(record.id).inserted && !held.contains(record.id)
                        ? Known(held: false, buried: buried.contains(record.id)) : nil
                    try absorb(db, record: record, effect: &effect, known: known)
                }
                // Rows inserted in this transaction have keys above every key before it; their
                // text was kept as they were inserted (`noted_page_search_text`, while deferred).
                try db.execute(sql: """
                    INSERT INTO record_fts(rowid, content)
                    SELECT rowKey, noted_page_search_text(rowKey, collection, local) FROM record WHERE rowKey > ?
                    """, arguments: [before])
            }
            try setMeta(db, "cursor", String(cursor))
            return effect
        }
    }

    /// At the end of a snapshot pull (`since: 0`, or `reset`), stored up to its cursor: a synced
    /// record absent from the snapshot was purged on the server, and is treated as if its
    /// tombstone had arrived. Without local edits it is dropped; with unsent text edits the text
    /// is kept as a new note. A record with a change in flight (a create too) waits for the
    /// answer: an ack with a `seq` up to the snapshot's cursor means the change was applied
    /// before the snapshot, so the record has been purged since (see `applyAck`).
    public func dropAbsent(keeping ids: Set<String>) async throws -> StoreEffect {
        try await writer.write { db in
            var effect = StoreEffect()
            let cursor = try meta(db, "cursor").flatMap(Int64.init) ?? 0
            // The ids first: reading and decoding every synced record to find the few absent
            // ones took 2 % of an initial sync of 10,000 notes.
            let absent = try Row.fetchAll(db, sql: "SELECT rowKey, id FROM record WHERE rev > 0 OR \(RecordRow.inflight)")
                .filter { !ids.contains($0["id"]) }.map { $0["rowKey"] as Int64 }
            guard !absent.isEmpty else { return effect }
            let candidates = try RecordRow.filter(keys: absent).order(RecordRow.Columns.rowKey).fetchAll(db)
            for var row in candidates {
                if row.hasInflight {
                    row.state.absentFromSnapshot(at: cursor)
                    try row.update(db)
                } else if row.pending {
                    try removeOrFork(db, row: row, effect: &effect)
                } else {
                    try row.delete(db)
                    try bury(db, row.id)
                    effect.remove(row.id, in: row.collection)
                }
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
            found.formUnion(try String.fetchAll(db, sql: "SELECT id FROM \(table) WHERE id IN (\(marks))", arguments: StatementArguments(batch)))
        }
        return found
    }

    /// Takes a server state of a record: rebases local edits onto it, or stashes it while a
    /// change is in flight (the answer to that change decides how local edits move).
    func absorb(_ db: Database, record: NotedCore.Record, effect: inout StoreEffect, known: Known? = nil) throws {
        guard var row = try (known?.held == false ? nil : RecordRow.find(db, id: record.id)) else {
            guard !record.deleted else {
                try bury(db, record.id)
                return
            }
            guard try !(known?.buried ?? isBuried(db, record.id)) else { return }
            let fields = recordMath(record.collection).schema.completed(record.fields)
            var row = RecordRow(id: record.id, collection: record.collection, local: fields, now: record.updatedAt)
            row.shadow = row.local
            row.rev = record.rev
            row.state = .synced
            row.createdAt = record.createdAt
            try row.insertNew(db)
            if let rowKey = row.rowKey {
                searchIndexDeferred.keep(searchTexts.of(collection: record.collection, fields: fields), from: row.local, of: rowKey)
            }
            effect.add(record.id, in: record.collection)
            return
        }
        if row.hasInflight {
            if record.rev > row.state.heldRev(shadowRev: row.rev) {
                row.state.sawNewer(fields: record.deleted ? nil : record.fields, rev: record.rev, updatedAt: record.updatedAt)
                try row.update(db)
            }
            return
        }
        guard record.rev > row.rev else { return }
        if record.deleted {
            try removeOrFork(db, row: row, effect: &effect)
            return
        }
        try move(db, row: &row, to: record.fields, rev: record.rev, updatedAt: record.updatedAt, base: row.shadowFields)
        effect.change(row.id, in: row.collection)
    }

    /// Moves a record without an in-flight change to a newer server state, rebasing local
    /// edits made against `base` onto it.
    ///
    /// When a text hunk of the local edits cannot be placed on the new state (`requireClean`),
    /// nothing moves and false is returned: the edits then go to the server as a delta against
    /// the older revision, where the server merges them and keeps a conflict revision if it
    /// cannot place them either, so no edit is dropped without trace.
    @discardableResult
    private func move(_ db: Database, row: inout RecordRow, to fields: [String: JSONValue], rev: Int64, updatedAt: Date,
                      base: [String: JSONValue], requireClean: Bool = true) throws -> Bool {
        let math = recordMath(row.collection)
        let server = math.schema.completed(fields)
        let local = math.schema.completed(row.localFields)
        let hasEdits = local != math.schema.completed(base)
        if hasEdits {
            let (rebased, clean) = math.rebaseReportingConflicts(local: local, base: base, onto: server)
            if !clean && requireClean {
                row.state.stillToSend()
                try row.update(db)
                return false
            }
            row.localFields = rebased
        } else {
            row.localFields = server
        }
        row.shadowFields = server
        row.rev = rev
        row.state.moved(localDiffers: math.schema.completed(row.localFields) != server)
        if !hasEdits { row.updatedAt = updatedAt }
        try row.update(db)
        return true
    }

    /// A record purged on the server: gone locally, unless it holds unsynced text, which is
    /// kept as a new note. Edits that changed no text (a pin, a tag, the trash) do not bring a
    /// purged note back: several devices would each bring back a copy of text nobody changed.
    private func removeOrFork(_ db: Database, row: RecordRow, effect: inout StoreEffect) throws {
        try row.delete(db)
        try bury(db, row.id)
        let math = recordMath(row.collection)
        let local = math.schema.completed(row.localFields)
        let base = math.schema.completed(row.shadowFields)
        let textEdited = math.schema.fields.contains { name, spec in spec.kind == .text && local[name] != base[name] }
        if row.state.purging || !textEdited {
            effect.remove(row.id, in: row.collection)
            return
        }
        let newID = UUID().uuidString.lowercased()
        var copy = RecordRow(id: newID, collection: row.collection, local: local, now: Date())
        copy.createdAt = row.createdAt
        try copy.insertNew(db)
        effect.remove(row.id, in: row.collection)
        effect.forked.append((row.id, newID))
        effect.add(newID, in: row.collection)
    }

    private func bury(_ db: Database, _ id: String) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO tombstone(id) VALUES (?)", arguments: [id])
    }

    private func isBuried(_ db: Database, _ id: String) throws -> Bool {
        // A cached statement: asked for every record a pull brings that this store lacks.
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM tombstone WHERE id = ?)"), arguments: [id]) ?? false
    }

    /// The first `limit` records (in the order they were made) whose sync flags are one of
    /// `flags`, of a declared collection, not in `excluding`: chosen through the flags index
    /// alone (it holds the collection and the id), then read. Filtering the records themselves
    /// read every waiting one, long as they are, for every batch.
    static func outboxRows(_ db: Database, flags: [Int], declared: [String], excluding: Set<String>, limit: Int) throws -> [RecordRow] {
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
    public func outbox(excluding sent: Set<String>, limit: Int) async throws -> (changes: [OutboxChange], effect: StoreEffect) {
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
                let handled = try Self.outboxRows(db, flags: SyncState.waitingFlags, declared: declared, excluding: skipped, limit: limit - result.count)
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
    private func inflightChanges(_ db: Database, declared: [String], excluding sent: Set<String>, limit: Int) throws -> [OutboxChange] {
        var result: [OutboxChange] = []
        let rows = try Self.outboxRows(db, flags: SyncState.inflightFlags, declared: declared, excluding: sent, limit: limit)
        for row in rows where result.count < limit {
            guard let change = row.state.inflight, let value = try? JSONValue.parse(change.body) else { continue }
            // A change refused `missing_blob` waits for its files to go up again.
            if let ops = value["fields"]?.objectValue, try Self.uploadGate(db, ops: ops, schema: schemas[row.collection]) == .waiting {
                continue
            }
            result.append(OutboxChange(recordID: row.id, ccid: change.ccid, body: value))
        }
        return result
    }

    /// A new change for a record waiting to be sent, written as in flight. Nil when there is
    /// none to send now: a purged record the server never had is deleted, a record whose edits
    /// cancel out is synced again, one whose files are still uploading waits (added to
    /// `skipped`), one too large is refused.
    private func newChange(_ db: Database, row: RecordRow, effect: inout StoreEffect, skipped: inout Set<String>) throws -> OutboxChange? {
        var row = row
        let ccid = ChangeID.next()
        let baseRev = row.state.nextBaseRev(shadowRev: row.rev)
        var change: [String: JSONValue] = [
            "ccid": .string(ccid), "collection": .string(row.collection), "id": .string(row.id), "baseRev": .int(baseRev),
        ]
        var sentFields: [String: JSONValue]?
        if row.state.purging {
            if row.rev == 0 {
                try row.delete(db)
                effect.remove(row.id, in: row.collection)
                return nil
            }
            change["op"] = "delete"
            change["fields"] = .object([:])
        } else {
            let math = recordMath(row.collection)
            let ops = math.ops(from: row.shadowFields, to: row.localFields, textAsSet: row.rev == 0 || row.state.sendsTextAsSet)
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
            change["op"] = "upsert"
            change["fields"] = .object(ops)
            sentFields = math.applyExactly(ops: ops, to: row.shadowFields)
        }
        let body = JSONValue.object(change)
        row.state.send(SyncState.Inflight(ccid: ccid, baseRev: baseRev, body: body.jsonString, sent: sentFields))
        try row.update(db)
        return OutboxChange(recordID: row.id, ccid: ccid, body: body)
    }

    /// Takes an `ack`: the shadow moves to the acknowledged state (or a newer one seen
    /// meanwhile) and edits made since the send are rebased onto it.
    public func applyAck(_ ack: Ack) async throws -> StoreEffect {
        let (id, ccid, rev) = (ack.id, ack.ccid, ack.rev)
        return try await writer.write { db in
            var effect = StoreEffect()
            guard var row = try RecordRow.find(db, id: id), row.state.inflight?.ccid == ccid, let change = row.state.answered() else {
                return effect
            }
            guard let sent = change.sent else {
                try row.delete(db)
                try bury(db, id)
                effect.remove(id, in: row.collection)
                return effect
            }
            let acknowledged = ack.fields ?? sent
            if let absent = change.absentAtSeq, let seq = ack.seq, seq <= absent {
                // Applied before a snapshot that no longer had the record: purged since. Only
                // text edited after the send is kept (as a new note), as if the ack and then the
                // tombstone had arrived.
                row.shadowFields = acknowledged
                try removeOrFork(db, row: row, effect: &effect)
                return effect
            }
            var stash: (fields: [String: JSONValue], rev: Int64, updatedAt: Date)?
            if let newest = change.newest, newest.rev > rev {
                guard let fields = newest.fields else {
                    // Purged after our change: nothing newer than the purge.
                    try removeOrFork(db, row: row, effect: &effect)
                    return effect
                }
                stash = (fields, newest.rev, newest.updatedAt)
            }
            let conflicts = ack.conflicts ?? []
            row.state.merged(conflicts: conflicts)
            if !conflicts.isEmpty { effect.conflicts.append((id, conflicts)) }
            try rebase(db, row: &row, onto: (acknowledged, rev), newest: stash, sent: sent, sentBaseRev: change.baseRev)
            effect.change(id, in: row.collection)
            return effect
        }
    }

    /// After an ack: the record moves to the newest state seen (`newest`, a broadcast that
    /// arrived while the change was in flight) or else the acknowledged one, with the edits
    /// made since the send rebased onto it.
    private func rebase(_ db: Database, row: inout RecordRow, onto acknowledged: (fields: [String: JSONValue], rev: Int64),
                        newest stash: (fields: [String: JSONValue], rev: Int64, updatedAt: Date)?,
                        sent: [String: JSONValue], sentBaseRev: Int64) throws {
        let math = recordMath(row.collection)
        let local = math.schema.completed(row.localFields)
        let editedSince = local != math.schema.completed(sent)
        // The newest state seen, if the edits made since the send fit onto it; else the
        // acknowledged state, which holds our change exactly as we sent it (or as merged).
        if let stash, try move(db, row: &row, to: stash.fields, rev: stash.rev, updatedAt: editedSince ? row.updatedAt : stash.updatedAt, base: sent) {
            return
        }
        if try !move(db, row: &row, to: acknowledged.fields, rev: acknowledged.rev, updatedAt: editedSince ? row.updatedAt : Date(), base: sent) {
            // Not even the acknowledged state takes them (a merged ack moved the text they
            // edit): keep the user's text and say so. The next push sends it as `set` ops
            // against the revision the edits were made on, so the server sees a stale `set`
            // and keeps the text it replaces as a conflict revision. Diffing it against the
            // acknowledged state instead would overwrite someone's text without a trace
            // (found by the simulation).
            try move(db, row: &row, to: acknowledged.fields, rev: acknowledged.rev, updatedAt: row.updatedAt, base: sent, requireClean: false)
            row.localFields = local
            row.state.keepUnplacedEdits(staleBase: max(1, min(sentBaseRev, acknowledged.rev - 1)))
            try row.update(db)
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

    private func refused(id: String, ccid: String, code: ErrorCode, text: String, current: NotedCore.Record?) async throws -> StoreEffect {
        try await writer.write { db in
            var effect = StoreEffect()
            guard var row = try RecordRow.find(db, id: id), let change = row.state.inflight, change.ccid == ccid else {
                return effect
            }
            if code == .rateLimited {
                effect.retryLater = true
                return effect
            }
            if code == .missingBlob {
                // The server lacks a file this change adds (collected since it was uploaded):
                // upload it again; the change is resent as it is. A file this device does not
                // have either can never go: the change is refused, saying which.
                if let absent = try Self.markAttachmentsPending(db, fields: row.localFields, schema: schemas[row.collection]) {
                    row.state.refused(.missingBlob, message: "the attachment \(absent) is neither on the server nor on this device; remove it from the note")
                    try row.update(db)
                    if let refusal = row.state.refusal { effect.refused.append((id, refusal)) }
                    effect.change(id, in: row.collection)
                    return effect
                }
                effect.retryLater = true
                return effect
            }
            let stash: NotedCore.Record? = change.newest.map { newest in
                NotedCore.Record(collection: row.collection, id: row.id, rev: newest.rev, seq: 0, deleted: newest.fields == nil,
                                 fields: newest.fields ?? [:], createdAt: row.createdAt, updatedAt: newest.updatedAt)
            }
            row.state.refused(code, message: text)
            try row.update(db)
            switch code {
            case .gone, .notFound:
                try removeOrFork(db, row: row, effect: &effect)
                return effect
            case .alreadyExists, .invalidVersion:
                if current == nil && stash == nil { effect.needsPull = true }
            default:
                if let refusal = row.state.refusal { effect.refused.append((id, refusal)) }
            }
            for record in [stash, current].compactMap({ $0 }) {
                try absorb(db, record: record, effect: &effect)
                if effect.removed.contains(id) { return effect }
            }
            effect.change(id, in: row.collection)
            return effect
        }
    }

    /// Drops this device's edits of a record that are not yet sent (a refused edit, or unsynced
    /// edits a user chose to give up): the record shows the server's version again, and a
    /// record the server never acknowledged is removed. A change already in flight is not
    /// taken back (the server may have applied it); its answer brings the server's state.
    public func discardLocalChanges(_ id: String) async throws -> StoreEffect {
        try await writer.write { db in
            var effect = StoreEffect()
            guard var row = try RecordRow.find(db, id: id) else { throw NotedClientError(.notFound, "no record \(id)") }
            if let change = row.state.inflight {
                if let sent = change.sent { row.localFields = sent }
            } else if row.rev == 0 {
                try row.delete(db)
                effect.remove(id, in: row.collection)
                return effect
            } else {
                row.localFields = row.shadowFields
            }
            row.state.discard()
            try row.update(db)
            effect.change(id, in: row.collection)
            return effect
        }
    }

    /// Applies a `change` broadcast when the record is exactly at its `prevRev`; returns false
    /// when the client must pull instead.
    public func applyBroadcast(_ broadcast: Broadcast, limits: Limits) async throws -> (applied: Bool, effect: StoreEffect) {
        guard schemas[broadcast.collection] != nil else { return (true, StoreEffect()) }
        let (collection, math) = (broadcast.collection, recordMath(broadcast.collection))
        let (id, rev, prevRev, updatedAt) = (broadcast.id, broadcast.rev, broadcast.prevRev, broadcast.updatedAt)
        let isDelete = broadcast.op == .delete
        let ops = broadcast.fields
        return try await writer.write { db in
            var effect = StoreEffect()
            let row = try RecordRow.find(db, id: id)
            if row == nil, try isBuried(db, id) { return (true, effect) }
            let heldRev = row.map { $0.state.heldRev(shadowRev: $0.rev) } ?? 0
            if rev <= heldRev { return (true, effect) }
            // A purge needs no base: it applies whatever revision is held (a client whose
            // first pull was from 0 would otherwise never hear of it; found by the simulation).
            guard heldRev == prevRev || isDelete else { return (false, effect) }
            let base = row.map { row in row.state.inflight?.newest.map { $0.fields ?? [:] } ?? row.shadowFields } ?? [:]
            let fields: [String: JSONValue]
            if isDelete {
                fields = [:]
            } else {
                do {
                    fields = try math.apply(ops: ops, to: base, limits: limits)
                } catch {
                    return (false, effect)
                }
            }
            let record = NotedCore.Record(collection: collection, id: id, rev: rev, seq: 0, deleted: isDelete, fields: fields,
                                createdAt: row?.createdAt ?? updatedAt, updatedAt: updatedAt)
            try absorb(db, record: record, effect: &effect)
            return (true, effect)
        }
    }

    /// True when nothing waits to be sent or acknowledged.
    public func isOutboxEmpty() async throws -> Bool {
        try await pendingCount() == 0
    }

    /// Notes whose last merge could not place all of this device's edit, with the fields.
    public func conflicts() async throws -> [(id: String, fields: [String])] {
        try await writer.read { db in
            try RecordRow.filter(sql: "json_extract(sync, '$.conflicts') IS NOT NULL AND \(RecordRow.visible)").fetchAll(db)
                .map { ($0.id, $0.state.conflicts) }
        }
    }

    static func date(from text: String) -> Date? {
        Timestamp.parseRFC3339(text)
    }
}
