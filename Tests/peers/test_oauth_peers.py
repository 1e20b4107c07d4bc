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
