"""The web app's Account panel in a real browser (headless Chromium driven by Selenium against
a real noted-server): changing the password, the signed-in devices (signing one out, signing out
everywhere), deleting the account, both with a code too when two-factor sign-in is on, what
another browser of the account sees then, what the account uses and its quota (a full account told
that edits are refused), and axe-core over the panel and the delete dialog. Skipped with a printed notice where Chromium cannot be
found (as test_webapp.py, whose helpers these are)."""
import math
import os
import re
import time
import uuid

import pytest
import requests

from test_webapp import (  # noqa: F401 (skips this module, as that one, without Chromium)
    By, Keys, WebDriverException, axe_in_both_schemes, browser, button, dialog_open, field, new_note, register, run_server,
    open_note, row_state, set_body, set_offline, sign_in, signed_out, status, titles, wait, write_offline_note,
)

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture(scope="module")
def account_server():
    # Its own server: these tests sign in, out and in again many times, and check passwords.
    yield from run_server("--auth-attempts-per-minute", "1000")


# --- The API beside the browser -------------------------------------------------------------

def api_sign_in(base, account, device=None):
    """A first-party sign-in (client `noted`) over the API: its tokens."""
    body = {"username": account[0], "password": account[1]}
    if device:
        body["device"] = device
    r = requests.post(base + "/v1/sessions", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def refreshed(base, tokens):
    """Refreshes a sign-in's tokens: the answer (the new tokens are kept in `tokens`)."""
    r = requests.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]})
    if r.status_code == 200:
        tokens.update(r.json())
    return r


def changes_status(base, tokens):
    return requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + tokens["access_token"]}).status_code


_readers = {}


def server_titles(base, account):
    """The titles of the account's notes on the server (read with one API sign-in per account
    and password, made again if it was signed out)."""
    r = None
    if account in _readers:
        r = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + _readers[account]})
    if r is None or r.status_code == 401:
        _readers[account] = api_sign_in(base, account)["access_token"]
        r = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + _readers[account]})
    assert r.status_code == 200, r.text
    return [rec["fields"].get("title") for rec in r.json()["records"] if not rec.get("deleted")]


# --- The panel ------------------------------------------------------------------------------

def panel_open(driver):
    return driver.execute_script("const d = document.getElementById('account-dialog'); return d.open && d.matches(':modal')")


def devices(driver):
    """The device rows as shown: their text and their "Sign out" button's accessible name."""
    return driver.execute_script("""
      return [...document.querySelectorAll('#devices li')].map(li => {
        const b = li.querySelector('button');
        return { text: li.textContent, signOut: b ? b.getAttribute('aria-label') : null,
                 seen: li.querySelector('time') ? li.querySelector('time').getAttribute('datetime') : null };
      })""")


def open_account(driver, rows=None):
    """Opens the Account panel from the toolbar; returns once it lists its devices (`rows` of them)."""
    driver.find_element(By.ID, "account").click()
    wait(driver, panel_open, message="the Account panel")
    wait(driver, lambda d: len(devices(d)) == (rows or len(devices(d)) or -1) and not d.find_element(By.ID, "devices").get_attribute("aria-busy"),
         message=f"{rows or 'the'} devices listed")


def text_of(driver, element_id):
    try:
        return driver.execute_script("const e = document.getElementById(arguments[0]); return e ? e.textContent : ''", element_id)
    except WebDriverException:
        return ""


def fill(driver, values):
    for label, value in values.items():
        box = field(driver, label)
        box.clear()
        box.send_keys(value)


def change_password(driver, current, new, confirm):
    fill(driver, {"Current password": current, "New password": new, "Confirm new password": confirm})
    button(driver, "Change password").click()


def open_delete(driver):
    """Opens the delete-account dialog from the panel (it counts the unsynced notes first)."""
    button(driver, "Delete account…").click()
    wait(driver, lambda d: d.execute_script("const d = document.getElementById('delete-account-dialog'); return d.open && d.matches(':modal')"),
         message="the delete dialog")


def signed_out_reason(driver):
    return text_of(driver, "signed-out-reason")


def database_names(driver):
    return driver.execute_script("return indexedDB.databases().then(list => list.map(d => d.name))")


# --- Changing the password ------------------------------------------------------------------

def test_change_password_revokes_the_other_sign_ins_and_keeps_this_one(account_server):
    base = account_server
    account = register(base, "pw")
    other = api_sign_in(base, account)  # another device, signed in before the change
    driver = browser()
    try:
        sign_in(driver, base, account)
        open_account(driver, rows=2)

        # The wrong current password: the server's message, in an alert; nothing changes.
        change_password(driver, "not the password", NEW_PASSWORD, NEW_PASSWORD)
        wait(driver, lambda d: "the password is not right" in text_of(d, "password-error"), message="the server's message")
        assert driver.find_element(By.ID, "password-error").get_attribute("role") == "alert"
        assert field(driver, "Current password").get_attribute("aria-invalid") == "true"
        assert text_of(driver, "password-done") == ""
        assert changes_status(base, other) == 200 and refreshed(base, other).status_code == 200
        assert requests.post(base + "/v1/sessions", json={"username": account[0], "password": NEW_PASSWORD}).status_code == 401

        # New and confirmation differ: said at once, nothing sent.
        change_password(driver, account[1], NEW_PASSWORD, NEW_PASSWORD + "!")
        wait(driver, lambda d: "do not match" in text_of(d, "password-error"), message="the mismatch")
        assert driver.switch_to.active_element.get_attribute("id") == "confirm-password"

        # A password the server refuses (too short, too common): its reason.
        change_password(driver, account[1], "short", "short")
        wait(driver, lambda d: "8 to 1024 characters" in text_of(d, "password-error"), message="too short")
        change_password(driver, account[1], "password123", "password123")
        wait(driver, lambda d: "most common" in text_of(d, "password-error"), message="too common")
        assert refreshed(base, other).status_code == 200  # still signed in

        # The change: one other device signed out; this browser stays signed in.
        change_password(driver, account[1], NEW_PASSWORD, NEW_PASSWORD)
        wait(driver, lambda d: text_of(d, "password-done") == "Password changed; 1 other device signed out.", message="changed")
        assert text_of(driver, "password-error") == ""
        assert [field(driver, label).get_attribute("value") for label in ("Current password", "New password", "Confirm new password")] == ["", "", ""]
        r = refreshed(base, other)
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
        assert changes_status(base, other) == 401
        wait(driver, lambda d: len(devices(d)) == 1, message="the other device gone from the list")

        # Escape closes the panel (focus back on "Account"); the app still syncs.
        driver.switch_to.active_element.send_keys(Keys.ESCAPE)
        wait(driver, lambda d: not panel_open(d), message="closed by Escape")
        assert driver.switch_to.active_element.get_attribute("id") == "account"
        new_note(driver, "After the change", "still syncing")
        changed = (account[0], NEW_PASSWORD)
        wait(driver, lambda d: "After the change" in server_titles(base, changed), timeout=15, message="the note synced")
        wait(driver, lambda d: status(d) == "online", message="online")
        assert driver.find_element(By.ID, "app").is_displayed()

        # The old password no longer signs in; the new one does.
        assert requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]}).status_code == 401
        assert requests.post(base + "/v1/sessions", json={"username": account[0], "password": NEW_PASSWORD}).status_code == 200
    finally:
        driver.quit()


