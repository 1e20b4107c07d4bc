// Sign-in through the server's OAuth 2.1 authorization code flow with PKCE (S256) as the
// public client `noted-web`; tokens live in IndexedDB (in the account's own database, see
// accounts.js), never in the URL after the redirect.

const CLIENT_ID = "noted-web";

function base64url(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export async function pkceChallenge(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function randomString(bytes = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

export class Auth extends EventTarget {
  /** `store`: the account's database, where the session is kept (null until it is known). */
  constructor(store = null) {
    super();
    this.store = store;
    this.session = null; // { accessToken, refreshToken, expiresAt, user, issuer }
    this.refreshing = null;
    this.serverSaid = null; // why the server last refused this session (a sync `error` `unauthenticated`)
    this.lost = null; // { said } once the session was lost (the refresh answered invalid_grant)
  }

  get redirectURI() {
    return new URL("./", location.href).href;
  }

  async load() {
    this.session = (this.store && (await this.store.getMeta("session"))) || null;
    return this.session;
  }

  get signedIn() {
    return Boolean(this.session && this.session.refreshToken);
  }

  /** Starts the authorization code flow: a redirect to the server's sign-in page. */
  async signIn() {
    const verifier = randomString(48);
    const state = randomString(16);
    sessionStorage.setItem("noted.pkce", JSON.stringify({ verifier, state }));
    const url = new URL("/oauth/authorize", location.href);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("client_id", CLIENT_ID);
    url.searchParams.set("redirect_uri", this.redirectURI);
    url.searchParams.set("code_challenge", await pkceChallenge(verifier));
    url.searchParams.set("code_challenge_method", "S256");
    url.searchParams.set("state", state);
    location.assign(url.href);
  }

  /** Finishes the flow when the page was opened by the redirect; strips the code from the URL. */
  async completeRedirect() {
    const params = new URLSearchParams(location.search);
    const code = params.get("code");
    const error = params.get("error");
    if (!code && !error) return false;
    history.replaceState(null, "", location.pathname);
    const saved = JSON.parse(sessionStorage.getItem("noted.pkce") || "null");
    sessionStorage.removeItem("noted.pkce");
    if (error) throw new Error(`Sign-in failed: ${params.get("error_description") || error}`);
    if (!saved || saved.state !== params.get("state")) throw new Error("Sign-in failed: the response does not belong to this browser tab.");
    await this.tokenRequest({
      grant_type: "authorization_code",
      code,
      redirect_uri: this.redirectURI,
      client_id: CLIENT_ID,
      code_verifier: saved.verifier,
    });
    return true;
  }

  async tokenRequest(form) {
    const response = await fetch("/oauth/token", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const err = new Error(body.error_description || body.error || `HTTP ${response.status}`);
      err.code = body.error;
      err.status = response.status;
      throw err;
    }
    const claimed = claims(body.access_token);
    const session = {
      accessToken: body.access_token,
      refreshToken: body.refresh_token,
      expiresAt: Date.now() + (Number(body.expires_in) || 900) * 1000,
      user: claimed.sub || null,
      issuer: claimed.iss || location.origin,
    };
    this.session = session;
    this.serverSaid = null; // still signed in, whatever was said before
    if (this.store) await this.store.setMeta("session", session);
    this.dispatchEvent(new Event("change"));
    return session;
  }

  /** A valid access token, refreshed first when it is about to expire (one refresh at a time). */
  async accessToken() {
    if (!this.session) return null;
    if (this.session.accessToken && this.session.expiresAt - Date.now() > 60000) return this.session.accessToken;
    return (await this.refresh())?.accessToken ?? null;
  }

  /** Refreshes when the token has less than two minutes left; returns the new token then. */
  async refreshSoon() {
    if (!this.session || this.session.expiresAt - Date.now() > 120000) return null;
    return (await this.refresh())?.accessToken ?? null;
  }

  refresh() {
    if (!this.session || !this.session.refreshToken) return Promise.resolve(null);
    if (!this.refreshing) {
      this.refreshing = this.tokenRequest({
        grant_type: "refresh_token",
        refresh_token: this.session.refreshToken,
        client_id: CLIENT_ID,
      }).catch(async (error) => {
        if (error.code === "invalid_grant") {
          this.lost = { said: this.serverSaid };
          await this.forget();
        }
        return null;
      }).finally(() => {
        this.refreshing = null;
      });
    }
    return this.refreshing;
  }

  invalidateAccessToken() {
    if (this.session) this.session = { ...this.session, expiresAt: 0 };
  }

  /**
   * The server refused this session, saying why (a sync `error` `unauthenticated`: "the sign-in
   * session was revoked", "the account was deleted"): kept to tell the user, should the refresh
   * that follows fail.
   */
  refusedBecause(message) {
    this.serverSaid = message || null;
    this.invalidateAccessToken();
  }

  async signOut() {
    const token = this.session && this.session.refreshToken;
    if (token) {
      await fetch("/oauth/revoke", {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ token, token_type_hint: "refresh_token", client_id: CLIENT_ID }),
      }).catch(() => {});
    }
    await this.forget();
  }

  /** Forgets the session (signed out, or lost): the account's database keeps everything else. */
  async forget() {
    this.session = null;
    // The database may be gone (the account deleted in another tab): forgotten all the same.
    if (this.store) await this.store.deleteMeta("session").catch(() => {});
    this.dispatchEvent(new Event("change"));
  }

  /**
   * A request to the API with the access token (JSON `body`, if any): { status, ok, body } with
   * the answer's JSON (null for 204). A token the server no longer takes (401) is refreshed and
   * the request made once more; a session that cannot be refreshed is lost (see `refresh`).
   */
  async request(method, path, body = undefined) {
    for (let attempt = 0; ; attempt++) {
      const token = await this.accessToken();
      if (!token) throw Object.assign(new Error("not signed in"), { code: "unauthenticated", status: 401 });
      const headers = { Authorization: `Bearer ${token}` };
      if (body !== undefined) headers["Content-Type"] = "application/json";
      const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      if (response.status === 401 && attempt === 0) {
        this.invalidateAccessToken();
        continue;
      }
      const json = response.status === 204 ? null : await response.json().catch(() => ({}));
      return { status: response.status, ok: response.ok, body: json };
    }
  }

  /** A GET whose answer is a file: the response as it came (a 401 retried once after a refresh). */
  async download(path) {
    for (let attempt = 0; ; attempt++) {
      const token = await this.accessToken();
      if (!token) throw Object.assign(new Error("not signed in"), { code: "unauthenticated", status: 401 });
      const response = await fetch(path, { headers: { Authorization: `Bearer ${token}` } });
      if (response.status === 401 && attempt === 0) {
        this.invalidateAccessToken();
        continue;
      }
      return response;
    }
  }

  /**
   * A POST of a file's bytes (`body`, a Blob) as application/octet-stream, through
   * XMLHttpRequest: unlike fetch it tells how much of the body is sent. `onProgress(sent,
   * total)` as it goes; `onSent()` once all is sent (the server works on it then). Resolves to
   * { status, ok, body } as `request` does (a 401 is retried once after a refresh, the file sent
   * again); a network failure rejects with a TypeError, as fetch's does.
   */
  async upload(path, body, { onProgress = () => {}, onSent = () => {} } = {}) {
    for (let attempt = 0; ; attempt++) {
      const token = await this.accessToken();
      if (!token) throw Object.assign(new Error("not signed in"), { code: "unauthenticated", status: 401 });
      const answer = await new Promise((resolve, reject) => {
        const xhr = new XMLHttpRequest();
        xhr.open("POST", path);
        xhr.setRequestHeader("Authorization", `Bearer ${token}`);
        xhr.setRequestHeader("Content-Type", "application/octet-stream");
        xhr.upload.addEventListener("progress", (e) => onProgress(e.loaded, e.lengthComputable ? e.total : body.size));
        xhr.upload.addEventListener("load", () => onSent());
        xhr.addEventListener("load", () => {
          let json = null;
          try {
            json = xhr.status === 204 ? null : JSON.parse(xhr.responseText);
          } catch {
            json = {};
          }
          resolve({ status: xhr.status, ok: xhr.status >= 200 && xhr.status < 300, body: json });
        });
        for (const failure of ["error", "abort", "timeout"]) {
          xhr.addEventListener(failure, () => reject(new TypeError(`the upload failed (${failure})`)));
        }
        xhr.send(body);
      });
      if (answer.status === 401 && attempt === 0) {
        this.invalidateAccessToken();
        continue;
      }
      return answer;
    }
  }

  async fetchJSON(path) {
    const token = await this.accessToken();
    const response = await fetch(path, { headers: { Authorization: `Bearer ${token}` } });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    return response.json();
  }
}

/** The claims of a JWT (unverified: the server verifies; this only reads who it names). */
export function claims(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part));
  } catch {
    return {};
  }
}
