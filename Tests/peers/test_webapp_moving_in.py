"""Moving in, in a real browser (headless Chromium driven by Selenium against a real
noted-server, as test_webapp.py, whose helpers these are): two-factor sign-in turned on from the
Account panel (its QR code checked against the Python `qrcode` library, codes made by `pyotp`),
then signing in through the server's pages with a code and with a recovery code, and turning
it off; importing another app's export uploaded from the panel; axe-core over both. Skipped
with a printed notice where Chromium cannot be found."""
import json
import os
import re
import tempfile
import uuid
import time
import urllib.parse

import pytest
import requests

from test_webapp import (  # noqa: F401 (skips this module, as that one, without Chromium)
    By, WebDriverException, axe_in_both_schemes, browser, button, field, register, run_server, set_offline, sign_in, signed_out,
    status, titles, wait,
)
from test_webapp_account import fill, open_account, panel_open, text_of

pyotp = pytest.importorskip("pyotp")
from qr_reference import format_mask, reference  # noqa: E402


@pytest.fixture(scope="module")
def moving_server():
    # Its own server: these tests sign in many times, with wrong codes too.
    yield from run_server("--auth-attempts-per-minute", "1000")


# --- Two-factor sign-in ---------------------------------------------------------------------

def two_factor_open(driver):
    return driver.execute_script("const d = document.getElementById('two-factor-dialog'); return d.open && d.matches(':modal')")


def shown(driver, element_id):
    return driver.execute_script("const e = document.getElementById(arguments[0]); return Boolean(e && e.checkVisibility())", element_id)


def fresh_code(secret, used):
    """The app's code now, if not used already (a server may refuse a code used again in its 30
    seconds): else the next one, waited for. Never one about to change."""
    totp = pyotp.TOTP(secret)
    while totp.now() in used or 30 - time.time() % 30 < 3:
        time.sleep(0.5)
    code = totp.now()
    used.add(code)
    return code


def svg_matrix(driver):
    """The QR code as drawn: the modules of the SVG's path (a rectangle per run of dark
    modules, "M{x} {y}h{run}v1h-{run}z"), less the quiet zone, and the SVG's attributes."""
    svg = driver.find_element(By.CSS_SELECTOR, "#two-factor-qr svg")
    view, d = driver.execute_script("return [arguments[0].getAttribute('viewBox'), arguments[0].querySelector('path').getAttribute('d')]", svg)
    side = int(view.split()[2])
    grid = [["0"] * (side - 8) for _ in range(side - 8)]
    runs = re.findall(r"M(\d+) (\d+)h(\d+)v1h-\3z", d)
    assert "".join(f"M{x} {y}h{n}v1h-{n}z" for x, y, n in runs) == d, "the path is runs of modules alone"
    for x, y, n in runs:
        for k in range(int(n)):
            grid[int(y) - 4][int(x) - 4 + k] = "1"
    return ["".join(line) for line in grid], {name: svg.get_attribute(name) for name in ("role", "aria-label")}


def storage_dump(driver):
    """Everything this origin keeps: localStorage, sessionStorage and every IndexedDB record."""
    return driver.execute_async_script("""
      const done = arguments[arguments.length - 1];
      const request = (r) => new Promise((ok, no) => { r.onsuccess = () => ok(r.result); r.onerror = () => no(r.error); });
      (async () => {
        const parts = [JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage })];
        for (const { name } of await indexedDB.databases()) {
          const db = await request(indexedDB.open(name));
          for (const store of db.objectStoreNames) parts.push(JSON.stringify(await request(db.transaction(store).objectStore(store).getAll())));
          db.close();
        }
        done(parts.join("\\n"));
      })().catch((error) => done("ERROR " + error));""")


