import Crypto
import Foundation
import JWTKit
import NIOConcurrencyHelpers
import NotedCore

/// The claims of an access token (RFC 9068 shape).
struct AccessTokenClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim
    var jti: IDClaim
    var nbf: NotBeforeClaim?
    var clientID: String
    /// The sign-in session (refresh-token family) the token belongs to; absent in tokens of
    /// earlier versions.
    var sid: String?

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, jti, nbf, sid
        case clientID = "client_id"
    }

    // Expiry is checked by `AccessTokens.verify` against its own clock.
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Who a verified access token speaks for.
public struct VerifiedToken: Sendable, Hashable {
    public var userID: String
    public var clientID: String
    public var expiresAt: Date
    /// The sign-in session (refresh-token family), when the token names one.
    public var sessionID: String? = nil
}

/// Sign-in sessions (refresh-token families) revoked recently enough that access tokens of
/// theirs may still be unexpired: such tokens are refused, and open sync sessions of theirs
/// closed, within a second on every node (docs/security.md, "Revocation"). An id is kept for
/// an access token's lifetime (and a minute) after it was revoked; by then every token naming
/// it has expired.
public final class RevokedSessions: Sendable {
    private struct State {
        var revokedAt: [String: Date] = [:]
        var observers: [@Sendable (String) -> Void] = []
    }
    private let state = NIOLockedValueBox(State())
    private let clockBox = NIOLockedValueBox(ServerClock.system)
    let keep: TimeInterval

    init(keep: TimeInterval) {
        self.keep = keep
    }

    /// What a revocation is dated by, and kept by (the configuration's).
    var clock: ServerClock {
        get { clockBox.withLockedValue { $0 } }
        set { clockBox.withLockedValue { $0 = newValue } }
    }

    public func contains(_ id: String) -> Bool {
        state.withLockedValue { $0.revokedAt[id] != nil }
    }

    /// Adds a revoked session; the observers hear of it when it is new here.
    func insert(_ id: String, now: Date? = nil) {
        let now = now ?? clock.now()
        let observers: [@Sendable (String) -> Void] = state.withLockedValue { state in
            state.revokedAt = state.revokedAt.filter { now.timeIntervalSince($0.value) < keep }
            guard state.revokedAt[id] == nil else { return [] }
            state.revokedAt[id] = now
            return state.observers
        }
        for observer in observers { observer(id) }
    }

    /// `observer` is called with every session newly revoked (to close its connections).
    func onRevoke(_ observer: @escaping @Sendable (String) -> Void) {
        state.withLockedValue { $0.observers.append(observer) }
    }

    var count: Int { state.withLockedValue { $0.revokedAt.count } }
}

/// Why a token was refused. The reason is for logs; clients only learn "invalid" or "expired".
public struct TokenError: Error, Sendable, CustomStringConvertible {
    enum Kind: Sendable { case invalid, expired }
    let kind: Kind
    let reason: String

    public var isExpired: Bool { kind == .expired }
    public var description: String { reason }
}

/// The server's signing keys as loaded from the store: the newest signs, all verify.
struct SigningKeySet: Sendable {
    let keys: JWTKeyCollection
    let kid: String
    let jwks: JSONValue

    static func build(_ records: [SigningKeyRecord]) async throws -> SigningKeySet {
        let keys = JWTKeyCollection()
        var jwks: [JSONValue] = []
        for record in records {
            let key = try ES256PrivateKey(pem: record.privateKeyPEM)
            await keys.add(ecdsa: key, kid: JWKIdentifier(string: record.kid))
            if let parameters = key.parameters {
                jwks.append([
                    "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": .string(record.kid),
                    "x": .string(parameters.x), "y": .string(parameters.y),
                ])
            }
        }
        return SigningKeySet(keys: keys, kid: records.last?.kid ?? "", jwks: ["keys": .array(jwks)])
    }
}

/// Issues and verifies ES256 access tokens with a signing key kept in the store.
public struct AccessTokens: Sendable {
    private let current: NIOLockedValueBox<SigningKeySet>
    fileprivate var keys: JWTKeyCollection { current.withLockedValue { $0.keys } }
    fileprivate var kid: String { current.withLockedValue { $0.kid } }
    public let issuer: String
    public let audience: String
    public let lifetime: Duration
    /// The public keys as a JWK Set.
    public var jwks: JSONValue { current.withLockedValue { $0.jwks } }
    /// Trusted external issuers, if any (`--trust-issuer`).
    var external: ExternalIssuers?
    /// Sessions whose access tokens are refused before they expire.
    public let revoked: RevokedSessions
    /// What tokens are issued and checked at, and revocations kept by (the configuration's).
    public var clock: ServerClock {
        get { revoked.clock }
        nonmutating set { revoked.clock = newValue }
    }

