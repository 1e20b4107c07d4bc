import Foundation
import NotedCore
import Testing

@testable import NotedClient

/// What each thing that can arrive does to a record (`RecordTransition`), as test vectors the
/// web app must follow exactly (issue 47): `Tests/web/vectors/record-state.json`, generated
/// here from a fixed seed and checked in, and read by `Tests/web/record-state.test.mjs`, which
/// runs `Web/records.js`' `transition` on the same inputs.
///
/// A case is a record as this client stores it (`before`: its local fields, its shadow at `rev`,
/// its sync state in the stored form of `SyncState`; null when the device holds none), one
/// event as it comes off the wire (a pulled `record`, an `ack`, a refusal with its code, a
/// `change` broadcast, the end of a snapshot that did not name the record, the user's discard),
/// the time and the ids a transition may use, and what it yields (`after`: the record or null,
/// an id to bury, a new note keeping a purged one's text, the effect, and for a broadcast
/// whether it applied). Records are notes: text, set and scalar fields, with set and scalar ops.
///
/// This test fails when the Swift side no longer computes the checked-in vectors: regenerate
/// them on purpose with `NOTED_WRITE_VECTORS=1 swift test --filter RecordStateVectorTests`;
/// the node test then fails until the web app follows.
@Suite struct RecordStateVectorTests {
    static let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("web/vectors/record-state.json").path
    /// Fixed: the file is the same on every machine and every run.
    static let seed: UInt64 = 0x0047_5EED
    static let count = 900
    static let math = RecordMath(schema: .notes)
    static let epoch: Int64 = 1_700_000_000_000
    static let tags = ["home", "work", "x", "ü", "a b", "later", "2024"]
    static let attachment = String(repeating: "ab", count: 32) + " 12 image/png shelf photo.png"
    static let codes: [ErrorCode] = [
        .baseUnavailable, .invalidDelta, .gone, .notFound, .alreadyExists, .invalidVersion, .ccidReused, .rateLimited,
        .missingBlob, .badRequest, .invalidField, .tooLarge, .quotaExceeded, .unknownCollection,
    ]

    static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func chance(_ random: inout SplitMix64, _ percent: UInt64) -> Bool { random.next() % 100 < percent }
    static func pick<T>(_ values: [T], _ random: inout SplitMix64) -> T {
        values[Int(random.next() % UInt64(values.count))]
    }

    // MARK: Fields

    /// A note's fields, every one set.
    static func fields(_ random: inout SplitMix64) -> [String: JSONValue] {
        var fields = CollectionSchema.notes.completed([:])
        fields["title"] = .string(SharedVectorTests.text(&random, words: Int(random.next() % 4)))
        fields["body"] = .string(SharedVectorTests.text(&random, words: 2 + Int(random.next() % 10)))
        fields["tags"] = .array(tags.filter { _ in chance(&random, 25) }.map(JSONValue.string))
        if chance(&random, 30) { fields["folder"] = "Work/Deep" }
        if chance(&random, 20) { fields["pinned"] = true }
        if chance(&random, 10) { fields["trashed"] = true }
        if chance(&random, 20) { fields["created"] = .int(epoch - 86_400_000) }
        if chance(&random, 15) { fields["attachments"] = [.string(attachment)] }
        return fields
    }

    /// `fields` with one to three edits: text changed, a tag added or removed, a scalar set.
    static func edited(_ fields: [String: JSONValue], _ random: inout SplitMix64) -> [String: JSONValue] {
        var fields = CollectionSchema.notes.completed(fields)
        for _ in 0..<(1 + Int(random.next() % 3)) {
            switch random.next() % 9 {
            case 0, 1, 2: fields["body"] = .string(SharedVectorTests.edit(fields["body"]?.stringValue ?? "", &random))
            case 3: fields["title"] = .string(SharedVectorTests.edit(fields["title"]?.stringValue ?? "", &random))
            case 4:
                var values = fields["tags"]?.arrayValue ?? []
                let tag = JSONValue.string(pick(tags, &random))
                if let at = values.firstIndex(of: tag) { values.remove(at: at) } else { values.append(tag) }
                fields["tags"] = .array(values)
            case 5: fields["pinned"] = .bool(!(fields["pinned"]?.boolValue ?? false))
            case 6: fields["folder"] = fields["folder"] == .null ? "Home" : .null
            case 7: fields["modified"] = .int(epoch + Int64(random.next() % 1_000_000))
            default: fields["trashed"] = .bool(!(fields["trashed"]?.boolValue ?? false))
            }
        }
        return fields
    }