# --- Devices --------------------------------------------------------------------------------

def test_devices_lists_this_browser_and_signs_one_or_all_out(account_server):
    base = account_server
    account = register(base, "dev")
    laptop_id = str(uuid.uuid4())
    laptop = api_sign_in(base, account, device=laptop_id)
    driver = browser()
    try:
        sign_in(driver, base, account)
        open_account(driver, rows=2)
        rows = devices(driver)
        # This browser first, "This device", no button; the other with its client and device.
        assert "noted-web" in rows[0]["text"] and "This device" in rows[0]["text"] and "unknown device" in rows[0]["text"], rows
        assert rows[0]["signOut"] is None
        assert "This device" not in rows[1]["text"] and "noted" in rows[1]["text"] and f"device {laptop_id[:8]}" in rows[1]["text"], rows
        assert re.match(rf"Sign out noted \(device {laptop_id[:8]}\), last seen .+", rows[1]["signOut"]), rows[1]
        # Last seen: a local date and time, not a number of milliseconds.
        assert "Last seen" in rows[1]["text"] and not re.search(r"\d{12}", rows[1]["text"]), rows[1]
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d", rows[1]["seen"]), rows[1]

        # Signing it out: its token is refused, its row goes, focus goes to the list's heading.
        driver.find_element(By.CSS_SELECTOR, f'#devices button[aria-label^="Sign out noted (device {laptop_id[:8]})"]').click()
        wait(driver, lambda d: len(devices(d)) == 1, message="the laptop gone from the list")
        assert changes_status(base, laptop) == 401
        assert refreshed(base, laptop).json().get("error") == "invalid_grant"
        assert "Signed out noted" in text_of(driver, "devices-status")
        assert driver.switch_to.active_element.get_attribute("id") == "devices-title"

        # Sign out everywhere: another API sign-in is revoked, and this browser is signed out as
        # by its own "Sign out" (the welcome page).
        phone = api_sign_in(base, account)
        driver.find_element(By.ID, "account-close").click()
        open_account(driver, rows=2)
        button(driver, "Sign out everywhere").click()
        wait(driver, signed_out, message="signed out everywhere")
        assert changes_status(base, phone) == 401
        assert refreshed(base, phone).json().get("error") == "invalid_grant"
        assert signed_out_reason(driver) == ""  # signed out on purpose: nothing to explain
        session = driver.execute_script("return window.noted ? window.noted.auth.session : null")
        assert session is None
    finally:
        driver.quit()


def test_sign_out_everywhere_with_an_unsynced_note_asks_first_and_keeps_it(account_server):
    base = account_server
    account = register(base, "every")
    driver = browser()
    try:
        sign_in(driver, base, account)
        write_offline_note(driver, "Unsynced before everywhere", "kept")
        driver.find_element(By.ID, "account").click()
        wait(driver, panel_open, message="the Account panel")
        wait(driver, lambda d: "Could not list the devices" in text_of(d, "devices-error"), message="offline: the list cannot be read")
        # The sign-out dialog, as for "Sign out": offline, the server cannot end the sign-ins.
        button(driver, "Sign out everywhere").click()
        wait(driver, dialog_open, message="the sign-out dialog")
        assert text_of(driver, "sign-out-title") == "Sign out everywhere?"
        assert "1 note is not synced" in text_of(driver, "sign-out-text")
        button(driver, "Sign out anyway").click()
        wait(driver, lambda d: "Could not sign out everywhere" in text_of(d, "devices-error"), message="the failure, in the panel")
        assert not signed_out(driver) and panel_open(driver)
        # Online: the note syncs. A note the server refuses stays unsynced: asked again, then
        # signed out; the refused note is kept for the next sign-in.
        set_offline(driver, False)
        wait(driver, lambda d: "Unsynced before everywhere" in server_titles(base, account), timeout=15, message="the note synced")
        driver.find_element(By.ID, "account-close").click()
        new_note(driver, "Refused before everywhere", "")
        set_body(driver, "x" * 250000)
        wait(driver, lambda d: "1 refused" in status(d), timeout=15, message="refused")
        open_account(driver)
        button(driver, "Sign out everywhere").click()
        wait(driver, dialog_open, message="the sign-out dialog again")
        assert "1 note is not synced yet (the server refused its version)" in text_of(driver, "sign-out-text")
        button(driver, "Sign out anyway").click()
        wait(driver, signed_out, message="signed out")
        sign_in(driver, base, account, sync_timeout=15)
        wait(driver, lambda d: (row_state(d, "Refused before everywhere") or {}).get("mark") == "refused by the server",
             message="the refused note after signing in again")
        assert "Unsynced before everywhere" in " ".join(titles(driver))
        # The toolbar's "Sign out" asks with its own title again.
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog")
        assert text_of(driver, "sign-out-title") == "Sign out?"
        button(driver, "Cancel").click()
    finally:
        driver.quit()


# --- Deleting the account -------------------------------------------------------------------

