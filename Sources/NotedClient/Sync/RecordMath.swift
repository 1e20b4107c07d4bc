import DiffMatchPatch
import NotedCore

/// The pure field arithmetic of the sync engine: ops from a shadow to a local state, rebasing
/// local edits onto a newer server state, and applying a broadcast's ops.
public struct RecordMath: Sendable {
    public var schema: CollectionSchema
    private let dmp = DiffMatchPatch()

    public init(schema: CollectionSchema = .notes) {
        self.schema = schema
    }

    /// The ops of a change that turns `shadow` into `local`; unchanged fields are left out.
    ///
    /// Text fields become diff-match-patch deltas against the shadow (so the server can merge
    /// them with concurrent edits), or `set` when `textAsSet` (a create, or a resend after
    /// `base_unavailable`). Set fields become `add`/`remove`, scalars `set`.
    public func ops(from shadow: [String: JSONValue], to local: [String: JSONValue], textAsSet: Bool) -> [String:
        FieldOp]
    {
        let shadow = schema.completed(shadow)
        let local = schema.completed(local)
        var result: [String: FieldOp] = [:]
        for name in schema.fields.keys.sorted() {
            guard let spec = schema.fields[name], let new = local[name], let old = shadow[name], new != old else {
                continue
            }
            switch spec.kind {
            case .text:
                let newText = new.stringValue ?? ""
                if textAsSet {
                    result[name] = .textSet(newText)
                } else {
                    result[name] = .textDelta(dmp.toDelta(editDiffs(old.stringValue ?? "", newText)))
                }
            case .set:
                let oldValues = strings(old)
                let newValues = strings(new)
                let oldSet = Set(oldValues)
                let newSet = Set(newValues)
                let add = newValues.filter { !oldSet.contains($0) }
                let remove = oldValues.filter { !newSet.contains($0) }
                if textAsSet {
                    result[name] = .setReplace(newValues)
                } else if !add.isEmpty || !remove.isEmpty {
                    result[name] = .setAddRemove(add: add, remove: remove)
                }
            case .scalar:
                result[name] = .scalarSet(new)
            }
        }
        return result
    }

    /// Moves local edits made against `base` onto `onto` (a newer server state).
    ///
    /// Text: the patch from `base` to `local` applied fuzzily to `onto`; sets: the elements the
    /// user added or removed, applied to `onto`'s set; scalars: the user's value when they
    /// changed it, else the server's. The user's text is never replaced by a stale copy.
    public func rebase(local: [String: JSONValue], base: [String: JSONValue], onto: [String: JSONValue]) -> [String:
        JSONValue]
    {
        rebaseReportingConflicts(local: local, base: base, onto: onto).fields
    }

    /// ``rebase(local:base:onto:)``, also saying whether every text hunk found its place.
    public func rebaseReportingConflicts(
        local: [String: JSONValue], base: [String: JSONValue], onto: [String: JSONValue]
    ) -> (fields: [String: JSONValue], clean: Bool) {
        var clean = true
        let local = schema.completed(local)
        let base = schema.completed(base)
        var result = schema.completed(onto)
        for (name, spec) in schema.fields {
            guard let mine = local[name], let old = base[name], let theirs = result[name], mine != old else { continue }
            switch spec.kind {
            case .text:
                let mineText = mine.stringValue ?? ""
                let oldText = old.stringValue ?? ""
                let theirsText = theirs.stringValue ?? ""
                if theirsText == oldText || theirsText == mineText {
                    result[name] = mine
                } else {
                    let patches = dmp.patchMake(oldText, editDiffs(oldText, mineText))
                    let applied = dmp.patchApply(patches, to: theirsText, strict: true)
                    if applied.results.contains(false) { clean = false }
                    result[name] = .string(applied.text)
                }
            case .set:
                let oldSet = Set(strings(old))
                let mineValues = strings(mine)
                let mineSet = Set(mineValues)
                let removed = oldSet.subtracting(mineSet)
                var values = strings(theirs).filter { !removed.contains($0) }
                var present = Set(values)
                for value in mineValues where !oldSet.contains(value) && present.insert(value).inserted {
                    values.append(value)
                }
                result[name] = .array(values.map(JSONValue.string))
            case .scalar:
                result[name] = mine
            }
        }
        return (result, clean)
    }

    /// Applies the ops of a `change` broadcast to the state at its `prevRev`.
    public func apply(ops: [String: JSONValue], to fields: [String: JSONValue], limits: Limits) throws(ProtocolError)
        -> [String: JSONValue]
    {
        // The parser validates the ops exactly as the server does.
        let parsed = try ChangeParser(schemas: SchemaRegistry([schema]), limits: limits).parse(fields: ops, of: schema)
        return try FieldMerger(limits: limits).apply(parsed, schema: schema, current: fields, base: nil).fields
    }