    // MARK: Records

    /// A record in one of the states a device holds one in.
    static func record(_ random: inout SplitMix64, id: String) -> RecordRow {
        let created = epoch + Int64(random.next() % 1_000_000)
        let shadow = fields(&random)
        var row = RecordRow(id: id, collection: "notes", local: shadow, now: date(created))
        row.shadowFields = shadow
        row.rev = 1 + Int64(random.next() % 4)
        row.state = .synced
        row.updatedAt = date(created + Int64(random.next() % 1_000_000))
        switch random.next() % 10 {
        case 0, 1:
            break
        case 2:
            row.localFields = edited(shadow, &random)
            row.state.edit()
        case 3:
            // Made here, never acknowledged: sent or not.
            row.shadow = nil
            row.rev = 0
            row.state = .created
            if chance(&random, 60) { row.state.send(inflight(sent: shadow, baseRev: 0)) }
        case 4, 5, 6:
            let sent = math.applyExactly(
                ops: math.ops(from: shadow, to: edited(shadow, &random), textAsSet: chance(&random, 20)), to: shadow)
            row.localFields = sent
            row.state.send(inflight(sent: sent, baseRev: row.rev))
            if chance(&random, 40) {
                row.localFields = edited(sent, &random)
                row.state.edit()
            }
            if chance(&random, 35) {
                let purged = chance(&random, 20)
                row.state.sawNewer(
                    fields: purged ? nil : edited(shadow, &random), rev: row.rev + 1 + Int64(random.next() % 2),
                    updatedAt: date(created + 2_000_000))
            }
            if chance(&random, 15) { row.state.absentFromSnapshot(at: 10 + Int64(random.next() % 10)) }
        case 7:
            // Refused for good, or to be resent as `set`s.
            let sent = edited(shadow, &random)
            row.localFields = sent
            row.state.send(inflight(sent: sent, baseRev: row.rev))
            _ = row.state.answered()
            row.state.refused(pick([.badRequest, .baseUnavailable, .tooLarge], &random), message: "refused there")
        case 8:
            row.state.purge()
            if chance(&random, 50) { row.state.send(inflight(sent: nil, baseRev: row.rev)) }
        default:
            // Edits kept after a merge they did not fit, to go as stale `set`s.
            row.localFields = edited(shadow, &random)
            row.state.keepUnplacedEdits(staleBase: max(1, row.rev - 1))
        }
        return row
    }

