import Testing

@testable import DiffMatchPatch

/// Settings outside the sensible range never hang or crash the library.
struct ConfigurationTests {
    static let extremes: [DiffMatchPatch.Configuration] = {
        var list: [DiffMatchPatch.Configuration] = []
        for margin in [-5, 0, 1, 15, 16, 100] {
            for bits in [0, 4, 8, 32, 64] {
                var c = DiffMatchPatch.Configuration()
                c.patchMargin = margin
                c.matchMaxBits = bits
                list.append(c)
            }
        }
        for timeout in [Double.infinity, -.infinity, .nan, -1, 1e300] {
            var c = DiffMatchPatch.Configuration()
            c.diffTimeout = timeout
            list.append(c)
        }
        for threshold in [Double.nan, -1, 0, 2, .infinity] {
            var c = DiffMatchPatch.Configuration()
            c.matchThreshold = threshold
            c.patchDeleteThreshold = threshold
            c.matchDistance = threshold.isNaN ? -10 : 0
            list.append(c)
        }
        return list
    }()

    @Test(arguments: extremes)
    func extremeSettingsStillPatchCorrectly(configuration: DiffMatchPatch.Configuration) throws {
        let dmp = DiffMatchPatch(configuration: configuration)
        let a = String(repeating: "The quick brown fox jumps over the lazy dog. 😀 ", count: 8)
        let b = a.replacingOccurrences(of: "lazy", with: "sleepy").replacingOccurrences(of: "😀 T", with: "😁 T")
        let patches = dmp.patchMake(a, b)
        let parsed = try dmp.patchFromText(dmp.patchToText(patches))
        let (result, applied) = dmp.patchApply(parsed, to: a)
        #expect(result == b)
        #expect(applied.allSatisfy { $0 })
        _ = dmp.match(a, "quick brown fax", 100)
        _ = dmp.patchApply(patches, to: String(a.reversed()))
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

/// `patchApply(_:to:strict:deadline:)`: the hunks not applied by the deadline are left out.
@Suite struct PatchDeadlineTests {
    @Test func hunksAfterTheDeadlineAreLeftOutAndReportedFalse() {
        let dmp = DiffMatchPatch()
        let patches = dmp.patchMake("one two three four", "one 2 three 4")
        let shifted = "zero one two three four"
        let late = dmp.patchApply(patches, to: shifted, strict: true, deadline: .now - .seconds(1))
        #expect(late.text == shifted && !late.results.isEmpty && late.results.allSatisfy { !$0 })
        let inTime = dmp.patchApply(patches, to: shifted, strict: true, deadline: .now + .seconds(60))
        #expect(inTime.text == "zero one 2 three 4" && inTime.results.allSatisfy { $0 })
        #expect(dmp.patchApply(patches, to: shifted, strict: true, deadline: nil).text == inTime.text)
    }
}
