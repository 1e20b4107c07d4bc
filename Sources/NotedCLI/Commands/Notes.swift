import ArgumentParser
import Foundation
import NotedClient
import NotedCore
import Subprocess

struct New: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a note and print its id.",
        discussion: "Without --body, the body is read from standard input when it is not a terminal.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "The title.") var title: String = ""
    @Option(help: "The body.") var body: String?
    @Option(help: "A tag; repeatable.") var tag: [String] = []
    @Option(help: "The folder.") var folder: String?
    @Flag(help: "Pin the note.") var pin = false
    @Option(help: "A shared space (its name or id) to create the note in; default: your personal space.")
    var space: String?

    func run() async throws {
        var text = body
        if text == nil, isatty(STDIN_FILENO) == 0 {
            text = try readStandardInput()
        }
        let client = try await options.openClient()
        var tags: [String] = []
        for value in tag where !tags.contains(value) { tags.append(value) }
        let fields = NoteFields(title: title, body: text ?? "", tags: tags, folder: folder, pinned: pin)
        var shared: String?
        if let space, case .shared(let id) = try await resolvedSpace(client, space, options: options) { shared = id }
        let note = try await cli { try await client.create(fields, space: shared) }
        await options.syncAfterChange(client)
        if options.json {
            printJSON(try await cli { try await client.note(note.id) }?.json ?? note.json)
        } else {
            print(note.id)
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List notes: pinned first, then the most recently updated (or created).")
    @OptionGroup var options: GlobalOptions
    @Option(help: "Only notes in this folder.") var folder: String?
    @Option(help: "Only notes with this tag.") var tag: String?
    @Flag(help: "List the trash instead.") var trashed = false
    @Option(
        help:
            "updated (the latest changed first) or created (the latest written first); an imported note's dates are its own."
    )
    var sort: NoteFilter.Order = .updated
    @Option(help: "Only notes in this space: a shared space's name or id, or \"personal\".") var space: String?

    func run() async throws {
        let client = try await options.openClient()
        var scope: RecordQuery.SpaceScope?
        if let space { scope = try await resolvedSpace(client, space, options: options) }
        let notes = try await cli {
            try await client.list(NoteFilter(folder: folder, tag: tag, trashed: trashed, order: sort, space: scope))
        }
        printNotes(notes, json: options.json, spaces: await spaceNames(client))
    }
}

/// The names of the shared spaces this device syncs, by id.
func spaceNames(_ client: NotedClient) async -> [String: String] {
    Dictionary(((try? await client.store.spaces()) ?? []).map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
}

/// The space a name or id names on this device: "personal" (any case) for the personal space,
/// else a shared space by id or name (any case). A space this device does not know yet (joined
/// on another device) is looked for again after a sync, unless offline.
func resolvedSpace(_ client: NotedClient, _ name: String, options: GlobalOptions) async throws
    -> RecordQuery.SpaceScope
{
    if name.lowercased() == "personal" { return .personal }
    func lookUp() async throws -> RecordQuery.SpaceScope? {
        let spaces = try await cli { try await client.store.spaces() }
        if let space = spaces.first(where: { $0.id == name }) { return .shared(space.id) }
        let named = spaces.filter { $0.name.lowercased() == name.lowercased() }
        guard named.count <= 1 else {
            throw CLIError("more than one space is called \(name); give its id (see `noted spaces`)")
        }
        return named.first.map { .shared($0.id) }
    }
    if let found = try await lookUp() { return found }
    if !options.offline, client.tokens != nil {
        await client.startSync()
        _ = await client.waitUntilSynced(timeout: .seconds(10), failWhenOffline: true)
        await client.stopSync()
        if let found = try await lookUp() { return found }
    }
    throw CLIError(
        "no space called \(name) on this device (see `noted spaces`; `noted sync` brings spaces joined elsewhere)")
}

/// The note an id or unique id prefix names, or a clear error.
func resolvedNote(_ client: NotedClient, _ id: String) async throws -> Note {
    try await cli { () async throws -> Note in
        let full = try await client.resolve(id)
        guard let note = try await client.note(full) else { throw NotedClientError(.notFound, "no note \(id)") }
        return note
    }
}

/// Prints notes, a shared space's with its name in brackets (`spaces`: names by id).
func printNotes(_ notes: [Note], json: Bool, spaces: [String: String] = [:]) {
    if json {
        printJSON(.array(notes.map(\.json)))
        return
    }
    for note in notes {
        let marks = (note.pinned ? "*" : " ") + (note.refusal != nil ? "!" : note.pending ? "~" : " ")
        let title =
            note.title.isEmpty ? String(note.body.prefix(40)).replacingOccurrences(of: "\n", with: " ") : note.title
        let tags = note.tags.isEmpty ? "" : "  " + note.tags.map { "#" + $0 }.joined(separator: " ")
        let refusal = note.refusal.map { "  (not synced: \($0))" } ?? ""
        let space = note.space.map { "  [\(spaces[$0] ?? "a space you left")]" } ?? ""
        print(TerminalText.clean("\(note.id.prefix(8)) \(marks) \(title)\(tags)\(space)\(refusal)"))
    }
}

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a note.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String

    func run() async throws {
        let client = try await options.openClient()
        let note = try await resolvedNote(client, id)
        if options.json {
            printJSON(note.json)
            return
        }
        print("id:      \(note.id)")
        print(TerminalText.clean("title:   \(note.title)"))
        if !note.tags.isEmpty { print(TerminalText.clean("tags:    \(note.tags.joined(separator: ", "))")) }
        if let folder = note.folder { print(TerminalText.clean("folder:  \(folder)")) }
        let attached = note.attachments.compactMap(AttachmentReference.init(element:))
        if !attached.isEmpty {
            print(
                TerminalText.clean(
                    "files:   \(attached.map { "\($0.name) (\($0.size) bytes)" }.joined(separator: ", "))"))
        }
        var flags: [String] = []
        if note.pinned { flags.append("pinned") }
        if note.trashed { flags.append("in the trash") }
        if note.pending { flags.append("not yet synced") }
        if let refusal = note.refusal {
            flags.append(
                "refused by the server (\(refusal)): edit it, or `noted discard \(note.id.prefix(8))` for the server's version"
            )
        }
        if !flags.isEmpty { print("state:   \(flags.joined(separator: ", "))") }
        print("rev:     \(note.rev)   updated \(Timestamp.format(note.updatedAt))")
        print("")
        print(TerminalText.clean(note.body))
    }
}

struct Edit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Edit a note.",
        discussion:
            "Without --title/--body/--append/--body-stdin, opens $EDITOR on the note: the first line is the title, the body follows a blank line."
    )
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    @Option(help: "The new title.") var title: String?
    @Option(help: "The new body.") var body: String?
    @Option(help: "Text appended to the body (on a new line).") var append: String?
    @Flag(name: .customLong("body-stdin"), help: "Read the new body from standard input.") var bodyStdin = false

    func validate() throws {
        if [body != nil, append != nil, bodyStdin].filter({ $0 }).count > 1 {
            throw ValidationError("give only one of --body, --append and --body-stdin")
        }
    }

    func run() async throws {
        let client = try await options.openClient()
        let full = try await cli { try await client.resolve(id) }
        var newBody = body
        if bodyStdin { newBody = try readStandardInput() }
        let appended = append
        var newTitle = title
        if title == nil && body == nil && append == nil && !bodyStdin {
            guard let note = try await cli({ try await client.note(full) }) else { throw CLIError("no note \(id)") }
            (newTitle, newBody) = try await runEditor(title: note.title, body: note.body)
        }
        let (finalTitle, finalBody) = (newTitle, newBody)
        try await cli {
            try await client.update(full) { fields in
                if let finalTitle { fields.title = finalTitle }
                if let finalBody { fields.body = finalBody }
                if let appended {
                    fields.body += (fields.body.isEmpty || fields.body.hasSuffix("\n") ? "" : "\n") + appended
                }
            }
        }
        await options.syncAfterChange(client)
    }

    private func runEditor(title: String, body: String) async throws -> (String, String) {
        let environment = ProcessInfo.processInfo.environment
        guard
            let editor = environment["VISUAL"].flatMap({ $0.isEmpty ? nil : $0 })
                ?? environment["EDITOR"].flatMap({ $0.isEmpty ? nil : $0 })
        else {
            throw CLIError("set $EDITOR, or give --title, --body, --append or --body-stdin")
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("noted-\(UUID().uuidString).md")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data((title + "\n\n" + body).utf8).write(to: file)
        // The editor has this terminal: standard input, output and error are ours.
        let status = try await Subprocess.run(
            .path("/bin/sh"), arguments: ["-c", editor + " \"$1\"", "noted-editor", file.path],
            input: .currentStandardInput, output: .currentStandardOutput, error: .currentStandardError
        ).terminationStatus
        guard status.isSuccess else { throw CLIError("the editor \(Self.describe(status)); nothing saved") }
        guard let text = String(data: try Data(contentsOf: file), encoding: .utf8) else {
            throw CLIError("the edited file is not UTF-8; nothing saved")
        }
        var lines = text.components(separatedBy: "\n")
        let newTitle = lines.isEmpty ? "" : lines.removeFirst()
        if lines.first == "" { lines.removeFirst() }
        var newBody = lines.joined(separator: "\n")
        if newBody.hasSuffix("\n") && !body.hasSuffix("\n") { newBody.removeLast() }
        return (newTitle, newBody)
    }

    private static func describe(_ status: TerminationStatus) -> String {
        switch status {
        case .exited(let code): return "exited with status \(code)"
        case .signaled(let signal): return "was ended by signal \(signal)"
        }
    }
}

