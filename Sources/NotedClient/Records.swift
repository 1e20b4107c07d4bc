import Foundation
import GRDB
import NotedCore

/// A record type an app keeps and syncs with Noted: a value type, encoded into the fields of its
/// collection's schema (docs/collections.md).
///
/// ```swift
/// struct Worry: SyncedRecord {
///     static let schema = try! CollectionSchema(json: JSONValue.parse(worriesJSON))
///     var text = ""
///     var intensity = 0
///     var tags: [String] = []
/// }
/// let worries = client.records(Worry.self)
/// let worry = try await worries.create(Worry(text: "the exam", intensity: 7))
/// ```
///
/// The default field coding goes through `Codable`: each stored property is the field of the
/// same name (text fields as `String`, set fields as `[String]` or `Set<String>`, scalars as
/// `String`, `Bool`, numbers or optionals of them). A field missing from a stored record decodes
/// from its schema default.
public protocol SyncedRecord: Codable, Sendable, Hashable {
    /// The collection's schema; declare it once, and pass it to `NotedClient(collections:)`.
    static var schema: CollectionSchema { get }
    /// The value from a record's fields (every field of the schema is present).
    init(fields: [String: JSONValue]) throws
    /// The value's fields.
    func fields() throws -> [String: JSONValue]
}

extension SyncedRecord {
    public init(fields: [String: JSONValue]) throws {
        do {
            self = try JSONDecoder().decode(Self.self, from: Data(JSONValue.object(fields).jsonString.utf8))
        } catch {
            throw NotedClientError(.storage, "a \(Self.schema.name) record does not decode as \(Self.self): \(error)")
        }
    }

    public func fields() throws -> [String: JSONValue] {
        let data: Data
        do {
            data = try JSONEncoder().encode(self)
        } catch {
            throw NotedClientError(.invalidInput, "\(Self.self) does not encode: \(error)")
        }
        guard let fields = try JSONValue.parse(Array(data)).objectValue else {
            throw NotedClientError(.invalidInput, "\(Self.self) must encode as a JSON object of its fields")
        }
        return fields
    }
}

/// A record of an app's type as this device holds it.
public struct Stored<Value: SyncedRecord>: Sendable, Hashable, Identifiable {
    public var id: String
    public var value: Value
    /// The server revision the local state is based on; 0 until first acknowledged.
    public var rev: Int64
    public var createdAt: Date
    public var updatedAt: Date
    /// True while local edits are not yet acknowledged by the server.
    public var pending: Bool
    /// Why the server refused the last change for good (the edit stays on this device).
    public var refusal: String?
    /// Text fields of the last merge that could not place all of this device's edit.
    public var conflicts: [String]
    /// The shared space the record is in; nil for the personal space.
    public var space: String?

    init(_ record: StoredRecord) throws {
        id = record.id
        value = try Value(fields: record.fields)
        rev = record.rev
        createdAt = record.createdAt
        updatedAt = record.updatedAt
        pending = record.pending
        refusal = record.refusal
        conflicts = record.conflicts
        space = record.space
    }
}

/// What happened to records of one collection, for `Records.observe()`.
public enum RecordChange: Sendable, Hashable {
    /// New on this device: created here (`.local`) or received (`.remote`).
    case added(ids: [String], origin: NotedEvent.Origin)
    /// Changed, here (`.local`) or on another device (`.remote`).
    case changed(ids: [String], origin: NotedEvent.Origin)
    /// Purged here or elsewhere.
    case removed(ids: [String])
    /// A full snapshot from the server was taken in (`NotedEvent.reset`): reload.
    case reset
}

/// The records of one collection, typed: create, update, delete, get, query, observe, history
/// and restore, offline-first through the client's one store, outbox and sync engine.
public struct Records<Value: SyncedRecord>: Sendable {
    public let client: NotedClient
    var collection: String { Value.schema.name }

    @discardableResult
    /// - Parameter space: a shared space the user may write in (nil: the personal space).
    public func create(_ value: Value, id: String = UUID().uuidString.lowercased(), space: String? = nil)
        async throws -> Stored<Value>
    {
        let fields = try value.fields()
        return try await write { try $0.create(collection, fields: fields, id: id, space: space) }
    }

