import Foundation
import NotedCore

/// What one record becomes when something about it arrives: a server state (a pulled page, a
/// broadcast, the newest state a reject carries), the answer to its change in flight (an ack,
/// a reject), the end of a snapshot that did not name it, or the user giving up unsent edits.
///
/// The rules of docs/protocol.md section 5 and docs/architecture.md ("One record, two
/// clients"), as a pure function: a record in (`Outcome.record`, nil when this device holds
/// none), a record out, with what else to write (a tombstone, a new note keeping the text of a
/// purged one) and what to tell (`StoreEffect`). No database, no clock, no randomness: `now`
/// and `newID` are given. `LocalStore` reads the row, runs one of these, and writes the result
/// (``LocalStore/commit(_:before:_:)``).
struct RecordTransition {
    /// The field arithmetic of the record's collection.
    let math: RecordMath
    /// The time an answered change's record is stamped with, and a kept copy is made at.
    let now: Date
    /// The id of a new note that keeps the text of a purged one.
    let newID: () -> String

    /// The record as it stands, then as it ends, with what else the store writes.
    struct Outcome {
        /// The record; nil when this device holds none (or no longer holds it).
        var record: RecordRow?
        /// An id to add to the tombstones (its record is never taken in again).
        var buried: String?
        /// A new record keeping text of a purged one, to insert.
        var fork: RecordRow?
        /// The completed fields of a record taken in new from the server (for the search index).
        var newFields: [String: JSONValue]?
        /// What to tell, added to what the caller had.
        var effect = StoreEffect()
    }

    // MARK: Server states

    /// Takes a server state of the record: rebases local edits onto it, or stashes it while a
    /// change is in flight (the answer to that change decides how local edits move).
    /// `buried`: the id is in the tombstones (asked only when this device holds no record).
    func absorb(_ server: NotedCore.Record, buried: Bool, into out: inout Outcome) {
        guard var row = out.record else {
            guard !server.deleted else {
                out.buried = server.id
                return
            }
            guard !buried else { return }
            let fields = math.schema.completed(server.fields)
            var row = RecordRow(id: server.id, collection: server.collection, local: fields, now: server.updatedAt)
            row.shadow = row.local
            row.rev = server.rev
            row.state = .synced
            row.createdAt = server.createdAt
            out.record = row
            out.newFields = fields
            out.effect.add(server.id, in: server.collection)
            return
        }
        if row.hasInflight {
            if server.rev > row.state.heldRev(shadowRev: row.rev) {
                row.state.sawNewer(
                    fields: server.deleted ? nil : server.fields, rev: server.rev, updatedAt: server.updatedAt)
                out.record = row
            }
            return
        }
        guard server.rev > row.rev else { return }
        if server.deleted {
            removeOrFork(row, into: &out)
            return
        }
        move(&row, to: server.fields, rev: server.rev, updatedAt: server.updatedAt, base: row.shadowFields)
        out.record = row
        out.effect.change(row.id, in: row.collection)
    }

    /// A `change` broadcast: applied when the record is exactly at its `prevRev` (a purge at
    /// any revision). False when the client must pull instead (another revision held, or ops
    /// that do not apply).
    func broadcast(_ broadcast: Broadcast, buried: Bool, limits: Limits, into out: inout Outcome) -> Bool {
        let row = out.record
        if row == nil, buried { return true }
        let heldRev = row.map { $0.state.heldRev(shadowRev: $0.rev) } ?? 0
        if broadcast.rev <= heldRev { return true }
        // A purge needs no base: it applies whatever revision is held (a client whose first
        // pull was from 0 would otherwise never hear of it; found by the simulation).
        let isDelete = broadcast.op == .delete
        guard heldRev == broadcast.prevRev || isDelete else { return false }
        let base = row.map { row in row.state.inflight?.newest.map { $0.fields ?? [:] } ?? row.shadowFields } ?? [:]
        let fields: [String: JSONValue]
        if isDelete {
            fields = [:]
        } else {
            do {
                fields = try math.apply(ops: broadcast.fields, to: base, limits: limits)
            } catch {
                return false
            }
        }
        let server = NotedCore.Record(
            collection: broadcast.collection, id: broadcast.id, rev: broadcast.rev, seq: 0, deleted: isDelete,
            fields: fields, createdAt: row?.createdAt ?? broadcast.updatedAt, updatedAt: broadcast.updatedAt)
        absorb(server, buried: buried, into: &out)
        return true
    }

