import Foundation
import HummingbirdWebSocket
import NIOConcurrencyHelpers
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
///
/// A session that goes quiet frees its small compressor and its decompressor and keeps only
/// their windows (``QuietStreams``): an idle connection holds no zlib state.
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
    /// Where the streams of quiet sessions are freed (one per server).
    var quietStreams = QuietStreams()

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
        return PerMessageDeflate(builder: self, agreement: agreement)
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

    init(builder: PerMessageDeflateBuilder, agreement: PerMessageDeflateBuilder.Agreement) {
        sender = Sender(builder: builder, agreement: agreement, quiet: builder.quietStreams)
        receiver = Receiver(
            windowBits: max(9, agreement.receiveWindowBits), resetEachMessage: agreement.receiveNoContextTakeover,
            maxSize: builder.maxDecompressedFrameSize, quiet: builder.quietStreams)
    }

    func processReceivedFrame(_ frame: WebSocketFrame, context: WebSocketExtensionContext) async throws
        -> WebSocketFrame
    {
        try await receiver.decompress(frame)
    }

    func processFrameToSend(_ frame: WebSocketFrame, context: WebSocketExtensionContext) async throws -> WebSocketFrame
    {
        switch frame.opcode {
        case .text, .binary, .continuation: try await sender.compress(frame)
        default: frame
        }
    }

    func shutdown() async {
        await sender.close()
        await receiver.close()
    }

    /// The bytes a sync flush ends with, which RFC 7692 has the sender drop and the receiver
    /// put back (section 7.2.1).
    static let flushTail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    actor Sender: QuietStreams.Member {
        private let smallWindowBits: Int
        private let smallMemoryLevel: Int
        private let compressionLevel: Int
        private let largeWindowBits: Int?
        private let largeMemoryLevel: Int
        private let largeMessageBytes: Int
        private let minFrameSizeToCompress: Int
        private let resetEachMessage: Bool
        private let quiet: QuietStreams
        /// The small compressor while the session is busy; when it is quiet, only its window.
        private var small: RawDeflate.Compressor?
        private var smallWindow: [UInt8] = []
        private var lastUse: Date
        private var listed = false
        /// Inside a message whose first frame has gone and whose last has not: whether its
        /// frames are compressed (as its first was).
        private var midMessageCompressed: Bool?

        init(builder: PerMessageDeflateBuilder, agreement: PerMessageDeflateBuilder.Agreement, quiet: QuietStreams) {
            smallWindowBits = min(builder.smallWindowBits, agreement.sendWindowBits)
            smallMemoryLevel = builder.smallMemoryLevel
            compressionLevel = builder.compressionLevel
            // Only worth it with a larger window than the small compressor's.
            largeWindowBits = agreement.sendWindowBits > smallWindowBits ? agreement.sendWindowBits : nil
            largeMemoryLevel = builder.largeMemoryLevel
            largeMessageBytes = builder.largeMessageBytes
            minFrameSizeToCompress = builder.minFrameSizeToCompress
            resetEachMessage = agreement.sendNoContextTakeover
            self.quiet = quiet
            lastUse = quiet.clock.now()
        }

        func compress(_ frame: WebSocketFrame) throws -> WebSocketFrame {
            var frame = frame
            let first = midMessageCompressed == nil
            if first, frame.fin, frame.data.readableBytes >= largeMessageBytes, let largeWindowBits {
                // A stream of its own: the client's window then holds this message last, which
                // the small compressor's history does not know, so that starts again too.
                let large = try RawDeflate.Compressor(
                    windowBits: largeWindowBits, level: compressionLevel,
                    memoryLevel: largeMemoryLevel)
                frame.data = try deflate(frame.data, with: large, last: true)
                frame.rsv1 = true
                small = nil
                smallWindow = []
                return frame
            }
            // A message's later frames go as its first did.
            let compressed = midMessageCompressed ?? (frame.data.readableBytes >= minFrameSizeToCompress || !frame.fin)
            midMessageCompressed = frame.fin ? nil : compressed
            guard compressed else { return frame }
            let compressor =
                try small
                ?? RawDeflate.Compressor(
                    windowBits: smallWindowBits, level: compressionLevel, memoryLevel: smallMemoryLevel,
                    dictionary: smallWindow)
            small = compressor
            smallWindow = []
            frame.data = try deflate(frame.data, with: compressor, last: frame.fin)
            frame.rsv1 = first
            if frame.fin, resetEachMessage { small = nil }
            lastUse = quiet.clock.now()
            if small != nil, !listed {
                listed = true
                quiet.list(self)
            }
            return frame
        }

        /// A frame's bytes compressed with a sync flush; the last frame of a message without the
        /// flush's four closing bytes.
        private func deflate(_ data: ByteBuffer, with compressor: RawDeflate.Compressor, last: Bool) throws
            -> ByteBuffer
        {
            var output = try compressor.compress(data, allocator: ByteBufferAllocator())
            if last, output.readableBytes >= PerMessageDeflate.flushTail.count {
                output.moveWriterIndex(to: output.writerIndex - PerMessageDeflate.flushTail.count)
            }
            return output
        }

        nonisolated var quietID: ObjectIdentifier { ObjectIdentifier(self) }

        func freeIfQuiet(since cutoff: Date) {
            guard listed, midMessageCompressed == nil, lastUse <= cutoff else { return }
            smallWindow = small?.window() ?? []
            small = nil
            listed = false
            quiet.unlist(self)
        }

        func close() {
            small = nil
            smallWindow = []
            if listed { quiet.unlist(self) }
            listed = false
        }

        /// For tests: whether the small compressor is held, and the bytes of window kept without it.
        var held: (compressor: Bool, windowBytes: Int) { (small != nil, smallWindow.count) }
    }

    actor Receiver: QuietStreams.Member {
        private let windowBits: Int
        private let resetEachMessage: Bool
        private let maxSize: Int
        private let quiet: QuietStreams
        /// The decompressor while the session is busy; when it is quiet, only its window.
        private var decompressor: RawDeflate.Decompressor?
        private var window: [UInt8] = []
        private var lastUse: Date
        private var listed = false
        private var midMessageCompressed: Bool?

        init(windowBits: Int, resetEachMessage: Bool, maxSize: Int, quiet: QuietStreams) {
            self.windowBits = windowBits
            self.resetEachMessage = resetEachMessage
            self.maxSize = maxSize
            self.quiet = quiet
            lastUse = quiet.clock.now()
        }

        func decompress(_ frame: WebSocketFrame) throws -> WebSocketFrame {
            // (1002, a protocol error, as below.)
            if midMessageCompressed != nil, frame.rsv1 { throw NIOWebSocketError.fragmentedControlFrame }
            let compressed = midMessageCompressed ?? frame.rsv1
            midMessageCompressed = frame.fin ? nil : compressed
            guard compressed else { return frame }
            var frame = frame
            var data = frame.unmaskedData
            if frame.fin { data.writeBytes(PerMessageDeflate.flushTail) }
            let stream = try decompressor ?? RawDeflate.Decompressor(windowBits: windowBits, dictionary: window)
            decompressor = stream
            window = []
            do {
                frame.data = try stream.decompress(
                    data, maxSize: maxSize, finalTailBytes: frame.fin ? PerMessageDeflate.flushTail.count : 0,
                    allocator: ByteBufferAllocator())
            } catch is RawDeflate.TooLarge {
                // swift-websocket closes the connection on any error thrown here, with 1011
                // (its own fault) unless the error is one of NIOWebSocketError's: this one is
                // 1009, the message too big, as for an uncompressed message over the limit.
                throw NIOWebSocketError.invalidFrameLength
            } catch {
                // Not DEFLATE data, or data after a final block (RFC 7692 section 8: fail the
                // connection). The NIOWebSocketError that swift-websocket answers with 1002, a
                // protocol error, instead of 1011 (the reason itself is not sent).
                throw NIOWebSocketError.fragmentedControlFrame
            }
            frame.maskKey = nil
            frame.rsv1 = false
            if frame.fin, resetEachMessage { decompressor = nil }
            lastUse = quiet.clock.now()
            if decompressor != nil, !listed {
                listed = true
                quiet.list(self)
            }
            return frame
        }

        nonisolated var quietID: ObjectIdentifier { ObjectIdentifier(self) }

        func freeIfQuiet(since cutoff: Date) {
            guard listed, midMessageCompressed == nil, lastUse <= cutoff else { return }
            window = decompressor?.window() ?? []
            decompressor = nil
            listed = false
            quiet.unlist(self)
        }

        func close() {
            decompressor = nil
            window = []
            if listed { quiet.unlist(self) }
            listed = false
        }

        /// For tests: whether the decompressor is held, and the bytes of window kept without it.
        var held: (decompressor: Bool, windowBytes: Int) { (decompressor != nil, window.count) }
    }
}

