import Foundation
import NotedCore

/// What a client keeps to stay signed in.
public struct Credentials: Sendable, Hashable, Codable {
    public var server: String
    public var username: String
    public var userID: String
    public var accessToken: String
    public var refreshToken: String
    public var expiresAt: Date

    public init(
        server: String, username: String, userID: String, accessToken: String, refreshToken: String, expiresAt: Date
    ) {
        self.server = server
        self.username = username
        self.userID = userID
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
    }

    /// The `sub` claim of a JWT access token (read, not verified: the server verifies it).
    public static func subject(ofJWT token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        guard let data = Data(base64URLEncoded: String(parts[1])), let payload = try? JSONValue.parse(Array(data))
        else { return nil }
        return payload["sub"]?.stringValue
    }
}

/// Hands out a valid access token, refreshing it before it expires.
///
/// Refreshes are single-flight: concurrent callers share one refresh, so a rotated refresh
/// token is never presented twice (which would revoke the whole family).
public actor TokenManager {
    public private(set) var credentials: Credentials
    private let api: NotedAPI
    private let persist: @Sendable (Credentials) async throws -> Void
    private var refreshing: Task<Credentials, any Error>?

    public init(
        credentials: Credentials, api: NotedAPI, persist: @escaping @Sendable (Credentials) async throws -> Void
    ) {
        self.credentials = credentials
        self.api = api
        self.persist = persist
    }

    /// A token valid for at least `margin` more.
    public func accessToken(margin: TimeInterval = 60) async throws -> String {
        if credentials.expiresAt.timeIntervalSinceNow > margin { return credentials.accessToken }
        return try await refresh().accessToken
    }

    /// Refreshes now (or joins the refresh under way).
    @discardableResult
    public func refresh() async throws -> Credentials {
        if let refreshing { return try await refreshing.value }
        let current = credentials
        let api = api
        let persist = persist
        let task = Task { () throws -> Credentials in
            let response = try await api.refresh(refreshToken: current.refreshToken)
            var updated = current
            updated.accessToken = response.accessToken
            updated.refreshToken = response.refreshToken
            updated.expiresAt = response.expiresAt
            try await persist(updated)
            return updated
        }
        refreshing = task
        defer { refreshing = nil }
        let updated = try await task.value
        credentials = updated
        return updated
    }
}