    static func inflight(sent: [String: JSONValue]?, baseRev: Int64) -> SyncState.Inflight {
        SyncState.Inflight(
            ccid: "c-1", baseRev: baseRev, body: sent == nil ? #"{"op":"delete"}"# : #"{"op":"upsert"}"#, sent: sent)
    }

    /// A server state of the record near the revision held.
    static func serverRecord(_ row: RecordRow?, id: String, _ random: inout SplitMix64) -> NotedCore.Record {
        let held = row.map { $0.state.heldRev(shadowRev: $0.rev) } ?? 0
        let rev = max(1, held + Int64(random.next() % 4) - 1)
        let base = row.map { $0.shadow == nil ? $0.localFields : $0.shadowFields } ?? fields(&random)
        let created = row.map { millis($0.createdAt) } ?? epoch
        return NotedCore.Record(
            collection: "notes", id: id, rev: rev, seq: rev * 3, deleted: chance(&random, 15),
            fields: edited(base, &random), createdAt: date(created), updatedAt: date(epoch + 5_000_000 + rev))
    }

    // MARK: Events

    enum Event {
        case absorb(NotedCore.Record, buried: Bool)
        case ack(Ack)
        case refused(
            ccid: String, code: ErrorCode, message: String, current: NotedCore.Record?, absentAttachment: String?)
        case broadcast(Broadcast, buried: Bool)
        case absentFromSnapshot(cursor: Int64)
        case discard

        var json: JSONValue {
            switch self {
            case .absorb(let record, let buried):
                return ["type": "record", "record": record.json, "buried": .bool(buried)]
            case .ack(let ack): return ["type": "ack", "message": ServerMessage.ack(ack).json]
            case .refused(let ccid, let code, let message, let current, let absent):
                return [
                    "type": "refused", "ccid": .string(ccid), "code": .string(code.rawValue),
                    "message": .string(message),
                    "current": current?.json ?? .null, "absentAttachment": absent.map(JSONValue.string) ?? .null,
                ]
            case .broadcast(let broadcast, let buried):
                return ["type": "broadcast", "message": ServerMessage.change(broadcast).json, "buried": .bool(buried)]
            case .absentFromSnapshot(let cursor): return ["type": "absentFromSnapshot", "cursor": .int(cursor)]
            case .discard: return ["type": "discard"]
            }
        }
    }

    /// An event of `kind` (0 a server state, 1 a broadcast, 2 an ack, 3 a refusal, 4 a
    /// snapshot's end, 5 a discard; a server state or a broadcast when no record is held).
    static func event(_ kind: UInt64, for row: RecordRow?, id: String, _ random: inout SplitMix64) -> Event {
        let ccid = chance(&random, 85) ? (row?.state.inflight?.ccid ?? "c-1") : "c-0"
        guard let row else {
            return kind % 2 == 0
                ? .absorb(serverRecord(nil, id: id, &random), buried: chance(&random, 20))
                : .broadcast(broadcast(nil, id: id, &random), buried: chance(&random, 20))
        }
        switch kind {
        case 0:
            return .absorb(serverRecord(row, id: id, &random), buried: false)
        case 1:
            return .broadcast(broadcast(row, id: id, &random), buried: false)
        case 2:
            let sent = row.state.inflight?.sent ?? row.localFields
            let status = pick([Ack.Status.applied, .merged, .duplicate], &random)
            // Mostly the revision after the newest held; sometimes after the shadow's only, so
            // that a newer state seen meanwhile is newer than the ack.
            let after = chance(&random, 30) ? row.rev : row.state.heldRev(shadowRev: row.rev)
            let rev = after + (chance(&random, 70) ? 1 : 0)
            let merged = status == .merged ? edited(sent, &random) : nil
            let seq: Int64? = chance(&random, 70) ? 8 + Int64(random.next() % 16) : nil
            return .ack(
                Ack(
                    ccid: ccid, collection: "notes", id: id, rev: max(1, rev), seq: seq, status: status,
                    fields: merged ?? (chance(&random, 30) ? CollectionSchema.notes.completed(sent) : nil),
                    conflicts: merged != nil && chance(&random, 40) ? ["body"] : nil))
        case 3:
            let code = pick(codes, &random)
            let current = chance(&random, 40) ? serverRecord(row, id: id, &random) : nil
            return .refused(
                ccid: ccid, code: code, message: "no: \(code.rawValue)", current: current,
                absentAttachment: code == .missingBlob && chance(&random, 50) ? "shelf photo.png" : nil)
        case 4:
            return .absentFromSnapshot(cursor: 8 + Int64(random.next() % 16))
        default:
            return .discard
        }
    }

    /// A broadcast: ops from the state the record holds (or another revision), sometimes ones
    /// that do not apply, sometimes a purge.
    static func broadcast(_ row: RecordRow?, id: String, _ random: inout SplitMix64) -> Broadcast {
        let held = row.map { $0.state.heldRev(shadowRev: $0.rev) } ?? 0
        let prevRev = chance(&random, 70) ? held : max(0, held + Int64(random.next() % 3) - 1)
        let base = row.map { row in row.state.inflight?.newest.map { $0.fields ?? [:] } ?? row.shadowFields } ?? [:]
        let completed = CollectionSchema.notes.completed(base)
        var ops = math.ops(from: completed, to: edited(completed, &random), textAsSet: chance(&random, 20)).mapValues(
            \.json)
        if chance(&random, 5) { ops["body"] = ["delta": "=9999"] }
        let purge = chance(&random, 12)
        return Broadcast(
            collection: "notes", id: id, rev: prevRev + 1 + (purge ? Int64(random.next() % 2) : 0), prevRev: prevRev,
            seq: 30 + prevRev, op: purge ? .delete : .upsert, fields: purge ? [:] : ops,
            updatedAt: date(epoch + 7_000_000 + prevRev))
    }

    // MARK: The vectors

    static func json(_ row: RecordRow?) -> JSONValue {
        guard let row else { return .null }
        return [
            "id": .string(row.id), "collection": .string(row.collection), "local": .object(row.localFields),
            "shadow": row.shadow.map { _ in .object(row.shadowFields) } ?? .null, "rev": .int(row.rev),
            "createdAt": .int(millis(row.createdAt)), "updatedAt": .int(millis(row.updatedAt)),
            "sync": row.state == .synced ? .null : row.state.json,
        ]
    }

    static func json(_ effect: StoreEffect) -> JSONValue {
        [
            "changed": .array(effect.changed.map(JSONValue.string)),
            "removed": .array(effect.removed.map(JSONValue.string)),
            "added": .array(effect.added.sorted().map(JSONValue.string)),
            "forked": .array(effect.forked.map { [.string($0.0), .string($0.1)] }),
            "needsPull": .bool(effect.needsPull), "retryLater": .bool(effect.retryLater),
            "refused": .array(effect.refused.map { [.string($0.id), .string($0.message)] }),
            "conflicts": .array(effect.conflicts.map { [.string($0.id), .array($0.fields.map(JSONValue.string))] }),
        ]
    }

    /// The vectors, one case per line.
    static func generate() -> String {
        var random = SplitMix64(seed: seed)
        var cases: [String] = []
        for index in 0..<count {
            let id = "0b6f3c1e-7d2a-4c5e-9f10-" + String(format: "%012d", index)
            let kind = pick([0, 1, 2, 3, 3, 4, 5] as [UInt64], &random)
            var row = chance(&random, 20) ? nil : record(&random, id: id)
            // Answers mostly to a change in flight (an answer to none changes nothing).
            for _ in 0..<8 where (kind == 2 || kind == 3) && row != nil && row?.state.inflight == nil {
                row = record(&random, id: id)
            }
            let event = event(kind, for: row, id: id, &random)
            let now = epoch + 9_000_000 + Int64(index)
            var forks = 0
            let transition = RecordTransition(
                math: math, now: date(now),
                newID: {
                    forks += 1
                    return "f0f0f0f0-0000-4000-8000-" + String(format: "%012d", index * 10 + forks)
                })
            var out = RecordTransition.Outcome(record: row)
            var applied: Bool?
            switch event {
            case .absorb(let record, let buried): transition.absorb(record, buried: buried, into: &out)
            case .ack(let ack): transition.ack(ack, into: &out)
            case .refused(let ccid, let code, let message, let current, let absent):
                transition.refused(
                    ccid: ccid, code: code, message: message, current: current, absentAttachment: absent, into: &out)
            case .broadcast(let broadcast, let buried):
                applied = transition.broadcast(broadcast, buried: buried, limits: Limits(), into: &out)
            case .absentFromSnapshot(let cursor): transition.absentFromSnapshot(at: cursor, into: &out)
            case .discard: transition.discard(into: &out)
            }
            var after: [String: JSONValue] = [
                "record": json(out.record), "buried": out.buried.map(JSONValue.string) ?? .null, "fork": json(out.fork),
                "effect": json(out.effect),
            ]
            if let applied { after["applied"] = .bool(applied) }
            cases.append(
                JSONValue.object([
                    "before": json(row), "event": event.json, "now": .int(now),
                    "ids": .array(
                        (0..<2).map {
                            .string("f0f0f0f0-0000-4000-8000-" + String(format: "%012d", index * 10 + $0 + 1))
                        }),
                    "after": .object(after),
                ]).jsonString)
        }
        return "{\"version\":1,\"seed\":\(seed),\n\"cases\":[\n" + cases.joined(separator: ",\n") + "\n]}\n"
    }

    @Test func theCheckedInVectorsAreWhatThisClientComputes() throws {
        try SharedVectorTests.checkVectors(Self.generate(), at: Self.path, suite: "RecordStateVectorTests")
    }

    /// Every kind of event, and every outcome that matters, is in the file many times.
    @Test func theVectorsCoverEveryEventAndOutcome() throws {
        let text = Self.generate()
        func count(_ needle: String) -> Int { text.components(separatedBy: needle).count - 1 }
        for type in ["record", "ack", "refused", "broadcast", "absentFromSnapshot", "discard"] {
            #expect(count("\"type\":\"\(type)\"") >= 40, "\(type): \(count("\"type\":\"\(type)\""))")
        }
        for code in Self.codes { #expect(count("\"code\":\"\(code.rawValue)\"") >= 5, "\(code.rawValue)") }
        #expect(count("\"applied\":false") >= 20 && count("\"applied\":true") >= 60)
        #expect(count("\"fork\":{") >= 20, "forks: \(count("\"fork\":{"))")
        #expect(count("\"needsPull\":true") >= 5 && count("\"retryLater\":true") >= 10)
        #expect(count("\"conflicts\":[[") >= 5, "merge conflicts reported: \(count("\"conflicts\":[["))")
        #expect(count("\"next\":{\"set\"") >= 40 && count("\"newest\":") >= 40 && count("\"absentAtSeq\":") >= 20)
    }
}
