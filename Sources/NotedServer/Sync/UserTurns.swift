import Foundation

/// One push at a time per user on this node (docs/security.md): a user's pushes from many
/// connections wait here, in order and holding no database connection, instead of each
/// taking a connection (PostgreSQL) or a merge's worth of CPU at once. Other users never wait
/// for them.
///
/// Taking turns is about fairness, not correctness (the store serializes a user's pushes
/// itself): a push that waited `patience` goes ahead without its turn, so that one push stuck
/// on an unreachable database can never hold up all of its user's later pushes.
actor UserTurns {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Bool, Never>
    }
    private var waiting: [String: [Waiter]] = [:]
    private var busy: Set<String> = []
    private var nextID: UInt64 = 0
    let patience: Duration

    init(patience: Duration = .seconds(10)) {
        self.patience = patience
    }

    /// Runs `body` when it is `user`'s turn, or after `patience` without it.
    nonisolated func run<T: Sendable>(_ user: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let holds = await acquire(user)
        do {
            let value = try await body()
            if holds { await release(user) }
            return value
        } catch {
            if holds { await release(user) }
            throw error
        }
    }

    /// True when the turn was taken; false when the wait ran out of patience.
    private func acquire(_ user: String) async -> Bool {
        guard busy.contains(user) else {
            busy.insert(user)
            return true
        }
        nextID += 1
        let id = nextID
        let patience = self.patience
        let timer = Task { [weak self] in
            try await Task.sleep(for: patience)
            await self?.giveUp(user, id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiting[user, default: []].append(Waiter(id: id, continuation: $0)) }
    }

    private func giveUp(_ user: String, _ id: UInt64) {
        guard let index = waiting[user]?.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiting[user]!.remove(at: index)
        if waiting[user]?.isEmpty == true { waiting[user] = nil }
        waiter.continuation.resume(returning: false)
    }

    private func release(_ user: String) {
        if var queue = waiting[user], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[user] = queue.isEmpty ? nil : queue
            next.continuation.resume(returning: true)  // the turn passes on; `busy` stays set
        } else {
            busy.remove(user)
        }
    }
}
