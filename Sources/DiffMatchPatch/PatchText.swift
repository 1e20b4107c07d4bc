/// Reading the patch text format, as the reference's `patch_fromText`.
enum PatchText {
    static func parse(_ text: [UInt16]) throws(DiffMatchPatchError) -> [UPatch] {
        var patches: [UPatch] = []
        if text.isEmpty { return patches }
        let lines = text.split(separator: 0x0A, omittingEmptySubsequences: false)
        var pointer = 0
        while pointer < lines.count {
            var patch = try header(lines[pointer])
            pointer += 1
            lineLoop: while pointer < lines.count {
                let line = lines[pointer]
                guard let sign = line.first else {
                    // Blank line: ignored.
                    pointer += 1
                    continue
                }
                var decoded: [UInt16] = []
                do {
                    try URICoding.decode(line.dropFirst(), into: &decoded)
                } catch {
                    throw DiffMatchPatchError(
                        .invalidPatch, "Illegal escape in patch line \(pointer + 1): \(excerpt(line))")
                }
                switch sign {
                case 0x2D: patch.diffs.append(UDiff(.delete, decoded))
                case 0x2B: patch.diffs.append(UDiff(.insert, decoded))
                case 0x20: patch.diffs.append(UDiff(.equal, decoded))
                case 0x40: break lineLoop  // "@": start of the next patch.
                default:
                    throw DiffMatchPatchError(
                        .invalidPatch, "Invalid patch mode in line \(pointer + 1): \(excerpt(line))")
                }
                pointer += 1
            }
            patches.append(patch)
        }
        return patches
    }

    /// `^@@ -(\d+),?(\d*) \+(\d+),?(\d*) @@$`
    private static func header(_ line: ArraySlice<UInt16>) throws(DiffMatchPatchError) -> UPatch {
        let bad = DiffMatchPatchError(.invalidPatch, "Invalid patch header: \(excerpt(line))")
        var i = line.startIndex
        func expect(_ s: String) throws(DiffMatchPatchError) {
            for u in s.utf16 {
                guard i < line.endIndex, line[i] == u else { throw bad }
                i += 1
            }
        }
        func digits() -> ArraySlice<UInt16> {
            let start = i
            while i < line.endIndex && line[i] >= 0x30 && line[i] <= 0x39 { i += 1 }
            return line[start..<i]
        }
        func coordinates() throws(DiffMatchPatchError) -> (start: Int, length: Int) {
            let first = digits()
            guard let start = DiffMatchPatch.parseCount(first) else { throw bad }
            if i < line.endIndex && line[i] == 0x2C { i += 1 }
            let second = digits()
            if second.isEmpty { return (start - 1, 1) }
            if second.elementsEqual("0".utf16) { return (start, 0) }
            guard let length = DiffMatchPatch.parseCount(second) else { throw bad }
            return (start - 1, length)
        }
        try expect("@@ -")
        let one = try coordinates()
        try expect(" +")
        let two = try coordinates()
        try expect(" @@")
        guard i == line.endIndex else { throw bad }
        var patch = UPatch()
        patch.start1 = one.start
        patch.length1 = one.length
        patch.start2 = two.start
        patch.length2 = two.length
        return patch
    }
}
