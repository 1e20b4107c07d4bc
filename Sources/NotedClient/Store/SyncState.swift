import Foundation
import NotedCore

/// Where one record stands between this device and the server: one value, stored in the
/// record's `sync` column (NULL when the record is synced), changed only through the
/// transitions below.
///
/// The outbox is not a separate queue: a record is pending while it has local edits not yet
/// put in a change (`edited`), a change in flight (sent or about to be sent, resent unchanged
/// until answered), or a purge to send.
struct SyncState: Hashable, Sendable {
    /// How the next change sends text fields.
    enum NextSend: Hashable, Sendable {
        /// As deltas against the shadow.
        case delta
        /// As `set` ops (after `base_unavailable` or `invalid_delta`). With `baseRev`: the
        /// older revision the change names, so that the server treats its `set`s as stale and
        /// keeps the text they replace as a conflict revision (after a merged ack that the
        /// user's later edits could not be rebased onto).
        case set(baseRev: Int64?)
    }

    /// The newest server state seen while a change was in flight; the answer to the change
    /// decides how local edits move onto it.
    struct Newest: Hashable, Sendable {
        /// Nil: the record was purged.
        var fields: [String: JSONValue]?
        var rev: Int64
        var updatedAt: Date
    }

    /// A change sent, or about to be, and not yet answered.
    struct Inflight: Hashable, Sendable {
        var ccid: String
        var baseRev: Int64
        /// The exact change JSON, resent unchanged.
        var body: String
        /// The fields the change produces when applied exactly; nil for a purge.
        var sent: [String: JSONValue]?
        var newest: Newest?
        /// A snapshot pull (which carries no tombstones) ended at this `seq` without naming the
        /// record: if the change's ack has a `seq` up to here, the change was applied before the
        /// snapshot and the record purged since.
        var absentAtSeq: Int64?

        var isPurge: Bool { sent == nil }
    }

    /// Local edits not yet captured in a change.
    var edited = false
    /// The user purged the record; the purge is pending.
    var purging = false
    var next = NextSend.delta
    var inflight: Inflight?
    /// Why the server refused the last change for good (the edit stays local, not pending).
    var refusal: String?
    /// Text fields of the last merge that could not place all of this device's edit; the
    /// intended version is in the server's history as a conflict revision.
    var conflicts: [String] = []

    /// Nothing to send, nothing in flight, nothing to report.
    static let synced = SyncState()

    /// A record created here: everything is to be sent.
    static let created = SyncState(edited: true)

    var pending: Bool { edited || inflight != nil || purging }

    /// The bits of the record's `syncFlags` column (generated from `sync`: client migration v7).
    static let editedFlag = 1
    static let purgingFlag = 2
    static let inflightFlag = 4
    /// The flag values of a record with a change in flight, and of one whose edits wait for one.
    static let inflightFlags = (0...7).filter { $0 & inflightFlag != 0 }
    static let waitingFlags = (0...7).filter { $0 & (editedFlag | inflightFlag) == editedFlag }

    /// The newest revision held: the shadow's, or one seen while a change was in flight.
    func heldRev(shadowRev: Int64) -> Int64 {
        max(shadowRev, inflight?.newest?.rev ?? 0)
    }

    /// The `baseRev` the next change names.
    func nextBaseRev(shadowRev: Int64) -> Int64 {
        if case .set(let baseRev?) = next { return baseRev }
        return shadowRev
    }

    var sendsTextAsSet: Bool {
        if case .set = next { return true }
        return false
    }

    // MARK: Transitions

    /// The user changed the record.
    mutating func edit() {
        edited = true
        refusal = nil
        conflicts = []
    }

    /// The user purged the record: the purge replaces any refused edit (which would otherwise
    /// still be listed as refused, on a record the user can no longer open).
    mutating func purge() {
        purging = true
        edited = true
        refusal = nil
    }

    /// The pending edits go out as this change. One change per record is in flight at a time:
    /// the outbox sends only records without one.
    mutating func send(_ change: Inflight) {
        precondition(inflight == nil, "a second change in flight for one record")
        inflight = change
        edited = false
        next = .delta
        refusal = nil
    }

    /// The pending edits turned out to change nothing the server holds.
    mutating func nothingToSend() {
        edited = false
    }

    /// A newer server state arrived while a change was in flight; an older one is ignored.
    mutating func sawNewer(fields: [String: JSONValue]?, rev: Int64, updatedAt: Date) {
        guard var change = inflight, rev > (change.newest?.rev ?? 0) else { return }
        change.newest = Newest(fields: fields, rev: rev, updatedAt: updatedAt)
        inflight = change
    }

    /// A snapshot pull ending at `seq` did not name the record while a change was in flight.
    mutating func absentFromSnapshot(at seq: Int64) {
        inflight?.absentAtSeq = seq
    }

    /// The in-flight change was answered: it is no longer in flight; returns it.
    mutating func answered() -> Inflight? {
        defer { inflight = nil }
        return inflight
    }

    /// Local edits could not be moved onto a newer server state; they go out as they are,
    /// unless the server refused them for good (then they stay here, refused, until the user
    /// edits or discards them).
    mutating func stillToSend() {
        if refusal == nil { edited = true }
    }

    /// The record moved to a newer server state; whatever still differs from it is to be sent.
    /// Refused edits are moved along but not sent; once nothing differs, the refusal is over.
    mutating func moved(localDiffers: Bool) {
        if !localDiffers { refusal = nil }
        edited = purging || (localDiffers && refusal == nil)
    }

