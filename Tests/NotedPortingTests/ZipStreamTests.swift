import Foundation
import Testing
import ZIPFoundation

@testable import NotedPorting

/// ``ZipStream``, the server's export archive written front to back, read back by an
/// independent reader (ZIPFoundation): whole entries deflated and stored, streamed entries with
/// data descriptors, names in UTF-8, and the ZIP64 end records of an archive of 65,535 entries
/// or more.
@Suite struct ZipStreamTests {
    /// Every entry of `archive` by path, with its bytes.
    func contents(_ archive: Data) throws -> [String: Data] {
        let reader = try Archive(data: archive, accessMode: .read)
        var files: [String: Data] = [:]
        for entry in reader {
            var data = Data()
            _ = try reader.extract(entry, skipCRC32: false) { data.append($0) }
            files[entry.path] = data
        }
        return files
    }

    @Test func wholeAndStreamedEntriesReadBack() throws {
        var zip = ZipStream(date: Date(timeIntervalSince1970: 1_700_000_000))
        var archive = Data()
        let text = Data(String(repeating: "Über notes 📝\n", count: 500).utf8)
        archive += try zip.entry("Folder/Ünïcode.md", text, deflate: true)
        archive += try zip.entry("empty.md", Data(), deflate: true)
        // A streamed, stored entry: its bytes in three pieces, then its descriptor.
        let pieces: [Data] = (0..<3).map { (piece: Int) -> Data in
            var bytes = [UInt8](repeating: 0, count: 1000)
            for index in bytes.indices { bytes[index] = UInt8((index * 7 + piece) % 256) }
            return Data(bytes)
        }
        archive += zip.beginEntry("attachments/abc/photo.png", deflated: false)
        var crc: UInt32 = 0
        for piece in pieces {
            crc = ZipStream.crc32(piece, continuing: crc)
            archive += piece
        }
        let size = UInt64(pieces.reduce(0) { $0 + $1.count })
        archive += zip.endEntry(crc32: crc, compressedSize: size, size: size)
        archive += try zip.entry("notes.json", Data("{}".utf8), deflate: false)
        archive += zip.finish()
        #expect(zip.offset == UInt64(archive.count))
        let files = try contents(archive)
        #expect(files["Folder/Ünïcode.md"] == text)
        #expect(files["empty.md"] == Data())
        #expect(files["attachments/abc/photo.png"] == pieces.reduce(Data(), +))
        #expect(files["notes.json"] == Data("{}".utf8))
    }

    @Test func anArchiveOfMoreThan65535EntriesHasZIP64EndRecords() throws {
        var zip = ZipStream()
        var archive = Data()
        for index in 0..<70_000 { archive += try zip.entry("n/\(index).md", Data("\(index)".utf8), deflate: false) }
        archive += zip.finish()
        // The ZIP64 end of central directory record is there, and the classic one says 0xFFFF.
        #expect(archive.range(of: Data([0x50, 0x4b, 0x06, 0x06])) != nil)
        let reader = try Archive(data: archive, accessMode: .read)
        var count = 0
        for entry in reader {
            count += 1
            if entry.path == "n/69999.md" {
                var data = Data()
                _ = try reader.extract(entry) { data.append($0) }
                #expect(data == Data("69999".utf8))
            }
        }
        #expect(count == 70_000)
    }
}
