import Foundation
import NotedCore

/// Encodes and decodes the fields column: compact JSON text (never `jsonb`, so that U+0000
/// survives on PostgreSQL exactly as on SQLite).
enum FieldsCoding {
    static func encode(_ fields: [String: JSONValue]) -> String {
        JSONValue.object(fields).jsonString
    }

    static func decode(_ text: String) throws -> [String: JSONValue] {
        guard let object = try JSONValue.parse(text).objectValue else {
            throw StoreError.corrupt("fields column is not a JSON object")
        }
        return object
    }
}

/// An error of a storage backend.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    private enum Kind: Sendable {
        case corrupt(String)
        case unsupportedURL(String)
        case unreachable(String)
        case unusable(String)
    }
    private let kind: Kind

    static func corrupt(_ what: String) -> StoreError { StoreError(kind: .corrupt(what)) }
    static func unsupportedURL(_ what: String) -> StoreError { StoreError(kind: .unsupportedURL(what)) }
    static func unreachable(_ what: String) -> StoreError { StoreError(kind: .unreachable(what)) }
    static func unusable(_ what: String) -> StoreError { StoreError(kind: .unusable(what)) }

    public var description: String {
        switch kind {
        case .corrupt(let what): "stored data is corrupt: \(what)"
        case .unsupportedURL(let what): "unsupported database URL: \(what)"
        case .unreachable(let what): "cannot reach the database: \(what)"
        case .unusable(let what): what
        }
    }
}

/// The protocol's record (GRDB also exports a `Record`).
public typealias Record = NotedCore.Record
