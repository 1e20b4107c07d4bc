import Foundation
import NotedCore

/// Puts the files of attachments added on this device on the server, ahead of the changes
/// that reference them (``LocalStore/outbox(excluding:limit:)`` holds those back until then):
/// woken by local edits and when sync starts, it uploads every pending file, then wakes the
/// sync engine to send what was waiting. Failures back off (1 s doubling to a minute); a file
/// the server lost (`missing_blob`) is pending again and goes up on the next round.
actor BlobUploader {
    let store: LocalStore
    let api: NotedAPI
    let tokens: TokenManager
    let uploaded: @Sendable () async -> Void
    /// A file the server refused for good: the notes naming it were refused (an effect to announce).
    let refused: @Sendable (StoreEffect) async -> Void

    private var task: Task<Void, Never>?
    private var waiter: CheckedContinuation<Void, Never>?
    private var woken = false
    /// Why the last upload failed, while it keeps failing.
    private(set) var lastError: String?

    /// While backing off after a failure: an edit does not cut the wait short (only `stop`).
    private var backingOff = false

    init(
        store: LocalStore, api: NotedAPI, tokens: TokenManager, uploaded: @escaping @Sendable () async -> Void,
        refused: @escaping @Sendable (StoreEffect) async -> Void = { _ in }
    ) {
        self.store = store
        self.api = api
        self.tokens = tokens
        self.uploaded = uploaded
        self.refused = refused
    }

    func start() {
        guard task == nil else { return wake() }
        task = Task { await self.run() }
    }

    func stop() {
        task?.cancel()
        task = nil
        backingOff = false
        wake()
    }

    func wake() {
        guard !backingOff else { return }
        if let waiter {
            self.waiter = nil
            waiter.resume()
        } else {
            woken = true
        }
    }

    private func run() async {
        var backoff: Duration = .seconds(1)
        while !Task.isCancelled {
            let pending = (try? await store.pendingBlobs()) ?? []
            if pending.isEmpty {
                // A `missing_blob` answer makes a file pending without an edit: look again now and then.
                await sleep(.seconds(5))
                continue
            }
            var sent = false
            var failure: String?
            for blob in pending where !Task.isCancelled {
                do {
                    try await upload(blob)
                    sent = true
                } catch let refusal as BlobRefused {
                    // Sending it again cannot help: its notes are refused, saying why.
                    if let effect = try? await store.refuseBlob(blob.sha256, reason: refusal.description) {
                        await refused(effect)
                    }
                    sent = true
                } catch {
                    failure = "\(error)"
                    break
                }
            }
            lastError = failure
            if sent { await uploaded() }
            if failure != nil {
                backingOff = true
                await sleep(backoff)
                backingOff = false
                backoff = min(backoff * 2, .seconds(60))
            } else {
                backoff = .seconds(1)
            }
        }
    }

    private func upload(_ blob: LocalBlob) async throws {
        guard let (data, type) = try await store.blobData(blob.sha256) else { return }
        do {
            try await api.uploadBlob(sha256: blob.sha256, data: data, type: type, token: try await tokens.accessToken())
        } catch let error as NotedClientError where error.kind == .unauthenticated {
            try await api.uploadBlob(
                sha256: blob.sha256, data: data, type: type, token: try await tokens.refresh().accessToken)
        }
        try await store.blobUploaded(blob.sha256)
    }

    private func timerFired() {
        backingOff = false
        wake()
    }

    /// Until woken or `timeout` passes.
    private func sleep(_ timeout: Duration) async {
        if woken {
            woken = false
            return
        }
        let timer = Task { [weak self] in
            do {
                try await Task.sleep(for: timeout)
            } catch {
                return  // cancelled: woken meanwhile
            }
            await self?.timerFired()
        }
        await withCheckedContinuation { waiter = $0 }
        timer.cancel()
        woken = false
    }
}