def sign_in_with_code(driver, base, account, code):
    """Signs in through the server's pages: the password, then the "Authentication code" page
    (`code`: from the app, or a recovery code). True once the app shows, False if the code page
    came back instead."""
    driver.get(base + "/")
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed() or d.find_element(By.ID, "app").is_displayed())
    assert not driver.find_element(By.ID, "app").is_displayed(), "signed in already"
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait(driver, lambda d: "/oauth/authorize" in d.current_url)
    driver.find_element(By.CSS_SELECTOR, "input[name=username]").send_keys(account[0])
    driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(account[1])
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "input[name=otp]"), message="the code page after the password")
    assert "Authentication code" in driver.find_element(By.TAG_NAME, "body").text
    driver.execute_script("window.beforeVerify = true")
    driver.find_element(By.CSS_SELECTOR, "input[name=otp]").send_keys(code)
    driver.find_element(By.XPATH, "//button[normalize-space()='Verify']").click()
    wait(driver, lambda d: d.execute_script("return !window.beforeVerify") and (
        d.find_elements(By.CSS_SELECTOR, "input[name=otp]") or d.execute_script("const a = document.getElementById('app'); return Boolean(a && !a.hidden)")),
        message="the app, or the code page again")
    return not driver.find_elements(By.CSS_SELECTOR, "input[name=otp]")


def sessions(base, account, **extra):
    return requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1], **extra})


def start_turning_on(driver, password):
    """From the open Account panel to the dialog's second step: the QR code and the key."""
    wait(driver, lambda d: shown(d, "two-factor-on"), message="Turn on two-factor sign-in")
    button(driver, "Turn on two-factor sign-in").click()
    wait(driver, two_factor_open, message="the two-factor dialog")
    fill(driver, {"Your password": password})
    button(driver, "Continue").click()
    wait(driver, lambda d: d.find_element(By.ID, "two-factor-secret").get_attribute("value"), message="the key")


