import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NotedCore
import Testing

@testable import NotedServer

/// Requests shaped to confuse (issue 14): JSON sent as another type, repeated form parameters.
@Suite struct RequestHardeningTests {
    static let backends = Backend.available

    func raw(_ server: TestServer, _ method: HTTPRequest.Method, _ path: String, contentType: String?, body: String)
        async throws -> TestServer.HTTPResult
    {
        var headers: HTTPFields = [:]
        if let contentType { headers[.contentType] = contentType }
        let response = try await server.client.execute(
            uri: path, method: method, headers: headers, body: ByteBuffer(string: body))
        return TestServer.HTTPResult(
            status: response.status, headers: response.headers,
            json: (try? JSONValue.parse(response.body.readableBytesView)) ?? .null)
    }

    @Test(arguments: backends) func jsonRoutesTakeOnlyApplicationJSON(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let body = #"{"username":"formed","password":"correct horse battery"}"#
            // What a cross-site form can send without asking: text/plain, or no type at all.
            for type in ["text/plain", "application/x-www-form-urlencoded", nil] {
                let refused = try await raw(server, .post, "/v1/accounts", contentType: type, body: body)
                #expect(refused.status == .unsupportedMediaType, "\(type ?? "no type")")
                #expect(refused.json["error"] == "unsupported_media_type")
            }
            // Nothing was created: the same name registers now, with the right type.
            #expect(
                try await raw(server, .post, "/v1/accounts", contentType: "application/json; charset=utf-8", body: body)
                    .status == .created)
        }
    }

    @Test(arguments: backends) func aRepeatedFormParameterIsRefusedAndChangesNothing(backend: Backend) async throws {
        try await TestServer.with(backend) { server in
            let user = try await server.makeUser()
            let twice = try await server.request(
                .post, "/oauth/token",
                body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)&refresh_token=other")
            #expect(twice.status == .badRequest && twice.json["error"] == "invalid_request")
            let revokeTwice = try await server.request(
                .post, "/oauth/revoke", body: "token=\(user.refreshToken)&token=other")
            #expect(revokeTwice.status == .badRequest)
            // The token was neither rotated nor revoked.
            let once = try await server.request(
                .post, "/oauth/token", body: "grant_type=refresh_token&refresh_token=\(user.refreshToken)")
            #expect(once.status == .ok)
        }
    }
}
