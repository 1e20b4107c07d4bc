import Foundation
import ZIPFoundation

/// A zip archive made front to back, to be sent as it is made (the server's export): it returns
/// the bytes to write next and keeps only the central directory (about 100 bytes an entry).
///
/// An entry is either whole (its bytes in memory: ``entry(_:_:deflate:)``, sizes and CRC in its
/// header) or streamed (``beginEntry(_:deflated:)``, then the caller writes its bytes, then
/// ``endEntry(crc32:compressedSize:size:)`` writes a data descriptor, general purpose bit 3).
/// Streamed entries are ZIP64 throughout (an extra field in both headers, an 8-byte-size
/// descriptor), since their size is not known when their header is written; the archive's end
/// has ZIP64 records when it has 65,535 entries or more or passes 4 GiB (APPNOTE 6.3.10,
/// sections 4.3.9, 4.3.14-16, 4.5.3).
public struct ZipStream: Sendable {
    private struct Central {
        var path: [UInt8]
        var method: UInt16
        var flags: UInt16
        var crc32: UInt32
        var compressedSize: UInt64
        var size: UInt64
        var offset: UInt64
        var zip64Sizes: Bool
    }

    private var entries: [Central] = []
    private var open: Central?
    /// Bytes of the archive so far (returned, and written by the caller inside a streamed entry).
    public private(set) var offset: UInt64 = 0
    private let time: UInt16
    private let date: UInt16

