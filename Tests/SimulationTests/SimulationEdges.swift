import Foundation
import NotedCore

@testable import NotedClient

/// The edges around the engine (issue 21) as actions of the simulated users: another account
/// signing in on a shared device (each account's database apart, as `AccountDirectory` keeps
/// them), signing out and in again, a lost session, a change the server refuses for good, and
/// unsynced edits given up on purpose. The invariant they are held to is the one `check()`
/// already states for every marker: an edit leaves a device only by being acknowledged by the
/// server or by an explicit discard (a discarded marker is the only kind besides removed words
/// that may be missing at the end).
extension SimClient {
    /// This device's database of the account signed in: its own user's at `path`, another
    /// user's beside it.
    var databasePath: String {
        user == homeUser ? path : String(path.dropLast(".sqlite".count)) + "-as-u\(user).sqlite"
    }
}

extension World {
    /// One edge action, drawn from the step's generator.
    func edge(_ client: SimClient) async throws {
        switch random.below(6) {
        case 0:
            // Another account signs in on this device, or the device's own comes back.
            let other =
                client.user != client.homeUser
                ? client.homeUser : (client.homeUser + 1 + random.below(users.count - 1)) % users.count
            trace.append("switch \(client.name) to \(users[other])")
            try await switchAccount(client, to: other)
        case 1:
            if client.signedOut {
                trace.append("sign in \(client.name)")
                try await signIn(client)
            } else {
                // Signing out with unsynced edits keeps them for the next sign-in.
                trace.append("sign out \(client.name)")
                try await signOut(client)
            }
        case 2:
            if client.sessionLost {
                trace.append("sign in again \(client.name)")
                client.sessionLost = false
            } else {
                // The refresh token is refused (invalid_grant): the session ends; nothing is erased.
                trace.append("session lost \(client.name)")
                client.sessionLost = true
                if let link = client.link, !link.closedByServer {
                    link.down.append(["type": "error", "code": "token_expired", "message": "the access token expired"])
                    link.down.append(["type": "sim-close"])
                    link.closedByServer = true
                }
            }
        case 3:
            try await refusedEdit(client)
        case 4:
            try await resolveRefusals(client, discarding: false, limit: 1)
        default:
            try await discardOne(client)
        }
    }

    /// A journal entry gets a mood this app knows and its server does not, with new text in
    /// the same change: the server refuses the change (`invalid_field`); the text must stay on
    /// the device until the user edits the entry into shape (then it syncs) or discards it.
    func refusedEdit(_ client: SimClient) async throws {
        let entries = try await client.store.records("journal").sorted { $0.id < $1.id }
        guard !entries.isEmpty else { return }
        let id = entries[random.below(entries.count)].id
        let text = marker()
        inserted[client.user, default: []].insert(Int(text.dropFirst().dropLast())!)
        markerRecord[Int(text.dropFirst().dropLast())!] = id
        trace.append("journal ecstatic \(client.name) \(id) \(text)")
        _ = try await client.store.transaction { transaction in
            try transaction.update("journal", id: id) { fields in
                fields["mood"] = "ecstatic"
                fields["entry"] = .string(((fields["entry"]?.stringValue).map { $0 + " " } ?? "") + text)
            }
        }
        try await localEditSignal(client)
    }

    /// The user deals with refused entries: edits them into shape (a mood the server knows; the
    /// text stays and syncs), or discards this device's version (its markers are given up).
    func resolveRefusals(_ client: SimClient, discarding: Bool, limit: Int = .max) async throws {
        let refused = try await client.store.syncErrors().map(\.id).sorted().prefix(limit)
        for id in refused {
            if discarding {
                try await discard(client, id)
            } else {
                trace.append("into shape \(client.name) \(id)")
                _ = try await client.store.transaction { try $0.update("journal", id: id) { $0["mood"] = "ok" } }
            }
        }
        if !refused.isEmpty { try await localEditSignal(client) }
    }

