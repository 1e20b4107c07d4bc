/// Where the sync engine is.
public enum SyncStatus: Sendable, Hashable {
    /// Not started, or stopped.
    case stopped
    /// Opening a connection or authenticating.
    case connecting
    /// Connected: pulling or pushing.
    case syncing
    /// Connected, caught up, nothing waiting to be sent.
    case synced
    /// The connection was lost; the next attempt is after `retryIn`.
    case offline(retryIn: Duration)
}
