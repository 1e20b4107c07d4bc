import ArgumentParser

// Global options may come before the subcommand (`shelf --home DIR list`): move them after it.
func movingLeadingOptions(_ arguments: [String]) -> [String] {
    var leading: [String] = []
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        if ["--json", "--offline"].contains(argument) || ["--home=", "--server="].contains(where: argument.hasPrefix) {
            leading.append(argument)
            index += 1
        } else if ["--home", "--server"].contains(argument), index + 1 < arguments.count {
            leading += [argument, arguments[index + 1]]
            index += 2
        } else {
            break
        }
    }
    guard !leading.isEmpty, index < arguments.count else { return arguments }
    return [arguments[index]] + leading + arguments[(index + 1)...]
}

/// `AsyncParsableCommand.main(_:)`, from an async function (see `noted`'s main.swift).
func shelf(_ arguments: [String]) async {
    await Shelf.main(arguments)
}

await shelf(movingLeadingOptions(Array(CommandLine.arguments.dropFirst())))
