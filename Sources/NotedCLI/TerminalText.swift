import Foundation

/// Text from notes (anyone's: an imported export, a shared note) as the CLI prints it to a
/// terminal: control characters other than newline and tab (C0, DEL and C1, escape sequences
/// among them: a title could set the terminal's title or write the clipboard with OSC 52) are
/// shown as U+FFFD; to a pipe or a file the text goes as it is (security-3 L3).
enum TerminalText {
    static let isTerminal = isatty(STDOUT_FILENO) == 1

    static func clean(_ text: String) -> String {
        guard isTerminal else { return text }
        return sanitized(text)
    }

    static func sanitized(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.map { isControl($0) ? "\u{FFFD}" : $0 }))
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }

    /// The name a file fetched from a note is written under when none is given: its last path
    /// component, without controls or leading dots (`.bash_login` would be picked up by a
    /// shell), or `attachment-<sha256 prefix>` when nothing is left.
    static func safeFileName(_ name: String, sha256: String) -> String {
        var base = String(name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last ?? "")
        base = String(
            String.UnicodeScalarView(base.unicodeScalars.filter { !isControl($0) && $0 != "\n" && $0 != "\t" }))
        while base.hasPrefix(".") { base.removeFirst() }
        base = base.trimmingCharacters(in: .whitespaces)
        return base.isEmpty ? "attachment-\(sha256.prefix(12))" : base
    }
}
