/// An error of the client library, with a message fit to show to a user.
public struct NotedClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// No note has this id (or id prefix).
        case notFound
        /// An id prefix matches more than one note.
        case ambiguous
        /// The input breaks a limit or a rule of the schema.
        case invalidInput
        /// The server could not be reached or answered badly.
        case server
        /// Not signed in, or the sign-in is no longer valid.
        case unauthenticated
        /// The local database could not be used.
        case storage
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
