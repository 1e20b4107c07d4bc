import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
    private let systemRead = Glibc.read
#elseif canImport(Darwin)
    import Darwin
    private let systemRead = Darwin.read
#endif

/// Blob bytes as files (the SQLite backend's): `blobs/<user>/<sha256>` in the data directory,
/// and an upload under way as `blobs/<user>/uploads/<sha256>`, whose size is its offset. A
/// finished upload is fsynced, renamed into place and its directory fsynced before the blob's
/// row commits, so a blob the database knows is on disk after a crash. File work runs on NIO's
/// thread pool, off the tasks that serve connections.
struct BlobFiles: Sendable {
    let root: String

    /// A path component the store made (a user id, a hash): letters, digits and '-' only, so a
    /// name can never climb out of `root`.
    static func isSafe(_ component: String) -> Bool {
        !component.isEmpty && component.utf8.count <= 128
            && component.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x2D
            }
    }

    func userDirectory(_ userID: String) throws -> String {
        guard Self.isSafe(userID) else { throw StoreError.corrupt("a user id unfit for a file name") }
        return (root as NSString).appendingPathComponent(userID)
    }

    func blobPath(userID: String, sha256: String) throws -> String {
        guard Self.isSafe(sha256) else { throw StoreError.corrupt("a hash unfit for a file name") }
        return (try userDirectory(userID) as NSString).appendingPathComponent(sha256)
    }

    func uploadPath(userID: String, sha256: String) throws -> String {
        guard Self.isSafe(sha256) else { throw StoreError.corrupt("a hash unfit for a file name") }
        return ((try userDirectory(userID) as NSString).appendingPathComponent("uploads") as NSString)
            .appendingPathComponent(sha256)
    }

    /// The size of an upload's file (0 when there is none).
    func uploadOffset(userID: String, sha256: String) throws -> Int64 {
        var info = stat()
        guard stat(try uploadPath(userID: userID, sha256: sha256), &info) == 0 else { return 0 }
        return Int64(info.st_size)
    }

    /// Writes `bytes` at the end of the upload's file, which must be `offset` bytes long.
    func append(userID: String, sha256: String, offset: Int64, bytes: ByteBuffer) async throws -> Int64 {
        let path = try uploadPath(userID: userID, sha256: sha256)
        return try await NIOThreadPool.singleton.runIfActive {
            try Self.makeDirectories(for: path)
            let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Self.failure("open", path) }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw Self.failure("stat", path) }
            guard Int64(info.st_size) == offset else { throw BlobError.offsetMismatch(expected: Int64(info.st_size)) }
            var written = 0
            try bytes.withUnsafeReadableBytes { raw in
                while written < raw.count {
                    let n = pwrite(fd, raw.baseAddress! + written, raw.count - written, off_t(offset) + off_t(written))
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw Self.failure("write", path)
                    }
                    written += n
                }
            }
            return offset + Int64(written)
        }
    }

    /// Starts an upload's file empty (so that an empty blob, which no write creates, has one).
    func create(userID: String, sha256: String) async throws {
        let path = try uploadPath(userID: userID, sha256: sha256)
        try await NIOThreadPool.singleton.runIfActive {
            try Self.makeDirectories(for: path)
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Self.failure("open", path) }
            close(fd)
        }
    }

    /// fsyncs the upload's file (when there is one).
    func sync(userID: String, sha256: String) async throws {
        let path = try uploadPath(userID: userID, sha256: sha256)
        try await NIOThreadPool.singleton.runIfActive {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            defer { close(fd) }
            guard fsync(fd) == 0 else { throw Self.failure("fsync", path) }
        }
    }

    /// The SHA-256 of the upload's file, after an fsync.
    func digest(userID: String, sha256: String) async throws -> (hex: String, size: Int64) {
        let path = try uploadPath(userID: userID, sha256: sha256)
        return try await NIOThreadPool.singleton.runIfActive {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw BlobError.noUpload }
            defer { close(fd) }
            guard fsync(fd) == 0 else { throw Self.failure("fsync", path) }
            var hasher = SHA256()
            var size: Int64 = 0
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let n = buffer.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress!, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw Self.failure("read", path)
                }
                if n == 0 { break }
                buffer.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                size += Int64(n)
            }
            return (Array(hasher.finalize()).lowercaseHex, size)
        }
    }

    /// Moves the finished upload into place, durably (rename, then fsync of the directory).
    func promote(userID: String, sha256: String) async throws {
        let from = try uploadPath(userID: userID, sha256: sha256)
        let to = try blobPath(userID: userID, sha256: sha256)
        try await NIOThreadPool.singleton.runIfActive {
            guard rename(from, to) == 0 else { throw Self.failure("rename", from) }
            try Self.syncDirectory((to as NSString).deletingLastPathComponent)
        }
    }

    func removeUpload(userID: String, sha256: String) {
        if let path = try? uploadPath(userID: userID, sha256: sha256) { unlink(path) }
    }

    func removeBlob(userID: String, sha256: String) {
        if let path = try? blobPath(userID: userID, sha256: sha256) { unlink(path) }
    }

    /// Removes everything of a user (the account was deleted).
    func removeUser(_ userID: String) {
        guard let directory = try? userDirectory(userID) else { return }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The bytes `range` of a blob's file, in pieces of up to 256 KiB read on the thread pool
    /// as they are asked for. The file is opened now (a collection unlinking it later does not
    /// cut a download short) and closed when the last piece is read or the reader goes away.
    func read(userID: String, sha256: String, range: Range<Int64>) throws -> BlobPieces {
        try Self.read(path: try blobPath(userID: userID, sha256: sha256), range: range)
    }

    /// The bytes `range` of any file, as ``read(userID:sha256:range:)`` reads a blob's.
    static func read(path: String, range: Range<Int64>) throws -> BlobPieces {
        let file = OpenFile(fd: open(path, O_RDONLY | O_CLOEXEC))
        guard file.fd >= 0 else { throw Self.failure("open", path) }
        return BlobPieces {
            let position = NIOLockedValueBox(range.lowerBound)
            return {
                let at = position.withLockedValue { $0 }
                guard at < range.upperBound else { return nil }
                let count = Int(min(Int64(256 * 1024), range.upperBound - at))
                let piece: ByteBuffer = try await NIOThreadPool.singleton.runIfActive {
                    var buffer = ByteBufferAllocator().buffer(capacity: count)
                    var result = 0
                    repeat {
                        result = buffer.withUnsafeMutableWritableBytes { raw in
                            pread(file.fd, raw.baseAddress!, count, off_t(at))
                        }
                    } while result < 0 && errno == EINTR
                    guard result > 0 else { throw Self.failure("read", path) }
                    buffer.moveWriterIndex(forwardBy: result)
                    return buffer
                }
                position.withLockedValue { $0 = at + Int64(piece.readableBytes) }
                return piece
            }
        }
    }

    /// A file descriptor closed when nothing refers to it any more.
    final class OpenFile: Sendable {
        let fd: Int32
        init(fd: Int32) { self.fd = fd }
        deinit { if fd >= 0 { close(fd) } }
    }

    private static func makeDirectories(for path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue {
            return
        }
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    private static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw failure("open", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw failure("fsync", path) }
    }

    private static func failure(_ what: String, _ path: String) -> StoreError {
        StoreError.unusable("cannot \(what) \(path): \(String(cString: strerror(errno)))")
    }
}

/// One holder at a time per key (a user id): a blob file put into place and its row written,
/// or the collector's delete of a row and its file, never interleave for one user. Without it a
/// file uploaded again between the collector's commit and its unlink was deleted under its new
/// row.
final class KeyedAsyncLock: Sendable {
    private struct State {
        var held: Set<String> = []
        var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    }
    private let state = NIOLockedValueBox(State())

    func withLock<T>(_ key: String, _ body: () async throws -> T) async rethrows -> T {
        await acquire(key)
        defer { release(key) }
        return try await body()
    }

    private func acquire(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let mine = state.withLockedValue { state -> Bool in
                if state.held.insert(key).inserted { return true }
                state.waiters[key, default: []].append(continuation)
                return false
            }
            if mine { continuation.resume() }
        }
    }

    private func release(_ key: String) {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard var queue = state.waiters[key], !queue.isEmpty else {
                state.held.remove(key)
                return nil
            }
            let first = queue.removeFirst()
            state.waiters[key] = queue.isEmpty ? nil : queue
            return first  // the lock passes to it, still held
        }
        next?.resume()
    }
}
