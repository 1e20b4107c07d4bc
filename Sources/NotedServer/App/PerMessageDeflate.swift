import CompressNIO
import HummingbirdWebSocket
import NIOCore
import NIOWebSocket

/// permessage-deflate (RFC 7692) for the server, with two compressors: a small one for the
/// small messages that make up a session's life, and a large one made for each large message.
///
/// swift-websocket's extension has one compressor per connection, made when it opens, whose
/// window and memory level every message shares. Small ones (1 KiB window, memory level 4, about
/// 27 KB) keep an idle connection's memory down (docs/benchmarks.md, "Down to 32 KiB"), but
/// compress a page of 500 notes slowly and poorly: on word-like notes, 49 ms and 530 KB where a
/// 32 KiB window and memory level 8 take 23 ms and 415 KB (Python's zlib, the same library;
/// docs/benchmarks.md, "Pages with a window of their own"). A page is the larger part of the
/// server's time in a first sync, and the client waits for it.
///
/// So the server leaves its own window unbounded in the negotiation (15 bits, unless the client
/// asks for less) and compresses a message of at least ``largeMessageBytes`` with a compressor
/// made for it alone, freed when it is sent: a stream of its own that never refers to earlier
/// messages, which a client keeping its window reads like any other (context takeover lets a
/// sender refer to earlier messages, RFC 7692 never requires it to).
/// The small compressor's history is then no longer the client's, so it starts again (a
/// keystroke after a page compresses a little less once). Every other message goes through the
/// small compressor as before, with context takeover. What clients send is unchanged: their
/// window is bounded to 1 KiB (`client_max_window_bits=10`) when they offer to bound it.
struct PerMessageDeflateBuilder: WebSocketExtensionBuilder {
    static let name = "permessage-deflate"

    /// The largest message a client may send, decompressed.
    var maxDecompressedFrameSize: Int
    /// Messages from this size are compressed (the library's default, 256, left every ack and
    /// broadcast uncompressed).
    var minFrameSizeToCompress = 24
    /// Messages from this size are compressed on their own with a large window.
    var largeMessageBytes = 16 << 10
    /// The window clients are asked to compress with, in bits.
    var clientWindowBits = 10
    /// The small compressor: window bits, memory level, zlib level (level 1 compresses a page of
    /// notes 30 % faster than the default for 5 % more bytes: "Pages compressed at zlib level 1").
    var smallWindowBits = 10
    var smallMemoryLevel = 4
    var compressionLevel = 1
    /// The large compressor's memory level.
    var largeMemoryLevel = 8

    /// What an offer asks for, checked; nil for an offer the server declines (an unknown
    /// parameter, or a value out of range).
    struct Agreement {
        /// The window the client may compress with (the server's decompressor), and whether the
        /// response names it (only when the offer did).
        var receiveWindowBits = 15
        var receiveWindowInResponse = false
        var receiveNoContextTakeover = false
        /// The most the server may use, and whether the response names it (it must when the
        /// offer did).
        var sendWindowBits = 15
        var sendWindowInResponse = false
        var sendNoContextTakeover = false
    }

    func agreement(to offer: WebSocketExtensionHTTPParameters) -> Agreement? {
        var agreement = Agreement()
        for (name, value) in offer.parameters {
            switch (name, value) {
            case ("server_no_context_takeover", .null):
                agreement.sendNoContextTakeover = true
            case ("client_no_context_takeover", .null):
                agreement.receiveNoContextTakeover = true
            case ("server_max_window_bits", .value(let text)):
                // zlib cannot compress with an 8-bit window (it would use 9), so such an offer
                // is declined rather than answered with a window the server would exceed.
                guard let bits = Int(text), (9...15).contains(bits) else { return nil }
                agreement.sendWindowBits = bits
                agreement.sendWindowInResponse = true
            case ("client_max_window_bits", .null):
                agreement.receiveWindowBits = clientWindowBits
                agreement.receiveWindowInResponse = true
            case ("client_max_window_bits", .value(let text)):
                guard let bits = Int(text), (8...15).contains(bits) else { return nil }
                agreement.receiveWindowBits = min(bits, clientWindowBits)
                agreement.receiveWindowInResponse = true
            default:
                return nil
            }
        }
        return agreement
    }

    func clientRequestHeader() -> String { Self.name }

    func serverReponseHeader(to offer: WebSocketExtensionHTTPParameters) -> String? {
        guard let agreement = agreement(to: offer) else { return nil }
        var header = Self.name
        if agreement.receiveWindowInResponse { header += "; client_max_window_bits=\(agreement.receiveWindowBits)" }
        if agreement.receiveNoContextTakeover { header += "; client_no_context_takeover" }
        if agreement.sendWindowInResponse { header += "; server_max_window_bits=\(agreement.sendWindowBits)" }
        if agreement.sendNoContextTakeover { header += "; server_no_context_takeover" }
        return header
    }

    func serverExtension(from offer: WebSocketExtensionHTTPParameters) throws -> (any WebSocketExtension)? {
        guard let agreement = agreement(to: offer) else { return nil }
        return try PerMessageDeflate(builder: self, agreement: agreement)
    }

    /// The server's extension only.
    func clientExtension(from response: WebSocketExtensionHTTPParameters) throws -> (any WebSocketExtension)? { nil }
}

extension WebSocketExtensionFactory {
    /// permessage-deflate with a compressor of its own for each large message
    /// (``PerMessageDeflateBuilder``).
    static func perMessageDeflate(_ builder: PerMessageDeflateBuilder) -> WebSocketExtensionFactory {
        .init { builder }
    }
}