def test_delete_account_needs_the_password_then_removes_everything(account_server):
    base = account_server
    account = register(base, "del")
    driver = browser()
    try:
        sign_in(driver, base, account)
        new_note(driver, "Of the old account", "deleted with it")
        wait(driver, lambda d: "Of the old account" in server_titles(base, account), timeout=15, message="synced")
        user = driver.execute_script("return window.noted.auth.session.user")
        assert any(n.endswith(":" + user) for n in database_names(driver))
        open_account(driver)
        open_delete(driver)
        dialog_text = text_of(driver, "delete-account-dialog")
        assert "deleted for good" in dialog_text, dialog_text
        assert driver.switch_to.active_element.get_attribute("id") == "delete-password"

        # The wrong password: the server's message; nothing deleted.
        fill(driver, {"Password": "not the password"})
        button(driver, "Delete account").click()
        wait(driver, lambda d: "the password is not right" in text_of(d, "delete-account-error"), message="refused")
        assert not signed_out(driver)
        assert "Of the old account" in server_titles(base, account)
        wait(driver, lambda d: status(d) == "online", message="syncing again")

        # Cancel, then again with the right password.
        driver.find_element(By.ID, "delete-account-cancel").click()
        wait(driver, lambda d: not d.execute_script("return document.getElementById('delete-account-dialog').open"))
        assert driver.switch_to.active_element.get_attribute("id") == "delete-account-open"
        open_delete(driver)
        fill(driver, {"Password": account[1]})
        button(driver, "Delete account").click()
        wait(driver, signed_out, message="the welcome page")
        wait(driver, lambda d: signed_out_reason(d) == "Your account was deleted.", message="said so")
        assert not any(n.endswith(":" + user) for n in database_names(driver)), database_names(driver)
        assert driver.execute_script("return localStorage.getItem('noted.account')") is None

        # On the server: gone, and the username free again.
        assert requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]}).status_code == 401
        again = requests.post(base + "/v1/accounts", json={"username": account[0], "password": account[1]})
        assert again.status_code == 201, again.text

        # Signing in again in this browser: the new account, none of the old one's notes.
        sign_in(driver, base, account)
        assert driver.execute_script("return window.noted.auth.session.user") != user
        time.sleep(0.5)
        assert titles(driver) == []
        assert driver.find_element(By.ID, "empty").is_displayed()
        assert signed_out_reason(driver) == ""
    finally:
        driver.quit()


def test_another_browser_says_why_it_was_signed_out(account_server):
    """A second browser of the account: signed out with the reason, within a few seconds, when
    the first changes the password, and when it deletes the account."""
    base = account_server
    account = register(base, "two")
    first, second = browser(), browser()
    try:
        sign_in(first, base, account)
        sign_in(second, base, account)
        open_account(first, rows=2)
        change_password(first, account[1], NEW_PASSWORD, NEW_PASSWORD)
        wait(first, lambda d: "1 other device signed out" in text_of(d, "password-done"), message="changed")
        wait(second, signed_out, timeout=5, message="the second browser signed out")
        wait(second, lambda d: "signed out on another device, or the password was changed" in signed_out_reason(d), message="why")
        assert signed_out_reason(second).startswith("Signed out:")

        account = (account[0], NEW_PASSWORD)
        sign_in(second, base, account)
        first.find_element(By.ID, "account-close").click()
        open_account(first, rows=2)
        open_delete(first)
        fill(first, {"Password": NEW_PASSWORD})
        button(first, "Delete account").click()
        wait(first, lambda d: signed_out_reason(d) == "Your account was deleted.", message="deleted")
        wait(second, signed_out, timeout=5, message="the second browser signed out")
        wait(second, lambda d: signed_out_reason(d) == "Signed out: the account was deleted.", message="why")
        assert second.find_element(By.ID, "signed-out-reason").get_attribute("role") == "status"
        # Said once: a reload shows the welcome page alone.
        second.refresh()
        wait(second, signed_out)
        time.sleep(0.3)
        assert signed_out_reason(second) == ""
    finally:
        first.quit()
        second.quit()


# --- With two-factor sign-in on: a code too ---------------------------------------------------

CODE_LABEL = "Code from your authenticator app or a recovery code"


def shown(driver, element_id):
    return driver.execute_script("const e = document.getElementById(arguments[0]); return Boolean(e && e.checkVisibility())", element_id)


def enrol_over_the_api(base, account):
    """Turns two-factor sign-in on for the account through the API (as an authenticator app
    would, with pyotp): the app's TOTP, its recovery codes and the codes used so far."""
    pyotp = pytest.importorskip("pyotp")
    headers = {"Authorization": "Bearer " + api_sign_in(base, account)["access_token"]}
    setup = requests.post(base + "/v1/account/2fa/setup", json={"password": account[1]}, headers=headers)
    assert setup.status_code == 200, setup.text
    totp = pyotp.parse_uri(setup.json()["uri"])
    used = set()
    enabled = requests.post(base + "/v1/account/2fa/enable", json={"code": fresh_code(totp, used)}, headers=headers)
    assert enabled.status_code == 200, enabled.text
    return totp, enabled.json()["recovery_codes"], used


def fresh_code(totp, used):
    """The app's code now if not used already (each signs in once), else the next one, waited
    for; never one about to change."""
    while totp.now() in used or 30 - time.time() % 30 < 3:
        time.sleep(0.5)
    code = totp.now()
    used.add(code)
    return code


def axe_checker(found):
    """A check of a view with axe-core in both colour schemes, its findings added to `found`;
    one that checks nothing where axe-selenium-python is not installed."""
    try:
        import axe_selenium_python  # noqa: F401
    except ImportError:
        return lambda driver, view: None
    return lambda driver, view: axe_in_both_schemes(driver, view, found)


def sessions(base, username, password, **extra):
    return requests.post(base + "/v1/sessions", json={"username": username, "password": password, **extra})


