/// One element of an attachments field (the notes schema's `attachments`): a file stored on the
/// server as a blob, by its SHA-256 (docs/protocol.md, "Attachments").
///
/// The element is the string `"<sha256> <size> <type> <name>"`: 64 lower-case hex digits, the
/// size in bytes as a decimal integer, a MIME type `type/subtype` in lower case, and the file's
/// name (the rest of the string, spaces allowed). A set field holds strings, and this one
/// string per file keeps the field a plain set: adding a file is an `add`, removing it a
/// `remove`, and concurrent adds merge as any set does.
public struct AttachmentReference: Sendable, Hashable, CustomStringConvertible {
    public var sha256: String
    public var size: Int64
    public var type: String
    public var name: String

    /// A reference whose parts are valid; nil when one is not (``problem(sha256:size:type:name:)``).
    public init?(sha256: String, size: Int64, type: String, name: String) {
        guard Self.problem(sha256: sha256, size: size, type: type, name: name) == nil else { return nil }
        self.sha256 = sha256
        self.size = size
        self.type = type
        self.name = name
    }

    /// Reads an element of an attachments field; nil when it is not one.
    public init?(element: String) {
        let parts = element.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4, let size = Int64(parts[1]), String(size) == parts[1] else { return nil }
        self.init(sha256: String(parts[0]), size: size, type: String(parts[2]), name: String(parts[3]))
    }

    /// The element's text: `"<sha256> <size> <type> <name>"`.
    public var element: String { "\(sha256) \(size) \(type) \(name)" }
    public var description: String { element }

    /// Why an element is not a valid reference, or nil when it is.
    public static func problem(element: String) -> String? {
        let parts = element.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 4 else { return "an element is not \"<sha256> <size> <type> <name>\"" }
        guard let size = Int64(parts[1]), String(size) == parts[1] else {
            return "an element's size is not a whole number of bytes"
        }
        return problem(sha256: String(parts[0]), size: size, type: String(parts[2]), name: String(parts[3]))
    }

    /// Why these parts do not make a valid reference, or nil when they do.
    public static func problem(sha256: String, size: Int64, type: String, name: String) -> String? {
        guard isSHA256(sha256) else { return "an element's hash is not 64 lower-case hex digits" }
        guard size >= 0 else { return "an element's size is negative" }
        guard isMediaType(type) else { return "an element's type is not a lower-case MIME type such as image/png" }
        guard !name.isEmpty else { return "an element's name is empty" }
        guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "/" || $0 == "\\" })
        else {
            return "an element's name holds a control character, '/' or '\\'"
        }
        return nil
    }

    /// True for 64 lower-case hex digits: a SHA-256 as this protocol writes it.
    public static func isSHA256(_ text: String) -> Bool {
        let bytes = text.utf8
        return bytes.count == 64 && bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// True for a lower-case `type/subtype` of RFC 6838's restricted name characters (no
    /// parameters), at most 100 bytes.
    public static func isMediaType(_ text: String) -> Bool {
        let parts = text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard text.utf8.count <= 100, parts.count == 2 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.first, isLowerAlphanumeric(first) else { return false }
            return part.allSatisfy { isLowerAlphanumeric($0) || "!#$&-^_.+".utf8.contains($0) }
        }
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x7A)
    }

    /// `name` shortened (keeping its extension) so that an element with the other parts is at
    /// most `limit` UTF-16 code units, the longest element a set field holds (`maxTagLength`);
    /// nil when even a one-character name does not fit. A name is also cleaned of what an element
    /// may not hold (control characters, '/', '\\' become '_'), and an empty one becomes "file".
    public static func fittedName(_ name: String, sha256: String, size: Int64, type: String, limit: Int) -> String? {
        var cleaned = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { scalar in
                    scalar.value < 0x20 || scalar.value == 0x7F || scalar == "/" || scalar == "\\" ? "_" : scalar
                }))
        if cleaned.isEmpty { cleaned = "file" }
        let room = limit - "\(sha256) \(size) \(type) ".utf16.count
        guard room >= 1 else { return nil }
        if cleaned.utf16.count <= room { return cleaned }
        var ext = ""
        if let dot = cleaned.lastIndex(of: "."), dot != cleaned.startIndex {
            let candidate = String(cleaned[dot...])
            if candidate.utf16.count < room / 2 { ext = candidate }
        }
        var stem = String(cleaned.dropLast(ext.count))
        while stem.utf16.count + ext.utf16.count > room, !stem.isEmpty { stem.removeLast() }
        let fitted = stem + ext
        return fitted.isEmpty ? nil : fitted
    }
}
