import Crypto
import Foundation
import HummingbirdBcrypt
import NIOCore
import NIOPosix

/// Password hashes (docs/security.md, "Passwords").
///
/// bcrypt's C core reads a password as a C string of at most 72 bytes: it stops at the first
/// NUL byte and ignores everything after byte 72, so that "\0a" matched "\0b" and two long
/// passwords with the same first 72 bytes matched each other. New hashes therefore run bcrypt
/// over a fixed-length encoding of HMAC-SHA-256 of the whole password (44 base64 characters, no
/// NUL): every byte counts. They are stored as `$noted1$` followed by the bcrypt hash.
///
/// A hash written by an earlier version (plain bcrypt) is still verified, exactly when it can
/// be (a password of at most 72 bytes), and replaced by a new hash on that sign-in. NUL is
/// refused in passwords, at registration and at sign-in alike.
///
/// bcrypt is slow on purpose; `PasswordHasher` lets at most `concurrency` hashes run at once
/// (on NIO's thread pool) and at most `queueLimit` wait, so that a flood of sign-ins cannot take
/// every core: beyond that, it answers `busy` at once.
public actor PasswordHasher {
    static let prefix = "$noted1$"
    /// The HMAC key: a fixed label (domain separation), not a secret.
    static let key = SymmetricKey(data: Data("noted password v1".utf8))

    let cost: UInt8
    let concurrency: Int
    let queueLimit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(cost: UInt8, concurrency: Int = max(1, System.coreCount - 1), queueLimit: Int = 64) {
        self.cost = cost
        self.concurrency = max(1, concurrency)
        self.queueLimit = queueLimit
    }

    /// Why a password cannot be used, or nil.
    static func problem(_ password: String) -> String? {
        if password.utf8.contains(0) { return "passwords cannot contain the NUL character" }
        return nil
    }

    /// The fixed-length input bcrypt sees for a password.
    static func prehashed(_ password: String) -> String {
        Data(HMAC<SHA256>.authenticationCode(for: Data(password.utf8), using: key)).base64EncodedString()
    }

    /// A new hash of the password.
    public func hash(_ password: String) async throws -> String {
        let (input, cost) = (Self.prehashed(password), cost)
        return try await limited { Self.prefix + Bcrypt.hash(input, cost: cost) }
    }

    /// Whether the password matches the stored hash; `upgrade` is true when the hash is of the
    /// earlier kind and should be replaced by `hash(password)`.
    public func verify(_ password: String, hash stored: String) async throws -> (matches: Bool, upgrade: Bool) {
        if stored.hasPrefix(Self.prefix) {
            let (input, bcrypt) = (Self.prehashed(password), String(stored.dropFirst(Self.prefix.count)))
            return (try await limited { Bcrypt.verify(input, hash: bcrypt) }, false)
        }
        // Plain bcrypt: exact only for passwords bcrypt reads whole.
        let exact = password.utf8.count <= 72 && !password.utf8.contains(0)
        let matches = try await limited { Bcrypt.verify(password, hash: stored) }
        return (matches, matches && exact)
    }

    /// Refused at once: too many sign-ins waiting for a hash.
    public struct Busy: Error {}

    private func limited<T: Sendable>(_ work: @escaping @Sendable () -> T) async throws -> T {
        if running >= concurrency {
            guard waiting.count < queueLimit else { throw Busy() }
            await withCheckedContinuation { waiting.append($0) }
        } else {
            running += 1
        }
        defer {
            if waiting.isEmpty {
                running -= 1
            } else {
                waiting.removeFirst().resume()  // the slot passes to the next one
            }
        }
        return try await NIOThreadPool.singleton.runIfActive(work)
    }
}
