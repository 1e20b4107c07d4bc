import ArgumentParser
import Foundation
import NotedClient
import NotedCore
import NotedPorting

/// `noted attach ID FILE`: a file attached to a note, kept here at once and synced.
struct Attach: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Attach a file to a note (kept here at once, uploaded when the server is reachable).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    @Argument(help: "The file to attach.") var file: String
    @Option(help: "The name the note shows; the file's name by default.") var name: String?
    @Option(help: "The file's MIME type, e.g. image/png; guessed from its extension by default.") var type: String?

    func run() async throws {
        let url = URL(fileURLWithPath: file)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw CLIError("no such file: \(file)")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw CLIError("cannot read \(file): \(error.localizedDescription)")
        }
        let mediaType = type?.lowercased() ?? PortableAttachment.guessType(url.lastPathComponent)
        guard AttachmentReference.isMediaType(mediaType) else {
            throw CLIError("--type is a MIME type such as image/png, in lower case")
        }
        let client = try await options.openClient()
        if !options.offline, !options.noSync, let limit = try? await client.maxAttachmentBytes(),
            Int64(data.count) > limit
        {
            throw CLIError("\(file) is \(data.count) bytes; the server takes files of at most \(limit) bytes")
        }
        let full = try await cli { try await client.resolve(id) }
        let label = name ?? url.lastPathComponent
        let reference = try await cli { try await client.attach(full, data: data, name: label, type: mediaType) }
        if options.json {
            printJSON(reference.json)
        } else {
            print(
                "attached \(reference.name) (\(reference.size) bytes, \(reference.type)) to \(full.prefix(8)); in the body: \(Self.markdown(reference))"
            )
        }
        guard !options.noSync, !options.offline else { return }
        await client.startSync()
        // A large file takes a while to go up; the change naming it follows.
        let synced = await client.waitUntilSynced(
            timeout: .seconds(Int64(60 + data.count / 200_000)), failWhenOffline: true)
        await client.stopSync()
        if !synced {
            let reason = await client.attachmentUploadError().map { " (\($0))" } ?? ""
            FileHandle.standardError.write(
                Data("not uploaded yet\(reason): kept here, it goes with the next `noted sync`\n".utf8))
        }
    }

    /// The Markdown that shows the attachment in a note's body.
    static func markdown(_ reference: AttachmentReference) -> String {
        let label = reference.name.replacingOccurrences(of: "]", with: "\\]")
        return (reference.type.hasPrefix("image/") ? "!" : "") + "[\(label)](attachment:\(reference.sha256))"
    }
}

/// `noted attachments ID`: the files attached to a note.
struct Attachments: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the files attached to a note.")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String

    func run() async throws {
        let client = try await options.openClient()
        let note = try await resolvedNote(client, id)
        let references = note.attachments.compactMap(AttachmentReference.init(element:))
        if options.json {
            printJSON(.array(references.map(\.json)))
            return
        }
        if references.isEmpty { print("no attachments") }
        for reference in references {
            print(
                "\(reference.sha256.prefix(12))  \(String(reference.size).leftPadded(10))  \(reference.type.padded(24))  \(reference.name)"
            )
        }
    }
}

/// `noted fetch ID NAME`: an attachment's file, from here or from the server.
struct Fetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Save a note's attachment to a file (-o - writes it to standard output).")
    @OptionGroup var options: GlobalOptions
    @Argument(help: "The note's id or a unique prefix of it.") var id: String
    @Argument(help: "The attachment's name, or a prefix of its SHA-256.") var name: String
    @Option(name: .shortAndLong, help: "Where to write it; the attachment's name in this directory by default.")
    var output: String?
    @Flag(help: "Replace the output file when it exists.") var force = false

    func run() async throws {
        let client = try await options.openClient()
        let note = try await resolvedNote(client, id)
        let references = note.attachments.compactMap(AttachmentReference.init(element:))
        var matches = references.filter { $0.name == name }
        if matches.isEmpty, name.count >= 4, name.allSatisfy(\.isHexDigit) {
            matches = references.filter { $0.sha256.hasPrefix(name.lowercased()) }
        }
        guard let reference = matches.first else {
            let known = references.map(\.name).joined(separator: ", ")
            throw CLIError(
                "no attachment \"\(name)\" on this note" + (known.isEmpty ? " (it has none)" : "; it has: \(known)"))
        }
        guard Set(matches.map(\.sha256)).count == 1 else {
            throw CLIError(
                "several attachments are named \"\(name)\": give a prefix of the SHA-256 (noted attachments \(id))")
        }
        let file = try await cli { try await client.attachmentData(reference.sha256) }
        if output == "-" {
            FileHandle.standardOutput.write(file.data)
            return
        }
        let path = output ?? TerminalText.safeFileName(reference.name, sha256: reference.sha256)
        if FileManager.default.fileExists(atPath: path), !force {
            throw CLIError("\(path) exists; give -o FILE or --force")
        }
        do {
            try file.data.write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CLIError("cannot write \(path): \(error.localizedDescription)")
        }
        if !options.json { print("wrote \(file.data.count) bytes to \(path)") }
    }
}

extension String {
    func padded(_ width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
