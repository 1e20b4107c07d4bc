import Foundation
import NotedCore
import Testing

@Suite struct Base64URLTests {
    @Test(
        arguments: [
            ([], ""), ([0x66], "Zg"), ([0x66, 0x6f], "Zm8"), ([0x66, 0x6f, 0x6f], "Zm9v"),
            ([0xfb, 0xff], "-_8"), ([0xfb, 0xef, 0xbe], "----"), ([0xff, 0xff, 0xff], "____"),
        ] as [([UInt8], String)])
    func encodesWithTheURLAlphabetAndNoPadding(bytes: [UInt8], text: String) {
        #expect(Data(bytes).base64URLEncodedString == text)
        #expect(Data(base64URLEncoded: text) == Data(bytes))
    }

    @Test(arguments: ["a", "Zm9v!", "Zm+v", "Zm/v", "Z m9v"])
    func refusesWhatIsNotBase64URL(text: String) {
        #expect(Data(base64URLEncoded: text) == nil)
    }

    @Test func roundTripsRandomBytes() {
        var random = TestSeedless.generator
        for length in 0..<64 {
            let bytes = Data((0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) })
            #expect(Data(base64URLEncoded: bytes.base64URLEncodedString) == bytes, "length \(length)")
        }
    }
}

private enum TestSeedless {
    static var generator: SplitMix64 { SplitMix64(seed: 0xB64) }
}