def test_with_two_factor_sign_in_on_changing_the_password_and_deleting_the_account_need_a_code(account_server):
    base = account_server
    account = register(base, "tfacode")
    found = []  # axe-core's findings, where axe-selenium-python is installed
    check = axe_checker(found)
    driver = browser()
    try:
        sign_in(driver, base, account)
        open_account(driver)
        wait(driver, lambda d: text_of(d, "two-factor-state").startswith("Off"), message="two-factor sign-in off")
        assert not shown(driver, "password-code"), "no code asked for without two-factor sign-in"

        # Turned on elsewhere while the panel shows it off: the server asks for the code, and
        # the form asks for it from then on, the passwords still typed; nothing changes.
        totp, recovery, used = enrol_over_the_api(base, account)
        change_password(driver, account[1], NEW_PASSWORD, NEW_PASSWORD)
        wait(driver, lambda d: text_of(d, "password-error").startswith("Password not changed: two-factor sign-in is on"),
             message="the code asked for")
        assert driver.find_element(By.ID, "password-error").get_attribute("role") == "alert"
        assert shown(driver, "password-code")
        code_box = field(driver, CODE_LABEL)
        assert code_box.get_attribute("id") == "password-code-input"
        assert driver.switch_to.active_element.get_attribute("id") == "password-code-input"
        assert code_box.get_attribute("aria-invalid") == "true"
        assert [field(driver, label).get_attribute("value") for label in ("Current password", "New password", "Confirm new password")] \
            == [account[1], NEW_PASSWORD, NEW_PASSWORD]
        wait(driver, lambda d: text_of(d, "two-factor-state").startswith("On"), message="the state read again")
        assert text_of(driver, "password-done") == ""
        r = sessions(base, account[0], NEW_PASSWORD, otp=recovery[9])
        assert r.status_code == 401 and r.json()["error"] == "invalid_credentials", r.text

        # Opened again: the code field from the start, for an authenticator app's code.
        driver.find_element(By.ID, "account-close").click()
        open_account(driver)
        wait(driver, lambda d: shown(d, "password-code"), message="the code field")
        code_box = field(driver, CODE_LABEL)
        assert (code_box.get_attribute("autocomplete"), code_box.get_attribute("inputmode")) == ("off", None)
        assert "changing the password needs a code" in text_of(driver, code_box.get_attribute("aria-describedby"))
        assert code_box.get_attribute("value") == ""
        check(driver, "Account panel asking for a code")

        # No code: said at once.
        change_password(driver, account[1], NEW_PASSWORD, NEW_PASSWORD)
        wait(driver, lambda d: text_of(d, "password-error") == "Enter a code from your authenticator app or a recovery code.",
             message="no code")
        assert driver.switch_to.active_element.get_attribute("id") == "password-code-input"

        # A wrong code: said, the form still filled to try again; nothing changes.
        wrong = f"{(int(totp.now()) + 500000) % 1000000:06d}"
        fill(driver, {CODE_LABEL: wrong})
        button(driver, "Change password").click()
        wait(driver, lambda d: text_of(d, "password-error").startswith("Password not changed: the code is not right"), message="a wrong code")
        assert field(driver, CODE_LABEL).get_attribute("aria-invalid") == "true"
        assert driver.switch_to.active_element.get_attribute("id") == "password-code-input"
        assert [field(driver, label).get_attribute("value") for label in ("Current password", "New password", "Confirm new password", CODE_LABEL)] \
            == [account[1], NEW_PASSWORD, NEW_PASSWORD, wrong]
        check(driver, "Account panel with a wrong code")
        r = sessions(base, account[0], NEW_PASSWORD, otp=recovery[9])
        assert r.status_code == 401 and r.json()["error"] == "invalid_credentials", r.text

        # The app's code: changed (the API sign-in of the enrolment ended), the form emptied.
        fill(driver, {CODE_LABEL: fresh_code(totp, used)})
        button(driver, "Change password").click()
        wait(driver, lambda d: text_of(d, "password-done") == "Password changed; 1 other device signed out.", message="changed")
        assert text_of(driver, "password-error") == ""
        assert field(driver, CODE_LABEL).get_attribute("value") == "" and field(driver, CODE_LABEL).get_attribute("aria-invalid") is None
        assert shown(driver, "password-code"), "still asked for: two-factor sign-in is still on"
        r = sessions(base, account[0], account[1], otp=recovery[8])
        assert r.status_code == 401 and r.json()["error"] == "invalid_credentials", "the old password still signs in"
        r = sessions(base, account[0], NEW_PASSWORD)
        assert r.status_code == 401 and r.json()["error"] == "otp_required", r.text
        r = sessions(base, account[0], NEW_PASSWORD, otp=recovery[0])
        assert r.status_code == 200, r.text
        tokens = r.json()
        account = (account[0], NEW_PASSWORD)

        # Deleting the account: the code field there too.
        open_delete(driver)
        assert driver.switch_to.active_element.get_attribute("id") == "delete-password"
        assert shown(driver, "delete-code")
        delete_code = driver.find_element(By.ID, "delete-code-input")
        assert driver.execute_script("return arguments[0].labels[0].textContent", delete_code) == CODE_LABEL
        assert (delete_code.get_attribute("autocomplete"), delete_code.get_attribute("inputmode")) == ("off", None)
        fill(driver, {"Password": account[1]})
        button(driver, "Delete account").click()
        wait(driver, lambda d: text_of(d, "delete-account-error") == "Enter a code from your authenticator app or a recovery code.",
             message="no code")
        assert driver.switch_to.active_element.get_attribute("id") == "delete-code-input"
        check(driver, "delete dialog asking for a code")

        # A wrong code, then a wrong password with a right code: said, nothing deleted.
        delete_code.send_keys("00000-00000")
        button(driver, "Delete account").click()
        wait(driver, lambda d: text_of(d, "delete-account-error").startswith("Account not deleted: the code is not right"), message="a wrong code")
        assert delete_code.get_attribute("aria-invalid") == "true" and delete_code.get_attribute("value") == "00000-00000"
        assert driver.switch_to.active_element.get_attribute("id") == "delete-code-input"
        assert driver.find_element(By.ID, "delete-password").get_attribute("value") == account[1]
        fill(driver, {"Password": "not the password"})
        delete_code.clear()
        delete_code.send_keys(recovery[1])
        button(driver, "Delete account").click()
        wait(driver, lambda d: text_of(d, "delete-account-error") == "Account not deleted: the password is not right", message="a wrong password")
        assert driver.find_element(By.ID, "delete-password").get_attribute("aria-invalid") == "true"
        assert not signed_out(driver)
        assert requests.get(base + "/v1/account", headers={"Authorization": "Bearer " + tokens["access_token"]}).status_code == 200

        # A page that had not read the state sends no code: the server asks for it.
        driver.execute_script("document.getElementById('delete-code').hidden = true")
        fill(driver, {"Password": account[1]})
        button(driver, "Delete account").click()
        wait(driver, lambda d: text_of(d, "delete-account-error").startswith("Account not deleted: two-factor sign-in is on"),
             message="the code asked for")
        assert shown(driver, "delete-code") and driver.switch_to.active_element.get_attribute("id") == "delete-code-input"
        assert not signed_out(driver)

        # A recovery code (the one a wrong password did not use up): deleted.
        delete_code.clear()
        delete_code.send_keys(recovery[1])
        button(driver, "Delete account").click()
        wait(driver, signed_out, message="the welcome page")
        wait(driver, lambda d: signed_out_reason(d) == "Your account was deleted.", message="said so")
        assert requests.get(base + "/v1/account", headers={"Authorization": "Bearer " + tokens["access_token"]}).status_code == 401
        r = sessions(base, account[0], account[1], otp=recovery[2])
        assert r.status_code == 401 and r.json()["error"] == "invalid_credentials", r.text
    finally:
        driver.quit()
    assert not found, "\n".join(found)


