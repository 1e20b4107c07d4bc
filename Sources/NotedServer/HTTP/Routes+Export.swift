import Foundation
import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import NotedCore
import NotedPorting

/// `GET /v1/export`, "Download all notes": every note of the account (the trash too) as the
/// CLI's `noted export` writes it, in one zip (docs/import-export.md), made as it is sent
/// (security-3 H4): the notes are read a page at a time, attachments go straight from the blob
/// store into the zip, nothing is written to disk, and what the server holds for one export is
/// a page of notes, the names of its files and a buffer, whatever the account holds.
extension Routes {
    /// Exports being written at once on a node; a user has one at a time.
    static let exportsAtOnce = 4
    /// The most one write of the answer may wait for the client to read (a client that reads a
    /// few bytes a minute is dropped, not kept with its export's resources).
    static let exportWriteSeconds: Int64 = 60
    /// Bytes gathered before they are written (fewer, larger writes).
    static let exportChunkBytes = 256 * 1024

    func addExportRoute(to router: some RouterMethods<NotedRequestContext>) {
        let limiter = RateLimiter(limit: 10, window: 60)
        let slots = UserSlots(perUser: 1, inAll: Self.exportsAtOnce)
        router.get("/v1/export") { request, context -> Response in
            let user = try context.requireIdentity()
            guard let format = Exporter.Format(rawValue: request.uri.queryParameters.get("format") ?? "markdown") else {
                throw APIError(.badRequest, "bad_request", "format is markdown or json")
            }
            do throws(AuthError) {
                try limiter.check(keys: ["export:\(user.userID)"])
            } catch {
                throw APIError(error)
            }
            // Held until the answer is sent, fails, or is dropped unsent (its body is released).
            let slot = try Self.exportSlot(slots, for: user.userID)
            // For Markdown, first the names: each note's file, from a pass over the notes that
            // keeps no bodies, so files are named as `noted export` names them.
            var paths: [String: String] = [:]
            if format == .markdown {
                var names: [(id: String, folder: String?, title: String)] = []
                try await eachNote(of: user.userID) { _, note in names.append((note.id, note.folder, note.title)) }
                paths = Exporter.markdownPaths(names)
            }
            let day = String(Timestamp.format(Date()).prefix(10))
            let export = ExportStream(routes: self, userID: user.userID, format: format, names: paths)
            let logger = context.logger
            return Response(
                status: .ok,
                headers: [
                    .contentType: "application/zip", .cacheControl: "no-store",
                    .contentDisposition: "attachment; filename=\"noted-export-\(day).zip\"",
                ],
                body: ResponseBody { writer in
                    defer { withExtendedLifetime(slot) {} }
                    var export = export
                    do {
                        try await export.write(to: &writer)
                    } catch {
                        logger.info(
                            "export ended early",
                            metadata: ["user": .string(export.userID), "error": .string(String(describing: error))])
                        throw error
                    }
                })
        }
    }

    /// The user's export slot, or the refusal: one export per user, `exportsAtOnce` per node.
    private static func exportSlot(_ slots: UserSlots, for userID: String) throws -> UserSlots.Slot {
        do throws(UserSlots.Refusal) {
            return try slots.take(userID)
        } catch {
            switch error {
            case .user:
                throw APIError(
                    .conflict, "export_running", "an export of this account is being sent; wait for it to end")
            case .node:
                var busy = APIError(
                    .serviceUnavailable, "export_busy", "the server is sending other exports; try again in a minute")
                busy.headers[.retryAfter] = "30"
                throw busy
            }
        }
    }

    /// Calls `body` with each live note of the user, a page of 1,000 at a time, as a pull from 0
    /// reads them (a note changed meanwhile may come again in a later page).
    func eachNote(of userID: String, _ body: (Record, PortableNote) async throws -> Void) async throws {
        var since: Int64 = 0
        while true {
            let page = try await store.changes(userID: userID, since: since, limit: 1000, snapshot: true)
            guard !page.reset else {
                throw APIError(
                    .serviceUnavailable, "unavailable", "the notes changed too much while being read; try again")
            }
            for record in page.records where record.collection == CollectionSchema.notes.name && !record.deleted {
                try await body(record, PortableNote(record))
            }
            guard page.more, page.cursor > since else { return }
            since = page.cursor
        }
    }

