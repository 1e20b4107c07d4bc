"""The web app offline in a real browser (the issue "The web client held to the same proof as the
Swift client"): headless Chromium driven by Selenium against a real noted-server process.

- Two browsers (two profiles) signed in as one user, both offline, edit the same sentence:
  different words merge, the same word keeps one version and the other in the history.
- Edits in several notes and a note created offline survive a reload while still offline, and
  reach the server and the other browser once online.
- A browser killed (SIGKILL of its process tree) while its pushes are unanswered, the server
  stopped (SIGSTOP): a new browser on the same profile sends its pending edits exactly once;
  and again with the server running, killed as soon as quick typing in three notes is stored.

Skipped with a printed notice where Chromium cannot be found (as Tests/peers/test_webapp.py)."""
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import pytest
import requests

import test_webapp as web
from test_webapp import BIN, CHROMIUM, DRIVER, WEB_ROOT, by_label, open_note, push_notes, server_note, server_notes, set_offline, status, wait

from selenium import webdriver  # noqa: E402 (test_webapp skips the module without selenium)
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


class Server:
    """A real noted-server on a free port over a fresh data directory, its process at hand
    (the tests stop and continue it)."""

    def __init__(self):
        self.data = tempfile.mkdtemp(prefix="noted-web-offline-")
        # Its own server: these tests sign in many times (the default allows 10 a minute).
        self.proc = subprocess.Popen([BIN, "--port", "0", "--data", self.data, "--web-root", WEB_ROOT, "--auth-attempts-per-minute", "1000"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"noted-server listening on (http://\S+)", line)
        assert m, f"unexpected first line {line!r}"
        self.base = m.group(1)

    def stop(self):
        self.proc.send_signal(signal.SIGCONT)  # never left stopped
        self.proc.terminate()
        self.proc.wait(timeout=20)
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture(scope="module")
def srv():
    server = Server()
    yield server
    server.stop()


def register(base, prefix):
    name, password = prefix + secrets.token_hex(3), "correct horse battery"
    r = requests.post(base + "/v1/accounts", json={"username": name, "password": password})
    assert r.status_code == 201, r.text
    return name, password


def chromium(profile):
    """Headless Chromium on the profile folder `profile` (its own IndexedDB, service worker, cache)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800", f"--user-data-dir={profile}"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    driver.set_script_timeout(30)
    return driver


@pytest.fixture
def profile_dir():
    """Makes Chromium profile folders, removed after the test."""
    made = []

    def make():
        made.append(tempfile.mkdtemp(prefix="noted-chromium-profile-"))
        return made[-1]
    yield make
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def sign_in(driver, base, account):
    # The shared helper waits 10 s for the first sync; two browsers on two loaded cores get 30.
    web.sign_in(driver, base, account, sync_timeout=30)


def body(driver):
    return by_label(driver, "Body").get_attribute("value")


def open_exactly(driver, title):
    """Opens the note titled `title` and waits until the editor shows it."""
    open_note(driver, title)
    wait(driver, lambda d: by_label(d, "Title").get_attribute("value") == title, timeout=15, message=f"{title} open")


def type_keys(driver, keys):
    """Real key presses into the focused element."""
    ActionChains(driver).send_keys(keys).perform()


def type_at_end(driver, keys):
    """Types `keys` at the end of the open note's body."""
    driver.execute_script("const b = document.getElementById('body'); b.focus(); b.setSelectionRange(b.value.length, b.value.length)")
    type_keys(driver, keys)


def replace_word(driver, word, replacement):
    """Selects `word` in the open note's body and types `replacement` over it."""
    found = driver.execute_script("const b = document.getElementById('body'); const i = b.value.indexOf(arguments[0]);"
                                  "if (i < 0) return false; b.focus(); b.setSelectionRange(i, i + arguments[0].length); return true", word)
    assert found, f"{word!r} not in {body(driver)!r}"
    type_keys(driver, replacement)


def stored(driver, note_id):
    """The note as this page's IndexedDB holds it (None: absent)."""
    result = driver.execute_async_script("const [id, done] = arguments;"
                                         "window.noted.store.get(id).then(r => done(r || null), e => done('error: ' + e))", note_id)
    assert not isinstance(result, str), result
    return result


def edited(record):
    """Whether a stored record (Web/records.js's form) has edits not yet put in a change."""
    return bool(((record or {}).get("sync") or {}).get("edited"))


def in_flight(record):
    """A stored record's change in flight (its `SyncState`'s `inflight`), or None."""
    return ((record or {}).get("sync") or {}).get("inflight")


def pending_records(driver):
    """The page's outbox (records with edits the server has not acknowledged), from IndexedDB."""
    result = driver.execute_async_script("const done = arguments[0];"
                                         "window.noted.store.pendingRecords().then(rs => done(rs), e => done('error: ' + e))")
    assert not isinstance(result, str), result
    return result


def row_id(driver, title):
    """The id of the list row titled `title` (None: not listed)."""
    return driver.execute_script("const li = [...document.querySelectorAll('#notes li')].find(e => e.querySelector('.note-title').textContent.endsWith(arguments[0]));"
                                 "return li ? li.dataset.id : null", title)


def listed(driver):
    return driver.execute_script("return [...document.querySelectorAll('#notes li .note-title')].map(e => e.textContent)")


def offline(driver):
    """Takes the page offline and waits until its status line says so."""
    set_offline(driver, True)
    wait(driver, lambda d: status(d).startswith(("offline", "connecting")), timeout=15, message="offline")


def online(driver):
    set_offline(driver, False)


def shell_cached(driver):
    """Waits until the service worker controls the page (it activates once the shell is cached):
    the page can then be reloaded offline."""
    wait(driver, lambda d: d.execute_script("return Boolean(navigator.serviceWorker && navigator.serviceWorker.controller)"),
         timeout=30, message="the service worker controls the page")


def live_notes(base, account):
    return [r for r in server_notes(base, account) if not r.get("deleted")]


def auth(account):
    return {"Authorization": "Bearer " + web._tokens[account]}


# --- 1. Two sessions of one user, both offline, editing the same sentence ---------------------

SENTENCE = "The quick brown fox jumps over the lazy dog."


def test_two_offline_sessions_edit_one_sentence_merge_or_keep_both_in_history(srv, profile_dir):
    base = srv.base
    account = register(base, "same")
    note_id = str(uuid.uuid4())
    push_notes(base, account, {note_id: ("Sentence", SENTENCE)})
    a, b = chromium(profile_dir()), chromium(profile_dir())
    try:
        for d in (a, b):
            sign_in(d, base, account)
            open_exactly(d, "Sentence")
            assert body(d) == SENTENCE

        # Different words of the sentence: both edits kept, everywhere.
        offline(a)
        offline(b)
        replace_word(a, "quick", "slow")
        replace_word(b, "lazy", "sleepy")
        for d, text in ((a, "The slow brown fox jumps over the lazy dog."), (b, "The quick brown fox jumps over the sleepy dog.")):
            wait(d, lambda d: (stored(d, note_id) or {}).get("local", {}).get("body") == text and edited(stored(d, note_id)),
                 timeout=15, message="the edit stored, pending")
        assert server_note(base, account, note_id)["body"] == SENTENCE, "an edit reached the server while offline"
        online(a)
        online(b)
        merged = "The slow brown fox jumps over the sleepy dog."
        wait(a, lambda d: server_note(base, account, note_id)["body"] == merged, timeout=30, message="both edits on the server")
        for d in (a, b):
            wait(d, lambda d: body(d) == merged and status(d) == "online", timeout=30, message="both edits on the page, nothing pending")
        assert [r["fields"]["body"] for r in live_notes(base, account)] == [merged]

        # The same word, changed differently in each: one version is the note's, the other is
        # kept in its history as a conflict revision; nothing is lost, nothing spliced.
        offline(a)
        offline(b)
        replace_word(a, "brown", "red")
        replace_word(b, "brown", "black")
        versions = {"The slow red fox jumps over the sleepy dog.", "The slow black fox jumps over the sleepy dog."}
        for d, text in ((a, "The slow red fox jumps over the sleepy dog."), (b, "The slow black fox jumps over the sleepy dog.")):
            wait(d, lambda d: (stored(d, note_id) or {}).get("local", {}).get("body") == text and edited(stored(d, note_id)),
                 timeout=15, message="the edit stored, pending")
        assert server_note(base, account, note_id)["body"] == merged
        online(a)
        online(b)
        wait(a, lambda d: server_note(base, account, note_id)["body"] in versions, timeout=30, message="one version on the server")
        for d in (a, b):
            wait(d, lambda d: status(d) == "online" and body(d) == server_note(base, account, note_id)["body"], timeout=30,
                 message="the pages equal the server, nothing pending")
        kept = server_note(base, account, note_id)["body"]
        other = (versions - {kept}).pop()
        assert body(a) == body(b) == kept
        assert [r["fields"]["body"] for r in live_notes(base, account)] == [kept], "one note, not two"

        revisions = requests.get(f"{base}/v1/records/notes/{note_id}/revisions", headers=auth(account)).json()["revisions"]
        conflicts = [r for r in revisions if r.get("conflict")]
        assert conflicts, revisions
        held = [requests.get(f"{base}/v1/records/notes/{note_id}/revisions/{r['rev']}?conflict=true", headers=auth(account)).json()["fields"]["body"]
                for r in conflicts]
        assert other in held, (other, held)

        # The History panel lists it, marked as a conflict, with its Restore button.
        for d in (a, b):
            d.find_element(By.ID, "history-toggle").click()
            wait(d, lambda d: d.execute_script(
                "return [...document.querySelectorAll('#revisions ul > li')].filter(e => e.querySelector('.conflict') && e.textContent.includes('conflict'))"
                ".map(e => e.querySelector('button').getAttribute('aria-label')).sort()") == sorted(f"Restore revision {r['rev']}" for r in conflicts),
                 timeout=15, message="the conflict revision in the History panel")
    finally:
        a.quit()
        b.quit()


# --- 2. A reload with edits pending -----------------------------------------------------------

def test_offline_edits_in_several_notes_and_a_new_note_survive_a_reload_then_sync(srv, profile_dir):
    base = srv.base
    account = register(base, "reload")
    ids = {t: str(uuid.uuid4()) for t in ("Alpha", "Beta", "Gamma", "Delta")}
    push_notes(base, account, {
        ids["Alpha"]: ("Alpha", "first line of alpha"),
        ids["Beta"]: ("Beta", "beta begins, beta ends"),
        ids["Gamma"]: ("Gamma", "gamma"),
        ids["Delta"]: ("Delta", "left alone"),
    })
    before = {r["id"]: r for r in server_notes(base, account)}
    a, b = chromium(profile_dir()), chromium(profile_dir())
    try:
        sign_in(a, base, account)
        sign_in(b, base, account)
        shell_cached(a)
        wait(a, lambda d: len(listed(d)) == 4, message="four notes listed")
        offline(a)

        # Offline: typing in three notes and a new note.
        open_exactly(a, "Alpha")
        type_at_end(a, "\nsecond line, typed offline 🇫🇷")
        open_exactly(a, "Beta")
        a.execute_script("const b = document.getElementById('body'); const i = b.value.indexOf(', beta ends'); b.focus(); b.setSelectionRange(i, i)")
        type_keys(a, " and goes on")
        a.find_element(By.XPATH, "//button[normalize-space()='New note']").click()
        wait(a, lambda d: by_label(d, "Title").get_attribute("value") == "" and d.switch_to.active_element == by_label(d, "Title"), message="the new note")
        type_keys(a, "Made offline")
        by_label(a, "Body").click()
        type_keys(a, "written with no network")
        open_exactly(a, "Gamma")
        type_at_end(a, " ray")
        expected = {
            ids["Alpha"]: "first line of alpha\nsecond line, typed offline 🇫🇷",
            ids["Beta"]: "beta begins and goes on, beta ends",
            ids["Gamma"]: "gamma ray",
        }
        new_id = row_id(a, "Made offline")
        assert new_id, listed(a)

        def all_stored(d, texts):
            return all((stored(d, i) or {}).get("local", {}).get("body") == t for i, t in texts.items())
        # What the page has written to IndexedDB (typing is written when it pauses).
        wait(a, lambda d: all_stored(d, {**expected, new_id: "written with no network"}), timeout=15, message="the typing stored")
        wait(a, lambda d: status(d).endswith("· 4 pending"), message="4 pending")

        a.refresh()
        wait(a, lambda d: d.find_element(By.ID, "app").is_displayed(), timeout=30, message="the app opens offline")
        wait(a, lambda d: set(listed(d)) == {"Alpha", "Beta", "Gamma", "Delta", "Made offline"}, timeout=15, message="the notes after the reload")
        wait(a, lambda d: status(d).startswith(("offline", "connecting")) and status(d).endswith("· 4 pending"), timeout=15,
             message="still offline, 4 pending")
        assert not a.execute_script("return navigator.onLine")
        for title, note_id in (("Alpha", ids["Alpha"]), ("Beta", ids["Beta"]), ("Gamma", ids["Gamma"]), ("Made offline", new_id)):
            open_exactly(a, title)
            assert body(a) == expected.get(note_id, "written with no network"), title
        rows = a.execute_script("return Object.fromEntries([...document.querySelectorAll('#notes li')].map(li => [li.dataset.id, li.textContent]))")
        for note_id in (*expected, new_id):
            assert "not synced" in rows[note_id], rows[note_id]
        assert "not synced" not in rows[ids["Delta"]]

        # The editing goes on after the reload, still offline.
        type_at_end(a, " and more")  # in "Made offline", open last
        open_exactly(a, "Alpha")
        type_at_end(a, "\nthird line, after the reload")
        expected[ids["Alpha"]] += "\nthird line, after the reload"
        expected[new_id] = "written with no network and more"
        wait(a, lambda d: all_stored(d, expected), timeout=15, message="the later typing stored")

        # Typing reloaded at once, before the page wrote it (it writes when typing pauses): in
        # one note the editor left (its write under way or not), and in the one open.
        open_exactly(a, "Made offline")
        type_at_end(a, ", kept")
        open_exactly(a, "Gamma")
        type_at_end(a, " burst")
        a.refresh()
        expected[new_id] += ", kept"
        expected[ids["Gamma"]] += " burst"
        wait(a, lambda d: d.find_element(By.ID, "app").is_displayed() and len(listed(d)) == 5, timeout=30, message="the app again")
        wait(a, lambda d: all_stored(d, expected), timeout=15, message="the typing of just before the reload stored")
        for title, note_id in (("Gamma", ids["Gamma"]), ("Made offline", new_id)):
            open_exactly(a, title)
            assert body(a) == expected[note_id], title
        # Nothing reached the server meanwhile.
        assert {r["id"]: (r["rev"], r["fields"]) for r in server_notes(base, account)} == {i: (r["rev"], r["fields"]) for i, r in before.items()}

        online(a)

        def on_server(_):
            notes = {r["id"]: r["fields"] for r in live_notes(base, account)}
            return all(notes.get(i, {}).get("body") == t for i, t in expected.items()) and notes.get(new_id, {}).get("title") == "Made offline"
        wait(a, on_server, timeout=30, message="the edits reached the server")
        wait(a, lambda d: status(d) == "online", timeout=30, message="nothing pending")
        notes = {r["id"]: r["fields"] for r in live_notes(base, account)}
        assert len(notes) == 5, [f["title"] for f in notes.values()]  # nothing doubled
        assert notes[ids["Delta"]] == before[ids["Delta"]]["fields"]
        assert next(r for r in server_notes(base, account) if r["id"] == ids["Delta"])["rev"] == before[ids["Delta"]]["rev"]

        # The other session has them, each as the server has it.
        for title, note_id in (("Alpha", ids["Alpha"]), ("Beta", ids["Beta"]), ("Gamma", ids["Gamma"]), ("Made offline", new_id)):
            wait(b, lambda d: row_id(d, title) == note_id, timeout=15, message=f"{title} in the other session")
            open_exactly(b, title)
            wait(b, lambda d: body(d) == expected[note_id], timeout=15, message=f"{title}'s text in the other session")
        assert set(listed(b)) == {"Alpha", "Beta", "Gamma", "Delta", "Made offline"}
    finally:
        a.quit()
        b.quit()


# --- 3. A browser killed mid-sync with edits pending ------------------------------------------

def descendants(pid):
    """The ids of every process descended from `pid` (read from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def using_profile(profile):
    """The ids of processes whose command line names the profile folder (Chromium's, however parented)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f"--user-data-dir={profile}".encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def kill_browser(driver, profile):
    """SIGKILL to Chromium's every process (no clean quit: nothing is flushed or closed), then
    to its chromedriver."""
    chromedriver = driver.service.process
    victims = set(descendants(chromedriver.pid)) | set(using_profile(profile))
    assert victims, "no Chromium process found"
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    chromedriver.kill()
    chromedriver.wait(timeout=20)
    deadline = time.time() + 20
    while time.time() < deadline and [p for p in victims if os.path.exists(f"/proc/{p}") and not zombie(p)]:
        time.sleep(0.05)
    left = [p for p in victims if os.path.exists(f"/proc/{p}") and not zombie(p)]
    assert not left, f"still running: {left}"


def zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] == "Z"
    except OSError:
        return True


# Installed before the app's scripts: the messages its WebSocket sends are kept in window.__sent.
LOG_SENT = """
(() => {
  const Real = window.WebSocket;
  window.__sent = [];
  window.WebSocket = class extends Real {
    send(data) {
      try { window.__sent.push(JSON.parse(data)); } catch {}
      return super.send(data);
    }
  };
})();
"""


def test_a_browser_killed_with_pushes_unanswered_sends_its_edits_exactly_once(srv, profile_dir):
    base = srv.base
    account = register(base, "killed")
    ids = {t: str(uuid.uuid4()) for t in ("North", "South", "East")}
    push_notes(base, account, {ids["North"]: ("North", "north:"), ids["South"]: ("South", "south:"), ids["East"]: ("East", "east:")})
    profile = profile_dir()
    a, b = chromium(profile), chromium(profile_dir())
    a2 = None
    stopped = False
    try:
        sign_in(a, base, account)
        sign_in(b, base, account)
        wait(a, lambda d: len(listed(d)) == 3, message="three notes listed")

        # The server stops answering (SIGSTOP): the pushes go out and stay unanswered.
        srv.proc.send_signal(signal.SIGSTOP)
        stopped = True
        open_exactly(a, "North")
        type_at_end(a, " n1 n2 n3")
        open_exactly(a, "South")
        type_at_end(a, " s1 s2")
        a.find_element(By.XPATH, "//button[normalize-space()='New note']").click()
        wait(a, lambda d: d.switch_to.active_element == by_label(d, "Title"), message="the new note")
        type_keys(a, "Written before the crash")
        by_label(a, "Body").click()
        type_keys(a, "c1 c2")
        open_exactly(a, "East")
        type_at_end(a, " e1")
        new_id = row_id(a, "Written before the crash")
        assert new_id
        # Sent: each note's change is stored in flight (with its ccid) before it goes out.
        wait(a, lambda d: all(in_flight(stored(d, i)) for i in (ids["North"], ids["South"], ids["East"], new_id)),
             timeout=15, message="the changes in flight")
        # And more typing on top of what is in flight: held as the next change.
        open_exactly(a, "North")
        type_at_end(a, " n4")
        wait(a, lambda d: (stored(d, ids["North"]) or {}).get("local", {}).get("body") == "north: n1 n2 n3 n4" and edited(stored(d, ids["North"])),
             timeout=15, message="more typing stored on top")
        expected = {ids["North"]: "north: n1 n2 n3 n4", ids["South"]: "south: s1 s2", ids["East"]: "east: e1", new_id: "c1 c2"}
        outbox = {r["id"]: r for r in pending_records(a)}
        assert set(outbox) == set(expected), outbox.keys()
        assert all(outbox[i]["local"]["body"] == t for i, t in expected.items())
        assert not any(r.get("rev", 0) > 1 for r in outbox.values()), "acknowledged while the server was stopped"

        inflight = {i: in_flight(r) for i, r in outbox.items()}
        assert set(inflight) == set(expected), "a change in flight for each note"

        kill_browser(a, profile)
        a = None
        srv.proc.send_signal(signal.SIGCONT)
        stopped = False
        # The pushes had reached the server's socket: it applies them now, and its acks go
        # nowhere. The restarted browser must not apply them a second time.
        def applied(_):
            notes = {r["id"]: r["fields"] for r in live_notes(base, account)}
            return all(notes.get(i, {}).get("body") == change["sent"]["body"] for i, change in inflight.items())
        wait(b, applied, timeout=20, message="the pushes in flight when the browser was killed applied by the server")

        # A new Chromium on the same profile: still signed in, the outbox still there, and it
        # reaches the server exactly once.
        a2 = chromium(profile)
        a2.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": LOG_SENT})
        a2.get(base + "/")
        # (Signed out here, the welcome page shown, is a failure too: the session is in the profile.)
        wait(a2, lambda d: d.find_element(By.ID, "app").is_displayed(), timeout=30, message="the app, signed in from the profile")

        def on_server(_):
            notes = {r["id"]: r["fields"] for r in live_notes(base, account)}
            return all(notes.get(i, {}).get("body") == t for i, t in expected.items())
        wait(a2, on_server, timeout=45, message="the pending edits reached the server")
        wait(a2, lambda d: status(d) == "online", timeout=30, message="nothing pending")
        notes = live_notes(base, account)
        assert sorted(r["fields"]["title"] for r in notes) == ["East", "North", "South", "Written before the crash"], "no note doubled"
        assert {r["id"]: r["fields"]["body"] for r in notes} == expected  # no text doubled or lost
        assert pending_records(a2) == []
        # The changes in flight at the kill were sent again under their ccids (the server
        # answered them as duplicates: applied once), then the typing on top.
        pushed = [c["ccid"] for m in a2.execute_script("return window.__sent") if m.get("type") == "push" for c in m["changes"]]
        assert {c["ccid"] for c in inflight.values()} <= set(pushed), (inflight, pushed)
        # And no conflict revision (a change applied twice over its own text would make one).
        for note_id in expected:
            revisions = requests.get(f"{base}/v1/records/notes/{note_id}/revisions", headers=auth(account)).json()["revisions"]
            assert not any(r.get("conflict") for r in revisions), revisions

        # The other session ends equal.
        for title, note_id in (("North", ids["North"]), ("South", ids["South"]), ("East", ids["East"]), ("Written before the crash", new_id)):
            wait(b, lambda d: row_id(d, title) == note_id, timeout=15, message=f"{title} in the other session")
            open_exactly(b, title)
            wait(b, lambda d: body(d) == expected[note_id], timeout=15, message=f"{title}'s text in the other session")
        assert sorted(listed(b)) == ["East", "North", "South", "Written before the crash"]
        # And the restarted one.
        assert sorted(listed(a2)) == ["East", "North", "South", "Written before the crash"]
        open_exactly(a2, "North")
        assert body(a2) == expected[ids["North"]]
    finally:
        if stopped:
            srv.proc.send_signal(signal.SIGCONT)
        for d in (a, a2, b):
            if d is not None:
                d.quit()


def test_a_browser_killed_while_its_typing_syncs_online_sends_it_exactly_once(srv, profile_dir):
    """The same without stopping the server: typing in three notes quickly, the browser killed
    as soon as the typing is in IndexedDB, whatever its changes' state (unsent, in flight,
    acknowledged): the race is real, the outcome must not depend on it."""
    base = srv.base
    account = register(base, "racing")
    ids = {t: str(uuid.uuid4()) for t in ("Red", "Green", "Blue")}
    push_notes(base, account, {i: (t, t.lower() + ":") for t, i in ids.items()})
    profile = profile_dir()
    a, b = chromium(profile), chromium(profile_dir())
    a2 = None
    try:
        sign_in(a, base, account)
        sign_in(b, base, account)
        wait(a, lambda d: len(listed(d)) == 3, message="three notes listed")
        for title, keys in (("Red", " r1 r2"), ("Green", " g1"), ("Blue", " b1 b2 b3"), ("Red", " r3"), ("Green", " g2")):
            open_exactly(a, title)
            type_at_end(a, keys)
        expected = {ids["Red"]: "red: r1 r2 r3", ids["Green"]: "green: g1 g2", ids["Blue"]: "blue: b1 b2 b3"}
        wait(a, lambda d: all((stored(d, i) or {}).get("local", {}).get("body") == t for i, t in expected.items()),
             timeout=15, message="the typing stored")
        states = {i: ("edited" if edited(r) else "in flight" if in_flight(r) else "acknowledged")
                  for i in expected for r in [stored(a, i)]}
        kill_browser(a, profile)
        a = None
        print(f"\nkilled with: {sorted(states.values())}")

        a2 = chromium(profile)
        a2.get(base + "/")
        wait(a2, lambda d: d.find_element(By.ID, "app").is_displayed(), timeout=30, message="the app, signed in from the profile")

        def on_server(_):
            notes = {r["id"]: r["fields"] for r in live_notes(base, account)}
            return all(notes.get(i, {}).get("body") == t for i, t in expected.items())
        wait(a2, on_server, timeout=45, message="the typing reached the server")
        wait(a2, lambda d: status(d) == "online", timeout=30, message="nothing pending")
        assert {r["id"]: r["fields"]["body"] for r in live_notes(base, account)} == expected  # nothing doubled, nothing lost
        for title, note_id in (("Red", ids["Red"]), ("Green", ids["Green"]), ("Blue", ids["Blue"])):
            open_exactly(b, title)
            wait(b, lambda d: body(d) == expected[note_id], timeout=15, message=f"{title}'s text in the other session")
            open_exactly(a2, title)
            assert body(a2) == expected[note_id]
    finally:
        for d in (a, a2, b):
            if d is not None:
                d.quit()


# --- 4b. A database of the previous stored form (IndexedDB version 3) with pending edits ---------

# Writes the legacy `noted` database with version 3's store (the fixture web-v3/db.js, that
# version's own code), signed in as its `noted.js` auth left it, pulled to `cursor`, holding the
# server's notes `notes` ({ id: [title, body, rev] }) as that version stored them, with pending
# edits of each kind: unsent, in flight (never answered), created, purged, refused.
WRITE_VERSION_3_DATABASE = """
const [source, tokens, ids, notes, cursor, done] = arguments;
const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
import(url).then(async ({ LocalStore, newRecord, normalizeFields }) => {
  const sub = JSON.parse(atob(tokens.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const store = await LocalStore.open();
  await store.setMeta("session", { accessToken: tokens.access_token, refreshToken: tokens.refresh_token,
                                   expiresAt: Date.now() + tokens.expires_in * 1000, user: sub });
  await store.setMeta("cursor", cursor);
  await store.setMeta("device", crypto.randomUUID());
  const synced = (id) => {
    const [title, body, rev] = notes[id];
    const fields = normalizeFields({ title, body });
    return { ...newRecord(id, fields), shadow: { fields, rev }, dirty: false };
  };
  const put = (id, record) => store.update(id, () => record);
  await put(ids.synced, synced(ids.synced));
  const edited = synced(ids.edited);
  await put(ids.edited, { ...edited, local: { ...edited.local, body: "server text + edited offline", tags: ["offline"] }, dirty: true });
  const flying = synced(ids.inflight);
  const sent = { ...flying.local, body: "server text + sent, never answered" };
  const change = { ccid: crypto.randomUUID(), collection: "notes", id: ids.inflight, baseRev: flying.shadow.rev, op: "upsert",
                   fields: { body: { set: sent.body } } };
  await put(ids.inflight, { ...flying, local: sent, inflight: { ccid: change.ccid, baseRev: change.baseRev, change, sent } });
  await put(ids.purged, { ...synced(ids.purged), purged: true, dirty: true });
  const refused = synced(ids.refused);
  await put(ids.refused, { ...refused, local: { ...refused.local, body: "refused here" },
                           refusal: { code: "invalid_field", message: "(test)" } });
  await put(ids.created, newRecord(ids.created, { title: "Created in version 3", body: "typed offline" }));
  const version = store.db.version;
  const records = await new Promise((resolve) => {
    store.db.transaction("records").objectStore("records").getAll().onsuccess = (e) => resolve(e.target.result);
  });
  store.db.close();
  done({ version, records });
}).catch((error) => done(String(error && error.stack || error)));
"""


def test_a_version_3_database_with_pending_edits_upgrades_and_syncs(srv, profile_dir):
    """A database the previous version wrote (IndexedDB version 3, records in its own shape) with
    edits of every kind not yet synced: the current app upgrades it (version 4: the Swift
    client's stored form, and tombstones), loses none of them, and syncs them; the refused one
    stays refused, shown as such."""
    base = srv.base
    account = register(base, "v3")
    ids = {k: str(uuid.uuid4()) for k in ("synced", "edited", "inflight", "purged", "refused", "created")}
    push_notes(base, account, {ids[k]: (k.capitalize(), "server text") for k in ("synced", "edited", "inflight", "purged", "refused")})
    before = {r["id"]: r for r in server_notes(base, account)}
    notes = {i: [r["fields"]["title"], r["fields"]["body"], r["rev"]] for i, r in before.items()}
    cursor = max(r["seq"] for r in before.values())
    source = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "web-v3", "db.js")).read()
    driver = chromium(profile_dir())
    try:
        # Version 3's code writes its database in a page of the app's origin where the app does
        # not run (the server's Content-Security-Policy forbids a module from a blob: URL: bypassed there).
        driver.execute_cdp_cmd("Page.setBypassCSP", {"enabled": True})
        driver.get(base + "/manifest.webmanifest")
        written = driver.execute_async_script(WRITE_VERSION_3_DATABASE, source, web.web_session(base, account), ids, notes, cursor)
        assert isinstance(written, dict), written
        assert written["version"] == 3
        old = {r["id"]: r for r in written["records"]}
        assert old[ids["synced"]]["shadow"] == {"rev": notes[ids["synced"]][2], "same": True}, "version 3's packed shadow"
        assert old[ids["inflight"]]["inflight"]["change"]["ccid"] and old[ids["edited"]]["dirty"] and old[ids["purged"]]["purged"]
        driver.execute_cdp_cmd("Page.setBypassCSP", {"enabled": False})

        # The current app, its sync held back first: the database upgraded, every note there,
        # the pending ones in the outbox.
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": web.BLOCK_SYNC})
        driver.get(base + "/")
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), timeout=30, message="the app, signed in from version 3's session")
        shown = ["Synced", "Edited", "Inflight", "Refused", "Created in version 3"]
        wait(driver, lambda d: sorted(t.lstrip("⚠") for t in listed(d)) == sorted(shown), timeout=15, message="the version-3 notes listed")
        version = driver.execute_async_script("const done = arguments[0];"
                                              "const req = indexedDB.open('noted'); req.onsuccess = () => {"
                                              " done([req.result.version, [...req.result.objectStoreNames]]); req.result.close(); }")
        assert version == [5, ["blobs", "meta", "records", "tombstones"]]
        upgraded = {r["id"]: r for r in pending_records(driver)}
        assert set(upgraded) == {ids[k] for k in ("edited", "inflight", "purged", "refused", "created")}
        assert edited(upgraded[ids["edited"]]) and upgraded[ids["edited"]]["local"]["body"] == "server text + edited offline"
        change = in_flight(upgraded[ids["inflight"]])
        assert change["ccid"] == old[ids["inflight"]]["inflight"]["ccid"], "the change in flight kept, to be resent unchanged"
        assert upgraded[ids["purged"]]["sync"]["purging"]
        assert upgraded[ids["refused"]]["sync"]["refusal"] == "invalid_field: (test)"
        assert upgraded[ids["created"]]["rev"] == 0 and edited(upgraded[ids["created"]])
        synced = stored(driver, ids["synced"])
        assert synced["sync"] is None and synced["rev"] == notes[ids["synced"]][2] and synced["shadow"]["body"] == "server text"

        # Online: every pending edit reaches the server once; the refused one stays here, marked.
        driver.execute_script("window.__syncBlocked = false; window.dispatchEvent(new Event('online'))")

        def synced_all(_):
            live = {r["id"]: r["fields"] for r in live_notes(base, account)}
            return (live.get(ids["edited"], {}).get("body") == "server text + edited offline"
                    and live.get(ids["inflight"], {}).get("body") == "server text + sent, never answered"
                    and live.get(ids["created"], {}).get("body") == "typed offline"
                    and ids["purged"] not in live)
        wait(driver, synced_all, timeout=30, message="the version-3 outbox reached the server")
        live = {r["id"]: r for r in live_notes(base, account)}
        assert len(live) == 5, [r["fields"]["title"] for r in live.values()]  # nothing lost, nothing doubled
        assert live[ids["edited"]]["fields"]["tags"] == ["offline"]
        assert live[ids["synced"]]["rev"] == before[ids["synced"]]["rev"]
        assert live[ids["refused"]]["fields"]["body"] == "server text", "a refused edit is not sent"
        wait(driver, lambda d: [r["id"] for r in pending_records(d)] == [ids["refused"]], timeout=15, message="only the refused note held")
        open_exactly(driver, "Refused")
        assert body(driver) == "refused here"
        wait(driver, lambda d: web.refusal_shown(d) and "invalid_field" in web.refusal_shown(d), message="shown as refused")
        # A purged note's tombstone: its id is never taken in again.
        assert driver.execute_async_script("const done = arguments[0];"
                                           "const tx = window.noted.store.db.transaction('tombstones');"
                                           "tx.objectStore('tombstones').getAllKeys().onsuccess = (e) => done(e.target.result)") == [ids["purged"]]
    finally:
        driver.quit()


