import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Serves the web app (the repository's `Web/` folder) at `/`, with a content security policy
/// and revalidation on every load (the service worker keeps the offline copy).
enum WebApp {
    /// The policy of the app's pages: everything from this origin only, WebSockets included;
    /// images also from `blob:` (object URLs the app makes of attachments it fetched with its
    /// token: the token never goes into an image URL).
    static let policy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        + "connect-src 'self'; worker-src 'self'; manifest-src 'self'; object-src 'none'; "
        + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    /// The folder to serve: the configured one, else `Web` beside the working directory, else the
    /// repository this server was built from.
    static func root(configured: String?) -> String? {
        if let configured { return configured }
        let candidates = [
            FileManager.default.currentDirectoryPath + "/Web",
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Web").path,
        ]
        return candidates.first { FileManager.default.fileExists(atPath: $0 + "/index.html") }
    }

    static func add(to router: Router<NotedRequestContext>, root: String, logger: Logger) {
        router.add(middleware: HeadersMiddleware())
        router.add(
            middleware: FileMiddleware(root, searchForIndexHtml: true, logger: logger)
                .withAdditionalMediaType(
                    MediaType(type: .application, subType: "manifest+json"), mappedToFileExtension: "webmanifest"))
    }

    /// Adds the policy and caching headers to the app's files (not to the API's answers).
    struct HeadersMiddleware: RouterMiddleware {
        typealias Context = NotedRequestContext

        func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
            async throws -> Response
        {
            var response = try await next(request, context)
            let path = request.uri.path
            let api = ["/v1/", "/oauth/", "/.well-known/", "/metrics", "/health"].contains { path.hasPrefix($0) }
            if !api {
                response.headers[.contentSecurityPolicy] = WebApp.policy
                response.headers[.cacheControl] = "no-cache"
                response.headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
                response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
            }
            return response
        }
    }
}
