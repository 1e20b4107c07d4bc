import Foundation
import NIOConcurrencyHelpers
import Subprocess
import SystemPackage

#if canImport(Glibc)
    import Glibc
#endif

/// Child processes of the test suites, through swift-subprocess.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1) lists /proc/self/fd in the parent and
/// crashed the test process twice once about 1,355 descriptors were open
/// (swift-corelibs-foundation pull request 5472); the suites then waited before every spawn
/// until fewer than 1,000 were open. swift-subprocess closes the child's descriptors with
/// `close_range` in the child instead, so no spawn waits any more, and every wait here suspends
/// (no thread of the cooperative pool is held while a child runs).
public enum ChildProcess {
    /// What a program did, run to its end.
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// A child that did not start, or did not finish in time.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `path` with `arguments` to its end, `stdin` written to it, and captures its output;
    /// killed, and `Failure` thrown, after `timeout`. `environment` replaces the inherited one
    /// when given.
    public static func run(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil, stdin: String = "",
        timeout: Duration = .seconds(60)
    ) async throws -> Result {
        let timedOut = NIOLockedValueBox(false)
        let outcome = try await Subprocess.run(
            .path(FilePath(path)), arguments: Arguments(arguments), environment: Self.environment(environment),
            input: .string(stdin), output: .sequence, error: .sequence
        ) { execution in
            try await withThrowingTaskGroup(of: (Int, [UInt8])?.self) { group in
                group.addTask { (1, try await collect(execution.standardOutput)) }
                group.addTask { (2, try await collect(execution.standardError)) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    timedOut.withLockedValue { $0 = true }
                    try? execution.send(signal: .kill)
                    return nil
                }
                var outputs: [Int: [UInt8]] = [:]
                while outputs.count < 2, let next = try await group.next() {
                    if let (stream, bytes) = next { outputs[stream] = bytes }
                }
                group.cancelAll()
                return (outputs[1] ?? [], outputs[2] ?? [])
            }
        }
        let command = ([path] + arguments).joined(separator: " ")
        if timedOut.withLockedValue({ $0 }) {
            throw Failure(description: "\(command) did not finish within \(timeout)")
        }
        return Result(
            status: outcome.terminationStatus.code, stdout: String(decoding: outcome.closureResult.0, as: UTF8.self),
            stderr: String(decoding: outcome.closureResult.1, as: UTF8.self))
    }

    static func collect(_ sequence: SubprocessOutputSequence) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        for try await buffer in sequence {
            buffer.withUnsafeBytes { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    static func environment(_ values: [String: String]?) -> Subprocess.Environment {
        guard let values else { return .inherit }
        return .custom(
            Dictionary(
                uniqueKeysWithValues: values.compactMap { key, value in
                    Subprocess.Environment.Key(rawValue: key).map { ($0, value) }
                }))
    }
}

/// A child that runs until it is stopped (a server, `noted watch`): its standard output comes
/// as lines, it can be signalled and waited for.
public final class RunningChild: Sendable {
    public let processIdentifier: pid_t
    /// Every line the child writes to standard output, in order (read them from one task at a time).
    public let lines: AsyncStream<String>
    private let run: Task<Int32, any Error>
    private let ended = NIOLockedValueBox(false)

    private init(processIdentifier: pid_t, lines: AsyncStream<String>, run: Task<Int32, any Error>) {
        self.processIdentifier = processIdentifier
        self.lines = lines
        self.run = run
    }

    /// Starts `path`; returns once it runs.
    public static func start(_ path: String, _ arguments: [String], environment: [String: String]? = nil) async throws
        -> RunningChild
    {
        let (started, startedContinuation) = AsyncThrowingStream.makeStream(of: pid_t.self)
        let (lines, linesContinuation) = AsyncStream.makeStream(of: String.self)
        let run = Task {
            defer { linesContinuation.finish() }
            do {
                let outcome = try await Subprocess.run(
                    .path(FilePath(path)), arguments: Arguments(arguments),
                    environment: ChildProcess.environment(environment),
                    input: .none, output: .sequence, error: .discarded
                ) { execution in
                    startedContinuation.yield(execution.processIdentifier.value)
                    startedContinuation.finish()
                    for try await line in execution.standardOutput.strings() { linesContinuation.yield(line) }
                }
                return outcome.terminationStatus.code
            } catch {
                startedContinuation.finish(throwing: error)
                throw error
            }
        }
        var iterator = started.makeAsyncIterator()
        guard let pid = try await iterator.next() else {
            throw ChildProcess.Failure(description: "\(path) did not start")
        }
        let child = RunningChild(processIdentifier: pid, lines: lines, run: run)
        Task { [weak child] in
            _ = try? await run.value
            child?.ended.withLockedValue { $0 = true }
        }
        return child
    }

    /// The next line of standard output; nil once the child closed it (exited).
    public func nextLine() async -> String? {
        var iterator = lines.makeAsyncIterator()
        return await iterator.next()
    }

    /// Whether the child has not been seen to exit yet.
    public var isRunning: Bool { !ended.withLockedValue { $0 } }

    /// Sends `signal` to the child unless it has exited.
    public func signal(_ signal: Int32) {
        guard isRunning else { return }
        kill(processIdentifier, signal)
    }

    /// Waits for the child to exit; its exit status (or the signal that ended it).
    @discardableResult
    public func exited() async -> Int32 {
        let status = (try? await run.value) ?? -1
        ended.withLockedValue { $0 = true }
        return status
    }

    /// Waits at most `timeout` for the child to exit; whether it did.
    public func exits(within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return !isRunning
    }
}

extension TerminationStatus {
    /// The exit code, or the number of the signal that ended the process.
    var code: Int32 {
        switch self {
        case .exited(let code): return Int32(code)
        case .signaled(let signal): return Int32(signal)
        }
    }
}