# --- Accessibility --------------------------------------------------------------------------

def test_account_panel_and_delete_dialog_pass_axe_core(account_server):
    pytest.importorskip("axe_selenium_python")
    base = account_server
    account = register(base, "a11y")
    api_sign_in(base, account, device=str(uuid.uuid4()))  # a device with a "Sign out" button
    found = []

    def check(driver, view):
        axe_in_both_schemes(driver, view, found)

    for width, height in ((1280, 800), (390, 844)):
        driver = browser(width, height)
        try:
            sign_in(driver, base, account)
            open_account(driver, rows=2 if width > 400 else 3)
            check(driver, f"Account panel at {width}px")
            # Its size: within the window, nothing wider than the panel.
            fits = driver.execute_script("""
              const d = document.getElementById('account-dialog'), r = d.getBoundingClientRect();
              return r.left >= 0 && r.right <= innerWidth && d.scrollWidth <= d.clientWidth""")
            assert fits, f"the Account panel does not fit at {width}px"
            change_password(driver, "wrong password", NEW_PASSWORD, NEW_PASSWORD + "?")
            wait(driver, lambda d: "do not match" in text_of(d, "password-error"))
            check(driver, f"Account panel with an error at {width}px")
            driver.find_element(By.ID, "account-close").click()
            # A note written offline (at phone width the list, with the status, is behind the editor).
            time.sleep(1)
            set_offline(driver, True)
            wait(driver, lambda d: d.execute_script("return document.getElementById('sync-status').textContent") == "offline")
            new_note(driver, "Unsynced", "for the delete dialog")
            if driver.find_element(By.ID, "back").is_displayed():
                driver.find_element(By.ID, "back").click()
            wait(driver, lambda d: status(d) == "offline · 1 pending", message="1 pending")
            driver.find_element(By.ID, "account").click()
            wait(driver, panel_open)
            open_delete(driver)
            wait(driver, lambda d: "1 note in this browser is not synced" in text_of(d, "delete-account-unsynced-text"))
            check(driver, f"delete dialog with an unsynced note at {width}px")
            button(driver, "Delete account").click()
            wait(driver, lambda d: "Enter your password" in text_of(d, "delete-account-error"))
            check(driver, f"delete dialog with an error at {width}px")
            set_offline(driver, False)
        finally:
            driver.quit()
    # The welcome page saying why it is shown.
    driver = browser()
    try:
        sign_in(driver, base, account)
        driver.execute_script("sessionStorage.setItem('noted.signed-out', 'Signed out: the account was deleted.')")
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, signed_out)
        wait(driver, lambda d: signed_out_reason(d) != "", message="the note")
        check(driver, "welcome page with a note")
    finally:
        driver.quit()
    assert not found, "\n".join(found)


def test_a_session_lost_otherwise_says_so_and_keeps_the_unsynced_note(account_server):
    """A refresh answered invalid_grant with no reason from the server (the sign-in revoked while
    this browser was offline): the welcome page says the sign-in ended and that the unsynced
    note is kept; signing in again syncs it."""
    base = account_server
    account = register(base, "lost")
    driver = browser()
    try:
        sign_in(driver, base, account)
        write_offline_note(driver, "Written before the end", "kept")
        refresh = driver.execute_script("return window.noted.auth.session.refreshToken")
        assert requests.post(base + "/oauth/revoke", data={"token": refresh, "token_type_hint": "refresh_token", "client_id": "noted-web"}).status_code == 200
        driver.execute_script("window.noted.auth.invalidateAccessToken()")
        set_offline(driver, False)
        wait(driver, signed_out, timeout=15, message="the session is lost")
        wait(driver, lambda d: "sign-in has ended" in signed_out_reason(d), message="why")
        assert "1 note not synced yet is kept in this browser" in signed_out_reason(driver), signed_out_reason(driver)
        sign_in(driver, base, account)
        wait(driver, lambda d: "Written before the end" in server_titles(base, account), timeout=15, message="the note synced")
    finally:
        driver.quit()


# --- Download all notes (issue 16) ------------------------------------------------------------

def test_download_all_notes_gives_a_zip_of_every_note_as_markdown_or_json(account_server):
    import io
    import json
    import tempfile
    import zipfile
    base = account_server
    account = register(base, "dl")
    downloads = tempfile.mkdtemp(prefix="noted-downloads-")
    driver = browser()
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        sign_in(driver, base, account)
        new_note(driver, "Groceries 🛒", "- [ ] milk\n- [x] eggs")
        new_note(driver, "Quote \" colon: x", "second")
        # At once, typing still unsaved: the page pushes it before the server makes the zip.
        open_account(driver)
        driver.find_element(By.ID, "download-markdown").click()
        wait(driver, lambda d: "Downloaded noted-export-" in text_of(d, "download-done"), timeout=20, message="download said")
        assert text_of(driver, "download-done").endswith(", with every note."), text_of(driver, "download-done")
        wait(driver, lambda d: any(n.endswith(".zip") for n in os.listdir(downloads)), timeout=20, message="the zip saved")
        name = next(n for n in os.listdir(downloads) if n.endswith(".zip"))
        files = zipfile.ZipFile(os.path.join(downloads, name))
        assert sorted(files.namelist()) == ["Groceries 🛒.md", "Quote - colon- x.md"], files.namelist()
        text = files.read("Groceries 🛒.md").decode()
        assert text.startswith("---\ntitle: \"Groceries 🛒\"\n") and text.endswith("---\n\n- [ ] milk\n- [x] eggs"), text
        # The JSON button: the page says it downloaded (Chromium may hold a second download from
        # one page back; the endpoint's JSON is checked below).
        driver.execute_script("document.getElementById('download-done').textContent = ''")
        driver.find_element(By.ID, "download-json").click()
        wait(driver, lambda d: "Downloaded noted-export-" in text_of(d, "download-done"), timeout=20, message="JSON download said")
        assert text_of(driver, "download-error") == ""
    finally:
        driver.quit()
    # The endpoint itself: a token is required, the format checked, JSON holds every field.
    tokens = api_sign_in(base, account)
    headers = {"Authorization": "Bearer " + tokens["access_token"]}
    assert requests.get(base + "/v1/export").status_code == 401
    assert requests.get(base + "/v1/export?format=pdf", headers=headers).status_code == 400
    answer = requests.get(base + "/v1/export?format=json", headers=headers)
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/zip"
    assert answer.headers["Content-Disposition"].startswith("attachment; filename=\"noted-export-")
    document = json.loads(zipfile.ZipFile(io.BytesIO(answer.content)).read("notes.json"))
    assert sorted(n["title"] for n in document["notes"]) == ["Groceries 🛒", "Quote \" colon: x"]
    assert all(set(n) >= {"id", "body", "tags", "folder", "pinned", "trashed", "created", "updated"} for n in document["notes"])


