import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// The HTTP/1 + WebSocket server channel with the `Origin` check in front of the upgrade.
///
/// HummingbirdWebSocket answers every refused upgrade with 400; the protocol wants 403 for a
/// browser origin that is not allowed, so this channel inspects upgrade requests before the
/// upgrader sees them.
struct OriginGuardedChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value
    let base: HTTP1WebSocketUpgradeChannel
    let policy: OriginPolicy
    let path: String
    /// The node's open connections, capped.
    let connections: ConnectionLimit
    /// How long the first request's head may take to arrive.
    var headTimeout: TimeAmount = .seconds(10)
    /// How long data sent on a connection may stay unacknowledged before the kernel drops the
    /// connection (`TCP_USER_TIMEOUT`, Linux): with ``SessionDeadlines``'s heartbeats, a sync peer
    /// that vanished is found within about this plus the heartbeat interval.
    var unacknowledgedTimeout: TimeAmount = .seconds(60)
    /// The size of a connection's first read (NIO's adaptive allocator grows it after reads that
    /// fill it; a power of two).
    var firstReadSize = 512
    /// Who may open how many: a peer's connections count under its address (IPv6 by /64), except
    /// a trusted proxy's, whose clients it is for the proxy to limit (docs/deploy.md).
    var addresses = ClientAddresses()

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let peer = channel.remoteAddress?.ipAddress
        let group = peer.flatMap { addresses.isTrusted($0) ? nil : ClientAddresses.group($0) }
        guard connections.admit(address: group) else {
            // Beyond the cap: a short answer written straight to the socket, then closed.
            logger.debug("connection refused: too many open connections")
            return base.setup(channel: channel, logger: logger).flatMapThrowing { value in
                try channel.pipeline.syncOperations.addHandler(RefuseConnection(), position: .first)
                return value
            }
        }
        channel.closeFuture.whenComplete { _ in connections.release(address: group) }
        // Each connection keeps its read buffer for its whole life (NIO pools it), at the size
        // its reads have asked for: NIO's first read of 2,048 bytes made that 2 KB for every idle
        // sync connection (issue 18, docs/benchmarks.md "Idle connections: a pool without
        // timers, a smaller read buffer"). A read that fills the buffer doubles the next one, up
        // to 64 KiB. Headless Chromium's upgrade request to `127.0.0.1:47999` was 504 bytes: one
        // a little longer (a longer host name, a cookie) fills 512, and the next read gets 1 KiB.
        _ = channel.setOption(
            ChannelOptions.recvAllocator,
            value: AdaptiveRecvByteBufferAllocator(
                minimum: 64, initial: firstReadSize, maximum: 65536))
        #if os(Linux)
            // TCP_USER_TIMEOUT (18 in <netinet/tcp.h>), in milliseconds.
            _ = channel.setOption(
                ChannelOptions.tcpOption(NIOBSDSocket.Option(rawValue: 18)),
                value: SocketOptionValue(unacknowledgedTimeout.nanoseconds / 1_000_000))
        #endif
        return base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.handler(
                type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            let deadline = HeadDeadline(limit: headTimeout)
            try channel.pipeline.syncOperations.addHandler(deadline, position: .first)
            try channel.pipeline.syncOperations.addHandler(
                OriginGuard(policy: policy, path: path, headDeadline: deadline), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Answers 403 to a WebSocket upgrade of `path` from a browser origin that is not allowed, and
/// steps out of the pipeline once an upgrade request passes (the upgraded channel carries frames).
/// It also tells the connection's ``HeadDeadline`` when a response has ended, so that the next
/// request's head on a kept-alive connection has a deadline too.
final class OriginGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let policy: OriginPolicy
    private let path: String
    private let headDeadline: HeadDeadline?
    private var refusing = false
    /// A request whose head has arrived and whose body has not ended.
    private var requestOpen = false
    /// The request or its answer said `Connection: close`.
    private var closing = false
    /// The answer ended before the request's body: what is left of the body is read and
    /// dropped, then the connection closed (``drain(_:)``).
    private var draining = false
    private var drained = 0
    /// The slowest a request body may arrive while the server waits for it (bytes a second),
    /// after a first `bodyGrace`; a body slower than that is cut off (security-3 M2: one byte
    /// every 50 s held a connection for ever).
    let minimumBodyRate: Int
    let bodyGrace: TimeAmount
    /// Body bytes received, and the time spent waiting for them (a read asked for and not yet
    /// answered): time the server itself was busy does not count against the client.
    private var bodyBytes = 0
    private var waited: TimeAmount = .zero
    private var waitingSince: NIODeadline?
    private var bodyTimer: RepeatedTask?

    init(
        policy: OriginPolicy, path: String, headDeadline: HeadDeadline? = nil,
        minimumBodyRate: Int = 512, bodyGrace: TimeAmount = .seconds(10)
    ) {
        self.policy = policy
        self.path = path
        self.headDeadline = headDeadline
        self.minimumBodyRate = minimumBodyRate
        self.bodyGrace = bodyGrace
    }

    /// At most this much of a body nobody reads is drained before the connection is closed
    /// anyway; and for at most `drainTime`.
    static let drainLimit = 64 << 20
    static let drainTime: TimeAmount = .seconds(30)

    func handlerRemoved(context: ChannelHandlerContext) {
        bodyTimer?.cancel()
        bodyTimer = nil
    }

    func read(context: ChannelHandlerContext) {
        if requestOpen, waitingSince == nil { waitingSince = .now() }
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            if head.headers["connection"].contains(where: { $0.lowercased() == "close" }) { closing = true }
        case .end:
            headDeadline?.expectHead()
            // An early answer (413 before the body, 401): with the connection to be closed,
            // the rest of the body is read and dropped first, so that a client that sends its
            // whole body before it reads (Python's http.client) gets the answer; closing with
            // its bytes unread would reset the connection instead.
            if requestOpen, closing, !draining {
                draining = true
                context.write(data, promise: promise)
                context.flush()
                let channel = context.channel
                context.eventLoop.scheduleTask(in: Self.drainTime) { channel.close(promise: nil) }
                context.read()
                return
            }
        case .body:
            break
        }
        context.write(data, promise: promise)
    }

    private func startBody(_ context: ChannelHandlerContext) {
        bodyBytes = 0
        waited = .zero
        waitingSince = nil
        guard bodyTimer == nil else { return }
        let channel = context.channel
        bodyTimer = context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) {
            [weak self] _ in
            guard let self, self.requestOpen, !self.draining else { return }
            var waited = self.waited
            if let since = self.waitingSince { waited = waited + (NIODeadline.now() - since) }
            let allowed =
                Int64(max(0, waited.nanoseconds - self.bodyGrace.nanoseconds)) * Int64(self.minimumBodyRate)
                / 1_000_000_000
            if Int64(self.bodyBytes) < allowed { channel.close(promise: nil) }
        }
    }

    private func drain(_ context: ChannelHandlerContext, _ part: HTTPServerRequestPart) {
        switch part {
        case .body(let buffer):
            drained += buffer.readableBytes
            if drained > Self.drainLimit { context.close(promise: nil) } else { context.read() }
        case .end:
            requestOpen = false
            context.close(promise: nil)
        case .head:
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refusing { return }
        let part = unwrapInboundIn(data)
        if draining {
            drain(context, part)
            return
        }
        switch part {
        case .head(let head):
            requestOpen = true
            closing =
                head.headers["connection"].contains(where: { $0.lowercased() == "close" }) || head.version == .http1_0
            startBody(context)
        case .body(let buffer):
            bodyBytes += buffer.readableBytes
            if let since = waitingSince {
                waited = waited + (NIODeadline.now() - since)
                waitingSince = nil
            }
        case .end:
            requestOpen = false
            waitingSince = nil
            bodyTimer?.cancel()
            bodyTimer = nil
        }
        // `Expect: 100-continue` (curl sends it for bodies over a megabyte, then waits a second
        // for the answer before sending anyway): say "go on" at once (RFC 9110 section 10.1.1).
        if case .head(let head) = unwrapInboundIn(data), head.version == .http1_1,
            head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" })
        {
            context.writeAndFlush(
                wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
        }
        guard case .head(let head) = unwrapInboundIn(data),
            head.headers["upgrade"].contains(where: { $0.lowercased() == "websocket" }),
            head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) == path
        else {
            context.fireChannelRead(data)
            return
        }
        if policy.allows(origins: head.headers["origin"], authority: head.headers["host"].first) {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        refusing = true
        let body = #"{"error":"forbidden_origin","message":"this origin may not open a sync connection"}"#
        let headers = HTTPHeaders([
            ("content-type", "application/json; charset=utf-8"), ("content-length", String(body.utf8.count)),
            ("connection", "close"),
        ])
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .forbidden, headers: headers))),
            promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            context.close(promise: nil)
        }
    }
}

