import NotedCore
import Prometheus

/// The server's Prometheus metrics, one registry per application.
public struct ServerMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()
    let connections: Gauge
    let messagesIn: Counter
    let messagesOut: Counter
    let merges: Counter
    let conflicts: Counter
    let pushToAck: DurationHistogram

    init() {
        connections = registry.makeGauge(name: "noted_sync_connections", help: "Open sync WebSocket connections")
        messagesIn = registry.makeCounter(
            name: "noted_sync_messages_in_total", help: "Messages received on sync connections")
        messagesOut = registry.makeCounter(
            name: "noted_sync_messages_out_total", help: "Messages sent on sync connections")
        merges = registry.makeCounter(name: "noted_merges_total", help: "Changes merged onto a newer revision")
        conflicts = registry.makeCounter(
            name: "noted_conflicts_total", help: "Text fields where part of an edit could not be placed")
        pushToAck = registry.makeDurationHistogram(
            name: "noted_push_to_ack_seconds",
            buckets: [
                .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
                .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(5),
            ],
            help: "Time from receiving a change to its answer")
    }

    /// Counts one answered change by status (`applied`, `merged`, `duplicate`) or reject code.
    func countResult(_ result: ServerMessage) {
        switch result {
        case .reject(let reject):
            registry.makeCounter(
                name: "noted_rejects_total", labels: [("code", reject.code.rawValue)],
                help: "Rejected changes by code"
            ).increment()
        case .ack(let ack):
            registry.makeCounter(
                name: "noted_pushes_total", labels: [("status", ack.status.rawValue)],
                help: "Acknowledged changes by status"
            ).increment()
            if ack.status == .merged {
                merges.increment()
                conflicts.increment(by: Int64(ack.conflicts?.count ?? 0))
            }
        default:
            break
        }
    }
}
