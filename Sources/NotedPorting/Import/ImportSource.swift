import Foundation
import ZIPFoundation

/// What a person picked to import, read into memory as a tree of files: a folder, a `.zip`, a
/// `.jex`/`.tar`, or one file. Paths are `/`-separated and relative to what was picked.
public struct ImportSource: Sendable {
    public struct File: Sendable, Hashable {
        public var path: String
        public var data: Data
    }

    /// Where it came from, for messages.
    public var origin: String
    public var files: [File]
    /// What reading it may spend; every importer charges it and checks it as it goes.
    public var budget: ImportBudget

    public init(origin: String, files: [File], budget: ImportBudget = .unbounded) {
        self.origin = origin
        self.files = files
        self.budget = budget
    }

    /// At most this many bytes are read (an export of a large account is well under it; a wrong
    /// pick, a disk image, is refused before it fills memory).
    public static let maxBytes = 2 * 1024 * 1024 * 1024

    /// Reads `path`: a folder (recursively, hidden files left out), an archive, or one file.
    public static func load(_ path: String, budget: ImportBudget = .unbounded) throws -> ImportSource {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ImportError(path, "no such file or folder")
        }
        if isDirectory.boolValue {
            var files: [File] = []
            var total = 0
            guard let walker = manager.enumerator(atPath: path) else {
                throw ImportError(path, "cannot read the folder")
            }
            for case let relative as String in walker {
                if relative.split(separator: "/").contains(where: { $0.hasPrefix(".") }) { continue }
                var isFolder: ObjCBool = false
                let full = path + "/" + relative
                guard manager.fileExists(atPath: full, isDirectory: &isFolder), !isFolder.boolValue else { continue }
                try budget.check(origin: path)
                guard let data = manager.contents(atPath: full) else { throw ImportError(full, "cannot read the file") }
                try budget.charge(data.count, origin: path)
                total += data.count
                guard total <= maxBytes else {
                    throw ImportError(path, "more than 2 GiB of files; pick the export itself")
                }
                files.append(File(path: relative, data: data))
            }
            return ImportSource(origin: path, files: files.sorted { $0.path < $1.path }, budget: budget)
        }
        guard let data = manager.contents(atPath: path) else { throw ImportError(path, "cannot read the file") }
        try budget.charge(data.count, origin: path)
        return try load(data, name: (path as NSString).lastPathComponent, origin: path, budget: budget)
    }

    /// Reads one file's bytes (an upload): an archive, by its content or its `name`, or the
    /// file itself. An archive may unpack to at most `unpackedLimit` bytes (a server takes
    /// less than a person's own machine: a small zip can unpack to gigabytes). What is unpacked
    /// is charged to `budget`; `data` itself is the caller's to charge.
    public static func load(
        _ data: Data, name: String, origin: String? = nil, unpackedLimit: Int = maxBytes,
        budget: ImportBudget = .unbounded
    ) throws -> ImportSource {
        let origin = origin ?? name
        guard data.count <= maxBytes else { throw ImportError(origin, "larger than 2 GiB; pick the export itself") }
        let lower = name.lowercased()
        if lower.hasSuffix(".jex") || lower.hasSuffix(".tar") {
            if data.starts(with: [0x50, 0x4b, 0x03, 0x04]) {
                throw ImportError(
                    origin, "a zip archive, not the tar a .jex is: pick Joplin's own export (File, Export all, JEX)")
            }
            return ImportSource(
                origin: origin, files: try Tar.files(data, origin: origin, budget: budget), budget: budget)
        }
        if data.starts(with: [0x50, 0x4b, 0x03, 0x04]) || lower.hasSuffix(".zip") {
            return ImportSource(
                origin: origin,
                files: try unzip(data, origin: origin, limit: min(unpackedLimit, maxBytes), budget: budget),
                budget: budget)
        }
        return ImportSource(origin: origin, files: [File(path: name, data: data)], budget: budget)
    }

    private static func unzip(_ data: Data, origin path: String, limit: Int, budget: ImportBudget) throws -> [File] {
        let archive: Archive
        do {
            archive = try Archive(data: data, accessMode: .read)
        } catch {
            throw ImportError(path, "not a readable zip archive")
        }
        var files: [File] = []
        var total = 0
        for entry in archive where entry.type == .file {
            let name = entry.path
            if name.split(separator: "/").contains(where: { $0.hasPrefix(".") || $0 == "__MACOSX" }) { continue }
            var data = Data()
            do {
                _ = try archive.extract(entry, skipCRC32: false) { chunk in
                    total += chunk.count
                    if total > limit {
                        throw ImportError(
                            path,
                            limit == maxBytes
                                ? "more than 2 GiB uncompressed; pick the export itself"
                                : "more than \(limit) bytes uncompressed, the most this server unpacks")
                    }
                    try budget.charge(chunk.count, origin: path)
                    data.append(chunk)
                }
            } catch let error as ImportError {
                throw error
            } catch {
                throw ImportError(path, "the archive is damaged at \(name)")
            }
            files.append(File(path: name, data: data))
        }
        return files.sorted { $0.path < $1.path }
    }
}

