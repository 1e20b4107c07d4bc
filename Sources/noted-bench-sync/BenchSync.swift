// noted-bench-sync: the initial-sync measurement of scripts/bench-load for the NotedClient
// library. Signs in (untimed), then times one full sync into an empty local database and
// prints one JSON line: {"seconds": …, "cpu_seconds": … (the process, every thread), "notes": …}.
// Usage: noted-bench-sync SERVER_URL USERNAME PASSWORD DATABASE_PATH [TIMEOUT_SECONDS]
import Foundation
import NotedClient

@main
struct BenchSync {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count >= 5, let server = URL(string: arguments[1]),
            !FileManager.default.fileExists(atPath: arguments[4])
        else {
            FileHandle.standardError.write(
                Data("usage: noted-bench-sync SERVER_URL USERNAME PASSWORD NEW_DATABASE_PATH [TIMEOUT_SECONDS]\n".utf8))
            exit(2)
        }
        let timeout = arguments.count > 5 ? max(1, Int(arguments[5]) ?? 120) : 120
        do {
            let tokens = try await NotedAPI(server: server).signIn(
                username: arguments[2], password: arguments[3], device: UUID().uuidString.lowercased())
            let userID = Credentials.subject(ofJWT: tokens.accessToken) ?? ""
            let credentials = Credentials(
                server: server.absoluteString, username: arguments[2], userID: userID,
                accessToken: tokens.accessToken, refreshToken: tokens.refreshToken,
                expiresAt: tokens.expiresAt)
            let client = try NotedClient(databasePath: arguments[4], server: server, credentials: credentials)
            let clock = ContinuousClock()
            let cpuBefore = Self.cpuSeconds()
            let start = clock.now
            await client.startSync()
            let synced = await client.waitUntilSynced(timeout: Duration.seconds(timeout), failWhenOffline: true)
            let elapsed = clock.now - start
            let cpu = Self.cpuSeconds() - cpuBefore
            await client.stopSync()
            let notes = try await client.list().count
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print(
                "{\"seconds\": \(seconds), \"cpu_seconds\": \((cpu * 1000).rounded() / 1000), \"notes\": \(notes), \"synced\": \(synced)}"
            )
            exit(synced ? 0 : 1)
        } catch {
            FileHandle.standardError.write(Data("noted-bench-sync: \(error)\n".utf8))
            exit(1)
        }
    }

    /// User and system CPU time of the whole process so far, every thread.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
