import Foundation
import NotedCore

/// The token response of sign-in and refresh.
public struct TokenResponse: Sendable, Hashable {
    public var accessToken: String
    public var refreshToken: String
    public var expiresAt: Date
}

/// One entry of a record's revision history.
public struct RevisionSummary: Sendable, Hashable {
    public var rev: Int64
    public var updatedAt: String
    public var device: String?
    public var conflict: Bool
    /// Bytes of the revision's fields as JSON, where the server says (docs/protocol.md).
    public var size: Int64? = nil
    /// The username of whoever made it, where the server says (revisions saved since spaces).
    public var author: String? = nil
}

/// One signed-in device of the account, as `GET /v1/account/devices` lists it.
public struct SignedInDevice: Sendable, Hashable {
    /// The sign-in's id, which `signOut(device:token:)` takes.
    public var id: String
    public var client: String
    public var device: String?
    public var signedInAt: Date
    public var lastSeen: Date
    /// The sign-in asking.
    public var current: Bool

    init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue, let client = json["client"]?.stringValue else { return nil }
        self.id = id
        self.client = client
        device = json["device"]?.stringValue
        signedInAt = Date(timeIntervalSince1970: Double(json["signed_in_at"]?.intValue ?? 0) / 1000)
        lastSeen = Date(timeIntervalSince1970: Double(json["last_seen"]?.intValue ?? 0) / 1000)
        current = json["current"]?.boolValue ?? false
    }
}

/// The HTTP side of the protocol: accounts, tokens, history.
public struct NotedAPI: Sendable {
    public var server: URL
    public var http: any HTTPTransport
    /// Attachments' transfers, which may take minutes on a slow link.
    public var transfers: any HTTPTransport

    public init(
        server: URL, http: any HTTPTransport = DefaultHTTPTransport(),
        transfers: any HTTPTransport = DefaultHTTPTransport(timeout: .seconds(600))
    ) {
        self.server = server
        self.http = http
        self.transfers = transfers
    }

    /// `POST /v1/accounts`; returns the new user's id.
    public func register(username: String, password: String) async throws -> String {
        let response = try await json(
            "POST", "/v1/accounts", body: ["username": .string(username), "password": .string(password)])
        guard let id = response["user"]?["id"]?.stringValue else {
            throw NotedClientError(.server, "the server sent no user id")
        }
        return id
    }

    /// `POST /v1/sessions`: first-party sign-in.
    /// With two-factor sign-in on, `otp` is the authenticator app's current code or a recovery
    /// code; without it such an account answers `otp_required`.
    public func signIn(username: String, password: String, otp: String? = nil, device: String) async throws
        -> TokenResponse
    {
        var body: [String: JSONValue] = [
            "username": .string(username), "password": .string(password), "device": .string(device),
        ]
        if let otp { body["otp"] = .string(otp) }
        let response = try await json("POST", "/v1/sessions", body: .object(body))
        return try tokens(response)
    }

