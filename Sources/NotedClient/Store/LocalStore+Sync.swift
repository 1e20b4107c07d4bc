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
    public func storePage(records: [NotedCore.Record], cursor: Int64) async throws -> StoreEffect {
        try await writer.write { db in
            var effect = StoreEffect()
            for record in records where record.collection == Self.collection {
                try absorb(db, record: record, effect: &effect)
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
            let candidates = try RecordRow.filter(RecordRow.Columns.rev > 0 || RecordRow.Columns.inflightCcid != nil).fetchAll(db)
            for var row in candidates where !ids.contains(row.id) {
                if row.hasInflight {
                    row.absentAtSeq = cursor
                    try row.update(db)
                } else if row.pending {
                    try removeOrFork(db, row: row, effect: &effect)
                } else {
                    try row.delete(db)
                    try bury(db, row.id)
                    effect.removed.append(row.id)
                }
            }
            return effect
        }
    }

    /// Takes a server state of a record: rebases local edits onto it, or stashes it while a
    /// change is in flight (the answer to that change decides how local edits move).
    func absorb(_ db: Database, record: NotedCore.Record, effect: inout StoreEffect) throws {
        guard var row = try RecordRow.find(db, id: record.id) else {
            guard !record.deleted else {
                try bury(db, record.id)
                return
            }
            guard try !isBuried(db, record.id) else { return }
            var row = RecordRow(id: record.id, collection: record.collection, local: math.schema.completed(record.fields), now: record.updatedAt)
            row.shadowFields = row.localFields
            row.rev = record.rev
            row.dirty = false
            row.createdAt = record.createdAt
            try row.insert(db)
            effect.changed.append(record.id)
            return
        }
        if row.hasInflight {
            if record.rev > max(row.rev, row.stashRev ?? 0) {
                row.stash = record.deleted ? nil : JSONValue.object(record.fields).jsonString
                row.stashRev = record.rev
                row.stashUpdatedAt = record.updatedAt
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
        effect.changed.append(row.id)
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
        let server = math.schema.completed(fields)
        let local = math.schema.completed(row.localFields)
        let hasEdits = local != math.schema.completed(base)
        if hasEdits {
            let (rebased, clean) = math.rebaseReportingConflicts(local: local, base: base, onto: server)
            if !clean && requireClean {
                row.dirty = true
                try row.update(db)
                return false
            }
            row.localFields = rebased
        } else {
            row.localFields = server
        }
        row.shadowFields = server
        row.rev = rev
        row.dirty = row.localDeleted || math.schema.completed(row.localFields) != server
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
        let local = math.schema.completed(row.localFields)
        let base = math.schema.completed(row.shadowFields)
        let textEdited = math.schema.fields.contains { name, spec in spec.kind == .text && local[name] != base[name] }
        if row.localDeleted || !textEdited {
            effect.removed.append(row.id)
            return
        }
        let newID = UUID().uuidString.lowercased()
        var copy = RecordRow(id: newID, collection: row.collection, local: local, now: Date())
        copy.createdAt = row.createdAt
        try copy.insert(db)
        effect.removed.append(row.id)
        effect.forked.append((row.id, newID))
        effect.changed.append(newID)
    }

    private func bury(_ db: Database, _ id: String) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO tombstone(id) VALUES (?)", arguments: [id])
    }

    private func isBuried(_ db: Database, _ id: String) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM tombstone WHERE id = ?)", arguments: [id]) ?? false
    }

    /// The changes to push: first every in-flight change not in `sent` (resent unchanged),
    /// then new changes for dirty records without one, written as in-flight before returning.
    public func outbox(excluding sent: Set<String>, limit: Int) async throws -> (changes: [OutboxChange], effect: StoreEffect) {
        try await writer.write { db in
            var result: [OutboxChange] = []
            var effect = StoreEffect()
            let inflight = try RecordRow.filter(RecordRow.Columns.inflightCcid != nil).order(RecordRow.Columns.rowKey).fetchAll(db)
            for row in inflight where !sent.contains(row.id) && result.count < limit {
                guard let ccid = row.inflightCcid, let body = row.inflightBody, let value = try? JSONValue.parse(body) else { continue }
                result.append(OutboxChange(recordID: row.id, ccid: ccid, body: value))
            }
            guard result.count < limit else { return (result, effect) }
            let dirty = try RecordRow.filter(RecordRow.Columns.dirty == true && RecordRow.Columns.inflightCcid == nil)
                .order(RecordRow.Columns.rowKey).fetchAll(db)
            for var row in dirty where !sent.contains(row.id) {
                guard result.count < limit else { break }
                let ccid = UUID().uuidString.lowercased()
                let baseRev = row.textAsSet ? row.setBaseRev ?? row.rev : row.rev
                var change: [String: JSONValue] = [
                    "ccid": .string(ccid), "collection": .string(row.collection), "id": .string(row.id), "baseRev": .int(baseRev),
                ]
                if row.localDeleted {
                    if row.rev == 0 {
                        try row.delete(db)
                        effect.removed.append(row.id)
                        continue
                    }
                    change["op"] = "delete"
                    change["fields"] = .object([:])
                } else {
                    let ops = math.ops(from: row.shadowFields, to: row.localFields, textAsSet: row.rev == 0 || row.textAsSet)
                    guard !ops.isEmpty || row.rev == 0 else {
                        row.dirty = false
                        try row.update(db)
                        effect.changed.append(row.id)
                        continue
                    }
                    change["op"] = "upsert"
                    change["fields"] = .object(ops)
                    row.inflightSent = JSONValue.object(math.applyExactly(ops: ops, to: row.shadowFields)).jsonString
                }
                let body = JSONValue.object(change)
                row.inflightCcid = ccid
                row.inflightBaseRev = baseRev
                row.inflightBody = body.jsonString
                row.dirty = false
                row.textAsSet = false
                row.setBaseRev = nil
                row.syncError = nil
                try row.update(db)
                result.append(OutboxChange(recordID: row.id, ccid: ccid, body: body))
            }
            return (result, effect)
        }
    }

    /// Takes an `ack`: the shadow moves to the acknowledged state (or a newer one seen
    /// meanwhile) and edits made since the send are rebased onto it.
    public func applyAck(_ ack: Ack) async throws -> StoreEffect {
        let (id, ccid, rev) = (ack.id, ack.ccid, ack.rev)
        return try await writer.write { db in
            var effect = StoreEffect()
            guard var row = try RecordRow.find(db, id: id), row.inflightCcid == ccid else {
                return effect
            }
            let wasDelete = (try? JSONValue.parse(row.inflightBody ?? ""))?["op"]?.stringValue == "delete"
            if wasDelete {
                try row.delete(db)
                try bury(db, id)
                effect.removed.append(id)
                return effect
            }
            let sent = row.inflightSent.flatMap(RecordRow.decode) ?? row.localFields
            let acknowledged = ack.fields ?? sent
            if let absent = row.absentAtSeq, let seq = ack.seq, seq <= absent {
                // Applied before a snapshot that no longer had the record: purged since. Only
                // text edited after the send is kept (as a new note), as if the ack and then the
                // tombstone had arrived.
                row.clearInflight()
                row.clearStash()
                row.shadowFields = acknowledged
                try removeOrFork(db, row: row, effect: &effect)
                return effect
            }
            var stash: (fields: [String: JSONValue], rev: Int64, updatedAt: Date)?
            if let stashRev = row.stashRev, stashRev > rev {
                guard let fields = row.stash.flatMap(RecordRow.decode) else {
                    // Purged after our change: nothing newer than the purge.
                    row.clearInflight()
                    row.clearStash()
                    try removeOrFork(db, row: row, effect: &effect)
                    return effect
                }
                stash = (fields, stashRev, row.stashUpdatedAt ?? Date())
            }
            let sentBaseRev = row.inflightBaseRev ?? row.rev
            row.clearInflight()
            row.clearStash()
            let conflicts = ack.conflicts ?? []
            if !conflicts.isEmpty {
                row.conflicts = conflicts.joined(separator: ",")
                effect.conflicts.append((id, conflicts))
            }
            try rebase(db, row: &row, onto: (acknowledged, rev), newest: stash, sent: sent, sentBaseRev: sentBaseRev)
            effect.changed.append(id)
            return effect
        }
    }

    /// After an ack: the record moves to the newest state seen (`newest`, a broadcast that
    /// arrived while the change was in flight) or else the acknowledged one, with the edits
    /// made since the send rebased onto it.
    private func rebase(_ db: Database, row: inout RecordRow, onto acknowledged: (fields: [String: JSONValue], rev: Int64),
                        newest stash: (fields: [String: JSONValue], rev: Int64, updatedAt: Date)?,
                        sent: [String: JSONValue], sentBaseRev: Int64) throws {
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
            row.dirty = true
            row.conflicts = "body"
            row.textAsSet = true
            row.setBaseRev = max(1, min(sentBaseRev, acknowledged.rev - 1))
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
            guard var row = try RecordRow.find(db, id: id), row.inflightCcid == ccid else {
                return effect
            }
            if code == .rateLimited {
                effect.retryLater = true
                return effect
            }
            let stash: NotedCore.Record? = row.stashRev.map { stashRev in
                NotedCore.Record(collection: row.collection, id: row.id, rev: stashRev, seq: 0, deleted: row.stash == nil,
                       fields: row.stash.flatMap(RecordRow.decode) ?? [:], createdAt: row.createdAt, updatedAt: row.stashUpdatedAt ?? Date())
            }
            row.clearInflight()
            row.clearStash()
            row.dirty = true
            try row.update(db)
            switch code {
            case .gone, .notFound:
                try removeOrFork(db, row: row, effect: &effect)
                return effect
            case .baseUnavailable, .invalidDelta:
                row.textAsSet = true
                row.setBaseRev = nil
                try row.update(db)
            case .alreadyExists, .invalidVersion:
                if current == nil && stash == nil { effect.needsPull = true }
            case .ccidReused:
                break
            default:
                // bad_request, invalid_field, unknown_collection, too_large: resending cannot help.
                row.dirty = false
                row.syncError = "\(code.rawValue): \(text)"
                try row.update(db)
                effect.refused.append((id, row.syncError ?? text))
            }
            for record in [stash, current].compactMap({ $0 }) {
                try absorb(db, record: record, effect: &effect)
                if effect.removed.contains(id) { return effect }
            }
            effect.changed.append(id)
            return effect
        }
    }

    /// Applies a `change` broadcast when the record is exactly at its `prevRev`; returns false
    /// when the client must pull instead.
    public func applyBroadcast(_ broadcast: Broadcast, limits: Limits) async throws -> (applied: Bool, effect: StoreEffect) {
        guard broadcast.collection == Self.collection else { return (false, StoreEffect()) }
        let (id, rev, prevRev, updatedAt) = (broadcast.id, broadcast.rev, broadcast.prevRev, broadcast.updatedAt)
        let isDelete = broadcast.op == .delete
        let ops = broadcast.fields
        return try await writer.write { db in
            var effect = StoreEffect()
            let row = try RecordRow.find(db, id: id)
            if row == nil, try isBuried(db, id) { return (true, effect) }
            let heldRev = row.map { max($0.rev, $0.stashRev ?? 0) } ?? 0
            if rev <= heldRev { return (true, effect) }
            // A purge needs no base: it applies whatever revision is held (a client whose
            // first pull was from 0 would otherwise never hear of it; found by the simulation).
            guard heldRev == prevRev || isDelete else { return (false, effect) }
            let base = row.map { $0.stashRev != nil ? ($0.stash.flatMap(RecordRow.decode) ?? [:]) : $0.shadowFields } ?? [:]
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
            let record = NotedCore.Record(collection: Self.collection, id: id, rev: rev, seq: 0, deleted: isDelete, fields: fields,
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
            try RecordRow.filter(RecordRow.Columns.conflicts != nil && RecordRow.Columns.localDeleted == false).fetchAll(db)
                .map { ($0.id, ($0.conflicts ?? "").split(separator: ",").map(String.init)) }
        }
    }

    static func date(from text: String) -> Date? {
        Timestamp.parseRFC3339(text)
    }
}