def test_two_factor_sign_in_turned_on_used_with_a_code_and_a_recovery_code_then_turned_off(moving_server):
    base = moving_server
    account = register(base, "tfa")
    downloads = tempfile.mkdtemp(prefix="noted-downloads-")
    used = set()
    driver = browser()
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        sign_in(driver, base, account)
        open_account(driver)
        wait(driver, lambda d: text_of(d, "two-factor-state").startswith("Off"), message="off at first")
        assert not shown(driver, "two-factor-off")

        # The password first: none, then a wrong one (the server's message, in an alert).
        button(driver, "Turn on two-factor sign-in").click()
        wait(driver, two_factor_open, message="the two-factor dialog")
        assert driver.switch_to.active_element.get_attribute("id") == "two-factor-password"
        assert text_of(driver, "two-factor-dialog-title") == "Turn on two-factor sign-in"
        button(driver, "Continue").click()
        wait(driver, lambda d: text_of(d, "two-factor-password-error") == "Enter your password.", message="no password")
        fill(driver, {"Your password": "not the password"})
        button(driver, "Continue").click()
        wait(driver, lambda d: text_of(d, "two-factor-password-error").startswith("Not turned on: "), message="refused")
        assert driver.find_element(By.ID, "two-factor-password-error").get_attribute("role") == "alert"
        assert field(driver, "Your password").get_attribute("aria-invalid") == "true"
        assert sessions(base, account).status_code == 200  # still off

        # The right one: the QR code and the key, in groups of four and plain.
        fill(driver, {"Your password": account[1]})
        button(driver, "Continue").click()
        wait(driver, lambda d: d.find_element(By.ID, "two-factor-secret").get_attribute("value"), message="the key")
        secret = driver.find_element(By.ID, "two-factor-secret").get_attribute("value")
        assert re.fullmatch(r"[A-Z2-7]{32}", secret), secret
        assert text_of(driver, "two-factor-secret-grouped") == " ".join(secret[i:i + 4] for i in range(0, 32, 4))
        assert driver.switch_to.active_element.get_attribute("id") == "two-factor-dialog-title"
        uri = driver.find_element(By.ID, "two-factor-uri").get_attribute("href")
        parsed = urllib.parse.urlparse(uri)
        query = urllib.parse.parse_qs(parsed.query)
        assert parsed.scheme == "otpauth" and parsed.netloc == "totp" and urllib.parse.unquote(parsed.path) == f"/Noted:{account[0]}", uri
        assert query["secret"] == [secret] and query["issuer"] == ["Noted"], uri
        # The QR code holds the URI: the drawn modules are qrcode's symbol of it, same version and mask.
        drawn, attributes = svg_matrix(driver)
        version = (len(drawn) - 17) // 4
        expected_version, _ = reference(uri)
        assert version == expected_version, (version, expected_version)
        _, expected = reference(uri, version=version, mask=format_mask(drawn))
        assert drawn == expected, "the QR code is not the URI's"
        assert attributes["role"] == "img" and "authenticator app" in attributes["aria-label"], attributes
        # Kept nowhere but on the page.
        assert secret not in storage_dump(driver)

        # A wrong code: said, the field marked, the step kept. The right one: the recovery codes.
        wrong = f"{(int(pyotp.TOTP(secret).now()) + 500000) % 1000000:06d}"
        fill(driver, {"Code from your app": wrong})
        button(driver, "Turn on").click()
        wait(driver, lambda d: text_of(d, "two-factor-scan-error").startswith("Not turned on: "), message="a wrong code")
        assert field(driver, "Code from your app").get_attribute("aria-invalid") == "true"
        assert shown(driver, "two-factor-qr")
        fill(driver, {"Code from your app": fresh_code(secret, used)})
        button(driver, "Turn on").click()
        wait(driver, lambda d: shown(d, "two-factor-codes"), message="the recovery codes")
        codes = driver.execute_script("return [...document.querySelectorAll('#two-factor-codes-list li')].map(li => li.textContent)")
        assert len(codes) == 10 and len(set(codes)) == 10, codes
        assert "shown only this once" in text_of(driver, "two-factor-codes")
        assert text_of(driver, "two-factor-dialog-title") == "Save your recovery codes"
        assert not shown(driver, "two-factor-qr") and driver.find_element(By.ID, "two-factor-secret").get_attribute("value") == ""
        button(driver, "Download recovery codes").click()
        saved_path = os.path.join(downloads, "noted-recovery-codes.txt")

        def saved_text():
            # Chromium may show the file before its bytes are in it: read until they are.
            try:
                with open(saved_path) as saved:
                    return saved.read()
            except FileNotFoundError:
                return ""

        wait(driver, lambda d: saved_text().strip() != "", timeout=10, message="the codes saved")
        text = saved_text()
        assert all(code in text.splitlines() for code in codes) and account[0] in text, text
        assert text_of(driver, "two-factor-downloaded") == "Downloaded noted-recovery-codes.txt."
        button(driver, "Done").click()
        wait(driver, lambda d: not two_factor_open(d), message="closed")
        assert panel_open(driver)
        assert driver.switch_to.active_element.get_attribute("id") == "two-factor-title"
        wait(driver, lambda d: text_of(d, "two-factor-state").startswith("On") and "10 recovery codes left" in text_of(d, "two-factor-state"),
             message="on, 10 codes")
        assert shown(driver, "two-factor-off") and not shown(driver, "two-factor-on")
        assert driver.execute_script("return document.documentElement.outerHTML.includes(arguments[0])", secret) is False
        assert secret not in storage_dump(driver)

        # The API: the code is asked for, and a wrong one refused.
        r = sessions(base, account)
        assert r.status_code == 401 and r.json()["error"] == "otp_required", r.text
        r = sessions(base, account, otp=wrong)
        assert r.status_code == 401 and r.json()["error"] == "invalid_otp", r.text

        # The sign-in page: a recovery code works once.
        driver.find_element(By.ID, "account-close").click()
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, signed_out, message="signed out")
        assert sign_in_with_code(driver, base, account, codes[0]), "the recovery code refused"
        wait(driver, lambda d: "online" in status(d), message="online")
        open_account(driver)
        wait(driver, lambda d: "9 recovery codes left" in text_of(d, "two-factor-state"), message="9 left")
        driver.find_element(By.ID, "account-close").click()
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, signed_out, message="signed out")
        assert not sign_in_with_code(driver, base, account, codes[0]), "a recovery code used twice"
        assert not driver.execute_script("const a = document.getElementById('app'); return Boolean(a && !a.hidden)")

        # A code from the app.
        assert sign_in_with_code(driver, base, account, fresh_code(secret, used)), "the app's code refused"
        wait(driver, lambda d: "online" in status(d), message="online")

        # Turning it off: the password and a code (a recovery code here); a wrong code first.
        open_account(driver)
        wait(driver, lambda d: shown(d, "two-factor-off"), message="Turn off two-factor sign-in")
        button(driver, "Turn off two-factor sign-in").click()
        wait(driver, two_factor_open, message="the dialog, to turn off")
        assert text_of(driver, "two-factor-dialog-title") == "Turn off two-factor sign-in"
        fill(driver, {"Your password": account[1], "Code from your app or a recovery code": "00000-00000"})
        button(driver, "Turn off").click()
        wait(driver, lambda d: text_of(d, "two-factor-password-error").startswith("Not turned off: "), message="a wrong code")
        assert field(driver, "Code from your app or a recovery code").get_attribute("aria-invalid") == "true"
        fill(driver, {"Code from your app or a recovery code": codes[1]})
        button(driver, "Turn off").click()
        wait(driver, lambda d: not two_factor_open(d), message="turned off")
        wait(driver, lambda d: text_of(d, "two-factor-state").startswith("Off"), message="off again")
        assert text_of(driver, "two-factor-done") == "Two-factor sign-in is off."
        assert sessions(base, account).status_code == 200
    finally:
        driver.quit()


