import Foundation

extension Process {
    /// `run()`, after waiting (at most 20 s) until this process has fewer than 1,000 open file
    /// descriptors.
    ///
    /// Foundation's `Process.run()` on Linux (Swift 6.3.1) lists /proc/self/fd and copies a full
    /// 256-byte name out of each directory entry; once about 1,355 descriptors are open, an entry
    /// can sit at the end of glibc's 32 KiB buffer and the copy runs into unmapped memory: the test
    /// process crashed there twice (swift-corelibs-foundation pull request 5472). The test suites
    /// run in parallel and some hold many sockets and SQLite files for a moment; a spawn waits for
    /// them.
    public func runWhenFewFilesAreOpen() throws {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline, ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 0) >= 1_000 {
            usleep(50_000)
        }
        try run()
    }
}
