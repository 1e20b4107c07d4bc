import ArgumentParser
import Foundation
import NotedClient
import NotedCore
import NotedPorting

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write every note (the trash too) to a folder or a .zip, as Markdown files or JSON.",
        discussion: """
            Markdown: one .md file per note, in folders named after the note's folder, with YAML front matter \
            (title, tags, folder, pinned, trashed, created, updated, id). JSON: notes.json with every field and id; \
            --with-history adds each note's kept revisions from the server. Works offline (from this device's copy) \
            except --with-history. PATH must not exist yet (or be an empty folder); nothing is left half-written.
            """)
    @OptionGroup var options: GlobalOptions
    @Option(help: "markdown or json.") var format: Exporter.Format = .markdown
    @Flag(name: .customLong("with-history"), help: "JSON only: each note's revisions kept on the server.")
    var withHistory = false
    @Argument(help: "A new folder, or a file ending in .zip.") var path: String

    func validate() throws {
        if withHistory && format != .json { throw ValidationError("--with-history goes with --format json") }
        guard !path.isEmpty else { throw ValidationError("give the folder or .zip file to write") }
    }

    func run() async throws {
        let client = try await options.openClient()
        let live = try await cli { try await client.list(NoteFilter(trashed: false)) }
        let trashed = try await cli { try await client.list(NoteFilter(trashed: true)) }
        let all = live + trashed
        // The notes' files: from this device, else from the server; one neither has is named.
        var notes: [PortableNote] = []
        var missing: [String] = []
        for note in all {
            var portable = PortableNote(note)
            for reference in note.attachments.compactMap(AttachmentReference.init(element:)) {
                do {
                    let file = try await client.attachmentData(reference.sha256)
                    portable.attachments.append(
                        PortableAttachment(name: reference.name, type: reference.type, data: file.data))
                } catch {
                    missing.append("\(note.title.isEmpty ? note.id : note.title): \(reference.name)")
                }
            }
            notes.append(portable)
        }
        var history: [String: [PortableRevision]]?
        if withHistory {
            guard !options.offline, client.tokens != nil else {
                throw CLIError("--with-history needs the server and a sign-in")
            }
            var kept: [String: [PortableRevision]] = [:]
            // A note never synced has no history on the server.
            for note in all where note.rev > 0 {
                let summaries = try await cli { try await client.history(note.id) }
                var revisions: [PortableRevision] = []
                for summary in summaries {
                    let fields = try await cli {
                        try await client.revision(note.id, rev: summary.rev, conflict: summary.conflict)
                    }
                    revisions.append(
                        PortableRevision(
                            rev: summary.rev, updated: summary.updatedAt, conflict: summary.conflict,
                            title: fields.title, body: fields.body, tags: fields.tags))
                }
                kept[note.id] = revisions
            }
            history = kept
        }
        let files =
            format == .markdown
            ? Exporter.markdown(notes) : [Exporter.json(notes, history: history)] + Exporter.attachmentFiles(notes)
        do {
            try Exporter.write(files, to: path)
        } catch let error as ExportError {
            throw CLIError(error.description)
        }
        for name in missing {
            FileHandle.standardError.write(
                Data(
                    "not exported (this device does not have the file and the server could not be asked): \(name)\n"
                        .utf8))
        }
        if options.json {
            printJSON([
                "exported": .int(Int64(notes.count)), "path": .string(path), "format": .string(format.rawValue),
                "attachments": .int(Int64(Set(notes.flatMap { $0.attachments.map(\.sha256) }).count)),
                "missing": .array(missing.map(JSONValue.string)),
            ])
        } else {
            print("exported \(notes.count) note(s) to \(path)")
        }
    }
}

extension Exporter.Format: ExpressibleByArgument {}

extension PortableNote {
    init(_ note: Note) {
        self.init(
            id: note.id, title: note.title, body: note.body, tags: note.tags, folder: note.folder, pinned: note.pinned,
            trashed: note.trashed, created: note.createdAt, updated: note.updatedAt)
    }
}