# --- Removing this browser's copy of the notes (security review 3, L2) ------------------------
# After a sign-out the account's IndexedDB database stays for offline use and the next sign-in;
# on a shared or lent computer the person signing out removes it: on by default for "Sign out
# everywhere", offered (off) for a plain sign-out, on the welcome page after it.

def pointer(driver):
    """The database `noted-current` names as the one opened at start (None: none)."""
    return driver.execute_async_script("""
      const done = arguments[0];
      const req = indexedDB.open('noted-current', 1);
      req.onupgradeneeded = () => req.result.createObjectStore('current');
      req.onerror = () => done('error: ' + req.error);
      req.onsuccess = () => {
        const db = req.result;
        const get = db.transaction('current', 'readonly').objectStore('current').get('database');
        get.onsuccess = () => { db.close(); done(get.result === undefined ? null : get.result); };
        get.onerror = () => { db.close(); done('error: ' + get.error); };
      };""")


def cached_api_urls(driver):
    """The Cache Storage entries of the origin under /v1/ or /oauth/ (the account's data)."""
    return driver.execute_async_script("""
      const done = arguments[0];
      (async () => {
        const out = [];
        for (const name of await caches.keys()) {
          for (const req of await (await caches.open(name)).keys()) {
            if (/^\\/(v1|oauth)(\\/|$)/.test(new URL(req.url).pathname)) out.push(req.url);
          }
        }
        return out;
      })().then(done, (e) => done(['error: ' + e]));""")


def welcome_shows_nothing_of(driver, *texts):
    """The welcome page, reloaded: the sign-in button, no notes app, no offer of a copy to
    remove, none of `texts` anywhere in the page."""
    driver.refresh()
    wait(driver, signed_out, message="the welcome page after a reload")
    time.sleep(0.3)  # the page has done what it does at start
    assert driver.find_element(By.ID, "sign-in").is_displayed()
    assert not driver.find_element(By.ID, "app").is_displayed()
    assert not shown(driver, "local-copy"), "a copy offered for removal after it was removed"
    assert titles(driver) == []
    html = driver.execute_script("return document.documentElement.outerHTML")
    for text in texts:
        assert text not in html, text


def test_sign_out_everywhere_removes_this_browsers_copy_of_the_notes_by_default(account_server):
    base = account_server
    account = register(base, "gone")
    driver = browser()
    try:
        sign_in(driver, base, account)
        new_note(driver, "Kept on the server only", "not in this browser once signed out")
        wait(driver, lambda d: "Kept on the server only" in server_titles(base, account), timeout=15, message="synced")
        wait(driver, lambda d: status(d) == "online", message="nothing pending")
        name = driver.execute_script("return window.noted.store.name")
        assert name in database_names(driver) and pointer(driver) == name
        open_account(driver)
        box = driver.find_element(By.ID, "sign-out-everywhere-remove")
        assert box.is_selected(), "on by default for Sign out everywhere"
        assert field_label(driver, "sign-out-everywhere-remove") == "Also remove this browser’s copy of the notes"
        button(driver, "Sign out everywhere").click()
        wait(driver, signed_out, message="signed out everywhere")
        # Gone: the database, the entry naming it, the page's note of it; nothing to explain.
        assert name not in database_names(driver), database_names(driver)
        assert not any(n.startswith("noted:") for n in database_names(driver)), database_names(driver)
        assert pointer(driver) is None
        assert driver.execute_script("return localStorage.getItem('noted.account')") is None
        assert cached_api_urls(driver) == []
        assert signed_out_reason(driver) == ""
        welcome_shows_nothing_of(driver, "Kept on the server only", "not in this browser")
        assert name not in database_names(driver)
        # The server kept it: signing in again brings it back.
        sign_in(driver, base, account)
        wait(driver, lambda d: titles(d) == ["Kept on the server only"], timeout=15, message="the note from the server")
        # Unticked: ending every sign-in keeps the copy, as a plain sign-out does.
        open_account(driver)
        tick(driver, "sign-out-everywhere-remove")
        assert not driver.find_element(By.ID, "sign-out-everywhere-remove").is_selected()
        button(driver, "Sign out everywhere").click()
        wait(driver, signed_out, message="signed out everywhere, keeping the copy")
        assert name in database_names(driver)
        assert shown(driver, "local-copy")
    finally:
        driver.quit()


def tick(driver, element_id):
    """Clicks a checkbox's label, as a person would (the box scrolled to the middle first)."""
    label = driver.find_element(By.CSS_SELECTOR, f'label[for="{element_id}"]')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", label)
    label.click()


def field_label(driver, element_id):
    return driver.execute_script("return document.querySelector(`label[for=\"${arguments[0]}\"]`).textContent.trim()", element_id)


def test_a_plain_sign_out_keeps_the_copy_and_the_welcome_page_offers_to_remove_it(account_server):
    base = account_server
    account = register(base, "lent")
    found = []  # axe-core's findings, where axe-selenium-python is installed
    check = axe_checker(found)
    driver = browser()
    try:
        sign_in(driver, base, account)
        new_note(driver, "On a lent computer", "remove me from here")
        wait(driver, lambda d: "On a lent computer" in server_titles(base, account), timeout=15, message="synced")
        wait(driver, lambda d: status(d) == "online", message="nothing pending")
        name = driver.execute_script("return window.noted.store.name")
        # Nothing unsynced: one click, the copy kept (off by default).
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, signed_out, message="signed out")
        assert name in database_names(driver)
        wait(driver, lambda d: shown(d, "local-copy"), message="the offer to remove the copy")
        assert "On a lent computer" not in driver.execute_script("return document.body.innerText")
        check(driver, "welcome page offering to remove the copy")
        button(driver, "Remove this browser’s copy of the notes").click()
        wait(driver, lambda d: signed_out_reason(d) == "This browser’s copy of the notes was removed.", message="said so")
        assert name not in database_names(driver), database_names(driver)
        assert pointer(driver) is None and not shown(driver, "local-copy")
        assert driver.switch_to.active_element.get_attribute("id") == "sign-in"
        welcome_shows_nothing_of(driver, "On a lent computer", "remove me from here")
    finally:
        driver.quit()
    assert not found, "\n".join(found)


