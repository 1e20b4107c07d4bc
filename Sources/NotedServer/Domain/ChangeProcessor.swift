import Foundation
import NotedCore

/// The backend-independent part of a push: given what the transaction read, decide the answer
/// and what to write. Backends only do the I/O around it.
struct ChangeProcessor: Sendable {
    var schemas: SchemaRegistry
    var merger: FieldMerger
    /// How many conflict revisions a record keeps at most (a bound against an account making
    /// conflicts on purpose; ordinary revisions are kept by time, ``HistoryPolicy``).
    var conflictRevisionsKept: Int
    /// What one user may store.
    var quota: StorageQuota = .unlimited

    /// What the transaction read about a change.
    struct Inputs {
        /// The stored `ccid` result: body hash and the reply message.
        var applied: (bodyHash: String, reply: String)?
        var current: Record?
        /// The fields at `baseRev`, when `baseRev` is older than the current revision and still held.
        var baseFields: [String: JSONValue]?
    }

    /// What the transaction must write, with the seq it assigns.
    struct WritePlan {
        var record: Record
        var prevRev: Int64
        var prevFields: [String: JSONValue]
        var revisions: [RevisionInfo]
        /// Drop every revision of the record (a purge).
        var purgeHistory: Bool
        var reply: Ack
        var broadcast: Broadcast
    }

    enum Decision {
        case reply(ServerMessage)
        case write(WritePlan)
    }

    /// Whether the transaction needs the fields at `baseRev`.
    static func needsBase(_ change: Change, current: Record?) -> Bool {
        guard let current, !current.deleted, change.op == .upsert else { return false }
        return change.baseRev > 0 && change.baseRev < current.rev
    }

    /// Decides one change: a reply alone (a reject, or a duplicate's original ack), or what to write.
    func decide(_ change: Change, inputs: Inputs, context: PushContext) -> Decision {
        let identity = ChangeIdentity(ccid: change.ccid, collection: change.collection, id: change.id)
        func reject(_ code: ErrorCode, _ message: String, current: Record? = nil) -> Decision {
            .reply(.reject(Reject(ProtocolError(code, message), identity: identity, current: current)))
        }
        if let applied = inputs.applied {
            guard applied.bodyHash == context.bodyHash else {
                return reject(.ccidReused, "this ccid was already used for a different change")
            }
            guard let stored = try? JSONValue.parse(applied.reply),
                case .ack(var original)? = try? ServerMessage.decode(stored)
            else {
                return reject(.ccidReused, "this ccid was already used")
            }
            original.status = .duplicate
            return .reply(.ack(original))
        }
        guard let schema = schemas[change.collection] else {
            return reject(.unknownCollection, "unknown collection")
        }
        guard let current = inputs.current else {
            guard change.baseRev == 0, change.op == .upsert else {
                return reject(.notFound, "no such record")
            }
            return create(change, schema: schema, context: context, identity: identity)
        }
        if current.deleted {
            return reject(.gone, "the record was purged", current: current)
        }
        if change.baseRev == 0 {
            return reject(.alreadyExists, "a record with this id exists", current: current)
        }
        if change.baseRev > current.rev {
            return reject(.invalidVersion, "baseRev is newer than the record", current: current)
        }
        return update(
            current, with: change, baseFields: inputs.baseFields, schema: schema, context: context, identity: identity)
    }

