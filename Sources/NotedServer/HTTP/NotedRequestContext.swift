import HTTPTypes
import Hummingbird
import HummingbirdAuth
import HummingbirdWebSocket
import NIOCore

/// The request context of every route: WebSocket upgrades, the client's address, and who is
/// signed in (set by `SignedIn` on the routes behind it).
public struct NotedRequestContext: RequestContext, WebSocketRequestContext, AuthRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let webSocket: WebSocketHandlerReference<NotedRequestContext>
    /// The peer's IP address, for rate limits.
    public let remoteAddress: String
    /// The connection (a sync session closes it on shutdown if its client does not answer).
    let channel: any Channel
    /// The verified access token of the request, on the routes `SignedIn` guards.
    public var identity: VerifiedToken?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.webSocket = .init()
        self.remoteAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
        self.channel = source.channel
        self.identity = nil
    }
}

extension ClientAddresses {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    /// The rate-limit key of this request: its peer, or what a trusted proxy says.
    func key(_ request: Request, _ context: NotedRequestContext) -> String {
        key(peer: context.remoteAddress, forwardedFor: request.headers[Self.forwardedFor])
    }
}
