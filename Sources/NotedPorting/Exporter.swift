import Foundation
import NotedCore

/// Writes notes out as Markdown files or one JSON document (docs/import-export.md).
public enum Exporter {
    public enum Format: String, Sendable, CaseIterable {
        /// One `.md` file per note, in folders named after the note's folder, with YAML front matter.
        case markdown
        /// One `notes.json` with every field, every id and, optionally, the history.
        case json
    }

    /// A file of an export: a relative path (`/`-separated) and its bytes.
    public struct File: Sendable, Hashable {
        public var path: String
        public var data: Data
        /// A file holding the bytes instead of `data` (attachments of the server's export).
        public var source: URL?

        public init(path: String, data: Data, source: URL? = nil) {
            self.path = path
            self.data = data
            self.source = source
        }
    }

    // MARK: Markdown

    /// One file per note. The front matter holds what the body cannot: `title`, `tags`,
    /// `folder`, `pinned`, `trashed`, `created`, `updated` and `id`, written as YAML that is
    /// also JSON (double-quoted strings, flow sequences), so that any YAML reader reads it
    /// back exactly, whatever characters a title holds.
    public static func markdown(_ notes: [PortableNote]) -> [File] {
        let paths = markdownPaths(notes.map { ($0.id, $0.folder, $0.title) })
        return notes.sorted { ($0.folder ?? "", $0.title, $0.id) < ($1.folder ?? "", $1.title, $1.id) }.map { note in
            File(path: paths[note.id] ?? note.id + ".md", data: Data(markdownText(note).utf8))
        } + attachmentFiles(notes)
    }

    /// Each note's file in a Markdown export (by id), from its folder and title alone: a note's
    /// path does not need its body, so an export can name every file before it reads the notes
    /// (the server's, which streams them).
    public static func markdownPaths(_ notes: [(id: String, folder: String?, title: String)]) -> [String: String] {
        var used: Set<String> = []
        var paths: [String: String] = [:]
        for note in notes.sorted(by: { ($0.folder ?? "", $0.title, $0.id) < ($1.folder ?? "", $1.title, $1.id) }) {
            paths[note.id] = markdownPath(id: note.id, folder: note.folder, title: note.title, used: &used)
        }
        return paths
    }

    /// One note's path, unused so far (a note of the same title in the same folder takes its
    /// id's first characters); `used` gains it.
    public static func markdownPath(id: String, folder: String?, title: String, used: inout Set<String>) -> String {
        // `.` and `..` name no folder: they are left out, never followed.
        let directory = (folder ?? "").split(separator: "/")
            .filter { !$0.allSatisfy { $0 == "." } }
            .map { fileName(String($0), fallback: "Folder") }
        let base = fileName(title, fallback: "Untitled")
        var path = (directory + [base + ".md"]).joined(separator: "/")
        if used.contains(path.lowercased()) {
            path = (directory + ["\(base) (\(id.prefix(8))).md"]).joined(separator: "/")
        }
        used.insert(path.lowercased())
        return path
    }

    /// The notes' files, once each: `attachments/<sha256>/<name>` (the hash names the file in
    /// the front matter's `attachments`; the name is the one a person knows it by).
    public static func attachmentFiles(_ notes: [PortableNote]) -> [File] {
        var seen: Set<String> = []
        var files: [File] = []
        for note in notes {
            for attachment in note.attachments where seen.insert(attachment.sha256).inserted {
                files.append(File(path: attachmentPath(attachment), data: attachment.data, source: attachment.source))
            }
        }
        return files.sorted { $0.path < $1.path }
    }

    public static func attachmentPath(_ attachment: PortableAttachment) -> String {
        "attachments/\(attachment.sha256)/\(fileName(attachment.name, fallback: "file"))"
    }

    /// The elements of a note's `attachments` field for its files (names shortened to fit).
    static func elements(_ note: PortableNote) -> [String] {
        note.attachments.compactMap { $0.reference(limit: Limits().maxTagLength)?.element }
    }

    /// A note as a Markdown file: front matter, a blank line, the body.
    public static func markdownText(_ note: PortableNote) -> String {
        var lines = ["---"]
        lines.append("title: \(yamlString(note.title))")
        lines.append("tags: [\(note.tags.map(yamlString).joined(separator: ", "))]")
        if let folder = note.folder { lines.append("folder: \(yamlString(folder))") }
        lines.append("pinned: \(note.pinned)")
        lines.append("trashed: \(note.trashed)")
        if let created = note.created { lines.append("created: \(timestamp(created))") }
        if let updated = note.updated { lines.append("updated: \(timestamp(updated))") }
        lines.append("id: \(note.id)")
        if !note.attachments.isEmpty {
            lines.append("attachments: [\(elements(note).map(yamlString).joined(separator: ", "))]")
        }
        lines.append("---")
        // The body exactly as it is after one blank line (an importer drops the blank lines
        // there, so a body's own leading blank lines do not survive a round trip; nothing else
        // is lost).
        return lines.joined(separator: "\n") + "\n\n" + note.body
    }

    /// A YAML double-quoted scalar that is also a JSON string.
    static func yamlString(_ text: String) -> String {
        JSONValue.string(text).jsonString
    }

