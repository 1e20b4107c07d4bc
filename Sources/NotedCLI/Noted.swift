import ArgumentParser

/// The `noted` command line: offline-first notes that sync.
public struct Noted: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "noted",
        abstract: "Offline-first notes that sync across your devices.",
        discussion:
            "Every command works offline. With a server configured and signed in, commands that change something sync before exiting.",
        subcommands: [
            Register.self, Login.self, Logout.self, Whoami.self,
            New.self, List.self, Show.self, Edit.self, Tag.self, Pin.self, Unpin.self,
            Trash.self, Restore.self, Purge.self, Discard.self, Copy.self, Search.self, History.self,
            Attach.self, Attachments.self, Fetch.self,
            Sync.self, Watch.self, Status.self, Export.self, Import.self, AccountCommand.self, SpacesCommand.self,
            SpaceCommand.self,
        ])

    public init() {}
}
