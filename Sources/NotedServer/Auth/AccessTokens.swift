import Crypto
import Foundation
import JWTKit
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

    enum CodingKeys: String, CodingKey {
        case iss, sub, aud, exp, iat, jti, nbf
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
}

/// Why a token was refused. The reason is for logs; clients only learn "invalid" or "expired".
public struct TokenError: Error, Sendable, CustomStringConvertible {
    enum Kind: Sendable { case invalid, expired }
    let kind: Kind
    let reason: String

    public var isExpired: Bool { kind == .expired }
    public var description: String { reason }
}

/// Issues and verifies ES256 access tokens with a signing key kept in the store.
public struct AccessTokens: Sendable {
    private let keys: JWTKeyCollection
    private let kid: String
    public let issuer: String
    public let audience: String
    public let lifetime: Duration
    /// The public keys as a JWK Set.
    public let jwks: JSONValue
    /// Trusted external issuers, if any (`--trust-issuer`).
    var external: ExternalIssuers?

    /// Loads the signing keys, generating and persisting one on first start.
    public static func load(store: any NotedStore, issuer: String, audience: String, lifetime: Duration) async throws -> AccessTokens {
        var records = try await store.signingKeys()
        if records.isEmpty {
            let key = try ES256PrivateKey(backing: P256.Signing.PrivateKey())
            let kid = UUID().uuidString.lowercased()
            try await store.addSigningKey(SigningKeyRecord(kid: kid, privateKeyPEM: key.pemRepresentation, createdAt: Date()))
            // Another node may have won the race: use whatever is stored.
            records = try await store.signingKeys()
        }
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
        // The newest key signs; the others still verify.
        let signing = records.last?.kid ?? ""
        return AccessTokens(keys: keys, kid: signing, issuer: issuer, audience: audience, lifetime: lifetime, jwks: ["keys": .array(jwks)])
    }

    /// A signed access token for a user and client application, and when it expires.
    public func issue(userID: String, clientID: String, now: Date = Date()) async throws -> (token: String, expiresAt: Date) {
        // JWT times are whole seconds.
        let now = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let expiresAt = now.addingTimeInterval(lifetime.timeInterval.rounded(.up))
        let claims = AccessTokenClaims(
            iss: IssuerClaim(value: issuer), sub: SubjectClaim(value: userID), aud: AudienceClaim(value: [audience]),
            exp: ExpirationClaim(value: expiresAt), iat: IssuedAtClaim(value: now),
            jti: IDClaim(value: UUID().uuidString.lowercased()), nbf: nil, clientID: clientID)
        var header = JWTHeader()
        header.typ = "at+jwt"
        header.alg = "ES256"
        let token = try await keys.sign(claims, kid: JWKIdentifier(string: kid), header: header)
        return (token, expiresAt)
    }

    /// Verifies signature, `typ`, issuer, audience and expiry.
    public func verify(_ token: String, now: Date = Date()) async throws(TokenError) -> VerifiedToken {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard token.utf8.count < 8192, parts.count == 3, let header = Self.json(parts[0]) else {
            throw TokenError(kind: .invalid, reason: "not a JWT")
        }
        // A trusted external issuer's token is checked against that issuer's keys only.
        if let external, let payload = Self.json(parts[1]), let iss = payload["iss"]?.stringValue, iss != issuer, external.trusts(iss) {
            return try await external.verify(token, header: header, payload: payload, now: now)
        }
        guard header["typ"]?.stringValue?.lowercased() == "at+jwt" else {
            throw TokenError(kind: .invalid, reason: "not an access token")
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
        return VerifiedToken(userID: claims.sub.value, clientID: claims.clientID, expiresAt: claims.exp.value)
    }

    /// A base64url JSON part of a JWT, unverified.
    static func json(_ part: Substring) -> JSONValue? {
        guard let data = Data(base64URLEncoded: String(part)) else { return nil }
        return try? JSONValue.parse(Array(data))
    }
}

extension Data {
    init?(base64URLEncoded text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }

    var base64URLEncodedString: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
