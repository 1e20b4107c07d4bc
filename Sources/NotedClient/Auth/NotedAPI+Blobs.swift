import Foundation
import NotedCore

/// Attachments' files over HTTP (docs/protocol.md, "Attachments").
extension NotedAPI {
    /// Puts the file on the server unless it is there: `HEAD` first; an upload the server holds
    /// part of continues with `PATCH` from its `Upload-Offset`; otherwise one `PUT`.
    public func uploadBlob(sha256: String, data: Data, type: String, token: String) async throws {
        let path = "/v1/blobs/\(sha256)"
        let auth = ["Authorization": "Bearer \(token)"]
        let head = try await transfers.send(HTTPRequestData(method: "HEAD", url: try url(path), headers: auth))
        if head.status == 200 { return }
        if head.status != 404 { _ = try Self.checked(head) }
        let offset = head.headers["upload-offset"].flatMap(Int.init) ?? 0
        let length = head.headers["upload-length"].flatMap(Int.init)
        let response: HTTPResponseData
        if offset > 0, offset < data.count, length == data.count {
            var headers = auth
            headers["Content-Type"] = "application/offset+octet-stream"
            headers["Upload-Offset"] = String(offset)
            headers["Upload-Length"] = String(data.count)
            headers["Noted-Blob-Type"] = type
            response = try await transfers.send(
                HTTPRequestData(
                    method: "PATCH", url: try url(path), headers: headers, body: data.subdata(in: offset..<data.count)))
        } else {
            var headers = auth
            headers["Content-Type"] = type
            response = try await transfers.send(
                HTTPRequestData(method: "PUT", url: try url(path), headers: headers, body: data))
        }
        if [400, 413].contains(response.status) {
            let value = (try? JSONValue.parse(response.body)) ?? .null
            let code = value["error"]?.stringValue ?? "http_\(response.status)"
            if ["too_large", "quota_exceeded", "hash_mismatch"].contains(code) {
                throw BlobRefused(code: code, message: value["message"]?.stringValue ?? "the server refused the file")
            }
        }
        _ = try Self.checked(response)
    }

    /// The file `sha256` and its type; nil when the server has no such file of this user.
    public func downloadBlob(sha256: String, token: String) async throws -> (data: Data, type: String)? {
        let response = try await transfers.send(
            HTTPRequestData(
                method: "GET", url: try url("/v1/blobs/\(sha256)"), headers: ["Authorization": "Bearer \(token)"]))
        if response.status == 404 { return nil }
        _ = try Self.checked(response)
        let type =
            response.headers["content-type"].map { $0.split(separator: ";")[0].trimmingCharacters(in: .whitespaces) }
            ?? "application/octet-stream"
        return (response.body, type)
    }

    /// `GET /v1/blobs`: the largest file the server takes, and the account's stored bytes and quota.
    public func blobLimits(token: String) async throws -> (
        maxBlobBytes: Int64?, storedBytes: Int64?, quotaBytes: Int64?
    ) {
        let value = try await Self.checked(
            try await http.send(
                HTTPRequestData(method: "GET", url: try url("/v1/blobs"), headers: ["Authorization": "Bearer \(token)"])
            ))
        return (value["maxBlobBytes"]?.intValue, value["storedBytes"]?.intValue, value["quotaBytes"]?.intValue)
    }
}

/// The server will not take a file as it is: larger than it takes (`too_large`), beyond the
/// account's quota (`quota_exceeded`), or not the bytes its name says (`hash_mismatch`).
/// Sending it again cannot help.
public struct BlobRefused: Error, Sendable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var description: String { "\(message) (\(code))" }
}
