"""The web app in a real browser: headless Chromium driven by Selenium against a real
noted-server process. Skipped with a printed notice where Chromium cannot be found."""
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

import seed_notes

BIN = os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server")
NOTED = os.environ.get("NOTED_BIN", ".build/debug/noted")
SHOTS = os.environ.get("NOTED_SCREENSHOTS")  # a folder: save screenshots of the main screens
# The web app of this checkout, whatever the working directory (the server's default is Web in it).
WEB_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Web"))

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
if not (CHROMIUM and DRIVER):
    print("test_webapp: NOTICE: chromium or chromedriver not found: browser tests skipped")
    pytest.skip("chromium not installed", allow_module_level=True)


def run_server(*options, web_root=WEB_ROOT):
    """A real noted-server on a free port over a fresh data directory; yields its base URL."""
    data = tempfile.mkdtemp(prefix="noted-web-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, "--web-root", web_root, *options], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    assert m, f"unexpected first line {line!r}"
    yield m.group(1)
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server():
    yield from run_server()


@pytest.fixture(scope="module")
def account(server):
    name = "web" + secrets.token_hex(4)
    password = "correct horse battery"
    r = requests.post(server + "/v1/accounts", json={"username": name, "password": password})
    assert r.status_code == 201, r.text
    return name, password


def browser(width=1280, height=800):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"]:
        options.add_argument(arg)
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)


def wait(driver, condition, timeout=10, message=""):
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), message)


def by_label(driver, label):
    return driver.find_element(By.CSS_SELECTOR, f'[aria-label="{label}"]')


def sign_in(driver, base, account, sync_timeout=10):
    """Signs in through the OAuth page; returns once the first sync is done ("online"), which
    for an account of many notes takes longer than the usual wait (`sync_timeout` seconds)."""
    driver.get(base + "/")
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed() or d.find_element(By.ID, "app").is_displayed())
    if driver.find_element(By.ID, "app").is_displayed():
        return
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait(driver, lambda d: "/oauth/authorize" in d.current_url)
    driver.find_element(By.CSS_SELECTOR, "input[name=username]").send_keys(account[0])
    driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(account[1])
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), message="app after sign-in")
    assert "code=" not in driver.current_url
    wait(driver, lambda d: "online" in d.find_element(By.ID, "sync-status").text, timeout=sync_timeout, message="online")


def titles(driver):
    # Read in one script: the list re-renders as sync events arrive.
    return driver.execute_script("return [...document.querySelectorAll('#notes li .note-title')].map(e => e.textContent)")


def open_note(driver, text):
    """Clicks the first note in the list whose text contains `text`."""
    wait(driver, lambda d: d.execute_script(
        "const li = [...document.querySelectorAll('#notes li')].find(e => e.textContent.includes(arguments[0]));"
        "if (li) { li.click(); return true } return false", text), message=f"open {text}")


_tokens = {}


def server_notes(base, account):
    """The notes on the server, read with one first-party sign-in per account (sign-in is rate-limited)."""
    if account not in _tokens:
        r = requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]})
        assert r.status_code == 200, r.text
        _tokens[account] = r.json()["access_token"]
    r = requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + _tokens[account]})
    assert r.status_code == 200, r.text
    return r.json()["records"]


def new_note(driver, title, body):
    driver.find_element(By.XPATH, "//button[normalize-space()='New note']").click()
    by_label(driver, "Title").send_keys(title)
    by_label(driver, "Body").send_keys(body)


