/// One push at a time per user on this node (docs/security.md): a user's pushes from many
/// connections wait here, in order and holding no database connection, instead of each
/// taking a connection (PostgreSQL) or a merge's worth of CPU at once. Other users never wait
/// for them.
actor UserTurns {
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]
    private var busy: Set<String> = []

    /// Runs `body` when it is `user`'s turn.
    nonisolated func run<T: Sendable>(_ user: String, _ body: @Sendable () async throws -> T) async throws -> T {
        await acquire(user)
        do {
            let value = try await body()
            await release(user)
            return value
        } catch {
            await release(user)
            throw error
        }
    }

    private func acquire(_ user: String) async {
        guard busy.contains(user) else {
            busy.insert(user)
            return
        }
        await withCheckedContinuation { waiting[user, default: []].append($0) }
    }

    private func release(_ user: String) {
        if var queue = waiting[user], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[user] = queue.isEmpty ? nil : queue
            next.resume()  // the turn passes on; `busy` stays set
        } else {
            busy.remove(user)
        }
    }
}
