import AsyncHTTPClient
import Crypto
import Foundation
import HummingbirdBcrypt
import JWTKit
import Logging
import NIOCore
import NotedCore

/// An OpenID issuer whose access tokens the sync API accepts (`--trust-issuer`).
public struct TrustedIssuer: Sendable, Hashable {
    public enum KeySource: Sendable, Hashable {
        /// The JWK Set itself.
        case jwks(String)
        /// An OpenID discovery document naming `jwks_uri` (its `issuer` must match).
        case discovery(String)
    }

    /// The exact `iss` of its tokens.
    public var issuer: String
    public var keys: KeySource
    /// The `aud` its tokens must carry (the API identifier at the provider).
    public var audience: String
    /// The claim naming the user; `sub` unless told.
    public var claim: String = "sub"
    /// An unknown `kid` refetches the key set at most once per this many seconds.
    public var refetchInterval: TimeInterval = 60

    public init(
        issuer: String, keys: KeySource, audience: String, claim: String = "sub", refetchInterval: TimeInterval = 60
    ) {
        self.issuer = issuer
        self.keys = keys
        self.audience = audience
        self.claim = claim
        self.refetchInterval = refetchInterval
    }

    /// Parses `issuer=URL,jwks=URL|discovery=URL,audience=AUD[,claim=NAME][,refetch=SECONDS]`.
    /// - Returns: nil with a reason when the text is not such a specification.
    public static func parse(_ text: String) -> Result<TrustedIssuer, ParseError> {
        var fields: [String: String] = [:]
        for part in text.split(separator: ",") {
            guard let equals = part.firstIndex(of: "=") else { return .failure(ParseError("\(part) is not KEY=VALUE")) }
            let key = part[..<equals].trimmingCharacters(in: .whitespaces)
            guard ["issuer", "jwks", "discovery", "audience", "claim", "refetch"].contains(key) else {
                return .failure(ParseError("unknown key \(key)"))
            }
            guard fields[key] == nil else { return .failure(ParseError("\(key) given twice")) }
            fields[key] = part[part.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        }
        guard let issuer = fields["issuer"], !issuer.isEmpty else { return .failure(ParseError("issuer= is required")) }
        guard let audience = fields["audience"], !audience.isEmpty else {
            return .failure(ParseError("audience= is required"))
        }
        let source: KeySource
        switch (fields["jwks"], fields["discovery"]) {
        case (let jwks?, nil): source = .jwks(jwks)
        case (nil, let discovery?): source = .discovery(discovery)
        default: return .failure(ParseError("give exactly one of jwks= or discovery="))
        }
        for url in [issuer, fields["jwks"], fields["discovery"]].compactMap({ $0 }) {
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased()),
                parsed.host?.isEmpty == false
            else {
                return .failure(ParseError("\(url) is not an http(s) URL"))
            }
            // Keys fetched in the clear could be swapped on the way: https, except on this machine.
            guard parsed.scheme?.lowercased() == "https" || isLoopback(parsed) else {
                return .failure(ParseError("\(url) must be https (http only for loopback addresses)"))
            }
        }
        var trusted = TrustedIssuer(issuer: issuer, keys: source, audience: audience)
        if let claim = fields["claim"] {
            guard !claim.isEmpty else { return .failure(ParseError("claim= must not be empty")) }
            trusted.claim = claim
        }
        if let refetch = fields["refetch"] {
            guard let seconds = Int(refetch), (1...86400).contains(seconds) else {
                return .failure(ParseError("refetch= is a number of seconds from 1 to 86400"))
            }
            trusted.refetchInterval = TimeInterval(seconds)
        }
        return .success(trusted)
    }

