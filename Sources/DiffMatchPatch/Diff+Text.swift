/// Measures, views and the delta format of diffs, on UTF-16 units.
extension DiffMatchPatch {
    func text1(_ diffs: [UDiff]) -> [UInt16] {
        var text: [UInt16] = []
        for diff in diffs where diff.op != .insert { text += diff.text }
        return text
    }

    func text2(_ diffs: [UDiff]) -> [UInt16] {
        var text: [UInt16] = []
        for diff in diffs where diff.op != .delete { text += diff.text }
        return text
    }

    func xIndex(_ diffs: [UDiff], _ location: Int) -> Int {
        var chars1 = 0
        var chars2 = 0
        var lastChars1 = 0
        var lastChars2 = 0
        var x = 0
        while x < diffs.count {
            if diffs[x].op != .insert { chars1 += diffs[x].text.count }
            if diffs[x].op != .delete { chars2 += diffs[x].text.count }
            if chars1 > location { break }
            lastChars1 = chars1
            lastChars2 = chars2
            x += 1
        }
        // Inside a deletion: the location is where the deletion was.
        if x != diffs.count && diffs[x].op == .delete { return lastChars2 }
        return lastChars2 + (location - lastChars1)
    }

    func levenshtein(_ diffs: [UDiff]) -> Int {
        var levenshtein = 0
        var insertions = 0
        var deletions = 0
        for diff in diffs {
            switch diff.op {
            case .insert: insertions += diff.text.count
            case .delete: deletions += diff.text.count
            case .equal:
                levenshtein += max(insertions, deletions)
                insertions = 0
                deletions = 0
            }
        }
        return levenshtein + max(insertions, deletions)
    }

    func prettyHTML(_ diffs: [UDiff]) -> String {
        var html = ""
        for diff in diffs {
            var text = ""
            for scalar in String(decoding: diff.text, as: UTF16.self).unicodeScalars {
                switch scalar {
                case "&": text += "&amp;"
                case "<": text += "&lt;"
                case ">": text += "&gt;"
                case "\n": text += "&para;<br>"
                default: text.unicodeScalars.append(scalar)
                }
            }
            switch diff.op {
            case .insert: html += "<ins style=\"background:#e6ffe6;\">\(text)</ins>"
            case .delete: html += "<del style=\"background:#ffe6e6;\">\(text)</del>"
            case .equal: html += "<span>\(text)</span>"
            }
        }
        return html
    }

    func toDelta(_ diffs: [UDiff]) -> String {
        var out: [UInt8] = []
        for (i, diff) in diffs.enumerated() {
            if i > 0 { out.append(UInt8(ascii: "\t")) }
            switch diff.op {
            case .insert:
                out.append(UInt8(ascii: "+"))
                URICoding.encode(diff.text, into: &out)
            case .delete:
                out.append(contentsOf: "-\(diff.text.count)".utf8)
            case .equal:
                out.append(contentsOf: "=\(diff.text.count)".utf8)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    func fromDelta(_ text1: [UInt16], _ delta: [UInt16]) throws(DiffMatchPatchError) -> [UDiff] {
        var diffs: [UDiff] = []
        var pointer = 0
        var tokenStart = 0
        while tokenStart <= delta.count {
            var tokenEnd = tokenStart
            while tokenEnd < delta.count && delta[tokenEnd] != 0x09 { tokenEnd += 1 }
            let token = delta[tokenStart..<tokenEnd]
            tokenStart = tokenEnd + 1
            guard let sign = token.first else { continue }
            let param = token.dropFirst()
            switch sign {
            case 0x2B:  // "+"
                var text: [UInt16] = []
                do {
                    try URICoding.decode(param, into: &text)
                } catch {
                    throw DiffMatchPatchError(
                        .invalidDelta, "Illegal escape in delta at \(excerpt(param.dropFirst(error.offset)))")
                }
                diffs.append(UDiff(.insert, text))
            case 0x2D, 0x3D:  // "-", "="
                guard let n = Self.parseCount(param) else {
                    throw DiffMatchPatchError(.invalidDelta, "Invalid number in delta: \(excerpt(param))")
                }
                guard n <= text1.count - pointer else {
                    throw DiffMatchPatchError(
                        .lengthMismatch,
                        "Delta covers more than the \(text1.count) UTF-16 code units of the source text")
                }
                diffs.append(UDiff(sign == 0x3D ? .equal : .delete, text1[pointer..<(pointer + n)]))
                pointer += n
            default:
                throw DiffMatchPatchError(.invalidDelta, "Invalid operation in delta: \(excerpt(token))")
            }
        }
        if pointer != text1.count {
            throw DiffMatchPatchError(
                .lengthMismatch, "Delta length (\(pointer)) does not equal source text length (\(text1.count))")
        }
        return diffs
    }

    /// A decimal count of at most 15 digits; nothing else (no sign, space or exponent).
    static func parseCount<C: Collection>(_ digits: C) -> Int? where C.Element == UInt16 {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var n = 0
        for d in digits {
            guard d >= 0x30 && d <= 0x39 else { return nil }
            n = n * 10 + Int(d - 0x30)
        }
        return n
    }
}
