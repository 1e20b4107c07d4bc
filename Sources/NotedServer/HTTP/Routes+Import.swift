import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NotedCore
import NotedPorting

/// `POST /v1/import`: an export uploaded from the web app, read by the same importers as
/// `noted import` (docs/import-export.md) and written as the user's own changes, so every
/// device hears of them as of any edit.
extension Routes {
    /// Reading an export takes a core and up to its budget in memory: at most this many at once
    /// on a node (the rest asked to come back), on threads of their own, so that password hashing
    /// and blob files (on `NIOThreadPool.singleton`) never wait behind an import.
    static let importsAtOnce = max(1, System.coreCount - 1)
    static let importPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: importsAtOnce)
        pool.start()
        return pool
    }()
    /// The longest an import may spend reading its export (docs/security.md).
    static let importSeconds: Double = 300

    func addImportRoute(to router: some RouterMethods<NotedRequestContext>) {
        let limiter = RateLimiter(limit: 10, window: 60)
        let running = NIOLockedValueBox(Set<String>())
        let reading = NIOLockedValueBox(0)
        let atOnce = Self.importsAtOnce
        router.post("/v1/import") { request, context -> Response in
            let user = try context.requireIdentity()
            let options = try ImportOptions(request.uri.queryParameters)
            do throws(AuthError) {
                try limiter.check(keys: ["import:\(user.userID)"])
            } catch {
                throw APIError(error)
            }
            // One import of a user at a time (a second would only race the first for the same ids).
            let first = running.withLockedValue { $0.insert(user.userID).inserted }
            guard first else {
                throw APIError(.conflict, "import_running", "an import of this account is running; wait for it to end")
            }
            defer { running.withLockedValue { _ = $0.remove(user.userID) } }
            let body: ByteBuffer
            do {
                body = try await request.body.collect(upTo: configuration.maxImportBytes)
            } catch {
                throw APIError(
                    .contentTooLarge, "too_large",
                    "the file is larger than this server takes (\(configuration.maxImportBytes) bytes, --max-import-bytes)"
                )
            }
            // A few reading on the node, counted once the body is here: a slow upload holds no slot.
            let admitted = reading.withLockedValue { count -> Bool in
                guard count < atOnce else { return false }
                count += 1
                return true
            }
            guard admitted else {
                var busy = APIError(
                    .serviceUnavailable, "import_busy", "the server is reading other imports; try again in a minute")
                busy.headers[.retryAfter] = "30"
                throw busy
            }
            let result: Importer.Result
            do {
                defer { reading.withLockedValue { $0 -= 1 } }
                result = try await read(body, options)
            }
            let summary = try await ServerImport(
                sync: sync, store: store, userID: user.userID, logger: context.logger,
                maxBlobBytes: configuration.maxBlobBytes, quota: configuration.quota.bytes, replace: options.replace
            ).write(result)
            context.logger.info(
                "import",
                metadata: [
                    "user": .string(user.userID), "format": .string(result.format.rawValue),
                    "imported": "\(summary.imported)",
                    "updated": "\(summary.updated)", "unchanged": "\(summary.unchanged)", "copied": "\(summary.copied)",
                    "skipped": "\(summary.skipped.count)",
                ])
            return .json(summary.json(format: result.format))
        }
    }

    /// Reads an uploaded export on the import pool, within its budget, whatever the archive says
    /// of itself: memory for the upload and all that is made of it (what it unpacks to, the
    /// parsed trees, the notes), 5 x --max-import-bytes; time; and a bounded list of skipped
    /// items. An archive may unpack to 4 x --max-import-bytes.
    private func read(_ body: ByteBuffer, _ options: ImportOptions) async throws -> Importer.Result {
        do {
            let unpacked = configuration.maxImportBytes * 4
            let budget = ImportBudget(
                memoryBytes: unpacked + configuration.maxImportBytes, seconds: Self.importSeconds,
                maxSkipped: ServerImport.maxSkipped)
            try budget.charge(body.readableBytes, origin: options.name)
            return try await withTaskCancellationHandler {
                try await Self.importPool.runIfActive {
                    try Importer.read(
                        try ImportSource.load(
                            Data(buffer: body), name: options.name, unpackedLimit: unpacked, budget: budget),
                        as: options.format)
                }
            } onCancel: {
                budget.cancel()
            }
        } catch let error as ImportError {
            throw APIError(.badRequest, "bad_import", error.description)
        }
    }
}