/// One connection's permessage-deflate (``PerMessageDeflateBuilder``).
struct PerMessageDeflate: WebSocketExtension {
    let name = PerMessageDeflateBuilder.name
    let sender: Sender
    let receiver: Receiver
    var reservedBits: WebSocketFrame.ReservedBits { .rsv1 }

    init(builder: PerMessageDeflateBuilder, agreement: PerMessageDeflateBuilder.Agreement) throws {
        sender = try Sender(builder: builder, agreement: agreement)
        receiver = try Receiver(
            windowBits: max(9, agreement.receiveWindowBits), resetEachMessage: agreement.receiveNoContextTakeover,
            maxSize: builder.maxDecompressedFrameSize)
    }

    func processReceivedFrame(_ frame: WebSocketFrame, context: WebSocketExtensionContext) async throws -> WebSocketFrame {
        try await receiver.decompress(frame)
    }

    func processFrameToSend(_ frame: WebSocketFrame, context: WebSocketExtensionContext) async throws -> WebSocketFrame {
        switch frame.opcode {
        case .text, .binary, .continuation: try await sender.compress(frame)
        default: frame
        }
    }

    func shutdown() async {}

    /// The bytes a sync flush ends with, which RFC 7692 has the sender drop and the receiver
    /// put back (section 7.2.1).
    static let flushTail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    actor Sender {
        private let small: ZlibCompressor
        private let largeConfiguration: ZlibConfiguration?
        private let largeMessageBytes: Int
        private let minFrameSizeToCompress: Int
        private let resetEachMessage: Bool
        /// Inside a message whose first frame has gone and whose last has not: whether its
        /// frames are compressed (as its first was).
        private var midMessageCompressed: Bool?

        init(builder: PerMessageDeflateBuilder, agreement: PerMessageDeflateBuilder.Agreement) throws {
            let smallBits = min(builder.smallWindowBits, agreement.sendWindowBits)
            small = try ZlibCompressor(algorithm: .deflate, configuration: ZlibConfiguration(
                windowSize: Int32(smallBits), compressionLevel: Int32(builder.compressionLevel),
                memoryLevel: Int32(builder.smallMemoryLevel)))
            // Only worth it with a larger window than the small compressor's.
            largeConfiguration = agreement.sendWindowBits > smallBits
                ? ZlibConfiguration(windowSize: Int32(agreement.sendWindowBits), compressionLevel: Int32(builder.compressionLevel),
                                    memoryLevel: Int32(builder.largeMemoryLevel))
                : nil
            largeMessageBytes = builder.largeMessageBytes
            minFrameSizeToCompress = builder.minFrameSizeToCompress
            resetEachMessage = agreement.sendNoContextTakeover
        }

        func compress(_ frame: WebSocketFrame) throws -> WebSocketFrame {
            var frame = frame
            let first = midMessageCompressed == nil
            if first, frame.fin, frame.data.readableBytes >= largeMessageBytes, let largeConfiguration {
                // A stream of its own: the client's window then holds this message last, which
                // the small compressor's history does not know, so that starts again too.
                let large = try ZlibCompressor(algorithm: .deflate, configuration: largeConfiguration)
                frame.data = try deflate(frame.data, with: large, last: true)
                frame.rsv1 = true
                try small.reset()
                return frame
            }
            // A message's later frames go as its first did.
            let compressed = midMessageCompressed ?? (frame.data.readableBytes >= minFrameSizeToCompress || !frame.fin)
            midMessageCompressed = frame.fin ? nil : compressed
            guard compressed else { return frame }
            frame.data = try deflate(frame.data, with: small, last: frame.fin)
            frame.rsv1 = first
            if frame.fin, resetEachMessage { try small.reset() }
            return frame
        }

        /// A frame's bytes compressed with a sync flush; the last frame of a message without the
        /// flush's four closing bytes.
        private func deflate(_ data: ByteBuffer, with compressor: ZlibCompressor, last: Bool) throws -> ByteBuffer {
            var data = data
            var output = try data.compressStream(with: compressor, flush: .sync, allocator: ByteBufferAllocator())
            if last, output.readableBytes >= PerMessageDeflate.flushTail.count {
                output.moveWriterIndex(to: output.writerIndex - PerMessageDeflate.flushTail.count)
            }
            return output
        }
    }

    actor Receiver {
        private let decompressor: ZlibDecompressor
        private let resetEachMessage: Bool
        private let maxSize: Int
        private var midMessageCompressed: Bool?

        init(windowBits: Int, resetEachMessage: Bool, maxSize: Int) throws {
            decompressor = try ZlibDecompressor(algorithm: .deflate, windowSize: Int32(windowBits))
            self.resetEachMessage = resetEachMessage
            self.maxSize = maxSize
        }

        /// RSV1 on a frame after a message's first (RFC 7692 section 6).
        struct MisplacedCompressionBit: Error {}

        func decompress(_ frame: WebSocketFrame) throws -> WebSocketFrame {
            if midMessageCompressed != nil, frame.rsv1 { throw MisplacedCompressionBit() }
            let compressed = midMessageCompressed ?? frame.rsv1
            midMessageCompressed = frame.fin ? nil : compressed
            guard compressed else { return frame }
            var frame = frame
            var data = frame.unmaskedData
            if frame.fin { data.writeBytes(PerMessageDeflate.flushTail) }
            frame.data = try data.decompressStream(with: decompressor, maxSize: maxSize, allocator: ByteBufferAllocator())
            frame.maskKey = nil
            frame.rsv1 = false
            if frame.fin, resetEachMessage { try decompressor.reset() }
            return frame
        }
    }
}
