"""The OAuth flow driven by an independent client (authlib) and a JWT attack matrix (jwcrypto),
against a real noted-server process on a free port.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import base64
import hashlib
import html.parser
import json
import os
import re
import secrets
import sqlite3
import subprocess
import tempfile
import time
import urllib.parse

import pytest
import requests
from authlib.integrations.requests_client import OAuth2Session
from jwcrypto import jwk, jwt

BIN = os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server")


class HiddenFields(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.fields = {}
        self.labels = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden":
            self.fields[a["name"]] = a.get("value", "")


@pytest.fixture(scope="module")
def server():
    data = tempfile.mkdtemp(prefix="noted-oauth-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    assert m, f"unexpected first line {line!r}"
    base = m.group(1)
    yield {"base": base, "data": data}
    proc.terminate()
    proc.wait(timeout=20)


def register(base, name=None, password="correct horse battery"):
    name = name or "u" + secrets.token_hex(4)
    r = requests.post(base + "/v1/accounts", json={"username": name, "password": password})
    assert r.status_code == 201, r.text
    return name, password


def sign_in_with_authlib(base, username, password, port=54321):
    redirect = f"http://127.0.0.1:{port}/callback"
    client = OAuth2Session(client_id="noted-cli", redirect_uri=redirect, code_challenge_method="S256", token_endpoint_auth_method="none")
    verifier = secrets.token_urlsafe(48)
    url, state = client.create_authorization_url(base + "/oauth/authorize", code_verifier=verifier)
    browser = requests.Session()
    page = browser.get(url)
    assert page.status_code == 200
    assert 'name="username"' in page.text and 'name="password"' in page.text and "Sign in" in page.text
    parser = HiddenFields()
    parser.feed(page.text)
    form = dict(parser.fields, username=username, password=password)
    posted = browser.post(base + "/oauth/authorize", data=form, allow_redirects=False)
    assert posted.status_code in (302, 303), posted.text
    location = posted.headers["Location"]
    assert location.startswith(redirect)
    token = client.fetch_token(base + "/oauth/token", authorization_response=location, code_verifier=verifier)
    return client, token


def test_authlib_full_flow_refresh_rotation_and_revocation(server):
    base = server["base"]
    username, password = register(base)
    client, token = sign_in_with_authlib(base, username, password)
    assert token["token_type"].lower() == "bearer"
    feed = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + token["access_token"]})
    assert feed.status_code == 200, feed.text
    first_refresh = token["refresh_token"]
    new = client.refresh_token(base + "/oauth/token", refresh_token=first_refresh)
    assert new["refresh_token"] != first_refresh
    # Presenting the rotated token again revokes the whole family, the newest token included.
    reuse = requests.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first_refresh})
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    newest = requests.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": new["refresh_token"]})
    assert newest.status_code == 400 and newest.json()["error"] == "invalid_grant"
    # Revocation of a fresh sign-in.
    client2, token2 = sign_in_with_authlib(base, username, password, port=50000)
    revoked = client2.revoke_token(base + "/oauth/revoke", token=token2["refresh_token"], token_type_hint="refresh_token")
    assert revoked.status_code == 200
    after = requests.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": token2["refresh_token"]})
    assert after.json()["error"] == "invalid_grant"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def server_key(server):
    db = sqlite3.connect(os.path.join(server["data"], "noted.sqlite"))
    kid, pem = db.execute("SELECT kid, private_pem FROM signing_keys ORDER BY created_at DESC LIMIT 1").fetchone()
    return kid, jwk.JWK.from_pem(pem.encode())


def mint(key, kid, claims, typ="at+jwt", alg="ES256"):
    token = jwt.JWT(header={"alg": alg, "typ": typ, "kid": kid}, claims=claims)
    token.make_signed_token(key)
    return token.serialize()


def test_jwt_attack_matrix_gets_401(server):
    base = server["base"]
    username, password = register(base)
    good = requests.post(base + "/v1/sessions", json={"username": username, "password": password}).json()
    access = good["access_token"]
    claims = json.loads(base64.urlsafe_b64decode(access.split(".")[1] + "=="))
    kid, key = server_key(server)
    now = int(time.time())
    assert requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + mint(key, kid, claims)}).status_code == 200

    public = json.loads(requests.get(base + "/.well-known/jwks.json").text)["keys"][0]
    other = jwk.JWK.generate(kty="EC", crv="P-256")
    attacks = {}
    attacks["alg none"] = b64(json.dumps({"alg": "none", "typ": "at+jwt", "kid": kid}).encode()) + "." + b64(json.dumps(claims).encode()) + "."
    hmac_key = jwk.JWK(kty="oct", k=b64(json.dumps(public).encode()))
    attacks["HS256 with the public key"] = mint(hmac_key, kid, claims, alg="HS256")
    attacks["wrong iss"] = mint(key, kid, dict(claims, iss="https://evil.example"))
    attacks["wrong aud"] = mint(key, kid, dict(claims, aud="someone-else"))
    attacks["expired"] = mint(key, kid, dict(claims, exp=now - 3600, iat=now - 7200))
    attacks["nbf in the future"] = mint(key, kid, dict(claims, nbf=now + 600))
    attacks["no exp"] = mint(key, kid, {k: v for k, v in claims.items() if k != "exp"})
    attacks["unknown kid"] = mint(other, "unknown-kid", claims)
    attacks["kid with path characters"] = mint(other, "../../etc/passwd", claims)
    attacks["kid with SQL characters"] = mint(other, "x' OR '1'='1", claims)
    attacks["signed by another key with the server's kid"] = mint(other, kid, claims)
    attacks["refresh token"] = good["refresh_token"]
    attacks["ID-token-shaped JWT"] = mint(key, kid, {k: v for k, v in claims.items() if k != "client_id"}, typ="JWT")
    attacks["8 KiB token"] = mint(key, kid, dict(claims, pad="x" * 9000))
    for name, token in attacks.items():
        r = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + token})
        assert r.status_code == 401, f"{name}: {r.status_code} {r.text}"


NOTED = os.environ.get("NOTED_BIN", ".build/debug/noted")


def test_noted_login_in_a_browser_with_a_loopback_redirect(server):
    """`noted login` without a password: the sign-in page driven by plain HTTP form posts."""
    base = server["base"]
    username, password = register(base)
    home = tempfile.mkdtemp(prefix="noted-cli-oauth-")
    proc = subprocess.Popen([NOTED, "--home", home, "--server", base, "login", "--timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "browser" in proc.stdout.readline()
        url = proc.stdout.readline().strip()
        assert url.startswith(base + "/oauth/authorize?")
        query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
        assert query["client_id"] == ["noted-cli"] and query["code_challenge_method"] == ["S256"]
        browser = requests.Session()
        page = browser.get(url)
        parser = HiddenFields()
        parser.feed(page.text)
        posted = browser.post(base + "/oauth/authorize", data=dict(parser.fields, username=username, password=password), allow_redirects=False)
        assert posted.status_code == 303
        location = posted.headers["Location"]
        assert location.startswith("http://127.0.0.1:") and "/callback?code=" in location
        # A callback with another state (a stale tab, or a page signing this terminal in to
        # someone else's account) is refused and the CLI keeps waiting for its own.
        listener = location.split("/callback?")[0]
        forged = requests.get(listener + "/callback?code=not-yours&state=not-this-sign-in")
        assert forged.status_code == 400 and proc.poll() is None
        landed = requests.get(location)  # the browser follows the redirect to the CLI's loopback listener
        assert landed.status_code == 200 and "Signed in" in landed.text
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "signed in" in out
    finally:
        if proc.poll() is None:
            proc.kill()
    whoami = subprocess.run([NOTED, "--home", home, "whoami"], capture_output=True, text=True, timeout=30)
    assert whoami.returncode == 0, whoami.stderr
    made = subprocess.run([NOTED, "--home", home, "new", "--title", "via OAuth", "--body", "x"], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    synced = subprocess.run([NOTED, "--home", home, "sync"], capture_output=True, text=True, timeout=60)
    assert synced.returncode == 0, synced.stderr
    logout = subprocess.run([NOTED, "--home", home, "logout"], capture_output=True, text=True, timeout=30)
    assert logout.returncode == 0, logout.stderr


# --- Trusted external issuers -------------------------------------------------------------

import http.server
import socket
import threading
import uuid

from websockets.sync.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed


class TinyIssuer:
    """An OpenID issuer in a thread: discovery + JWKS over real HTTP, keys made by jwcrypto."""

    def __init__(self, jwks_uri=None):
        self.keys = {}  # kid -> (private JWK, alg)
        self.published = []  # kids in the JWKS
        self.jwks_hits = 0
        self.jwks_uri = jwks_uri  # what discovery names (default: this issuer's /jwks)
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.jwks_uri or issuer.url + "/jwks"}
                elif self.path == "/moved":  # a redirect to the real key set
                    self.send_response(302)
                    self.send_header("Location", issuer.url + "/jwks")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                elif self.path == "/jwks":
                    issuer.jwks_hits += 1
                    body = {"keys": [dict(issuer.keys[k][0].export_public(as_dict=True), alg=issuer.keys[k][1], use="sig")
                                     for k in issuer.published]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def add_key(self, alg, publish=True):
        kid = f"{alg.lower()}-{secrets.token_hex(4)}"
        if alg == "ES256":
            key = jwk.JWK.generate(kty="EC", crv="P-256", kid=kid)
        elif alg == "RS256":
            key = jwk.JWK.generate(kty="RSA", size=2048, kid=kid)
        elif alg == "EdDSA":
            key = jwk.JWK.generate(kty="OKP", crv="Ed25519", kid=kid)
        else:
            raise ValueError(alg)
        self.keys[kid] = (key, alg)
        if publish:
            self.published.append(kid)
        return kid

    def claims(self, sub, aud="noted-api", **extra):
        now = int(time.time())
        claims = {"iss": self.url, "sub": sub, "aud": aud, "iat": now, "exp": now + 300, "azp": "some-app"}
        claims.update(extra)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, kid, claims, typ="at+jwt", alg=None):
        key, key_alg = self.keys[kid]
        return mint(key, kid, claims, typ=typ, alg=alg or key_alg)

    def close(self):
        self.httpd.shutdown()


def start_server(*extra):
    data = tempfile.mkdtemp(prefix="noted-ext-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"unexpected first line {line!r}: {proc.stderr.read()}")
    return proc, m.group(1), data


def stop_server(proc):
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return err


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def external():
    a, b, untrusted = TinyIssuer(), TinyIssuer(), TinyIssuer()
    for issuer in (a, b, untrusted):
        for alg in ("ES256", "RS256", "EdDSA"):
            issuer.add_key(alg)
    dead = f"http://127.0.0.1:{closed_port()}"
    proc, base, data = start_server(
        "--trust-issuer", f"issuer={a.url},discovery={a.url}/.well-known/openid-configuration,audience=noted-api,refetch=2",
        "--trust-issuer", f"issuer={b.url},jwks={b.url}/jwks,audience=noted-api",
        "--trust-issuer", f"issuer={dead},jwks={dead}/jwks,audience=noted-api")
    yield {"a": a, "b": b, "untrusted": untrusted, "dead": dead, "base": base, "data": data, "proc": proc}
    err = stop_server(proc)
    # Logs never carry token contents.
    assert "eyJ" not in err, "a JWT appears in the server log"
    for issuer in (a, b, untrusted):
        issuer.close()


@pytest.mark.parametrize("spec", [
    "issuer=https://idp.example,audience=x",  # no key source
    "issuer=https://idp.example,jwks=https://idp.example/jwks",  # no audience
    "issuer=https://idp.example,jwks=https://idp.example/jwks,discovery=https://idp.example/d,audience=x",
    "issuer=ftp://idp.example,jwks=https://idp.example/jwks,audience=x",
    "issuer=https://idp.example,jwks=https://idp.example/jwks,audience=x,refetch=0",
    "issuer=https://idp.example,jwks=https://idp.example/jwks,audience=x,colour=red",
    "issuer=https://idp.example,jwks=http://idp.example/jwks,audience=x",  # keys in the clear
    "issuer=http://idp.example,discovery=http://idp.example/d,audience=x",
])
def test_bad_trust_issuer_flags_are_refused(spec):
    done = subprocess.run([BIN, "--port", "0", "--data", tempfile.mkdtemp(prefix="noted-ext-"), "--trust-issuer", spec],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "--trust-issuer" in done.stderr, done.stderr


def test_unreachable_or_hanging_jwks_endpoints_refuse_without_hanging():
    """A JWKS endpoint that refuses connections, and one that accepts and never answers."""
    hanging = socket.socket()
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(16)  # connections complete in the kernel; nobody ever reads or answers
    hang_url = f"http://127.0.0.1:{hanging.getsockname()[1]}"
    dead = f"http://127.0.0.1:{closed_port()}"
    key = jwk.JWK.generate(kty="EC", crv="P-256", kid="k1")
    proc, base, _ = start_server(
        "--trust-issuer", f"issuer={dead},jwks={dead}/jwks,audience=noted-api",
        "--trust-issuer", f"issuer={hang_url},discovery={hang_url}/.well-known/openid-configuration,audience=noted-api")
    try:
        now = int(time.time())
        for issuer in (dead, hang_url):
            token = mint(key, "k1", {"iss": issuer, "sub": "s", "aud": "noted-api", "exp": now + 300})
            for attempt in range(2):
                started = time.monotonic()
                assert get_changes(base, token).status_code == 401
                # A fetch gives up after 5 s; the second attempt is within the refetch interval.
                assert time.monotonic() - started < (8 if attempt == 0 else 1), (issuer, attempt)
        assert requests.get(base + "/health").json()["status"] == "ok"
    finally:
        err = stop_server(proc)
        hanging.close()
    assert err.count("cannot fetch the keys of a trusted issuer") == 2, err
    assert "eyJ" not in err


def test_keys_only_from_the_issuers_origin_and_never_through_a_redirect():
    """A discovery document naming a key set on another origin, and a key set URL that
    redirects: neither is followed, and tokens signed with those keys are refused."""
    elsewhere = TinyIssuer()
    foreign = TinyIssuer(jwks_uri=elsewhere.url + "/jwks")  # another port: another origin
    redirected = TinyIssuer()
    for issuer in (elsewhere, foreign, redirected):
        kid = issuer.add_key("ES256")
    # The same key published at the foreign issuer's discovery target, so only the origin rule refuses it.
    elsewhere.keys.update(foreign.keys)
    elsewhere.published += foreign.published
    proc, base, _ = start_server(
        "--trust-issuer", f"issuer={foreign.url},discovery={foreign.url}/.well-known/openid-configuration,audience=noted-api",
        "--trust-issuer", f"issuer={redirected.url},jwks={redirected.url}/moved,audience=noted-api")
    try:
        for issuer in (foreign, redirected):
            kid = next(iter(issuer.keys))
            assert get_changes(base, issuer.token(kid, issuer.claims("eve"))).status_code == 401
        assert elsewhere.jwks_hits == 0, "the foreign jwks_uri was fetched"
        assert redirected.jwks_hits == 0, "the redirect was followed"
    finally:
        err = stop_server(proc)
        for issuer in (elsewhere, foreign, redirected):
            issuer.close()
    assert "is not on the issuer's origin" in err, err
    assert "answered 302" in err, err


def get_changes(base, token):
    return requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + token}, timeout=30)


def push_note(base, token, title):
    change = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": str(uuid.uuid4()), "op": "upsert", "baseRev": 0,
              "fields": {"title": {"set": title}}}
    r = requests.post(base + "/v1/push", json={"changes": [change]}, headers={"Authorization": "Bearer " + token}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["status"] == "applied", r.text
    return r.json()


def titles(base, token):
    r = get_changes(base, token)
    assert r.status_code == 200, r.text
    return {(rec.get("fields") or {}).get("title") for rec in r.json()["records"]}


def test_external_tokens_accepted_for_every_allowed_alg_and_namespaced(external, server):
    a, b, base = external["a"], external["b"], external["base"]
    sub = "alice"
    by_alg = {alg: next(k for k, (_, al) in a.keys.items() if al == alg) for alg in ("ES256", "RS256", "EdDSA")}
    tokens = {alg: a.token(kid, a.claims(sub)) for alg, kid in by_alg.items()}
    for alg, token in tokens.items():
        assert get_changes(base, token).status_code == 200, alg
    # Many IdPs mark access tokens typ: JWT; that is accepted too.
    assert get_changes(base, a.token(by_alg["ES256"], a.claims(sub), typ="JWT")).status_code == 200
    # Same issuer and sub: the same local user, whatever the key.
    push_note(base, tokens["ES256"], "from alice at A")
    assert "from alice at A" in titles(base, tokens["EdDSA"])
    # The WebSocket accepts them too, and serves that user's records.
    with ws_connect(base.replace("http://", "ws://") + "/v1/sync", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "hello", "protocol": 1, "token": tokens["RS256"], "device": str(uuid.uuid4()), "client": "pytest/1"}))
        assert json.loads(ws.recv(timeout=20))["type"] == "welcome"
        ws.send(json.dumps({"type": "pull", "since": 0}))
        page = json.loads(ws.recv(timeout=20))
        assert page["type"] == "changes" and any(r["fields"].get("title") == "from alice at A" for r in page["records"]), page
    # Same sub at issuer B: another user.
    b_kid = next(iter(b.keys))
    b_token = b.token(b_kid, b.claims(sub))
    assert "from alice at A" not in titles(base, b_token)
    # A built-in account named like the sub: another user again, and it cannot sign in as the external one.
    requests.post(base + "/v1/accounts", json={"username": sub, "password": "correct horse battery"})
    built_in = requests.post(base + "/v1/sessions", json={"username": sub, "password": "correct horse battery"}).json()["access_token"]
    assert "from alice at A" not in titles(base, built_in)
    # Not trusted: a server without --trust-issuer refuses A's token; an unknown issuer is refused here.
    assert get_changes(server["base"], tokens["ES256"]).status_code == 401
    untrusted = external["untrusted"]
    assert get_changes(base, untrusted.token(next(iter(untrusted.keys)), untrusted.claims(sub))).status_code == 401
    # Local users were created on first use, namespaced by issuer.
    db = sqlite3.connect(os.path.join(external["data"], "noted.sqlite"))
    keys = [row[0] for row in db.execute("SELECT username_key FROM users WHERE username_key LIKE 'ext:%'")]
    assert len(keys) == 2 and all(k.endswith(":alice") for k in keys), keys


def test_external_issuer_attack_matrix(external):
    a, b, base = external["a"], external["b"], external["base"]
    a_kid = next(k for k, (_, al) in a.keys.items() if al == "ES256")
    rsa_kid = next(k for k, (_, al) in a.keys.items() if al == "RS256")
    b_kid = next(k for k, (_, al) in b.keys.items() if al == "ES256")
    b_key = b.keys[b_kid][0]
    now = int(time.time())
    good = a.claims("mallory")
    assert get_changes(base, a.token(a_kid, good)).status_code == 200
    public = a.keys[a_kid][0].export_public(as_dict=True)
    attacks = {
        "A's iss signed by B's key under B's kid": mint(b_key, b_kid, good),
        "A's iss signed by B's key under A's kid": mint(b_key, a_kid, good),
        "alg outside the allow-list (PS256 with A's RSA key)": mint(a.keys[rsa_kid][0], rsa_kid, good, alg="PS256"),
        "alg ES256 on A's RSA kid": mint(a.keys[a_kid][0], rsa_kid, good, alg="ES256"),
        "HS256 with A's public key": mint(jwk.JWK(kty="oct", k=b64(json.dumps(public).encode())), a_kid, good, alg="HS256"),
        "alg none": b64(json.dumps({"alg": "none", "typ": "at+jwt", "kid": a_kid}).encode()) + "." + b64(json.dumps(good).encode()) + ".",
        "unknown kid": mint(jwk.JWK.generate(kty="EC", crv="P-256"), "nobody-" + secrets.token_hex(4), good),
        "wrong aud": a.token(a_kid, a.claims("mallory", aud="another-api")),
        "nbf beyond leeway": a.token(a_kid, a.claims("mallory", nbf=now + 120)),
        "expired beyond leeway": a.token(a_kid, a.claims("mallory", exp=now - 120, iat=now - 600)),
        "missing exp": a.token(a_kid, a.claims("mallory", exp=None)),
        # Access tokens live minutes; and an exp of 1e300 used to trap the session timer and kill the server.
        "exp a year away": a.token(a_kid, a.claims("mallory", exp=now + 365 * 86400)),
        "exp 1e300": a.token(a_kid, a.claims("mallory", exp=1e300)),
        "ID-token-shaped (nonce)": a.token(a_kid, a.claims("mallory", nonce="n-0S6_WzA2Mj"), typ="JWT"),
        "ID-token-shaped (at_hash)": a.token(a_kid, a.claims("mallory", at_hash="77QmUPtjPfzWtF2AnpK9RQ")),
        "Keycloak ID token (payload typ ID)": a.token(a_kid, a.claims("mallory", typ="ID"), typ="JWT"),
        "typ neither at+jwt nor JWT": a.token(a_kid, good, typ="id+jwt"),
        "untrusted issuer with A's key": a.token(a_kid, dict(good, iss="https://evil.example")),
        "issuer whose JWKS endpoint is down": mint(a.keys[a_kid][0], a_kid, dict(good, iss=external["dead"])),
    }
    header_without_typ = jwt.JWT(header={"alg": "ES256", "kid": a_kid}, claims=good)
    header_without_typ.make_signed_token(a.keys[a_kid][0])
    attacks["no typ"] = header_without_typ.serialize()
    # Within the leeway a small clock skew is accepted (so that the refusals above are about the claims).
    assert get_changes(base, a.token(a_kid, a.claims("mallory", nbf=now + 30))).status_code == 200
    for name, token in attacks.items():
        started = time.monotonic()
        r = get_changes(base, token)
        assert r.status_code == 401, f"{name}: {r.status_code} {r.text}"
        assert time.monotonic() - started < 10, f"{name}: took too long"
        assert_ws_closes_4001(base, token, name)
    assert requests.get(base + "/health").json()["status"] == "ok"


def test_external_issuer_key_rotation_and_refetch_limit(external):
    a, base = external["a"], external["base"]
    old = next(k for k, (_, al) in a.keys.items() if al == "ES256")
    assert get_changes(base, a.token(old, a.claims("rotator"))).status_code == 200
    time.sleep(2.2)  # the refetch interval of this issuer (refetch=2)
    new = a.add_key("ES256")
    a.published = [new]  # the issuer rotates: the old key is withdrawn, the new one published
    hits = a.jwks_hits
    assert get_changes(base, a.token(new, a.claims("rotator"))).status_code == 200
    assert a.jwks_hits == hits + 1
    # Unknown kids in quick succession: at most one refetch per interval.
    hits = a.jwks_hits
    for _ in range(5):
        assert get_changes(base, mint(jwk.JWK.generate(kty="EC", crv="P-256"), "x" + secrets.token_hex(4), a.claims("r"))).status_code == 401
    assert a.jwks_hits - hits <= 1
    # The withdrawn key no longer verifies (it left the cached set with the refetch).
    assert get_changes(base, a.token(old, a.claims("rotator"))).status_code == 401


def assert_ws_closes_4001(base, token, name):
    url = base.replace("http://", "ws://") + "/v1/sync"
    with ws_connect(url, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "hello", "protocol": 1, "token": token, "device": str(uuid.uuid4()), "client": "pytest/1"}))
        try:
            while True:
                message = json.loads(ws.recv(timeout=20))
                assert message.get("type") != "welcome", f"{name}: welcomed over the WebSocket"
        except ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == 4001, f"{name}: closed with {closed.rcvd}"


def test_jwt_attack_matrix_over_websocket_gets_4001(server):
    base = server["base"]
    username, password = register(base)
    good = requests.post(base + "/v1/sessions", json={"username": username, "password": password}).json()
    claims = json.loads(base64.urlsafe_b64decode(good["access_token"].split(".")[1] + "=="))
    kid, key = server_key(server)
    now = int(time.time())
    public = json.loads(requests.get(base + "/.well-known/jwks.json").text)["keys"][0]
    other = jwk.JWK.generate(kty="EC", crv="P-256")
    attacks = {
        "alg none": b64(json.dumps({"alg": "none", "typ": "at+jwt", "kid": kid}).encode()) + "." + b64(json.dumps(claims).encode()) + ".",
        "HS256 with the public key": mint(jwk.JWK(kty="oct", k=b64(json.dumps(public).encode())), kid, claims, alg="HS256"),
        "wrong iss": mint(key, kid, dict(claims, iss="https://evil.example")),
        "wrong aud": mint(key, kid, dict(claims, aud="someone-else")),
        "expired": mint(key, kid, dict(claims, exp=now - 3600, iat=now - 7200)),
        "nbf in the future": mint(key, kid, dict(claims, nbf=now + 600)),
        "no exp": mint(key, kid, {k: v for k, v in claims.items() if k != "exp"}),
        "unknown kid": mint(other, "unknown-kid", claims),
        "kid with path characters": mint(other, "../../etc/passwd", claims),
        "kid with SQL characters": mint(other, "x' OR '1'='1", claims),
        "signed by another key with the server's kid": mint(other, kid, claims),
        "refresh token": good["refresh_token"],
        "ID-token-shaped JWT": mint(key, kid, {k: v for k, v in claims.items() if k != "client_id"}, typ="JWT"),
        "8 KiB token": mint(key, kid, dict(claims, pad="x" * 9000)),
    }
    with ws_connect(base.replace("http://", "ws://") + "/v1/sync", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "hello", "protocol": 1, "token": mint(key, kid, claims), "device": str(uuid.uuid4()), "client": "pytest/1"}))
        assert json.loads(ws.recv(timeout=20))["type"] == "welcome"
    seq_before = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + good["access_token"]}).json()
    for name, token in attacks.items():
        assert_ws_closes_4001(base, token, name)
    seq_after = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + good["access_token"]}).json()
    assert seq_before == seq_after


def test_a_second_noted_server_as_the_identity_provider():
    port = closed_port()
    idp_url = f"http://127.0.0.1:{port}"
    idp, idp_base, _ = start_server("--port", str(port), "--issuer", idp_url)
    try:
        assert idp_base == idp_url
        relying, base, _ = start_server(
            "--trust-issuer", f"issuer={idp_url},discovery={idp_url}/.well-known/openid-configuration,audience=noted")
        try:
            username, password = register(idp_base)
            _, token = sign_in_with_authlib(idp_base, username, password)
            access = token["access_token"]
            push_note(base, access, "signed in at the IdP")
            assert "signed in at the IdP" in titles(base, access)
            # The IdP's user is a namespaced local user, not the relying server's account of that name.
            register(base, name=username)
            own = requests.post(base + "/v1/sessions", json={"username": username, "password": password}).json()["access_token"]
            assert "signed in at the IdP" not in titles(base, own)
            # The relying server's tokens are not accepted at the IdP, which trusts nobody.
            assert get_changes(idp_base, own).status_code == 401
            assert_ws_closes_4001(idp_base, own, "relying server's token at the IdP")
        finally:
            stop_server(relying)
    finally:
        stop_server(idp)


def test_keys_rotate_on_the_real_binary():
    data = tempfile.mkdtemp(prefix="noted-rotate-")
    proc, base, _ = start_server("--data", data)
    try:
        username, password = register(base)
        before = requests.post(base + "/v1/sessions", json={"username": username, "password": password}).json()["access_token"]
        old_kid = json.loads(base64.urlsafe_b64decode(before.split(".")[0] + "=="))["kid"]
        rotated = subprocess.run([BIN, "keys", "rotate", "--data", data], capture_output=True, text=True, timeout=60)
        assert rotated.returncode == 0, rotated.stderr
        new_kid = re.search(r"new signing key (\S+)", rotated.stdout).group(1)
        assert new_kid != old_kid
        # The running server still accepts the old key's token.
        assert get_changes(base, before).status_code == 200
    finally:
        stop_server(proc)
    # After a restart (a running server also rereads its keys within a minute) new tokens carry
    # the new kid, the old token is still accepted, and the JWKS lists both keys.
    proc, base, _ = start_server("--data", data)
    try:
        assert get_changes(base, before).status_code == 200
        after = requests.post(base + "/v1/sessions", json={"username": username, "password": password}).json()["access_token"]
        assert json.loads(base64.urlsafe_b64decode(after.split(".")[0] + "=="))["kid"] == new_kid
        assert get_changes(base, after).status_code == 200
        listed = {k["kid"] for k in requests.get(base + "/.well-known/jwks.json").json()["keys"]}
        assert listed == {old_kid, new_kid}
    finally:
        stop_server(proc)
    bad = subprocess.run([BIN, "keys", "rotate", "--database", "nonsense"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--database" in bad.stderr
