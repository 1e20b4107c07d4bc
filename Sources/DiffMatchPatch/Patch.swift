/// One hunk of a patch: diffs with surrounding context, and where they apply.
///
/// `start1`/`length1` locate the hunk in the source text, `start2`/`length2` in the result;
/// all are UTF-16 code units, as in the JavaScript reference.
public struct Patch: Hashable, Sendable, CustomStringConvertible {
    /// The diffs of this hunk, context included.
    public var diffs: [Diff]
    /// Offset of the hunk in the source text.
    public var start1: Int
    /// Offset of the hunk in the result text.
    public var start2: Int
    /// Length of the hunk in the source text.
    public var length1: Int
    /// Length of the hunk in the result text.
    public var length2: Int

    /// Creates a patch hunk.
    public init(diffs: [Diff] = [], start1: Int = 0, start2: Int = 0, length1: Int = 0, length2: Int = 0) {
        self.diffs = diffs
        self.start1 = start1
        self.start2 = start2
        self.length1 = length1
        self.length2 = length2
    }

    /// This hunk in patch-text form (GNU diff-like, %-encoded), exactly as the reference's
    /// `patch_obj.toString()`.
    public var description: String {
        var out: [UInt8] = []
        UPatch(self).appendText(to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// A patch in UTF-16 code units.
struct UPatch: Equatable {
    var diffs: [UDiff] = []
    var start1 = 0
    var start2 = 0
    var length1 = 0
    var length2 = 0

    init() {}

    init(_ patch: Patch) {
        diffs = patch.diffs.map(\.udiff)
        start1 = patch.start1
        start2 = patch.start2
        length1 = patch.length1
        length2 = patch.length2
    }

    var patch: Patch {
        Patch(diffs: diffs.map(Diff.init), start1: start1, start2: start2, length1: length1, length2: length2)
    }

    /// Appends the reference's `patch_obj.toString()` of this hunk as UTF-8.
    func appendText(to out: inout [UInt8]) {
        func coords(_ start: Int, _ length: Int) -> String {
            switch length {
            case 0: return "\(start),0"
            case 1: return "\(start + 1)"
            default: return "\(start + 1),\(length)"
            }
        }
        out.append(contentsOf: "@@ -\(coords(start1, length1)) +\(coords(start2, length2)) @@\n".utf8)
        for diff in diffs {
            switch diff.op {
            case .insert: out.append(UInt8(ascii: "+"))
            case .delete: out.append(UInt8(ascii: "-"))
            case .equal: out.append(UInt8(ascii: " "))
            }
            URICoding.encode(diff.text, into: &out)
            out.append(UInt8(ascii: "\n"))
        }
    }
}
