import ArgumentParser
import Foundation
import NotedClient
import NotedCore

// MARK: Accounts

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create an account on the server, then sign in.")
    @OptionGroup var options: Options
    @Option(help: "The username.") var username: String
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false

    func run() async throws {
        let (server, password) = try readSignIn(options: options, passwordStdin: passwordStdin)
        _ = try await library { try await NotedAPI(server: server).register(username: username, password: password) }
        let userID = try await signIn(options: options, server: server, username: username, password: password)
        if options.json {
            printJSON([
                "username": .string(username), "user": .string(userID),
                "server": .string(server.absoluteString.trimmingSuffix("/")), "registered": true,
            ])
        } else {
            print("registered and signed in as \(username)")
        }
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Sign in to the server.")
    @OptionGroup var options: Options
    @Option(help: "The username.") var username: String
    @Flag(name: .customLong("password-stdin"), help: "Read the password from standard input.") var passwordStdin = false

    func run() async throws {
        let (server, password) = try readSignIn(options: options, passwordStdin: passwordStdin)
        let userID = try await signIn(options: options, server: server, username: username, password: password)
        if options.json {
            printJSON([
                "username": .string(username), "user": .string(userID),
                "server": .string(server.absoluteString.trimmingSuffix("/")),
            ])
        } else {
            print("signed in as \(username)")
        }
    }
}

private func readSignIn(options: Options, passwordStdin: Bool) throws -> (URL, String) {
    guard passwordStdin else { throw ValidationError("give the password on standard input with --password-stdin") }
    guard !options.offline else { throw ShelfError("signing in needs the server: leave out --offline") }
    guard let server = try options.serverURL() else {
        throw ShelfError("no server: give --server URL or set NOTED_SERVER")
    }
    let input = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
    let password = String(input.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        .trimmingSuffix("\r")
    guard !password.isEmpty else { throw ShelfError("no password on standard input") }
    return (server, password)
}

/// Signs in and keeps the tokens; the account's books are in a database of its own, so that
/// another account signing in on this home neither sees nor erases them.
@discardableResult
private func signIn(options: Options, server: URL, username: String, password: String) async throws -> String {
    try options.createHome()
    let first = try librarySync { try LocalStore.open(path: try options.databasePath(), collections: ShelfSchemas.all) }
    let device = try await library { try await first.deviceID() }
    let api = NotedAPI(server: server)
    let tokens = try await library { try await api.signIn(username: username, password: password, device: device) }
    let userID = Credentials.subject(ofJWT: tokens.accessToken) ?? username
    let serverText = server.absoluteString.trimmingSuffix("/")
    let account = serverText + " " + userID
    let path = try await library {
        try await options.accounts.use(
            server: serverText, userID: userID, username: username, collections: ShelfSchemas.all)
    }
    let store = try librarySync { try LocalStore.open(path: path, collections: ShelfSchemas.all) }
    if let bound = try await store.meta("account"), bound != account {
        await api.revoke(refreshToken: tokens.refreshToken)
        throw ShelfError(
            "\(path) holds the books of \(bound), not of \(account): \(options.accounts.indexPath) does not match it")
    }
    if try await store.meta("device") == nil { try await store.setMeta("device", device) }
    try await store.setMeta("account", account)
    try Options.save(
        Credentials(
            server: serverText, username: username, userID: userID,
            accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, expiresAt: tokens.expiresAt),
        to: options.credentialsPath)
    return userID
}

// MARK: Books

struct Add: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Add a book.")
    @OptionGroup var options: Options
    @Argument(help: "The title.") var title: String
    @Option(help: "The author.") var author: String
    @Option(help: "want, reading, finished or abandoned.") var status: Book.Status = .want
    @Option(help: "A folder (shelf) to keep it in.") var folder: String?

    func run() async throws {
        guard !title.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("the title is empty") }
        let client = try options.open()
        let book = try await library {
            try await client.records(Book.self).create(
                Book(title: title, author: author, status: status, folder: folder))
        }
        await options.sync(client)
        if options.json { printJSON(try await json(client, book.id)) } else { print(book.id) }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the books, most recently changed first.")
    @OptionGroup var options: Options
    @Option(help: "Only books with this status.") var status: Book.Status?
    @Option(help: "Only books in this folder.") var folder: String?

    func run() async throws {
        let client = try options.open()
        var query = RecordQuery(equal: ["trashed": false])
        if let status { query.equal["status"] = .string(status.rawValue) }
        if let folder { query.equal["folder"] = .string(folder) }
        let books = try await library { try await client.records(Book.self).query(query) }
        if options.json {
            printJSON(.array(books.map(bookJSON)))
            return
        }
        for book in books {
            let folder = book.value.folder.map { "  [\($0)]" } ?? ""
            print(
                "\(book.id.prefix(8))  \(book.value.status.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0))  \(book.value.title) — \(book.value.author)\(folder)\(book.pending ? "  (not synced)" : "")"
            )
        }
    }
}