# --- 5. Removing this browser's copy at sign-out, never losing an edit silently -------------------
# (security review 3, L2: after a sign-out the account's database stayed, readable by whoever
# uses the browser profile next.)

def database_names(driver):
    return driver.execute_script("return indexedDB.databases().then(list => list.map(d => d.name))")


def text_of(driver, element_id):
    return driver.execute_script("const e = document.getElementById(arguments[0]); return e ? e.textContent : ''", element_id)


def tick(driver, element_id):
    """Clicks a checkbox's label, as a person would."""
    label = driver.find_element(By.CSS_SELECTOR, f'label[for="{element_id}"]')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", label)
    label.click()


def test_removing_the_copy_waits_for_an_edit_the_stopped_server_has_not_got(srv, profile_dir):
    """The server stopped (SIGSTOP): an edit stays unacknowledged. The sign-out dialog offers
    the removal unticked; ticked, it says the edit has not reached the server; not confirmed
    (Cancel) everything stays. "Sync, then sign out" waits: the server back, the edit reaches
    it, and only then is this browser signed out and its copy removed: the database gone from
    indexedDB.databases(), and a reload (the profile opened again) shows the sign-in page and
    nothing of the notes."""
    base = srv.base
    account = register(base, "waits")
    profile = profile_dir()
    driver = chromium(profile)
    stopped = False
    try:
        sign_in(driver, base, account)
        shell_cached(driver)
        web.new_note(driver, "Synced before", "on the server")
        wait(driver, lambda d: any(n["fields"].get("title") == "Synced before" for n in live_notes(base, account)), timeout=15, message="synced")
        wait(driver, lambda d: status(d) == "online", timeout=15, message="nothing pending")
        name = driver.execute_script("return window.noted.store.name")
        assert name in database_names(driver)

        srv.proc.send_signal(signal.SIGSTOP)
        stopped = True
        web.new_note(driver, "Typed while the server was stopped", "must reach it before the copy goes")
        wait(driver, lambda d: any(r["local"]["title"] == "Typed while the server was stopped" for r in pending_records(d)),
             message="the edit stored, unacknowledged")
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, web.dialog_open, message="the sign-out dialog")
        assert not driver.find_element(By.ID, "sign-out-remove").is_selected(), "the removal is off with an unsynced edit"
        tick(driver, "sign-out-remove")
        wait(driver, lambda d: text_of(d, "sign-out-warning").startswith("1 edit on this browser has not reached the server yet"), message="the warning")
        # Not confirmed: everything kept.
        web.button(driver, "Cancel").click()
        wait(driver, lambda d: not web.dialog_open(d), message="the dialog closed")
        assert driver.find_element(By.ID, "app").is_displayed()
        assert name in database_names(driver)
        assert [r["local"]["title"] for r in pending_records(driver)] == ["Typed while the server was stopped"]

        # Sync first: it waits while the server is stopped, then signs out and removes the copy.
        driver.find_element(By.ID, "sign-out").click()
        wait(driver, web.dialog_open, message="the sign-out dialog again")
        tick(driver, "sign-out-remove")
        web.button(driver, "Sync, then sign out").click()
        wait(driver, lambda d: text_of(d, "sign-out-syncing") == "Syncing…", message="waiting for the server")
        time.sleep(1.5)
        assert web.dialog_open(driver) and name in database_names(driver), "signed out before the edit reached the server"
        srv.proc.send_signal(signal.SIGCONT)
        stopped = False
        wait(driver, web.signed_out, timeout=30, message="signed out once the edit reached the server")
        assert any(n["fields"].get("title") == "Typed while the server was stopped" for n in live_notes(base, account))
        wait(driver, lambda d: name not in database_names(d), message="the database gone")
        assert not any(n.startswith("noted:") for n in database_names(driver)), database_names(driver)
        assert driver.execute_script("return localStorage.getItem('noted.account')") is None
    finally:
        if stopped:
            srv.proc.send_signal(signal.SIGCONT)
        driver.quit()
    # The profile opened again (a new browser process): the sign-in page, nothing of the notes.
    driver = chromium(profile)
    try:
        driver.get(base + "/")
        wait(driver, web.signed_out, timeout=15, message="the welcome page")
        time.sleep(0.3)
        assert driver.find_element(By.ID, "sign-in").is_displayed()
        assert not driver.execute_script("const e = document.getElementById('local-copy'); return e.checkVisibility()")
        assert listed(driver) == []
        html = driver.execute_script("return document.documentElement.outerHTML")
        assert "Synced before" not in html and "Typed while the server was stopped" not in html
        assert name not in database_names(driver), database_names(driver)
    finally:
        driver.quit()