def test_sign_in_create_edit_search_tag_pin_trash_restore(server, account):
    driver = browser()
    try:
        sign_in(driver, server, account)
        new_note(driver, "Groceries", "milk\neggs")
        wait(driver, lambda d: "Groceries" in " ".join(titles(d)))
        wait(driver, lambda d: any(r["fields"].get("title") == "Groceries" and "eggs" in r["fields"].get("body", "") for r in server_notes(server, account)), message="synced")
        new_note(driver, "Ideas", "a notes app")
        tags = driver.find_element(By.ID, "tags")
        tags.send_keys("work, later")
        by_label(driver, "Body").click()  # change event
        driver.find_element(By.ID, "pin").click()
        wait(driver, lambda d: titles(d)[0].endswith("Ideas"))
        search = by_label(driver, "Search")
        search.send_keys("milk")
        wait(driver, lambda d: len(titles(d)) == 1 and "Groceries" in titles(d)[0])
        search.send_keys(Keys.CONTROL + "a", Keys.BACKSPACE)
        wait(driver, lambda d: len(titles(d)) == 2)
        driver.find_element(By.ID, "trash").click()
        wait(driver, lambda d: not any("Ideas" in t for t in titles(d)))
        if SHOTS:
            driver.save_screenshot(os.path.join(SHOTS, "web-desktop.png"))
        driver.find_element(By.ID, "filter").send_keys("Trash")
        wait(driver, lambda d: any("Ideas" in t for t in titles(d)))
        open_note(driver, "Ideas")
        driver.find_element(By.ID, "restore").click()
        driver.find_element(By.ID, "filter").send_keys("All notes")
        wait(driver, lambda d: any("Ideas" in t for t in titles(d)))
        wait(driver, lambda d: any(r["fields"].get("title") == "Ideas" and r["fields"].get("pinned") and not r["fields"].get("trashed")
                                   and set(r["fields"].get("tags", [])) == {"work", "later"} for r in server_notes(server, account)),
             message="pin, tags and restore synced")
    finally:
        driver.quit()


def test_two_sessions_see_each_others_edits_live(server, account):
    a, b = browser(), browser()
    try:
        sign_in(a, server, account)
        sign_in(b, server, account)
        new_note(a, "Live", "start")
        wait(b, lambda d: any("Live" in t for t in titles(d)), timeout=5)
        open_note(b, "Live")
        body_b = by_label(b, "Body")
        body_b.click()
        body_b.send_keys("!")
        by_label(a, "Body").send_keys(" more 😀")
        started = time.time()
        wait(b, lambda d: "more 😀" in by_label(d, "Body").get_attribute("value"), timeout=5, message="edit reaches the open editor")
        elapsed = time.time() - started
        # The typing debounce is 300 ms; the rest is the round trip through the server.
        assert elapsed < 1.0, f"the edit took {elapsed:.2f} s to reach the other session"
        wait(a, lambda d: "!" in by_label(d, "Body").get_attribute("value"), timeout=5, message="and back")
        # An astral character typed at the very start of the note, in the other session.
        body_b.send_keys(Keys.CONTROL, Keys.HOME)
        body_b.send_keys("🎉")
        wait(a, lambda d: by_label(d, "Body").get_attribute("value").startswith("🎉start"), timeout=5, message="emoji at the start")
        wait(a, lambda d: by_label(d, "Body").get_attribute("value") == by_label(b, "Body").get_attribute("value"), timeout=5)
        final = by_label(a, "Body").get_attribute("value")
        assert final.startswith("🎉start") and "!" in final and "more 😀" in final, final
        wait(a, lambda d: any(r["fields"].get("body") == final for r in server_notes(server, account)), timeout=5, message="server holds it")
    finally:
        a.quit()
        b.quit()


def test_offline_edit_survives_reload_and_syncs(server, account):
    a, b = browser(), browser()
    try:
        sign_in(a, server, account)
        sign_in(b, server, account)
        new_note(a, "Offline", "before")
        wait(b, lambda d: any("Offline" in t for t in titles(d)), timeout=5)
        time.sleep(1)  # the service worker has cached the shell
        a.execute_cdp_cmd("Network.enable", {})
        a.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        a.execute_script("window.dispatchEvent(new Event('offline'))")
        by_label(a, "Body").send_keys(" and after, offline 🇫🇷")
        time.sleep(0.8)
        a.refresh()
        wait(a, lambda d: d.find_element(By.ID, "app").is_displayed(), message="the app opens offline")
        open_note(a, "Offline")
        assert "offline 🇫🇷" in by_label(a, "Body").get_attribute("value")
        a.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        a.execute_script("window.dispatchEvent(new Event('online'))")
        wait(b, lambda d: any("offline 🇫🇷" in r["fields"].get("body", "") for r in server_notes(server, account)), timeout=15, message="reached the server")
        open_note(b, "Offline")
        wait(b, lambda d: "offline 🇫🇷" in by_label(d, "Body").get_attribute("value"), timeout=10, message="reached the other session")
    finally:
        a.quit()
        b.quit()


