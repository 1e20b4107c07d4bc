import DiffMatchPatch
import Foundation
import NotedCore

/// An older revision's fields written as the difference from its newer neighbour's: what a
/// revision row holds once the history is compacted (``HistoryChain``).
///
/// A row stores `values` in its `fields` column (the fields whose value differs, whole, at the
/// top level of the JSON object as a full row has them: the attachment collector reads both
/// alike) and the rest in its `delta` column: `{"patches":{"body":"@@ -1,4 +1,4 @@…"},
/// "absent":["folder"]}`, diff-match-patch patches (newer text → older text) for the texts it
/// pays to patch, and the fields the older revision does not have.
struct RevisionDelta: Sendable, Hashable {
    var values: [String: JSONValue] = [:]
    var patches: [String: String] = [:]
    var absent: [String] = []

    /// The difference that turns `newer` into `older`. Every text patch is checked by applying
    /// it; one that does not give `older`'s text exactly (or is no shorter) stores the text whole.
    static func make(
        from newer: [String: JSONValue], to older: [String: JSONValue], deadline: ContinuousClock.Instant? = nil
    ) -> RevisionDelta {
        var delta = RevisionDelta()
        let dmp = DiffMatchPatch()
        // Compared as bytes: `JSONValue`'s `==` compares strings by canonical equivalence, and a
        // revision must read back exactly as it was saved (NFC and NFD alike).
        for (name, value) in older where !Self.sameBytes(newer[name], value) {
            if case .string(let text) = value, case .string(let newerText)? = newer[name], text.utf8.count > 64 {
                let diffs = dmp.diff(newerText, text, checkLines: true, deadline: deadline)
                let patches = dmp.patchMake(newerText, diffs)
                let patchText = dmp.patchToText(patches)
                if patchText.utf8.count < text.utf8.count, let applied = Self.applyPatch(patchText, to: newerText),
                    applied.utf8.elementsEqual(text.utf8)
                {
                    delta.patches[name] = patchText
                    continue
                }
            }
            delta.values[name] = value
        }
        delta.absent = newer.keys.filter { older[$0] == nil }.sorted()
        return delta
    }

    /// `newer`'s fields turned into the older revision's.
    func apply(to newer: [String: JSONValue]) throws -> [String: JSONValue] {
        var fields = newer
        for name in absent { fields[name] = nil }
        for (name, value) in values { fields[name] = value }
        for (name, patchText) in patches {
            guard case .string(let text)? = newer[name], let older = Self.applyPatch(patchText, to: text) else {
                throw StoreError.corrupt("a revision's patch of \(name) does not apply to its newer neighbour")
            }
            fields[name] = .string(older)
        }
        return fields
    }

    static func sameBytes(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return a.jsonString.utf8.elementsEqual(b.jsonString.utf8)
    }

    /// The `delta` column's JSON.
    var columnJSON: String {
        var object: [String: JSONValue] = [:]
        if !patches.isEmpty { object["patches"] = .object(patches.mapValues(JSONValue.string)) }
        if !absent.isEmpty { object["absent"] = .array(absent.map(JSONValue.string)) }
        return JSONValue.object(object).jsonString
    }

    /// Bytes the row stores (its `fields` and `delta` columns).
    var storedBytes: Int {
        FieldsCoding.encode(values).utf8.count + columnJSON.utf8.count
    }

    /// A row's `fields` column (`values`) and `delta` column read back.
    init(values: [String: JSONValue], column: String) throws {
        guard let object = try JSONValue.parse(column).objectValue else {
            throw StoreError.corrupt("a revision's delta column is not a JSON object")
        }
        self.values = values
        for (name, value) in object["patches"]?.objectValue ?? [:] {
            guard let text = value.stringValue else { throw StoreError.corrupt("a revision's patch is not text") }
            patches[name] = text
        }
        absent = (object["absent"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    init(values: [String: JSONValue] = [:], patches: [String: String] = [:], absent: [String] = []) {
        self.values = values
        self.patches = patches
        self.absent = absent
    }

    /// The patch applied exactly: every hunk placed (the text is the one it was made from).
    private static func applyPatch(_ patchText: String, to text: String) -> String? {
        let dmp = DiffMatchPatch()
        guard let patches = try? dmp.patchFromText(patchText) else { return nil }
        let (result, applied) = dmp.patchApply(patches, to: text, strict: true)
        return applied.allSatisfy { $0 } ? result : nil
    }
}
