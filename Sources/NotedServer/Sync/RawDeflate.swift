import CCompressZlib
import CNotedSystem
import NIOCore

/// Raw DEFLATE streams (RFC 1951) of zlib, for permessage-deflate (``PerMessageDeflate``).
///
/// CompressNIO's streams cannot hand over their window, which is what lets a quiet session free
/// its streams and keep only the window (at most 1 KiB here) that the next message may refer to:
/// `deflateGetDictionary`/`inflateGetDictionary` read it, `…SetDictionary` gives it to a new
/// stream (zlib allows both at any point of a raw stream after a flush). A stream's memory is a
/// zone of pages of its own (``noted_zone``), unmapped when the stream ends: freed to malloc,
/// 1,000 quiet sessions' streams stayed in the process, in pieces between the allocations made
/// around them (59.4 KB per connection before and after; 41.8 KB even with `malloc_trim`,
/// docs/benchmarks.md "Idle connections with permessage-deflate").
enum RawDeflate {
    struct Failure: Error, CustomStringConvertible {
        let call: String
        let code: Int32
        var description: String { "zlib \(call) failed (\(code))" }
    }

    /// A message that decompresses to more than the limit.
    struct TooLarge: Error, CustomStringConvertible {
        let limit: Int
        var description: String { "a message decompresses to more than \(limit) bytes" }
    }

    /// zlib's `…Init2` are macros Swift cannot call; these are what they expand to.
    fileprivate static let streamSize = Int32(MemoryLayout<z_stream>.size)