struct Tag: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add and remove tags: noted tag ID +work -home.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    @Argument(parsing: .allUnrecognized, help: "+TAG to add, -TAG to remove.") var changes: [String] = []

    func run() async throws {
        var add: [String] = []
        var remove: [String] = []
        guard !changes.isEmpty else { throw ValidationError("give +TAG or -TAG") }
        for change in changes {
            guard let sign = change.first, sign == "+" || sign == "-", change.count > 1 else {
                throw ValidationError("\"\(change)\": write +TAG to add or -TAG to remove")
            }
            if sign == "+" { add.append(String(change.dropFirst())) } else { remove.append(String(change.dropFirst())) }
        }
        let client = try await options.openClient()
        let full = try await cli { try await client.resolve(id) }
        let (toAdd, toRemove) = (add, remove)
        try await cli { try await client.tag(full, add: toAdd, remove: toRemove) }
        await options.syncAfterChange(client)
    }
}

/// The shape of pin, unpin, trash and restore: one note, one change.
protocol SimpleNoteCommand: AsyncParsableCommand {
    var options: GlobalOptions { get }
    var id: String { get }
    func apply(_ client: NotedClient, _ id: String) async throws
}

extension SimpleNoteCommand {
    func run() async throws {
        let client = try await options.openClient()
        let full = try await cli { try await client.resolve(id) }
        try await cli { try await apply(client, full) }
        await options.syncAfterChange(client)
    }
}