def test_phone_width_screenshot(server, account):
    driver = browser(390, 844)
    try:
        sign_in(driver, server, account)
        wait(driver, lambda d: len(titles(d)) > 0)
        if SHOTS:
            driver.save_screenshot(os.path.join(SHOTS, "web-phone-list.png"))
        driver.execute_script("document.querySelector('#notes li').click()")
        wait(driver, lambda d: by_label(d, "Body").is_displayed())
        if SHOTS:
            driver.save_screenshot(os.path.join(SHOTS, "web-phone-editor.png"))
    finally:
        driver.quit()


def noted(home, *args, stdin=None):
    result = subprocess.run([NOTED, "--home", home, *args], input=stdin, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"noted {' '.join(args)}: {result.stderr}"
    return result.stdout


def test_cli_and_browser_see_each_others_notes(server, account):
    home = tempfile.mkdtemp(prefix="noted-cli-home-")
    noted(home, "--server", server, "login", "--username", account[0], "--password-stdin", stdin=account[1] + "\n")
    note_id = noted(home, "new", "--title", "From the CLI", "--body", "typed in a terminal").strip().split()[-1]
    driver = browser()
    try:
        sign_in(driver, server, account)
        wait(driver, lambda d: any("From the CLI" in t for t in titles(d)), timeout=10, message="CLI note in the browser")
        open_note(driver, "From the CLI")
        by_label(driver, "Body").send_keys(" and edited in a browser 👍🏽")
        wait(driver, lambda d: any("browser 👍🏽" in r["fields"].get("body", "") for r in server_notes(server, account)), timeout=10)
    finally:
        driver.quit()
    noted(home, "sync")
    shown = json.loads(noted(home, "show", note_id, "--json"))
    assert shown["body"] == "typed in a terminal and edited in a browser 👍🏽"


def test_history_panel_lists_revisions_and_restores_one(server, account):
    driver = browser()
    try:
        sign_in(driver, server, account)
        new_note(driver, "Versions", "first version")
        wait(driver, lambda d: any(r["fields"].get("body") == "first version" for r in server_notes(server, account)), message="v1 synced")
        body = by_label(driver, "Body")
        body.send_keys(Keys.CONTROL + "a", Keys.BACKSPACE)
        body.send_keys("second version")
        wait(driver, lambda d: any(r["fields"].get("body") == "second version" for r in server_notes(server, account)), message="v2 synced")
        driver.find_element(By.ID, "history-toggle").click()
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#revisions button")) >= 2, message="revisions listed")
        note = next(r for r in server_notes(server, account) if r["fields"].get("title") == "Versions")
        headers = {"Authorization": "Bearer " + _tokens[account]}
        revisions = requests.get(f"{server}/v1/records/notes/{note['id']}/revisions", headers=headers).json()["revisions"]
        first = max(r["rev"] for r in revisions
                    if requests.get(f"{server}/v1/records/notes/{note['id']}/revisions/{r['rev']}", headers=headers).json()["fields"].get("body") == "first version")
        driver.execute_script("[...document.querySelectorAll('#revisions button')].find(b => b.getAttribute('aria-label') === arguments[0]).click()",
                              f"Restore revision {first}")
        wait(driver, lambda d: by_label(d, "Body").get_attribute("value") == "first version", message="restored in the editor")
        wait(driver, lambda d: any(r["fields"].get("title") == "Versions" and r["fields"].get("body") == "first version"
                                   for r in server_notes(server, account)), message="restore synced")
    finally:
        driver.quit()


# The web app before IndexedDB version 2 (commit 61d7d94): its own db.js, sync.js, text.js and
# auth.js, and the store writes of its app.js, kept unchanged as a fixture.
WEB_V1 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "web-v1")

# Installed before the current app's scripts: its WebSocket goes to a path that refuses it
# while window.__syncBlocked is true (the network is down, the page still loads), and the
# messages it sends are logged (window.__sent).
BLOCK_SYNC = """
(() => {
  const Real = window.WebSocket;
  window.__syncBlocked = true;
  window.__sent = [];
  window.WebSocket = class extends Real {
    constructor(url, protocols) {
      super(window.__syncBlocked ? String(url).replace("/v1/sync", "/v1/no-sync") : url, protocols);
    }
    send(data) {
      try { window.__sent.push(JSON.parse(data)); } catch {}
      return super.send(data);
    }
  };
})();
"""

