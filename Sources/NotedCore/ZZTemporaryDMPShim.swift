// TEMPORARY: stands in for the DiffMatchPatch API until main lands it; deleted when main is merged.
import Foundation
// TEMPORARY, NEVER COMMIT: stands in for the DiffMatchPatch API until main lands it.
struct Diff: Hashable, Sendable {
    enum Operation: Int, Sendable, Hashable { case delete = -1, equal = 0, insert = 1 }
    var operation: Operation
    var text: String
    init(_ operation: Operation, _ text: String) { self.operation = operation; self.text = text }
}
struct Patch: Hashable, Sendable { var diffs: [Diff] = [] }
struct ShimError: Error { var description: String }
struct DiffMatchPatch: Sendable {
    init() {}
    func text2(_ diffs: [Diff]) -> String { diffs.filter { $0.operation != .delete }.map(\.text).joined() }
    func fromDelta(_ text1: String, _ delta: String, strict: Bool) throws -> [Diff] {
        let units = Array(text1.utf16)
        var pointer = 0
        var diffs: [Diff] = []
        for token in delta.split(separator: "\t", omittingEmptySubsequences: false) {
            guard let first = token.first else { continue }
            let param = String(token.dropFirst())
            switch first {
            case "+": diffs.append(Diff(.insert, param.removingPercentEncoding ?? param))
            case "-", "=":
                guard let n = Int(param), n >= 0, pointer + n <= units.count else { throw ShimError(description: "bad") }
                let text = String(decoding: units[pointer..<pointer + n], as: UTF16.self)
                pointer += n
                diffs.append(Diff(first == "=" ? .equal : .delete, text))
            default: throw ShimError(description: "bad")
            }
        }
        guard pointer == units.count else { throw ShimError(description: "length") }
        return diffs
    }
    func toDelta(_ diffs: [Diff]) -> String {
        diffs.map { d in
            switch d.operation {
            case .insert: "+" + (d.text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            case .delete: "-\(d.text.utf16.count)"
            case .equal: "=\(d.text.utf16.count)"
            }
        }.joined(separator: "\t")
    }
    func diff(_ a: String, _ b: String) -> [Diff] { [Diff(.delete, a), Diff(.insert, b)].filter { !$0.text.isEmpty } }
    func patchMake(_ text1: String, _ diffs: [Diff]) -> [Patch] { [Patch(diffs: diffs)] }
    func patchApply(_ patches: [Patch], to text: String) -> (text: String, results: [Bool]) { (text, [false]) }
}
