import Crypto
import Foundation

/// Proof Key for Code Exchange (RFC 7636), S256 only.
enum PKCE {
    /// A verifier is 43 to 128 characters of `[A-Za-z0-9-._~]`.
    static func isValidVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count) && verifier.utf8.allSatisfy(isUnreserved)
    }

    /// A challenge is the base64url SHA-256 of a verifier: 43 characters.
    static func isValidChallenge(_ challenge: String) -> Bool {
        challenge.utf8.count == 43 && challenge.utf8.allSatisfy(isUnreserved)
    }

    static func challenge(for verifier: String) -> String {
        Data(SHA256.hash(data: Data(verifier.utf8))).base64URLEncodedString
    }

    /// Whether `verifier` belongs to `challenge`, compared in constant time.
    static func verify(_ verifier: String, challenge: String) -> Bool {
        guard isValidVerifier(verifier) else { return false }
        return constantTimeEqual(Self.challenge(for: verifier), challenge)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

/// Compares two secrets without leaking where they differ.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8)
    let y = Array(b.utf8)
    var difference = UInt8(x.count == y.count ? 0 : 1)
    for i in 0..<max(x.count, y.count) {
        difference |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
    }
    return difference == 0
}