/// Why an import could not read something: the file (and, when known, the position) and
/// what is wrong, as one line.
public struct ImportError: Error, Sendable, CustomStringConvertible, Equatable {
    public var file: String
    public var reason: String

    public init(_ file: String, _ reason: String) {
        self.file = file
        self.reason = reason
    }

    public var description: String { "\(file): \(reason)" }
}

/// The few tar features Joplin's `.jex` uses: regular files in ustar or old-style headers.
enum Tar {
    static func files(_ data: Data, origin: String, budget: ImportBudget = .unbounded) throws -> [ImportSource.File] {
        try budget.charge(data.count, origin: origin)  // the copy below
        let bytes = [UInt8](data)
        var files: [ImportSource.File] = []
        var offset = 0
        var ended = false
        while offset + 512 <= bytes.count {
            let header = bytes[offset..<(offset + 512)]
            if header.allSatisfy({ $0 == 0 }) {
                ended = true
                break
            }
            func text(_ start: Int, _ length: Int) -> String {
                let field = header[(offset + start)..<(offset + start + length)]
                return String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
            }
            // Numeric fields are unsigned octal digits padded with spaces or NULs. `Int(_:radix:)`
            // alone would take a sign: a size of -1 made a reversed range (a trap) and -2000 an
            // offset that never moved (a loop for ever).
            func octal(_ start: Int, _ length: Int) -> Int? {
                let digits = text(start, length).trimmingCharacters(in: .whitespaces)
                guard !digits.isEmpty, digits.utf8.count <= 11,
                    digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "7")).contains($0) })
                else { return nil }
                return Int(digits, radix: 8)
            }
            // The header's checksum: the sum of its bytes with the checksum field as spaces.
            let stored = octal(148, 8)
            let sum = header.enumerated().reduce(0) { $0 + ((148..<156).contains($1.offset) ? 32 : Int($1.element)) }
            guard stored == sum else { throw ImportError(origin, "not a tar archive (bad header at byte \(offset))") }
            var name = text(0, 100)
            let prefix = text(345, 155)
            if text(257, 5) == "ustar", !prefix.isEmpty { name = prefix + "/" + name }
            guard let size = octal(124, 12) else {
                throw ImportError(origin, "not a tar archive (bad size at byte \(offset + 124))")
            }
            let type = header[offset + 156]
            let start = offset + 512
            guard size <= bytes.count - start else { throw ImportError(origin, "the archive ends inside \(name)") }
            if type == UInt8(ascii: "0") || type == 0 {
                try budget.charge(size, origin: origin)
                files.append(ImportSource.File(path: name, data: Data(bytes[start..<(start + size)])))
            }
            offset = start + (size + 511) / 512 * 512  // size >= 0: always past this header
        }
        // A tar ends with empty blocks; without them the copy was cut short.
        guard ended else { throw ImportError(origin, "the archive ends early (cut short?): no end-of-archive blocks") }
        return files.sorted { $0.path < $1.path }
    }
}
