import Crypto
import Foundation
import Hummingbird
import Logging
import NotedClient
import ServiceLifecycle

/// Signs in through the server's sign-in page: OAuth authorization code with PKCE, the code
/// coming back to a one-shot listener on a loopback port (RFC 8252).
func browserSignIn(options: GlobalOptions, server: URL, timeout: Duration) async throws {
    let home = options.resolvedHome
    try home.create()
    let device = try await cli { try await LocalStore.open(path: try home.databasePath()).deviceID() }
    let verifier = randomToken(bytes: 48)
    let state = randomToken(bytes: 16)
    let challenge = Data(SHA256.hash(data: Data(verifier.utf8))).base64URLEncodedString
    let deadline = ContinuousClock.now + timeout
    var redirect = ""
    let query = try await LoopbackReceiver.callback(state: state, until: deadline) { port in
        redirect = "http://127.0.0.1:\(port)/callback"
        var components = URLComponents(
            url: server.appendingPathComponent("oauth/authorize"), resolvingAgainstBaseURL: false)
        components?.queryItems = [
            URLQueryItem(name: "response_type", value: "code"), URLQueryItem(name: "client_id", value: "noted-cli"),
            URLQueryItem(name: "redirect_uri", value: redirect), URLQueryItem(name: "code_challenge", value: challenge),
            URLQueryItem(name: "code_challenge_method", value: "S256"), URLQueryItem(name: "state", value: state),
        ]
        guard let url = components?.url else { throw CLIError("cannot build the sign-in address from \(server)") }
        // Written unbuffered: a script (or a person) needs the address before the wait begins.
        FileHandle.standardOutput.write(
            Data("Open this address in a browser to sign in:\n\(url.absoluteString)\n".utf8))
    }
    if let error = query["error"] {
        throw CLIError("sign-in refused: \(query["error_description"] ?? error)")
    }
    guard let code = query["code"], !code.isEmpty else { throw CLIError("the browser came back without a code") }
    let api = NotedAPI(server: server)
    let tokens = try await cli {
        try await api.exchange(code: code, redirectURI: redirect, verifier: verifier, clientID: "noted-cli")
    }
    try await remember(tokens, options: options, server: server, username: nil, device: device)
    print("signed in")
    await firstPull(options: options)
}

private func randomToken(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return Data((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64URLEncodedString
}

/// The browser's redirect, received by a Hummingbird server on 127.0.0.1 (a free port) for
/// the length of one sign-in.
enum LoopbackReceiver {
    /// Listens, hands the port to `ready` (which shows the address to open), and serves
    /// requests until one for `/callback` with this `state` arrives, then stops (the browser's
    /// page answered first); returns that request's query parameters (the first of each name).
    ///
    /// A callback with another `state` (a stale tab, or a page trying to sign this terminal in
    /// to someone else's account) is answered 400 and ignored; the wait goes on.
    static func callback(
        state: String, until deadline: ContinuousClock.Instant, ready: (Int) throws -> Void
    ) async throws -> [String: String] {
        let (callbacks, callback) = AsyncStream.makeStream(of: [String: String].self)
        let (ports, port) = AsyncStream.makeStream(of: Int?.self)
        let router = Router()
        router.get("callback") { request, _ -> Response in
            var query: [String: String] = [:]
            for (name, value) in request.uri.queryParameters where query[String(name)] == nil {
                query[String(name)] = String(value)
            }
            guard query["state"] == state else {
                return page(.badRequest, "This sign-in is not the one the terminal is waiting for; it was ignored.")
            }
            callback.yield(query)
            return page(
                .ok,
                query["code"] != nil
                    ? "Signed in to Noted. You can close this tab and go back to the terminal."
                    : "Sign-in did not complete. Go back to the terminal.")
        }
        var logger = Logger(label: "noted.sign-in")
        logger.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: nil),
            onServerRunning: { port.yield($0.localAddress?.port) }, logger: logger)
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { port.finish() }
                try await group.run()
            }
            // Leaving with an error cancels the listener.
            guard let bound = await ports.first(where: { _ in true }), let bound else {
                throw CLIError("cannot listen on a loopback port for the sign-in")
            }
            try ready(bound)
            let query = await first(of: callbacks, until: deadline)
            // Stopped gracefully: the browser's request is answered before the listener closes.
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            guard let query else { throw CLIError("no sign-in within the time allowed") }
            return query
        }
    }

    /// The first element of `stream`, or nil at `deadline`.
    private static func first(of stream: AsyncStream<[String: String]>, until deadline: ContinuousClock.Instant) async
        -> [String: String]?
    {
        await withTaskGroup(of: [String: String]?.self) { race in
            race.addTask {
                for await element in stream { return element }
                return nil
            }
            race.addTask {
                try? await Task.sleep(until: deadline)
                return nil
            }
            let first = await race.next() ?? nil
            race.cancelAll()
            return first
        }
    }

    private static func page(_ status: HTTPResponse.Status, _ text: String) -> Response {
        let html = "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>Noted</title><p>\(text)</p></html>"
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }
}
