import Foundation
import NotedCore

/// Why the server refuses to start, in one line (`noted-server` prints it and exits 2).
public struct StartupRefusal: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension SchemaRegistry {
    /// The built-in `notes` collection and every `*.json` schema document in `directory`
    /// (docs/collections.md), in file name order.
    public static func load(directory: String?) throws(StartupRefusal) -> SchemaRegistry {
        guard let directory else { return .v1 }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }
                .sorted()
        } catch {
            throw StartupRefusal(
                "--collections \(directory): cannot read the directory (\(error.localizedDescription))")
        }
        var schemas = [CollectionSchema.notes]
        var files = ["notes": "built in"]
        for name in names {
            let path = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw StartupRefusal("\(path): cannot read the file")
            }
            let schema: CollectionSchema
            do {
                schema = try CollectionSchema(json: try JSONValue.parse(Array(data)))
            } catch let error as SchemaError {
                throw StartupRefusal("\(path): \(error.message)")
            } catch {
                throw StartupRefusal("\(path): not valid JSON (\(error))")
            }
            if let other = files[schema.name] {
                throw StartupRefusal("\(path): collection \"\(schema.name)\" is already defined (\(other))")
            }
            files[schema.name] = path
            schemas.append(schema)
        }
        return SchemaRegistry(schemas)
    }

    /// The schema documents as stored and served, by name.
    var documents: [String: String] { schemas.mapValues(\.json.jsonString) }

    /// Records these schemas as the served ones, unless serving them would break stored records:
    /// a field removed or changed in kind, a scalar type taken away, a collection that holds
    /// records no longer served. Then nothing changes and the refusal names every problem.
    func serve(on store: any RecordStore) async throws {
        let served = self
        try await store.serveCollections(documents) { stored, holding in
            var problems: [String] = []
            for (name, document) in stored.sorted(by: { $0.key < $1.key }) {
                guard let new = served[name] else {
                    if holding.contains(name) {
                        problems.append("collection \(name) holds records but is no longer served")
                    }
                    continue
                }
                // A document this version cannot read was written by a newer one: nothing to compare.
                guard let old = try? CollectionSchema(json: JSONValue.parse(document)) else { continue }
                problems += old.breakingChanges(to: new)
            }
            for name in holding.sorted() where stored[name] == nil && served[name] == nil {
                problems.append("collection \(name) holds records but is not served")
            }
            if !problems.isEmpty {
                throw StartupRefusal("the collections would break stored records: " + problems.joined(separator: "; "))
            }
        }
    }
}
