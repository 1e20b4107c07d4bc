/// The small, accessible sign-in page of `/oauth/authorize`.
enum SignInPage {
    static func render(request: AuthorizationServer.Request, csrf: String, username: String = "", error: String? = nil) -> String {
        let hidden = request.hiddenFields.map { "<input type=\"hidden\" name=\"\(escape($0.0))\" value=\"\(escape($0.1))\">" }
            .joined(separator: "\n      ")
        let alert = error.map { "<p class=\"error\" role=\"alert\" id=\"error\">\(escape($0))</p>" } ?? ""
        let described = error == nil ? "" : " aria-describedby=\"error\" aria-invalid=\"true\""
        return page(title: "Sign in to Noted", body: """
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
            </main>
            """)
    }

    static func error(_ message: String) -> String {
        page(title: "Cannot sign in", body: """
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
