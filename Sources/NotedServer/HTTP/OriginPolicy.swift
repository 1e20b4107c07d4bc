/// Which `Origin`s may open the sync WebSocket.
///
/// Browsers send `http`/`https` origins (or `null`); those must be the server's own origin or a
/// configured one. Native clients send no `Origin`, or a `ws`/`wss` one (some WebSocket libraries
/// add it), and are allowed. Every `Origin` header present must pass.
struct OriginPolicy: Sendable {
    var allowedOrigins: [String]

    func allows(origins: [String], authority: String?) -> Bool {
        origins.allSatisfy { allows(origin: $0, authority: authority) }
    }

    func allows(origin: String, authority: String?) -> Bool {
        let lowered = origin.lowercased()
        if lowered.hasPrefix("ws://") || lowered.hasPrefix("wss://") { return true }
        if allowedOrigins.contains(where: { $0.lowercased() == lowered }) { return true }
        guard let authority = authority?.lowercased() else { return false }
        return lowered == "http://\(authority)" || lowered == "https://\(authority)"
    }
}
