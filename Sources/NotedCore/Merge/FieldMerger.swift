import DiffMatchPatch

/// What applying a change to a record's fields produced.
public struct MergeResult: Sendable, Hashable {
    /// Every field of the record after the change.
    public var fields: [String: JSONValue]
    /// Text fields where part of the client's edit could not be placed.
    public var conflicts: [String]
    /// The versions that did not make it into `fields`, kept as a conflict revision: the
    /// resulting fields with, for each conflicting text field, the losing text (the client's
    /// intended text when a hunk failed, or the text a stale `set` replaced). Nil when nothing
    /// was lost.
    public var conflictFields: [String: JSONValue]?

    public init(fields: [String: JSONValue], conflicts: [String], conflictFields: [String: JSONValue]?) {
        self.fields = fields
        self.conflicts = conflicts
        self.conflictFields = conflictFields
    }
}

/// Applies a change's field ops to a record, merging when the change was made against an older
/// revision.
///
/// The rules of docs/protocol.md section 5: text deltas become patches against the value at `baseRev`
/// applied fuzzily onto the current value; set adds and removes apply to the current set;
/// scalars and whole-value sets: the later change (server order) wins.
public struct FieldMerger: Sendable {
    public var limits: Limits
    private let dmp: DiffMatchPatch
    /// All the diff and patch work of one change ends within this (docs/security.md): a hunk
    /// not placed by then is not placed, and the client's text is kept as a conflict revision.
    public var timeBudget: Duration = .seconds(2)
    /// A text delta of more operations is refused (`too_large`).
    public static let maxDeltaOps = 50_000
    /// A stale delta whose patch has more hunks than this is not placed at all: the current
    /// text stays and the client's is kept as a conflict revision.
    public static let maxHunks = 2_000

    public init(limits: Limits) {
        self.limits = limits
        self.dmp = DiffMatchPatch()
    }

    /// Applies `ops` to a record.
    /// - Parameters:
    ///   - current: the record's current fields (empty for a create).
    ///   - base: the record's fields at `baseRev` when `baseRev` is older than the current
    ///     revision; nil when the change was made against the current revision.
    public func apply(
        _ ops: [String: FieldOp],
        schema: CollectionSchema,
        current: [String: JSONValue],
        base: [String: JSONValue]?
    ) throws(ProtocolError) -> MergeResult {
        let current = schema.completed(current)
        let baseFields = base.map(schema.completed) ?? current
        let deadline = ContinuousClock.now + timeBudget
        var fields = current
        var conflicts: [String] = []
        var losing: [String: JSONValue] = [:]

        for name in ops.keys.sorted() {
            guard let op = ops[name] else { continue }
            let currentValue = current[name] ?? .null
            let baseValue = baseFields[name] ?? .null
            switch op {
            case .textSet(let text):
                if base != nil, currentValue != baseValue, currentValue != .string(text) {
                    losing[name] = currentValue
                }
                fields[name] = .string(text)
            case .textDelta(let delta):
                let merged = try mergeText(
                    name, delta: delta, base: baseValue.stringValue ?? "",
                    current: base == nil ? nil : currentValue.stringValue ?? "", deadline: deadline)
                if let intended = merged.lost {
                    conflicts.append(name)
                    losing[name] = .string(intended)
                }
                fields[name] = .string(merged.text)
            case .setReplace(let values):
                fields[name] = .array(values.map(JSONValue.string))
            case .setAddRemove(let add, let remove):
                let existing = (currentValue.arrayValue ?? []).compactMap(\.stringValue)
                let removed = Set(remove)
                var result = existing.filter { !removed.contains($0) }
                var present = Set(result)
                for value in add where present.insert(value).inserted {
                    result.append(value)
                }
                guard result.count <= limits.maxTags else {
                    throw ProtocolError(.tooLarge, "\"\(name)\" would have more than \(limits.maxTags) elements")
                }
                fields[name] = .array(result.map(JSONValue.string))
            case .scalarSet(let value):
                fields[name] = value
            }
        }
        var conflictFields: [String: JSONValue]? = nil
        if !losing.isEmpty {
            conflictFields = fields.merging(losing) { _, lost in lost }
        }
        return MergeResult(fields: fields, conflicts: conflicts, conflictFields: conflictFields)
    }

    /// A text `delta` against `base`, placed onto `current` (nil: the change is not stale, the
    /// result is exactly base plus delta) with strict patch application.
    /// - Returns: the merged text, and the text the client intended when part of the edit could
    ///   not be placed (kept as a conflict revision).
    private func mergeText(
        _ name: String, delta: String, base baseText: String, current: String?, deadline: ContinuousClock.Instant
    ) throws(ProtocolError) -> (text: String, lost: String?) {
        let diffs: [Diff]
        do {
            diffs = try dmp.fromDelta(baseText, delta, strict: true)
        } catch {
            throw ProtocolError(.invalidDelta, "the delta of \"\(name)\" does not fit its base text: \(error)")
        }
        guard diffs.count <= Self.maxDeltaOps else {
            throw ProtocolError(
                .tooLarge,
                "the delta of \"\(name)\" has more than \(Self.maxDeltaOps) operations; send the text with set")
        }
        let intended = dmp.text2(diffs)
        var result = intended
        var lost: String?
        if let current, current != baseText {
            let patches = dmp.patchMake(baseText, diffs)
            if patches.count > Self.maxHunks {
                // Too scattered to place in time: the current text stays, the client's is kept.
                return (current, intended)
            }
            let applied = dmp.patchApply(patches, to: current, strict: true, deadline: deadline)
            result = applied.text
            if applied.results.contains(false) { lost = intended }
        }
        guard result.utf16.count <= limits.maxTextLength else {
            throw ProtocolError(.tooLarge, "\"\(name)\" would be longer than \(limits.maxTextLength) UTF-16 code units")
        }
        return (result, lost)
    }

    /// The ops that turn `old` into `new`, as broadcast in a `change` message: a text delta
    /// against the old value, or a `set` where that is shorter. Unchanged fields are left out.
    public func ops(from old: [String: JSONValue], to new: [String: JSONValue], schema: CollectionSchema) -> [String:
        JSONValue]
    {
        var result: [String: JSONValue] = [:]
        for name in new.keys.sorted() {
            guard let newValue = new[name], old[name] != newValue else { continue }
            let setOp: JSONValue = ["set": newValue]
            if schema.fields[name]?.kind == .text, let newText = newValue.stringValue,
                let oldText = old[name]?.stringValue
            {
                let delta = dmp.toDelta(dmp.diff(oldText, newText))
                if delta.utf8.count < newText.utf8.count {
                    result[name] = ["delta": .string(delta)]
                    continue
                }
            }
            result[name] = setOp
        }
        return result
    }
}
