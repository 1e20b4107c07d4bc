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
from selenium.common.exceptions import WebDriverException  # noqa: E402
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


def browser(width=1280, height=800, console=False):
    """Headless Chromium; `console`: its console messages kept, for driver.get_log("browser")."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"]:
        options.add_argument(arg)
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
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
        started = driver.execute_script("return new Date().toDateString()")  # the browser's local day
        new_note(driver, "Versions", "first version")
        wait(driver, lambda d: any(r["fields"].get("body") == "first version" for r in server_notes(server, account)), message="v1 synced")
        body = by_label(driver, "Body")
        body.send_keys(Keys.CONTROL + "a", Keys.BACKSPACE)
        body.send_keys("second version")
        wait(driver, lambda d: any(r["fields"].get("body") == "second version" for r in server_notes(server, account)), message="v2 synced")
        driver.find_element(By.ID, "history-toggle").click()
        wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#revisions button")) >= 2, message="revisions listed")
        # By local day (issue 23): made just now, they are all under "Today", each with its time
        # (and its size where the server sends one); the Restore buttons still name the revision.
        days = driver.execute_script(
            "return [...document.querySelectorAll('#revisions > li')].map(day => ({ heading: day.querySelector('h3')?.textContent,"
            " entries: [...day.querySelectorAll('ul > li')].map(e => ({ text: e.textContent, time: e.querySelector('time')?.getAttribute('datetime'),"
            " label: e.querySelector('button')?.getAttribute('aria-label') })) }))")
        if driver.execute_script("return new Date().toDateString()") == started:
            assert [d["heading"] for d in days] == ["Today"], days
        else:  # local midnight passed during the test
            assert {d["heading"] for d in days} <= {"Today", "Yesterday"}, days
        entries = [e for d in days for e in d["entries"]]
        assert len(entries) >= 2, days
        for entry in entries:
            assert re.search(r"\d{1,2}:\d{2}", entry["text"]), entry
            assert entry["time"] and entry["time"].endswith("Z"), entry
            assert re.fullmatch(r"Restore revision \d+", entry["label"] or ""), entry
            assert "Revision " not in entry["text"], entry
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
                                              "const req = indexedDB.open('noted'); req.onsuccess = () => {"
                                              " done([req.result.version, [...req.result.objectStoreNames]]); req.result.close(); }")
        # 2: the outbox index; 3: attachments' blobs; 4: the Swift client's stored form, and tombstones;
        # 5: the records' index `space` (shared spaces)
        assert version == [5, ["blobs", "meta", "records", "tombstones"]]

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


def axe_in_both_schemes(driver, view, found):
    """axe-core over the page in the light and then the dark colour scheme: a line for each
    scheme with violations appended to `found`, naming `view`."""
    for scheme in ("light", "dark"):
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
        violations, report = axe_violations(driver)
        if violations:
            found.append(f"{view} ({scheme} colour scheme): {report}")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


@pytest.fixture(scope="module")
def a11y_server():
    # Its own server and account: what axe-core sees is the notes this test makes, not the ones
    # the tests before it left, and its sign-ins do not count against the shared server's limit
    # (10 a minute per address, which the tests on `server` already use up within a minute).
    yield from run_server()


def test_accessibility_axe_core_finds_no_violation(a11y_server):
    """The welcome page, the sign-in page, the notes app with a note open (pinned, tagged, its
    history shown), the app with a note in the trash open, with a note the server refused open,
    with the sign-out dialog open, and the app at phone width (list and editor), each in the
    light and the dark colour scheme: axe-core reports no violation of any impact."""
    pytest.importorskip("axe_selenium_python")
    base = a11y_server
    name, password = "a11y" + secrets.token_hex(3), "correct horse battery"
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": password}).status_code == 201
    account = (name, password)
    found = []

    def check(driver, view):
        axe_in_both_schemes(driver, view, found)

    driver = browser()
    try:
        driver.get(base + "/")
        wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed())
        check(driver, "welcome page")
        driver.find_element(By.ID, "sign-in").click()
        wait(driver, lambda d: "/oauth/authorize" in d.current_url)
        check(driver, "sign-in page")
        driver.find_element(By.LINK_TEXT, "Create account").click()
        wait(driver, lambda d: "/oauth/register" in d.current_url)
        check(driver, "create-account page")
        fill_registration(driver, account[0], password, password)
        wait(driver, lambda d: "taken" in alert_text(d), message="taken named")
        check(driver, "create-account page with an error")
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
        driver.find_element(By.ID, "filter").send_keys("All notes")
        new_note(driver, "Refused", "")
        wait(driver, lambda d: any(r["fields"].get("title") == "Refused" for r in server_notes(base, account)), message="created")
        set_body(driver, "x" * 250000)
        wait(driver, lambda d: refusal_shown(d) is not None and (row_state(d, "Refused") or {}).get("mark"), timeout=15, message="refused")
        check(driver, "notes app with a refused note open")
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog")
        check(driver, "sign-out dialog")
        button(driver, "Cancel").click()
        button(driver, "Discard my version").click()
        wait(driver, lambda d: refusal_shown(d) is None, message="discarded")
        driver.find_element(By.ID, "trash").click()
        wait(driver, lambda d: any(r["fields"].get("title") == "Refused" and r["fields"].get("trashed") for r in server_notes(base, account)),
             message="the refused note in the trash")
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


# --- Nothing lost at the edges (issue 21): accounts on one browser profile, sign-out with
# unsynced notes, changes the server refuses, a database of the previous version -------------

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "web-pre-accounts")


@pytest.fixture(scope="module")
def edge_server():
    # Its own server: these tests sign in and out many times (the shared server allows 10
    # sign-ins a minute per address).
    yield from run_server("--auth-attempts-per-minute", "1000")


def register(base, prefix):
    name, password = prefix + secrets.token_hex(3), "correct horse battery"
    r = requests.post(base + "/v1/accounts", json={"username": name, "password": password})
    assert r.status_code == 201, r.text
    return name, password


def set_offline(driver, offline):
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": offline, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    driver.execute_script("window.dispatchEvent(new Event(arguments[0]))", "offline" if offline else "online")


def button(driver, text):
    return driver.find_element(By.XPATH, f"//button[normalize-space()='{text}']")


def signed_out(driver):
    """The welcome page is shown (read in the page: the sign-out reloads it)."""
    try:
        return driver.execute_script("const w = document.getElementById('signed-out'); return Boolean(w && !w.hidden)")
    except WebDriverException:
        return False


def dialog_open(driver):
    return driver.execute_script("const d = document.getElementById('sign-out-dialog'); return d.open && d.matches(':modal')")


def status(driver):
    return driver.find_element(By.ID, "sync-status").text


def write_offline_note(driver, title, body):
    """Takes the browser offline and writes a new note there: it stays pending."""
    time.sleep(1)  # the service worker has cached the shell (the page reloads offline on sign-out)
    set_offline(driver, True)
    wait(driver, lambda d: status(d).startswith("offline"), message="offline")
    new_note(driver, title, body)
    wait(driver, lambda d: status(d) == "offline · 1 pending", message="1 pending")


def sign_out_anyway(driver, count):
    """Sign out with `count` unsynced notes: the dialog names them; "Sign out anyway"."""
    driver.find_element(By.ID, "sign-out").click()
    wait(driver, dialog_open, message="the sign-out dialog")
    text = driver.find_element(By.ID, "sign-out-dialog").text
    assert f"{count} note{'' if count == 1 else 's'} {'is' if count == 1 else 'are'} not synced" in text, text
    button(driver, "Sign out anyway").click()
    wait(driver, signed_out, message="signed out")


def sign_out_synced(driver):
    """Sign out with nothing unsynced: no dialog."""
    wait(driver, lambda d: status(d) == "online", message="all synced")
    driver.find_element(By.ID, "sign-out").click()
    wait(driver, signed_out, message="signed out without a dialog")


def test_sign_out_with_an_unsynced_note_asks_and_keeps_it_for_the_next_sign_in(edge_server):
    base = edge_server
    account = register(base, "out")
    downloads = tempfile.mkdtemp(prefix="noted-web-export-")
    driver = browser()
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        sign_in(driver, base, account)
        write_offline_note(driver, "Written offline", "only in this browser")
        # Cancel: still signed in, the note still there and pending.
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog")
        dialog = driver.find_element(By.ID, "sign-out-dialog")
        assert "1 note is not synced" in dialog.text, dialog.text
        assert dialog.get_attribute("aria-labelledby") and dialog.get_attribute("aria-describedby")
        button(driver, "Cancel").click()
        wait(driver, lambda d: not dialog_open(d), message="the dialog closed")
        assert driver.find_element(By.ID, "app").is_displayed()
        assert "Written offline" in " ".join(titles(driver)) and status(driver) == "offline · 1 pending"
        # Export them: a file with the note; the dialog stays open.
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, dialog_open, message="the sign-out dialog again")
        button(driver, "Export them").click()
        wait(driver, lambda d: "Exported 1 note" in d.find_element(By.ID, "sign-out-exported").text, message="exported")
        wait(driver, lambda d: any(f.endswith(".json") for f in os.listdir(downloads)), message="the export file")
        exported = json.load(open(os.path.join(downloads, next(f for f in os.listdir(downloads) if f.endswith(".json")))))
        assert [(n["title"], n["body"]) for n in exported["notes"]] == [("Written offline", "only in this browser")]
        assert dialog_open(driver)
        # Sign out anyway (still offline), then sign in again as the same user: the note is
        # there and syncs.
        button(driver, "Sign out anyway").click()
        wait(driver, signed_out, message="signed out")
        set_offline(driver, False)
        sign_in(driver, base, account)
        wait(driver, lambda d: "Written offline" in " ".join(titles(d)), message="the note after signing in again")
        wait(driver, lambda d: any(r["fields"].get("title") == "Written offline" and r["fields"].get("body") == "only in this browser"
                                   for r in server_notes(base, account)), timeout=15, message="the note reached the server")
        wait(driver, lambda d: status(d) == "online", message="nothing pending")
    finally:
        driver.quit()


def test_a_lost_session_keeps_the_unsynced_note_for_the_next_sign_in(edge_server):
    base = edge_server
    account = register(base, "lost")
    driver = browser()
    try:
        sign_in(driver, base, account)
        write_offline_note(driver, "Before the session was lost", "kept")
        # The refresh token is revoked elsewhere and the access token has run out: the next
        # connection's refresh is answered invalid_grant, and the app shows the welcome page.
        refresh = driver.execute_script("return window.noted.auth.session.refreshToken")
        revoked = requests.post(base + "/oauth/revoke", data={"token": refresh, "token_type_hint": "refresh_token", "client_id": "noted-web"})
        assert revoked.status_code == 200, revoked.text
        driver.execute_script("window.noted.auth.invalidateAccessToken()")
        set_offline(driver, False)
        wait(driver, signed_out, timeout=15, message="the session is lost")
        sign_in(driver, base, account)
        wait(driver, lambda d: "Before the session was lost" in " ".join(titles(d)), message="the note after signing in again")
        wait(driver, lambda d: any(r["fields"].get("title") == "Before the session was lost" for r in server_notes(base, account)),
             timeout=15, message="the note reached the server")
    finally:
        driver.quit()


def test_two_accounts_in_one_browser_profile_keep_their_notes_apart(edge_server):
    base = edge_server
    alice, bob = register(base, "alice"), register(base, "bob")
    driver = browser()
    try:
        sign_in(driver, base, alice)
        write_offline_note(driver, "Alice's offline note", "for alice only")
        sign_out_anyway(driver, 1)
        set_offline(driver, False)
        sign_in(driver, base, bob)
        new_note(driver, "Bob's note", "for bob")
        wait(driver, lambda d: any(r["fields"].get("title") == "Bob's note" for r in server_notes(base, bob)), message="bob's note synced")
        assert titles(driver) == ["Bob's note"], titles(driver)
        sign_out_synced(driver)
        sign_in(driver, base, alice)
        wait(driver, lambda d: titles(d) == ["Alice's offline note"], message="alice's note, and only hers")
        wait(driver, lambda d: any(r["fields"].get("title") == "Alice's offline note" for r in server_notes(base, alice)),
             timeout=15, message="alice's note reached the server")
        assert not any("Alice" in r["fields"].get("title", "") for r in server_notes(base, bob))
        names = driver.execute_script("return indexedDB.databases().then(list => list.map(d => d.name))")
        assert len([n for n in names if n.startswith("noted:")]) == 2, names
    finally:
        driver.quit()


def row_state(driver, title):
    """The list row of the note titled `title`: its text and whether it has the refused mark."""
    return driver.execute_script("""
      const li = [...document.querySelectorAll('#notes li')].find(e => e.querySelector('.note-title').textContent.endsWith(arguments[0]));
      if (!li) return null;
      const mark = li.querySelector('.note-title .refused');
      return { text: li.textContent, mark: mark ? mark.getAttribute('aria-label') : null };
    """, title)


def set_body(driver, text):
    """Sets the open note's body as typing would (a quarter of a million keys is too slow to send)."""
    driver.execute_script("const b = document.getElementById('body'); b.value = arguments[0]; b.dispatchEvent(new Event('input'))", text)