/// The compression streams of sessions that went quiet, freed by one task.
///
/// A session's compressor and decompressor take about 26 KB (zlib's state: the small
/// compressor's hash chains and buffers, the decompressor's tables), which an idle connection
/// kept for its whole life (docs/benchmarks.md, "Idle connections with permessage-deflate").
/// A stream that has not been used for `quiet` is freed, keeping only its window (the last
/// bytes it saw, at most 1 KiB for the windows the server negotiates) for the stream that the
/// next message makes, so context takeover goes on as if nothing happened. One task for all
/// of them, like the deadlines' (``SessionDeadlines``): a task per session would cost more
/// than it frees. It runs only while some stream is held, and looks every `quiet`, so a stream
/// is freed between one and two `quiet`s after its last message.
final class QuietStreams: Sendable {
    protocol Member: Actor {
        nonisolated var quietID: ObjectIdentifier { get }
        /// Frees the streams if unused since `cutoff`, and then leaves the list (`unlist`).
        func freeIfQuiet(since cutoff: Date)
    }

    private struct State {
        var members: [ObjectIdentifier: any Member] = [:]
        var running = false
    }

    private let state = NIOLockedValueBox(State())
    let quiet: Duration
    /// What a stream's last use is dated by, and what the sweep sleeps on (the server's).
    let clock: ServerClock

    init(quiet: Duration = .seconds(1), clock: ServerClock = .system) {
        self.quiet = quiet
        self.clock = clock
    }

    /// Called by a member, from its own isolation, when it makes a stream.
    func list(_ member: any Member) {
        let start = state.withLockedValue { state in
            state.members[member.quietID] = member
            defer { state.running = true }
            return !state.running
        }
        if start {
            Task { await self.run() }
        }
    }

    /// Called by a member, from its own isolation, when it frees its streams.
    func unlist(_ member: any Member) {
        _ = state.withLockedValue { $0.members.removeValue(forKey: member.quietID) }
    }

    var count: Int { state.withLockedValue { $0.members.count } }

    private func run() async {
        while true {
            try? await clock.sleep(quiet)
            let members = state.withLockedValue { Array($0.members.values) }
            let cutoff = clock.now().addingTimeInterval(-quiet.timeInterval)
            for member in members {
                await member.freeIfQuiet(since: cutoff)
            }
            let done = state.withLockedValue { state in
                if state.members.isEmpty { state.running = false }
                return !state.running
            }
            if done { return }
        }
    }
}
