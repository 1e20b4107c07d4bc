import Foundation
import NotedCore

@testable import NotedClient
@testable import NotedServer

extension World {
    /// One step of a run's plan; its description goes to the trace. Every random choice the
    /// step makes comes from its own seed, so that a plan with steps left out (shrinking) runs
    /// the remaining steps the same way.
    func step(_ step: SimStep) async throws {
        random = SimRandom(state: step.seed)
        let client = clients[step.client % clients.count]
        let roll = step.roll
        // The edges (accounts, sign-outs, refusals, discards) from a generator of their own too.
        var edgePick = SimRandom(state: step.seed ^ 0x6564_6765_7300_0000)
        if journaling && edgePick.chance(4) {
            try await edge(client)
            return
        }
        // The history service as a concurrent actor, from a generator of its own too: the
        // server's clock jumps on by minutes to days and the histories due are thinned, before
        // the step's own action (so that the other steps run as they did without it).
        var historyPick = SimRandom(state: step.seed ^ 0x6869_7374_6F72_7900)
        if journaling && historyPick.chance(4) {
            try await historyStep(&historyPick)
            // With NOTED_SIM_HISTORY_SYNC=1 the jump takes the step's place; by default it comes
            // before it and nothing is delivered during it (the other steps run as without history).
            if World.historySync { return }
        }
        switch roll {
        case 0..<30:
            // Drawn from a generator of its own, so that runs without the journal draw as before.
            var pick = SimRandom(state: step.seed ^ 0x6A6F_7572_6E61_6C00)
            if journaling && pick.chance(30) {
                try await journalEdit(client)
            } else {
                try await localEdit(client)
            }
        case 30..<62:
            try await deliver(client)
        case 62..<66:
            trace.append("drop connection \(client.name)")
            try await dropConnection(client)
        case 66..<70:
            trace.append("drop next ack \(client.name)")
            client.link?.dropNextAck = true
        case 70..<73:
            // A resend: the last push this client sent goes up again.
            if let link = client.link, let push = link.up.last(where: { $0["type"] == "push" }) {
                trace.append("duplicate push \(client.name)")
                link.up.append(push)
            }
        case 73..<77:
            // A delayed broadcast: one connection keeps its pending downstream messages (in order, as
            // on one WebSocket) while other clients go ahead; time moves on.
            if client.link?.down.isEmpty == false {
                trace.append("delay broadcast \(client.name)")
                let other = clients[random.below(clients.count)]
                if other !== client { try await deliver(other) }
            }
        case 77..<81:
            client.online.toggle()
            trace.append("\(client.online ? "online" : "offline") \(client.name)")
            if !client.online { try await dropConnection(client) }
        case 81..<83:
            trace.append("crash client \(client.name)")
            try await crash(client)
        case 83..<84:
            trace.append("crash server")
            try await crashServer()
        case 84..<86:
            trace.append("token expiry \(client.name)")
            // The session's token runs out: the server sends token_expired and closes (what its
            // wall-clock timer does), and the token the client holds is expired too, so its next
            // hello is refused by the real verification and it must refresh.
            client.expiredToken = true
            if let link = client.link, !link.closedByServer {
                link.down.append(["type": "error", "code": "token_expired", "message": "the access token expired"])
                link.down.append(["type": "sim-close"])
                link.closedByServer = true
            }
        default:
            trace.append("tick +\(roll - 85)00ms")
            try await advance(by: .milliseconds(100 * (roll - 85)))
        }
    }

    /// Whether history steps deliver what connected clients queued and take the step's place
    /// (`NOTED_SIM_HISTORY_SYNC=1`; it found the bugs of docs/reliability.md "History"). Off by
    /// default: with it on, the repeatability check (seed 42 run twice) once gave two traces in
    /// a loaded CI run, not reproduced here; until that is understood the default form only
    /// adds the jump before the step's own action.
    static let historySync = ProcessInfo.processInfo.environment["NOTED_SIM_HISTORY_SYNC"] == "1"