def test_removing_the_copy_with_an_unsynced_note_warns_and_keeps_it_unless_removed_anyway(account_server):
    """Offline, a note not on the server: the sign-out dialog offers the removal unticked; ticked,
    it says what would be lost, and "Sync, then sign out" says it cannot (offline); Cancel keeps
    everything. Signed out keeping it, the welcome page asks again before removing: "Keep them"
    keeps it, and it syncs at the next sign-in. Then "Remove anyway" removes an unsynced note,
    as asked."""
    base = account_server
    account = register(base, "warn")
    found = []
    try:
        import axe_selenium_python  # noqa: F401
        check = lambda driver, view: axe_in_both_schemes(driver, view, found)  # noqa: E731
    except ImportError:
        check = lambda driver, view: None  # noqa: E731
    driver = browser()
    try:
        sign_in(driver, base, account)
        name = driver.execute_script("return window.noted.store.name")
        write_offline_note(driver, "Not on the server yet", "kept unless removed anyway")
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog")
        box = driver.find_element(By.ID, "sign-out-remove")
        assert not box.is_selected(), "off by default with an unsynced note"
        assert text_of(driver, "sign-out-warning") == ""
        tick(driver, "sign-out-remove")
        wait(driver, lambda d: text_of(d, "sign-out-warning").startswith("1 edit on this browser has not reached the server yet"), message="the warning")
        assert "removing this browser’s copy loses it" in text_of(driver, "sign-out-warning")
        assert driver.find_element(By.ID, "sign-out-warning").get_attribute("role") == "alert"
        assert text_of(driver, "sign-out-anyway") == "Remove anyway and sign out"
        check(driver, "sign-out dialog with the removal ticked")
        button(driver, "Sync, then sign out").click()
        wait(driver, lambda d: "this browser is offline" in text_of(d, "sign-out-syncing"), message="cannot sync offline")
        assert dialog_open(driver)
        # Not confirmed: Cancel. Everything kept, still signed in.
        button(driver, "Cancel").click()
        wait(driver, lambda d: not dialog_open(d), message="the dialog closed")
        assert driver.find_element(By.ID, "app").is_displayed() and status(driver) == "offline · 1 pending"
        assert name in database_names(driver)
        # Again: the box unticked again; signing out keeps the note.
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog again")
        assert not driver.find_element(By.ID, "sign-out-remove").is_selected()
        assert text_of(driver, "sign-out-anyway") == "Sign out anyway"
        button(driver, "Sign out anyway").click()
        wait(driver, signed_out, message="signed out, keeping the note")
        assert name in database_names(driver)
        # The welcome page asks before removing it.
        wait(driver, lambda d: shown(d, "local-copy"), message="the offer")
        button(driver, "Remove this browser’s copy of the notes").click()
        wait(driver, lambda d: shown(d, "local-copy-confirm"), message="the warning on the welcome page")
        assert text_of(driver, "local-copy-warning").startswith("1 edit on this browser has not reached the server yet. Sign in again to sync it first")
        assert driver.switch_to.active_element.get_attribute("id") == "local-copy-keep"
        check(driver, "welcome page warning before removing an unsynced note")
        button(driver, "Export them to a file").click()
        wait(driver, lambda d: text_of(d, "local-copy-exported").startswith("Exported 1 note to noted-unsynced-"), message="exported")
        button(driver, "Keep them").click()
        wait(driver, lambda d: not shown(d, "local-copy-confirm"), message="kept")
        assert name in database_names(driver)
        # Online, signed in again: the note is there and syncs.
        set_offline(driver, False)
        sign_in(driver, base, account, sync_timeout=15)
        wait(driver, lambda d: "Not on the server yet" in server_titles(base, account), timeout=15, message="the kept note synced")
        # Another unsynced note, then removed anyway, as asked: gone from this browser (and,
        # never synced, from everywhere: that is what the warning said).
        write_offline_note(driver, "Removed anyway", "lost, as the warning said")
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog, last time")
        tick(driver, "sign-out-remove")
        button(driver, "Remove anyway and sign out").click()
        wait(driver, signed_out, message="signed out, the copy removed")
        wait(driver, lambda d: name not in database_names(d), message="the database gone")
        welcome_shows_nothing_of(driver, "Removed anyway", "Not on the server yet")
        set_offline(driver, False)
        assert "Removed anyway" not in server_titles(base, account)
    finally:
        driver.quit()
    assert not found, "\n".join(found)


# --- What the account uses (GET /v1/account's usage) -----------------------------------------
# The panel says what the quota counts (notes, files and their history), the history's part,
# the records, and the quotas; at or over the storage quota, that edits are refused until
# something is deleted. Sizes in units of 1024 (Web/usage.js).

QUOTA = 51200  # "50 KB"


@pytest.fixture(scope="module")
def quota_server():
    # Its own server: a quota that a few notes and their history fill.
    yield from run_server("--auth-attempts-per-minute", "1000", "--quota-bytes", str(QUOTA))


def size_text(n):
    """A size as Web/usage.js writes it in English: bytes under 1 KB, else KB, MB… (1 KB = 1024
    bytes) with one decimal under 100, none from 100, no trailing ".0"."""
    if n < 1024:
        return f"{n:,} byte{'' if n == 1 else 's'}"

    def shown(v):
        return math.floor(v * 10 + 0.5) / 10 if v < 99.95 else math.floor(v + 0.5)
    value, unit = n / 1024, 0
    while shown(value) >= 1024 and unit < 3:
        value, unit = value / 1024, unit + 1
    return f"{shown(value):,.1f}".removesuffix(".0") + " " + ["KB", "MB", "GB", "TB"][unit]


