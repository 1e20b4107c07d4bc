import CompressNIO
import Foundation
import HummingbirdWebSocket
import NIOCore
import NIOWebSocket
import NotedCore
import Testing

@testable import NotedServer

/// The server's permessage-deflate (RFC 7692): the negotiation, and every message read back by
/// a client's decompressor that keeps its window from message to message, as browsers do.
@Suite struct PerMessageDeflateTests {
    private static let builder = PerMessageDeflateBuilder(maxDecompressedFrameSize: 1 << 24)

    private static func offer(_ header: String) throws -> WebSocketExtensionHTTPParameters {
        let parsed = WebSocketExtensionHTTPParameters.parseHeaders([.secWebSocketExtensions: header])
        return try #require(parsed.first)
    }

    @Test(arguments: [
        // Browsers offer this: the client's window bounded to 1 KiB, the server's left open.
        ("permessage-deflate; client_max_window_bits", "permessage-deflate; client_max_window_bits=10"),
        ("permessage-deflate", "permessage-deflate"),
        ("permessage-deflate; client_max_window_bits=15", "permessage-deflate; client_max_window_bits=10"),
        ("permessage-deflate; client_max_window_bits=9", "permessage-deflate; client_max_window_bits=9"),
        ("permessage-deflate; client_max_window_bits=8", "permessage-deflate; client_max_window_bits=8"),
        ("permessage-deflate; server_max_window_bits=12", "permessage-deflate; server_max_window_bits=12"),
        (
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            "permessage-deflate; client_no_context_takeover; server_no_context_takeover"
        ),
    ])
    func acceptedOffers(offer: String, response: String) throws {
        #expect(Self.builder.serverReponseHeader(to: try Self.offer(offer)) == response)
        #expect(try Self.builder.serverExtension(from: try Self.offer(offer)) != nil)
    }

    @Test(arguments: [
        "permessage-deflate; server_max_window_bits=8",  // zlib compresses with at least 9 bits
        "permessage-deflate; server_max_window_bits",  // a value is required
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=ten",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; unknown_parameter",
    ])
    func declinedOffers(offer: String) throws {
        #expect(Self.builder.serverReponseHeader(to: try Self.offer(offer)) == nil)
        #expect(try Self.builder.serverExtension(from: try Self.offer(offer)) == nil)
    }

    /// A client's side of the stream: one raw inflate over every compressed message, its
    /// window kept (the four bytes of the sync flush put back at each message's end).
    private final class Client {
        let inflater: ZlibDecompressor
        init(windowBits: Int32 = 15) throws {
            inflater = try ZlibDecompressor(algorithm: .deflate, windowSize: windowBits)
        }

        func read(_ frames: [WebSocketFrame]) throws -> [UInt8] {
            let compressed = frames[0].rsv1
            #expect(frames.dropFirst().allSatisfy { !$0.rsv1 }, "RSV1 only on a message's first frame")
            var data = ByteBuffer()
            for frame in frames { data.writeImmutableBuffer(frame.data) }
            guard compressed else { return Array(data.readableBytesView) }
            data.writeBytes([0x00, 0x00, 0xFF, 0xFF])
            let out = try data.decompressStream(with: inflater, maxSize: 1 << 26, allocator: ByteBufferAllocator())
            return Array(out.readableBytesView)
        }
    }

    private static func text(_ bytes: [UInt8], fin: Bool = true, opcode: WebSocketOpcode = .text) -> WebSocketFrame {
        WebSocketFrame(fin: fin, opcode: opcode, data: ByteBuffer(bytes: bytes))
    }

    /// Words from a small vocabulary, as notes are: compressible, though not one text repeated.
    private static func words(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        let vocabulary = [
            "note", "sync", "page", "window", "deflate", "merge", "offline", "kettle", "river", "amber", "-", "\n",
        ]
        return Array((0..<count).map { _ in vocabulary.randomElement(using: &generator)! }.joined(separator: " ").utf8)
    }

