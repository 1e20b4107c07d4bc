import Foundation
import Testing

/// The data directory holds the signing keys, password hashes and notes: the real
/// `noted-server` process keeps it to its own user (issue 14).
@Suite(.serialized) struct ServerFileModeTests {
    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func checkPrivate(_ directory: String) throws {
        #expect(try mode(directory) == 0o700, "\(directory)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(
            names.contains("noted.sqlite") && names.contains("noted.sqlite-wal") && names.contains("noted.sqlite-shm"),
            "\(names)")
        for name in names {
            #expect(try mode(directory + "/" + name) == 0o600, "\(name)")
        }
    }

    @Test func aNewDataDirectoryIsPrivate() async throws {
        try await withTemporaryDirectory { dir in
            let server = try await ServerProcess(directory: dir + "/data")
            defer { server.stop() }
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted(
                "register", "--username", "modes", "--password-stdin", stdin: "correct horse battery\n")
            try await home.noted("new", "--title", "secret")
            try checkPrivate(dir + "/data")
        }
    }

    @Test func aDataDirectoryOfAnEarlierVersionIsTightenedAtStart() async throws {
        try await withTemporaryDirectory { dir in
            // What an earlier version left: a 0755 directory and 0644 files.
            var server = try await ServerProcess(directory: dir + "/data")
            let home = Home(path: dir + "/home", server: server.url)
            try await home.noted(
                "register", "--username", "modes", "--password-stdin", stdin: "correct horse battery\n")
            let id = try await home.noted("new", "--title", "kept")
            await server.stopAndWait()
            chmod(dir + "/data", 0o755)
            for name in try FileManager.default.contentsOfDirectory(atPath: dir + "/data") {
                chmod(dir + "/data/" + name, 0o644)
            }

            server = try await ServerProcess(directory: dir + "/data", port: server.port)
            defer { server.stop() }
            try await home.noted("sync")
            try checkPrivate(dir + "/data")
            #expect(try await home.notes()[id]?["title"] == "kept")
        }
    }
}
