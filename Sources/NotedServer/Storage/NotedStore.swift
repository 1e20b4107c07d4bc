import Foundation
import NotedCore

/// Everything the server keeps, with one type per backend (`SQLiteStore`, `PostgresStore`).
///
/// The requirements are split by who needs them, so that each part of the server names only the
/// part of the store it uses: the sync path a ``RecordStore``, sign-in an ``AccountStore``,
/// ``TwoFactorStore`` and ``OAuthStore``, access tokens a ``SigningKeyStore``, attachments a
/// ``BlobStore``, the background services a ``HousekeepingStore``. A `NotedStore` is all of
/// them, opened and closed as one database.
public protocol NotedStore: RecordStore, AccountStore, TwoFactorStore, OAuthStore, SigningKeyStore, BlobStore,
    HousekeepingStore, SpaceStore
{
    /// Creates or upgrades the schema.
    func migrate() async throws
    /// Throws when the database cannot be reached.
    func ping() async throws
    /// Releases connections.
    func shutdown() async
}

/// The user's records, their changes and their history: what a sync session reads and writes.
///
/// Every push is one durable unit: a change's record, revisions, `ccid` result and the user's
/// new `seq` are written in one transaction, and concurrent pushes of one user serialize on
/// the user's `seq` row, so nothing depends on process memory. The algorithm is
/// ``PushAlgorithm``, written once for both backends.
public protocol RecordStore: Sendable {
    func latestSeq(userID: String) async throws -> Int64
    /// What the user stores, as ``StorageQuota`` counts it.
    func usage(userID: String) async throws -> StorageUsage
    /// A page of the user's changes (``ChangesQuery``); `snapshot`: the client says this pull
    /// starts or continues a snapshot.
    func changes(userID: String, since: Int64, limit: Int, snapshot: Bool) async throws -> ChangesPage
    func record(userID: String, collection: String, id: String) async throws -> Record?
    /// The revision list of a record; nil when the user has no such record.
    func revisions(userID: String, collection: String, id: String) async throws -> [RevisionInfo]?
    func revision(userID: String, collection: String, id: String, rev: Int64, conflict: Bool) async throws
        -> RevisionInfo?
    /// Applies one validated change in one transaction and returns the answer and what to broadcast.
    func push(_ change: Change, context: PushContext) async throws -> PushResult
    /// The changes of one push message of one user, each answered as `push(_:context:)` would,
    /// in order (a store may commit them together: SQLite's group commit).
    func push(_ changes: [(change: Change, context: PushContext)]) async throws -> [Result<PushResult, any Error>]
    /// Calls `handler` for every change committed by any server node sharing this database, in
    /// commit order, until cancelled; `onListening` runs each time listening (re)starts, before
    /// the first notification after it, so a caller can catch up on what it may have missed
    /// while not listening. A backend only one node can use just waits.
    func listenForCommits(
        onListening: @escaping @Sendable () async -> Void,
        _ handler: @escaping @Sendable (CommitNotice) async -> Void
    ) async throws
    /// Replaces the served collection schemas (name → schema document) in one transaction, once
    /// `check` has accepted them given the stored ones and the collections that hold live
    /// records; `check` throws to refuse, and then nothing is written.
    func serveCollections(
        _ documents: [String: String],
        check: @escaping @Sendable (_ stored: [String: String], _ holdingRecords: Set<String>) throws -> Void
    ) async throws
}

/// Spaces, their members, invitations and links (docs/protocol.md, "Spaces"). Who may do what
/// is ``SpaceRules``', decided on a ``SpaceState`` read and written in one transaction.
public protocol SpaceStore: Sendable {
    /// Inserts a shared space with its owner as its one member, and its `seq` at 0.
    func createSpace(_ space: Space) async throws
    /// The space whole; nil when there is no such space.
    func spaceState(id: String) async throws -> SpaceState?
    /// Reads the space, lets `change` decide (it throws to refuse, and then nothing is
    /// written), and writes what changed, in one transaction that holds the space so that
    /// concurrent updates of it apply one after the other. Returns `change`'s value and the
    /// users whose membership or role changed; nil when there is no such space.
    func updateSpace<T: Sendable>(
        id: String, _ change: @escaping @Sendable (inout SpaceState) throws -> T
    ) async throws -> (value: T, changed: Set<String>)?
    /// Deletes a space with its records, history, blobs, members, invitations and links, once
    /// `check` accepted the space as it stands (it throws to refuse), in one transaction that
    /// holds the space; returns who its members were, nil when there is no such space.
    func deleteSpace(id: String, check: @escaping @Sendable (SpaceState) throws -> Void) async throws -> [String]?
    /// The spaces the user is a member of, the personal one first, then by name.
    func spaces(userID: String) async throws -> [SpaceSummary]
    /// The invitations waiting for the user's answer, oldest first.
    func invitations(userID: String) async throws -> [PendingInvitation]
    /// Tells every other node that the user's membership changed (their sessions there are
    /// told); a backend only one node can use has nothing to do.
    func announceMembership(userID: String) async throws
    /// The user's role in the space; nil for a non-member.
    func role(spaceID: String, userID: String) async throws -> SpaceRole?
    /// The space and link a link's secret (by its hash) belongs to; nil for none.
    func spaceLink(secretHash: String) async throws -> (spaceID: String, linkID: String)?
}