    /// The result of sending `ops` against `shadow` when the server applies them exactly.
    public func applyExactly(ops: [String: FieldOp], to shadow: [String: JSONValue]) -> [String: JSONValue] {
        (try? FieldMerger(limits: .unbounded).apply(ops, schema: schema, current: shadow, base: nil).fields)
            ?? schema.completed(shadow)
    }

    /// The edit from `old` to `new` as the server and the rebase should see it: a diff without
    /// stray one-letter matches, each change widened to whole words.
    ///
    /// Raw character diffs anchor on letters two unrelated words share, and a fuzzy patch of
    /// them can land twice or garble text; the full semantic cleanup (what `patchMake(_:_:)`
    /// does) folds a short text into one delete-and-insert, which garbles the text someone
    /// else changed meanwhile. The efficiency cleanup drops only the stray matches, and the
    /// lossless one aligns what is left with words. A change inside a word then becomes the
    /// whole old word deleted and the whole new word inserted: `[7]` to `[57]` is not "insert 5"
    /// but "replace `[7]` by `[57]`". When someone else removed or rewrote that word meanwhile,
    /// the merge cannot place the edit (deletions must find exactly their text) and keeps it as
    /// a conflict, instead of splicing a "5" into whatever stands there now (found by the
    /// simulation: a marker `[57]` came out as `5`).
    func editDiffs(_ old: String, _ new: String) -> [Diff] {
        var diffs = dmp.diff(old, new)
        dmp.cleanupEfficiency(&diffs)
        dmp.cleanupSemanticLossless(&diffs)
        return Self.wholeWords(diffs)
    }

    /// `diffs` with every change widened to the words it touches, so that no change starts or
    /// ends inside a word of the text around it.
    static func wholeWords(_ diffs: [Diff]) -> [Diff] {
        var runs = EditRuns(diffs)
        runs.widenToWords()
        return runs.diffs
    }

    private func strings(_ value: JSONValue) -> [String] {
        (value.arrayValue ?? []).compactMap(\.stringValue)
    }
}

/// A diff as runs of kept text with one change (what is deleted, what is inserted) between
/// each two: `kept[i]` comes before change `i` and `kept[i + 1]` after it.
struct EditRuns {
    private var kept: [[Character]] = [[]]
    private var deleted: [[Character]] = []
    private var inserted: [[Character]] = []

    init(_ diffs: [Diff]) {
        var open = false
        for diff in diffs {
            if diff.operation == .equal {
                kept[kept.count - 1] += Array(diff.text)
                open = false
                continue
            }
            if !open {
                deleted.append([])
                inserted.append([])
                kept.append([])
                open = true
            }
            if diff.operation == .delete {
                deleted[deleted.count - 1] += Array(diff.text)
            } else {
                inserted[inserted.count - 1] += Array(diff.text)
            }
        }
    }

    /// Grows every change over the letters of the words it touches, joining changes that meet.
    mutating func widenToWords() {
        var i = 0
        while i < deleted.count {
            while widen(&i) {}
            i += 1
        }
    }

    /// One step of widening change `i`; true if anything moved (`i` may move back by one).
    private mutating func widen(_ i: inout Int) -> Bool {
        var widened = false
        if let last = kept[i].last, !last.isWhitespace, touchesWord(atStart: true, i) {
            kept[i].removeLast()
            deleted[i].insert(last, at: 0)
            inserted[i].insert(last, at: 0)
            widened = true
        }
        if let first = kept[i + 1].first, !first.isWhitespace, touchesWord(atStart: false, i) {
            kept[i + 1].removeFirst()
            deleted[i].append(first)
            inserted[i].append(first)
            widened = true
        }
        // A run of kept text used up: the changes on either side become one.
        if kept[i].isEmpty && i > 0 {
            join(i - 1)
            i -= 1
            widened = true
        } else if kept[i + 1].isEmpty && i + 1 < deleted.count {
            join(i)
            widened = true
        }
        return widened
    }

    private func touchesWord(atStart start: Bool, _ i: Int) -> Bool {
        let edges = [deleted[i], inserted[i]].compactMap { start ? $0.first : $0.last }
        return edges.contains { !$0.isWhitespace }
    }

    /// Joins change `i + 1` into change `i` (the kept run between them is empty).
    private mutating func join(_ i: Int) {
        deleted[i] += deleted[i + 1]
        inserted[i] += inserted[i + 1]
        kept.remove(at: i + 1)
        deleted.remove(at: i + 1)
        inserted.remove(at: i + 1)
    }

    var diffs: [Diff] {
        var result: [Diff] = []
        for index in kept.indices {
            if !kept[index].isEmpty { result.append(Diff(.equal, String(kept[index]))) }
            guard index < deleted.count else { continue }
            if !deleted[index].isEmpty { result.append(Diff(.delete, String(deleted[index]))) }
            if !inserted[index].isEmpty { result.append(Diff(.insert, String(inserted[index]))) }
        }
        return result
    }
}
