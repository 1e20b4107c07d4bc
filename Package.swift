// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "noted",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "DiffMatchPatch", targets: ["DiffMatchPatch"]),
        .executable(name: "dmp", targets: ["dmp"]),
    ],
    dependencies: [],
    targets: [
        .target(name: "DiffMatchPatch"),
        .executableTarget(name: "dmp", dependencies: ["DiffMatchPatch"]),
        .testTarget(name: "DiffMatchPatchTests", dependencies: ["DiffMatchPatch"]),
    ]
)
