import Foundation
import NotedClient
import NotedCore

/// The schema documents shipped with shelf (`collections/*.json`, copied into the build as
/// resources). Serve the same folder with `noted-server --collections Sources/shelf/collections`.
enum ShelfSchemas {
    static let books = load("books")
    static let readingSessions = load("reading_sessions")
    static var all: [CollectionSchema] { [books, readingSessions] }

    private static func load(_ name: String) -> CollectionSchema {
        guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "collections"),
            let data = try? Data(contentsOf: url)
        else {
            fatalError("shelf: the schema collections/\(name).json is missing from the build")
        }
        do {
            return try CollectionSchema(json: JSONValue.parse(Array(data)))
        } catch {
            fatalError("shelf: collections/\(name).json: \(error)")
        }
    }
}

/// A book on the shelf: a record of the `books` collection.
struct Book: SyncedRecord {
    static var schema: CollectionSchema { ShelfSchemas.books }

    enum Status: String, Codable, CaseIterable, Sendable {
        case want, reading, finished, abandoned
    }

    var title = ""
    var author = ""
    var status = Status.want
    var folder: String?
    var trashed = false
}

/// One stretch of reading a book, timed: running while `stoppedAt` is nil.
struct ReadingSession: SyncedRecord {
    static var schema: CollectionSchema { ShelfSchemas.readingSessions }

    /// The id of the book read.
    var book = ""
    /// ISO 8601 instants (UTC), as text: readable in the JSON the server keeps.
    var startedAt = ""
    var stoppedAt: String?
    var pages: Int?
    var note = ""

    var start: Date? { Timestamp.parse(startedAt) }
    var stop: Date? { stoppedAt.flatMap(Timestamp.parse) }

    /// Seconds read: until `stoppedAt`, or until `now` while running.
    func seconds(now: Date) -> TimeInterval {
        guard let start else { return 0 }
        return max(0, (stop ?? now).timeIntervalSince(start))
    }
}