def refusal_shown(driver):
    box = driver.find_element(By.ID, "refusal")
    return box.text if box.is_displayed() else None


def test_a_change_the_server_refuses_stays_marked_until_edited_or_discarded(edge_server):
    base = edge_server
    account = register(base, "big")
    too_long = "x" * 250000
    driver = browser()
    try:
        sign_in(driver, base, account)
        new_note(driver, "Too long", "short")
        wait(driver, lambda d: any(r["fields"].get("body") == "short" for r in server_notes(base, account)), message="synced")
        note_id = next(r for r in server_notes(base, account) if r["fields"].get("title") == "Too long")["id"]
        set_body(driver, too_long)
        wait(driver, lambda d: (row_state(d, "Too long") or {}).get("mark") == "refused by the server", timeout=15, message="marked in the list")
        assert "not synced: too large" in row_state(driver, "Too long")["text"]
        wait(driver, lambda d: refusal_shown(d) and "too_large" in refusal_shown(d), message="the reason in the editor")
        assert "Discard my version" in refusal_shown(driver)
        wait(driver, lambda d: "1 refused" in status(d))
        assert server_note(base, account, note_id)["body"] == "short"

        # A change on the server meanwhile: merged under the refused text, which stays refused.
        rev = next(r for r in server_notes(base, account) if r["id"] == note_id)["rev"]
        pushed = requests.post(base + "/v1/push", headers={"Authorization": "Bearer " + _tokens[account]}, json={"changes": [
            {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note_id, "baseRev": rev, "op": "upsert",
             "fields": {"title": {"set": "Too long, renamed"}}}]})
        assert pushed.status_code == 200 and pushed.json()["results"][0]["type"] == "ack", pushed.text
        wait(driver, lambda d: by_label(d, "Title").get_attribute("value") == "Too long, renamed", message="the server's title arrived")
        assert by_label(driver, "Body").get_attribute("value") == too_long
        assert (row_state(driver, "Too long, renamed") or {}).get("mark") == "refused by the server"

        # After a reload: still marked, still not sent.
        driver.refresh()
        wait(driver, lambda d: (row_state(d, "Too long, renamed") or {}).get("mark") == "refused by the server", message="marked after a reload")
        wait(driver, lambda d: status(d) == "online · 1 refused", message="online, one refused")
        open_note(driver, "Too long, renamed")
        wait(driver, lambda d: refusal_shown(d) and "too_large" in refusal_shown(d), message="the reason in the editor after a reload")
        assert by_label(driver, "Body").get_attribute("value") == too_long
        time.sleep(0.5)
        assert server_note(base, account, note_id) == dict(server_note(base, account, note_id), title="Too long, renamed", body="short")

        # Edited under the limit: sent again, against the server's newest state; the mark goes.
        set_body(driver, "x" * 1000 + " cut to size")
        wait(driver, lambda d: server_note(base, account, note_id)["body"] == "x" * 1000 + " cut to size", timeout=15, message="synced after the edit")
        assert server_note(base, account, note_id)["title"] == "Too long, renamed"
        wait(driver, lambda d: (row_state(d, "Too long, renamed") or {}).get("mark") is None and refusal_shown(d) is None, message="the mark is gone")
        wait(driver, lambda d: status(d) == "online")

        # Refused again, then discarded: the server's version returns.
        set_body(driver, too_long)
        wait(driver, lambda d: refusal_shown(d) is not None, timeout=15, message="refused again")
        button(driver, "Discard my version").click()
        wait(driver, lambda d: by_label(d, "Body").get_attribute("value") == "x" * 1000 + " cut to size", message="the server's version")
        wait(driver, lambda d: refusal_shown(d) is None and (row_state(d, "Too long, renamed") or {}).get("mark") is None, message="not marked")
        wait(driver, lambda d: status(d) == "online")

        # A new note refused and discarded: the server never had it, so it is gone.
        new_note(driver, "Never synced", "")
        set_body(driver, too_long)
        wait(driver, lambda d: (row_state(d, "Never synced") or {}).get("mark") == "refused by the server", timeout=15, message="the new note refused")
        button(driver, "Discard my version").click()
        wait(driver, lambda d: row_state(d, "Never synced") is None, message="the new note removed")
        driver.refresh()
        wait(driver, lambda d: row_state(d, "Too long, renamed") is not None, message="after a reload")
        assert row_state(driver, "Never synced") is None
        assert not any(r["fields"].get("title") == "Never synced" for r in server_notes(base, account))
    finally:
        driver.quit()


