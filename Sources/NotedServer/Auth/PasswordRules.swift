import Foundation

/// What a new password must be (registration and password changes alike): 8 to 1024
/// characters, no NUL, and not one of the 10,000 most common passwords (compared without case),
/// which guessers try first and which no sign-in limit holds off for long.
enum PasswordRules {
    /// The common passwords, lower-cased (``commonPasswordsText``, one per line).
    static let common: Set<Substring> = Set(commonPasswordsText.split(separator: "\n"))

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