    /// Whether `url` names this machine (localhost, 127.0.0.0/8 or ::1).
    static func isLoopback(_ url: URL) -> Bool {
        guard var host = url.host?.lowercased() else { return false }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// Scheme, host and port of `url` (the port made explicit), for same-origin checks.
    static func origin(_ url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
        return "\(scheme)://\(host):\(url.port ?? (scheme == "https" ? 443 : 80))"
    }

    public struct ParseError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}

/// Verifies access tokens of trusted external issuers and maps them to local users.
///
/// Each issuer has its own key set, fetched over HTTP when first needed and cached; a token
/// whose `kid` is not in the set triggers at most one refetch per `refetchInterval`. Only
/// ES256 (P-256), RS256 and EdDSA (Ed25519) keys and tokens are accepted, and the token's `alg`
/// must be the key's.
final class ExternalIssuers: Sendable {
    static let allowedAlgorithms: Set<String> = ["ES256", "RS256", "EdDSA"]
    /// The furthest `exp` accepted: a day from now.
    static let maxLifetime: TimeInterval = 86_400

    /// Leeway for `exp` and `nbf`.
    static let leeway: TimeInterval = 60
    /// Cached keys are refetched on use after this long, so that keys the issuer withdrew go away.
    static let maxKeyAge: TimeInterval = 10 * 60

    private let issuers: [String: IssuerKeys]
    private let store: any AccountStore
    private let logger: Logger

    init(_ trusted: [TrustedIssuer], store: any AccountStore, logger: Logger) {
        var issuers: [String: IssuerKeys] = [:]
        for issuer in trusted { issuers[issuer.issuer] = IssuerKeys(issuer, logger: logger) }
        self.issuers = issuers
        self.store = store
        self.logger = logger
    }

    func trusts(_ issuer: String) -> Bool { issuers[issuer] != nil }

    /// Verifies a token whose (unverified) `iss` is a trusted issuer; header and payload are parsed already.
    func verify(_ token: String, header: JSONValue, payload: JSONValue, now: Date) async throws(TokenError)
        -> VerifiedToken
    {
        func invalid(_ reason: String) -> TokenError { TokenError(kind: .invalid, reason: reason) }
        guard let iss = payload["iss"]?.stringValue, let keys = issuers[iss] else { throw invalid("untrusted issuer") }
        let trusted = keys.trusted
        // The typ rule of docs/protocol.md 7.1: an access token, never an ID or refresh token.
        guard let typ = header["typ"]?.stringValue?.lowercased(), ["at+jwt", "application/at+jwt", "jwt"].contains(typ)
        else {
            throw invalid("typ is not at+jwt or JWT")
        }
        if payload["nonce"] != nil || payload["at_hash"] != nil || payload["c_hash"] != nil {
            throw invalid("an ID token")
        }
        if let inner = payload["typ"], inner.stringValue?.lowercased() != "bearer" {
            throw invalid("payload typ is not Bearer")
        }
        guard let alg = header["alg"]?.stringValue, Self.allowedAlgorithms.contains(alg) else {
            throw invalid("algorithm not allowed")
        }
        guard let kid = header["kid"]?.stringValue, !kid.isEmpty, kid.utf8.count <= 256 else { throw invalid("no kid") }
        guard let key = await keys.key(kid: kid, now: now) else { throw invalid("unknown kid") }
        guard key.alg == alg else { throw invalid("alg does not match the key") }
        do {
            _ = try await key.collection.verify(token, as: SignatureOnly.self)
        } catch {
            throw invalid("signature invalid")
        }
        // Claims, checked on the verified payload.
        let audiences: [String] =
            payload["aud"]?.stringValue.map { [$0] } ?? payload["aud"]?.arrayValue?.compactMap(\.stringValue) ?? []
        guard audiences.contains(trusted.audience) else { throw invalid("wrong audience") }
        guard let exp = Self.seconds(payload["exp"]) else { throw invalid("no exp") }
        guard Date(timeIntervalSince1970: exp) > now.addingTimeInterval(-Self.leeway) else {
            throw TokenError(kind: .expired, reason: "expired")
        }
        // An access token lives minutes, not years; and a far `exp` must not reach time
        // arithmetic (an `exp` of 1e300 trapped the session's timer and killed the process).
        guard exp <= now.timeIntervalSince1970 + Self.maxLifetime else { throw invalid("exp more than a day away") }
        if payload["nbf"] != nil {
            guard let nbf = Self.seconds(payload["nbf"]) else { throw invalid("nbf is not a number") }
            guard Date(timeIntervalSince1970: nbf) <= now.addingTimeInterval(Self.leeway) else {
                throw invalid("not valid yet")
            }
        }
        guard let subject = payload[trusted.claim]?.stringValue, (1...255).contains(subject.count),
            !subject.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else { throw invalid("no usable \(trusted.claim) claim") }
        let clientID = payload["client_id"]?.stringValue ?? payload["azp"]?.stringValue ?? "external"
        let userID: String
        do {
            userID = try await localUser(issuer: iss, subject: subject)
        } catch {
            logger.error(
                "cannot create the local user of an external token",
                metadata: ["issuer": .string(iss), "error": "\(error)"])
            throw invalid("store error")
        }
        return VerifiedToken(userID: userID, clientID: clientID, expiresAt: Date(timeIntervalSince1970: exp))
    }