    static func references(_ record: Record) -> [AttachmentReference] {
        (record.fields["attachments"]?.arrayValue ?? []).compactMap {
            $0.stringValue.flatMap(AttachmentReference.init(element:))
        }
    }

    static func portable(_ reference: AttachmentReference) -> PortableAttachment {
        PortableAttachment(
            name: reference.name, type: reference.type, sha256: reference.sha256, size: reference.size,
            source: URL(fileURLWithPath: "/"))
    }
}

/// One export's zip, written as the notes are read: the notes (Markdown files, or one
/// `notes.json`), then each file they name once, straight from the blob store.
struct ExportStream: Sendable {
    let routes: Routes
    let userID: String
    let format: Exporter.Format
    /// Markdown: each note's file (by id), named before the first note is written.
    let names: [String: String]

    private var out = ExportWriter()
    private var zip = ZipStream()
    private var written = Set<String>()
    /// The notes' files, gathered as the notes are written, written after them.
    private var attachments: [String: AttachmentReference] = [:]

    init(routes: Routes, userID: String, format: Exporter.Format, names: [String: String]) {
        self.routes = routes
        self.userID = userID
        self.format = format
        self.names = names
    }

    mutating func write(to writer: inout any ResponseBodyWriter) async throws {
        switch format {
        case .markdown: try await writeMarkdown(to: &writer)
        case .json: try await writeJSON(to: &writer)
        }
        try await writeAttachments(to: &writer)
        try await out.write(zip.finish(), to: &writer)
        try await out.flush(to: &writer)
        try await writer.finish(nil)
    }

    /// The note as exported, its files gathered; nil when it was written already (a note
    /// changed meanwhile may come again in a later page).
    private mutating func take(_ record: Record, _ note: PortableNote) -> PortableNote? {
        guard written.insert(note.id).inserted else { return nil }
        let references = Routes.references(record)
        for reference in references where attachments[reference.sha256] == nil {
            attachments[reference.sha256] = reference
        }
        var note = note
        note.attachments = references.map(Routes.portable)
        return note
    }

    private mutating func writeMarkdown(to writer: inout any ResponseBodyWriter) async throws {
        var used = Set(names.values.map { $0.lowercased() })
        try await routes.eachNote(of: userID) { record, note in
            guard let note = take(record, note) else { return }
            let path =
                names[note.id]
                ?? Exporter.markdownPath(id: note.id, folder: note.folder, title: note.title, used: &used)
            try await out.write(try zip.entry(path, Data(Exporter.markdownText(note).utf8), deflate: true), to: &writer)
        }
    }

    /// One notes.json, deflated as it is written (its size is not known before: a streamed,
    /// ZIP64 entry).
    private mutating func writeJSON(to writer: inout any ResponseBodyWriter) async throws {
        try await out.write(zip.beginEntry("notes.json", deflated: true), to: &writer)
        var entry = try DeflatedEntry()
        try await entry.add(Exporter.jsonStart(), to: &out, &writer)
        try await routes.eachNote(of: userID) { record, note in
            guard let note = take(record, note) else { return }
            try await entry.add(
                (written.count > 1 ? "," : "") + Exporter.jsonNote(note).jsonString, to: &out, &writer)
        }
        try await entry.add(Exporter.jsonEnd, to: &out, &writer)
        try await entry.end(in: &zip, to: &out, &writer)
    }

