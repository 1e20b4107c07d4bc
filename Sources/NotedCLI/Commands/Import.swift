import ArgumentParser
import Foundation
import NotedClient
import NotedCore
import NotedPorting

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Import notes from Simplenote, Evernote, Google Keep, Standard Notes, Joplin or a folder of Markdown.",
        discussion: """
            PATH is the export as the app wrote it: a folder, a .zip, a .jex, or one file (.enex, notes.json). The \
            format is recognised unless --from names it. Works offline: the notes go into this device's copy and sync \
            like any edit. Safe to repeat: the same export again leaves the notes it made, never duplicates them. A \
            note already here with other content (edited since, or another export naming its id) is kept as it is and \
            the imported version added beside it, once; --replace overwrites it instead. A note that cannot be read \
            is skipped and listed with its reason; the others are imported.
            """)
    @OptionGroup var options: GlobalOptions
    @Option(help: "The app the export is from: \(Importer.Format.allCases.map(\.rawValue).joined(separator: ", ")).")
    var from: Importer.Format?
    @Flag(name: .customLong("dry-run"), help: "Write nothing; print what would happen.") var dryRun = false
    @Flag(
        help:
            "Overwrite a note already here that the export holds with other content (its old text stays in history), instead of adding the export's version beside it."
    )
    var replace = false
    @Argument(help: "The export: a folder, .zip, .jex, .enex or .json.") var path: String

    func run() async throws {
        let result: Importer.Result
        do {
            result = try Importer.read(try ImportSource.load(path, budget: Self.budget()), as: from)
        } catch let error as ImportError {
            throw CLIError(error.description)
        }
        let client = try await options.openClient()
        var files: [String: (data: Data, type: String)] = [:]
        let notes = result.notes.map { item in
            for attachment in item.note.attachments { files[attachment.sha256] = (attachment.data, attachment.type) }
            return (
                id: item.note.id,
                fields: NoteFields(
                    title: item.note.title, body: item.note.body,
                    tags: Array(NSOrderedSet(array: item.note.tags)).compactMap { $0 as? String },
                    folder: item.note.folder, pinned: item.note.pinned, trashed: item.note.trashed,
                    created: item.note.created, modified: item.note.updated,
                    attachments: item.note.attachments.compactMap {
                        $0.reference(limit: Limits().maxTagLength)?.element
                    }),
                copyID: Importer.copyID(of: item.note)
            )
        }
        let bar = ProgressBar(total: notes.count, enabled: isatty(STDERR_FILENO) == 1 && !options.json)
        let found = files
        let outcomes = try await cli {
            try await client.importNotes(notes, files: found, replace: replace, dryRun: dryRun) { bar.show($0) }
        }
        bar.finish()
        var skipped = result.skipped.map { ["source": JSONValue.string($0.source), "reason": .string($0.reason)] }
        // Skips the importer counted beyond those it listed.
        let unlisted = result.skippedCount - result.skipped.count
        var counts: [String: Int] = ["created": 0, "updated": 0, "unchanged": 0, "copied": 0]
        for (item, outcome) in zip(result.notes, outcomes) {
            switch outcome {
            case .created: counts["created", default: 0] += 1
            case .updated: counts["updated", default: 0] += 1
            case .copied: counts["copied", default: 0] += 1
            case .unchanged: counts["unchanged", default: 0] += 1
            case .refused(let reason): skipped.append(["source": .string(item.source), "reason": .string(reason)])
            }
        }
        if !dryRun, counts["created", default: 0] + counts["updated", default: 0] + counts["copied", default: 0] > 0 {
            await options.syncAfterChange(client)
        }
        if options.json {
            printJSON([
                "format": .string(result.format.rawValue), "dryRun": .bool(dryRun),
                "imported": .int(Int64(counts["created"] ?? 0)), "updated": .int(Int64(counts["updated"] ?? 0)),
                "unchanged": .int(Int64(counts["unchanged"] ?? 0)), "copied": .int(Int64(counts["copied"] ?? 0)),
                "skipped": .array(skipped.map(JSONValue.object)),
                "skipped_count": .int(Int64(skipped.count + unlisted)),
            ])
            return
        }
        let verb = dryRun ? "would import" : "imported"
        print(
            "\(verb) \(counts["created"] ?? 0) new note(s) from \(result.format.rawValue), \(dryRun ? "would update" : "updated") \(counts["updated"] ?? 0), "
                + "\(counts["unchanged"] ?? 0) unchanged, \(skipped.count + unlisted) skipped")
        if let copied = counts["copied"], copied > 0 {
            print(
                "\(dryRun ? "would add" : "added") \(copied) as new note(s) beside notes here with other content (--replace overwrites them instead)"
            )
        }
        for item in skipped.prefix(50) {
            print("  skipped \(item["source"]?.stringValue ?? ""): \(item["reason"]?.stringValue ?? "")")
        }
        if skipped.count + unlisted > 50 {
            print("  … and \(skipped.count + unlisted - 50) more (--json lists the first \(skipped.count))")
        }
    }

    /// What reading an export may spend on this machine: up to 4 GiB of memory (twice the
    /// largest export read, so that a small zip that unpacks to far more is stopped before it
    /// fills memory), and the first 10,000 skipped items listed; no deadline (Ctrl-C stops it).
    static func budget() -> ImportBudget {
        ImportBudget(memoryBytes: 2 * ImportSource.maxBytes, seconds: nil, maxSkipped: 10_000)
    }
}

extension Importer.Format: ExpressibleByArgument {}

/// A one-line progress bar on standard error, for a terminal.
final class ProgressBar: @unchecked Sendable {
    // @unchecked: `show` is called from one task at a time (after each batch), under the lock.
    private let total: Int
    private let enabled: Bool
    private let lock = NSLock()

    init(total: Int, enabled: Bool) {
        self.total = total
        self.enabled = enabled && total > 0
    }

    func show(_ done: Int) {
        guard enabled else { return }
        lock.withLock {
            let width = 30
            let filled = total == 0 ? width : min(width, done * width / total)
            let line =
                "\r[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
                + "] \(done)/\(total)"
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
