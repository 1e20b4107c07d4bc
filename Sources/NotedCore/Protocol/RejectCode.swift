/// The `code` of a `reject` or `error` message.
public struct ErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let badRequest = ErrorCode(rawValue: "bad_request")
    public static let unknownCollection = ErrorCode(rawValue: "unknown_collection")
    public static let invalidField = ErrorCode(rawValue: "invalid_field")
    public static let invalidDelta = ErrorCode(rawValue: "invalid_delta")
    public static let invalidVersion = ErrorCode(rawValue: "invalid_version")
    public static let baseUnavailable = ErrorCode(rawValue: "base_unavailable")
    public static let notFound = ErrorCode(rawValue: "not_found")
    public static let alreadyExists = ErrorCode(rawValue: "already_exists")
    public static let gone = ErrorCode(rawValue: "gone")
    public static let tooLarge = ErrorCode(rawValue: "too_large")
    public static let ccidReused = ErrorCode(rawValue: "ccid_reused")
    public static let rateLimited = ErrorCode(rawValue: "rate_limited")
    /// The change would take its account beyond the server's storage quota.
    public static let quotaExceeded = ErrorCode(rawValue: "quota_exceeded")
    /// The change adds an attachment whose blob the server does not hold for the user: upload
    /// it (`PUT /v1/blobs/{sha256}`) and send the change again.
    public static let missingBlob = ErrorCode(rawValue: "missing_blob")
    /// The change is to a shared space where the user is a viewer (protocol 2, "Spaces"):
    /// it is never applied; the client keeps it as refused.
    public static let readOnly = ErrorCode(rawValue: "read_only")
    // Session-level error codes.
    public static let unauthenticated = ErrorCode(rawValue: "unauthenticated")
    public static let tokenExpired = ErrorCode(rawValue: "token_expired")
    public static let unknownType = ErrorCode(rawValue: "unknown_type")
    public static let unsupportedProtocol = ErrorCode(rawValue: "unsupported_protocol")
    public static let invalidMessage = ErrorCode(rawValue: "invalid_message")
    public static let internalError = ErrorCode(rawValue: "internal_error")
}

/// Why a change (or a request) was refused: a protocol error code and a human-readable message.
public struct ProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
