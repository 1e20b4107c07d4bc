import Foundation
import GRDB
import Logging
import NotedCore
import PostgresNIO
import Testing

@testable import NotedServer

/// What issue 16's operators and two-factor sign-in keep, on both backends: disabling revokes
/// in the same transaction; the pending secret is enabled only as it was read; a time step and
/// a recovery code are used once, also when racing; deleting the user takes its codes; and a
/// database of the version before (schema up to `quota`) upgrades with its users intact.
@Suite struct AccountAdminStoreTests {
    static let backends = Backend.available

    func open(_ location: DatabaseLocation) throws -> any NotedStore {
        switch location {
        case .sqlite(let path): try SQLiteStore(path: path, limits: Limits())
        case .postgres(let url): try PostgresStore(url: url, limits: Limits(), logger: Logger(label: "test"))
        }
    }

    func newUser(_ store: any NotedStore, _ name: String = "u" + UUID().uuidString.prefix(8).lowercased()) async throws
        -> String
    {
        let id = UUID().uuidString.lowercased()
        #expect(
            try await store.createUser(
                UserAccount(id: id, username: name, usernameKey: name, passwordHash: "x"), now: Date()))
        return id
    }

    @Test(arguments: backends) func disablingRevokesEverySignInAndEnablingAllowsNewOnes(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let store = try open(location)
            try await store.migrate()
            let user = try await newUser(store)
            let other = try await newUser(store)
            let later = Date().addingTimeInterval(3600)
            for owner in [user, user, other] {
                try await store.createRefreshFamily(
                    RefreshFamily(id: UUID().uuidString, userID: owner, clientID: "noted", device: nil),
                    firstTokenHash: UUID().uuidString, expiresAt: later, now: Date())
            }
            let disabled = try await store.setUserDisabled(id: user, disabled: true, now: Date())
            #expect(disabled.found && disabled.revoked.count == 2)
            #expect(try await store.user(id: user)?.disabled == true)
            #expect(try await store.signInSessions(userID: user, now: Date()).isEmpty)
            #expect(
                try await store.signInSessions(userID: other, now: Date()).count == 1, "another user's sign-ins stay")
            #expect(try await store.setUserDisabled(id: user, disabled: true, now: Date()).revoked.isEmpty)
            #expect(try await store.setUserDisabled(id: user, disabled: false, now: Date()) == (true, []))
            #expect(try await store.user(id: user)?.disabled == false)
            #expect(
                try await store.setUserDisabled(id: UUID().uuidString.lowercased(), disabled: true, now: Date()).found
                    == false)
            let listed = try await store.users()
            #expect(Set(listed.map(\.id)) == [user, other])
            #expect(listed.allSatisfy { !$0.disabled && !$0.twoFactor && $0.records == 0 && $0.lastSeen != nil })
            await store.shutdown()
        }
    }

    @Test(arguments: backends) func aStepAndARecoveryCodeAreUsedOnceEvenWhenRacing(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let store = try open(location)
            try await store.migrate()
            let user = try await newUser(store)
            #expect(
                try await store.twoFactor(userID: user)
                    == TwoFactorRecord(secret: nil, pending: nil, lastStep: nil, recoveryCodesLeft: 0))
            #expect(try await !store.useTwoFactorStep(userID: user, step: 5), "no secret, no step")
            try await store.setTwoFactorPending(userID: user, secret: "FIRST")
            try await store.setTwoFactorPending(userID: user, secret: "SECOND")
            #expect(
                try await !store.enableTwoFactor(userID: user, secret: "FIRST", recoveryHashes: ["a"]),
                "a replaced setup")
            #expect(try await store.enableTwoFactor(userID: user, secret: "SECOND", recoveryHashes: ["a", "b", "c"]))
            #expect(
                try await !store.enableTwoFactor(userID: user, secret: "SECOND", recoveryHashes: ["d"]), "enabled once")
            #expect(
                try await store.twoFactor(userID: user)
                    == TwoFactorRecord(secret: "SECOND", pending: nil, lastStep: nil, recoveryCodesLeft: 3))
            #expect(try await store.user(id: user)?.twoFactor == true)

            #expect(try await store.useTwoFactorStep(userID: user, step: 100))
            #expect(try await !store.useTwoFactorStep(userID: user, step: 100), "replayed")
            #expect(try await !store.useTwoFactorStep(userID: user, step: 99), "an earlier step after a later one")
            let steps = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 { group.addTask { try await store.useTwoFactorStep(userID: user, step: 101) } }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(steps == 1)
            let codes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 { group.addTask { try await store.useRecoveryCode(userID: user, hash: "b") } }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(codes == 1)
            #expect(try await !store.useRecoveryCode(userID: user, hash: "zzz"))
            #expect(try await store.twoFactor(userID: user)?.recoveryCodesLeft == 2)

            try await store.disableTwoFactor(userID: user)
            #expect(
                try await store.twoFactor(userID: user)
                    == TwoFactorRecord(secret: nil, pending: nil, lastStep: nil, recoveryCodesLeft: 0))
            // Deleting the account takes its codes with it.
            try await store.setTwoFactorPending(userID: user, secret: "THIRD")
            #expect(try await store.enableTwoFactor(userID: user, secret: "THIRD", recoveryHashes: ["e"]))
            _ = try await store.deleteUser(id: user)
            let again = try await newUser(store)
            #expect(try await !store.useRecoveryCode(userID: user, hash: "e"))
            #expect(try await store.twoFactor(userID: again)?.recoveryCodesLeft == 0)
            await store.shutdown()
        }
    }

    /// A sign-in that verified an old-kind hash upgrades it only if the password was not
    /// changed meanwhile (else the old password would be back).
    @Test(arguments: backends) func anUpgradedHashNeverOverwritesAChangedPassword(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let store = try open(location)
            try await store.migrate()
            let user = try await newUser(store)
            try await store.upgradePasswordHash(userID: user, from: "x", to: "upgraded")
            #expect(try await store.user(id: user)?.passwordHash == "upgraded")
            try await store.setPasswordHash(userID: user, hash: "changed")
            try await store.upgradePasswordHash(userID: user, from: "upgraded", to: "late upgrade of the old password")
            #expect(try await store.user(id: user)?.passwordHash == "changed")
            await store.shutdown()
        }
    }

    @Test(arguments: backends) func aDatabaseFromBeforeUpgradesWithItsUsers(backend: Backend) async throws {
        try await withDatabase(backend) { location in
            let old = try open(location)
            let user = UUID().uuidString.lowercased()
            let insert =
                "INSERT INTO users (id, username, username_key, password_hash, created_at) VALUES ('\(user)', 'Old', 'old', 'x', 1000)"
            let seq = "INSERT INTO user_seq (user_id, seq, purged_seq) VALUES ('\(user)', 0, 0)"
            switch old {
            case let sqlite as SQLiteStore:
                try await sqlite.migrate(upTo: "quota")
                try await sqlite.pool.write { db in
                    try db.execute(sql: insert)
                    try db.execute(sql: seq)
                }
            case let postgres as PostgresStore:
                try await postgres.migrate(upTo: "quota")
                try await postgres.client.query(PostgresQuery(unsafeSQL: insert), logger: postgres.logger)
                try await postgres.client.query(PostgresQuery(unsafeSQL: seq), logger: postgres.logger)
            default:
                Issue.record("unknown store")
            }
            await old.shutdown()
            let store = try open(location)
            try await store.migrate()
            let upgraded = try await store.user(usernameKey: "old")
            #expect(
                upgraded
                    == UserAccount(
                        id: user, username: "Old", usernameKey: "old", passwordHash: "x", disabled: false,
                        twoFactor: false))
            #expect(try await store.users().map(\.username) == ["Old"])
            #expect(try await store.users().first?.createdAt == Date(millis: 1000))
            await store.shutdown()
        }
    }
}