    @Test(arguments: [
        "permessage-deflate; client_max_window_bits", "permessage-deflate; server_max_window_bits=12",
        "permessage-deflate; server_no_context_takeover",
    ])
    func everyMessageReadsBackThroughOneClientWindow(offer: String) async throws {
        let agreement = try #require(Self.builder.agreement(to: try Self.offer(offer)))
        let deflate = PerMessageDeflate(builder: Self.builder, agreement: agreement)
        let client = try Client(windowBits: Int32(agreement.sendWindowBits))
        let keystroke = Array(
            #"{"type":"change","collection":"notes","id":"0b6d1f9e-4c1a-4e8e-9a57-0d6f2a4b7c11","rev":12}"#.utf8)
        // Small, large (a page), small again: the small compressor must start over after the
        // large message; a tiny one goes uncompressed; then a fragmented message.
        let messages: [[UInt8]] = [
            keystroke, Self.words(30_000, seed: 1), keystroke, keystroke, Array("ok".utf8),
            Self.words(5_000, seed: 2), Self.words(40_000, seed: 3), Self.words(40_000, seed: 3), keystroke,
        ]
        var sizes: [Int] = []
        for message in messages {
            let frame = try await deflate.sender.compress(Self.text(message))
            sizes.append(frame.data.readableBytes)
            #expect(try client.read([frame]) == message)
        }
        #expect(sizes[4] == 2, "a message under 24 bytes goes as it is")
        #expect(sizes[1] < messages[1].count / 2, "a page compresses")
        if !agreement.sendNoContextTakeover {
            #expect(sizes[3] < sizes[0], "a repeated small message refers to the one before it")
        }
        // One message in three frames, the first small: all through the small compressor.
        let parts = [Array(keystroke.prefix(10)), Self.words(20_000, seed: 4), Array(keystroke.suffix(10))]
        var frames: [WebSocketFrame] = []
        for (index, part) in parts.enumerated() {
            frames.append(
                try await deflate.sender.compress(
                    Self.text(part, fin: index == parts.count - 1, opcode: index == 0 ? .text : .continuation)))
        }
        #expect(try client.read(frames) == parts.flatMap { $0 })
        let after = try await deflate.sender.compress(Self.text(keystroke))
        #expect(try client.read([after]) == keystroke)
    }

    /// What a client sends: compressed with its own window (here 10 bits, as the server asks),
    /// over fragments, and refused when RSV1 comes on a later frame or it inflates past the bound.
    @Test func receivedMessagesInflate() async throws {
        let builder = PerMessageDeflateBuilder(maxDecompressedFrameSize: 100_000)
        let agreement = try #require(
            builder.agreement(to: try Self.offer("permessage-deflate; client_max_window_bits")))
        let deflate = PerMessageDeflate(builder: builder, agreement: agreement)
        let client = try ZlibCompressor(
            algorithm: .deflate, configuration: ZlibConfiguration(windowSize: 10, compressionLevel: 6, memoryLevel: 8))
        func compressed(_ bytes: [UInt8], last: Bool = true) throws -> ByteBuffer {
            var input = ByteBuffer(bytes: bytes)
            var output = try input.compressStream(with: client, flush: .sync, allocator: ByteBufferAllocator())
            if last { output.moveWriterIndex(to: output.writerIndex - 4) }
            return output
        }
        for message in [Self.words(2_000, seed: 5), Self.words(2_000, seed: 5), Array("plain".utf8)] {
            let isPlain = message.count < 10
            let frame = WebSocketFrame(
                fin: true, rsv1: !isPlain, opcode: .text,
                data: isPlain ? ByteBuffer(bytes: message) : try compressed(message))
            let read = try await deflate.receiver.decompress(frame)
            #expect(Array(read.data.readableBytesView) == message)
        }
        let first = try await deflate.receiver.decompress(
            WebSocketFrame(
                fin: false, rsv1: true, opcode: .text, data: try compressed(Array("first half ".utf8), last: false)))
        let second = try await deflate.receiver.decompress(
            WebSocketFrame(fin: true, opcode: .continuation, data: try compressed(Array("second half".utf8))))
        #expect(String(buffer: first.data) + String(buffer: second.data) == "first half second half")

        let misplaced = PerMessageDeflate(builder: builder, agreement: agreement)
        _ = try await misplaced.receiver.decompress(
            WebSocketFrame(fin: false, opcode: .text, data: ByteBuffer(string: "a")))
        // swift-websocket answers this error with close code 1002 (a protocol error).
        await #expect(throws: NIOWebSocketError.fragmentedControlFrame) {
            try await misplaced.receiver.decompress(
                WebSocketFrame(fin: true, rsv1: true, opcode: .continuation, data: ByteBuffer(string: "b")))
        }

