import Foundation

/// One push at a time per user on this node (docs/security.md): a user's pushes from many
/// connections wait here, in order and holding no database connection, instead of each
/// taking a connection (PostgreSQL) or a merge's worth of CPU at once. Other users never wait
/// for them.
///
/// Taking turns is about fairness, not correctness (the store serializes a user's pushes
/// itself), so no push waits longer than `patience`: a waiter that has waited that long takes
/// the turn over from whoever holds it. The holder runs on, but its turn is over (its release
/// is ignored), so a push stuck for ever (a database connection that never answers) delays
/// its user's later pushes once, by `patience`, and never again. `patience` is well under
/// the clients' request timeouts (15 s), so a waiting push is answered before its client
/// gives up on the connection.
actor UserTurns {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<UInt64, Never>
    }
    /// The push that holds each user's turn.
    private var holders: [String: UInt64] = [:]
    private var waiting: [String: [Waiter]] = [:]
    private var nextID: UInt64 = 0
    /// Turns taken over from a holder that kept them `patience` (counted for tests and logs).
    private(set) var takeovers = 0
    let patience: Duration

    init(patience: Duration = .seconds(3)) {
        self.patience = patience
    }

    /// Runs `body` when it is `user`'s turn, or once it has waited `patience`.
    nonisolated func run<T: Sendable>(_ user: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let turn = await acquire(user)
        do {
            let value = try await body()
            await release(user, turn)
            return value
        } catch {
            await release(user, turn)
            throw error
        }
    }

    /// Whether `user`'s turn is held, and how many pushes wait for it.
    func state(of user: String) -> (held: Bool, waiting: Int) {
        (holders[user] != nil, waiting[user]?.count ?? 0)
    }

    private func acquire(_ user: String) async -> UInt64 {
        nextID += 1
        let id = nextID
        guard holders[user] != nil else {
            holders[user] = id
            return id
        }
        let patience = self.patience
        let timer = Task { [weak self] in
            try await Task.sleep(for: patience)
            await self?.takeOver(user, id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiting[user, default: []].append(Waiter(id: id, continuation: $0)) }
    }

    /// A waiter ran out of patience: the turn is its now, whoever held it.
    private func takeOver(_ user: String, _ id: UInt64) {
        guard let index = waiting[user]?.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiting[user]!.remove(at: index)
        if waiting[user]?.isEmpty == true { waiting[user] = nil }
        takeovers += 1
        holders[user] = id
        waiter.continuation.resume(returning: id)
    }

    /// The turn passes to the next waiter, unless it was taken over meanwhile.
    private func release(_ user: String, _ id: UInt64) {
        guard holders[user] == id else { return }
        if var queue = waiting[user], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[user] = queue.isEmpty ? nil : queue
            holders[user] = next.id
            next.continuation.resume(returning: next.id)
        } else {
            holders[user] = nil
        }
    }
}