    /// `POST /oauth/token` with a refresh token (rotated: the old one stops working).
    public func refresh(refreshToken: String) async throws -> TokenResponse {
        let form =
            "grant_type=refresh_token&refresh_token="
            + (refreshToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        let response = try await send(
            "POST", "/oauth/token", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(form.utf8))
        return try tokens(response)
    }

    /// `POST /oauth/token` with an authorization code and its PKCE verifier.
    public func exchange(code: String, redirectURI: String, verifier: String, clientID: String) async throws
        -> TokenResponse
    {
        func encode(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        }
        let form =
            "grant_type=authorization_code&code=\(encode(code))&redirect_uri=\(encode(redirectURI))"
            + "&client_id=\(encode(clientID))&code_verifier=\(encode(verifier))"
        let response = try await send(
            "POST", "/oauth/token", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(form.utf8))
        return try tokens(response)
    }

    /// `POST /oauth/revoke` (best effort: older servers do not have it).
    public func revoke(refreshToken: String) async {
        let form =
            "token=" + (refreshToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            + "&token_type_hint=refresh_token"
        _ = try? await send(
            "POST", "/oauth/revoke", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: Data(form.utf8))
    }

    /// `GET /v1/records/notes/{id}/revisions[?space=ID]` (`space`: a shared space's id).
    public func revisions(of id: String, in collection: String = "notes", space: String? = nil, token: String)
        async throws -> [RevisionSummary]
    {
        let response = try await send(
            "GET", "/v1/records/\(collection)/\(id)/revisions" + Self.spaceQuery(space, first: true),
            headers: ["Authorization": "Bearer \(token)"])
        return (response["revisions"]?.arrayValue ?? []).compactMap { value in
            guard let rev = value["rev"]?.intValue else { return nil }
            return RevisionSummary(
                rev: rev, updatedAt: value["updatedAt"]?.stringValue ?? "", device: value["device"]?.stringValue,
                conflict: value["conflict"]?.boolValue ?? false, size: value["size"]?.intValue,
                author: value["author"]?.stringValue)
        }
    }

    /// `GET /v1/records/{collection}/{id}/revisions/{rev}`: that revision's fields.
    public func revision(
        of id: String, in collection: String = "notes", rev: Int64, conflict: Bool = false, space: String? = nil,
        token: String
    ) async throws -> [String: JSONValue] {
        let path =
            "/v1/records/\(collection)/\(id)/revisions/\(rev)" + (conflict ? "?conflict=true" : "")
            + Self.spaceQuery(space, first: !conflict)
        let response = try await send("GET", path, headers: ["Authorization": "Bearer \(token)"])
        return response["fields"]?.objectValue ?? response.objectValue ?? [:]
    }

    /// `?space=ID` (or `&space=ID`) for a shared space; nothing for the personal space.
    static func spaceQuery(_ space: String?, first: Bool) -> String {
        guard let space else { return "" }
        let encoded = space.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["-", "_"])) ?? space
        return (first ? "?" : "&") + "space=" + encoded
    }

    // MARK: The signed-in account (docs/protocol.md, "Accounts")

    /// `POST /v1/account/password`: every other sign-in of the user ends; returns how many did.
    /// `code`: a current code (or a recovery code), which an account with two-factor sign-in needs.
    public func changePassword(current: String, new: String, code: String? = nil, token: String) async throws -> Int {
        var body: [String: JSONValue] = ["current_password": .string(current), "new_password": .string(new)]
        if let code { body["code"] = .string(code) }
        let response = try await json("POST", "/v1/account/password", body: .object(body), token: token)
        return Int(response["signed_out"]?.intValue ?? 0)
    }

    /// `GET /v1/account/devices`.
    public func devices(token: String) async throws -> [SignedInDevice] {
        let response = try await send("GET", "/v1/account/devices", headers: ["Authorization": "Bearer \(token)"])
        return (response["devices"]?.arrayValue ?? []).compactMap(SignedInDevice.init(json:))
    }

