import Foundation
import NotedCore

/// An offline-first Noted client: a local store that every read and write goes to, and a sync
/// engine that keeps it in step with a server in the background.
///
/// ```swift
/// let client = try NotedClient(databasePath: path, server: URL(string: "http://127.0.0.1:8080"), credentials: saved)
/// let note = try await client.create(NoteFields(title: "Groceries", body: "milk"))
/// await client.startSync()
/// for await event in await client.events() { ... }
/// ```
public final class NotedClient: Sendable {
    public struct Configuration: Sendable {
        public var sync = SyncStateMachine<ContinuousClock.Instant>.Configuration()
        /// Seed of the backoff jitter; random by default.
        public var seed = UInt64.random(in: .min ... .max)
        public var transport: any SyncTransport = WebSocketTransport()
        public var http: any HTTPTransport = DefaultHTTPTransport()
        /// Bytes of files fetched from the server kept on the device for offline use; beyond
        /// it the least recently used are dropped (files still to upload never are).
        public var attachmentCacheBytes: Int64 = 512 * 1024 * 1024

        public init() {}
    }

    public let store: LocalStore
    public let server: URL?
    let hub = EventHub()
    let engine: SyncEngine<ContinuousClock>?
    public let tokens: TokenManager?
    let api: NotedAPI?
    let uploader: BlobUploader?
    let attachmentCacheBytes: Int64

    /// Opens the local database; with a server and credentials the client can sync.
    /// - Parameter collections: the app's collections besides `notes` (docs/collections.md);
    ///   their records are kept and synced like notes, through `records(_:)`.
    public convenience init(
        databasePath: String, collections: [CollectionSchema] = [], server: URL? = nil, credentials: Credentials? = nil,
        persist: @escaping @Sendable (Credentials) async throws -> Void = { _ in },
        configuration: Configuration = Configuration()
    ) throws {
        try self.init(
            store: LocalStore.open(path: databasePath, collections: collections), server: server,
            credentials: credentials,
            persist: persist, configuration: configuration)
    }

    public init(
        store: LocalStore, server: URL?, credentials: Credentials?,
        persist: @escaping @Sendable (Credentials) async throws -> Void = { _ in },
        configuration: Configuration = Configuration()
    ) throws {
        self.store = store
        self.server = server
        self.attachmentCacheBytes = configuration.attachmentCacheBytes
        if let server {
            guard let url = syncURL(server: server) else {
                throw NotedClientError(.invalidInput, "the server URL must start with http:// or https://")
            }
            let api = NotedAPI(server: server, http: configuration.http)
            self.api = api
            if let credentials {
                let tokens = TokenManager(credentials: credentials, api: api, persist: persist)
                self.tokens = tokens
                let engine = SyncEngine(
                    store: store, transport: configuration.transport, url: url, tokens: tokens, events: hub,
                    configuration: configuration.sync, clock: ContinuousClock(), seed: configuration.seed)
                self.engine = engine
                let hub = self.hub
                self.uploader = BlobUploader(
                    store: store, api: api, tokens: tokens, uploaded: { await engine.localEdit() },
                    refused: { effect in await hub.emit(effect, origin: .local) })
            } else {
                self.tokens = nil
                self.engine = nil
                self.uploader = nil
            }
        } else {
            self.api = nil
            self.tokens = nil
            self.engine = nil
            self.uploader = nil
        }
    }

    /// A stream of everything that changes; each call gives a new subscriber.
    public func events() async -> AsyncStream<NotedEvent> {
        await hub.subscribe()
    }

    // MARK: Sync

    /// Starts syncing in the background; does nothing without a server and credentials.
    public func startSync() async {
        await uploader?.start()
        await engine?.start()
    }

    public func stopSync() async {
        await uploader?.stop()
        await engine?.stop()
    }

    public func syncStatus() async -> SyncStatus {
        await engine?.currentStatus ?? .stopped
    }