/// What spaces are called before anyone names them.
public enum SpaceDefaults {
    /// The name of every personal space.
    public static let personalName = "Personal"
}

/// Accounts and their sign-in sessions.
public protocol AccountStore: Sendable {
    /// Inserts a user; false when the username is taken (compared by `usernameKey`).
    func createUser(_ user: UserAccount, now: Date) async throws -> Bool
    func user(usernameKey: String) async throws -> UserAccount?
    func user(id: String) async throws -> UserAccount?
    /// The user with their latest `seq` (0 before their first change), what a sync session's
    /// `hello` reads; nil: no such user. One query on PostgreSQL, where each query a session
    /// makes as it opens leaves a pool timer behind for a minute (docs/benchmarks.md, "Idle
    /// connections").
    func userAndSeq(id: String) async throws -> (user: UserAccount, seq: Int64)?
    /// Replaces a user's password hash (a new password).
    func setPasswordHash(userID: String, hash: String) async throws
    /// Replaces a hash of the earlier kind, verified at sign-in, with a new one of the same
    /// password: only if it is still `old`, so that a password changed meanwhile stays changed.
    func upgradePasswordHash(userID: String, from old: String, to new: String) async throws
    /// Deletes the user and everything kept for them (records, revisions, `ccid` results,
    /// refresh tokens and their families, authorization codes, counters) in one transaction,
    /// after taking the user's `seq` lock so that no push is half-way; returns the ids of the
    /// sign-in sessions the user had, to announce as revoked. Empty when there is no such user.
    func deleteUser(id: String) async throws -> [String]
    /// Every account, by username, with what it stores (`noted-server users list`).
    func users() async throws -> [UserSummary]
    /// Disables or enables an account; disabling revokes its sign-in sessions and authorization
    /// codes in the same transaction and returns the sessions revoked. False in `found` when
    /// there is no such user.
    func setUserDisabled(id: String, disabled: Bool, now: Date) async throws -> (found: Bool, revoked: [String])
    /// Tells every node that the account was disabled (its connections close).
    func announceAccountDisabled(userID: String) async throws
    /// The user's sign-in sessions (refresh-token families) neither revoked nor past their
    /// last refresh token, oldest first.
    func signInSessions(userID: String, now: Date) async throws -> [SignInSession]
    /// Revokes the user's sign-in sessions (only `only` when given; never `except`) and returns
    /// the ids it revoked now.
    func revokeSignInSessions(userID: String, only: String?, except: String?, now: Date) async throws -> [String]
}

/// Two-factor sign-in (docs/security.md).
public protocol TwoFactorStore: Sendable {
    /// The user's two-factor state; nil when there is no such user.
    func twoFactor(userID: String) async throws -> TwoFactorRecord?
    /// Stores (or, with nil, forgets) a secret being enrolled, not yet in use.
    func setTwoFactorPending(userID: String, secret: String?) async throws
    /// Turns two-factor sign-in on with the pending secret, if it is still `secret`, and
    /// replaces the recovery codes; false when the pending secret changed or is gone.
    func enableTwoFactor(userID: String, secret: String, recoveryHashes: [String]) async throws -> Bool
    /// Turns two-factor sign-in off: the secret, the pending one and the recovery codes go.
    func disableTwoFactor(userID: String) async throws
    /// Records that the code of time step `step` was used, if no code of that step or a later
    /// one was: false for a replayed code.
    func useTwoFactorStep(userID: String, step: Int64) async throws -> Bool
    /// Uses up one recovery code by its hash: false when it is not one of the user's unused codes.
    func useRecoveryCode(userID: String, hash: String) async throws -> Bool
}

/// The keys access tokens are signed with, shared by every node.
public protocol SigningKeyStore: Sendable {
    func signingKeys() async throws -> [SigningKeyRecord]
    /// Inserts a key unless one with the same `kid` exists.
    func addSigningKey(_ key: SigningKeyRecord) async throws
    /// Removes a retired key (no unexpired token can carry its `kid`).
    func removeSigningKey(kid: String) async throws
}

/// What the background services do to the store: retention and revision histories.
public protocol HousekeepingStore: Sendable {
    /// Removes tombstones and `ccid` results past their retention.
    func sweep(tombstonesBefore: Date, appliedChangesBefore: Date) async throws
    /// Compacts and thins the revision histories due at `now` (at most `limit` records) to
    /// what `policy` keeps: read and decided outside the writer, written a batch of records per
    /// transaction.
    func thinHistory(now: Date, policy: HistoryPolicy, limit: Int) async throws -> HistoryThinning
}