struct Pin: SimpleNoteCommand {
    static let configuration = CommandConfiguration(abstract: "Pin a note to the top of the list.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    func apply(_ client: NotedClient, _ id: String) async throws { try await client.setPinned(id, true) }
}

struct Unpin: SimpleNoteCommand {
    static let configuration = CommandConfiguration(abstract: "Unpin a note.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    func apply(_ client: NotedClient, _ id: String) async throws { try await client.setPinned(id, false) }
}

struct Trash: SimpleNoteCommand {
    static let configuration = CommandConfiguration(abstract: "Move a note to the trash.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    func apply(_ client: NotedClient, _ id: String) async throws { try await client.setTrashed(id, true) }
}

struct Restore: SimpleNoteCommand {
    static let configuration = CommandConfiguration(abstract: "Take a note out of the trash.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    func apply(_ client: NotedClient, _ id: String) async throws { try await client.setTrashed(id, false) }
}

struct Purge: SimpleNoteCommand {
    static let configuration = CommandConfiguration(abstract: "Delete a note for good, on every device.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    func apply(_ client: NotedClient, _ id: String) async throws { try await client.purge(id) }
}

struct Discard: SimpleNoteCommand {
    static let configuration = CommandConfiguration(
        abstract: "Give up this device's unsynced edits of a note: the server's version returns.",
        discussion:
            "For a note the server refused (marked ! in `noted list`), or edits you do not want to keep. A note the server never had is removed from this device."
    )
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    func apply(_ client: NotedClient, _ id: String) async throws { try await client.discardLocalChanges(id) }
}

struct Copy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a note to your personal space and print the copy's id.",
        discussion:
            "For a note of a space you are no longer in (kept on this device because it had edits the server never took): the copy syncs, the original leaves this device."
    )
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String

    func run() async throws {
        let client = try await options.openClient()
        let full = try await cli { try await client.resolve(id) }
        let copy = try await cli { try await client.copyToPersonalSpace(full) }
        await options.syncAfterChange(client)
        if options.json { printJSON(copy.json) } else { print(copy.id) }
    }
}

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Search titles and bodies (every word, as a prefix).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The words to look for.") var query: String