    /// Minutes to days pass on the server's clock, and the history service thins what is due;
    /// then every promise of the history policy is checked (``checkHistory()``).
    func historyStep(_ pick: inout SimRandom) async throws {
        let minutes = [5, 11, 45, 90, 6 * 60, 26 * 60, 3 * 24 * 60][pick.below(7)]
        if World.historySync {
            // Minutes pass: what the connected clients had queued is delivered meanwhile.
            for _ in 0..<20 {
                var moved = false
                for client in clients where client.link.map({ !$0.up.isEmpty || !$0.down.isEmpty }) ?? false {
                    try await deliver(client)
                    moved = true
                }
                if !moved { break }
            }
        }
        serverAhead.withLockedValue { $0 += TimeInterval(minutes * 60) }
        let thinned = try await store.thinHistory(
            now: serverClock(), policy: World.configuration.history, limit: 100_000)
        trace.append("history +\(minutes)min: \(thinned.records) records, \(thinned.deleted) revisions thinned")
        SimStats.thinnedRevisions.withLockedValue { $0 += thinned.deleted }
        try await checkHistory()
    }

    func advance(by duration: Duration) async throws {
        time.now = now.advanced(by: duration)
        if !serverUp {
            serverUp = true
        }
        // Each client's timers whose deadline came go off, one client at a time; a timer the
        // engine sets meanwhile for a deadline already come goes off in the same move.
        for client in clients {
            var rounds = 0
            while client.clock.wake() > 0 {
                try await settle(client)
                rounds += 1
                if rounds == 1_000 {
                    throw SimFailure(
                        description:
                            "\(client.name)'s timers keep going off without time moving: \(await client.engine.workDescription)"
                    )
                }
            }
        }
    }

    /// Delivers the next message of one link, upstream or downstream.
    func deliver(_ client: SimClient) async throws {
        guard let link = client.link else { return }
        if !link.up.isEmpty, link.down.isEmpty || random.chance(50) {
            let message = link.up.removeFirst()
            trace.append("deliver up \(client.name) \(World.summary(message))")
            try await serve(message, on: link)
        } else if !link.down.isEmpty {
            let message = link.down.removeFirst()
            trace.append("deliver down \(client.name) \(World.summary(message))")
            if message["type"] == "sim-close" {
                try await dropConnection(client)
                return
            }
            try await deliverDown(message, to: client, on: link)
            if message["type"] == "error" {
                if message["code"] == "token_expired" { try await dropConnection(client) }
                return
            }
            try await checkMonotonic(client)
        }
    }

    /// A message in a trace line: its type and, per record it names, the id, revisions and
    /// what it does, so that `NOTED_SIM_FOCUS=<id>` picks out a record's whole story.
    static func summary(_ message: JSONValue) -> String {
        let type = message["type"]?.stringValue ?? "?"
        func ops(_ fields: JSONValue?) -> String {
            guard let object = fields?.objectValue else { return "" }
            return object.keys.sorted().map { "\($0)=\(object[$0]!.jsonString)" }.joined(separator: " ")
        }
        switch type {
        case "push":
            let changes = (message["changes"]?.arrayValue ?? []).map { change in
                "[\(change["id"]?.stringValue ?? "?") base \(change["baseRev"]?.intValue ?? -1) \(change["op"]?.stringValue ?? "") \(ops(change["fields"]))]"
            }
            return "push " + changes.joined(separator: " ")
        case "ack":
            let conflicts = message["conflicts"].map { " conflicts \($0.jsonString)" } ?? ""
            return
                "ack \(message["id"]?.stringValue ?? "?") rev \(message["rev"]?.intValue ?? -1) \(message["status"]?.stringValue ?? "")\(conflicts) \(ops(message["fields"]))"
        case "reject":
            return "reject \(message["id"]?.stringValue ?? "?") \(message["code"]?.stringValue ?? "")"
        case "change":
            return
                "change \(message["id"]?.stringValue ?? "?") rev \(message["prevRev"]?.intValue ?? -1)->\(message["rev"]?.intValue ?? -1) \(message["op"]?.stringValue ?? "") \(ops(message["fields"]))"
        case "changes":
            let records = (message["records"]?.arrayValue ?? []).map { record in
                "[\(record["id"]?.stringValue ?? "?") rev \(record["rev"]?.intValue ?? -1)\(record["deleted"]?.boolValue == true ? " deleted" : "") \(ops(record["fields"]))]"
            }
            return "changes \(records.joined(separator: " "))"
        case "error":
            return "error \(message["code"]?.stringValue ?? "?")"
        default:
            return type
        }
    }

