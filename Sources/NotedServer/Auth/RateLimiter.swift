import Crypto
import Foundation
import NIOConcurrencyHelpers

/// A fixed-window counter per key: at most `limit` attempts per `window`. With `backoff`
/// (sign-in), reaching the limit locks the key out instead, for a time that doubles each time
/// the same key reaches it again (one window, two, four, … at most `maxLockout`), forgotten
/// after `maxLockout` without one (docs/security.md, "Sign-in limits").
///
/// Process memory is fine here: a limit that resets on restart or differs between nodes still
/// slows down guessing, and correctness never depends on it. The memory is bounded: keys are
/// stored as 16-byte hashes (a username of megabytes does not become a key of megabytes), and
/// keys with nothing left to remember are swept once per window.
public final class RateLimiter: Sendable {
    private struct Window {
        var start: Date
        var count: Int
        /// Lockouts in a row (each one doubles the next).
        var strikes = 0
        var lockedUntil: Date?
        /// Attempts reserved and not yet judged (``reserve(keys:now:)``).
        var pending = 0
    }
    private struct State {
        var windows: [Data: Window] = [:]
        var lastSweep = Date.distantPast
    }
    private let state = NIOLockedValueBox(State())
    let limit: Int
    let window: TimeInterval
    let backoff: Bool
    let maxLockout: TimeInterval

    public init(limit: Int, window: TimeInterval, backoff: Bool = false, maxLockout: TimeInterval = 3600) {
        self.limit = limit
        self.window = window
        self.backoff = backoff
        self.maxLockout = max(window, maxLockout)
    }

    private enum Mode {
        /// Count the attempt (and refuse it over the limit).
        case count
        /// Refuse when the failures and the attempts still being judged reach the limit; else
        /// hold one attempt as pending.
        case reserve
        /// A pending attempt judged: released, and counted as a failure when `failed`.
        case release(failed: Bool)
    }

    /// Counts an attempt for each key; throws `rateLimited` when any key is locked out.
    func check(keys: [String], now: Date = Date()) throws(AuthError) {
        try update(keys: keys, now: now, mode: .count)
    }

    /// An attempt held from before it is judged until after: the attempts in flight count
    /// against the limit with the failures, so that a thousand guesses sent at once are not
    /// all judged before the first failure is counted (security-3 M1). Each reservation ends
    /// with exactly one of ``Reservation/succeeded()`` or ``Reservation/failed()``.
    struct Reservation: Sendable {
        let limiter: RateLimiter
        let keys: [String]

        /// Judged right: released, counted as nothing.
        func succeeded(now: Date = Date()) { try? limiter.update(keys: keys, now: now, mode: .release(failed: false)) }
        /// Judged wrong: released and counted as a failure.
        func failed(now: Date = Date()) { try? limiter.update(keys: keys, now: now, mode: .release(failed: true)) }
    }

    /// Reserves an attempt for each key; throws `rateLimited` when any key is locked out or its
    /// failures and the attempts under way reach the limit.
    func reserve(keys: [String], now: Date = Date()) throws(AuthError) -> Reservation {
        try update(keys: keys, now: now, mode: .reserve)
        return Reservation(limiter: self, keys: keys)
    }

    /// Runs `attempt` under a reservation: a throw of `AuthError` that `isFailure` accepts
    /// counts as a failure; success and any other throw (the store unreachable, the hasher
    /// busy) count as nothing.
    func reserving<T>(keys: [String], isFailure: (AuthError) -> Bool, _ attempt: () async throws -> T) async throws -> T
    {
        let reservation = try reserve(keys: keys)
        do {
            let value = try await attempt()
            reservation.succeeded()
            return value
        } catch let error as AuthError where isFailure(error) {
            reservation.failed()
            throw error
        } catch {
            reservation.succeeded()
            throw error
        }
    }

    /// How many keys are held (for tests of the bound).
    var keyCount: Int { state.withLockedValue { $0.windows.count } }

    /// Whether `window` has anything left to remember at `now`.
    private func matters(_ window: Window, _ now: Date) -> Bool {
        if window.pending > 0 { return true }
        if let until = window.lockedUntil { return now.timeIntervalSince(until) < maxLockout }
        return now.timeIntervalSince(window.start) < self.window
    }