    func run() async throws {
        let client = try await options.openClient()
        let notes = try await cli { try await client.search(query) }
        printNotes(notes, json: options.json, spaces: await spaceNames(client))
    }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List a note's revisions on the server, or restore one.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    @Option(help: "Make the note's content that of this revision.") var restore: Int64?
    @Option(help: "Print this revision's content.") var show: Int64?
    @Flag(help: "With --show: the conflict revision (the version a merge could not place).") var conflict = false

    func run() async throws {
        guard !options.offline else { throw CLIError("history needs the server; drop --offline") }
        let client = try await options.openClient()
        guard client.server != nil, client.tokens != nil else {
            throw CLIError("history needs a server and a sign-in: run `noted login`")
        }
        let full = try await cli { try await client.resolve(id) }
        if let restore {
            guard restore >= 1 else { throw ValidationError("--restore takes a revision number >= 1") }
            try await cli { try await client.restore(full, rev: restore) }
            await options.syncAfterChange(client)
            print("restored revision \(restore)")
            return
        }
        if let show {
            guard show >= 1 else { throw ValidationError("--show takes a revision number >= 1") }
            let conflict = conflict
            let fields = try await cli { try await client.revision(full, rev: show, conflict: conflict) }
            if options.json {
                printJSON(.object(fields.json))
            } else {
                print(TerminalText.clean("title:   \(fields.title)"))
                if !fields.tags.isEmpty { print(TerminalText.clean("tags:    \(fields.tags.joined(separator: ", "))")) }
                print("")
                print(TerminalText.clean(fields.body))
            }
            return
        }
        let revisions = try await cli { try await client.history(full) }
        if options.json {
            printJSON(
                .array(
                    revisions.map {
                        [
                            "rev": .int($0.rev), "updatedAt": .string($0.updatedAt),
                            "device": $0.device.map(JSONValue.string) ?? .null,
                            "conflict": .bool($0.conflict), "size": $0.size.map(JSONValue.int) ?? .null,
                            "author": $0.author.map(JSONValue.string) ?? .null,
                        ]
                    }))
            return
        }
        print(TerminalText.clean(HistoryListing(revisions: revisions).text), terminator: "")
    }
}

/// `noted history ID` as text: the revisions grouped by local day, newest first, each with its
/// time, revision number and size ("Today", "Yesterday", then dates).
struct HistoryListing {
    var revisions: [RevisionSummary]
    var now = Date()
    var calendar = Calendar.current

    var text: String {
        var out = ""
        var lastDay: Date?
        let timeFormat = DateFormatter()
        timeFormat.calendar = calendar
        timeFormat.timeZone = calendar.timeZone
        timeFormat.dateFormat = "HH:mm"
        let sorted = revisions.enumerated().sorted { a, b in
            let (x, y) = (
                Timestamp.parse(a.element.updatedAt) ?? .distantPast,
                Timestamp.parse(b.element.updatedAt) ?? .distantPast
            )
            return x != y ? x > y : a.offset > b.offset
        }.map(\.element)
        for revision in sorted {
            guard let at = Timestamp.parse(revision.updatedAt) else {
                out += "rev \(revision.rev)\t(no date)\n"
                continue
            }
            let day = calendar.startOfDay(for: at)
            if day != lastDay {
                if lastDay != nil { out += "\n" }
                out += label(day) + "\n"
                lastDay = day
            }
            var line = "  \(timeFormat.string(from: at))  rev \(revision.rev)"
            if let size = revision.size { line += "  \(Self.size(size))" }
            if revision.conflict { line += "  conflict" }
            if let author = revision.author { line += "  by \(author)" }
            if let device = revision.device { line += "  device \(device.prefix(8))" }
            out += line + "\n"
        }
        return out
    }

    func label(_ day: Date) -> String {
        let today = calendar.startOfDay(for: now)
        if day == today { return "Today" }
        if let yesterday = calendar.date(byAdding: .day, value: -1, to: today), day == yesterday { return "Yesterday" }
        let format = DateFormatter()
        format.calendar = calendar
        format.timeZone = calendar.timeZone
        format.locale = Locale(identifier: "en_US_POSIX")
        format.dateFormat = "EEEE d MMMM yyyy"
        return format.string(from: day)
    }

    /// Bytes as people read them (1 KB = 1000 B, as the web app shows them).
    static func size(_ bytes: Int64) -> String {
        if bytes < 1000 { return "\(bytes) B" }
        let units = ["KB", "MB", "GB", "TB"]
        var value = Double(bytes) / 1000
        var unit = 0
        while value >= 999.95 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return "\(String(format: "%.1f", value)) \(units[unit])"
    }
}

extension NoteFilter.Order: ExpressibleByArgument {}
