import Foundation
import NotedCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(AsyncHTTPClient) && !NOTED_URLSESSION
    import AsyncHTTPClient
    import NIOCore
#endif

/// A minimal HTTP request as the client library makes them.
public struct HTTPRequestData: Sendable {
    public var method: String
    public var url: URL
    public var headers: [String: String]
    public var body: Data?

    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

public struct HTTPResponseData: Sendable {
    public var status: Int
    public var body: Data
    /// Response headers, names in lower case (the last value when a name repeats).
    public var headers: [String: String]

    public init(status: Int, body: Data, headers: [String: String] = [:]) {
        self.status = status
        self.body = body
        self.headers = headers
    }
}

/// Performs HTTP requests: AsyncHTTPClient on Linux, URLSession on Apple platforms.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData
}

#if canImport(AsyncHTTPClient) && !NOTED_URLSESSION
    /// The platform's HTTP client: AsyncHTTPClient on Linux, URLSession on Apple platforms.
    public typealias DefaultHTTPTransport = AsyncHTTPClientTransport

    /// HTTP over AsyncHTTPClient's shared client.
    public struct AsyncHTTPClientTransport: HTTPTransport {
        public var timeout: Duration

        public init(timeout: Duration = .seconds(15)) {
            self.timeout = timeout
        }

        public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
            var outgoing = HTTPClientRequest(url: request.url.absoluteString)
            outgoing.method = .init(rawValue: request.method)
            for (name, value) in request.headers { outgoing.headers.add(name: name, value: value) }
            if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
            do {
                let response = try await HTTPClient.shared.execute(
                    outgoing, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
                let buffer = try await response.body.collect(upTo: 64 << 20)
                let headers = Dictionary(
                    response.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
                return HTTPResponseData(
                    status: Int(response.status.code), body: Data(buffer.readableBytesView), headers: headers)
            } catch {
                throw NotedClientError(.server, "cannot reach the server at \(request.url.origin): \(describe(error))")
            }
        }
    }
#else
    /// The platform's HTTP client: AsyncHTTPClient on Linux, URLSession on Apple platforms.
    public typealias DefaultHTTPTransport = URLSessionHTTPTransport
#endif

/// HTTP over `URLSession` (the default on Apple platforms; also works on Linux).
public struct URLSessionHTTPTransport: HTTPTransport {
    public var timeout: Duration

    public init(timeout: Duration = .seconds(15)) {
        self.timeout = timeout
    }

    public func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        var outgoing = URLRequest(url: request.url)
        outgoing.httpMethod = request.method
        outgoing.timeoutInterval = Double(timeout.components.seconds)
        for (name, value) in request.headers { outgoing.setValue(value, forHTTPHeaderField: name) }
        outgoing.httpBody = request.body
        do {
            let (data, response) = try await URLSession.shared.data(for: outgoing)
            let http = response as? HTTPURLResponse
            var headers: [String: String] = [:]
            for (name, value) in http?.allHeaderFields ?? [:] {
                if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
            }
            return HTTPResponseData(status: http?.statusCode ?? 0, body: data, headers: headers)
        } catch {
            throw NotedClientError(
                .server, "cannot reach the server at \(request.url.origin): \(error.localizedDescription)")
        }
    }
}

extension URL {
    /// `scheme://host:port`, for messages.
    var origin: String {
        "\(scheme ?? "http")://\(host ?? "?")" + (port.map { ":\($0)" } ?? "")
    }
}

/// A short reason for a network failure (NIO's descriptions are long and nested).
func describe(_ error: any Error) -> String {
    let text = String(describing: error)
    if text.localizedCaseInsensitiveContains("refused") { return "connection refused" }
    if text.localizedCaseInsensitiveContains("timeout") || text.localizedCaseInsensitiveContains("deadline") {
        return "timed out"
    }
    if text.localizedCaseInsensitiveContains("resolve") || text.localizedCaseInsensitiveContains("lookup") {
        return "unknown host"
    }
    return text
}