extension AccountStore where Self: RecordStore {
    public func userAndSeq(id: String) async throws -> (user: UserAccount, seq: Int64)? {
        guard let user = try await user(id: id) else { return nil }
        return (user, try await latestSeq(userID: id))
    }
}

extension RecordStore {
    /// A page of changes for a pull that does not say it is part of a snapshot.
    public func changes(userID: String, since: Int64, limit: Int) async throws -> ChangesPage {
        try await changes(userID: userID, since: since, limit: limit, snapshot: false)
    }
}

/// "User U committed `seq` S", as one server node tells the others; or, with
/// `revokedFamily`, "this sign-in session was revoked" (then `userID` is empty and `seq` 0).
public struct CommitNotice: Sendable, Hashable {
    public var userID: String
    public var seq: Int64
    /// Whether the commit was made by this process (its sessions were told directly).
    public var fromThisNode: Bool
    /// A refresh-token family (sign-in session) revoked on some node.
    public var revokedFamily: String?
    /// A user whose account was deleted on some node (then `seq` is 0).
    public var deletedUser: String?
    /// A user whose account the operator disabled (then `seq` is 0).
    public var disabledUser: String?
    /// A user whose spaces or roles changed (then `seq` is 0).
    public var membershipUser: String?

    public init(
        userID: String, seq: Int64, fromThisNode: Bool, revokedFamily: String? = nil, deletedUser: String? = nil,
        disabledUser: String? = nil
    ) {
        self.userID = userID
        self.seq = seq
        self.fromThisNode = fromThisNode
        self.revokedFamily = revokedFamily
        self.deletedUser = deletedUser
        self.disabledUser = disabledUser
    }
}

/// One sign-in of a user (a refresh-token family), as the account's device list shows it.
public struct SignInSession: Sendable, Hashable {
    public var id: String
    public var clientID: String
    /// The device id the client gave when signing in, if any.
    public var device: String?
    public var signedInAt: Date
    /// When its newest refresh token was issued (the sign-in, or its last refresh).
    public var lastSeen: Date

    public init(id: String, clientID: String, device: String?, signedInAt: Date, lastSeen: Date) {
        self.id = id
        self.clientID = clientID
        self.device = device
        self.signedInAt = signedInAt
        self.lastSeen = lastSeen
    }
}

/// A push for a user that no longer exists: the account was deleted (on this node or another)
/// while one of its connections or access tokens was still in use.
public struct AccountDeleted: Error, Sendable, CustomStringConvertible {
    public init() {}
    public var description: String { "the account was deleted" }
}

/// A user account.
public struct UserAccount: Sendable, Hashable {
    public var id: String
    public var username: String
    /// The username as compared: lower-cased.
    public var usernameKey: String
    public var passwordHash: String
    /// Disabled by the server's operator: no sign-in, no token accepted.
    public var disabled: Bool
    /// Two-factor sign-in is on: a password alone does not sign in.
    public var twoFactor: Bool

    public init(
        id: String, username: String, usernameKey: String, passwordHash: String, disabled: Bool = false,
        twoFactor: Bool = false
    ) {
        self.id = id
        self.username = username
        self.usernameKey = usernameKey
        self.passwordHash = passwordHash
        self.disabled = disabled
        self.twoFactor = twoFactor
    }
}

/// An account as `noted-server users list` shows it.
public struct UserSummary: Sendable, Hashable {
    public var id: String
    public var username: String
    public var createdAt: Date
    public var disabled: Bool
    public var twoFactor: Bool
    /// Live records and the bytes of their fields.
    public var records: Int64
    public var storedBytes: Int64
    /// The last time one of its sign-ins was refreshed or began; nil if never signed in.
    public var lastSeen: Date?
}

/// A user's two-factor sign-in (docs/security.md): the secret in use, one being enrolled, the
/// time step of the last code accepted and how many recovery codes are left.
public struct TwoFactorRecord: Sendable, Hashable {
    public var secret: String?
    public var pending: String?
    public var lastStep: Int64?
    public var recoveryCodesLeft: Int
}

/// A persisted token-signing key.
public struct SigningKeyRecord: Sendable, Hashable {
    public var kid: String
    public var privateKeyPEM: String
    public var createdAt: Date

    public init(kid: String, privateKeyPEM: String, createdAt: Date) {
        self.kid = kid
        self.privateKeyPEM = privateKeyPEM
        self.createdAt = createdAt
    }
}

/// A chain of refresh tokens descending from one sign-in.
public struct RefreshFamily: Sendable, Hashable {
    public var id: String
    public var userID: String
    public var clientID: String
    public var device: String?

    public init(id: String, userID: String, clientID: String, device: String?) {
        self.id = id
        self.userID = userID
        self.clientID = clientID
        self.device = device
    }
}

/// The result of presenting a refresh token.
public enum RefreshRotation: Sendable, Hashable {
    /// The token was valid; its replacement is stored.
    case rotated(RefreshFamily)
    /// The token had already been used: its family is now revoked.
    case reused(familyID: String)
    /// Unknown, expired or revoked.
    case invalid
}