    /// The user gives up the unsynced edits of one record (pending or refused).
    func discardOne(_ client: SimClient) async throws {
        let unsynced = try await client.store.unsynced().map(\.id).sorted()
        guard !unsynced.isEmpty else { return }
        try await discard(client, unsynced[random.below(unsynced.count)])
        try await settle(client)
    }

    func discard(_ client: SimClient, _ id: String) async throws {
        let before = try await client.store.unsynced().first { $0.id == id }
        _ = try await client.store.discardLocalChanges(id)
        let all = try await client.store.records("journal") + client.store.records("notes")
        let after = all.first { $0.id == id }
        let kept = Set(markers(after.map { World.text($0.collection, $0.fields) } ?? ""))
        let given = markers(before.map { World.text($0.collection, $0.fields) } ?? "").filter { !kept.contains($0) }
        removed.formUnion(given)
        trace.append("discard \(client.name) \(id) \(given.sorted().map { "[\($0)]" }.joined(separator: " "))")
    }

    func markers(_ text: String) -> [Int] {
        text.matches(of: /\[(\d+)\]/).map { Int($0.1)! }
    }

    /// Another account signs in on this device: the engine stops, that account's database opens
    /// (made on first use) and syncs as that user; the other database stays as it is.
    func switchAccount(_ client: SimClient, to user: Int) async throws {
        await client.engine.stop()
        client.currentLink = nil
        client.cursors[client.user] = client.lastCursor
        client.user = user
        client.lastCursor = client.cursors[user] ?? 0
        client.signedOut = false
        client.sessionLost = false
        try await reopen(client, start: true)
    }

    func signOut(_ client: SimClient) async throws {
        await client.engine.stop()
        client.currentLink = nil
        client.signedOut = true
        try await reopen(client, start: false)
    }

    func signIn(_ client: SimClient) async throws {
        client.signedOut = false
        client.sessionLost = false
        await client.engine.start()
        try await settle(client)
    }

    /// A new engine over the database of the account signed in (as after a restart).
    func reopen(_ client: SimClient, start: Bool) async throws {
        client.store = try LocalStore.open(path: client.databasePath, collections: [World.clientJournal])
        try await client.store.setMeta("device", client.device)
        client.clock = SimClock(time: time)
        client.delivered = 0
        client.drops = 0
        client.engine = SimClient.engine(
            store: client.store, clock: client.clock, world: self, index: client.index, seed: random.next())
        if start { await client.engine.start() }
        try await settle(client)
    }

    /// Tells a signed-in engine about a local edit, and waits for it.
    func localEditSignal(_ client: SimClient) async throws {
        if !client.signedOut { await client.engine.localEdit() }
        try await settle(client)
    }

    /// The end of a run, before the checks: every user is back (signed in, session renewed);
    /// each database of another account on a shared device syncs what it holds; refused
    /// entries are edited into shape everywhere; every device ends on its own account.
    func healEdges() async throws {
        for client in clients {
            client.sessionLost = false
            if client.signedOut {
                trace.append("sign in \(client.name)")
                try await signIn(client)
            }
        }
        for client in clients {
            let others = Set(client.cursors.keys).union([client.user]).subtracting([client.homeUser]).sorted()
            for other in others {
                if client.user != other {
                    trace.append("switch \(client.name) to \(users[other])")
                    try await switchAccount(client, to: other)
                }
                try await drain()
                try await resolveRefusals(client, discarding: false)
                try await drain()
            }
            if client.user != client.homeUser {
                trace.append("switch \(client.name) to \(users[client.homeUser])")
                try await switchAccount(client, to: client.homeUser)
            }
        }
        for _ in 0..<3 {
            try await drain()
            var any = false
            for client in clients where try await !client.store.syncErrors().isEmpty {
                any = true
                try await resolveRefusals(client, discarding: false)
            }
            if !any { return }
        }
    }
}