/// The query of `POST /v1/import`: the uploaded file's `name`, the format it is `from` (nil:
/// recognised), and whether to `replace` notes of the same id (docs/protocol.md, "Import").
struct ImportOptions: Sendable {
    var name = "upload"
    var format: Importer.Format?
    var replace = false

    init(_ query: Parameters) throws {
        if let text = query.get("name") { name = String(text) }
        guard (1...255).contains(name.utf8.count), !name.contains("/"), !name.contains("\0") else {
            throw APIError(.badRequest, "bad_request", "name is the uploaded file's name: 1 to 255 bytes, no '/'")
        }
        if let text = query.get("replace") {
            guard let value = Bool(String(text)) else {
                throw APIError(.badRequest, "bad_request", "replace is true or false")
            }
            replace = value
        }
        if let text = query.get("from") {
            guard let known = Importer.Format(rawValue: String(text)) else {
                throw APIError(
                    .badRequest, "bad_request",
                    "from is one of \(Importer.Format.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            format = known
        }
    }
}

/// Writes imported notes as changes of the user, as `LocalStore.importNotes` does on a device:
/// created when new, left alone when equal; one of the same id with other content is kept and
/// the imported version added beside it under `Importer.copyID` (once), or with `replace`
/// updated (only the fields that differ); a note deleted for good on the server is not brought
/// back.
struct ServerImport {
    let sync: SyncService
    let store: any RecordStore & BlobStore
    let userID: String
    let logger: Logger
    /// The largest file, and the account's quota, for the notes' attachments.
    var maxBlobBytes = 25 * 1024 * 1024
    var quota: Int64?
    /// Overwrite a note of the same id that holds other content, instead of adding the
    /// imported version beside it.
    var replace = false

    enum Outcome { case created, updated, copied }

    /// Skipped items an answer lists one by one; `skipped_count` counts them all.
    static let maxSkipped = 1000

    struct Summary {
        var imported = 0, updated = 0, unchanged = 0, copied = 0
        var skipped = SkippedList(limit: ServerImport.maxSkipped)

        mutating func skip(_ source: String, _ reason: String) {
            skipped.append(Importer.Skipped(source: source, reason: reason))
        }

        func json(format: Importer.Format) -> JSONValue {
            [
                "format": .string(format.rawValue), "imported": .int(Int64(imported)), "updated": .int(Int64(updated)),
                "unchanged": .int(Int64(unchanged)), "copied": .int(Int64(copied)),
                "skipped": .array(skipped.items.map { ["source": .string($0.source), "reason": .string($0.reason)] }),
                "skipped_count": .int(Int64(skipped.count)),
            ]
        }
    }

    func write(_ result: Importer.Result) async throws -> Summary {
        var summary = Summary()
        for item in result.skipped { summary.skipped.append(item) }
        summary.skipped.countUnlisted(result.skippedCount - result.skipped.count)
        let batch = max(1, sync.parser.limits.maxChangesPerPush)
        for start in stride(from: 0, to: result.notes.count, by: batch) {
            var changes: [JSONValue] = []
            var sources: [(source: String, outcome: Outcome)] = []
            for item in result.notes[start..<min(start + batch, result.notes.count)] {
                var fields = Self.fields(item.note)
                // The note's files first: a change naming a file the server lacks is refused.
                var stored: [String] = []
                for attachment in item.note.attachments {
                    guard let reference = attachment.reference(limit: sync.parser.limits.maxTagLength) else { continue }
                    do {
                        try await storeFile(attachment)
                        stored.append(reference.element)
                    } catch {
                        summary.skip(
                            "\(item.source) \(attachment.name)",
                            "the attachment was not stored: \(Self.describe(error))")
                    }
                }
                fields["attachments"] = .array(stored.map(JSONValue.string))
                let record = try await store.record(
                    userID: userID, collection: CollectionSchema.notes.name, id: item.note.id)
                if let record, record.deleted {
                    summary.skip(item.source, "deleted on the server")
                    continue
                }
                let current = record.map { CollectionSchema.notes.completed($0.fields) }
                var changed = fields.filter { name, value in
                    current.map { !Self.same($0[name] ?? .null, value) } ?? true
                }
                guard !changed.isEmpty else {
                    summary.unchanged += 1
                    continue
                }
                var target = (
                    id: item.note.id, baseRev: record?.rev ?? 0, outcome: record == nil ? Outcome.created : .updated
                )
                if record != nil && !replace {
                    // Kept as it is; the imported version beside it, once.
                    let copyID = Importer.copyID(of: item.note)
                    if let copy = try await store.record(
                        userID: userID, collection: CollectionSchema.notes.name, id: copyID)
                    {
                        if copy.deleted {
                            summary.skip(item.source, "deleted on the server")
                        } else {
                            summary.unchanged += 1
                        }
                        continue
                    }
                    target = (copyID, 0, .copied)
                    changed = fields
                }
                let schema = CollectionSchema.notes
                let ops = changed.reduce(into: [String: FieldOp]()) { ops, field in
                    ops[field.key] = FieldOp.replacing(
                        with: field.value, kind: schema.fields[field.key]?.kind ?? .scalar)
                }
                let change = Change(
                    ccid: UUID().uuidString.lowercased(), collection: schema.name, id: target.id,
                    baseRev: target.baseRev, op: .upsert, fields: ops)
                changes.append(change.json)
                sources.append((item.source, target.outcome))
            }
            guard !changes.isEmpty else { continue }
            let replies = try await sync.push(
                changes: changes, userID: userID, device: nil, session: nil, rid: nil, logger: logger)
            for (reply, source) in zip(replies, sources) {
                switch reply {
                case .ack:
                    switch source.outcome {
                    case .created: summary.imported += 1
                    case .updated: summary.updated += 1
                    case .copied: summary.copied += 1
                    }
                case .reject(let reject):
                    summary.skip(source.source, reject.message)
                default:
                    summary.skip(source.source, "refused by the server")
                }
            }
        }
        return summary
    }

    /// Stores an imported file as the user's blob (nothing when it is there already).
    func storeFile(_ attachment: PortableAttachment) async throws {
        if try await store.storedBlob(userID: userID, sha256: attachment.sha256) != nil { return }
        guard attachment.data.count <= maxBlobBytes else {
            throw APIError(
                .contentTooLarge, "too_large",
                "\(attachment.data.count) bytes, more than this server takes (\(maxBlobBytes))")
        }
        let length = Int64(attachment.data.count)
        let upload = try await store.beginBlobUpload(
            userID: userID, sha256: attachment.sha256, length: length, type: attachment.type, quota: quota, now: Date())
        var offset = upload.offset
        while offset < length {
            let end = min(Int(length), Int(offset) + Routes.blobPieceBytes)
            offset = try await store.appendBlobUpload(
                userID: userID, sha256: attachment.sha256, offset: offset,
                bytes: ByteBuffer(bytes: attachment.data[Int(offset)..<end]), now: Date())
        }
        try await store.syncBlobUpload(userID: userID, sha256: attachment.sha256)
        _ = try await store.finishBlobUpload(userID: userID, sha256: attachment.sha256, now: Date())
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as BlobError: Routes.apiError(error).message
        case let error as APIError: error.message
        default: String(describing: error)
        }
    }

    /// Every field of the `notes` schema as the note has it (tags without repeats); the dates
    /// only when the source gave them.
    static func fields(_ note: PortableNote) -> [String: JSONValue] {
        var seen = Set<String>()
        let tags = note.tags.filter { seen.insert($0).inserted }
        var fields: [String: JSONValue] = [
            "title": .string(note.title), "body": .string(note.body), "tags": .array(tags.map(JSONValue.string)),
            "folder": note.folder.map(JSONValue.string) ?? .null, "pinned": .bool(note.pinned),
            "trashed": .bool(note.trashed),
        ]
        if let created = note.created {
            fields["created"] = .int(Int64((created.timeIntervalSince1970 * 1000).rounded(.down)))
        }
        if let updated = note.updated {
            fields["modified"] = .int(Int64((updated.timeIntervalSince1970 * 1000).rounded(.down)))
        }
        return fields
    }

    /// Equal as the schema compares: tags as a set, numbers by value.
    static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        if let x = a.arrayValue, let y = b.arrayValue {
            return Set(x.compactMap(\.stringValue)) == Set(y.compactMap(\.stringValue)) && x.count == y.count
        }
        return a.sameValue(as: b)
    }
}