    private func update(keys: [String], now: Date, mode: Mode) throws(AuthError) {
        let hashed = keys.map { Data(SHA256.hash(data: Data($0.utf8)).prefix(16)) }
        let retryAfter: Int? = state.withLockedValue { state in
            if now.timeIntervalSince(state.lastSweep) >= window {
                state.windows = state.windows.filter { matters($0.value, now) }
                state.lastSweep = now
            }
            var retry: Int?
            // A reservation takes every key or none.
            if case .reserve = mode {
                for key in hashed {
                    guard let current = state.windows[key] else { continue }
                    if let until = current.lockedUntil, now < until {
                        retry = max(retry ?? 1, Int(until.timeIntervalSince(now).rounded(.up)))
                    } else {
                        let expired =
                            now.timeIntervalSince(current.start) >= window
                            || current.lockedUntil.map { now.timeIntervalSince($0) >= maxLockout } == true
                        let failures = expired ? 0 : current.count
                        if failures + current.pending >= limit {
                            // Full of failures: until the window ends; of attempts under way: a moment.
                            let wait =
                                failures >= limit
                                ? Int((window - now.timeIntervalSince(current.start)).rounded(.up)) : 1
                            retry = max(retry ?? 1, wait)
                        }
                    }
                }
                if retry == nil {
                    for key in hashed { state.windows[key, default: Window(start: now, count: 0)].pending += 1 }
                }
                return retry
            }
            var count = false
            switch mode {
            case .count: count = true
            case .reserve: count = false
            case .release(let failed):
                for key in hashed {
                    guard var window = state.windows[key] else { continue }
                    window.pending = max(0, window.pending - 1)
                    // A success leaves nothing to remember behind it.
                    let empty =
                        !failed && window.pending == 0 && window.count == 0 && window.lockedUntil == nil
                        && window.strikes == 0
                    state.windows[key] = empty ? nil : window
                }
                guard failed else { return nil }
                count = true
            }
            for key in hashed {
                var current = state.windows[key] ?? Window(start: now, count: 0)
                if let until = current.lockedUntil {
                    if now < until {
                        // Locked out: refused, and not counted (the lockout is long enough).
                        retry = max(retry ?? 1, Int(until.timeIntervalSince(now).rounded(.up)))
                        continue
                    }
                    if now.timeIntervalSince(until) >= maxLockout { current = Window(start: now, count: 0) }
                }
                if now.timeIntervalSince(current.start) >= window {
                    current.start = now
                    current.count = 0
                }
                if count { current.count += 1 }
                if current.count > limit || (!count && current.count >= limit) {
                    retry = max(retry ?? 1, Int((window - now.timeIntervalSince(current.start)).rounded(.up)))
                } else if backoff && count && current.count >= limit {
                    // The limit is reached: locked out for one window, doubled per strike.
                    let lockout = min(maxLockout, window * pow(2, Double(current.strikes)))
                    current.strikes += 1
                    current.lockedUntil = now.addingTimeInterval(lockout)
                    current.start = now.addingTimeInterval(lockout)
                    current.count = 0
                }
                if count || current.count > 0 || current.lockedUntil != nil { state.windows[key] = current }
            }
            return retry
        }
        if let retryAfter { throw AuthError(kind: .rateLimited(retryAfter: retryAfter)) }
    }
}

/// The address a request comes from, for the rate limits (docs/security.md, "Sign-in limits").
///
/// Behind a reverse proxy every request comes from the proxy: with `--trusted-proxy CIDR`, a
/// peer inside one of those ranges is taken at its word for `X-Forwarded-For`, read from the
/// right (the address the closest untrusted hop saw); anyone else's header is ignored. IPv6
/// addresses count by their /64, which one host usually holds whole.
public struct ClientAddresses: Sendable {
    public struct Range: Sendable, Hashable {
        let bytes: [UInt8]
        let prefix: Int

        /// `192.0.2.0/24`, `2001:db8::/32`, or a single address.
        public init?(_ text: String) {
            let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
            guard let bytes = ClientAddresses.bytes(parts[0]) else { return nil }
            let prefix = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
            guard let prefix, (0...bytes.count * 8).contains(prefix) else { return nil }
            self.bytes = bytes
            self.prefix = prefix
        }

        func contains(_ address: [UInt8]) -> Bool {
            guard address.count == bytes.count else { return false }
            var bits = prefix
            for index in 0..<bytes.count where bits > 0 {
                let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
                if address[index] & mask != bytes[index] & mask { return false }
                bits -= 8
            }
            return true
        }
    }

    public var trustedProxies: [Range] = []

    public init(trustedProxies: [Range] = []) {
        self.trustedProxies = trustedProxies
    }

    /// The rate-limit key of a request from `peer` with this `X-Forwarded-For`.
    public func key(peer: String, forwardedFor: String?) -> String {
        var address = peer
        if let forwardedFor, isTrusted(peer) {
            // From the right: the last hop a trusted proxy saw that is not itself trusted.
            let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if let hop = hops.reversed().first(where: { Self.bytes($0) != nil && !isTrusted($0) }) {
                address = hop
            }
        }
        return Self.group(address)
    }

    func isTrusted(_ address: String) -> Bool {
        guard let bytes = Self.bytes(address) else { return false }
        return trustedProxies.contains { $0.contains(bytes) }
    }

    /// IPv4 as it is; IPv6 by its /64; anything unparsable as it is (bounded by the caller).
    static func group(_ address: String) -> String {
        guard let bytes = bytes(address), bytes.count == 16 else { return address }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")  // IPv4-mapped
        }
        return stride(from: 0, to: 8, by: 2).map { String(format: "%02x%02x", bytes[$0], bytes[$0 + 1]) }.joined(
            separator: ":") + "::/64"
    }

    /// The address's bytes (4 or 16), or nil.
    static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }
}