def web_session(base, account):
    """Tokens of the web app's OAuth client (`noted-web`) for `account`, from the same flow the
    app runs (authorization code with PKCE, redirect to the app's own URL)."""
    import base64
    import hashlib
    import html.parser
    import urllib.parse

    class Hidden(html.parser.HTMLParser):
        def __init__(self):
            super().__init__()
            self.fields = {}

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "input" and a.get("type") == "hidden":
                self.fields[a["name"]] = a.get("value", "")

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    redirect = base + "/"
    http = requests.Session()
    page = http.get(base + "/oauth/authorize", params={"response_type": "code", "client_id": "noted-web", "redirect_uri": redirect,
                                                        "code_challenge": challenge, "code_challenge_method": "S256", "state": "s"})
    assert page.status_code == 200, page.text
    form = Hidden()
    form.feed(page.text)
    posted = http.post(base + "/oauth/authorize", data=dict(form.fields, username=account[0], password=account[1]), allow_redirects=False)
    assert posted.status_code in (302, 303), posted.text
    code = urllib.parse.parse_qs(urllib.parse.urlparse(posted.headers["Location"]).query)["code"][0]
    token = requests.post(base + "/oauth/token", data={"grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
                                                       "client_id": "noted-web", "code_verifier": verifier})
    assert token.status_code == 200, token.text
    return token.json()