    /// How often a running server rereads its signing keys, so that `noted-server keys rotate`
    /// takes effect without a restart.
    static let reloadInterval: Duration = .seconds(60)

    /// Loads the signing keys, generating and persisting one on first start, and dropping
    /// retired keys whose tokens have all expired.
    public static func load(store: any SigningKeyStore, issuer: String, audience: String, lifetime: Duration)
        async throws -> AccessTokens
    {
        let records = try await currentKeys(store: store, lifetime: lifetime)
        let set = try await SigningKeySet.build(records)
        return AccessTokens(
            current: NIOLockedValueBox(set), issuer: issuer, audience: audience, lifetime: lifetime,
            revoked: RevokedSessions(keep: lifetime.timeInterval + 60))
    }

    /// Rereads the signing keys from the store (after a rotation by another process).
    func reload(store: any SigningKeyStore) async throws {
        let set = try await SigningKeySet.build(try await Self.currentKeys(store: store, lifetime: lifetime))
        current.withLockedValue { $0 = set }
    }

    /// Adds a new signing key (a new `kid`) and drops retired ones; the old keys keep verifying
    /// until every token they signed has expired. Returns the new key's `kid` and the dropped ones.
    public static func rotate(store: any SigningKeyStore, lifetime: Duration, now: Date = Date()) async throws -> (
        kid: String, dropped: [String]
    ) {
        // The newest key signs: the new one must sort after every stored one.
        let existing = try await store.signingKeys()
        let createdAt = max(now, existing.last.map { $0.createdAt.addingTimeInterval(0.001) } ?? now)
        let kid = try await addKey(store: store, now: createdAt)
        let before = Set(try await store.signingKeys().map(\.kid))
        let after = Set(try await currentKeys(store: store, lifetime: lifetime, now: now).map(\.kid))
        return (kid, before.subtracting(after).sorted())
    }

    /// The stored keys, creating the first one; keys retired long enough are removed.
    private static func currentKeys(store: any SigningKeyStore, lifetime: Duration, now: Date = Date()) async throws
        -> [SigningKeyRecord]
    {
        var records = try await store.signingKeys()
        if records.isEmpty {
            _ = try await addKey(store: store, now: now)
            // Another node may have won the race: use whatever is stored.
            records = try await store.signingKeys()
        }
        for kid in retired(records, lifetime: lifetime, now: now) {
            try await store.removeSigningKey(kid: kid)
        }
        return try await store.signingKeys()
    }

    private static func addKey(store: any SigningKeyStore, now: Date) async throws -> String {
        let key = try ES256PrivateKey(backing: P256.Signing.PrivateKey())
        let kid = UUID().uuidString.lowercased()
        try await store.addSigningKey(SigningKeyRecord(kid: kid, privateKeyPEM: key.pemRepresentation, createdAt: now))
        return kid
    }

    /// Keys (oldest first) that can no longer have signed an unexpired token: a key stops signing
    /// at the latest one reload interval after its successor was added, and its last token expires
    /// one lifetime later; a minute more covers clock differences between nodes.
    static func retired(_ records: [SigningKeyRecord], lifetime: Duration, now: Date) -> [String] {
        let grace = reloadInterval.timeInterval + lifetime.timeInterval + 60
        return zip(records, records.dropFirst()).compactMap { key, successor in
            now.timeIntervalSince(successor.createdAt) > grace ? key.kid : nil
        }
    }

    /// A signed access token for a user and client application, and when it expires.
    public func issue(userID: String, clientID: String, sessionID: String? = nil, now: Date? = nil) async throws -> (
        token: String, expiresAt: Date
    ) {
        // JWT times are whole seconds.
        let now = Date(timeIntervalSince1970: (now ?? clock.now()).timeIntervalSince1970.rounded(.down))
        let expiresAt = now.addingTimeInterval(lifetime.timeInterval.rounded(.up))
        let claims = AccessTokenClaims(
            iss: IssuerClaim(value: issuer), sub: SubjectClaim(value: userID), aud: AudienceClaim(value: [audience]),
            exp: ExpirationClaim(value: expiresAt), iat: IssuedAtClaim(value: now),
            jti: IDClaim(value: UUID().uuidString.lowercased()), nbf: nil, clientID: clientID, sid: sessionID)
        var header = JWTHeader()
        header.typ = "at+jwt"
        header.alg = "ES256"
        let token = try await keys.sign(claims, kid: JWKIdentifier(string: kid), header: header)
        return (token, expiresAt)
    }

