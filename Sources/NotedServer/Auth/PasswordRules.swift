import Foundation

/// What a new password must be (registration and password changes alike): 8 to 1024
/// characters, no NUL, and not one of the 10,000 most common passwords (compared without case),
/// which guessers try first and which no sign-in limit holds off for long.
enum PasswordRules {
    /// The common passwords, lower-cased, read once from the `common-passwords.txt` resource:
    /// the first 10,000 lines, most common first, of the list Django ships as
    /// django/contrib/auth/common-passwords.txt.gz (Django 5.2.19, BSD licence; compiled by Royce
    /// Williams from breach corpora), lower-cased. Data, not code: regenerate it from that file
    /// rather than editing it by hand. Read when the server starts (``load()``), so that a
    /// server installed without its resources stops at once, saying so, rather than at the
    /// first registration.
    static let common: Set<Substring> = {
        guard let url = Bundle.module.url(forResource: "common-passwords", withExtension: "txt"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else {
            fatalError(
                "common-passwords.txt is missing from NotedServer's resources (install noted_NotedServer.resources beside noted-server)"
            )
        }
        return Set(text.split(separator: "\n"))
    }()

    /// Reads the list now (at start).
    static func load() {
        precondition(common.count >= 10_000, "common-passwords.txt holds \(common.count) passwords, not 10,000")
    }

    /// Why `password` cannot be a new password; nil when it can.
    static func problem(_ password: String) -> String? {
        guard (8...1024).contains(password.count) else { return "passwords are 8 to 1024 characters" }
        if let problem = PasswordHasher.problem(password) { return problem }
        if common.contains(Substring(password.lowercased())) {
            return "this password is one of the most common ones, which are guessed first; choose another"
        }
        return nil
    }
}
