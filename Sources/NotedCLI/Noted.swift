import ArgumentParser

/// The `noted` command line: offline-first notes that sync.
public struct Noted: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "noted",
        abstract: "Offline-first notes that sync across your devices.",
        discussion: "Every command works offline. With a server configured and signed in, commands that change something sync before exiting.",
        subcommands: [
            Register.self, Login.self, Logout.self, Whoami.self,
            New.self, List.self, Show.self, Edit.self, Tag.self, Pin.self, Unpin.self,
            Trash.self, Restore.self, Purge.self, Discard.self, Search.self, History.self,
            Attach.self, Attachments.self, Fetch.self,
            Sync.self, Watch.self, Status.self, Export.self, Import.self, AccountCommand.self,
        ])

    public init() {}
}

/// A `noted` subcommand. The work is in `execute()`: calling `run()` on an existential
/// `AsyncParsableCommand` can resolve to the synchronous default, which only prints help.
public protocol NotedCommand: AsyncParsableCommand {
    func execute() async throws
}

extension NotedCommand {
    public mutating func run() async throws {
        try await execute()
    }
}

extension Register: NotedCommand {}
extension Login: NotedCommand {}
extension Logout: NotedCommand {}
extension Whoami: NotedCommand {}
extension New: NotedCommand {}
extension List: NotedCommand {}
extension Show: NotedCommand {}
extension Attach: NotedCommand {}
extension Attachments: NotedCommand {}
extension Fetch: NotedCommand {}
extension Edit: NotedCommand {}
extension Tag: NotedCommand {}
extension Pin: NotedCommand {}
extension Unpin: NotedCommand {}
extension Trash: NotedCommand {}
extension Restore: NotedCommand {}
extension Purge: NotedCommand {}
extension Discard: NotedCommand {}
extension Search: NotedCommand {}
extension History: NotedCommand {}
extension Sync: NotedCommand {}
extension Watch: NotedCommand {}
extension Status: NotedCommand {}
extension Export: NotedCommand {}
extension Import: NotedCommand {}
extension AccountPassword: NotedCommand {}
extension AccountUsageCommand: NotedCommand {}
extension AccountDevices: NotedCommand {}
extension AccountSignOut: NotedCommand {}
extension AccountDelete: NotedCommand {}
extension AccountTwoFactor.Status: NotedCommand {}
extension AccountTwoFactor.Enable: NotedCommand {}
extension AccountTwoFactor.Disable: NotedCommand {}
