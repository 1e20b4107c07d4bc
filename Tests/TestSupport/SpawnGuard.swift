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
    ///
    /// The wait suspends; it never sleeps on the thread. Swift's cooperative pool has as many
    /// threads as cores (two here), and an earlier version that slept with `usleep` held both
    /// of them when two spawns waited at once: no other task ran, so nothing could close the
    /// descriptors being waited for, and every test in flight stalled for the 20 s (gdb showed
    /// both pool threads in this function; the suite's rare "hangs" and bursts of read timeouts).
    public func runWhenFewFilesAreOpen() async throws {
        try await Self.waitForFewOpenFiles()
        try run()
    }

    /// Suspends (at most 20 s) until this process has fewer than 1,000 open file descriptors.
    public static func waitForFewOpenFiles() async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline, openFileCount() >= 1_000 {
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    static func openFileCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 0
    }
}

extension Process {
    /// Waits for the child to exit without holding a thread of Swift's cooperative pool
    /// (`waitUntilExit()` spins a run loop on the calling thread until then).
    public func exited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                self.waitUntilExit()
                continuation.resume()
            }
        }
    }
}