    /// A snapshot pull (`since: 0`, or `reset`) ending at `cursor` did not name the record: it
    /// was purged on the server, as if its tombstone had arrived (`removeOrFork`: without local
    /// text edits it goes; with text edits not on the server, refused ones too, the text is
    /// kept as a new note). A record with a change in flight (a create too) waits for the
    /// answer: an ack with a `seq` up to `cursor` means the change was applied before the
    /// snapshot, so the record has been purged since (see `ack`). A record the server never
    /// had (made here, not yet sent) is not absent from anything: it stays.
    func absentFromSnapshot(at cursor: Int64, into out: inout Outcome) {
        guard var row = out.record else { return }
        if row.hasInflight {
            row.state.absentFromSnapshot(at: cursor)
            out.record = row
        } else if row.rev > 0 {
            removeOrFork(row, into: &out)
        }
    }

    // MARK: Answers

    /// Takes an `ack` of the change in flight: the shadow moves to the acknowledged state (or a
    /// newer one seen meanwhile) and edits made since the send are rebased onto it. An ack of
    /// another change (an older one, resent and answered twice) changes nothing.
    func ack(_ ack: Ack, into out: inout Outcome) {
        guard var row = out.record, row.state.inflight?.ccid == ack.ccid, let change = row.state.answered() else {
            return
        }
        guard let sent = change.sent else {
            // A purge, acknowledged.
            out.record = nil
            out.buried = row.id
            out.effect.remove(row.id, in: row.collection)
            return
        }
        let acknowledged = ack.fields ?? sent
        if let absent = change.absentAtSeq, let seq = ack.seq, seq <= absent {
            // Applied before a snapshot that no longer had the record: purged since. Only text
            // edited after the send is kept (as a new note), as if the ack and then the
            // tombstone had arrived.
            row.shadowFields = acknowledged
            removeOrFork(row, into: &out)
            return
        }
        var stash: (fields: [String: JSONValue], rev: Int64, updatedAt: Date)?
        if let newest = change.newest, newest.rev > ack.rev {
            guard let fields = newest.fields else {
                // Purged after our change: nothing newer than the purge. As if the ack and
                // then the tombstone had arrived: only text edited after the send is kept (the
                // change itself was on the server when it was purged).
                row.shadowFields = acknowledged
                removeOrFork(row, into: &out)
                return
            }
            stash = (fields, newest.rev, newest.updatedAt)
        }
        let conflicts = ack.conflicts ?? []
        row.state.merged(conflicts: conflicts)
        if !conflicts.isEmpty { out.effect.conflicts.append((row.id, conflicts)) }
        rebase(&row, onto: (acknowledged, ack.rev), newest: stash, sent: sent, sentBaseRev: change.baseRev)
        out.record = row
        out.effect.change(row.id, in: row.collection)
    }

    /// A refusal of the change `ccid` (a `reject`, or this client's own `too_large`), as
    /// docs/protocol.md section 5 prescribes for its code. `current` is the server's state the
    /// reject carries. `absentAttachment`, for `missing_blob`: a file the change adds that
    /// neither the server nor this device has (the store looks, and queues the others to be
    /// uploaded again); nil when every one can go up again.
    func refused(
        ccid: String, code: ErrorCode, message: String, current: NotedCore.Record?, absentAttachment: String?,
        into out: inout Outcome
    ) {
        guard var row = out.record, let change = row.state.inflight, change.ccid == ccid else { return }
        if code == .rateLimited {
            out.effect.retryLater = true
            return
        }
        if code == .missingBlob {
            // The server lacks a file this change adds (collected since it was uploaded): the
            // change is resent as it is once the file is up again. A file this device does not
            // have either can never go: the change is refused, saying which.
            guard let absent = absentAttachment else {
                out.effect.retryLater = true
                return
            }
            row.state.refused(
                .missingBlob,
                message: "the attachment \(absent) is neither on the server nor on this device; remove it from the note"
            )
            out.record = row
            if let refusal = row.state.refusal { out.effect.refused.append((row.id, refusal)) }
            out.effect.change(row.id, in: row.collection)
            return
        }
        let stash: NotedCore.Record? = change.newest.map { newest in
            NotedCore.Record(
                collection: row.collection, id: row.id, rev: newest.rev, seq: 0, deleted: newest.fields == nil,
                fields: newest.fields ?? [:], createdAt: row.createdAt, updatedAt: newest.updatedAt)
        }
        row.state.refused(code, message: message)
        out.record = row
        switch code {
        case .gone, .notFound:
            removeOrFork(row, into: &out)
            return
        case .alreadyExists, .invalidVersion:
            if current == nil && stash == nil { out.effect.needsPull = true }
        default:
            if let refusal = row.state.refusal { out.effect.refused.append((row.id, refusal)) }
        }
        for server in [stash, current].compactMap({ $0 }) {
            absorb(server, buried: false, into: &out)
            if out.record == nil { return }
        }
        out.effect.change(row.id, in: row.collection)
    }

