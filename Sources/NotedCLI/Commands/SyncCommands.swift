import ArgumentParser
import Foundation
import NotedClient
import NotedCore

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pull and push until everything is synced; exit status 0 only when it is.")
    @OptionGroup var options: GlobalOptions
    @Option(help: "Give up after this many seconds.") var timeout: Int = 30

    func run() async throws {
        guard !options.offline else { throw CLIError("cannot sync with --offline") }
        let client = try await options.openClient(requireSync: true)
        guard client.server != nil else {
            throw CLIError("no server configured: give --server URL and run `noted login`")
        }
        guard client.tokens != nil else { throw CLIError("not signed in: run `noted login`") }
        let progress = isatty(STDERR_FILENO) == 1 && !options.json ? Task { await showProgress(client) } : nil
        await client.startSync()
        let synced = await client.waitUntilSynced(timeout: .seconds(max(1, timeout)), failWhenOffline: true)
        await client.stopSync()
        progress?.cancel()
        let pending = try await cli { try await client.store.pendingCount() }
        let refused = try await cli { try await client.store.syncErrors() }
        let refusedJSON = JSONValue.array(refused.map { ["id": .string($0.id), "message": .string($0.message)] })
        if synced, refused.isEmpty {
            if !options.json {
                print("synced")
            } else {
                printJSON(["synced": true, "pending": .int(Int64(pending)), "refused": refusedJSON])
            }
            return
        }
        if options.json { printJSON(["synced": false, "pending": .int(Int64(pending)), "refused": refusedJSON]) }
        if !refused.isEmpty {
            var lines: [String] = []
            for (id, message) in refused {
                let title = (try? await client.note(id)).map { $0?.title ?? "" } ?? ""
                lines.append("\(id.prefix(8)) \"\(title)\": \(message)")
            }
            throw CLIError(
                "the server refused \(refused.count) note(s), kept on this device unsynced (edit them, or `noted discard ID`): \(lines.joined(separator: "; "))"
            )
        }
        if await client.signInEnded() {
            throw CLIError(
                "not synced: this device's sign-in has ended (signed out from another device, the password changed, "
                    + "or the account deleted); run `noted login`. \(pending) note(s) pending, kept on this device")
        }
        throw CLIError("not fully synced: \(pending) note(s) pending; the server may be unreachable")
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Stay connected and print each change as it arrives.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        guard !options.offline else { throw CLIError("cannot watch with --offline") }
        let client = try await options.openClient(requireSync: true)
        guard client.tokens != nil else { throw CLIError("not signed in: run `noted login`") }
        let events = await client.events()
        await client.startSync()
        for await event in events {
            switch event {
            case .added("notes", let ids, .remote), .changed("notes", let ids, .remote):
                for id in ids {
                    let note = try? await client.note(id)
                    if options.json {
                        printJSON(["event": "changed", "note": note?.json ?? .null, "id": .string(id)])
                    } else {
                        print("changed \(id) \(note?.title ?? "")")
                    }
                }
            case .removed("notes", let ids):
                for id in ids {
                    if options.json {
                        printJSON(["event": "removed", "id": .string(id)])
                    } else {
                        print("removed \(id)")
                    }
                }
            case .forked(let from, let to):
                if options.json {
                    printJSON(["event": "forked", "from": .string(from), "to": .string(to)])
                } else {
                    print("kept unsynced text of purged \(from) as \(to)")
                }
            case .status(let status):
                let text: String
                switch status {
                case .stopped: text = "stopped"
                case .connecting: text = "connecting"
                case .syncing: text = "syncing"
                case .synced: text = "synced"
                case .offline(let retry): text = "offline, retrying in \(retry.components.seconds)s"
                }
                if options.json { printJSON(["event": "status", "status": .string(text)]) } else { print("[\(text)]") }
            case .error(let message):
                FileHandle.standardError.write(Data("noted: \(message)\n".utf8))
            case .conflict(let id, let fields):
                if options.json {
                    printJSON(["event": "conflict", "id": .string(id), "fields": .array(fields.map(JSONValue.string))])
                } else {
                    print("conflict \(id) in \(fields.joined(separator: ", ")): see `noted history \(id.prefix(8))`")
                }
            case .spaces:
                let spaces = (try? await client.store.spaces()) ?? []
                if options.json {
                    printJSON(["event": "spaces", "spaces": .array(spaces.map { .string($0.id) })])
                } else {
                    print("[spaces: \(spaces.map(\.name).joined(separator: ", "))]")
                }
            case .added(_, _, .local), .added(_, _, .remote), .changed(_, _, .local), .changed(_, _, .remote), .removed,
                .reset:
                // Another collection's records, this device's own edits, or a snapshot (its
                // removals are reported one by one).
                break
            }
            fflush(nil)
        }
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the server, the user, pending changes and the last sync.")
    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let home = options.resolvedHome
        let credentials = try home.credentials()
        let server = try options.serverURL()?.absoluteString
        let client = try await options.openClient()
        let pending = try await cli { try await client.store.pendingCount() }
        let lastSync = try await client.store.meta("lastSync")
        let errors = try await client.store.syncErrors()
        let conflicts = try await client.store.conflicts()
        if options.json {
            printJSON([
                "home": .string(home.path), "server": server.map(JSONValue.string) ?? .null,
                "user": credentials.map { .string($0.username) } ?? .null, "pending": .int(Int64(pending)),
                "lastSync": lastSync.map(JSONValue.string) ?? .null,
                "errors": .array(errors.map { ["id": .string($0.id), "message": .string($0.message)] }),
                "conflicts": .array(
                    conflicts.map { ["id": .string($0.id), "fields": .array($0.fields.map(JSONValue.string))] }),
            ])
            return
        }
        print("home:      \(home.path)")
        print("server:    \(server ?? "none")")
        print("user:      \(credentials?.username ?? "not signed in")")
        print("pending:   \(pending)")
        print("last sync: \(lastSync ?? "never")")
        for error in errors { print("refused:   \(error.id) \(error.message)") }
        for conflict in conflicts {
            print("conflict:  \(conflict.id) in \(conflict.fields.joined(separator: ", ")) (see noted history)")
        }
    }
}