struct SetStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Set a book's status.")
    @OptionGroup var options: Options
    @Argument(help: "The book's id, or a unique prefix of it.") var id: String
    @Argument(help: "want, reading, finished or abandoned.") var status: Book.Status

    func run() async throws {
        let client = try options.open()
        let books = client.records(Book.self)
        let book = try await library {
            try await books.update(try await resolve(id, in: client)) { $0.status = status }
        }
        await options.sync(client)
        if options.json {
            printJSON(try await json(client, book.id))
        } else {
            print("\(book.value.title): \(status.rawValue)")
        }
    }
}

extension Book.Status: ExpressibleByArgument {}

// MARK: Reading sessions

struct Start: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start reading a book: its timer runs until `shelf stop`, on any device.")
    @OptionGroup var options: Options
    @Argument(help: "The book's id, or a unique prefix of it.") var id: String

    func run() async throws {
        let client = try options.open()
        await options.sync(client)
        let bookID = try await resolve(id, in: client)
        if let running = try await runningSessions(client).first(where: { $0.value.book == bookID }) {
            throw ShelfError("already reading it since \(running.value.startedAt)")
        }
        let (session, book) = try await library {
            // One local transaction: the session, and the book marked as being read.
            try await client.transaction { transaction in
                let session = try transaction.create(
                    ReadingSession.schema.name,
                    fields: ReadingSession(book: bookID, startedAt: Timestamp.format(Date())).fields())
                let book = try transaction.update(Book.schema.name, id: bookID) { fields in
                    if fields["status"] == "want" { fields["status"] = "reading" }
                }
                return (session.id, book.fields["title"]?.stringValue ?? "")
            }
        }
        await options.sync(client)
        if options.json {
            printJSON(["session": .string(session), "book": .string(bookID)])
        } else {
            print("reading \(book) (session \(session.prefix(8)))")
        }
    }
}

struct Stop: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stop the running reading session, wherever it was started (syncs first).")
    @OptionGroup var options: Options
    @Option(help: "Pages read.") var pages: Int?
    @Option(help: "A note on this stretch of reading.") var note: String?

    func run() async throws {
        if let pages, !(0...100_000).contains(pages) { throw ValidationError("--pages is 0 to 100000") }
        let client = try options.open()
        await options.sync(client)
        let running = try await runningSessions(client)
        guard let session = running.first else { throw ShelfError("no reading session is running") }
        let now = Date()
        let stopped = try await library {
            try await client.records(ReadingSession.self).update(session.id) { value in
                value.stoppedAt = Timestamp.format(now)
                value.pages = pages
                value.note = note ?? value.note
            }
        }
        await options.sync(client)
        let minutes = Int(stopped.value.seconds(now: now) / 60)
        if options.json {
            printJSON(sessionJSON(stopped, now: now))
        } else {
            print(
                "stopped after \(minutes) min" + (running.count > 1 ? "; \(running.count - 1) more still running" : ""))
        }
    }
}

struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "A book's reading sessions, latest first.")
    @OptionGroup var options: Options
    @Argument(help: "The book's id, or a unique prefix of it.") var id: String

    func run() async throws {
        let client = try options.open()
        let bookID = try await resolve(id, in: client)
        let sessions = try await library {
            try await client.records(ReadingSession.self).query(
                RecordQuery(equal: ["book": .string(bookID)], order: [.field("startedAt", descending: true)]))
        }
        let now = Date()
        if options.json {
            printJSON(.array(sessions.map { sessionJSON($0, now: now) }))
            return
        }
        for session in sessions {
            let value = session.value
            let pages = value.pages.map { ", \($0) pages" } ?? ""
            let state = value.stoppedAt == nil ? "running" : "\(Int(value.seconds(now: now) / 60)) min\(pages)"
            print("\(value.startedAt)  \(state)\(value.note.isEmpty ? "" : "  \(value.note)")")
        }
    }
}

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Books per status, and time read per book and in all.")
    @OptionGroup var options: Options

    func run() async throws {
        let client = try options.open()
        // Every book, trashed ones too: the time read per book adds up to the total.
        let books = try await library { try await client.records(Book.self).query(RecordQuery()) }
        let sessions = try await library { try await client.records(ReadingSession.self).query() }
        let now = Date()
        var perStatus = Dictionary(uniqueKeysWithValues: Book.Status.allCases.map { ($0.rawValue, 0) })
        for book in books where !book.value.trashed { perStatus[book.value.status.rawValue, default: 0] += 1 }
        var perBook: [String: Int] = [:]
        for session in sessions { perBook[session.value.book, default: 0] += Int(session.value.seconds(now: now)) }
        let total = perBook.values.reduce(0, +)
        // A session of a book purged since counts under the book's id, untitled.
        let titles = Dictionary(uniqueKeysWithValues: books.map { ($0.id, $0.value.title) })
        let read = perBook.keys.sorted { (perBook[$0]!, $1) > (perBook[$1]!, $0) }.map {
            (id: $0, title: titles[$0] ?? "(removed book \($0.prefix(8)))")
        }
        if options.json {
            printJSON([
                "books": .object(perStatus.mapValues { .int(Int64($0)) }),
                "read": .array(
                    read.map {
                        ["id": .string($0.id), "title": .string($0.title), "seconds": .int(Int64(perBook[$0.id]!))]
                    }),
                "totalSeconds": .int(Int64(total)),
            ])
            return
        }
        print(Book.Status.allCases.map { "\($0.rawValue) \(perStatus[$0.rawValue]!)" }.joined(separator: " · "))
        for book in read { print("\(book.title): \(perBook[book.id]! / 60) min") }
        print("in all: \(total / 60) min")
    }
}