# In the version-1 page: sign-in finished with v1's Auth, then v1's SyncEngine pulls the notes
# on the server, and a note is created and pushed (acknowledged) through it.
V1_SIGN_IN_AND_SYNC = """
const [ids, done] = arguments;
(async () => {
  const { LocalStore } = await import("/db.js");
  const { Auth } = await import("/auth.js");
  const { SyncEngine } = await import("/sync.js");
  const edits = await import("/app-edits.js");
  const store = await LocalStore.open();
  const auth = new Auth(store);
  await auth.load();
  if (!(await auth.completeRedirect())) throw new Error("no authorization code in " + location.href);
  const engine = new SyncEngine({ store, auth });
  window.v1 = { store, auth, engine, edits };
  const until = async (test, what) => {
    for (let i = 0; i < 200; i++) {
      if (await test()) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("v1: timed out waiting for " + what);
  };
  window.v1.until = until;
  engine.start();
  await until(async () => engine.state === "online" && (await store.get(ids.synced)), "the first sync");
  await edits.createNote(store, ids.online);
  await edits.edit(store, ids.online, (f) => ({ ...f, title: "Made by v1 online", body: "acknowledged" }));
  engine.schedulePush(0);
  await until(async () => { const r = await store.get(ids.online); return r && r.shadow && !r.dirty && !r.inflight; }, "the ack");
})().then(() => done(null), (e) => done(String(e && e.stack || e)));
"""

# Then the connection loses pushes (the record's change is stored in flight, never answered),
# the engine stops (offline), and notes are edited, created and purged offline.
V1_OFFLINE_EDITS = """
const [ids, done] = arguments;
(async () => {
  const { store, engine, edits, until } = window.v1;
  const send = engine.send.bind(engine);
  engine.send = (message) => (message.type === "push" ? true : send(message));
  await edits.edit(store, ids.inflight, (f) => ({ ...f, body: f.body + " + sent, never answered" }));
  engine.schedulePush(0);
  await until(async () => { const r = await store.get(ids.inflight); return r && r.inflight && !r.dirty; }, "the change in flight");
  engine.stop();
  await edits.edit(store, ids.edited, (f) => ({ ...f, body: f.body + " + edited offline", tags: [...f.tags, "offline"] }));
  await edits.createNote(store, ids.created);
  await edits.edit(store, ids.created, (f) => ({ ...f, title: "Created offline in v1" }));
  await edits.edit(store, ids.created, (f) => ({ ...f, body: "typed offline 🇫🇷" }));
  await edits.edit(store, ids.purged, (f) => ({ ...f, trashed: true }));
  await edits.purge(store, ids.purged);
  const meta = {};
  for (const key of ["cursor", "device", "session"]) meta[key] = await store.getMeta(key);
  return { records: await store.all(), meta, version: store.db.version };
})().then((r) => done(r), (e) => done(String(e && e.stack || e)));
"""


@pytest.fixture(scope="module")
def upgrade_server():
    """A server whose web root holds the version-1 fixture until the test puts the current app there."""
    root = tempfile.mkdtemp(prefix="noted-web-root-")
    for name in os.listdir(WEB_V1):
        shutil.copy(os.path.join(WEB_V1, name), root)
    for base in run_server(web_root=root):
        yield base, root


def push_notes(base, account, notes):
    """Creates notes on the server over HTTP: {id: (title, body)}."""
    if account not in _tokens:
        server_notes(base, account)
    changes = [{"ccid": str(uuid.uuid4()), "collection": "notes", "id": i, "baseRev": 0, "op": "upsert",
                "fields": {"title": {"set": t}, "body": {"set": b}}} for i, (t, b) in notes.items()]
    r = requests.post(base + "/v1/push", json={"changes": changes}, headers={"Authorization": "Bearer " + _tokens[account]})
    assert r.status_code == 200, r.text
    assert all(x["type"] == "ack" for x in r.json()["results"]), r.text


