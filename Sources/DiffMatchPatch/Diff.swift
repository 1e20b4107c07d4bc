/// One piece of a difference between two texts: text to delete, insert or keep.
///
/// A list of diffs reads left to right: `[Diff(.delete, "Hello"), Diff(.insert, "Goodbye"),
/// Diff(.equal, " world.")]` turns "Hello world." into "Goodbye world.".
public struct Diff: Hashable, Sendable, CustomStringConvertible {
    /// What a diff does with its text.
    public enum Operation: Int, Hashable, Sendable {
        case delete = -1
        case equal = 0
        case insert = 1
    }

    /// What this diff does with its text.
    public var operation: Operation
    /// The text deleted, inserted or kept.
    public var text: String

    /// Creates a diff.
    public init(_ operation: Operation, _ text: String) {
        self.operation = operation
        self.text = text
    }

    public var description: String {
        "Diff(\(operation),\"\(text)\")"
    }
}

/// Diffs in UTF-16 code units: the form every algorithm works on, as the JavaScript reference.
struct UDiff: Equatable {
    var op: Diff.Operation
    var text: [UInt16]

    init(_ op: Diff.Operation, _ text: [UInt16]) {
        self.op = op
        self.text = text
    }

    init(_ op: Diff.Operation, _ text: ArraySlice<UInt16>) {
        self.op = op
        self.text = Array(text)
    }
}

extension Diff {
    init(_ udiff: UDiff) {
        self.init(udiff.op, UTF16Conversion.string(udiff.text))
    }

    var udiff: UDiff { UDiff(operation, UTF16Conversion.units(text)) }
}
