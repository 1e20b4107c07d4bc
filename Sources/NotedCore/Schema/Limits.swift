/// The limits a server enforces, all advertised to clients in `welcome`.
public struct Limits: Sendable, Hashable {
    /// Largest message a client may send, in UTF-8 bytes.
    public var maxMessageBytes: Int
    /// Most changes in one push.
    public var maxChangesPerPush: Int
    /// Longest text field, in UTF-16 code units.
    public var maxTextLength: Int
    /// Most elements in a `set` field.
    public var maxTags: Int
    /// Longest element of a `set` field, in UTF-16 code units.
    public var maxTagLength: Int

    public init(
        maxMessageBytes: Int = 1 << 20,
        maxChangesPerPush: Int = 100,
        maxTextLength: Int = 200_000,
        maxTags: Int = 100,
        maxTagLength: Int = 200
    ) {
        self.maxMessageBytes = maxMessageBytes
        self.maxChangesPerPush = maxChangesPerPush
        self.maxTextLength = maxTextLength
        self.maxTags = maxTags
        self.maxTagLength = maxTagLength
    }

    /// No limit at all: what a client applies its own, already checked, ops under.
    public static let unbounded = Limits(
        maxMessageBytes: .max, maxChangesPerPush: .max, maxTextLength: .max, maxTags: .max, maxTagLength: .max)

    /// Reads the `limits` object of `welcome`: a limit that is missing, not a positive integer,
    /// or not an object at all is the protocol's default.
    public init(json value: JSONValue) {
        let defaults = Limits()
        func read(_ key: String, _ fallback: Int) -> Int {
            value[key]?.intValue.map { Int(clamping: $0) }.flatMap { $0 > 0 ? $0 : nil } ?? fallback
        }
        self.init(
            maxMessageBytes: read("maxMessageBytes", defaults.maxMessageBytes),
            maxChangesPerPush: read("maxChangesPerPush", defaults.maxChangesPerPush),
            maxTextLength: read("maxTextLength", defaults.maxTextLength), maxTags: read("maxTags", defaults.maxTags),
            maxTagLength: read("maxTagLength", defaults.maxTagLength))
    }

    /// The `limits` object of `welcome`.
    public var json: JSONValue {
        .object([
            "maxMessageBytes": .int(Int64(maxMessageBytes)),
            "maxChangesPerPush": .int(Int64(maxChangesPerPush)),
            "maxTextLength": .int(Int64(maxTextLength)),
            "maxTags": .int(Int64(maxTags)),
            "maxTagLength": .int(Int64(maxTagLength)),
        ])
    }
}
