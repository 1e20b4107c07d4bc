import Foundation
import NotedClient
import NotedCore
import Testing

/// Several users' devices in one shared space while its membership churns (issue 42), against
/// the real server: ann owns the space, bob is invited, removed, leaves and comes back as an
/// editor, cat joins by a viewer link and is removed; devices go offline, edit, and come back
/// in a seeded random order (`NOTED_SPACE_CHURN_SEED`, printed on failure).
///
/// Invariants: every member's devices converge on the space; an edit a device saw acknowledged
/// is never lost; a viewer's edit is never applied; an edit kept refused on a removed member's
/// device is never sent; a device never receives a note created in the space while its user
/// was out of it.
@Suite(.serialized) struct SpaceChurnTests {
    /// SplitMix64: the seed alone decides every step.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
    }

    struct Device {
        let name: String
        let user: String
        let client: NotedClient
        var online = false
    }

    /// The markers (lines `m…`) in a body.
    static func markers(_ body: String) -> Set<String> {
        Set(body.split(separator: "\n").map(String.init).filter { $0.hasPrefix("m") })
    }

    @Test func membersConvergeThroughMembershipChurn() async throws {
        let seed =
            ProcessInfo.processInfo.environment["NOTED_SPACE_CHURN_SEED"].flatMap(UInt64.init)
            ?? UInt64.random(in: 1...1_000_000)
        let steps = ProcessInfo.processInfo.environment["NOTED_SPACE_CHURN_STEPS"].flatMap(Int.init) ?? 60
        try await LiveServer.with { server in
            var random = Random(state: seed)
            let users = ["ann", "bob", "cat"]
            var credentials: [String: Credentials] = [:]
            for name in users { credentials[name] = try await server.makeUser(name) }
            var devices: [Device] = []
            for (name, user) in [("ann1", "ann"), ("ann2", "ann"), ("bob1", "bob"), ("bob2", "bob"), ("cat1", "cat")] {
                devices.append(Device(name: name, user: user, client: try server.client(credentials[user]!)))
            }
            let ann = devices[0].client
            let space = try await ann.createSpace(name: "Shared").id
            var members: [String: SpaceRole] = ["ann": .owner]
            /// Notes created in the space while each user was out of it, by user.
            var createdWhileOut: [String: Set<String>] = [:]
            var acknowledged: Set<String> = []
            var byViewer: Set<String> = []
            var log: [String] = []
            func fail(_ what: String) -> Comment {
                let recent = log.suffix(30).joined(separator: "\n")
                return Comment(rawValue: "seed \(seed) (NOTED_SPACE_CHURN_SEED=\(seed)): \(what)\n\(recent)")
            }

            func sync(_ index: Int) async throws {
                let device = devices[index]
                await device.client.stopSync()
                await device.client.startSync()
                devices[index].online = true
                let synced = await device.client.waitUntilSynced(timeout: .seconds(30))
                #expect(synced, fail("\(device.name) did not sync"))
                let notes = try await device.client.list(NoteFilter(space: .shared(space)))
                for note in notes where !note.pending && note.refusal == nil {
                    acknowledged.formUnion(Self.markers(note.body))
                }
                if members[device.user] == nil {
                    let unexpected = Set(notes.map(\.id)).intersection(createdWhileOut[device.user] ?? [])
                    #expect(unexpected.isEmpty, fail("\(device.name) received \(unexpected) while out of the space"))
                    #expect(
                        notes.allSatisfy { $0.refusal != nil },
                        fail("\(device.name) holds synced notes of a space left"))
                }
            }

            for step in 0..<steps {
                let index = random.below(devices.count)
                let device = devices[index]
                switch random.below(10) {
                case 0, 1:
                    // Membership: bob in or out; cat in by a viewer link, or out.
                    if random.below(2) == 0 {
                        if members["bob"] == nil {
                            try await ann.invite(username: "bob", role: .editor, to: space)
                            _ = try await devices[2].client.answerInvitation(to: space, accept: true)
                            members["bob"] = .editor
                            createdWhileOut["bob"] = nil
                            log.append("\(step): bob joins")
                        } else if random.below(2) == 0 {
                            try await ann.removeMember(credentials["bob"]!.userID, from: space)
                            members["bob"] = nil
                            log.append("\(step): ann removes bob")
                        } else {
                            try await devices[3].client.leaveSpace(space)
                            members["bob"] = nil
                            log.append("\(step): bob leaves")
                        }
                    } else if members["cat"] == nil {
                        let link = try await ann.createLink(in: space, role: .viewer)
                        _ = try await devices[4].client.join(link: try #require(link.url ?? link.secret))
                        members["cat"] = .viewer
                        createdWhileOut["cat"] = nil
                        log.append("\(step): cat joins by link")
                    } else {
                        try await ann.removeMember(credentials["cat"]!.userID, from: space)
                        members["cat"] = nil
                        log.append("\(step): ann removes cat")
                    }
                case 2, 3, 4:
                    try await sync(index)
                    log.append("\(step): \(device.name) syncs")
                case 5:
                    await device.client.stopSync()
                    devices[index].online = false
                    log.append("\(step): \(device.name) offline")
                default:
                    // An edit on the device, to a note of the space it holds, or a new note.
                    let marker = "m\(step)-\(device.name)"
                    let notes = try await device.client.list(NoteFilter(space: .shared(space)))
                    let role = try await device.client.store.spaces().first { $0.id == space }?.role
                    if !notes.isEmpty && random.below(4) != 0 {
                        let note = notes[random.below(notes.count)]
                        // A `spaces` message may take the note away meanwhile.
                        guard (try? await device.client.update(note.id) { $0.body += marker + "\n" }) != nil else {
                            log.append("\(step): \(device.name) no longer holds \(note.id.prefix(8))")
                            continue
                        }
                        log.append("\(step): \(device.name) edits \(note.id.prefix(8)) +\(marker)")
                    } else if let role, role != .viewer {
                        // A `spaces` message may take the space (or the role) away meanwhile.
                        guard
                            let note = try? await device.client.create(
                                NoteFields(title: "n\(step)", body: marker + "\n"), space: space)
                        else {
                            log.append("\(step): \(device.name) may no longer write in the space")
                            continue
                        }
                        for user in users where members[user] == nil && user != device.user {
                            createdWhileOut[user, default: []].insert(note.id)
                        }
                        log.append("\(step): \(device.name) creates \(note.id.prefix(8)) +\(marker)")
                    } else {
                        continue
                    }
                    if device.user == "cat" { byViewer.insert(marker) }
                }
            }

            // The end: bob and cat are out or in as the churn left them; every device syncs
            // twice round (so that what one sent reaches the others).
            log.append("end: members \(members.keys.sorted())")
            for _ in 0..<2 {
                for index in devices.indices { try await sync(index) }
            }
            let truth = try await ann.list(NoteFilter(space: .shared(space)))
            let truthBodies = Dictionary(uniqueKeysWithValues: truth.map { ($0.id, $0.body) })
            let onServer = truth.reduce(into: Set<String>()) { $0.formUnion(Self.markers($1.body)) }
            #expect(truth.allSatisfy { !$0.pending && $0.refusal == nil }, fail("ann's device is not synced"))
            for device in devices {
                let notes = try await device.client.list(NoteFilter(space: .shared(space)))
                if members[device.user] != nil {
                    // The same notes; the same text but where this device keeps a refused edit.
                    #expect(Set(notes.map(\.id)) == Set(truthBodies.keys), fail("\(device.name) lacks notes"))
                    let bodies = Dictionary(
                        uniqueKeysWithValues: notes.filter { $0.refusal == nil }.map { ($0.id, $0.body) })
                    #expect(
                        bodies == truthBodies.filter { bodies[$0.key] != nil },
                        fail("\(device.name) differs from the server"))
                }
                // What a device keeps refused was never sent.
                for note in notes where note.refusal != nil {
                    let unsent = Self.markers(note.body).subtracting(acknowledged).subtracting(
                        Self.markers(truthBodies[note.id] ?? ""))
                    #expect(unsent.isDisjoint(with: onServer), fail("\(device.name) sent a refused edit"))
                }
            }
            #expect(acknowledged.isSubset(of: onServer), fail("lost: \(acknowledged.subtracting(onServer))"))
            #expect(byViewer.isDisjoint(with: onServer), fail("a viewer's edit: \(byViewer.intersection(onServer))"))
            for device in devices { await device.client.stopSync() }
        }
    }
}