        let bomb = PerMessageDeflate(builder: builder, agreement: agreement)
        let zeros = try ZlibCompressor(
            algorithm: .deflate, configuration: ZlibConfiguration(windowSize: 10, compressionLevel: 9, memoryLevel: 8))
        var input = ByteBuffer(repeating: 0, count: 1_000_000)
        var packed = try input.compressStream(with: zeros, flush: .sync, allocator: ByteBufferAllocator())
        packed.moveWriterIndex(to: packed.writerIndex - 4)
        // This one with 1009, a message too big.
        await #expect(throws: NIOWebSocketError.invalidFrameLength) {
            try await bomb.receiver.decompress(WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: packed))
        }
        let garbage = PerMessageDeflate(builder: builder, agreement: agreement)
        await #expect(throws: NIOWebSocketError.fragmentedControlFrame) {
            try await garbage.receiver.decompress(
                WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0x00])))
        }
    }

    /// A quiet session's streams are freed by the sweep, and the next message in either
    /// direction still refers to what came before: the server's compressor starts from the old
    /// one's window, its decompressor from the window of what the client sent.
    @Test func quietStreamsAreFreedAndContextCarriesOn() async throws {
        var builder = Self.builder
        let clock = ManualClock()
        builder.quietStreams = QuietStreams(quiet: .seconds(1), clock: clock.server)
        let agreement = try #require(
            builder.agreement(to: try Self.offer("permessage-deflate; client_max_window_bits")))
        let deflate = PerMessageDeflate(builder: builder, agreement: agreement)
        let client = try Client(windowBits: Int32(agreement.sendWindowBits))
        let clientSender = try ZlibCompressor(
            algorithm: .deflate,
            configuration: ZlibConfiguration(
                windowSize: Int32(agreement.receiveWindowBits), compressionLevel: 6, memoryLevel: 8))
        func fromClient(_ bytes: [UInt8]) async throws -> [UInt8] {
            var input = ByteBuffer(bytes: bytes)
            var output = try input.compressStream(with: clientSender, flush: .sync, allocator: ByteBufferAllocator())
            output.moveWriterIndex(to: output.writerIndex - 4)
            let read = try await deflate.receiver.decompress(
                WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: output))
            return Array(read.data.readableBytesView)
        }
        let keystroke = Array(
            #"{"type":"change","collection":"notes","id":"0b6d1f9e-4c1a-4e8e-9a57-0d6f2a4b7c11","rev":12}"#.utf8)
        let first = try await deflate.sender.compress(Self.text(keystroke))
        #expect(try client.read([first]) == keystroke)
        #expect(try await fromClient(keystroke) == keystroke)
        #expect(await deflate.sender.held.compressor)
        #expect(await deflate.receiver.held.decompressor)

        // A quiet spell later the sweep wakes and frees both (it runs as a task of its own:
        // looked at until it has, for up to 5 s).
        #expect(await clock.sleeping(), "the sweep waits on the test's clock")
        clock.advance(by: .seconds(1))
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            let sending = await deflate.sender.held.compressor
            let receiving = await deflate.receiver.held.decompressor
            if !sending && !receiving { break }
            await Task.yield()
        }
        let sender = await deflate.sender.held
        let receiver = await deflate.receiver.held
        #expect(!sender.compressor && sender.windowBytes == keystroke.count)
        #expect(!receiver.decompressor && receiver.windowBytes == keystroke.count)
        #expect(builder.quietStreams.count == 0)

        let again = try await deflate.sender.compress(Self.text(keystroke))
        #expect(try client.read([again]) == keystroke)
        #expect(
            again.data.readableBytes < first.data.readableBytes / 2, "the new compressor refers to the old one's window"
        )
        #expect(try await fromClient(keystroke) == keystroke, "the new decompressor reads a reference to before")
        #expect(await deflate.sender.held.compressor)
        #expect(builder.quietStreams.count == 2)
        await deflate.shutdown()
        #expect(builder.quietStreams.count == 0)
    }

    /// Messages both ways with the streams freed at random points in between (forced, as the
    /// sweep would after a quiet spell), sizes from a keystroke to a page: every message reads
    /// back through one client stream that never starts over. NOTED_TEST_SEED picks the run.
    @Test func streamsFreedAtRandomPointsLoseNothing() async throws {
        let seed =
            UInt64(ProcessInfo.processInfo.environment["NOTED_TEST_SEED"] ?? "")
            ?? UInt64.random(in: 1...UInt64.max / 2)
        var generator = SplitMix64(seed: seed)
        for offer in ["permessage-deflate; client_max_window_bits", "permessage-deflate"] {
            let agreement = try #require(Self.builder.agreement(to: try Self.offer(offer)))
            let deflate = PerMessageDeflate(builder: Self.builder, agreement: agreement)
            let client = try Client(windowBits: Int32(agreement.sendWindowBits))
            let clientSender = try ZlibCompressor(
                algorithm: .deflate,
                configuration: ZlibConfiguration(
                    windowSize: Int32(agreement.receiveWindowBits), compressionLevel: 6, memoryLevel: 8))
            for step in 0..<300 {
                do {
                    let size = [20, 200, 900, 3_000, 20_000].randomElement(using: &generator)!
                    let message = Self.words(size / 6 + 1, seed: generator.next() % 8)
                    switch generator.next() % 4 {
                    case 0:
                        await deflate.sender.freeIfQuiet(since: Date().addingTimeInterval(3600))
                        await deflate.receiver.freeIfQuiet(since: Date().addingTimeInterval(3600))
                    case 1:
                        var input = ByteBuffer(bytes: message)
                        var output = try input.compressStream(
                            with: clientSender, flush: .sync, allocator: ByteBufferAllocator())
                        output.moveWriterIndex(to: output.writerIndex - 4)
                        let read = try await deflate.receiver.decompress(
                            WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: output))
                        #expect(
                            Array(read.data.readableBytesView) == message,
                            "seed \(seed), \(offer), step \(step): from the client")
                    default:
                        let frame = try await deflate.sender.compress(Self.text(message))
                        #expect(
                            try client.read([frame]) == message, "seed \(seed), \(offer), step \(step): to the client")
                    }
                } catch {
                    Issue.record("seed \(seed), \(offer), step \(step): \(error)")
                    return
                }
            }
            await deflate.shutdown()
        }
    }

    /// A client may end a message's stream with a final block (RFC 7692 section 7.2.3.3); the
    /// next message starts a new stream, which may still refer to the window.
    @Test func aMessageEndingItsStreamKeepsTheWindow() async throws {
        let agreement = try #require(Self.builder.agreement(to: try Self.offer("permessage-deflate")))
        let deflate = PerMessageDeflate(builder: Self.builder, agreement: agreement)
        let text = Self.words(500, seed: 9)
        var input = ByteBuffer(bytes: text)
        let ending = try ZlibCompressor(
            algorithm: .deflate, configuration: ZlibConfiguration(windowSize: 15, compressionLevel: 6, memoryLevel: 8))
        let final = try input.compressStream(with: ending, flush: .finish, allocator: ByteBufferAllocator())
        let read = try await deflate.receiver.decompress(
            WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: final))
        #expect(Array(read.data.readableBytesView) == text)
        // The client's next stream starts from the text as its dictionary (zlib's own
        // deflateSetDictionary), so it is mostly references to the message before.
        let next = try RawDeflate.Compressor(windowBits: 15, level: 6, memoryLevel: 8, dictionary: text)
        var packed = try next.compress(ByteBuffer(bytes: text), allocator: ByteBufferAllocator())
        packed.moveWriterIndex(to: packed.writerIndex - 4)
        #expect(packed.readableBytes < text.count / 10)
        let again = try await deflate.receiver.decompress(
            WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: packed))
        #expect(Array(again.data.readableBytesView) == text)
        // Bytes after a final block are not DEFLATE data: a protocol error (1002).
        var ended = ByteBuffer(bytes: text)
        let closing = try ZlibCompressor(
            algorithm: .deflate, configuration: ZlibConfiguration(windowSize: 15, compressionLevel: 6, memoryLevel: 8))
        var trailing = try ended.compressStream(with: closing, flush: .finish, allocator: ByteBufferAllocator())
        trailing.writeBytes([0x01, 0x02, 0x03])
        await #expect(throws: NIOWebSocketError.fragmentedControlFrame) {
            try await deflate.receiver.decompress(WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: trailing))
        }
    }
}
