// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "noted",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "DiffMatchPatch", targets: ["DiffMatchPatch"]),
        .executable(name: "dmp", targets: ["dmp"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
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
        .testTarget(name: "DiffMatchPatchTests", dependencies: ["DiffMatchPatch"]),
    ]
)