# Writes the `noted` database with the previous version's db.js (the fixture), as that version
# left it: signed in (its auth.js stored `{ accessToken, refreshToken, expiresAt, user }`, user
# being the token's `sub`) with a note written offline, never sent.
WRITE_PREVIOUS_VERSION_DATABASE = """
const [source, tokens, done] = arguments;
const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
import(url).then(async ({ LocalStore, newRecord }) => {
  const sub = JSON.parse(atob(tokens.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const store = await LocalStore.open();
  await store.setMeta("session", { accessToken: tokens.access_token, refreshToken: tokens.refresh_token,
                                   expiresAt: Date.now() + tokens.expires_in * 1000, user: sub });
  const id = crypto.randomUUID();
  await store.update(id, () => newRecord(id, { title: "Written before the upgrade", body: "by the previous version" }));
  store.db.close();
  done((await indexedDB.databases()).map((d) => d.name));
}).catch((error) => done(String(error)));
"""


def test_a_previous_version_database_keeps_working(edge_server):
    base = edge_server
    owner, other = register(base, "prev"), register(base, "other")
    source = open(os.path.join(FIXTURES, "db.js")).read()
    driver = browser()
    try:
        # A page of the app's origin where the app does not run: the previous version's code
        # writes its database there.
        # (The server's Content-Security-Policy forbids importing a module from a blob: URL;
        # it is bypassed for that page only.)
        driver.execute_cdp_cmd("Page.setBypassCSP", {"enabled": True})
        driver.get(base + "/manifest.webmanifest")
        names = driver.execute_async_script(WRITE_PREVIOUS_VERSION_DATABASE, source, web_session(base, owner))
        assert names == ["noted"], names
        driver.execute_cdp_cmd("Page.setBypassCSP", {"enabled": False})
        # The current app opens it: still signed in, the pending note there, and it syncs.
        driver.get(base + "/")
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), message="signed in from the previous version's session")
        wait(driver, lambda d: "Written before the upgrade" in " ".join(titles(d)), message="the note written before the upgrade")
        wait(driver, lambda d: any(r["fields"].get("title") == "Written before the upgrade" and r["fields"].get("body") == "by the previous version"
                                   for r in server_notes(base, owner)), timeout=15, message="the note reached the server")
        assert driver.execute_script("return window.noted.store.db.name") == "noted"
        # Its account's database still: a note written offline now survives another account
        # signing in (which gets a database of its own) and syncs when its account is back.
        write_offline_note(driver, "Written after the upgrade", "offline")
        sign_out_anyway(driver, 1)
        set_offline(driver, False)
        sign_in(driver, base, other)
        assert titles(driver) == []
        assert driver.execute_script("return window.noted.store.db.name").startswith("noted:")
        new_note(driver, "Other's note", "")
        wait(driver, lambda d: any(r["fields"].get("title") == "Other's note" for r in server_notes(base, other)), message="synced")
        sign_out_synced(driver)
        sign_in(driver, base, owner)
        wait(driver, lambda d: sorted(titles(d)) == ["Written after the upgrade", "Written before the upgrade"], message="the first account's notes, and only those")
        assert driver.execute_script("return window.noted.store.db.name") == "noted"
        wait(driver, lambda d: any(r["fields"].get("title") == "Written after the upgrade" for r in server_notes(base, owner)),
             timeout=15, message="the note written offline reached the server")
    finally:
        driver.quit()