def test_version_1_database_with_pending_edits_upgrades_and_syncs(upgrade_server):
    """A database the previous app version wrote (IndexedDB version 1, no outbox index) with
    edits not yet synced: the current app opens it without a new sign-in, lists every note with
    the unsynced ones marked, finds them in its outbox and sends them; nothing is lost."""
    base, root = upgrade_server
    account = ("upg" + secrets.token_hex(4), "correct horse battery")
    r = requests.post(base + "/v1/accounts", json={"username": account[0], "password": account[1]})
    assert r.status_code == 201, r.text
    ids = {k: str(uuid.uuid4()) for k in ["synced", "edited", "inflight", "purged", "online", "created"]}
    push_notes(base, account, {
        ids["synced"]: ("Synced, untouched", "stays as it is"),
        ids["edited"]: ("Edited offline", "server text"),
        ids["inflight"]: ("In flight", "server text"),
        ids["purged"]: ("Purged offline", "to be deleted"),
    })
    before = {r["id"]: r for r in server_notes(base, account)}

    driver = browser()
    try:
        # 1. The version-1 code signs in (its own PKCE flow), syncs and edits offline.
        driver.get(base + "/")
        driver.execute_script("import('/db.js').then(async ({ LocalStore }) => {"
                              "  const { Auth } = await import('/auth.js');"
                              "  new Auth(await LocalStore.open()).signIn(); })")
        wait(driver, lambda d: "/oauth/authorize" in d.current_url, message="v1 sign-in page")
        driver.find_element(By.CSS_SELECTOR, "input[name=username]").send_keys(account[0])
        driver.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(account[1])
        driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
        wait(driver, lambda d: "code=" in d.current_url, message="back from sign-in with a code")
        driver.set_script_timeout(30)
        error = driver.execute_async_script(V1_SIGN_IN_AND_SYNC, ids)
        assert error is None, error
        v1 = driver.execute_async_script(V1_OFFLINE_EDITS, ids)
        assert isinstance(v1, dict), v1
        assert v1["version"] == 1
        stored = {r["id"]: r for r in v1["records"]}
        assert set(stored) == set(ids.values())
        assert not any("pend" in r or "lv" in r for r in stored.values()), "the version-1 shape"
        assert stored[ids["inflight"]]["inflight"] and not stored[ids["inflight"]]["dirty"]
        assert stored[ids["edited"]]["dirty"] and stored[ids["created"]]["dirty"] and stored[ids["purged"]]["purged"]
        assert not stored[ids["synced"]]["dirty"] and not stored[ids["online"]]["dirty"]
        assert v1["meta"]["cursor"] > 0 and v1["meta"]["device"] and v1["meta"]["session"]["refreshToken"]
        driver.get("about:blank")  # the version-1 page closes its database

        # 2. The current app replaces it on the same origin (as an update of the server would).
        for name in os.listdir(root):
            os.remove(os.path.join(root, name))
        for name in os.listdir(WEB_ROOT):
            shutil.copy(os.path.join(WEB_ROOT, name), root)
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": BLOCK_SYNC})
        driver.get(base + "/")
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), message="the app opens with the v1 session")
        assert not driver.find_element(By.ID, "sign-in").is_displayed()
        version = driver.execute_async_script("const done = arguments[0];"
                                              "const req = indexedDB.open('noted'); req.onsuccess = () => { done(req.result.version); req.result.close(); }")
        assert version == 2

        # Offline: every note listed, the unsynced ones marked, all of them in the outbox.
        def rows(d):
            return d.execute_script("return Object.fromEntries([...document.querySelectorAll('#notes li')].map(li => [li.dataset.id, li.textContent]))")
        listed = [ids[k] for k in ["synced", "edited", "inflight", "online", "created"]]
        wait(driver, lambda d: set(rows(d)) == set(listed), message="the v1 notes listed")
        shown = rows(driver)
        for key in ["edited", "inflight", "created"]:
            assert "not synced" in shown[ids[key]], (key, shown[ids[key]])
        for key in ["synced", "online"]:
            assert "not synced" not in shown[ids[key]], (key, shown[ids[key]])
        assert "Created offline in v1" in shown[ids["created"]]
        outbox = driver.execute_async_script("const done = arguments[0];"
                                             "window.noted.store.pendingRecords().then(rs => done(rs.map(r => r.id)), e => done(String(e)))")
        assert sorted(outbox) == sorted(ids[k] for k in ["edited", "inflight", "created", "purged"])
        assert "pending" in driver.find_element(By.ID, "sync-status").text
        open_note(driver, "Edited offline")
        assert by_label(driver, "Body").get_attribute("value") == "server text + edited offline"

        # Online: the outbox reaches the server.
        driver.execute_script("window.__syncBlocked = false; window.dispatchEvent(new Event('online'))")

        def synced(_):
            notes = {r["id"]: r for r in server_notes(base, account)}
            return (notes.get(ids["edited"], {}).get("fields", {}).get("body") == "server text + edited offline"
                    and notes.get(ids["inflight"], {}).get("fields", {}).get("body") == "server text + sent, never answered"
                    and notes.get(ids["created"], {}).get("fields", {}).get("body") == "typed offline 🇫🇷"
                    and (ids["purged"] not in notes or notes[ids["purged"]].get("deleted")))
        wait(driver, synced, timeout=20, message="the v1 outbox reached the server")
        wait(driver, lambda d: d.find_element(By.ID, "sync-status").text == "online", timeout=10, message="nothing pending")
        notes = {r["id"]: r for r in server_notes(base, account)}
        assert notes[ids["edited"]]["fields"]["tags"] == ["offline"]
        assert notes[ids["created"]]["fields"]["title"] == "Created offline in v1"
        assert notes[ids["synced"]]["rev"] == before[ids["synced"]]["rev"]
        assert notes[ids["synced"]]["fields"] == before[ids["synced"]]["fields"]
        assert notes[ids["online"]]["fields"]["title"] == "Made by v1 online"
        live = [r for r in notes.values() if not r.get("deleted")]
        assert len(live) == 5, [r["fields"]["title"] for r in live]  # nothing lost, nothing doubled
        shown = rows(driver)
        assert set(shown) == set(listed)
        assert not any("not synced" in text for text in shown.values())
        assert driver.execute_async_script("const done = arguments[0];"
                                           "window.noted.store.pendingRecords().then(rs => done(rs.length))") == 0

        # The session, device and cursor of version 1 carried on: no sign-in, no pull from 0.
        sent = driver.execute_script("return window.__sent")
        hello = next(m for m in sent if m["type"] == "hello")
        pull = next(m for m in sent if m["type"] == "pull")
        assert hello["device"] == v1["meta"]["device"]
        assert pull["since"] == v1["meta"]["cursor"]
        open_note(driver, "Synced, untouched")
        assert by_label(driver, "Body").get_attribute("value") == "stays as it is"
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def short_token_server():
    yield from run_server("--access-token-lifetime", "4")