    /// A file or folder name made of `text`: no `/`, no NUL or control characters, not `.` or
    /// `..`, not starting with a dot, at most 100 characters; `fallback` when nothing is left.
    static func fileName(_ text: String, fallback: String) -> String {
        var name = String(
            text.unicodeScalars.map { scalar -> Character in
                if scalar == "/" || scalar == "\\" || scalar.properties.generalCategory == .control
                    || ":*?\"<>|".unicodeScalars.contains(scalar)
                {
                    return "-"
                }
                return Character(scalar)
            })
        name = name.trimmingCharacters(in: .whitespacesAndNewlines)
        while name.hasPrefix(".") { name.removeFirst() }
        if name.count > 100 { name = String(name.prefix(100)).trimmingCharacters(in: .whitespaces) }
        return name.isEmpty ? fallback : name
    }

    // MARK: JSON

    /// Every note with every field; `history` (note id → its revisions, oldest first) when given.
    /// The files of the notes' attachments go beside it (``attachmentFiles(_:)``).
    public static func json(
        _ notes: [PortableNote], history: [String: [PortableRevision]]? = nil, exportedAt: Date = Date()
    ) -> File {
        // The same pieces the server's export streams, so both write one format.
        let items = notes.sorted { $0.id < $1.id }.map { jsonNote($0, history: history?[$0.id]).jsonString }
        return File(
            path: "notes.json",
            data: Data((jsonStart(exportedAt: exportedAt) + items.joined(separator: ",") + jsonEnd).utf8))
    }

    /// The start of `notes.json`, before its notes (``jsonNote(_:history:)``, separated by
    /// commas) and ``jsonEnd``: for an export written as it is read.
    public static func jsonStart(exportedAt: Date = Date()) -> String {
        #"{"exportedAt":"# + JSONValue.string(timestamp(exportedAt)).jsonString + #","format":"noted-export","notes":["#
    }

    /// The end of `notes.json`, after its notes.
    public static let jsonEnd = #"],"version":1}"#

    /// One note of `notes.json`: every field, its attachments, and `history` when given.
    public static func jsonNote(_ note: PortableNote, history revisions: [PortableRevision]? = nil) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": .string(note.id), "title": .string(note.title), "body": .string(note.body),
            "tags": .array(note.tags.map(JSONValue.string)), "folder": note.folder.map(JSONValue.string) ?? .null,
            "pinned": .bool(note.pinned), "trashed": .bool(note.trashed),
            "created": note.created.map { .string(timestamp($0)) } ?? .null,
            "updated": note.updated.map { .string(timestamp($0)) } ?? .null,
        ]
        if !note.attachments.isEmpty {
            object["attachments"] = .array(
                note.attachments.map { attachment in
                    [
                        "sha256": .string(attachment.sha256), "size": .int(attachment.size),
                        "type": .string(attachment.type),
                        "name": .string(attachment.name), "path": .string(attachmentPath(attachment)),
                    ]
                })
        }
        if let revisions {
            object["history"] = .array(
                revisions.map { revision in
                    [
                        "rev": .int(revision.rev), "updated": .string(revision.updated),
                        "conflict": .bool(revision.conflict),
                        "title": .string(revision.title), "body": .string(revision.body),
                        "tags": .array(revision.tags.map(JSONValue.string)),
                    ]
                })
        }
        return .object(object)
    }

    // MARK: Writing

    /// Writes `files` to `path`: a `.zip` archive when the path ends so, else a new folder.
    /// Nothing is left half-written: the export is made beside `path` and renamed into place
    /// at the end. An existing file, or a folder that is not empty, is refused.
    public static func write(_ files: [File], to path: String) throws {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: path, isDirectory: &isDirectory) {
            let empty = isDirectory.boolValue && ((try? manager.contentsOfDirectory(atPath: path))?.isEmpty ?? false)
            guard empty else { throw ExportError("\(path) already exists; choose a new name (nothing was written)") }
            try? manager.removeItem(atPath: path)
        }
        let parent = (path as NSString).deletingLastPathComponent
        let staging =
            (parent.isEmpty ? "." : parent)
            + "/.\((path as NSString).lastPathComponent).partial-\(UUID().uuidString.prefix(8))"
        defer { try? manager.removeItem(atPath: staging) }
        do {
            if path.lowercased().hasSuffix(".zip") {
                try Zip.write(files, to: staging)
            } else {
                for file in files {
                    let target = staging + "/" + file.path
                    try manager.createDirectory(
                        atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    if let source = file.source {
                        try manager.copyItem(at: source, to: URL(fileURLWithPath: target))
                    } else {
                        try file.data.write(to: URL(fileURLWithPath: target))
                    }
                }
                if files.isEmpty { try manager.createDirectory(atPath: staging, withIntermediateDirectories: true) }
            }
            try manager.moveItem(atPath: staging, toPath: path)
        } catch let error as ExportError {
            throw error
        } catch {
            throw ExportError("cannot write \(path): \(error.localizedDescription)")
        }
    }

    /// `files` as a zip archive in memory (what a server sends for "Download all notes").
    /// A zip archive of `files` written to `path` (a new file), entries read one piece at a time
    /// (an attachment's from its `source` file): memory stays small whatever the export's size.
    public static func zip(_ files: [File], to path: String) throws {
        do {
            try Zip.write(files, to: path)
        } catch let error as ExportError {
            throw error
        } catch {
            throw ExportError("cannot make the zip archive: \(error)")
        }
    }

    public static func zip(_ files: [File]) throws -> Data {
        do {
            return try Zip.data(files)
        } catch let error as ExportError {
            throw error
        } catch {
            throw ExportError("cannot make the zip archive: \(error)")
        }
    }

    static func timestamp(_ date: Date) -> String {
        Timestamp.format(date)
    }
}

/// Why an export could not be written, in a sentence for the person who asked.
public struct ExportError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