    /// Each file once, straight from the blob store.
    private mutating func writeAttachments(to writer: inout any ResponseBodyWriter) async throws {
        for reference in attachments.values.sorted(by: { $0.sha256 < $1.sha256 }) {
            guard
                let pieces = try await routes.store.readBlob(
                    userID: userID, sha256: reference.sha256, range: 0..<reference.size)
            else {
                continue  // named but not stored (collected): the note keeps its link
            }
            try await out.write(
                zip.beginEntry(Exporter.attachmentPath(Routes.portable(reference)), deflated: false), to: &writer)
            var crc: UInt32 = 0
            var size: UInt64 = 0
            for try await piece in pieces {
                let data = Data(piece.readableBytesView)
                crc = ZipStream.crc32(data, continuing: crc)
                size += UInt64(data.count)
                try await out.write(data, to: &writer)
            }
            try await out.write(zip.endEntry(crc32: crc, compressedSize: size, size: size), to: &writer)
        }
    }
}

/// What an export writes, gathered into chunks, each write given at most
/// `Routes.exportWriteSeconds` to be taken by the client.
struct ExportWriter {
    var pending = Data()

    mutating func write(_ data: Data, to writer: inout any ResponseBodyWriter) async throws {
        pending.append(data)
        if pending.count >= Routes.exportChunkBytes { try await flush(to: &writer) }
    }

    mutating func flush(to writer: inout any ResponseBodyWriter) async throws {
        guard !pending.isEmpty else { return }
        let buffer = ByteBuffer(data: pending)
        pending.removeAll(keepingCapacity: true)
        // The write in a task of its own, raced against the deadline: a write waiting on a
        // client that does not read is cancelled (NIO's writer ends a suspended write on cancel).
        final class Held: @unchecked Sendable {
            var writer: any ResponseBodyWriter
            init(_ writer: any ResponseBodyWriter) { self.writer = writer }
        }
        let held = Held(writer)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await held.writer.write(buffer) }
            group.addTask {
                try await Task.sleep(for: .seconds(Routes.exportWriteSeconds))
                throw ExportTimeout()
            }
            try await group.next()
            group.cancelAll()
        }
        writer = held.writer
    }
}

/// A client that took more than `Routes.exportWriteSeconds` to read a piece of its export.
struct ExportTimeout: Error, CustomStringConvertible {
    var description: String { "the client read nothing of the export for \(Routes.exportWriteSeconds) s" }
}

/// `notes.json`, deflated as it is written: text gathered into 64 KiB pieces, each compressed
/// with a sync flush onto the same stream, which ends with an empty final block.
struct DeflatedEntry {
    let compressor: RawDeflate.Compressor
    var pending = Data()
    var crc: UInt32 = 0
    var size: UInt64 = 0
    var compressed: UInt64 = 0

    init() throws {
        compressor = try RawDeflate.Compressor(windowBits: 15, level: 6, memoryLevel: 8)
    }

    mutating func add(_ text: String, to out: inout ExportWriter, _ writer: inout any ResponseBodyWriter) async throws {
        pending.append(contentsOf: text.utf8)
        if pending.count >= 64 * 1024 { try await compressPending(to: &out, &writer) }
    }

    private mutating func compressPending(to out: inout ExportWriter, _ writer: inout any ResponseBodyWriter)
        async throws
    {
        guard !pending.isEmpty else { return }
        crc = ZipStream.crc32(pending, continuing: crc)
        size += UInt64(pending.count)
        let deflated = try compressor.compress(ByteBuffer(data: pending), allocator: ByteBufferAllocator())
        pending.removeAll(keepingCapacity: true)
        compressed += UInt64(deflated.readableBytes)
        try await out.write(Data(deflated.readableBytesView), to: &writer)
    }

    /// The rest, the final block, and the entry's data descriptor.
    mutating func end(in zip: inout ZipStream, to out: inout ExportWriter, _ writer: inout any ResponseBodyWriter)
        async throws
    {
        try await compressPending(to: &out, &writer)
        // An empty final block of fixed codes (BFINAL 1, BTYPE 01, end of block): RFC 1951 3.2.6.
        try await out.write(Data([0x03, 0x00]), to: &writer)
        compressed += 2
        try await out.write(zip.endEntry(crc32: crc, compressedSize: compressed, size: size), to: &writer)
    }
}