    public init(date: Date = Date()) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let year = min(max((parts.year ?? 1980) - 1980, 0), 127)
        self.date = UInt16(year << 9 | (parts.month ?? 1) << 5 | (parts.day ?? 1))
        self.time = UInt16((parts.hour ?? 0) << 11 | (parts.minute ?? 0) << 5 | (parts.second ?? 0) / 2)
    }

    private static let utf8Names: UInt16 = 1 << 11
    private static let descriptorFollows: UInt16 = 1 << 3
    private static let stored: UInt16 = 0
    private static let deflated: UInt16 = 8

    /// A whole entry: its header and its bytes, deflated when `deflate` (text).
    public mutating func entry(_ path: String, _ data: Data, deflate: Bool) throws -> Data {
        precondition(open == nil, "an entry is under way")
        var body = Data()
        let crc: UInt32
        if deflate && !data.isEmpty {
            crc = try Data.compress(
                size: Int64(data.count), bufferSize: 64 * 1024,
                provider: { position, size in
                    data.subdata(in: data.startIndex + Int(position)..<data.startIndex + Int(position) + size)
                }, consumer: { body.append($0) })
        } else {
            crc = data.crc32(checksum: 0)
            body = data
        }
        let method = deflate && !data.isEmpty ? Self.deflated : Self.stored
        let needs64 = UInt64(data.count) >= 0xFFFF_FFFF || UInt64(body.count) >= 0xFFFF_FFFF
        let central = Central(
            path: Array(path.utf8), method: method, flags: Self.utf8Names, crc32: crc,
            compressedSize: UInt64(body.count), size: UInt64(data.count), offset: offset, zip64Sizes: needs64)
        var out = localHeader(central)
        out.append(body)
        offset += UInt64(out.count)
        entries.append(central)
        return out
    }

    /// The header of an entry whose bytes the caller writes next (deflated by the caller when
    /// `deflated`), ended by ``endEntry(crc32:compressedSize:size:)``.
    public mutating func beginEntry(_ path: String, deflated: Bool) -> Data {
        precondition(open == nil, "an entry is under way")
        let central = Central(
            path: Array(path.utf8), method: deflated ? Self.deflated : Self.stored,
            flags: Self.utf8Names | Self.descriptorFollows, crc32: 0, compressedSize: 0, size: 0, offset: offset,
            zip64Sizes: true)
        let header = localHeader(central)
        offset += UInt64(header.count)
        open = central
        return header
    }

    /// The data descriptor of the entry under way: the CRC-32 of its content, the bytes the
    /// caller wrote, and the content's size.
    public mutating func endEntry(crc32: UInt32, compressedSize: UInt64, size: UInt64) -> Data {
        guard var central = open else { preconditionFailure("no entry under way") }
        central.crc32 = crc32
        central.compressedSize = compressedSize
        central.size = size
        offset += compressedSize
        var out = Data()
        out.le32(0x0807_4b50)
        out.le32(crc32)
        out.le64(compressedSize)
        out.le64(size)
        offset += UInt64(out.count)
        entries.append(central)
        open = nil
        return out
    }

    /// The central directory and the end records: the archive's last bytes.
    public mutating func finish() -> Data {
        precondition(open == nil, "an entry is under way")
        let start = offset
        var out = Data()
        for entry in entries {
            let offset64 = entry.offset >= 0xFFFF_FFFF
            var extra = Data()
            if entry.zip64Sizes || offset64 {
                var fields = Data()
                if entry.zip64Sizes {
                    fields.le64(entry.size)
                    fields.le64(entry.compressedSize)
                }
                if offset64 { fields.le64(entry.offset) }
                extra.le16(0x0001)
                extra.le16(UInt16(fields.count))
                extra.append(fields)
            }
            out.le32(0x0201_4b50)
            out.le16(3 << 8 | 45)  // made by: Unix, APPNOTE 4.5
            out.le16(extra.isEmpty ? 20 : 45)
            common(entry, extra: extra, into: &out)
            out.le16(0)  // comment
            out.le16(0)  // disk
            out.le16(0)  // internal attributes
            out.le32(UInt32(0o100644) << 16)  // a regular file, rw-r--r--
            out.le32(offset64 ? 0xFFFF_FFFF : UInt32(entry.offset))
            out.append(contentsOf: entry.path)
            out.append(extra)
        }
        let size = UInt64(out.count)
        let count = UInt64(entries.count)
        if count >= 0xFFFF || start >= 0xFFFF_FFFF || size >= 0xFFFF_FFFF {
            let record = start + size
            out.le32(0x0606_4b50)
            out.le64(44)
            out.le16(3 << 8 | 45)
            out.le16(45)
            out.le32(0)
            out.le32(0)
            out.le64(count)
            out.le64(count)
            out.le64(size)
            out.le64(start)
            out.le32(0x0706_4b50)
            out.le32(0)
            out.le64(record)
            out.le32(1)
        }
        out.le32(0x0605_4b50)
        out.le16(0)
        out.le16(0)
        out.le16(UInt16(min(count, 0xFFFF)))
        out.le16(UInt16(min(count, 0xFFFF)))
        out.le32(UInt32(min(size, 0xFFFF_FFFF)))
        out.le32(UInt32(min(start, 0xFFFF_FFFF)))
        out.le16(0)
        offset += UInt64(out.count)
        return out
    }

    private func localHeader(_ entry: Central) -> Data {
        var extra = Data()
        if entry.zip64Sizes {
            extra.le16(0x0001)
            extra.le16(16)
            extra.le64(entry.size)
            extra.le64(entry.compressedSize)
        }
        var out = Data()
        out.le32(0x0403_4b50)
        out.le16(entry.zip64Sizes ? 45 : 20)
        common(entry, extra: extra, into: &out)
        out.append(contentsOf: entry.path)
        out.append(extra)
        return out
    }

    /// The fields both headers of an entry share, from its flags to its extra field's length.
    private func common(_ entry: Central, extra: Data, into out: inout Data) {
        out.le16(entry.flags)
        out.le16(entry.method)
        out.le16(time)
        out.le16(date)
        out.le32(entry.crc32)
        out.le32(entry.zip64Sizes ? 0xFFFF_FFFF : UInt32(entry.compressedSize))
        out.le32(entry.zip64Sizes ? 0xFFFF_FFFF : UInt32(entry.size))
        out.le16(UInt16(entry.path.count))
        out.le16(UInt16(extra.count))
    }

    /// The CRC-32 of `data` continuing `crc` (zlib's), for a streamed entry's content.
    public static func crc32(_ data: Data, continuing crc: UInt32 = 0) -> UInt32 {
        data.crc32(checksum: crc)
    }
}

extension Data {
    fileprivate mutating func le16(_ value: UInt16) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
    fileprivate mutating func le32(_ value: UInt32) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
    fileprivate mutating func le64(_ value: UInt64) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}