    /// The user dropped this device's edits not yet sent (a refused edit, or unsynced edits at
    /// sign-out): the record is the server's again. A change already in flight stays in
    /// flight; its answer brings the server's state.
    mutating func discard() {
        edited = false
        purging = false
        refusal = nil
        conflicts = []
        next = .delta
    }

    /// A merge could not place all of this device's edit in these text fields.
    mutating func merged(conflicts fields: [String]) {
        if !fields.isEmpty { conflicts = fields }
    }

    /// Edits made since a merged change could not be rebased onto the acknowledged state: the
    /// next change sends them as stale `set`s against `staleBase` (see `NextSend.set`).
    /// Only once the merged change has been answered.
    mutating func keepUnplacedEdits(staleBase: Int64) {
        precondition(inflight == nil, "unplaced edits kept while a change is in flight")
        edited = true
        conflicts = ["body"]
        next = .set(baseRev: staleBase)
    }

    /// The record's space is no longer the user's (left, removed, deleted; docs/protocol.md,
    /// "Spaces"): its edits stay on the device, refused, never sent again.
    mutating func outOfSpace() {
        inflight = nil
        edited = false
        purging = false
        refusal = Self.outOfSpaceRefusal
    }

    /// The user is in the record's space again: edits kept by ``outOfSpace()`` go out.
    mutating func backInSpace() {
        guard refusal == Self.outOfSpaceRefusal else { return }
        refusal = nil
        edited = true
    }

    static let outOfSpaceRefusal = "you are no longer a member of this record's space; copy it to your space"

    /// The server refused the change in flight; what follows depends on the code
    /// (docs/protocol.md section 5). The change is no longer in flight afterwards.
    /// `rate_limited` changes nothing: the change stays in flight, resent later unchanged.
    mutating func refused(_ code: ErrorCode, message: String) {
        guard code != .rateLimited else { return }
        let editedSince = inflight != nil && edited
        inflight = nil
        edited = true
        switch code {
        case .baseUnavailable, .invalidDelta:
            next = .set(baseRev: nil)
        case .gone, .notFound, .alreadyExists, .invalidVersion, .ccidReused:
            break
        default:
            // bad_request, invalid_field, unknown_collection, too_large: resending the same
            // cannot help. Edits made after the change was sent may be the user's correction
            // (found by the simulation: a mood set right again before the refusal came left
            // the record refused, and an edit to the same value changed nothing): they go out;
            // if they still carry what was refused, that change is refused with nothing newer.
            guard !editedSince else { return }
            edited = false
            refusal = "\(code.rawValue): \(message)"
        }
    }
}

// MARK: Stored form

/// The `sync` column holds the state as a JSON object; keys at their default are left out.
/// Field values go through `JSONValue`, so they are stored exactly as they came.
extension SyncState {
    var json: JSONValue {
        var object: [String: JSONValue] = [:]
        if edited { object["edited"] = true }
        if purging { object["purging"] = true }
        if case .set(let baseRev) = next { object["next"] = ["set": baseRev.map(JSONValue.int) ?? .null] }
        if let change = inflight { object["inflight"] = change.json }
        if let refusal { object["refusal"] = .string(refusal) }
        if !conflicts.isEmpty { object["conflicts"] = .array(conflicts.map(JSONValue.string)) }
        return .object(object)
    }

    init(json: JSONValue) throws {
        guard let object = json.objectValue else { throw Self.corrupt("not an object") }
        edited = object["edited"]?.boolValue ?? false
        purging = object["purging"]?.boolValue ?? false
        if let set = object["next"]?["set"] {
            next = .set(baseRev: set.intValue)
        }
        inflight = try object["inflight"].map(Inflight.init(json:))
        refusal = object["refusal"]?.stringValue
        conflicts = object["conflicts"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    static func corrupt(_ detail: String) -> NotedClientError {
        NotedClientError(.storage, "a record's sync state in the local database is damaged: \(detail)")
    }
}

extension SyncState.Inflight {
    var json: JSONValue {
        var object: [String: JSONValue] = ["ccid": .string(ccid), "baseRev": .int(baseRev), "body": .string(body)]
        if let sent { object["sent"] = .object(sent) }
        if let newest {
            object["newest"] = [
                "fields": newest.fields.map(JSONValue.object) ?? .null, "rev": .int(newest.rev),
                "updatedAt": .int(Int64((newest.updatedAt.timeIntervalSince1970 * 1000).rounded())),
            ]
        }
        if let absentAtSeq { object["absentAtSeq"] = .int(absentAtSeq) }
        return .object(object)
    }

    init(json: JSONValue) throws {
        guard let ccid = json["ccid"]?.stringValue, let baseRev = json["baseRev"]?.intValue,
            let body = json["body"]?.stringValue
        else {
            throw SyncState.corrupt("an in-flight change without ccid, baseRev or body")
        }
        self.ccid = ccid
        self.baseRev = baseRev
        self.body = body
        sent = json["sent"]?.objectValue
        if let newest = json["newest"] {
            guard let rev = newest["rev"]?.intValue, let millis = newest["updatedAt"]?.intValue else {
                throw SyncState.corrupt("a newest state without rev or updatedAt")
            }
            self.newest = SyncState.Newest(
                fields: newest["fields"]?.objectValue, rev: rev,
                updatedAt: Date(timeIntervalSince1970: Double(millis) / 1000))
        }
        absentAtSeq = json["absentAtSeq"]?.intValue
    }
}
