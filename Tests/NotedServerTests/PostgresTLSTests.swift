import Foundation
import Logging
import NotedCore
import PostgresNIO
import Testing

@testable import NotedServer

/// `sslmode` and `sslrootcert` in a PostgreSQL URL (docs/deploy.md), against the test run's
/// real PostgreSQL server, which scripts/test starts with TLS on (a throwaway CA and a
/// certificate for 127.0.0.1 and localhost; the CA's path is NOTED_TEST_POSTGRES_CA).
@Suite struct PostgresTLSTests {
    @Test func urlParametersAreCheckedBeforeAnyConnection() throws {
        let base = "postgres://noted@db.example:5432/noted"
        for good in [
            "", "?sslmode=disable", "?sslmode=allow", "?sslmode=prefer", "?sslmode=require", "?sslmode=verify-ca",
            "?sslmode=verify-full",
        ] {
            #expect(throws: Never.self, "\(good)") { _ = try PostgresStore.configurationAndTLS(from: base + good) }
        }
        let modes: [(String, String)] = [
            ("", "prefer"), ("?sslmode=disable", "disable"), ("?sslmode=require", "require"),
            ("?sslmode=verify-full", "require"),
        ]
        for (query, expected) in modes {
            let (_, mode) = try PostgresStore.configurationAndTLS(from: base + query)
            let name =
                switch mode {
                case .disable: "disable"
                case .prefer: "prefer"
                case .require: "require"
                }
            #expect(name == expected, "\(query)")
        }
        if case .require(let tls) = try PostgresStore.configurationAndTLS(from: base + "?sslmode=verify-full").1 {
            #expect(tls.certificateVerification == .fullVerification)
        }
        if case .require(let tls) = try PostgresStore.configurationAndTLS(from: base + "?sslmode=require").1 {
            #expect(tls.certificateVerification == .none)
        }
        for bad in [
            "?sslmode=verify", "?sslmode=", "?sslmode=disable&sslmode=require", "?ssl=true",
            "?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
        ] {
            #expect(throws: StoreError.self, "\(bad)") { _ = try PostgresStore.configurationAndTLS(from: base + bad) }
        }
    }

    @Test func eachModeConnectsAsItSaysAndVerifyFullNeedsTheRightRoot() async throws {
        guard Backend.postgresURL != nil else { return }
        guard let ca = ProcessInfo.processInfo.environment["NOTED_TEST_POSTGRES_CA"], !ca.isEmpty else {
            print(
                "NOTICE: NOTED_TEST_POSTGRES_CA is not set (the PostgreSQL server has no TLS): TLS connections not tested"
            )
            return
        }
        try await withDatabase(.postgres) { location in
            guard case .postgres(let full) = location else { return }
            // The run's URL may carry its own sslmode: each case below sets one.
            let url = String(full.split(separator: "?", maxSplits: 1)[0])
            let localhost = url.replacingOccurrences(of: "@127.0.0.1:", with: "@localhost:")
            for (target, encrypted) in [
                (url + "?sslmode=disable", false), (url, true), (url + "?sslmode=require", true),
                (url + "?sslmode=verify-ca&sslrootcert=\(ca)", true),
                (localhost + "?sslmode=verify-full&sslrootcert=\(ca)", true),
            ] {
                let store = try PostgresStore(url: target, limits: Limits(), logger: Logger(label: "test"))
                try await store.migrate()
                let rows = try await store.client.query(
                    "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: store.logger)
                var ssl: [Bool] = []
                for try await value in rows.decode(Bool.self) { ssl.append(value) }
                #expect(ssl == [encrypted], "\(target)")
                await store.shutdown()
            }
            // The system's roots do not know the throwaway CA: verify-full refuses, and says where.
            let untrusted = try PostgresStore(
                url: localhost + "?sslmode=verify-full", limits: Limits(), logger: Logger(label: "test"))
            do {
                try await untrusted.migrate()
                Issue.record("verify-full accepted a certificate of an unknown CA")
            } catch let error as StoreError {
                #expect("\(error)".contains("PostgreSQL at localhost"), "\(error)")
            }
            await untrusted.shutdown()
        }
    }
}