# --- Importing an export --------------------------------------------------------------------

def simplenote_export(path, notes, trashed=()):
    """A Simplenote export's notes.json (Tests/NotedPortingTests/Fixtures/simplenote): each note
    (id, content) with its title on the first line, CRLF line ends as Simplenote writes them."""
    def entry(note_id, content):
        return {"id": note_id, "content": content.replace("\n", "\r\n"), "creationDate": "2024-01-05T10:11:12.345Z",
                "lastModified": "2024-02-27T18:03:41.902Z", "tags": ["moved"]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"activeNotes": [entry(*n) if isinstance(n, tuple) else n for n in notes],
                   "trashedNotes": [entry(*n) for n in trashed]}, f, ensure_ascii=False, indent=2)
    return path


def import_file(driver, path, format_label=None):
    """Chooses the file (and format) in the Import notes section and starts the import."""
    if format_label:
        driver.find_element(By.XPATH, f"//select[@id='import-format']/option[normalize-space()='{format_label}']").click()
    driver.find_element(By.ID, "import-file").send_keys(path)
    driver.execute_script("document.getElementById('import-status').textContent = ''")
    button(driver, "Import").click()


def import_said(driver):
    return text_of(driver, "import-status") or text_of(driver, "import-error")


def server_records(base, account):
    token = requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]}).json()["access_token"]
    r = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + token})
    assert r.status_code == 200, r.text
    return [rec for rec in r.json()["records"] if not rec.get("deleted")]