    /// A client process dies: the engine, its state machine and its connection are gone; the
    /// database stays. (Stopping the old engine only cancels its tasks and closes the
    /// connection, as the process's death would; it writes nothing.)
    func crash(_ client: SimClient) async throws {
        await client.engine.stop()
        client.currentLink = nil
        client.store = try LocalStore.open(path: client.databasePath, collections: [World.clientJournal])
        client.clock = SimClock(time: time)
        client.delivered = 0
        client.drops = 0
        client.engine = SimClient.engine(
            store: client.store, clock: client.clock, world: self, index: client.index, seed: random.next())
        if !client.signedOut { await client.engine.start() }
        try await settle(client)
    }

    /// The server process dies: every session and in-flight message is lost; the SQLite file is reopened.
    func crashServer() async throws {
        // Down first: an engine that reconnects while the others' connections are dropped (a
        // token refresh finishing does so at once) must not open a session on the server that
        // is about to close its database: such a session would outlive the crash and be served
        // by the closed store (the likely cause of seed 6562's one failure in a 10,000-run,
        // "SQLite error 21: Connection is closed", which did not come back in reruns).
        serverUp = false
        for client in clients {
            if let link = client.link, link.connection.closeNow() { client.drops += 1 }
            try await settle(client)
        }
        await store.shutdown()
        (store, sync, tokens) = try await World.openServer(path: serverPath, clock: serverClock)
        serverUp = false
    }

    // MARK: Local edits with markers

    func marker() -> String {
        defer { nextMarker += 1 }
        return "[\(nextMarker)]"
    }

    func localEdit(_ client: SimClient) async throws {
        // By id, not by the list's order (last edited first): edit times are the wall clock's, and
        // a pick that depended on them would make a seed's run differ from one run to the next.
        let notes = try await (client.store.list() + client.store.list(NoteFilter(trashed: true))).sorted {
            $0.id < $1.id
        }
        let kind = notes.isEmpty ? 0 : random.below(10)
        var target = notes.isEmpty ? "" : ""
        func record(_ text: String) {
            for match in text.matches(of: /\[(\d+)\]/) {
                inserted[client.user, default: []].insert(Int(match.1)!)
                markerRecord[Int(match.1)!] = target
            }
        }
        switch kind {
        case 0:
            let title = marker()
            let body = marker()
            target = random.uuid()
            record(title + body)
            let note = try await client.store.create(NoteFields(title: title, body: body), id: target)
            trace.append("create \(client.name) \(note.id) \(title) \(body)")
        default:
            let note = notes[random.below(notes.count)]
            let id = note.id
            target = id
            switch kind {
            case 1, 2, 3:
                let text = marker()
                record(text)
                let inTitle = random.chance(30)
                let at = random.below(100)
                trace.append("insert \(client.name) \(id) \(inTitle ? "title" : "body") \(text)")
                try await client.store.update(id) { fields in
                    var words = (inTitle ? fields.title : fields.body).split(separator: " ").map(String.init)
                    words.insert(text, at: at % (words.count + 1))
                    if inTitle {
                        fields.title = words.joined(separator: " ")
                    } else {
                        fields.body = words.joined(separator: " ")
                    }
                }
            case 4, 5:
                let inTitle = random.chance(30)
                let words = (inTitle ? note.title : note.body).split(separator: " ").map(String.init)
                guard !words.isEmpty else { return }
                let replacement = random.chance(50) ? marker() : nil
                if let replacement { record(replacement) }
                let victim = words[random.below(words.count)]
                for match in victim.matches(of: /\[(\d+)\]/) { removed.insert(Int(match.1)!) }
                trace.append(
                    "\(replacement == nil ? "delete" : "replace") \(client.name) \(id) \(victim)\(replacement.map { " -> \($0)" } ?? "")"
                )
                try await client.store.update(id) { fields in
                    var words = (inTitle ? fields.title : fields.body).split(separator: " ").map(String.init)
                    if let index = words.firstIndex(of: victim) {
                        if let replacement { words[index] = replacement } else { words.remove(at: index) }
                    }
                    if inTitle {
                        fields.title = words.joined(separator: " ")
                    } else {
                        fields.body = words.joined(separator: " ")
                    }
                }
            case 6:
                let tag = "t\(random.below(4))"
                trace.append("tag \(client.name) \(id) \(tag)")
                try await client.store.update(id) { fields in
                    if let index = fields.tags.firstIndex(of: tag) {
                        fields.tags.remove(at: index)
                    } else {
                        fields.tags.append(tag)
                    }
                }
            case 7:
                trace.append("pin \(client.name) \(id)")
                try await client.store.update(id) { $0.pinned.toggle() }
            case 8:
                trace.append("\(note.trashed ? "restore" : "trash") \(client.name) \(id)")
                try await client.store.update(id) { $0.trashed.toggle() }
            default:
                guard random.chance(30) else { return }
                trace.append("purge \(client.name) \(id)")
                purged.insert(id)
                try await client.store.purge(id)
            }
        }
        try await localEditSignal(client)
    }

