import HummingbirdCore
import HummingbirdWebSocket
import Logging
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

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(OriginGuard(policy: policy, path: path), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// Answers 403 to a WebSocket upgrade of `path` from a browser origin that is not allowed, and
/// steps out of the pipeline once an upgrade request passes (the upgraded channel carries frames).
final class OriginGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let policy: OriginPolicy
    private let path: String
    private var refusing = false

    init(policy: OriginPolicy, path: String) {
        self.policy = policy
        self.path = path
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if refusing { return }
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
            ("content-type", "application/json; charset=utf-8"), ("content-length", String(body.utf8.count)), ("connection", "close"),
        ])
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .forbidden, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
