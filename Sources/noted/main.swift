import ArgumentParser
import NotedCLI

do {
    let arguments = GlobalOptions.movingLeadingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
    var command = try await Noted.asyncParseAsRoot(arguments)
    if let notedCommand = command as? any NotedCommand {
        try await notedCommand.execute()
    } else {
        try command.run()
    }
} catch {
    Noted.exit(withError: error)
}
