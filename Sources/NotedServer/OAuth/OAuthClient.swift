import Foundation

/// An application allowed to ask users for access through `/oauth/authorize`.
///
/// Every client is public (it keeps no secret: a native or browser app), so PKCE is what
/// binds the code to the app that asked for it.
public struct OAuthClient: Sendable, Hashable {
    /// The `client_id`.
    public var id: String
    /// Shown on the sign-in page.
    public var name: String
    /// Redirect URIs compared exactly; a loopback one (`http://127.0.0.1/…`, `http://[::1]/…`)
    /// also matches the same URI with any port (RFC 8252, section 7.3).
    public var redirectURIs: [String]

    public init(id: String, name: String, redirectURIs: [String]) {
        self.id = id
        self.name = name
        self.redirectURIs = redirectURIs
    }

    /// The command line client: loopback redirects on any port.
    public static let cli = OAuthClient(
        id: "noted-cli", name: "Noted command line",
        redirectURIs: ["http://127.0.0.1/callback", "http://[::1]/callback"])

    /// The `client_id` of the web app.
    public static let webClientID = "noted-web"

    /// The web app served by the server at `origins` (its issuer and `--allowed-origin`s),
    /// and nowhere else: never at an origin taken from a request's `Host` header, which any
    /// client (or a DNS-rebinding page) can set. A loopback origin also counts under the other
    /// loopback names with the same port (`http://localhost:8080` for `http://127.0.0.1:8080`).
    public static func web(origins: [String]) -> OAuthClient {
        var uris: [String] = []
        for origin in origins {
            for alias in [origin] + loopbackAliases(of: origin) where !uris.contains(alias + "/") {
                uris.append(alias + "/")
            }
        }
        return OAuthClient(id: webClientID, name: "Noted web app", redirectURIs: uris)
    }

    /// For one of `http://127.0.0.1:P`, `http://localhost:P` and `http://[::1]:P`, the other two.
    /// Port 0 (a server on a port the system picks, as tests run it) stands for any loopback
    /// port: `http://127.0.0.1` and `http://[::1]` without a port, which ``matches(_:registered:)``
    /// takes with any port (RFC 8252 section 7.3).
    static func loopbackAliases(of origin: String) -> [String] {
        let names = ["127.0.0.1", "localhost", "[::1]"]
        for name in names where origin.lowercased().hasPrefix("http://\(name):") {
            let port = String(origin.dropFirst("http://\(name):".count))
            if port == "0" { return ["http://127.0.0.1", "http://[::1]"] }
            guard let number = Int(port), (1...65535).contains(number), String(number) == port else { return [] }
            return names.filter { $0 != name }.map { "http://\($0):\(port)" }
        }
        return []
    }

    /// Whether `candidate` is one of this client's redirect URIs.
    public func allows(redirectURI candidate: String) -> Bool {
        redirectURIs.contains { Self.matches(candidate, registered: $0) }
    }

    /// Exact match, or a loopback URI that differs only by its port.
    static func matches(_ candidate: String, registered: String) -> Bool {
        if candidate == registered { return true }
        for host in ["http://127.0.0.1", "http://[::1]"] where registered.hasPrefix(host) {
            let rest = registered.dropFirst(host.count)
            guard rest.first == "/", candidate.hasPrefix(host + ":") else { return false }
            let afterColon = candidate.dropFirst(host.count + 1)
            let digits = afterColon.prefix { $0.isASCII && $0.isNumber }
            guard (1...5).contains(digits.count), let port = Int(digits), (1...65535).contains(port),
                !digits.hasPrefix("0")
            else { return false }
            return afterColon.dropFirst(digits.count) == rest
        }
        return false
    }
}

/// The clients a server knows: the built-in ones and those configured for third-party apps.
public struct OAuthClients: Sendable {
    private var byID: [String: OAuthClient]

    public init(_ clients: [OAuthClient]) {
        var byID: [String: OAuthClient] = [:]
        for client in clients where byID[client.id] == nil { byID[client.id] = client }
        self.byID = byID
    }

    public subscript(id: String) -> OAuthClient? { byID[id] }

    /// Parses `--oauth-client ID=URI[,URI…]` (name optional: `ID:Name=URI…`).
    public static func parse(_ argument: String) -> OAuthClient? {
        guard let equals = argument.firstIndex(of: "=") else { return nil }
        let head = argument[..<equals]
        let uris = argument[argument.index(after: equals)...].split(separator: ",").map(String.init)
        let parts = head.split(separator: ":", maxSplits: 1).map(String.init)
        guard let id = parts.first, !id.isEmpty, id.count <= 100, !uris.isEmpty,
            id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }),
            uris.allSatisfy({ URL(string: $0)?.scheme != nil && !$0.contains("#") })
        else { return nil }
        return OAuthClient(id: id, name: parts.count > 1 ? parts[1] : id, redirectURIs: uris)
    }
}