    /// The user gives up this device's edits of the record not yet sent (a refused edit, or
    /// unsynced edits at sign-out): it shows the server's version again, and a record the
    /// server never acknowledged goes. A change already in flight is not taken back (the
    /// server may have applied it); its answer brings the server's state.
    func discard(into out: inout Outcome) {
        guard var row = out.record else { return }
        if let change = row.state.inflight {
            if let sent = change.sent { row.localFields = sent }
        } else if row.rev == 0 {
            out.record = nil
            out.effect.remove(row.id, in: row.collection)
            return
        } else {
            row.localFields = row.shadowFields
        }
        row.state.discard()
        out.record = row
        out.effect.change(row.id, in: row.collection)
    }

    // MARK: Moving a record

    /// Moves a record without an in-flight change to a newer server state, rebasing local
    /// edits made against `base` onto it.
    ///
    /// When a text hunk of the local edits cannot be placed on the new state (`requireClean`),
    /// nothing moves and false is returned: the edits then go to the server as a delta against
    /// the older revision, where the server merges them and keeps a conflict revision if it
    /// cannot place them either, so no edit is dropped without trace.
    @discardableResult
    private func move(
        _ row: inout RecordRow, to fields: [String: JSONValue], rev: Int64, updatedAt: Date,
        base: [String: JSONValue], requireClean: Bool = true
    ) -> Bool {
        let server = math.schema.completed(fields)
        let local = math.schema.completed(row.localFields)
        let hasEdits = local != math.schema.completed(base)
        if hasEdits {
            let (rebased, clean) = math.rebaseReportingConflicts(local: local, base: base, onto: server)
            if !clean && requireClean {
                row.state.stillToSend()
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
        return true
    }

    /// After an ack: the record moves to the newest state seen (`newest`, a broadcast that
    /// arrived while the change was in flight) or else the acknowledged one, with the edits
    /// made since the send rebased onto it.
    private func rebase(
        _ row: inout RecordRow, onto acknowledged: (fields: [String: JSONValue], rev: Int64),
        newest stash: (fields: [String: JSONValue], rev: Int64, updatedAt: Date)?,
        sent: [String: JSONValue], sentBaseRev: Int64
    ) {
        let local = math.schema.completed(row.localFields)
        let editedSince = local != math.schema.completed(sent)
        // The newest state seen, if the edits made since the send fit onto it; else the
        // acknowledged state, which holds our change exactly as we sent it (or as merged).
        if let stash,
            move(
                &row, to: stash.fields, rev: stash.rev, updatedAt: editedSince ? row.updatedAt : stash.updatedAt,
                base: sent)
        {
            return
        }
        if !move(
            &row, to: acknowledged.fields, rev: acknowledged.rev, updatedAt: editedSince ? row.updatedAt : now,
            base: sent)
        {
            // Not even the acknowledged state takes them (a merged ack moved the text they
            // edit): keep the user's text and say so. The next push sends it as `set` ops
            // against the revision the edits were made on, so the server sees a stale `set`
            // and keeps the text it replaces as a conflict revision. Diffing it against the
            // acknowledged state instead would overwrite someone's text without a trace
            // (found by the simulation).
            move(
                &row, to: acknowledged.fields, rev: acknowledged.rev, updatedAt: row.updatedAt, base: sent,
                requireClean: false)
            row.localFields = local
            row.state.keepUnplacedEdits(staleBase: max(1, min(sentBaseRev, acknowledged.rev - 1)))
        }
    }

    /// A record purged on the server: it goes (its id buried), unless it holds unsynced text,
    /// which is kept as a new note. Edits that changed no text (a pin, a tag, the trash) do not
    /// bring a purged note back: several devices would each bring back a copy of text nobody
    /// changed.
    private func removeOrFork(_ row: RecordRow, into out: inout Outcome) {
        out.record = nil
        out.buried = row.id
        out.effect.remove(row.id, in: row.collection)
        let local = math.schema.completed(row.localFields)
        let base = math.schema.completed(row.shadowFields)
        let textEdited = math.schema.fields.contains { name, spec in spec.kind == .text && local[name] != base[name] }
        guard !row.state.purging, textEdited else { return }
        let id = newID()
        var copy = RecordRow(id: id, collection: row.collection, local: local, now: now)
        copy.createdAt = row.createdAt
        out.fork = copy
        out.effect.forked.append((row.id, id))
        out.effect.add(id, in: row.collection)
    }
}