    /// The local user of an issuer's subject, created on first use. The key `ext:<base64url(issuer)>:<subject>`
    /// can never equal a built-in username key (those have no `:`), nor another issuer's.
    private func localUser(issuer: String, subject: String) async throws -> String {
        let key = "ext:\(Data(issuer.utf8).base64URLEncodedString):\(subject)"
        if let user = try await store.user(usernameKey: key) { return user.id }
        // No password signs in as this user: the hash is of 256 random bits nobody keeps.
        let secret = Accounts.newRefreshToken()
        let hash = Bcrypt.hash(secret, cost: 4)
        let user = UserAccount(
            id: UUID().uuidString.lowercased(), username: "\(subject) (\(issuer))", usernameKey: key, passwordHash: hash
        )
        if try await store.createUser(user, now: Date()) {
            logger.info(
                "created the local user of an external identity",
                metadata: ["issuer": .string(issuer), "user": .string(user.id)])
            return user.id
        }
        // Another request created it first.
        guard let user = try await store.user(usernameKey: key) else {
            throw TokenError(kind: .invalid, reason: "user vanished")
        }
        return user.id
    }

    static func seconds(_ value: JSONValue?) -> TimeInterval? {
        switch value {
        case .int(let seconds)?: TimeInterval(seconds)
        case .double(let seconds)? where seconds.isFinite: seconds
        default: nil
        }
    }
}

/// Decodes nothing: the signature is checked by JWTKit, the claims by `ExternalIssuers`.
private struct SignatureOnly: JWTPayload {
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// One usable public key of an issuer.
struct IssuerKey: Sendable {
    let alg: String
    /// Holds this key only, so that JWTKit can never fall back to another.
    let collection: JWTKeyCollection
}

/// One issuer's cached key set and its refetch schedule.
actor IssuerKeys {
    let trusted: TrustedIssuer
    private let logger: Logger
    private var keys: [String: IssuerKey] = [:]
    private var fetchedAt: Date?
    private var fetching: Task<Void, Never>?

    init(_ trusted: TrustedIssuer, logger: Logger) {
        self.trusted = trusted
        self.logger = logger
    }

    /// The key of `kid`, refetching the set if it is unknown (or old) and the last fetch is
    /// at least `refetchInterval` ago.
    func key(kid: String, now: Date) async -> IssuerKey? {
        let stale = fetchedAt.map { now.timeIntervalSince($0) >= ExternalIssuers.maxKeyAge } ?? true
        if keys[kid] == nil || stale {
            let due = fetchedAt.map { now.timeIntervalSince($0) >= trusted.refetchInterval } ?? true
            if let fetching {
                await fetching.value
            } else if due {
                let task = Task { await self.refetch() }
                fetching = task
                await task.value
                fetching = nil
            }
        }
        return keys[kid]
    }

    private func refetch() async {
        fetchedAt = Date()
        do {
            let fetched = try await Self.fetchKeys(trusted)
            keys = fetched
            logger.info(
                "fetched the keys of a trusted issuer",
                metadata: ["issuer": .string(trusted.issuer), "keys": .stringConvertible(fetched.count)])
        } catch {
            // The cached keys stay; requests needing an unknown key are refused.
            logger.warning(
                "cannot fetch the keys of a trusted issuer",
                metadata: ["issuer": .string(trusted.issuer), "error": "\(error)"])
        }
    }

    struct FetchError: Error, CustomStringConvertible {
        let description: String
    }

    static func fetchKeys(_ trusted: TrustedIssuer) async throws -> [String: IssuerKey] {
        let jwksURL: String
        switch trusted.keys {
        case .jwks(let url):
            jwksURL = url
        case .discovery(let url):
            let document = try await getJSON(url)
            guard document["issuer"]?.stringValue == trusted.issuer else {
                throw FetchError(description: "the discovery document names another issuer")
            }
            guard let uri = document["jwks_uri"]?.stringValue, let parsed = URL(string: uri),
                ["http", "https"].contains(parsed.scheme?.lowercased())
            else {
                throw FetchError(description: "the discovery document has no http(s) jwks_uri")
            }
            // A discovery document may only point at keys on the issuer's own origin.
            guard let issuerURL = URL(string: trusted.issuer), let origin = TrustedIssuer.origin(parsed),
                origin == TrustedIssuer.origin(issuerURL)
            else {
                throw FetchError(
                    description: "the discovery document's jwks_uri \(uri.prefix(200)) is not on the issuer's origin")
            }
            jwksURL = uri
        }
        let set = try await getJSON(jwksURL)
        guard let list = set["keys"]?.arrayValue else { throw FetchError(description: "the JWK Set has no keys array") }
        var keys: [String: IssuerKey] = [:]
        for entry in list {
            guard let kid = entry["kid"]?.stringValue, let alg = algorithm(of: entry),
                entry["use"].map({ $0.stringValue == "sig" }) ?? true,
                entry["d"] == nil
            else { continue }
            // Keys are public: a private parameter means a misconfigured issuer; skip the key.
            guard let data = try? JSONEncoder().encode(entry), let jwk = try? JSONDecoder().decode(JWK.self, from: data)
            else { continue }
            let collection = JWTKeyCollection()
            guard (try? await collection.add(jwk: jwk)) != nil,
                (try? await collection.getKey(for: JWKIdentifier(string: kid), alg: alg)) != nil
            else { continue }
            keys[kid] = IssuerKey(alg: alg, collection: collection)
        }
        return keys
    }

    /// The one algorithm a JWK may verify: its `alg` if given, else from its type; nil when not allowed.
    static func algorithm(of jwk: JSONValue) -> String? {
        let derived: String? =
            switch (jwk["kty"]?.stringValue, jwk["crv"]?.stringValue) {
            case ("EC", "P-256"): "ES256"
            case ("RSA", _): "RS256"
            case ("OKP", "Ed25519"): "EdDSA"
            default: nil
            }
        guard let derived else { return nil }
        if let stated = jwk["alg"]?.stringValue, stated != derived { return nil }
        return derived
    }

    /// Fetches discovery documents and key sets: redirects are not followed (a redirect is an
    /// answer other than 200, so refused), so keys only ever come from the configured URLs.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(5))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    static func getJSON(_ url: String) async throws -> JSONValue {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await client.execute(request, timeout: .seconds(5))
        guard response.status.code == 200 else {
            throw FetchError(description: "\(url) answered \(response.status.code)")
        }
        let body = try await response.body.collect(upTo: 1 << 20)
        return try JSONValue.parse(Array(body.readableBytesView))
    }
}
