import Foundation
import NotedCore
import Testing

@testable import NotedServer

/// The parts of external-issuer trust that need no network; the whole is tested in
/// Tests/peers/test_oauth_peers.py against real issuers over HTTP.
@Suite struct ExternalIssuerTests {
    @Test(
        arguments: [
            (#"{"kty":"EC","crv":"P-256"}"#, "ES256"), (#"{"kty":"EC","crv":"P-256","alg":"ES256"}"#, "ES256"),
            (#"{"kty":"RSA"}"#, "RS256"), (#"{"kty":"RSA","alg":"RS256"}"#, "RS256"),
            (#"{"kty":"OKP","crv":"Ed25519"}"#, "EdDSA"),
            (#"{"kty":"EC","crv":"P-384"}"#, nil), (#"{"kty":"EC","crv":"P-256","alg":"ES384"}"#, nil),
            (#"{"kty":"RSA","alg":"PS256"}"#, nil), (#"{"kty":"RSA","alg":"RS512"}"#, nil),
            (#"{"kty":"OKP","crv":"X25519"}"#, nil),
            (#"{"kty":"oct","k":"c2VjcmV0"}"#, nil), (#"{"kty":"EC","crv":"P-256","alg":"HS256"}"#, nil), (#"{}"#, nil),
        ] as [(String, String?)])
    func onlyAllowListedKeysAreUsable(jwk: String, algorithm: String?) throws {
        #expect(IssuerKeys.algorithm(of: try JSONValue.parse(jwk)) == algorithm)
    }

    @Test func specificationsParse() throws {
        let trusted = try TrustedIssuer.parse(
            "issuer=https://idp.example/,discovery=https://idp.example/.well-known/openid-configuration,audience=api,claim=oid,refetch=5"
        ).get()
        #expect(
            trusted.issuer == "https://idp.example/" && trusted.audience == "api" && trusted.claim == "oid"
                && trusted.refetchInterval == 5)
        #expect(trusted.keys == .discovery("https://idp.example/.well-known/openid-configuration"))
        let plain = try TrustedIssuer.parse("issuer=https://idp.example,jwks=https://idp.example/jwks,audience=api")
            .get()
        #expect(plain.claim == "sub" && plain.refetchInterval == 60 && plain.keys == .jwks("https://idp.example/jwks"))
        for bad in [
            "", "issuer=https://i.example", "issuer=https://i.example,jwks=https://i.example/j",
            "audience=a,jwks=https://i.example/j",
            "issuer=https://i.example,jwks=https://i.example/j,audience=a,audience=b",
            "issuer=i.example,jwks=https://i.example/j,audience=a",
            "issuer=https://i.example,jwks=file:///etc/passwd,audience=a",
            "issuer=https://i.example,jwks=https://i.example/j,audience=a,claim=",
            "issuer=https://i.example,jwks=https://i.example/j,audience=a,refetch=-1",
            "issuer=https://i.example,jwks=https://i.example/j,audience=a,x",
        ] {
            #expect(throws: TrustedIssuer.ParseError.self, "\(bad)") { try TrustedIssuer.parse(bad).get() }
        }
    }

    @Test func keysComeOverHttpsExceptFromThisMachine() throws {
        for good in [
            "issuer=http://127.0.0.1:8080,jwks=http://127.0.0.1:8080/jwks,audience=a",
            "issuer=http://localhost:9,discovery=http://localhost:9/d,audience=a",
            "issuer=http://[::1]:9,jwks=http://[::1]:9/j,audience=a",
        ] {
            #expect(throws: Never.self, "\(good)") { try TrustedIssuer.parse(good).get() }
        }
        for bad in [
            "issuer=http://idp.example,jwks=https://idp.example/j,audience=a",
            "issuer=https://idp.example,jwks=http://idp.example/j,audience=a",
            "issuer=https://idp.example,discovery=http://idp.example/d,audience=a",
            "issuer=https://127.0.0.1.example,jwks=http://127.0.0.1.example/j,audience=a",
            "issuer=https://idp.example,jwks=http://10.0.0.1/j,audience=a",
        ] {
            #expect(throws: TrustedIssuer.ParseError.self, "\(bad)") { try TrustedIssuer.parse(bad).get() }
        }
        #expect(
            TrustedIssuer.origin(URL(string: "https://IdP.example/x")!)
                == TrustedIssuer.origin(URL(string: "https://idp.example:443/y")!))
        #expect(
            TrustedIssuer.origin(URL(string: "https://idp.example/x")!)
                != TrustedIssuer.origin(URL(string: "https://idp.example:8443/x")!))
        #expect(
            TrustedIssuer.origin(URL(string: "https://idp.example/x")!)
                != TrustedIssuer.origin(URL(string: "http://idp.example/x")!))
    }
}
