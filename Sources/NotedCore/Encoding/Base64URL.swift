import ExtrasBase64

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Base64url without padding (RFC 4648 section 5), as JWTs, PKCE and OAuth tokens write it.
extension Data {
    /// Decodes base64url text without padding; nil for anything else.
    public init?(base64URLEncoded text: String) {
        guard let bytes = try? Base64.decode(string: text, options: [.base64UrlAlphabet, .omitPaddingCharacter]) else {
            return nil
        }
        self.init(bytes)
    }

    /// The bytes as base64url text without padding.
    public var base64URLEncodedString: String {
        Base64.encodeToString(bytes: self, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }
}