def test_access_tokens_are_refreshed_silently(short_token_server):
    base = short_token_server
    name, password = "short" + secrets.token_hex(3), "correct horse battery"
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": password}).status_code == 201
    account = (name, password)
    driver = browser()
    try:
        sign_in(driver, base, account)
        first = driver.execute_script("return window.noted.auth.session.refreshToken")
        time.sleep(9)  # more than two access-token lifetimes
        new_note(driver, "Still signed in", "after the token expired twice")
        wait(driver, lambda d: any(r["fields"].get("title") == "Still signed in" for r in server_notes(base, account)), timeout=15,
             message="an edit syncs after the first access tokens expired")
        assert driver.find_element(By.ID, "app").is_displayed()
        assert driver.execute_script("return window.noted.auth.session.refreshToken") != first, "the refresh token rotated"
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def big_server():
    # Seeding pushes many requests a second; the default limit (20) would slow it to a crawl.
    yield from run_server("--max-pushes-per-second", "100000")


# Installed before the app's scripts: counts getAll calls on the records store, which the app
# makes at start-up only (reading every record once, 1,000 at a time; its outbox is read
# through an index, IDBIndex.getAll, not counted).
COUNT_FULL_READS = """
(() => {
  window.__getAlls = 0;
  const getAll = IDBObjectStore.prototype.getAll;
  IDBObjectStore.prototype.getAll = function () {
    if (this.name === "records") window.__getAlls++;
    return getAll.apply(this, arguments);
  };
})();
"""


def server_note(base, account, note_id):
    if account not in _tokens:
        server_notes(base, account)
    r = requests.get(f"{base}/v1/records/notes/{note_id}", headers={"Authorization": "Bearer " + _tokens[account]})
    assert r.status_code == 200, r.text
    return r.json()["fields"]