    /// What zlib's `deflateGetDictionary` or `inflateGetDictionary` gives for `stream`.
    fileprivate static func window(
        of stream: UnsafeMutablePointer<z_stream>,
        _ get: (UnsafeMutablePointer<z_stream>, UnsafeMutablePointer<Bytef>?, UnsafeMutablePointer<uInt>) -> Int32
    ) -> [UInt8] {
        var length: uInt = 0
        guard get(stream, nil, &length) == Z_OK, length > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: Int(length)) { buffer, count in
            var got = length
            count = get(stream, buffer.baseAddress, &got) == Z_OK ? Int(got) : 0
        }
    }

    /// A z_stream whose memory comes from a zone of `zoneBytes`.
    fileprivate struct Stream {
        let stream: UnsafeMutablePointer<z_stream>
        let zone: UnsafeMutablePointer<noted_zone>

        init(zoneBytes: Int) {
            zone = .allocate(capacity: 1)
            zone.initialize(to: noted_zone())
            // A zone the system refuses leaves every request to malloc.
            _ = noted_zone_open(zone, zoneBytes)
            stream = .allocate(capacity: 1)
            stream.initialize(to: z_stream())
            stream.pointee.zalloc = noted_zone_alloc
            stream.pointee.zfree = noted_zone_free
            stream.pointee.opaque = UnsafeMutableRawPointer(zone)
        }

        /// Runs `body` with `input` as the stream's input.
        func reading(_ input: ByteBuffer, _ body: () throws -> Void) rethrows {
            try input.withUnsafeReadableBytes { source in
                stream.pointee.next_in = UnsafeMutablePointer(
                    mutating: source.baseAddress?.assumingMemoryBound(to: UInt8.self))
                stream.pointee.avail_in = uInt(source.count)
                defer {
                    stream.pointee.next_in = nil
                    stream.pointee.avail_in = 0
                }
                try body()
            }
        }

        /// After zlib's `…End` (or a failed `…Init2`).
        func release() {
            stream.deinitialize(count: 1)
            stream.deallocate()
            noted_zone_close(zone)
            zone.deinitialize(count: 1)
            zone.deallocate()
        }
    }

    /// A compressor: each call's output ends with a sync flush (`00 00 FF FF`).
    final class Compressor {
        private let owned: Stream
        private var stream: UnsafeMutablePointer<z_stream> { owned.stream }

        /// The zone holds what zlib 1.2.13 asks for (a compressor's state is 5,952 bytes, then its
        /// window twice over, its hash heads and its pending buffer), rounded up to pages.
        init(windowBits: Int, level: Int, memoryLevel: Int, dictionary: [UInt8] = []) throws {
            let window = 1 << windowBits
            let symbols = 1 << (memoryLevel + 6)
            owned = Stream(zoneBytes: 6_144 + 4 * window + 2 * (symbols << 1) + 4 * symbols)
            let code = deflateInit2_(
                owned.stream, Int32(level), Z_DEFLATED, -Int32(windowBits), Int32(memoryLevel),
                Z_DEFAULT_STRATEGY, zlibVersion(), RawDeflate.streamSize)
            guard code == Z_OK else {
                owned.release()
                throw Failure(call: "deflateInit2", code: code)
            }
            if !dictionary.isEmpty {
                let code = dictionary.withUnsafeBufferPointer {
                    deflateSetDictionary(stream, $0.baseAddress, UInt32($0.count))
                }
                guard code == Z_OK else { throw Failure(call: "deflateSetDictionary", code: code) }
            }
        }

        deinit {
            _ = deflateEnd(stream)
            owned.release()
        }

        /// `input` compressed, flushed so that a reader can decode all of it.
        func compress(_ input: ByteBuffer, allocator: ByteBufferAllocator) throws -> ByteBuffer {
            var output = allocator.buffer(capacity: Int(deflateBound(stream, UInt(input.readableBytes))) + 16)
            try owned.reading(input) {
                // More output may be pending whenever a call fills all the room it was given.
                var filled = true
                while filled {
                    output.reserveCapacity(minimumWritableBytes: 256)
                    let code = output.withUnsafeMutableWritableBytes { target -> Int32 in
                        stream.pointee.next_out = target.baseAddress?.assumingMemoryBound(to: UInt8.self)
                        stream.pointee.avail_out = UInt32(target.count)
                        let code = deflate(stream, Z_SYNC_FLUSH)
                        filled = stream.pointee.avail_out == 0
                        return code
                    }
                    output.moveWriterIndex(forwardBy: output.writableBytes - Int(stream.pointee.avail_out))
                    stream.pointee.next_out = nil
                    stream.pointee.avail_out = 0
                    // Z_BUF_ERROR: nothing left to do (a call after all was flushed).
                    guard code == Z_OK || code == Z_BUF_ERROR else { throw Failure(call: "deflate", code: code) }
                }
            }
            return output
        }

        /// The last bytes compressed, as many as the window holds.
        func window() -> [UInt8] { RawDeflate.window(of: stream, deflateGetDictionary) }
    }

    /// A decompressor.
    final class Decompressor {
        private let owned: Stream
        private var stream: UnsafeMutablePointer<z_stream> { owned.stream }

        /// The zone holds a decompressor's state (7,160 bytes in zlib 1.2.13) and its window.
        init(windowBits: Int, dictionary: [UInt8] = []) throws {
            owned = Stream(zoneBytes: 7_168 + (1 << windowBits))
            let code = inflateInit2_(owned.stream, -Int32(windowBits), zlibVersion(), RawDeflate.streamSize)
            guard code == Z_OK else {
                owned.release()
                throw Failure(call: "inflateInit2", code: code)
            }
            try setWindow(dictionary)
        }

        deinit {
            _ = inflateEnd(stream)
            owned.release()
        }

        private func setWindow(_ window: [UInt8]) throws {
            guard !window.isEmpty else { return }
            let code = window.withUnsafeBufferPointer { inflateSetDictionary(stream, $0.baseAddress, UInt32($0.count)) }
            guard code == Z_OK else { throw Failure(call: "inflateSetDictionary", code: code) }
        }

        /// `input` decompressed; throws ``TooLarge`` past `maxSize` bytes. A block that ends the
        /// stream (BFINAL, RFC 7692 section 7.2.3.3) ends the message, and at most
        /// `finalTailBytes` may follow it; the next message starts a new stream that keeps the
        /// window, so the sender may still refer to this one.
        func decompress(
            _ input: ByteBuffer, maxSize: Int, finalTailBytes: Int = 0,
            allocator: ByteBufferAllocator
        ) throws -> ByteBuffer {
            var output = allocator.buffer(capacity: min(maxSize + 1, max(256, input.readableBytes * 4)))
            try owned.reading(input) {
                while true {
                    if output.writableBytes == 0 {
                        guard output.readableBytes <= maxSize else { throw TooLarge(limit: maxSize) }
                        output.reserveCapacity(
                            minimumWritableBytes: min(
                                maxSize + 1 - output.readableBytes,
                                max(256, output.readableBytes)))
                    }
                    let code = output.withUnsafeMutableWritableBytes { target -> Int32 in
                        stream.pointee.next_out = target.baseAddress?.assumingMemoryBound(to: UInt8.self)
                        stream.pointee.avail_out = UInt32(target.count)
                        return inflate(stream, Z_SYNC_FLUSH)
                    }
                    output.moveWriterIndex(forwardBy: output.writableBytes - Int(stream.pointee.avail_out))
                    let roomLeft = stream.pointee.avail_out > 0
                    stream.pointee.next_out = nil
                    stream.pointee.avail_out = 0
                    guard output.readableBytes <= maxSize else { throw TooLarge(limit: maxSize) }
                    switch code {
                    case Z_STREAM_END:
                        // What is left is the flush tail the receiver appended (RFC 7692
                        // section 7.2.2); anything more is not a message's end.
                        guard stream.pointee.avail_in <= UInt32(finalTailBytes) else {
                            throw Failure(call: "inflate (data after the final block)", code: code)
                        }
                        let window = self.window()
                        let reset = inflateReset(stream)
                        guard reset == Z_OK else { throw Failure(call: "inflateReset", code: reset) }
                        try setWindow(window)
                        return
                    case Z_OK, Z_BUF_ERROR:
                        // Done once all input is read and the output was not the limit.
                        if stream.pointee.avail_in == 0 && roomLeft { return }
                        if code == Z_BUF_ERROR && roomLeft {
                            // No progress with room to write: the input is cut short mid-block,
                            // which a flushed message never is.
                            throw Failure(call: "inflate", code: code)
                        }
                    default:
                        throw Failure(call: "inflate", code: code)
                    }
                }
            }
            return output
        }

        /// The last bytes decompressed, as many as the window holds.
        func window() -> [UInt8] { RawDeflate.window(of: stream, inflateGetDictionary) }
    }
}