/// Closes a connection whose request head has not fully arrived within `limit` of its first
/// byte (a slowloris client trickles header bytes to hold a connection for ever;
/// docs/security.md). It reads the raw bytes ahead of the HTTP decoder: the first head's clock
/// starts when the connection opens, a later one's at the first byte after the previous
/// response ended (``expectHead()``); a clock stops at the blank line ending the head. Bytes of
/// a body, or of WebSocket frames after an upgrade, pass through untouched.
final class HeadDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let limit: TimeAmount
    private var timer: Scheduled<Void>?
    /// The last bytes seen, to find "\r\n\r\n" across reads.
    private var tail: [UInt8] = []
    private enum Phase { case head, body, awaitingHead }
    private var phase = Phase.head

    init(limit: TimeAmount) {
        self.limit = limit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    /// A response ended: the next byte starts the next request's head.
    func expectHead() {
        guard phase == .body else { return }
        phase = .awaitingHead
        tail = []
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: limit) { channel.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if phase == .awaitingHead {
            phase = .head
            arm(context)
        }
        guard phase == .head else {
            context.fireChannelRead(data)
            return
        }
        let buffer = unwrapInboundIn(data)
        tail += buffer.readableBytesView
        let ended =
            tail.count >= 4
            && (0...(tail.count - 4)).contains {
                tail[$0] == 13 && tail[$0 + 1] == 10 && tail[$0 + 2] == 13 && tail[$0 + 3] == 10
            }
        if tail.count > 3 { tail.removeFirst(tail.count - 3) }
        if ended {
            timer?.cancel()
            timer = nil
            phase = .body
            // Not kept with its capacity for the connection's life (a WebSocket connection's
            // memory, issue 18).
            tail = []
        }
        context.fireChannelRead(data)
    }
}