// MARK: History and sync

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A book's revisions on the server, with the status and title of each.")
    @OptionGroup var options: Options
    @Argument(help: "The book's id, or a unique prefix of it.") var id: String

    func run() async throws {
        let client = try options.open()
        guard client.server != nil else {
            throw ShelfError("history is kept by the server: sign in with `shelf login`")
        }
        let books = client.records(Book.self)
        let bookID = try await resolve(id, in: client)
        let revisions = try await library { try await books.history(bookID) }
        var rows: [JSONValue] = []
        for revision in revisions {
            let value = try await library {
                try await books.revision(bookID, rev: revision.rev, conflict: revision.conflict)
            }
            rows.append([
                "rev": .int(revision.rev), "updatedAt": .string(revision.updatedAt),
                "conflict": .bool(revision.conflict),
                "status": .string(value.status.rawValue), "title": .string(value.title),
            ])
        }
        if options.json {
            printJSON(.array(rows))
            return
        }
        for row in rows {
            print(
                "rev \(row["rev"]!.jsonString)  \(row["updatedAt"]!.stringValue ?? "")  \(row["status"]!.stringValue ?? "")  \(row["title"]!.stringValue ?? "")\(row["conflict"] == true ? "  (conflict)" : "")"
            )
        }
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Send what this device holds and fetch what others did.")
    @OptionGroup var options: Options
    @Option(help: "Seconds to wait for the server.") var timeout: Int = 30

    func run() async throws {
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout is 1 to 3600 seconds") }
        let client = try options.open()
        guard client.server != nil else {
            throw ShelfError(options.offline ? "--offline: nothing to sync" : "not signed in: run `shelf login`")
        }
        await client.startSync()
        let synced = await client.waitUntilSynced(timeout: .seconds(timeout), failWhenOffline: true)
        await client.stopSync()
        let pending = try await library { try await client.store.pendingCount() }
        let refused = try await library { try await client.store.syncErrors() }
        if options.json {
            printJSON([
                "synced": .bool(synced && refused.isEmpty), "pending": .int(Int64(pending)),
                "refused": .array(refused.map { ["id": .string($0.id), "message": .string($0.message)] }),
            ])
        }
        guard synced else { throw ShelfError("could not reach the server within \(timeout) s; changes stay queued") }
        guard refused.isEmpty else {
            throw ShelfError(
                "the server refused \(refused.count) record(s), kept on this device unsynced: "
                    + refused.map { "\($0.id.prefix(8)): \($0.message)" }.joined(separator: "; "))
        }
        if !options.json { print("synced") }
    }
}

// MARK: Helpers

/// The one book whose id is `text` or starts with it.
func resolve(_ text: String, in client: NotedClient) async throws -> String {
    let prefix = text.lowercased()
    guard !prefix.isEmpty, prefix.allSatisfy({ $0.isHexDigit || $0 == "-" }) else {
        throw ShelfError("\"\(text)\" is not a book id")
    }
    let books = try await library { try await client.records(Book.self).query() }
    let matches = books.filter { $0.id.hasPrefix(prefix) }
    guard matches.count == 1 else {
        throw ShelfError(
            matches.isEmpty
                ? "no book has an id starting with \(text)"
                : "\(text) names \(matches.count) books; give more of the id")
    }
    return matches[0].id
}

func runningSessions(_ client: NotedClient) async throws -> [Stored<ReadingSession>] {
    try await library {
        try await client.records(ReadingSession.self).query(
            RecordQuery(equal: ["stoppedAt": .null], order: [.field("startedAt", descending: true)]))
    }
}

func bookJSON(_ book: Stored<Book>) -> JSONValue {
    [
        "id": .string(book.id), "title": .string(book.value.title), "author": .string(book.value.author),
        "status": .string(book.value.status.rawValue), "folder": book.value.folder.map(JSONValue.string) ?? .null,
        "rev": .int(book.rev), "pending": .bool(book.pending),
    ]
}

func json(_ client: NotedClient, _ id: String) async throws -> JSONValue {
    guard let book = try await library({ try await client.records(Book.self).get(id) }) else {
        throw ShelfError("no book \(id)")
    }
    return bookJSON(book)
}

func sessionJSON(_ session: Stored<ReadingSession>, now: Date) -> JSONValue {
    [
        "id": .string(session.id), "book": .string(session.value.book), "startedAt": .string(session.value.startedAt),
        "stoppedAt": session.value.stoppedAt.map(JSONValue.string) ?? .null,
        "pages": session.value.pages.map { .int(Int64($0)) } ?? .null,
        "note": .string(session.value.note), "seconds": .int(Int64(session.value.seconds(now: now))),
    ]
}