# Creating an account from the sign-in page (issue 16): a link named "Create account", a form
# with "Username", "Password" and "Confirm password", and the OAuth flow goes on signed in.

def field(driver, label):
    """The input a <label> with this text names (what a screen reader announces)."""
    return driver.find_element(By.XPATH, f"//label[normalize-space()='{label}']/following::input[@id=//label[normalize-space()='{label}']/@for][1]")


def open_create_account(driver, base):
    driver.get(base + "/")
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), message="the welcome page")
    driver.find_element(By.XPATH, "//button[normalize-space()='Sign in']").click()
    wait(driver, lambda d: "/oauth/authorize" in d.current_url)
    driver.find_element(By.LINK_TEXT, "Create account").click()
    wait(driver, lambda d: "/oauth/register" in d.current_url, message="the registration page")


def fill_registration(driver, username, password, confirm):
    for label, value in (("Username", username), ("Password", password), ("Confirm password", confirm)):
        box = field(driver, label)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.XPATH, "//button[normalize-space()='Create account']").click()


def alert_text(driver):
    """The page's alert, read in one script (the page is replaced after each post)."""
    try:
        return driver.execute_script("const a = document.querySelector('[role=alert]'); return a ? a.textContent : ''")
    except WebDriverException:
        return ""


def test_create_account_from_the_sign_in_page_then_the_app_is_signed_in(edge_server):
    name = "new" + secrets.token_hex(3)
    taken = register(edge_server, "taken")
    driver = browser()
    try:
        open_create_account(driver, edge_server)
        # Refusals keep the page, say why, and create nothing.
        fill_registration(driver, name, "correct horse battery", "correct horse batterx")
        wait(driver, lambda d: "do not match" in alert_text(d), message="mismatch named")
        fill_registration(driver, name, "short", "short")
        # The browser's own minlength check may stop the form first; either way nothing is created.
        time.sleep(0.3)
        assert requests.post(edge_server + "/v1/sessions", json={"username": name, "password": "short"}).status_code == 401
        fill_registration(driver, taken[0], "correct horse battery", "correct horse battery")
        wait(driver, lambda d: "taken" in alert_text(d), message="taken named")
        assert field(driver, "Username").get_attribute("value") == taken[0]

        fill_registration(driver, name, "correct horse battery", "correct horse battery")
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), message="the app, signed in")
        assert "code=" not in driver.current_url
        wait(driver, lambda d: "online" in status(d), message="online")
        new_note(driver, "First note", "written right after signing up")
        # Synced when the server has it (the status says "online" before the typing is saved).
        r = requests.post(edge_server + "/v1/sessions", json={"username": name, "password": "correct horse battery"})
        assert r.status_code == 200, r.text
        auth = {"Authorization": "Bearer " + r.json()["access_token"]}

        def on_server(_):
            records = requests.get(edge_server + "/v1/changes?since=0", headers=auth).json()["records"]
            return [(n["fields"].get("title"), n["fields"].get("body")) for n in records] == [("First note", "written right after signing up")]
        wait(driver, on_server, timeout=20, message="the note on the server")
    finally:
        driver.quit()
    # The account exists with that password, and holds the note.
    r = requests.post(edge_server + "/v1/sessions", json={"username": name, "password": "correct horse battery"})
    assert r.status_code == 200, r.text
    notes = requests.get(edge_server + "/v1/changes?since=0", headers={"Authorization": "Bearer " + r.json()["access_token"]}).json()["records"]
    assert [n["fields"]["title"] for n in notes] == ["First note"]


@pytest.fixture(scope="module")
def closed_server():
    yield from run_server("--no-registration")


def test_create_account_is_refused_clearly_when_registration_is_off(closed_server):
    driver = browser()
    try:
        open_create_account(driver, closed_server)
        assert "switched registration off" in alert_text(driver)
        assert not driver.find_elements(By.XPATH, "//button[normalize-space()='Create account']")
        driver.find_element(By.LINK_TEXT, "Sign in").click()
        wait(driver, lambda d: "/oauth/authorize" in d.current_url, message="back to sign-in")
    finally:
        driver.quit()
    # A form posted anyway is refused the same way.
    s = requests.Session()
    page = s.get(closed_server + "/oauth/register", params={
        "response_type": "code", "client_id": "noted-web", "redirect_uri": closed_server + "/",
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256"})
    assert page.status_code == 200 and "switched registration off" in page.text
