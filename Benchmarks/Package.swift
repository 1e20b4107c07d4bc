// swift-tools-version:6.1
import PackageDescription

// Benchmarks of DiffMatchPatch, a package of their own so that the library's users never
// build the benchmark tool. Run from this folder: `swift package benchmark`.
// A path dependency's identity is the name of its folder, which is whatever the repository
// was cloned as; read it off the path rather than assume it.
let repository = Context.packageDirectory.split(separator: "/").dropLast().last.map { $0.lowercased() } ?? "main"

let package = Package(
    name: "noted-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "DiffMatchPatchBenchmarks",
            dependencies: [
                .product(name: "DiffMatchPatch", package: repository),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "DiffMatchPatchBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