def test_import_an_export_uploaded_from_the_account_panel(moving_server):
    base = moving_server
    account = register(base, "imp")
    folder = tempfile.mkdtemp(prefix="noted-import-")
    export = simplenote_export(os.path.join(folder, "notes.json"), [
        ("0f4e5d6c-7b8a-4c9d-8e1f-2a3b4c5d6e7f", "Moving in 🚚\n\nBoxes: 12\n- [ ] kitchen"),
        ("agtzaW1wbGUtbm90ZXIRCxIETm90ZRiAgICg7pKDCgw", "Кухня\n\nчайник, 抹茶"),
        {"id": "4a3b2c1d-0e9f-4a8b-9c7d-6e5f4a3b2c1d", "creationDate": "2024-03-01T09:00:00.000Z", "lastModified": "2024-03-01T09:00:00.000Z"},
    ], trashed=[("1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", "Old list\n\nnot needed")])
    driver = browser()
    try:
        sign_in(driver, base, account)
        open_account(driver)

        # No file chosen: said, nothing sent.
        button(driver, "Import").click()
        wait(driver, lambda d: text_of(d, "import-error") == "Choose the export file to import.", message="no file")
        assert field(driver, "Export file to import").get_attribute("aria-invalid") == "true"

        # The export, its format detected: the summary, the note without content skipped.
        import_file(driver, export)
        wait(driver, lambda d: text_of(d, "import-status").startswith("Imported"), timeout=20, message="imported")
        assert text_of(driver, "import-status") == "Imported 3 notes, updated 0, 0 unchanged; 1 skipped (listed below).", import_said(driver)
        skipped = driver.execute_script("return [...document.querySelectorAll('#import-skipped-list li')].map(li => li.textContent)")
        assert len(skipped) == 1 and re.match(r".+: .+", skipped[0]), skipped
        assert text_of(driver, "import-skipped-title") == "Skipped (1)"
        assert text_of(driver, "import-error") == "" and not shown(driver, "import-progress")
        # The notes arrive by sync: in the list, the trashed one in the trash on the server.
        driver.find_element(By.ID, "account-close").click()
        wait(driver, lambda d: {"Moving in 🚚", "Кухня"} <= {t.strip() for t in titles(d)}, timeout=15, message="the notes in the list")
        assert not any("Old list" in t for t in titles(driver))
        records = {rec["fields"].get("title"): rec["fields"] for rec in server_records(base, account)}
        assert set(records) == {"Moving in 🚚", "Кухня", "Old list"}, records
        assert records["Old list"].get("trashed") and not records["Кухня"].get("trashed")
        assert "Boxes: 12" in records["Moving in 🚚"]["body"] and "\r" not in records["Moving in 🚚"]["body"]

        # The same file again, its format named: nothing changes.
        open_account(driver)
        import_file(driver, export, "Simplenote")
        wait(driver, lambda d: text_of(d, "import-status").startswith("Imported"), timeout=20, message="imported again")
        assert text_of(driver, "import-status").startswith("Imported 0 notes, updated 0, 3 unchanged"), import_said(driver)
        assert len(server_records(base, account)) == 3

        # A note edited since keeps its edit: the file's version is added beside it, unless
        # "Replace" is ticked.
        moving = next(rec for rec in server_records(base, account) if rec["fields"].get("title") == "Moving in 🚚")
        token = requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]}).json()["access_token"]
        edit = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": moving["id"], "baseRev": moving["rev"], "op": "upsert",
                "fields": {"body": {"set": "Boxes: 13"}}}
        pushed = requests.post(base + "/v1/push", json={"changes": [edit]}, headers={"Authorization": "Bearer " + token})
        assert pushed.json()["results"][0]["type"] == "ack", pushed.text
        import_file(driver, export)
        wait(driver, lambda d: text_of(d, "import-status").startswith("Imported"), timeout=20, message="imported beside")
        assert text_of(driver, "import-status").startswith(
            "Imported 0 notes, updated 0, 2 unchanged, 1 added beside notes you have with other content"), import_said(driver)
        records = server_records(base, account)
        assert len(records) == 4 and {r["fields"]["body"] for r in records if r["id"] == moving["id"]} == {"Boxes: 13"}
        driver.find_element(By.ID, "import-replace").click()
        import_file(driver, export)
        wait(driver, lambda d: text_of(d, "import-status").startswith("Imported"), timeout=20, message="replaced")
        assert text_of(driver, "import-status").startswith("Imported 0 notes, updated 1, 2 unchanged"), import_said(driver)
        records = server_records(base, account)
        assert len(records) == 4 and "Boxes: 12" in next(r for r in records if r["id"] == moving["id"])["fields"]["body"]
        driver.find_element(By.ID, "import-replace").click()

        # A malformed file: the server's message with the file's name; nothing changed.
        broken = os.path.join(folder, "broken-notes.json")
        with open(broken, "w") as f:
            f.write('{\n  "activeNotes": [\n    {"id": "x", "content": "cut off\n')
        import_file(driver, broken, "Detect automatically")
        wait(driver, lambda d: text_of(d, "import-error"), timeout=20, message="refused")
        error = text_of(driver, "import-error")
        assert error.startswith("Nothing imported") and "broken-notes.json" in error, error
        assert driver.find_element(By.ID, "import-error").get_attribute("role") == "alert"
        assert text_of(driver, "import-status") == "" and not shown(driver, "import-skipped")
        assert len(server_records(base, account)) == 4

        # Offline: the import needs the server.
        time.sleep(1)  # the service worker has the shell
        set_offline(driver, True)
        import_file(driver, export)
        wait(driver, lambda d: "needs a connection" in text_of(d, "import-error"), message="offline")
        set_offline(driver, False)

        # A larger file sent slowly: its upload's progress, the button busy meanwhile, then the summary.
        big = simplenote_export(os.path.join(folder, "big.json"),
                                [(f"big-{i}", f"Box {i}\n\n" + f"item {i} " * 300) for i in range(150)])
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 120 * 1024})
        import_file(driver, big, "Simplenote")
        seen = []

        def progress(d):
            seen.append(d.execute_script("""
              const p = document.getElementById('import-progress');
              return { shown: !p.hidden, value: p.hasAttribute('value') ? p.value : null, status: document.getElementById('import-status').textContent,
                       busy: document.getElementById('import-start').getAttribute('aria-disabled') }"""))
            return seen[-1]["status"].startswith("Imported") or text_of(d, "import-error")
        wait(driver, progress, timeout=60, message="the big import")
        set_offline(driver, False)  # no throttling
        uploading = [s for s in seen if s["shown"] and s["value"] is not None and 0 < s["value"] < 100]
        assert uploading and all(s["status"] == "Uploading big.json…" and s["busy"] == "true" for s in uploading), seen[:5]
        assert all(s["busy"] == "true" for s in seen if s["shown"])
        assert text_of(driver, "import-status") == "Imported 150 notes, updated 0, 0 unchanged.", import_said(driver)
        assert driver.find_element(By.ID, "import-start").get_attribute("aria-disabled") is None
        driver.find_element(By.ID, "account-close").click()
        assert len(server_records(base, account)) == 154
        wait(driver, lambda d: text_of(d, "filter").startswith("All notes (153)"), timeout=20, message="the big import synced")
    finally:
        driver.quit()