    /// A change to an existing record at `baseRev` ≤ its `rev`: applied, or merged when stale.
    private func update(
        _ current: Record, with change: Change, baseFields: [String: JSONValue]?, schema: CollectionSchema,
        context: PushContext, identity: ChangeIdentity
    ) -> Decision {
        let stale = change.baseRev < current.rev
        let newRev = current.rev + 1
        var result: MergeResult
        switch change.op {
        case .delete:
            result = MergeResult(fields: [:], conflicts: [], conflictFields: nil)
        case .upsert:
            var base: [String: JSONValue]? = nil
            if stale {
                let needsText = change.fields.values.contains { if case .textDelta = $0 { true } else { false } }
                if baseFields == nil && needsText {
                    return .reply(
                        .reject(
                            Reject(
                                ProtocolError(
                                    .baseUnavailable, "the server no longer holds revision \(change.baseRev)"),
                                identity: identity, current: current)))
                }
                // Without the base, a stale whole-text set keeps whatever it replaces.
                base = baseFields ?? [:]
            }
            do {
                result = try merger.apply(change.fields, schema: schema, current: current.fields, base: base)
            } catch {
                return .reply(
                    .reject(Reject(error, identity: identity, current: error.code == .invalidDelta ? current : nil)))
            }
        }
        let deleted = change.op == .delete
        let record = Record(
            collection: change.collection, id: change.id, rev: newRev, seq: 0, deleted: deleted,
            fields: result.fields, createdAt: current.createdAt, updatedAt: context.now
        )
        var revisions: [RevisionInfo] = []
        if !deleted {
            revisions.append(
                RevisionInfo(
                    rev: newRev, seq: 0, updatedAt: context.now, device: context.device, ccid: change.ccid,
                    conflict: false, fields: result.fields, author: context.author ?? context.userID))
            if let conflictFields = result.conflictFields {
                revisions.append(
                    RevisionInfo(
                        rev: newRev, seq: 0, updatedAt: context.now, device: context.device, ccid: change.ccid,
                        conflict: true, fields: conflictFields, author: context.author ?? context.userID))
            }
        }
        let reply = Ack(
            ccid: change.ccid, collection: change.collection, id: change.id, rev: newRev,
            status: stale ? .merged : .applied,
            fields: stale ? result.fields : nil, conflicts: stale ? result.conflicts : nil)
        let ops = deleted ? [:] : merger.ops(from: current.fields, to: result.fields, schema: schema)
        let broadcast = Broadcast(
            collection: change.collection, id: change.id, rev: newRev, prevRev: current.rev, op: change.op,
            fields: ops, updatedAt: context.now)
        return .write(
            WritePlan(
                record: record, prevRev: current.rev, prevFields: current.fields, revisions: revisions,
                purgeHistory: deleted, reply: reply, broadcast: broadcast
            ))
    }

    private func create(_ change: Change, schema: CollectionSchema, context: PushContext, identity: ChangeIdentity)
        -> Decision
    {
        let result: MergeResult
        do {
            result = try merger.apply(change.fields, schema: schema, current: [:], base: nil)
        } catch {
            return .reply(.reject(Reject(error, identity: identity)))
        }
        let record = Record(
            collection: change.collection, id: change.id, rev: 1, seq: 0, deleted: false,
            fields: result.fields, createdAt: context.now, updatedAt: context.now
        )
        let reply = Ack(ccid: change.ccid, collection: change.collection, id: change.id, rev: 1, status: .applied)
        let broadcast = Broadcast(
            collection: change.collection, id: change.id, rev: 1, prevRev: 0, op: .upsert,
            fields: result.fields.mapValues { ["set": $0] }, updatedAt: context.now)
        return .write(
            WritePlan(
                record: record, prevRev: 0, prevFields: [:],
                revisions: [
                    RevisionInfo(
                        rev: 1, seq: 0, updatedAt: context.now, device: context.device, ccid: change.ccid,
                        conflict: false, fields: result.fields, author: context.author ?? context.userID)
                ],
                purgeHistory: false, reply: reply, broadcast: broadcast
            ))
    }
}

extension ChangeProcessor.WritePlan {
    /// Fills in the seq the transaction assigned.
    func assigning(seq: Int64) -> (record: Record, revisions: [RevisionInfo], reply: Ack, broadcast: Broadcast) {
        var record = self.record
        record.seq = seq
        let revisions = self.revisions.map { revision -> RevisionInfo in
            var revision = revision
            revision.seq = seq
            return revision
        }
        var reply = self.reply
        reply.seq = seq
        var broadcast = self.broadcast
        broadcast.seq = seq
        return (record, revisions, reply, broadcast)
    }
}