    /// Changes a record in one local transaction; it syncs as one change. Only the fields the
    /// edit changed are written: a field the type does not model keeps its value, and a
    /// property set to `nil` stores `null`.
    @discardableResult
    public func update(_ id: String, _ edit: @Sendable (inout Value) throws -> Void) async throws -> Stored<Value> {
        let collection = collection
        return try await write { transaction in
            try transaction.update(collection, id: id) { fields in
                var value = try Value(fields: fields)
                let before = try value.fields()
                try edit(&value)
                let after = try value.fields()
                for name in Set(before.keys).union(after.keys) where before[name] != after[name] {
                    fields[name] = after[name] ?? .null
                }
            }
        }
    }

    /// Deletes a record: to the trash where the schema has a boolean `trashed` field (restorable
    /// with `update`), else for good (`purge`).
    public func delete(_ id: String) async throws {
        if Value.schema.fields["trashed"]?.scalarTypes.contains(.bool) == true {
            let collection = collection
            _ = try await write { try $0.update(collection, id: id) { $0["trashed"] = true } }
        } else {
            try await purge(id)
        }
    }

    /// Deletes a record for good, on every device.
    public func purge(_ id: String) async throws {
        let collection = collection
        let effect = try await client.store.transaction { try $0.purge(collection, id: id) }.effect
        await client.edited(effect)
    }

    /// Gives up this device's unsent edits of a record, such as one the server refused
    /// (`Stored.refusal`): the server's version returns (see `NotedClient.discardLocalChanges`).
    public func discardLocalChanges(_ id: String) async throws {
        try await client.discardLocalChanges(id)
    }

    public func get(_ id: String) async throws -> Stored<Value>? {
        try await client.store.record(collection, id: id).map(Stored.init)
    }

    /// Records matching `query`: equality on `indexed` scalars, an element of a set, words of
    /// `searchable` text, sorted by `indexed` scalars or recency.
    public func query(_ query: RecordQuery = RecordQuery()) async throws -> [Stored<Value>] {
        try await client.store.records(collection, matching: query).map(Stored.init)
    }

    /// The records matching `query`, now and after every change to the database (local edits
    /// and synced ones alike): the way to drive a list view.
    public func observe(_ query: RecordQuery) throws -> AsyncThrowingMapSequence<
        AsyncValueObservation<[StoredRecord]>, [Stored<Value>]
    > {
        try client.store.observe(collection, matching: query).map { records in try records.map(Stored.init) }
    }

    /// Changes to this collection's records, as they happen; each call is a new subscriber.
    public func observe() async -> AsyncStream<RecordChange> {
        let events = await client.events()
        let collection = collection
        return AsyncStream { continuation in
            let task = Task {
                for await event in events {
                    switch event {
                    case .added(collection, let ids, let origin): continuation.yield(.added(ids: ids, origin: origin))
                    case .changed(collection, let ids, let origin):
                        continuation.yield(.changed(ids: ids, origin: origin))
                    case .removed(collection, let ids): continuation.yield(.removed(ids: ids))
                    case .reset: continuation.yield(.reset)
                    default: continue
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The server's revision history of a record (needs a server and a sign-in).
    public func history(_ id: String) async throws -> [RevisionSummary] {
        let (api, token) = try await client.authorized()
        return try await api.revisions(of: id, in: collection, token: token)
    }

    /// One revision's value.
    public func revision(_ id: String, rev: Int64, conflict: Bool = false) async throws -> Value {
        let (api, token) = try await client.authorized()
        let fields = try await api.revision(of: id, in: collection, rev: rev, conflict: conflict, token: token)
        return try Value(fields: Value.schema.completed(fields))
    }

    /// Makes a record what it was at `rev`: one change like any edit, merged with concurrent ones.
    @discardableResult
    public func restore(_ id: String, rev: Int64) async throws -> Stored<Value> {
        let old = try await revision(id, rev: rev)
        return try await update(id) { $0 = old }
    }

    private func write(_ body: @Sendable (inout LocalTransaction) throws -> StoredRecord) async throws -> Stored<Value>
    {
        let (record, effect) = try await client.store.transaction(body)
        await client.edited(effect)
        return try Stored(record)
    }
}

extension NotedClient {
    /// The typed records of an app's collection; its schema must be among the client's
    /// `collections`, else every call throws `invalidInput`.
    public func records<Value: SyncedRecord>(_ type: Value.Type) -> Records<Value> {
        Records(client: self)
    }

    /// Runs `body` as one local transaction over records of any collections: all its edits are
    /// stored, or none; each record then syncs as its own change, exactly once.
    @discardableResult
    public func transaction<T: Sendable>(_ body: @Sendable (inout LocalTransaction) throws -> T) async throws -> T {
        let (value, effect) = try await store.transaction(body)
        await edited(effect)
        return value
    }
}