def list_state(driver):
    return driver.execute_script("""
      const rows = [...document.querySelectorAll('#notes li')];
      return { drawn: rows.length, setsize: rows.length ? Number(rows[0].getAttribute('aria-setsize')) : 0,
               positions: rows.map(li => Number(li.getAttribute('aria-posinset'))),
               selected: rows.filter(li => li.getAttribute('aria-selected') === 'true').map(li => li.dataset.id),
               focused: document.activeElement && document.activeElement.closest && document.activeElement.closest('#notes li')
                 ? document.activeElement.closest('#notes li').dataset.id : null,
               search: document.getElementById('notes').dataset.search };
    """)


def test_ten_thousand_notes_type_switch_search(big_server):
    """A real account's size: 10,000 notes of 2 KB, seeded over the API. The list draws a few
    rows only, typing and switching and searching work, nothing reads every record after
    start-up, and the edits reach the server."""
    base = big_server
    name, password = "big" + secrets.token_hex(3), "correct horse battery"
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": password}).status_code == 201
    account = (name, password)
    ids = seed_notes.seed(base, name, password, 10000, size=2000)
    driver = browser()
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COUNT_FULL_READS})
        sign_in(driver, base, account, sync_timeout=60)  # pulling 10,000 notes: about 7 s on an idle machine
        wait(driver, lambda d: list_state(d)["setsize"] == 10000, timeout=60, message="10,000 notes listed")
        state = list_state(driver)
        assert state["drawn"] < 100, f"{state['drawn']} rows drawn: the list is not virtualized"
        assert state["positions"] == list(range(1, state["drawn"] + 1))
        reads = driver.execute_script("return window.__getAlls")

        # Type into the second note: its row changes in place, the text is stored and synced.
        rows = driver.find_elements(By.CSS_SELECTOR, "#notes li")
        note_id = rows[1].get_attribute("data-id")
        rows[1].click()
        title = by_label(driver, "Title")
        wait(driver, lambda d: title.get_attribute("value").startswith("Note "))
        title.send_keys(Keys.END, " edited")
        wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, f'#notes li[data-id="{note_id}"] .note-title').text.endswith(" edited"),
             message="the row shows the typing")
        by_label(driver, "Body").send_keys(Keys.CONTROL, Keys.END)
        by_label(driver, "Body").send_keys(" and a last line")
        wait(driver, lambda d: server_note(base, account, note_id)["body"].endswith(" and a last line"), timeout=15, message="typing synced")
        assert server_note(base, account, note_id)["title"].endswith(" edited")
        # Once typing paused, the note moved to the top of the list, selected and in view.
        wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, "#notes li").get_attribute("data-id") == note_id, message="re-sorted")
        assert list_state(driver)["selected"] == [note_id]

        # The keyboard: rows are reached with the arrows, End goes to the last of 10,000.
        first = driver.find_element(By.CSS_SELECTOR, "#notes li")
        first.send_keys(Keys.ARROW_DOWN)
        first.send_keys(Keys.ARROW_DOWN)  # the focus moved: keys go to the focused row
        driver.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        state = list_state(driver)
        focused = state["focused"]
        assert focused and focused != note_id
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        wait(driver, lambda d: list_state(d)["selected"] == [focused], message="Enter opens the focused note")
        driver.switch_to.active_element.send_keys(Keys.END)
        wait(driver, lambda d: d.execute_script("return document.activeElement.getAttribute('aria-posinset')") == "10000",
             message="End focuses the last row")
        assert list_state(driver)["drawn"] < 100
        driver.switch_to.active_element.send_keys(Keys.HOME)
        wait(driver, lambda d: d.execute_script("return document.activeElement.getAttribute('aria-posinset')") == "1")

        # Switching notes by clicking rows.
        for row in driver.find_elements(By.CSS_SELECTOR, "#notes li")[2:5]:
            row_title = row.find_element(By.CSS_SELECTOR, ".note-title").text
            row.click()
            wait(driver, lambda d: by_label(d, "Title").get_attribute("value") == row_title, message="switched")

        # Search: the word only note 1234 has, then a prefix many notes share.
        search = by_label(driver, "Search")
        search.send_keys("marker1234")
        wait(driver, lambda d: list_state(d)["search"] == "marker1234" and list_state(d)["setsize"] == 1, timeout=15, message="searched")
        assert titles(driver) == ["Note 1234"]
        open_note(driver, "Note 1234")
        by_label(driver, "Body").send_keys(Keys.CONTROL, Keys.END)
        by_label(driver, "Body").send_keys(" found")
        wait(driver, lambda d: server_note(base, account, ids[1234])["body"].endswith(" found"), timeout=15, message="edit of the found note synced")
        search.send_keys(Keys.CONTROL + "a", Keys.BACKSPACE)
        search.send_keys("marker12")
        # marker12, marker120-129 and marker1200-1299: 111 notes.
        wait(driver, lambda d: list_state(d)["search"] == "marker12" and list_state(d)["setsize"] == 111, timeout=15)
        search.send_keys(Keys.CONTROL + "a", Keys.BACKSPACE)
        wait(driver, lambda d: list_state(d)["setsize"] == 10000)

        assert reads >= 1, "the start-up read was not seen"
        assert driver.execute_script("return window.__getAlls") == reads, "records read with getAll after start-up"
    finally:
        driver.quit()


