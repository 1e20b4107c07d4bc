/// The small, accessible sign-in page of `/oauth/authorize`.
enum SignInPage {
    static func render(request: AuthorizationServer.Request, csrf: String, username: String = "", error: String? = nil)
        -> String
    {
        let (hidden, alert, described) = formParts(request, error: error)
        return page(
            title: "Sign in to Noted",
            body: """
                <main>
                  <h1>Sign in to Noted</h1>
                  <p><strong>\(escape(request.client.name))</strong> asks to read and change your notes.</p>
                  \(alert)
                  <form method="post" action="/oauth/authorize">
                    \(hidden)
                    <input type="hidden" name="csrf" value="\(escape(csrf))">
                    <label for="username">Username</label>
                    <input id="username" name="username" type="text" autocomplete="username" autocapitalize="none" spellcheck="false" required value="\(escape(username))"\(described)>
                    <label for="password">Password</label>
                    <input id="password" name="password" type="password" autocomplete="current-password" required\(described)>
                    <button type="submit">Sign in</button>
                  </form>
                  <p class="other">New here? <a href="\(escape(link("/oauth/register", request)))">Create account</a></p>
                </main>
                """)
    }

    /// The second step for an account with two-factor sign-in: a code from the authenticator
    /// app, or a recovery code.
    static func secondFactor(request: AuthorizationServer.Request, csrf: String, step: String, error: String? = nil)
        -> String
    {
        let (hidden, alert, described) = formParts(request, error: error)
        return page(
            title: "Two-factor sign-in",
            body: """
                <main>
                  <h1>Two-factor sign-in</h1>
                  <p>Enter the 6-digit code your authenticator app shows for Noted, or one of your recovery codes.</p>
                  \(alert)
                  <form method="post" action="/oauth/authorize">
                    \(hidden)
                    <input type="hidden" name="csrf" value="\(escape(csrf))">
                    <input type="hidden" name="second_factor" value="\(escape(step))">
                    <label for="otp">Authentication code</label>
                    <input id="otp" name="otp" type="text" autocomplete="one-time-code" autocapitalize="none" spellcheck="false" required maxlength="64" autofocus\(described)>
                    <button type="submit">Verify</button>
                  </form>
                  <p class="other"><a href="\(escape(link("/oauth/authorize", request)))">Sign in as someone else</a></p>
                </main>
                """)
    }

    /// The registration form: the same authorization request, continued signed in as the new
    /// account. With registration switched off, a page saying so instead of the form.
    static func register(
        request: AuthorizationServer.Request, csrf: String, open: Bool, username: String = "", error: String? = nil
    ) -> String {
        let signIn =
            "<p class=\"other\">Have an account? <a href=\"\(escape(link("/oauth/authorize", request)))\">Sign in</a></p>"
        guard open else {
            return page(
                title: "Create a Noted account",
                body: """
                    <main>
                      <h1>Create a Noted account</h1>
                      <p role="alert" class="error">This server does not take new accounts: its operator switched registration off. Ask them for an account.</p>
                      \(signIn)
                    </main>
                    """)
        }
        let (hidden, alert, described) = formParts(request, error: error)
        return page(
            title: "Create a Noted account",
            body: """
                <main>
                  <h1>Create a Noted account</h1>
                  <p>Then <strong>\(escape(request.client.name))</strong> goes on, signed in.</p>
                  \(alert)
                  <form method="post" action="/oauth/register">
                    \(hidden)
                    <input type="hidden" name="csrf" value="\(escape(csrf))">
                    <label for="username">Username</label>
                    <input id="username" name="username" type="text" autocomplete="username" autocapitalize="none" spellcheck="false" required maxlength="64" value="\(escape(username))" aria-describedby="username-rules\(error == nil ? "" : " error")"\(error == nil ? "" : " aria-invalid=\"true\"")>
                    <p class="hint" id="username-rules">Letters, digits, '.', '_', '-' or '@'; up to 64.</p>
                    <label for="password">Password</label>
                    <input id="password" name="password" type="password" autocomplete="new-password" required minlength="8" aria-describedby="password-rules\(error == nil ? "" : " error")"\(error == nil ? "" : " aria-invalid=\"true\"")>
                    <p class="hint" id="password-rules">At least 8 characters; not a common password.</p>
                    <label for="confirm">Confirm password</label>
                    <input id="confirm" name="confirm" type="password" autocomplete="new-password" required minlength="8"\(described)>
                    <button type="submit">Create account</button>
                  </form>
                  \(signIn)
                </main>
                """)
    }

    /// A form's hidden authorization parameters, its alert, and the attributes tying an input
    /// to that alert.
    private static func formParts(_ request: AuthorizationServer.Request, error: String?) -> (
        hidden: String, alert: String, described: String
    ) {
        let hidden = request.hiddenFields.map {
            "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">"
        }
        .joined(separator: "\n      ")
        let alert = error.map { "<p class=\"error\" role=\"alert\" id=\"error\">\(escape($0))</p>" } ?? ""
        let described = error == nil ? "" : " aria-describedby=\"error\" aria-invalid=\"true\""
        return (hidden, alert, described)
    }

    /// `path` with the authorization request's parameters.
    private static func link(_ path: String, _ request: AuthorizationServer.Request) -> String {
        AuthorizationServer.appending(request.hiddenFields, to: path)
    }

    static func error(_ message: String) -> String {
        page(
            title: "Cannot sign in",
            body: """
                <main>
                  <h1>Cannot sign in</h1>
                  <p role="alert">\(escape(message))</p>
                </main>
                """)
    }

    private static func page(title: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title>
        <style>
        body { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Ubuntu, sans-serif; background: #fbfaf7; color: #222; display: grid; place-items: center; min-height: 100vh; margin: 0; }
        main { max-width: 22rem; width: 100%; padding: 2rem; }
        form { display: grid; gap: .5rem; }
        input, button { font: inherit; padding: .6em; border-radius: 8px; border: 1px solid #bbb; }
        button { background: #f5c542; border-color: #c98a00; font-weight: 600; margin-top: .5rem; cursor: pointer; }
        .error { color: #b3261e; }
        .hint { margin: 0; font-size: .85em; color: #555; }
        .other { margin-top: 1.5rem; }
        a { color: #6b4700; }
        :focus-visible { outline: 2px solid #8a5d00; outline-offset: 1px; }
        </style>
        </head>
        <body>
        \(body)
        </body>
        </html>
        """
    }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
