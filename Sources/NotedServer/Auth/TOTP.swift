import Crypto
import Foundation

/// Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP): HMAC-SHA1, 6 digits, 30-second
/// steps, the defaults every authenticator app reads from an `otpauth://` URI.
enum TOTP {
    static let digits = 6
    static let period: Int64 = 30
    /// Codes of the step before and after the current one are accepted too (clock drift, a
    /// code typed as it changed).
    static let window: Int64 = 1

    /// 160 random bits (RFC 4226's recommended secret length), base32 without padding.
    static func newSecret() -> String {
        let key = SymmetricKey(size: .init(bitCount: 160))
        return key.withUnsafeBytes { Base32.encode(Array($0)) }
    }

    static func step(at date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / Double(period)).rounded(.down))
    }

    /// The code of time step `step` (RFC 4226 section 5.3: dynamic truncation).
    static func code(secret: [UInt8], step: Int64) -> String {
        var counter = UInt64(bitPattern: step).bigEndian
        let message = withUnsafeBytes(of: &counter) { Data($0) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: SymmetricKey(data: secret)))
        let offset = Int(mac[mac.count - 1] & 0x0f)
        let binary =
            (UInt32(mac[offset] & 0x7f) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8)
            | UInt32(mac[offset + 3])
        let value = binary % 1_000_000
        let text = String(value)
        return String(repeating: "0", count: digits - text.count) + text
    }

    /// The time step whose code `code` is, within the window around `now`; nil when none is.
    /// Spaces in the code are ignored (apps show "123 456").
    static func matchingStep(_ code: String, secret: String, now: Date = Date()) -> Int64? {
        let typed = code.filter { !$0.isWhitespace }
        guard typed.count == digits, typed.allSatisfy(\.isASCIIDigit), let key = Base32.decode(secret) else {
            return nil
        }
        let current = step(at: now)
        var found: Int64?
        // Every step of the window is computed and compared in constant time, match or not.
        for candidate in (current - window)...(current + window)
        where constantTimeEqual(self.code(secret: key, step: candidate), typed) {
            found = candidate
        }
        return found
    }

    /// The `otpauth://` URI an authenticator app reads from the QR code (Google Authenticator's
    /// Key Uri Format): label `Issuer:account`, the secret, the issuer again as a parameter.
    static func uri(secret: String, account: String, issuer: String) -> String {
        func component(_ text: String) -> String {
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
        }
        return "otpauth://totp/\(component(issuer)):\(component(account))?secret=\(secret)&issuer=\(component(issuer))"
            + "&algorithm=SHA1&digits=\(digits)&period=\(period)"
    }
}

/// One-time recovery codes: ten of `xxxxx-xxxxx` from an alphabet without look-alikes, kept as
/// SHA-256 hashes (each has 50 random bits, beyond guessing under the sign-in limits).
enum RecoveryCodes {
    static let count = 10
    private static let alphabet = Array("abcdefghjkmnpqrstuvwxyz23456789")

    static func generate() -> [String] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in
            let characters = (0..<10).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] }
            return String(characters[0..<5]) + "-" + String(characters[5...])
        }
    }

    /// A code as typed (any case, with or without the dash and spaces), as stored.
    static func hash(_ code: String) -> String? {
        let normalized = code.lowercased().filter { $0 != "-" && !$0.isWhitespace }
        guard normalized.count == 10, normalized.allSatisfy({ alphabet.contains($0) }) else { return nil }
        return Accounts.hash(normalized)
    }
}

/// RFC 4648 base32 (upper case, no padding), as authenticator apps take secrets.
enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.uppercased().utf8 where character != UInt8(ascii: "=") {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xff))
                bits -= 8
            }
        }
        return out
    }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
