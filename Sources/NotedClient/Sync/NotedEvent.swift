/// Something observers of a client should know: apps refresh their UI from these.
public enum NotedEvent: Sendable, Hashable {
    public enum Origin: Sendable, Hashable {
        /// An edit made through this client.
        case local
        /// A change that came from the server.
        case remote
    }

    /// Records of a collection that this device did not hold before: created here (`.local`),
    /// or received from the server (`.remote`: created elsewhere, or brought by a first sync).
    case added(collection: String, ids: [String], origin: Origin)
    /// Records of a collection this device held were changed.
    case changed(collection: String, ids: [String], origin: Origin)
    /// Records of a collection were removed (purged here or elsewhere).
    case removed(collection: String, ids: [String])
    /// A note purged elsewhere held unsynced text here; the text lives on as a new note.
    case forked(from: String, to: String)
    /// The server merged a concurrent edit but could not place all of this device's text in
    /// these fields; the intended version is kept in the note's history as a conflict revision.
    case conflict(id: String, fields: [String])
    /// A full snapshot from the server was taken in (the first sync of this database, or the
    /// server found its cursor too old and sent everything again): records the server no
    /// longer has are gone (each also reported as `removed`). Apps that keep their own copies
    /// reload every list.
    case reset
    /// The server listed the user's spaces (protocol 2): joined, left, renamed or a role
    /// changed, perhaps; `LocalStore.spaces()` has them now.
    case spaces
    /// The sync state changed.
    case status(SyncStatus)
    /// Something went wrong; sync carries on where it can.
    case error(String)
}

/// Fans events out to every subscriber.
actor EventHub {
    private var continuations: [Int: AsyncStream<NotedEvent>.Continuation] = [:]
    private var counter = 0

    func subscribe() -> AsyncStream<NotedEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: NotedEvent.self, bufferingPolicy: .bufferingNewest(1000))
        counter += 1
        let key = counter
        continuations[key] = continuation
        continuation.onTermination = { _ in Task { await self.remove(key) } }
        return stream
    }

    func emit(_ event: NotedEvent) {
        for continuation in continuations.values { continuation.yield(event) }
    }

    private func remove(_ key: Int) {
        continuations[key] = nil
    }
}

extension EventHub {
    func emit(_ effect: StoreEffect, origin: NotedEvent.Origin) {
        for (collection, ids) in effect.byCollection(effect.removed) {
            emit(.removed(collection: collection, ids: ids))
        }
        for (from, to) in effect.forked { emit(.forked(from: from, to: to)) }
        let added = effect.changed.filter { effect.added.contains($0) }
        let changed = effect.changed.filter { !effect.added.contains($0) }
        for (collection, ids) in effect.byCollection(added) {
            emit(.added(collection: collection, ids: ids, origin: origin))
        }
        for (collection, ids) in effect.byCollection(changed) {
            emit(.changed(collection: collection, ids: ids, origin: origin))
        }
        for (id, fields) in effect.conflicts { emit(.conflict(id: id, fields: fields)) }
        for (id, message) in effect.refused { emit(.error("the server refused the change to \(id): \(message)")) }
    }
}
