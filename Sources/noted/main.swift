import ArgumentParser
import NotedCLI

/// `AsyncParsableCommand.main(_:)`: called from an async function, where the asynchronous
/// overload is chosen (top-level code picks `ParsableCommand.main(_:)`, which refuses an
/// asynchronous root command).
func noted(_ arguments: [String]) async {
    await Noted.main(arguments)
}

await noted(GlobalOptions.movingLeadingGlobalOptions(Array(CommandLine.arguments.dropFirst())))