/// On a terminal, a progress line once more than 100 notes came in.
/// After a sign-in: a device that holds nothing of the account yet (nothing pulled, nothing
/// written) pulls it at once, with the progress bar of `noted sync`, so that the next `noted
/// list` shows the notes. A pull that does not finish leaves the sign-in as it is and says how
/// to go on.
func firstPull(options: GlobalOptions) async {
    guard !options.offline else { return }
    do {
        let client = try await options.openClient(requireSync: true)
        guard try await client.store.cursor() == 0, try await client.store.pendingCount() == 0 else { return }
        let progress = isatty(STDERR_FILENO) == 1 && !options.json ? Task { await showProgress(client) } : nil
        await client.startSync()
        let synced = await client.waitUntilSynced(timeout: .seconds(600), failWhenOffline: true)
        await client.stopSync()
        progress?.cancel()
        if !synced {
            FileHandle.standardError.write(
                Data("noted: signed in, but the first sync did not finish; run `noted sync`\n".utf8))
        }
    } catch {
        FileHandle.standardError.write(
            Data("noted: signed in, but the first sync did not start (\(error)); run `noted sync`\n".utf8))
    }
}

private func showProgress(_ client: NotedClient) async {
    var received = 0
    for await event in await client.events() {
        guard case .added(_, let ids, .remote) = event else { continue }
        received += ids.count
        if received > 100 {
            let bar = String(repeating: "#", count: min(30, received / 100))
            FileHandle.standardError.write(
                Data("\rsyncing [\(bar.padding(toLength: 30, withPad: " ", startingAt: 0))] \(received) notes".utf8))
        }
        if Task.isCancelled { break }
    }
    if received > 100 { FileHandle.standardError.write(Data("\n".utf8)) }
}