# --- Accessibility --------------------------------------------------------------------------

def test_two_factor_dialog_and_import_section_pass_axe_core(moving_server):
    pytest.importorskip("axe_selenium_python")
    base = moving_server
    account = register(base, "a11y")
    folder = tempfile.mkdtemp(prefix="noted-import-")
    export = simplenote_export(os.path.join(folder, "notes.json"), [("a11y-1", "Accessible\n\nnote"), {"id": "a11y-2"}])
    broken = os.path.join(folder, "broken.json")
    with open(broken, "w") as f:
        f.write("{")
    found = []

    def check(driver, view):
        axe_in_both_schemes(driver, view, found)

    driver = browser()
    try:
        sign_in(driver, base, account)
        open_account(driver)
        wait(driver, lambda d: shown(d, "two-factor-on"))
        check(driver, "Account panel with the two-factor section")
        button(driver, "Turn on two-factor sign-in").click()
        wait(driver, two_factor_open)
        button(driver, "Continue").click()
        wait(driver, lambda d: text_of(d, "two-factor-password-error"))
        check(driver, "two-factor dialog, the password step with an error")
        fill(driver, {"Your password": account[1]})
        button(driver, "Continue").click()
        wait(driver, lambda d: d.find_element(By.ID, "two-factor-secret").get_attribute("value"))
        check(driver, "two-factor dialog, the QR code step")
        secret = driver.find_element(By.ID, "two-factor-secret").get_attribute("value")
        button(driver, "Turn on").click()
        wait(driver, lambda d: text_of(d, "two-factor-scan-error"))
        check(driver, "two-factor dialog, the QR code step with an error")
        fill(driver, {"Code from your app": fresh_code(secret, set())})
        button(driver, "Turn on").click()
        wait(driver, lambda d: shown(d, "two-factor-codes"))
        check(driver, "two-factor dialog, the recovery codes")
        button(driver, "Done").click()
        wait(driver, lambda d: text_of(d, "two-factor-state").startswith("On"))

        import_file(driver, export)
        wait(driver, lambda d: text_of(d, "import-status").startswith("Imported"), timeout=20)
        check(driver, "import section with a summary and a skipped note")
        import_file(driver, broken)
        wait(driver, lambda d: text_of(d, "import-error"), timeout=20)
        check(driver, "import section with an error")
    finally:
        driver.quit()
    # At phone width (another account, this one has it on): the QR code step fits the window.
    other = register(base, "a11yphone")
    driver = browser(390, 844)
    try:
        sign_in(driver, base, other)
        open_account(driver)
        start_turning_on(driver, other[1])
        check(driver, "two-factor dialog, the QR code step at 390px")
        fits = driver.execute_script("""
          const d = document.getElementById('two-factor-dialog'), r = d.getBoundingClientRect();
          const qr = d.querySelector('#two-factor-qr svg').getBoundingClientRect();
          return r.left >= 0 && r.right <= innerWidth && d.scrollWidth <= d.clientWidth && qr.right <= r.right""")
        assert fits, "the two-factor dialog does not fit at 390px"
    finally:
        driver.quit()
    assert not found, "\n".join(found)
