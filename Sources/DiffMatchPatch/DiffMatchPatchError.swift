/// Why a delta or patch text could not be read. Thrown, never a crash, whatever the input.
public struct DiffMatchPatchError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kinds of malformed input.
    public enum Kind: Hashable, Sendable {
        /// A delta token that is not `=N`, `-N` or `+text`, or a bad number or escape in it.
        case invalidDelta
        /// The delta's `=` and `-` counts do not add up to the length of the source text.
        case lengthMismatch
        /// A patch text that does not parse: bad header, bad line mode or bad escape.
        case invalidPatch
        /// The input would split a surrogate pair, or decodes to unpaired surrogates.
        case splitSurrogatePair
    }

    /// What kind of malformed input this is.
    public var kind: Kind
    /// A message that says what was wrong and where.
    public var message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// A bounded, printable excerpt of bad input for an error message.
func excerpt<C: Collection>(_ units: C) -> String where C.Element == UInt16 {
    let limit = 40
    let text = String(decoding: units.prefix(limit), as: UTF16.self)
    return units.count > limit ? "\"\(text)…\"" : "\"\(text)\""
}
