import Foundation
import HTTPTypes
import Hummingbird
import NotedCore

/// Pulls, pushes and reads of records over HTTP (docs/protocol.md, "HTTP"), signed in.
extension Routes {
    func addRecordRoutes(to router: some RouterMethods<NotedRequestContext>) {
        router.get("/v1/changes") { request, context -> Response in
            let user = try context.requireIdentity()
            let query = request.uri.queryParameters
            guard let since = query.get("since").flatMap(Int64.init), since >= 0, since <= ChangeParser.maxSafeInteger
            else {
                throw APIError(.badRequest, "bad_request", "since must be an integer from 0 to 2^53-1")
            }
            var limit = ClientMessage.defaultPullLimit
            if let text = query.get("limit") {
                guard let value = Int(text), (1...ClientMessage.maxPullLimit).contains(value) else {
                    throw APIError(
                        .badRequest, "bad_request", "limit must be an integer from 1 to \(ClientMessage.maxPullLimit)")
                }
                limit = value
            }
            let snapshot = query.get("snapshot") == "true"
            let space = query.get("space")
            if let space, space.isEmpty || space.utf8.count > ClientMessage.maxSpaceIDBytes {
                throw APIError(.notFound, "not_found", "no such space")
            }
            let changes: ChangesPage
            do {
                changes = try await sync.pull(
                    userID: user.userID, since: since, limit: limit, snapshot: snapshot, space: space, rid: nil)
            } catch let error as ProtocolError {
                throw APIError(error)
            }
            var page = ServerMessage.changes(changes).json.objectValue ?? [:]
            page["type"] = nil
            return .json(.object(page))
        }
        // The WebSocket's per-connection push limit, per user over HTTP (no connection to count on).
        let pushLimiter = RateLimiter(limit: configuration.maxPushesPerSecond, window: 1)
        router.post("/v1/push") { request, context -> Response in
            let user = try context.requireIdentity()
            do throws(AuthError) {
                try pushLimiter.check(keys: ["push:\(user.userID)"])
            } catch {
                if case .rateLimited(let retryAfter) = error.kind {
                    var limited = APIError(.tooManyRequests, "rate_limited", "too many pushes; slow down")
                    limited.headers[.retryAfter] = String(retryAfter)
                    throw limited
                }
                throw APIError(error)
            }
            let body = try await jsonBody(request)
            guard let changes = body["changes"]?.arrayValue else {
                throw APIError(.badRequest, "bad_request", "the body needs a \"changes\" array")
            }
            guard changes.count <= configuration.limits.maxChangesPerPush else {
                throw APIError(
                    .contentTooLarge, "too_large",
                    "a push holds at most \(configuration.limits.maxChangesPerPush) changes")
            }
            let device = request.headers[HTTPField.Name("Noted-Device")!].flatMap {
                UUIDText.isCanonical($0) ? $0 : nil
            }
            do {
                let results = try await sync.push(
                    changes: changes, userID: user.userID, device: device, session: nil, rid: nil,
                    logger: context.logger)
                return .json(["results": .array(results.map(\.json))])
            } catch is AccountDeleted {
                throw APIError(.unauthorized, "unauthenticated", SessionHub.accountDeleted)
            }
        }
        router.get("/v1/collections") { request, _ -> Response in
            let schemas = sync.parser.schemas.schemas.values.sorted { $0.name < $1.name }
            return .json(["collections": .array(schemas.map(\.json))])
        }
        router.get("/v1/records/:collection/:id") { request, context -> Response in
            let space = try await readableSpace(request, context)
            let (collection, id) = try recordPath(context)
            guard let record = try await store.record(userID: space, collection: collection, id: id) else {
                throw APIError(.notFound, "not_found", "no such record")
            }
            if record.deleted { throw APIError(.gone, "gone", "the record was purged") }
            return .json(record.json)
        }
        router.get("/v1/records/:collection/:id/revisions") { request, context -> Response in
            let space = try await readableSpace(request, context)
            let (collection, id) = try recordPath(context)
            guard let revisions = try await store.revisions(userID: space, collection: collection, id: id) else {
                throw APIError(.notFound, "not_found", "no such record")
            }
            return .json(["revisions": .array(revisions.map(\.summaryJSON))])
        }
        router.get("/v1/records/:collection/:id/revisions/:rev") { request, context -> Response in
            let space = try await readableSpace(request, context)
            let (collection, id) = try recordPath(context)
            guard let rev = context.parameters.get("rev").flatMap(Int64.init), rev >= 1 else {
                throw APIError(.badRequest, "bad_request", "rev must be a positive integer")
            }
            let conflict = request.uri.queryParameters.get("conflict") == "true"
            guard
                var revision = try await store.revision(
                    userID: space, collection: collection, id: id, rev: rev, conflict: conflict)
            else {
                throw APIError(.notFound, "not_found", "no such revision")
            }
            // Its author, as the list names it (the history's chain reads carry no names).
            let listed = try await store.revisions(userID: space, collection: collection, id: id)?.first {
                $0.rev == rev && $0.conflict == conflict
            }
            revision.author = listed?.author
            revision.authorName = listed?.authorName
            return .json(revision.fullJSON)
        }
    }
}
