// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "noted",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "DiffMatchPatch", targets: ["DiffMatchPatch"]),
        .executable(name: "dmp", targets: ["dmp"]),
        .library(name: "NotedCore", targets: ["NotedCore"]),
        .library(name: "NotedServer", targets: ["NotedServer"]),
        .executable(name: "noted-server", targets: ["noted-server"]),
        .library(name: "NotedClient", targets: ["NotedClient"]),
        .library(name: "NotedCLI", targets: ["NotedCLI"]),
        .executable(name: "noted", targets: ["noted"]),
        .executable(name: "shelf", targets: ["shelf"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        // permessage-deflate's zlib streams (the server's own extension, PerMessageDeflate.swift);
        // already in the graph through hummingbird-websocket.
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        .package(url: "https://github.com/weichsel/ZIPFoundation.git", from: "0.9.20"),
        // noted-server's settings: flags, environment and a JSON config file through one reader.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: ["JSON"]),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        // Child processes (the editor of `noted edit`; the test suites' servers and peers).
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
    ],
    targets: [
        // No dependencies: the foundation of everything else, useful on its own.
        .target(name: "DiffMatchPatch"),
        .executableTarget(
            name: "dmp",
            dependencies: [
                "DiffMatchPatch",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "DiffMatchPatchTests", dependencies: ["DiffMatchPatch", "TestSupport"]),
        // Shared by test targets: the seed of randomised tests, child processes.
        .target(
            name: "TestSupport",
            dependencies: [
                "NotedCore",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/TestSupport"),

        // What the C library offers that Swift's Glibc module does not (malloc_trim).
        .target(name: "CNotedSystem"),
        .target(
            name: "NotedCore",
            dependencies: ["DiffMatchPatch", .product(name: "ExtrasBase64", package: "swift-extras-base64")]),
        .target(
            name: "NotedServer",
            dependencies: [
                "NotedCore",
                "CNotedSystem",
                "NotedPorting",
                "DiffMatchPatch",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The common-password list (Auth/PasswordRules.swift), data read once at start.
            resources: [.copy("Resources/common-passwords.txt")]
        ),
        .executableTarget(
            name: "noted-server",
            dependencies: [
                "NotedServer",
                "NotedCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(name: "NotedCoreTests", dependencies: ["NotedCore"]),
        // The one way the suites run a real server (NotedServerTests' TestServer and
        // NotedClientTests' LiveServer are views of it).
        .target(
            name: "LiveServerSupport",
            dependencies: [
                "NotedServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/LiveServerSupport"),
        .testTarget(
            name: "NotedServerTests",
            dependencies: [
                "NotedServer",
                "NotedCore",
                "TestSupport",
                "LiveServerSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSTesting", package: "hummingbird-websocket"),
                .product(name: "HummingbirdWSCompression", package: "hummingbird-websocket"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),

        // The client library: no server module, no NIO server code. On Linux the WebSocket and
        // HTTP clients come from NIO client libraries; Apple platforms use URLSession.
        .target(
            name: "NotedClient",
            dependencies: [
                "NotedCore",
                "DiffMatchPatch",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(
                    name: "HummingbirdWSClient", package: "hummingbird-websocket", condition: .when(platforms: [.linux])
                ),
                .product(
                    name: "HummingbirdWSCompression", package: "hummingbird-websocket",
                    condition: .when(platforms: [.linux])),
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
                .product(name: "Logging", package: "swift-log", condition: .when(platforms: [.linux])),
            ]
        ),
        // Moving in and out: export (and the importers), no server or client dependencies.
        .target(
            name: "NotedPorting",
            dependencies: [
                "NotedCore",
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Fixtures/ (sample exports of each app) is read from the source tree by path.
        .testTarget(
            name: "NotedPortingTests",
            dependencies: ["NotedPorting", "NotedCore", .product(name: "Crypto", package: "swift-crypto")],
            exclude: ["Fixtures"]),
        .target(
            name: "NotedCLI",
            dependencies: [
                "NotedClient",
                "NotedCore",
                "NotedPorting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                // The one-shot listener for the browser sign-in's redirect.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "noted",
            dependencies: ["NotedCLI", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // The example app of docs/collections.md: a reading log on NotedClient with its own collections.
        .executableTarget(
            name: "shelf",
            dependencies: [
                "NotedClient", "NotedCore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            resources: [.copy("collections")]
        ),
        // scripts/bench-load times a NotedClient initial sync with it; a target, not a product.
        .executableTarget(name: "noted-bench-sync", dependencies: ["NotedClient"]),
        .testTarget(
            name: "NotedClientTests",
            dependencies: [
                "NotedClient",
                "NotedCore",
                "NotedServer",
                "TestSupport",
                "LiveServerSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // Databases written by earlier versions, opened by ClientMigrationTests by path.
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "SimulationTests",
            dependencies: [
                "NotedClient",
                "NotedCore",
                "NotedServer",
                "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "NotedCLITests",
            dependencies: [
                "NotedCLI",
                "NotedClient",
                "NotedCore",
                "TestSupport",
            ]
        ),
    ]
)