    /// Verifies signature, `typ`, issuer, audience and expiry.
    public func verify(_ token: String, now: Date? = nil) async throws(TokenError) -> VerifiedToken {
        let now = now ?? clock.now()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count < 8192, parts.count == 3, let header = Self.json(parts[0]) else {
            throw TokenError(kind: .invalid, reason: "not a JWT")
        }
        // A trusted external issuer's token is checked against that issuer's keys only.
        if let external, let payload = Self.json(parts[1]), let iss = payload["iss"]?.stringValue, iss != issuer,
            external.trusts(iss)
        {
            return try await external.verify(token, header: header, payload: payload, now: now)
        }
        guard header["typ"]?.stringValue?.lowercased() == "at+jwt" else {
            throw TokenError(kind: .invalid, reason: "not an access token")
        }
        // This server signs with ES256 only: the header's `alg` is pinned before any key is
        // chosen, whatever the key collection would accept.
        guard header["alg"]?.stringValue == "ES256" else {
            throw TokenError(kind: .invalid, reason: "algorithm not allowed")
        }
        let claims: AccessTokenClaims
        do {
            claims = try await keys.verify(token, as: AccessTokenClaims.self)
        } catch {
            throw TokenError(kind: .invalid, reason: "signature or claims invalid")
        }
        guard claims.iss.value == issuer, claims.aud.value.contains(audience) else {
            throw TokenError(kind: .invalid, reason: "wrong issuer or audience")
        }
        guard claims.exp.value > now else {
            throw TokenError(kind: .expired, reason: "expired")
        }
        if let notBefore = claims.nbf?.value, notBefore > now.addingTimeInterval(60) {
            throw TokenError(kind: .invalid, reason: "not valid yet")
        }
        if let sid = claims.sid, revoked.contains(sid) {
            throw TokenError(kind: .invalid, reason: "the sign-in session was revoked")
        }
        return VerifiedToken(
            userID: claims.sub.value, clientID: claims.clientID, expiresAt: claims.exp.value, sessionID: claims.sid)
    }

    /// A base64url JSON part of a JWT, unverified.
    static func json(_ part: Substring) -> JSONValue? {
        guard let data = Data(base64URLEncoded: String(part)) else { return nil }
        return try? JSONValue.parse(Array(data))
    }
}

/// A sign-in half done: the password was right and the account asks a second factor. The
/// sign-in page carries it from the password form to the code form, so the password is not
/// sent twice and any node can finish the sign-in. Signed with the access-token keys but of
/// another type and audience: never an access token.
struct SecondFactorClaims: JWTPayload {
    var iss: IssuerClaim
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var jti: IDClaim
    /// A digest of the password hash the password was checked against: a password changed or
    /// reset since ends the half-done sign-in.
    var pwd: String

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

extension AccessTokens {
    static let secondFactorType = "noted-2fa+jwt"
    /// How long the code form stays valid after the password.
    static let secondFactorLifetime: TimeInterval = 300
    var secondFactorAudience: String { issuer + "#second-factor" }

    func issueSecondFactorStep(userID: String, passwordHash: String, now: Date? = nil) async throws -> String {
        let now = now ?? clock.now()
        let claims = SecondFactorClaims(
            iss: IssuerClaim(value: issuer), sub: SubjectClaim(value: userID),
            aud: AudienceClaim(value: [secondFactorAudience]),
            exp: ExpirationClaim(value: now.addingTimeInterval(Self.secondFactorLifetime)),
            jti: IDClaim(value: UUID().uuidString.lowercased()),
            pwd: Self.passwordMark(passwordHash))
        var header = JWTHeader()
        header.typ = Self.secondFactorType
        header.alg = "ES256"
        return try await keys.sign(claims, kid: JWKIdentifier(string: kid), header: header)
    }

    static func passwordMark(_ hash: String) -> String {
        String(Accounts.hash("noted second factor " + hash).prefix(32))
    }

    /// The user of a sign-in half done and the mark of the password hash it was checked
    /// against, if `token` is one of this server's and unexpired.
    func verifySecondFactorStep(_ token: String, now: Date? = nil) async -> (userID: String, passwordMark: String)? {
        let now = now ?? clock.now()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count < 4096, parts.count == 3, let header = Self.json(parts[0]),
            header["typ"]?.stringValue == Self.secondFactorType, header["alg"]?.stringValue == "ES256",
            let claims = try? await keys.verify(token, as: SecondFactorClaims.self),
            claims.iss.value == issuer, claims.aud.value.contains(secondFactorAudience), claims.exp.value > now
        else { return nil }
        return (claims.sub.value, claims.pwd)
    }
}
