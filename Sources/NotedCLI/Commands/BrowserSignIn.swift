import Crypto
import Foundation
import NotedClient
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Signs in through the server's sign-in page: OAuth authorization code with PKCE, the code
/// coming back to a one-shot listener on a loopback port (RFC 8252).
func browserSignIn(options: GlobalOptions, server: URL, timeout: Duration) async throws {
    let home = options.resolvedHome
    try home.create()
    let device = try await cli { try await LocalStore.open(path: try home.databasePath()).deviceID() }
    let receiver = try LoopbackReceiver()
    defer { receiver.close() }
    let verifier = randomToken(bytes: 48)
    let state = randomToken(bytes: 16)
    let challenge = Data(SHA256.hash(data: Data(verifier.utf8))).base64URLEncodedString
    let redirect = "http://127.0.0.1:\(receiver.port)/callback"
    var components = URLComponents(url: server.appendingPathComponent("oauth/authorize"), resolvingAgainstBaseURL: false)
    components?.queryItems = [
        URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "client_id", value: "noted-cli"),
        URLQueryItem(name: "redirect_uri", value: redirect), URLQueryItem(name: "code_challenge", value: challenge),
        URLQueryItem(name: "code_challenge_method", value: "S256"), URLQueryItem(name: "state", value: state),
    ]
    guard let url = components?.url else { throw CLIError("cannot build the sign-in address from \(server)") }
    // Written unbuffered: a script (or a person) needs the address before the wait begins.
    FileHandle.standardOutput.write(Data("Open this address in a browser to sign in:\n\(url.absoluteString)\n".utf8))
    let deadline = ContinuousClock.now + timeout
    // A callback with another `state` (a stale tab, or a page trying to sign this terminal in
    // to someone else's account) is answered and ignored; the wait goes on.
    let query = try await Task.detached { try receiver.waitForCallback(state: state, until: deadline) }.value
    if let error = query["error"] {
        throw CLIError("sign-in refused: \(query["error_description"] ?? error)")
    }
    guard let code = query["code"], !code.isEmpty else { throw CLIError("the browser came back without a code") }
    let api = NotedAPI(server: server)
    let tokens = try await cli { try await api.exchange(code: code, redirectURI: redirect, verifier: verifier, clientID: "noted-cli") }
    try await remember(tokens, options: options, server: server, username: nil, device: device)
    print("signed in")
}

private func randomToken(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return Data((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64URLEncodedString
}


/// A listener on 127.0.0.1 (a free port) that answers the browser's redirect once.
final class LoopbackReceiver: Sendable {
    let port: Int
    private let socketFD: Int32

    init() throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw CLIError("cannot open a loopback socket for the sign-in") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            _ = systemClose(fd)
            throw CLIError("cannot listen on a loopback port for the sign-in")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        socketFD = fd
        port = Int(UInt16(bigEndian: actual.sin_port))
    }

    func close() {
        _ = systemClose(socketFD)
    }

    /// Serves requests until one for `/callback` with this `state` arrives; returns its query
    /// parameters.
    func waitForCallback(state: String, until deadline: ContinuousClock.Instant) throws -> [String: String] {
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw CLIError("no sign-in within the time allowed") }
            var descriptor = pollfd(fd: socketFD, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(min(remaining.components.seconds * 1000 + 1, 500)))
            guard ready > 0 else { continue }
            let client = accept(socketFD, nil, nil)
            guard client >= 0 else { continue }
            defer { _ = systemClose(client) }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 8192)
            let count = read(client, &buffer, buffer.count)
            guard count > 0 else { continue }
            let head = String(decoding: buffer[0..<count], as: UTF8.self)
            let requestLine = head.split(separator: "\r\n", maxSplits: 1).first ?? ""
            let parts = requestLine.split(separator: " ")
            guard parts.count >= 2, parts[0] == "GET", let components = URLComponents(string: String(parts[1])),
                  components.path == "/callback"
            else {
                respond(client, status: "404 Not Found", body: "Not found.")
                continue
            }
            var query: [String: String] = [:]
            for item in components.queryItems ?? [] where query[item.name] == nil {
                query[item.name] = item.value ?? ""
            }
            guard query["state"] == state else {
                respond(client, status: "400 Bad Request", body: "This sign-in is not the one the terminal is waiting for; it was ignored.")
                continue
            }
            let message = query["code"] != nil
                ? "Signed in to Noted. You can close this tab and go back to the terminal."
                : "Sign-in did not complete. Go back to the terminal."
            respond(client, status: "200 OK", body: message)
            return query
        }
    }

    private func respond(_ client: Int32, status: String, body: String) {
        let html = "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>Noted</title><p>\(body)</p></html>"
        let response = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(html.utf8.count)\r\n"
            + "Cache-Control: no-store\r\nConnection: close\r\n\r\n" + html
        _ = response.utf8CString.withUnsafeBufferPointer { write(client, $0.baseAddress, response.utf8.count) }
    }
}

private func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    Glibc.close(fd)
    #else
    Darwin.close(fd)
    #endif
}
