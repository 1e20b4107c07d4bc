"""Two-factor sign-in (TOTP, RFC 6238) against a real noted-server, with codes made by an
independent implementation (pyotp) and the OAuth flow driven by authlib: enrolment, the
sign-in page's code step, the first-party API's `otp`, replay, recovery codes, turning it off,
and the rate limits on guessed codes.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import os
import re
import secrets
import subprocess
import tempfile
import time
import urllib.parse

import pyotp
import pytest
import requests
from authlib.integrations.requests_client import OAuth2Session

from test_oauth_peers import BIN, HiddenFields, register


def run(*flags):
    data = tempfile.mkdtemp(prefix="noted-2fa-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, *flags], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    assert m, f"unexpected first line {line!r}"
    yield {"base": m.group(1), "data": data}
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server():
    # Many sign-ins with wrong codes on purpose, all from one address: the limits are raised
    # here and checked at their default on a server of their own (the last test).
    yield from run("--auth-attempts-per-minute", "1000")


@pytest.fixture
def strict_server():
    yield from run()


def api_tokens(base, username, password, otp=None):
    body = {"username": username, "password": password}
    if otp is not None:
        body["otp"] = otp
    return requests.post(base + "/v1/sessions", json=body)


def bearer(tokens):
    return {"Authorization": "Bearer " + tokens["access_token"]}


def next_code(totp, after=None):
    """A code of a time step later than `after`'s (a step's code signs in once)."""
    while True:
        code = totp.now()
        if code != after:
            return code
        time.sleep(1)


def enrol(base, username, password):
    tokens = api_tokens(base, username, password).json()
    setup = requests.post(base + "/v1/account/2fa/setup", json={"password": password}, headers=bearer(tokens))
    assert setup.status_code == 200, setup.text
    body = setup.json()
    assert re.fullmatch(r"[A-Z2-7]{32}", body["secret"]), body
    uri = urllib.parse.urlparse(body["uri"])
    assert uri.scheme == "otpauth" and uri.netloc == "totp"
    query = urllib.parse.parse_qs(uri.query)
    assert query["secret"] == [body["secret"]] and query["issuer"] == ["Noted"] and query["digits"] == ["6"]
    # pyotp reads the URI as an authenticator app does.
    totp = pyotp.parse_uri(body["uri"])
    assert totp.name == username and totp.issuer == "Noted"
    wrong = requests.post(base + "/v1/account/2fa/enable", json={"code": "000000" if totp.now() != "000000" else "111111"}, headers=bearer(tokens))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_code", wrong.text
    code = totp.now()
    enabled = requests.post(base + "/v1/account/2fa/enable", json={"code": code}, headers=bearer(tokens))
    assert enabled.status_code == 200, enabled.text
    codes = enabled.json()["recovery_codes"]
    assert len(codes) == 10 and len(set(codes)) == 10 and all(re.fullmatch(r"[a-z2-9]{5}-[a-z2-9]{5}", c) for c in codes), codes
    return tokens, totp, codes, code


def sign_in_page(base, port):
    """The sign-in page of a new authorization request: (the OAuth client, the PKCE verifier,
    the browser session, the page's hidden fields)."""
    redirect = f"http://127.0.0.1:{port}/callback"
    client = OAuth2Session(client_id="noted-cli", redirect_uri=redirect, code_challenge_method="S256", token_endpoint_auth_method="none")
    verifier = secrets.token_urlsafe(48)
    url, _ = client.create_authorization_url(base + "/oauth/authorize", code_verifier=verifier)
    browser = requests.Session()
    parser = HiddenFields()
    parser.feed(browser.get(url).text)
    return client, verifier, browser, parser.fields


def oauth_sign_in(base, username, password, otp_codes, port=54329):
    """The sign-in page as a browser posts it: the password form, then the code form for each
    code in turn until one signs in. Returns (token or None, the last page)."""
    redirect = f"http://127.0.0.1:{port}/callback"
    client = OAuth2Session(client_id="noted-cli", redirect_uri=redirect, code_challenge_method="S256", token_endpoint_auth_method="none")
    verifier = secrets.token_urlsafe(48)
    url, _ = client.create_authorization_url(base + "/oauth/authorize", code_verifier=verifier)
    browser = requests.Session()
    page = browser.get(url)
    parser = HiddenFields()
    parser.feed(page.text)
    posted = browser.post(base + "/oauth/authorize", data=dict(parser.fields, username=username, password=password), allow_redirects=False)
    for code in otp_codes:
        assert posted.status_code in (200, 401), posted.text
        assert "Authentication code" in posted.text and 'name="otp"' in posted.text and "Verify" in posted.text, posted.text
        assert password not in posted.text, "the code form must not carry the password"
        parser = HiddenFields()
        parser.feed(posted.text)
        assert "second_factor" in parser.fields
        posted = browser.post(base + "/oauth/authorize", data=dict(parser.fields, otp=code), allow_redirects=False)
        if posted.status_code in (302, 303):
            location = posted.headers["Location"]
            assert location.startswith(redirect)
            return client.fetch_token(base + "/oauth/token", authorization_response=location, code_verifier=verifier), posted
    return None, posted


def test_enrol_then_sign_in_needs_the_code_on_the_page_and_the_api(server):
    base = server["base"]
    username, password = register(base)
    tokens, totp, codes, enrolment_code = enrol(base, username, password)
    account = requests.get(base + "/v1/account", headers=bearer(tokens)).json()
    assert account["username"] == username and account["two_factor"] == {"enabled": True, "recovery_codes_left": 10}

    # The API: no code, a wrong code, the code of the enrolment (used), then a fresh one.
    missing = api_tokens(base, username, password)
    assert missing.status_code == 401 and missing.json()["error"] == "otp_required", missing.text
    wrong = api_tokens(base, username, password, "12345")
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_otp", wrong.text
    replayed = api_tokens(base, username, password, enrolment_code)
    assert replayed.status_code == 401 and replayed.json()["error"] == "invalid_otp", "the enrolment's code signs nobody in"
    code = next_code(totp, after=enrolment_code)
    signed_in = api_tokens(base, username, password, code)
    assert signed_in.status_code == 200, signed_in.text
    again = api_tokens(base, username, password, code)
    assert again.status_code == 401 and again.json()["error"] == "invalid_otp", "a code signs in once"
    # A wrong password with a right code is still a wrong password.
    bad = api_tokens(base, username, "not the password", next_code(totp, after=code))
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_credentials"

    # The sign-in page: a wrong code shows the form again, then the right one signs in.
    fresh = next_code(totp, after=code)
    token, page = oauth_sign_in(base, username, password, ["999999" if fresh != "999999" else "888888", fresh])
    assert token is not None, page.text
    assert requests.get(base + "/v1/account", headers=bearer(token)).status_code == 200

    # A recovery code, in any case and spacing, signs in once.
    token, page = oauth_sign_in(base, username, password, [codes[0].upper().replace("-", " ")])
    assert token is not None, page.text
    token, page = oauth_sign_in(base, username, password, [codes[0]])
    assert token is None and page.status_code == 401 and "not right" in page.text
    assert api_tokens(base, username, password, codes[1]).status_code == 200
    assert requests.get(base + "/v1/account", headers=bearer(tokens)).json()["two_factor"]["recovery_codes_left"] == 8


def test_a_forged_or_foreign_second_step_does_not_sign_in(server):
    base = server["base"]
    victim, victim_password = register(base)
    _, victim_totp, _, _ = enrol(base, victim, victim_password)
    # Someone who knows only their own password cannot reach the victim's code form.
    redirect = "http://127.0.0.1:54330/callback"
    client = OAuth2Session(client_id="noted-cli", redirect_uri=redirect, code_challenge_method="S256", token_endpoint_auth_method="none")
    url, _ = client.create_authorization_url(base + "/oauth/authorize", code_verifier=secrets.token_urlsafe(48))
    browser = requests.Session()
    parser = HiddenFields()
    parser.feed(browser.get(url).text)
    fields = dict(parser.fields, second_factor="eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", otp=victim_totp.now())
    forged = browser.post(base + "/oauth/authorize", data=fields, allow_redirects=False)
    assert forged.status_code == 400 and "expired" in forged.text
    # An access token is not a second step either.
    mallory, mallory_password = register(base)
    access = api_tokens(base, mallory, mallory_password).json()["access_token"]
    parser = HiddenFields()
    parser.feed(browser.get(url).text)
    posed = browser.post(base + "/oauth/authorize", data=dict(parser.fields, second_factor=access, otp=victim_totp.now()), allow_redirects=False)
    assert posed.status_code == 400 and "expired" in posed.text


def test_turning_it_off_needs_the_password_and_a_code(server):
    base = server["base"]
    username, password = register(base)
    tokens, totp, codes, enrolment_code = enrol(base, username, password)
    tokens = api_tokens(base, username, password, codes[5]).json()
    again = requests.post(base + "/v1/account/2fa/setup", json={"password": password}, headers=bearer(tokens))
    assert again.status_code == 409 and again.json()["error"] == "two_factor_enabled"
    wrong_password = requests.post(base + "/v1/account/2fa/disable", json={"password": "nope nope nope", "code": totp.now()}, headers=bearer(tokens))
    assert wrong_password.status_code == 403 and wrong_password.json()["error"] == "invalid_credentials"
    wrong_code = requests.post(base + "/v1/account/2fa/disable", json={"password": password, "code": "000000" if totp.now() != "000000" else "111111"}, headers=bearer(tokens))
    assert wrong_code.status_code == 400 and wrong_code.json()["error"] == "invalid_code"
    off = requests.post(base + "/v1/account/2fa/disable", json={"password": password, "code": codes[6]}, headers=bearer(tokens))
    assert off.status_code == 200, off.text
    assert api_tokens(base, username, password).status_code == 200, "a password alone signs in again"
    assert requests.get(base + "/v1/account", headers=bearer(tokens)).json()["two_factor"] == {"enabled": False, "recovery_codes_left": 0}
    # Enabling with no setup under way is refused clearly.
    none = requests.post(base + "/v1/account/2fa/enable", json={"code": totp.now()}, headers=bearer(tokens))
    assert none.status_code == 409 and none.json()["error"] == "no_two_factor_setup"


def test_guessing_codes_is_rate_limited(strict_server):
    base = strict_server["base"]
    username, password = register(base)
    _, totp, _, _ = enrol(base, username, password)
    current = {totp.at(time.time() + offset) for offset in (-30, 0, 30)}
    guesses = [f"{n:06d}" for n in range(1000) if f"{n:06d}" not in current]
    answers = [api_tokens(base, username, password, guess) for guess in guesses[:12]]
    assert all(a.status_code in (401, 429) for a in answers)
    assert answers[-1].status_code == 429 and answers[-1].json()["error"] == "rate_limited", [a.status_code for a in answers]


def test_guesses_sent_at_once_are_judged_no_more_than_the_limit(strict_server):
    """security-3 M1: the limit was checked before the awaits and counted after them, so 200
    guesses sent at once were all judged. Now each is reserved before it is judged: at most 10
    (the limit) are answered invalid_otp, the rest rate_limited, on the API and on the sign-in
    page's code step alike."""
    from concurrent.futures import ThreadPoolExecutor
    base = strict_server["base"]
    username, password = register(base)
    _, totp, _, _ = enrol(base, username, password)
    current = {totp.at(time.time() + offset) for offset in (-60, -30, 0, 30, 60)}
    guesses = [f"{n:06d}" for n in range(400) if f"{n:06d}" not in current][:200]
    with ThreadPoolExecutor(max_workers=100) as pool:
        answers = list(pool.map(lambda guess: api_tokens(base, username, password, guess), guesses))
    judged = [a for a in answers if a.status_code == 401 and a.json()["error"] == "invalid_otp"]
    limited = [a for a in answers if a.status_code == 429]
    assert len(judged) <= 10 and len(judged) + len(limited) == len(answers), sorted({(a.status_code, a.text[:40]) for a in answers})

    # The sign-in page's code step (no password hashing to slow it): the same bound, for a
    # user of a fresh server (the address above is locked out now).
    gen = run()
    other = next(gen)
    try:
        base = other["base"]
        username, password = register(base)
        _, totp, _, _ = enrol(base, username, password)
        _, _, browser, fields = sign_in_page(base, 54331)
        posted = browser.post(base + "/oauth/authorize", data=dict(fields, username=username, password=password), allow_redirects=False)
        parser = HiddenFields()
        parser.feed(posted.text)
        assert "second_factor" in parser.fields, posted.text
        cookies = browser.cookies.get_dict()

        def guess(code):
            return requests.post(base + "/oauth/authorize", data=dict(parser.fields, otp=code), cookies=cookies, allow_redirects=False)

        current = {totp.at(time.time() + offset) for offset in (-60, -30, 0, 30, 60)}
        guesses = [f"{n:06d}" for n in range(400) if f"{n:06d}" not in current][:200]
        with ThreadPoolExecutor(max_workers=100) as pool:
            pages = list(pool.map(guess, guesses))
        wrong = [p for p in pages if p.status_code == 401 and "not right" in p.text]
        assert len(wrong) <= 10, (len(wrong), sorted({p.status_code for p in pages}))
        assert all(p.status_code in (401, 429) for p in pages), sorted({p.status_code for p in pages})
    finally:
        gen.close()


def test_changing_the_password_or_deleting_the_account_needs_a_code_too(server):
    """security-3 L4: with two-factor sign-in on, a leaked token and the password are not
    enough to change the password or delete the account."""
    base = server["base"]
    username, password = register(base)
    tokens, totp, codes, enrolment_code = enrol(base, username, password)
    tokens = api_tokens(base, username, password, codes[0]).json()
    new = "another horse battery staple"
    missing = requests.post(base + "/v1/account/password", json={"current_password": password, "new_password": new}, headers=bearer(tokens))
    assert missing.status_code == 403 and missing.json()["error"] == "code_required", missing.text
    wrong = requests.post(base + "/v1/account/password", json={"current_password": password, "new_password": new, "code": "000000" if totp.now() != "000000" else "111111"},
                          headers=bearer(tokens))
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_code", wrong.text
    assert api_tokens(base, username, password, codes[1]).status_code == 200, "the password did not change"
    changed = requests.post(base + "/v1/account/password", json={"current_password": password, "new_password": new, "code": codes[2]}, headers=bearer(tokens))
    assert changed.status_code == 200, changed.text
    assert api_tokens(base, username, new, codes[3]).status_code == 200

    gone = requests.delete(base + "/v1/account", json={"password": new}, headers=bearer(tokens))
    assert gone.status_code == 403 and gone.json()["error"] == "code_required", gone.text
    assert requests.get(base + "/v1/account", headers=bearer(tokens)).status_code == 200, "the account is still there"
    gone = requests.delete(base + "/v1/account", json={"password": new, "code": next_code(totp, after=enrolment_code)}, headers=bearer(tokens))
    assert gone.status_code == 204, gone.text
    assert requests.get(base + "/v1/account", headers=bearer(tokens)).status_code == 401

    # Without two-factor sign-in nothing changes: the password alone.
    plain, plain_password = register(base)
    plain_tokens = api_tokens(base, plain, plain_password).json()
    assert requests.delete(base + "/v1/account", json={"password": plain_password}, headers=bearer(plain_tokens)).status_code == 204


NOTED = os.environ.get("NOTED_BIN", ".build/debug/noted")


def noted(home, *args, stdin=None, check=True):
    result = subprocess.run([NOTED, "--home", home, *args], input=stdin, capture_output=True, text=True, timeout=60)
    if check:
        assert result.returncode == 0, f"noted {' '.join(args)}: {result.stderr}"
    return result


def test_the_cli_enrols_and_signs_in_with_otp(server):
    base = server["base"]
    home = tempfile.mkdtemp(prefix="noted-2fa-cli-")
    username, password = "cli" + secrets.token_hex(4), "correct horse battery"
    noted(home, "--server", base, "register", "--username", username, "--password-stdin", stdin=password + "\n")
    assert noted(home, "account", "2fa").stdout.strip() == "two-factor sign-in is off"

    # An exchange, as a person at the terminal has it: the password, then the URI is printed
    # and the app's first code is read from the next line.
    proc = subprocess.Popen([NOTED, "--home", home, "account", "2fa", "enable"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdin.write(password + "\n")
    proc.stdin.flush()
    uri = proc.stdout.readline().strip()
    assert uri.startswith("otpauth://totp/Noted:" + username + "?"), uri
    totp = pyotp.parse_uri(uri)
    first = totp.now()
    out, err = proc.communicate(first + "\n", timeout=60)
    assert proc.returncode == 0, err
    codes = re.findall(r"^[a-z2-9]{5}-[a-z2-9]{5}$", out, re.MULTILINE)
    assert len(codes) == 10, out
    assert noted(home, "account", "2fa").stdout.strip() == "two-factor sign-in is on; 10 recovery code(s) left"

    noted(home, "logout")
    refused = noted(home, "--server", base, "login", "--username", username, "--password-stdin", stdin=password + "\n", check=False)
    assert refused.returncode != 0 and "--otp" in refused.stderr, refused.stderr
    wrong = noted(home, "--server", base, "login", "--username", username, "--password-stdin", "--otp", first, stdin=password + "\n", check=False)
    assert wrong.returncode != 0 and "not right, or was used already" in wrong.stderr, wrong.stderr
    noted(home, "--server", base, "login", "--username", username, "--password-stdin", "--otp", next_code(totp, after=first), stdin=password + "\n")
    noted(home, "logout")
    noted(home, "--server", base, "login", "--username", username, "--password-stdin", "--otp", codes[3], stdin=password + "\n")
    noted(home, "account", "2fa", "disable", stdin=f"{password}\n{codes[4]}\n")
    assert noted(home, "account", "2fa").stdout.strip() == "two-factor sign-in is off"


def test_a_half_done_sign_in_ends_when_the_password_is_reset_or_two_factor_turned_off(server):
    """The code form's step is bound to the password checked and to two-factor being on: an
    operator's reset (with --turn-off-2fa) in between leaves the old password's step useless."""
    base, data = server["base"], server["data"]
    username, password = register(base)
    enrol(base, username, password)
    redirect = "http://127.0.0.1:54331/callback"
    client = OAuth2Session(client_id="noted-cli", redirect_uri=redirect, code_challenge_method="S256", token_endpoint_auth_method="none")
    url, _ = client.create_authorization_url(base + "/oauth/authorize", code_verifier=secrets.token_urlsafe(48))
    browser = requests.Session()
    parser = HiddenFields()
    parser.feed(browser.get(url).text)
    code_page = browser.post(base + "/oauth/authorize", data=dict(parser.fields, username=username, password=password), allow_redirects=False)
    assert "Authentication code" in code_page.text
    parser = HiddenFields()
    parser.feed(code_page.text)
    reset = subprocess.run([BIN, "users", "reset-password", username, "--turn-off-2fa", "--data", data], capture_output=True, text=True, timeout=60)
    assert reset.returncode == 0, reset.stderr
    late = browser.post(base + "/oauth/authorize", data=dict(parser.fields, otp="000000"), allow_redirects=False)
    assert late.status_code == 400 and "expired" in late.text, late.status_code
