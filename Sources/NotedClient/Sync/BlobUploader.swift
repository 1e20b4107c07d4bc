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

    private var task: Task<Void, Never>?
    private var waiter: CheckedContinuation<Void, Never>?
    private var woken = false
    /// Why the last upload failed, while it keeps failing.
    private(set) var lastError: String?

    init(store: LocalStore, api: NotedAPI, tokens: TokenManager, uploaded: @escaping @Sendable () async -> Void) {
        self.store = store
        self.api = api
        self.tokens = tokens
        self.uploaded = uploaded
    }

    func start() {
        guard task == nil else { return wake() }
        task = Task { await self.run() }
    }

    func stop() {
        task?.cancel()
        task = nil
        wake()
    }

    func wake() {
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
                } catch {
                    failure = "\(error)"
                    break
                }
            }
            lastError = failure
            if sent { await uploaded() }
            if failure != nil {
                await sleep(backoff)
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
            try await api.uploadBlob(sha256: blob.sha256, data: data, type: type, token: try await tokens.refresh().accessToken)
        }
        try await store.blobUploaded(blob.sha256)
    }

    /// Until woken or `timeout` passes.
    private func sleep(_ timeout: Duration) async {
        if woken {
            woken = false
            return
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.wake()
        }
        await withCheckedContinuation { waiter = $0 }
        timer.cancel()
        woken = false
    }
}
