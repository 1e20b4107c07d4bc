import NIOConcurrencyHelpers

/// Places for work of a kind on this node: at most `perUser` of one user and `inAll` in all (an
/// export, a blob read). A place is given back when the last reference to its ``Slot`` goes,
/// whatever happened to the answer that held it (sent, failed, or dropped unsent).
final class UserSlots: Sendable {
    private let state = NIOLockedValueBox<(byUser: [String: Int], count: Int)>(([:], 0))
    let perUser: Int
    let inAll: Int

    init(perUser: Int, inAll: Int = .max) {
        self.perUser = perUser
        self.inAll = inAll
    }

    /// Why no place was given.
    enum Refusal: Error {
        /// The user holds `perUser` places.
        case user
        /// The node holds `inAll`.
        case node
    }

    final class Slot: Sendable {
        let slots: UserSlots
        let userID: String

        init(_ slots: UserSlots, _ userID: String) {
            self.slots = slots
            self.userID = userID
        }

        deinit {
            let userID = userID
            slots.state.withLockedValue { state in
                let left = (state.byUser[userID] ?? 1) - 1
                state.byUser[userID] = left > 0 ? left : nil
                state.count -= 1
            }
        }
    }

    func take(_ userID: String) throws(Refusal) -> Slot {
        let refusal = state.withLockedValue { state -> Refusal? in
            let current = state.byUser[userID, default: 0]
            guard current < perUser else { return .user }
            guard state.count < inAll else { return .node }
            state.byUser[userID] = current + 1
            state.count += 1
            return nil
        }
        if let refusal { throw refusal }
        return Slot(self, userID)
    }
}
