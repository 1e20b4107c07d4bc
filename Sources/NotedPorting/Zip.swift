import Foundation
import ZIPFoundation

/// Zip archives of an export (ZIPFoundation).
enum Zip {
    /// Writes `files` into a new archive at `path`, deflated.
    static func write(_ files: [Exporter.File], to path: String) throws {
        try data(files).write(to: URL(fileURLWithPath: path))
    }

    /// A new archive of `files`, deflated, in memory.
    static func data(_ files: [Exporter.File]) throws -> Data {
        let archive = try Archive(data: Data(), accessMode: .create)
        for file in files {
            let data = file.data
            try archive.addEntry(
                with: file.path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate
            ) { position, size in
                data.subdata(in: Int(position)..<(Int(position) + size))
            }
        }
        guard let data = archive.data else { throw ExportError("the archive could not be made in memory") }
        return data
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
