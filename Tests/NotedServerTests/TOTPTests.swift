import Foundation
import Testing

@testable import NotedServer

/// The one-time codes of two-factor sign-in against RFC 6238's own test vectors (appendix B,
/// HMAC-SHA1, the last six of their eight digits), and the base32 and recovery-code forms.
/// The whole flow is checked against pyotp in Tests/peers/test_two_factor.py.
struct TOTPTests {
    static let secret = Array("12345678901234567890".utf8)

    @Test(arguments: [
        (Int64(59), "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"),
        (1_234_567_890, "89005924"), (2_000_000_000, "69279037"), (20_000_000_000, "65353130"),
    ])
    func rfc6238Vectors(time: Int64, expected: String) {
        let step = TOTP.step(at: Date(timeIntervalSince1970: TimeInterval(time)))
        #expect(TOTP.code(secret: Self.secret, step: step) == String(expected.suffix(6)))
    }

    @Test func aCodeMatchesOnlyWithinOneStepOfNow() {
        let secret = Base32.encode(Self.secret)
        #expect(secret == "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")
        let now = Date(timeIntervalSince1970: 1_111_111_111)
        let step = TOTP.step(at: now)
        for offset in Int64(-1)...1 {
            #expect(
                TOTP.matchingStep(TOTP.code(secret: Self.secret, step: step + offset), secret: secret, now: now) == step
                    + offset)
        }
        #expect(TOTP.matchingStep(TOTP.code(secret: Self.secret, step: step + 2), secret: secret, now: now) == nil)
        #expect(TOTP.matchingStep(TOTP.code(secret: Self.secret, step: step - 2), secret: secret, now: now) == nil)
        let spaced = TOTP.code(secret: Self.secret, step: step).enumerated().map {
            $0.offset == 3 ? " \($0.element)" : "\($0.element)"
        }.joined()
        #expect(TOTP.matchingStep(spaced, secret: secret, now: now) == step)
        for bad in ["", "12345", "1234567", "abcdef", "١٢٣٤٥٦"] {
            #expect(TOTP.matchingStep(bad, secret: secret, now: now) == nil)
        }
    }

    @Test func base32RoundTripsAndRefusesWhatIsNotBase32() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base32.decode(Base32.encode(bytes)) == bytes)
        }
        #expect(Base32.decode("MZXW6YTBOI======") == Array("foobar".utf8))
        #expect(Base32.decode("not base32!") == nil)
        #expect(TOTP.newSecret().count == 32)
    }

    @Test func recoveryCodesAreTenDistinctAndReadAsTyped() {
        let codes = RecoveryCodes.generate()
        #expect(codes.count == 10 && Set(codes).count == 10)
        for code in codes {
            #expect(code.count == 11 && code.dropFirst(5).first == "-")
            #expect(
                RecoveryCodes.hash(code)
                    == RecoveryCodes.hash(code.uppercased().replacingOccurrences(of: "-", with: " ")))
        }
        #expect(RecoveryCodes.hash("abc") == nil)
        #expect(RecoveryCodes.hash("00000-00000") == nil, "0 is not in the alphabet")
    }

    @Test func theURIIsWhatAuthenticatorAppsRead() {
        let uri = TOTP.uri(secret: "ABC", account: "ana maría@x", issuer: "Noted")
        #expect(
            uri == "otpauth://totp/Noted:ana%20mar%C3%ADa%40x?secret=ABC&issuer=Noted&algorithm=SHA1&digits=6&period=30"
        )
    }
}
