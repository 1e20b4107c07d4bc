import Foundation
import NotedCore
import Testing

@testable import NotedClient

/// The `ccid`s of a process: canonical UUIDs (the server's `UUIDText.isCanonical`) of version 8,
/// unique, sharing everything but the counter so that deflate sends them as back-references.
@Suite struct ChangeIDTests {
    @Test func idsAreCanonicalVersion8UUIDsThatFoundationReadsBack() {
        for _ in 0..<1_000 {
            let id = ChangeID.next()
            #expect(UUIDText.isCanonical(id), "\(id)")
            let characters = Array(id)
            #expect(characters[14] == "8", "version digit of \(id)")
            #expect("89ab".contains(characters[19]), "variant digit of \(id)")
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id)
        }
    }

    @Test func aSequenceCountsUnderItsPrefix() {
        let next = ChangeID.sequence(prefix: [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdd])
        #expect(next() == "01234567-89ab-8cde-9ffe-000000000001")
        #expect(next() == "01234567-89ab-8cde-9ffe-000000000002")
        for _ in 3...255 { _ = next() }
        #expect(next() == "01234567-89ab-8cde-9ffe-000000000100")
    }

    @Test func idsNeverRepeatWithinOrAcrossSequences() async {
        // Drawn from many tasks at once: the counter is shared under its lock.
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<8 { group.addTask { (0..<2_000).map { _ in ChangeID.next() } } }
            return await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(Set(ids).count == 16_000)
        // Two processes (two sequences) differ in the random prefix.
        let first = ChangeID.sequence(prefix: (0..<10).map { _ in UInt8.random(in: 0...255) })()
        let second = ChangeID.sequence(prefix: (0..<10).map { _ in UInt8.random(in: 0...255) })()
        #expect(first.prefix(23) != second.prefix(23))
        #expect(first.suffix(12) == second.suffix(12))
    }
}