    /// An edit to a record of the second collection: text with markers, a set, scalars, purges.
    func journalEdit(_ client: SimClient) async throws {
        let entries = try await client.store.records("journal").sorted { $0.id < $1.id }
        let kind = entries.isEmpty ? 0 : random.below(8)
        let entry = entries.isEmpty ? nil : entries[random.below(entries.count)]
        let id = kind == 0 ? random.uuid() : entry!.id
        func record(_ text: String) {
            for match in text.matches(of: /\[(\d+)\]/) {
                inserted[client.user, default: []].insert(Int(match.1)!)
                markerRecord[Int(match.1)!] = id
            }
        }
        func edit(_ change: @escaping @Sendable (inout [String: JSONValue]) -> Void) async throws {
            _ = try await client.store.transaction { try $0.update("journal", id: id, change) }
        }
        switch kind {
        case 0:
            let text = marker() + " " + marker()
            record(text)
            let mood = ["low", "ok", "high"][random.below(3)]
            trace.append("journal create \(client.name) \(id) \(text) \(mood)")
            _ = try await client.store.transaction {
                try $0.create("journal", fields: ["entry": .string(text), "mood": .string(mood)], id: id)
            }
        case 1, 2:
            let text = marker()
            record(text)
            let at = random.below(100)
            trace.append("journal insert \(client.name) \(id) \(text)")
            try await edit { fields in
                var words = (fields["entry"]?.stringValue ?? "").split(separator: " ").map(String.init)
                words.insert(text, at: at % (words.count + 1))
                fields["entry"] = .string(words.joined(separator: " "))
            }
        case 3:
            let words = (entry?.fields["entry"]?.stringValue ?? "").split(separator: " ").map(String.init)
            guard !words.isEmpty else { return }
            let victim = words[random.below(words.count)]
            for match in victim.matches(of: /\[(\d+)\]/) { removed.insert(Int(match.1)!) }
            trace.append("journal delete \(client.name) \(id) \(victim)")
            try await edit { fields in
                var words = (fields["entry"]?.stringValue ?? "").split(separator: " ").map(String.init)
                if let index = words.firstIndex(of: victim) { words.remove(at: index) }
                fields["entry"] = .string(words.joined(separator: " "))
            }
        case 4:
            let label = "l\(random.below(3))"
            trace.append("journal label \(client.name) \(id) \(label)")
            try await edit { fields in
                var labels = fields["labels"]?.arrayValue?.compactMap(\.stringValue) ?? []
                if let index = labels.firstIndex(of: label) { labels.remove(at: index) } else { labels.append(label) }
                fields["labels"] = .array(labels.map(JSONValue.string))
            }
        case 5:
            let mood = ["low", "ok", "high"][random.below(3)]
            trace.append("journal mood \(client.name) \(id) \(mood)")
            try await edit { $0["mood"] = .string(mood) }
        case 6:
            let score: JSONValue = random.chance(25) ? .null : .int(Int64(random.below(101)))
            trace.append("journal score \(client.name) \(id) \(score.jsonString)")
            try await edit { $0["score"] = score }
        default:
            guard random.chance(30) else { return }
            trace.append("journal purge \(client.name) \(id)")
            purged.insert(id)
            _ = try await client.store.transaction { try $0.purge("journal", id: id) }
        }
        try await localEditSignal(client)
    }

    // MARK: Checks

    /// Records' rev and the client's cursor never go backwards.
    func checkMonotonic(_ client: SimClient) async throws {
        let cursor = try await client.store.cursor()
        guard cursor >= client.lastCursor else {
            throw SimFailure(description: "\(client.name): cursor went back from \(client.lastCursor) to \(cursor)")
        }
        client.lastCursor = cursor
        let notes = try await (client.store.list() + client.store.list(NoteFilter(trashed: true))).map {
            ($0.id, $0.rev)
        }
        let entries = try await client.store.records("journal").map { ($0.id, $0.rev) }
        for (id, rev) in notes + entries {
            if let last = client.lastRev[id], rev < last {
                throw SimFailure(description: "\(client.name): \(id) went back from rev \(last) to \(rev)")
            }
            client.lastRev[id] = rev
        }
    }
}