    /// Waits until everything is synced; false when `timeout` passes first, when the calling
    /// task is cancelled, or at once when the server cannot be reached and `failWhenOffline`.
    /// Checks again after each step of the sync engine, not on a timer.
    public func waitUntilSynced(timeout: Duration, failWhenOffline: Bool = false) async -> Bool {
        guard let engine else { return false }
        let deadline = ContinuousClock.now + timeout
        while true {
            // The step is read first: a step taken while the checks run ends the wait below at once.
            let step = await engine.steps
            if await engine.isSynced() { return true }
            // Two failed attempts in a row mean unreachable; one may be an expired token being refreshed.
            if failWhenOffline, await engine.connectionFailures >= 2 { return false }
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return false }
            // Until the engine's next step or the deadline, whichever comes first.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await engine.waitForStep(after: step) }
                group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    // MARK: Notes

    /// - Parameter space: a shared space the user may write in (nil: the personal space).
    @discardableResult
    public func create(_ fields: NoteFields, space: String? = nil) async throws -> Note {
        let note = try await store.create(fields, space: space)
        var effect = StoreEffect()
        effect.add(note.id, in: LocalStore.collection)
        await edited(effect)
        return note
    }

    @discardableResult
    public func update(_ id: String, _ edit: @Sendable (inout NoteFields) throws -> Void) async throws -> Note {
        let note = try await store.update(id, edit)
        var effect = StoreEffect()
        effect.change(id, in: LocalStore.collection)
        await edited(effect)
        return note
    }

    @discardableResult
    public func setTitle(_ id: String, _ title: String) async throws -> Note {
        try await update(id) { $0.title = title }
    }

    @discardableResult
    public func setBody(_ id: String, _ body: String) async throws -> Note {
        try await update(id) { $0.body = body }
    }

    /// Adds and removes tags; adding a present tag or removing an absent one does nothing.
    @discardableResult
    public func tag(_ id: String, add: [String] = [], remove: [String] = []) async throws -> Note {
        try await update(id) { fields in
            let removed = Set(remove)
            fields.tags.removeAll { removed.contains($0) }
            for tag in add where !fields.tags.contains(tag) { fields.tags.append(tag) }
        }
    }

    @discardableResult
    public func setFolder(_ id: String, _ folder: String?) async throws -> Note {
        try await update(id) { $0.folder = folder }
    }

    @discardableResult
    public func setPinned(_ id: String, _ pinned: Bool) async throws -> Note {
        try await update(id) { $0.pinned = pinned }
    }

    /// Moves a note to the trash (restorable) or back.
    @discardableResult
    public func setTrashed(_ id: String, _ trashed: Bool) async throws -> Note {
        try await update(id) { $0.trashed = trashed }
    }

    /// Deletes a note for good, on every device.
    public func purge(_ id: String) async throws {
        try await store.purge(id)
        await hub.emit(.removed(collection: LocalStore.collection, ids: [id]))
        await engine?.localEdit()
    }

    /// Gives up this device's unsent edits of a record (of any collection): for a change the
    /// server refused for good (`Note.refusal`), or unsynced edits the user does not want to
    /// keep. The server's version returns; a record the server never had is removed.
    public func discardLocalChanges(_ id: String) async throws {
        let effect = try await store.discardLocalChanges(id)
        await hub.emit(effect, origin: .local)
    }

    public func note(_ id: String) async throws -> Note? {
        try await store.note(id)
    }

    /// A copy of a note as this device has it, in the personal space, with a new id: the way to
    /// keep what was written in a space the user is no longer in (the original then leaves
    /// this device) or to take a note of a shared space for oneself.
    @discardableResult
    public func copyToPersonalSpace(_ id: String) async throws -> Note {
        let (copy, effect) = try await store.copyToPersonalSpace(LocalStore.collection, id: id)
        await edited(effect)
        return copy.note
    }

    public func list(_ filter: NoteFilter = NoteFilter()) async throws -> [Note] {
        try await store.list(filter)
    }

    public func search(_ query: String) async throws -> [Note] {
        try await store.search(query)
    }

    /// Resolves a unique id prefix to a full id.
    public func resolve(_ prefix: String) async throws -> String {
        try await store.resolve(prefix: prefix)
    }

    // MARK: History

    /// The server's revision history of a note.
    public func history(_ id: String) async throws -> [RevisionSummary] {
        let (api, token) = try await authorized()
        let space = try await store.note(id)?.space
        return try await api.revisions(of: id, space: space, token: token)
    }

    /// The fields of one revision.
    public func revision(_ id: String, rev: Int64, conflict: Bool = false) async throws -> NoteFields {
        let (api, token) = try await authorized()
        let space = try await store.note(id)?.space
        return NoteFields(
            json: try await api.revision(of: id, rev: rev, conflict: conflict, space: space, token: token))
    }

    /// Makes a note's title and body those of an earlier revision (a new edit, synced as usual).
    @discardableResult
    public func restore(_ id: String, rev: Int64) async throws -> Note {
        let old = try await revision(id, rev: rev)
        return try await update(id) { fields in
            fields.title = old.title
            fields.body = old.body
            fields.tags = old.tags
            fields.folder = old.folder
            fields.pinned = old.pinned
        }
    }

    func authorized() async throws -> (NotedAPI, String) {
        guard let api, let tokens else { throw NotedClientError(.unauthenticated, "this needs a server and a sign-in") }
        return (api, try await tokens.accessToken())
    }

    /// Whether this device's sign-in has ended on the server (signed out from another device,
    /// the password changed, the account deleted): a refresh is refused `invalid_grant`.
    /// False when the server cannot be reached or the sign-in still works.
    public func signInEnded() async -> Bool {
        guard let tokens else { return false }
        do {
            try await tokens.refresh()
            return false
        } catch let error as NotedClientError {
            return error.kind == .unauthenticated
        } catch {
            return false
        }
    }

    // MARK: Import

    /// Writes imported notes under the ids given (``LocalStore/importNotes(_:files:replace:dryRun:)``:
    /// a note of that id with other content is kept and the imported one added under `copyID`,
    /// or with `replace` overwritten), in local transactions of `batch` notes, then syncs them
    /// like any edit. `progress` hears how many are done after each batch.
    public func importNotes(
        _ notes: [(id: String, fields: NoteFields, copyID: String)], files: [String: (data: Data, type: String)] = [:],
        replace: Bool = false, dryRun: Bool = false, batch: Int = 500,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> [ImportOutcome] {
        var outcomes: [ImportOutcome] = []
        outcomes.reserveCapacity(notes.count)
        for start in stride(from: 0, to: notes.count, by: max(1, batch)) {
            let chunk = Array(notes[start..<min(start + max(1, batch), notes.count)])
            let (done, effect) = try await store.importNotes(chunk, files: files, replace: replace, dryRun: dryRun)
            outcomes += done
            if !dryRun { await edited(effect) }
            progress?(outcomes.count)
        }
        return outcomes
    }

    // MARK: The account

    /// Changes the password; every other device of the account is signed out (this one stays).
    /// Returns how many were.
    @discardableResult
    /// `code`: with two-factor sign-in on, a current code of the authenticator app (or a recovery code).
    public func changePassword(current: String, new: String, code: String? = nil) async throws -> Int {
        let (api, token) = try await authorized()
        return try await api.changePassword(current: current, new: new, code: code, token: token)
    }

    /// The account's signed-in devices.
    public func devices() async throws -> [SignedInDevice] {
        let (api, token) = try await authorized()
        return try await api.devices(token: token)
    }

    /// Signs out one device (an id from ``devices()``), or every one (this one too) with nil.
    @discardableResult
    public func signOut(device: String?) async throws -> Int {
        let (api, token) = try await authorized()
        return try await api.signOut(device: device, token: token)
    }

    /// The account: username, and whether two-factor sign-in is on.
    public func account() async throws -> AccountInfo {
        let (api, token) = try await authorized()
        return try await api.account(token: token)
    }

    /// Starts two-factor sign-in: the secret and `otpauth://` URI to give an authenticator app.
    public func beginTwoFactor(password: String) async throws -> (secret: String, uri: String) {
        let (api, token) = try await authorized()
        return try await api.beginTwoFactor(password: password, token: token)
    }

    /// Turns two-factor sign-in on with the app's first code; returns the recovery codes.
    public func enableTwoFactor(code: String) async throws -> [String] {
        let (api, token) = try await authorized()
        return try await api.enableTwoFactor(code: code, token: token)
    }

    /// Turns two-factor sign-in off.
    public func disableTwoFactor(password: String, code: String) async throws {
        let (api, token) = try await authorized()
        try await api.disableTwoFactor(password: password, code: code, token: token)
    }

    /// Deletes the account on the server, with everything in it.
    /// `code` as for ``changePassword(current:new:code:)``.
    public func deleteAccount(password: String, code: String? = nil) async throws {
        let (api, token) = try await authorized()
        try await api.deleteAccount(password: password, code: code, token: token)
    }

    /// Announces a local transaction's edits and wakes the engine.
    func edited(_ effect: StoreEffect) async {
        await hub.emit(effect, origin: .local)
        await uploader?.wake()
        await engine?.localEdit()
    }

    // MARK: Attachments

    /// Attaches a file to the note: kept on this device at once, put on the server when it is
    /// reachable, and the change naming it sent only after that (docs/client.md, "Attachments").
    /// Files larger than the server takes (`GET /v1/blobs`'s `maxBlobBytes`, 25 MiB by default)
    /// are refused when the server is asked (``maxAttachmentBytes()``).
    @discardableResult
    public func attach(_ id: String, data: Data, name: String, type: String) async throws -> AttachmentReference {
        let (reference, _) = try await store.attach(id, data: data, name: name, type: type)
        var effect = StoreEffect()
        effect.change(id, in: LocalStore.collection)
        await edited(effect)
        return reference
    }

    /// Removes the attachment `sha256` from the note.
    public func detach(_ id: String, sha256: String) async throws {
        _ = try await store.detach(id, sha256: sha256)
        var effect = StoreEffect()
        effect.change(id, in: LocalStore.collection)
        await edited(effect)
    }

    /// The file of an attachment: from this device when it has it, else from the server (then
    /// kept here, for offline use). Throws `notFound` when neither has it.
    public func attachmentData(_ sha256: String) async throws -> (data: Data, type: String) {
        guard AttachmentReference.isSHA256(sha256) else {
            throw NotedClientError(.invalidInput, "\"\(sha256)\" is not a SHA-256")
        }
        if let local = try await store.blobData(sha256) { return local }
        let (api, token) = try await authorized()
        guard let fetched = try await api.downloadBlob(sha256: sha256, token: token) else {
            throw NotedClientError(.notFound, "the server has no attachment \(sha256)")
        }
        try await store.keepFetchedBlob(fetched.data, sha256: sha256, type: fetched.type)
        try await store.forgetBlobs(keepingBytes: attachmentCacheBytes)
        return fetched
    }

    /// The largest file the server takes, when it can be asked.
    public func maxAttachmentBytes() async throws -> Int64? {
        let (api, token) = try await authorized()
        return try await api.blobLimits(token: token).maxBlobBytes
    }

    /// Why uploads of attachments keep failing, while they do (nil when they work).
    public func attachmentUploadError() async -> String? {
        await uploader?.lastError
    }
}
