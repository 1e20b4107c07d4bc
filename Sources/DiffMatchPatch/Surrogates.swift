/// Keeps surrogate pairs whole.
///
/// The reference works on UTF-16 code units, so a diff boundary can fall between the two
/// halves of an astral character (an emoji, say): its delta and patch text then either throw
/// (`URIError`) or count positions inside the pair. Before anything leaves this library, diffs
/// go through `repair`, which moves such boundaries to the nearest character boundary and is
/// the identity on diffs that split no pair, so every other output stays the reference's.
enum Surrogates {
    /// Whether any diff starts with a low surrogate or ends with a high one.
    static func splitsPair(_ diffs: [UDiff]) -> Bool {
        for diff in diffs {
            guard let first = diff.text.first, let last = diff.text.last else { continue }
            if isLowSurrogate(first) || isHighSurrogate(last) { return true }
        }
        return false
    }

    private struct Group {
        var delete: [UInt16] = []
        var insert: [UInt16] = []
        var original: [UDiff] = []
        var touched = false
    }

    private enum Segment {
        case equal([UInt16])
        case edit(Group)
    }

    /// Diffs with the same texts on both sides in which no boundary splits a surrogate pair.
    static func repair(_ diffs: [UDiff]) -> [UDiff] {
        guard splitsPair(diffs) else { return diffs }

        // Equalities and edit groups, alternating.
        var segments: [Segment] = []
        for diff in diffs where !diff.text.isEmpty {
            switch (diff.op, segments.last) {
            case (.equal, .equal(let text)?):
                segments[segments.count - 1] = .equal(text + diff.text)
            case (.equal, _):
                segments.append(.equal(diff.text))
            case (_, .edit(var group)?):
                if diff.op == .delete { group.delete += diff.text } else { group.insert += diff.text }
                group.original.append(diff)
                segments[segments.count - 1] = .edit(group)
            case (_, _):
                var group = Group()
                if diff.op == .delete { group.delete = diff.text } else { group.insert = diff.text }
                group.original = [diff]
                segments.append(.edit(group))
            }
        }

        // Move a split half out of each equality into the neighbouring edit group (both sides).
        var i = 0
        while i < segments.count {
            guard case .equal(var text) = segments[i] else {
                i += 1
                continue
            }
            if i > 0, case .edit(var group) = segments[i - 1], let first = text.first, isLowSurrogate(first) {
                group.delete.append(first)
                group.insert.append(first)
                group.touched = true
                segments[i - 1] = .edit(group)
                text.removeFirst()
            }
            if i + 1 < segments.count, case .edit(var group) = segments[i + 1], let last = text.last,
                isHighSurrogate(last)
            {
                group.delete.insert(last, at: 0)
                group.insert.insert(last, at: 0)
                group.touched = true
                segments[i + 1] = .edit(group)
                text.removeLast()
            }
            if text.isEmpty, i > 0, i + 1 < segments.count,
                case .edit(var left) = segments[i - 1], case .edit(let right) = segments[i + 1]
            {
                left.delete += right.delete
                left.insert += right.insert
                left.original += right.original
                left.touched = true
                segments[i - 1] = .edit(left)
                segments.removeSubrange(i...(i + 1))
                continue
            }
            segments[i] = .equal(text)
            i += 1
        }

        var out: [UDiff] = []
        func appendEqual(_ text: ArraySlice<UInt16>) {
            guard !text.isEmpty else { return }
            if let last = out.last, last.op == .equal {
                out[out.count - 1].text += text
            } else {
                out.append(UDiff(.equal, text))
            }
        }
        for segment in segments {
            switch segment {
            case .equal(let text):
                appendEqual(text[...])
            case .edit(let group):
                let inner = group.original.contains { diff in
                    isLowSurrogate(diff.text[0]) || isHighSurrogate(diff.text[diff.text.count - 1])
                }
                if !group.touched && !inner {
                    out += group.original
                    continue
                }
                // Factor out whole characters common to both sides.
                var prefix = 0
                while prefix < group.delete.count && prefix < group.insert.count
                    && group.delete[prefix] == group.insert[prefix]
                {
                    prefix += 1
                }
                if prefix > 0 && isHighSurrogate(group.delete[prefix - 1]) { prefix -= 1 }
                var suffix = 0
                while suffix < group.delete.count - prefix && suffix < group.insert.count - prefix
                    && group.delete[group.delete.count - 1 - suffix] == group.insert[group.insert.count - 1 - suffix]
                {
                    suffix += 1
                }
                if suffix > 0 && isLowSurrogate(group.delete[group.delete.count - suffix]) { suffix -= 1 }
                appendEqual(group.delete[0..<prefix])
                let delete = group.delete[prefix..<(group.delete.count - suffix)]
                let insert = group.insert[prefix..<(group.insert.count - suffix)]
                if !delete.isEmpty { out.append(UDiff(.delete, delete)) }
                if !insert.isEmpty { out.append(UDiff(.insert, insert)) }
                if suffix > 0 {
                    appendEqual(group.delete[(group.delete.count - suffix)...])
                }
            }
        }
        return out
    }

    /// Whether `text` holds an unpaired surrogate.
    static func hasUnpaired(_ text: [UInt16]) -> Bool {
        var i = 0
        while i < text.count {
            let u = text[i]
            if isHighSurrogate(u) {
                guard i + 1 < text.count, isLowSurrogate(text[i + 1]) else { return true }
                i += 2
            } else if isLowSurrogate(u) {
                return true
            } else {
                i += 1
            }
        }
        return false
    }
}
