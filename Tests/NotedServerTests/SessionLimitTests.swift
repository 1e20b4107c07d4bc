import Foundation
import NotedCore
import Testing

@testable import NotedServer

/// One account cannot hold every connection of a node (issue 14).
@Suite struct SessionLimitTests {
    static let backends = Backend.available

    @Test(arguments: backends) func aHelloBeyondTheUsersCapIsRefusedAndOthersAreNot(backend: Backend) async throws {
        try await TestServer.with(backend, configure: { $0.maxSessionsPerUser = 3 }) { server in
            let user = try await server.makeUser()
            var open: [SyncConnection] = []
            for _ in 0..<3 { open.append(try await server.connect(user)) }

            let fourth = try await SyncConnection.open(port: server.port)
            try await fourth.send([
                "type": "hello", "protocol": 1, "token": .string(user.accessToken), "device": .string(uuid()),
            ])
            let refused = try await fourth.receive()
            #expect(refused["type"] == "error" && refused["code"] == "rate_limited")
            #expect(refused["message"]?.stringValue?.contains("at most 3") == true)
            #expect(try await fourth.closeCode(timeout: .seconds(5)) == 4029)

            // Another user is not affected, and the open connections still work.
            let other = try await server.makeUser()
            let otherConnection = try await server.connect(other)
            try await open[0].send(["type": "pull", "since": 0, "rid": 1])
            #expect(try await open[0].receive()["type"] == "changes")

            // Once one closes, a new one is let in.
            await open[2].close()
            var admitted = false
            for _ in 0..<50 where !admitted {
                let next = try await SyncConnection.open(port: server.port)
                try await next.send([
                    "type": "hello", "protocol": 1, "token": .string(user.accessToken), "device": .string(uuid()),
                ])
                if try await next.receive()["type"] == "welcome" {
                    admitted = true
                    await next.close()
                } else {
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            #expect(admitted)
            for connection in open.prefix(2) { await connection.close() }
            await otherConnection.close()
        }
    }
}