def axe_violations(driver):
    """axe-core (as bundled by axe-selenium-python) run over the page: its violations."""
    from axe_selenium_python import Axe
    axe = Axe(driver)
    axe.inject()
    results = axe.run()
    return results["violations"], axe.report(results["violations"])


@pytest.fixture(scope="module")
def a11y_server():
    # Its own server and account: what axe-core sees is the notes this test makes, not the ones
    # the tests before it left, and its sign-ins do not count against the shared server's limit
    # (10 a minute per address, which the tests on `server` already use up within a minute).
    yield from run_server()


def test_accessibility_axe_core_finds_no_violation(a11y_server):
    """The welcome page, the sign-in page, the notes app with a note open (pinned, tagged, its
    history shown), the app with a note in the trash open, and the app at phone width (list and
    editor), each in the light and the dark colour scheme: axe-core reports no violation of any
    impact."""
    pytest.importorskip("axe_selenium_python")
    base = a11y_server
    name, password = "a11y" + secrets.token_hex(3), "correct horse battery"
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": password}).status_code == 201
    account = (name, password)
    found = []

    def check(driver, view):
        for scheme in ("light", "dark"):
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
            violations, report = axe_violations(driver)
            if violations:
                found.append(f"{view} ({scheme} colour scheme): {report}")
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

    driver = browser()
    try:
        driver.get(base + "/")
        wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed())
        check(driver, "welcome page")
        driver.find_element(By.ID, "sign-in").click()
        wait(driver, lambda d: "/oauth/authorize" in d.current_url)
        check(driver, "sign-in page")
        sign_in(driver, base, account)
        new_note(driver, "Accessible", "a note\nwith two lines")
        by_label(driver, "Title").click()
        driver.find_element(By.ID, "tags").send_keys("work, home")
        driver.find_element(By.ID, "pin").click()
        wait(driver, lambda d: any("Accessible" in t for t in titles(d)))
        driver.find_element(By.ID, "history-toggle").click()
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#revisions li")) >= 1)
        check(driver, "notes app with a note open")
        new_note(driver, "Thrown away", "a note in the trash")
        wait(driver, lambda d: any("Thrown away" in t for t in titles(d)))
        driver.find_element(By.ID, "trash").click()
        wait(driver, lambda d: d.find_element(By.ID, "purge").is_displayed() and not any("Thrown away" in t for t in titles(d)))
        wait(driver, lambda d: any(r["fields"].get("title") == "Thrown away" and r["fields"].get("trashed") for r in server_notes(base, account)),
             message="the trashing synced")
        check(driver, "notes app with a note in the trash open")
    finally:
        driver.quit()
    phone = browser(390, 844)
    try:
        sign_in(phone, base, account)
        wait(phone, lambda d: titles(d) == ["📌Accessible"], message="the one note not in the trash")
        check(phone, "app at phone width, list")
        phone.execute_script("document.querySelector('#notes li').click()")
        wait(phone, lambda d: by_label(d, "Body").is_displayed())
        check(phone, "app at phone width, editor")
    finally:
        phone.quit()
    assert not found, "\n".join(found)
