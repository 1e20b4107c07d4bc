import Foundation
import Logging

/// The SQLite data directory holds the token-signing private keys, every password hash and
/// every note: only the server's own user may read it (docs/security.md).
enum DataDirectory {
    /// Creates the directory 0700 if it is missing; tightens the directory to 0700 and the
    /// database with its `-wal` and `-shm` files (and anything else in the directory) to 0600,
    /// with a warning naming what was looser, e.g. a directory made by an earlier version.
    /// SQLite creates the `-wal` and `-shm` files with the database file's mode, so files made
    /// later are 0600 too.
    static func secure(directory: String, database: String, logger: Logger) throws {
        let files = FileManager.default
        if !files.fileExists(atPath: directory) {
            do {
                try files.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StoreError.unusable(
                    "cannot create the data directory \(directory): \(error.localizedDescription)")
            }
        }
        tighten(directory, to: 0o700, logger: logger)
        if !files.fileExists(atPath: database) {
            // Made here, so that SQLite opens a 0600 file and makes its -wal and -shm alike.
            _ = files.createFile(atPath: database, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for name in (try? files.contentsOfDirectory(atPath: directory)) ?? [] {
            let path = (directory as NSString).appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            guard files.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            tighten(path, to: isDirectory.boolValue ? 0o700 : 0o600, logger: logger)
        }
    }

    /// Sets `mode` where group or others had any access; says so.
    static func tighten(_ path: String, to mode: Int, logger: Logger) {
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        let current = Int(info.st_mode) & 0o777
        guard current & 0o077 != 0 else { return }
        if chmod(path, mode_t(mode)) == 0 {
            logger.warning(
                "file permissions were looser than the server needs: set",
                metadata: [
                    "path": .string(path), "was": .string(String(current, radix: 8)),
                    "now": .string(String(mode, radix: 8)),
                ])
        } else {
            logger.error(
                "cannot tighten file permissions: other local users may read the server's keys and data",
                metadata: [
                    "path": .string(path), "mode": .string(String(current, radix: 8)),
                    "error": .string(String(cString: strerror(errno))),
                ])
        }
    }
}