/// Answers 503 on the raw socket as soon as the connection is active, reads nothing, and closes
/// it: a connection beyond `--max-connections`.
final class RefuseConnection: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var answered = false

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { answer(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        answer(context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    private func answer(_ context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let body = #"{"error":"unavailable","message":"too many open connections; try again later"}"#
        let response =
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 5\r\n"
            + "content-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n" + body
        // Half-close after the answer and read on (discarding) for a moment: closing with the
        // client's request unread would reset the connection, and the client might lose the
        // answer.
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: response))).whenComplete { _ in
            channel.close(mode: .output, promise: nil)
            channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        }
    }
}

/// Counts the node's open connections against `--max-connections`: one account, or anyone,
/// opening connections until the process runs out of descriptors would take the server from
/// everyone (docs/security.md).
final class ConnectionLimit: Sendable {
    let maximum: Int
    /// Open connections of one address (a peer's IPv4 address, or its IPv6 /64).
    let perAddress: Int
    private let open = NIOLockedValueBox<(count: Int, byAddress: [String: Int])>((0, [:]))

    init(maximum: Int, perAddress: Int = .max) {
        self.maximum = maximum
        self.perAddress = perAddress
    }

    /// Counts a new connection in; false (and not counted) when the node is full, or when
    /// `address` (a peer's group, nil for a trusted proxy) has `perAddress` open already.
    func admit(address: String? = nil) -> Bool {
        open.withLockedValue { state in
            guard state.count < maximum else { return false }
            if let address {
                let current = state.byAddress[address, default: 0]
                guard current < perAddress else { return false }
                state.byAddress[address] = current + 1
            }
            state.count += 1
            return true
        }
    }

    func release(address: String? = nil) {
        open.withLockedValue { state in
            state.count -= 1
            if let address, let current = state.byAddress[address] {
                state.byAddress[address] = current > 1 ? current - 1 : nil
            }
        }
    }
}