    /// `DELETE /v1/account/devices/{id}`, or every one with `nil`; returns how many ended.
    public func signOut(device: String?, token: String) async throws -> Int {
        guard let device else {
            let response = try await send(
                "DELETE", "/v1/account/devices", headers: ["Authorization": "Bearer \(token)"])
            return Int(response["signed_out"]?.intValue ?? 0)
        }
        guard device.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
            throw NotedClientError(.invalidInput, "no such device: \(device)")
        }
        _ = try await send("DELETE", "/v1/account/devices/\(device)", headers: ["Authorization": "Bearer \(token)"])
        return 1
    }

    /// `GET /v1/account`: the username and whether two-factor sign-in is on.
    public func account(token: String) async throws -> AccountInfo {
        let response = try await send("GET", "/v1/account", headers: ["Authorization": "Bearer \(token)"])
        return AccountInfo(
            id: response["id"]?.stringValue ?? "", username: response["username"]?.stringValue ?? "",
            twoFactor: response["two_factor"]?["enabled"]?.boolValue ?? false,
            recoveryCodesLeft: Int(response["two_factor"]?["recovery_codes_left"]?.intValue ?? 0),
            usage: response["usage"].flatMap { usage in
                usage["bytes"]?.intValue.map { bytes in
                    AccountUsage(
                        bytes: bytes, historyBytes: usage["history_bytes"]?.intValue ?? 0,
                        records: usage["records"]?.intValue ?? 0,
                        quotaBytes: usage["quota_bytes"]?.intValue, quotaRecords: usage["quota_records"]?.intValue)
                }
            })
    }

    /// `POST /v1/account/2fa/setup`: a new authenticator secret and its `otpauth://` URI.
    public func beginTwoFactor(password: String, token: String) async throws -> (secret: String, uri: String) {
        let response = try await json(
            "POST", "/v1/account/2fa/setup", body: ["password": .string(password)], token: token)
        guard let secret = response["secret"]?.stringValue, let uri = response["uri"]?.stringValue else {
            throw NotedClientError(.server, "the server sent no secret")
        }
        return (secret, uri)
    }

    /// `POST /v1/account/2fa/enable` with the app's first code: the recovery codes.
    public func enableTwoFactor(code: String, token: String) async throws -> [String] {
        let response = try await json("POST", "/v1/account/2fa/enable", body: ["code": .string(code)], token: token)
        return (response["recovery_codes"]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    /// `POST /v1/account/2fa/disable`: the password and a current or recovery code.
    public func disableTwoFactor(password: String, code: String, token: String) async throws {
        _ = try await json(
            "POST", "/v1/account/2fa/disable", body: ["password": .string(password), "code": .string(code)],
            token: token)
    }

    /// `DELETE /v1/account`: the account and everything in it, on the server.
    /// `code` as for ``changePassword(current:new:code:token:)``.
    public func deleteAccount(password: String, code: String? = nil, token: String) async throws {
        var body: [String: JSONValue] = ["password": .string(password)]
        if let code { body["code"] = .string(code) }
        _ = try await json("DELETE", "/v1/account", body: .object(body), token: token)
    }

    private func json(_ method: String, _ path: String, body: JSONValue, token: String? = nil) async throws -> JSONValue
    {
        var headers = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return try await send(method, path, headers: headers, body: Data(body.jsonString.utf8))
    }

    private func send(_ method: String, _ path: String, headers: [String: String] = [:], body: Data? = nil) async throws
        -> JSONValue
    {
        let response = try await http.send(
            HTTPRequestData(method: method, url: try url(path), headers: headers, body: body))
        return try Self.checked(response)
    }

    func url(_ path: String) throws -> URL {
        guard let url = URL(string: server.absoluteString.trimmingSuffix("/") + path) else {
            throw NotedClientError(.invalidInput, "bad server URL \(server.absoluteString)")
        }
        return url
    }

    /// The JSON of a 2xx answer; any other answer as the error it says.
    static func checked(_ response: HTTPResponseData) throws -> JSONValue {
        let value = (try? JSONValue.parse(response.body)) ?? .null
        guard (200..<300).contains(response.status) else {
            let code = value["error"]?.stringValue ?? "http_\(response.status)"
            let message =
                value["message"]?.stringValue ?? value["error_description"]?.stringValue
                ?? "the server answered \(response.status)"
            let kind: NotedClientError.Kind =
                response.status == 401 || code == "invalid_grant"
                ? .unauthenticated
                : response.status == 404 || response.status == 410
                    ? .notFound
                    : (400..<500).contains(response.status) ? .invalidInput : .server
            throw NotedClientError(kind, "\(message) (\(code))")
        }
        return value
    }

    private func tokens(_ value: JSONValue) throws -> TokenResponse {
        guard let access = value["access_token"]?.stringValue, let refresh = value["refresh_token"]?.stringValue,
            let expiresIn = value["expires_in"]?.intValue
        else {
            throw NotedClientError(.server, "the server sent an incomplete token response")
        }
        return TokenResponse(
            accessToken: access, refreshToken: refresh, expiresAt: Date().addingTimeInterval(Double(expiresIn)))
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

extension JSONValue {
    static func parse(_ data: Data) throws -> JSONValue {
        try parse(Array(data))
    }
}

/// The signed-in account, as `GET /v1/account` describes it.
public struct AccountInfo: Sendable, Hashable {
    public var id: String
    public var username: String
    public var twoFactor: Bool
    public var recoveryCodesLeft: Int
    /// What the account stores as the quota counts it (records, files and history), its
    /// history's part, and its live records; nil from a server that does not say.
    public var usage: AccountUsage?
}

/// `GET /v1/account`'s `usage` (docs/protocol.md).
public struct AccountUsage: Sendable, Hashable {
    public var bytes: Int64
    public var historyBytes: Int64
    public var records: Int64
    /// Nil: no limit.
    public var quotaBytes: Int64?
    public var quotaRecords: Int64?
}