def test_size_text_matches_the_web_apps_examples():
    assert [size_text(n) for n in (0, 1, 1023, 1024, 1536, 51200, 12897485, 1 << 30, 1048575)] == \
        ["0 bytes", "1 byte", "1,023 bytes", "1 KB", "1.5 KB", "50 KB", "12.3 MB", "1 GB", "1 MB"]


def usage_of(base, headers):
    r = requests.get(base + "/v1/account", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["usage"]


def usage_shown(driver):
    """The panel's usage section as shown: its text, tooltip, meter and warning."""
    return driver.execute_script("""
      const $ = (id) => document.getElementById(id);
      const m = $('usage-meter');
      return { text: $('usage-text').textContent, title: $('usage-text').title, full: $('usage-full').textContent,
               fullRole: $('usage-full').getAttribute('role'), meterShown: !m.hidden && m.offsetParent !== null,
               value: m.value, max: m.max, valuetext: m.getAttribute('aria-valuetext'), meterName: m.getAttribute('aria-label') }""")


def expected_text(usage):
    records = usage["records"]
    return (f"Storage: {size_text(usage['bytes'])} of {size_text(QUOTA)} used (history {size_text(usage['history_bytes'])})"
            f" · {records:,} {'note or record' if records == 1 else 'notes and records'} of 1,000,000")


def reopen_account(driver):
    driver.find_element(By.ID, "account-close").click()
    wait(driver, lambda d: not panel_open(d), message="the panel closed")
    open_account(driver)


def push_body(base, headers, note, body):
    """Sets a note's body over the API: the push's result (an ack or a reject)."""
    change = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note["id"], "baseRev": note["rev"], "op": "upsert",
              "fields": {"body": {"set": body}}}
    r = requests.post(base + "/v1/push", json={"changes": [change]}, headers=headers)
    assert r.status_code == 200, r.text
    result = r.json()["results"][0]
    if result.get("type") == "ack":
        note["rev"] = result["rev"]
    return result


def server_note(base, headers, title):
    r = requests.get(base + "/v1/changes?since=0", headers=headers)
    assert r.status_code == 200, r.text
    return next((rec for rec in r.json()["records"] if rec["fields"].get("title") == title), None)


def test_account_panel_shows_what_the_account_uses_and_when_it_is_full(quota_server):
    base = quota_server
    account = register(base, "usage")
    headers = {"Authorization": "Bearer " + api_sign_in(base, account)["access_token"]}
    found = []  # axe-core's findings, where axe-selenium-python is installed
    check = axe_checker(found)
    driver = browser()
    try:
        sign_in(driver, base, account)
        # Two notes written here, one edited twice: each save keeps a revision in the history.
        new_note(driver, "Usage one", "a short note")
        new_note(driver, "Usage two", "first words")
        for text in ("y" * 3000, "z" * 3500):
            set_body(driver, text)
            wait(driver, lambda d: (server_note(base, headers, "Usage two") or {"fields": {}})["fields"].get("body") == text, timeout=15,
                 message="the edit synced")
        wait(driver, lambda d: (server_note(base, headers, "Usage one") or {"fields": {}})["fields"].get("body") == "a short note", timeout=15,
             message="synced")
        open_note(driver, "Usage one")  # the note edited over the API below is not open here
        time.sleep(0.5)  # nothing left to push
        usage = usage_of(base, headers)
        assert usage["quota_bytes"] == QUOTA and usage["records"] == 2, usage
        assert 0 < usage["history_bytes"] < usage["bytes"] < QUOTA, usage

        # Opened: read from GET /v1/account with the two-factor state.
        open_account(driver)
        wait(driver, lambda d: usage_shown(d)["text"] != "Loading…", message="the usage read")
        shown_now = usage_shown(driver)
        assert shown_now["text"] == expected_text(usage), (shown_now, usage)
        assert shown_now["text"].startswith("Storage: ") and "of 50 KB used (history " in shown_now["text"]
        assert " · 2 notes and records of 1,000,000" in shown_now["text"]
        assert "1 KB = 1024 bytes" in shown_now["title"]
        assert shown_now["meterShown"] and shown_now["meterName"] == "Storage used"
        assert (shown_now["value"], shown_now["max"]) == (usage["bytes"], QUOTA)
        assert shown_now["valuetext"] == f"{size_text(usage['bytes'])} of 50 KB, {usage['bytes'] * 100 // QUOTA}% used"
        assert shown_now["full"] == "" and shown_now["fullRole"] == "alert"
        assert text_of(driver, "two-factor-state").startswith("Off"), "the same read shows two-factor sign-in"
        check(driver, "Account panel with the usage under the quota")

        # Filled past the quota elsewhere (each edit's revision counts): the next edit is refused.
        note = server_note(base, headers, "Usage two")
        for i in range(40):
            result = push_body(base, headers, note, chr(ord("a") + i % 26) * 4000)
            if result.get("type") == "reject":
                break
        assert result.get("code") == "quota_exceeded", result
        full = usage_of(base, headers)
        assert full["bytes"] > QUOTA, full
        reopen_account(driver)
        wait(driver, lambda d: usage_shown(d)["full"] != "", message="the account said full")
        shown_now = usage_shown(driver)
        assert shown_now["text"] == expected_text(full), (shown_now, full)
        assert shown_now["full"].startswith("The account’s storage is full: new edits are refused until something is deleted."), shown_now
        assert "also deletes its history" in shown_now["full"]
        assert (shown_now["value"], shown_now["max"]) == (QUOTA, QUOTA)
        assert shown_now["valuetext"].endswith(f"{full['bytes'] * 100 // QUOTA}% used")
        check(driver, "Account panel with the account over its quota")

        # Deleted (its history goes with it): under the quota again, no warning.
        r = requests.post(base + "/v1/push", headers=headers, json={"changes": [
            {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note["id"], "baseRev": note["rev"], "op": "delete", "fields": {}}]})
        assert r.status_code == 200 and r.json()["results"][0]["type"] == "ack", r.text
        after = usage_of(base, headers)
        assert after["bytes"] < QUOTA and after["records"] == 1, after
        reopen_account(driver)
        wait(driver, lambda d: usage_shown(d)["full"] == "" and usage_shown(d)["text"] == expected_text(after), message="the usage after the delete")
        assert usage_shown(driver)["text"].endswith(" · 1 note or record of 1,000,000")
    finally:
        driver.quit()
    assert not found, "\n".join(found)
