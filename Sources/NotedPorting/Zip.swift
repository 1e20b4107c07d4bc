import Foundation
import ZIPFoundation

/// Zip archives of an export (ZIPFoundation).
enum Zip {
    /// Writes `files` into a new archive at `path` (made on disk, entries added a piece at a time).
    static func write(_ files: [Exporter.File], to path: String) throws {
        let archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .create)
        try add(files, to: archive)
    }

    /// A new archive of `files`, in memory.
    static func data(_ files: [Exporter.File]) throws -> Data {
        let archive = try Archive(data: Data(), accessMode: .create)
        try add(files, to: archive)
        guard let data = archive.data else { throw ExportError("the archive could not be made in memory") }
        return data
    }

    /// Text deflated; attachments (images, PDFs: compressed already) stored as they are.
    private static func add(_ files: [Exporter.File], to archive: Archive) throws {
        for file in files {
            if let source = file.source {
                let handle = try FileHandle(forReadingFrom: source)
                defer { try? handle.close() }
                let size =
                    (try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? NSNumber)?.int64Value ?? 0
                try archive.addEntry(with: file.path, type: .file, uncompressedSize: size, compressionMethod: .none) {
                    position, count in
                    try handle.seek(toOffset: UInt64(position))
                    return try handle.read(upToCount: count) ?? Data()
                }
                continue
            }
            let data = file.data
            let text = file.path.hasSuffix(".md") || file.path.hasSuffix(".json")
            try archive.addEntry(
                with: file.path, type: .file, uncompressedSize: Int64(data.count),
                compressionMethod: text ? .deflate : .none
            ) { position, size in
                data.subdata(in: Int(position)..<(Int(position) + size))
            }
        }
    }

    /// The files of an archive, each path with its bytes (directories left out).
    static func read(_ path: String) throws -> [Exporter.File] {
        let archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read)
        var files: [Exporter.File] = []
        for entry in archive where entry.type == .file {
            var data = Data()
            _ = try archive.extract(entry, skipCRC32: false) { data.append($0) }
            files.append(Exporter.File(path: entry.path, data: data))
        }
        return files
    }
}
