"""Shared spaces in the web app (protocol 2, docs/protocol.md "Spaces") in real browsers:
headless Chromium driven by Selenium against a real noted-server process.

- Two users in two browsers share a space made and shared in the page; both edit one note of
  it while offline: both edits are kept, both pages converge, and the page says who edited it.
- A viewer who joined by a link (`#join=SECRET`) sees the space's notes read-only and cannot
  add one.
- A member removed while offline: the space's notes leave their page, but their own unsynced
  edit stays, refused, and "Save a copy to my space" keeps it as a personal note.
- A database of the previous version (IndexedDB version 4) with a pending edit is upgraded
  (version 5) keeping it, and it syncs.

Skipped with a printed notice where Chromium cannot be found (as Tests/peers/test_webapp.py)."""
import time
import uuid

import pytest
import requests

import test_webapp as web
from test_webapp import by_label, set_offline, status, wait
from test_webapp_offline import Server, body, chromium, edited, open_exactly, profile_dir, register, replace_word, sign_in, stored  # noqa: F401

from selenium.webdriver.common.by import By  # noqa: E402 (test_webapp skips the module without selenium)

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def srv():
    server = Server()
    yield server
    server.stop()


_tokens = {}


def api(base, account, method, path, json=None):
    """A request of `account` (one first-party session each): the parsed answer."""
    if account not in _tokens:
        r = requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]})
        assert r.status_code == 200, r.text
        _tokens[account] = r.json()["access_token"]
    r = requests.request(method, base + path, json=json, headers={"Authorization": "Bearer " + _tokens[account]})
    assert 200 <= r.status_code < 300, f"{method} {path}: {r.status_code} {r.text}"
    return r.json() if r.text else None


def space_id(base, account, name):
    return next(s["id"] for s in api(base, account, "GET", "/v1/spaces")["spaces"] if s["name"] == name)


def space_notes(base, account, space):
    """The live notes of shared space `space` on the server: {id: fields}."""
    records = api(base, account, "GET", f"/v1/changes?since=0&space={space}")["records"]
    return {r["id"]: r["fields"] for r in records if not r.get("deleted")}


def push_to_space(base, account, space, notes):
    changes = [{"ccid": str(uuid.uuid4()), "collection": "notes", "id": i, "baseRev": 0, "op": "upsert", "space": space,
                "fields": {"title": {"set": t}, "body": {"set": b}}} for i, (t, b) in notes.items()]
    results = api(base, account, "POST", "/v1/push", {"changes": changes})["results"]
    assert all(x["type"] == "ack" for x in results), results


def share(base, owner, name, members):
    """A space of `owner` shared over HTTP with each [account, role]: its id."""
    space = api(base, owner, "POST", "/v1/spaces", {"name": name})["id"]
    for account, role in members:
        api(base, owner, "POST", f"/v1/spaces/{space}/invitations", {"username": account[0], "role": role})
        api(base, account, "POST", f"/v1/spaces/{space}/accept")
    return space


def spaces_listed(driver):
    return driver.execute_script("return [...document.querySelectorAll('#space-list button')].map(b => b.textContent)")


def choose(driver, label):
    wait(driver, lambda d: label in spaces_listed(d), timeout=15, message=f"{label} in the sidebar")
    driver.execute_script("[...document.querySelectorAll('#space-list button')].find(b => b.textContent === arguments[0]).click()", label)
    wait(driver, lambda d: d.execute_script(
        "const b = [...document.querySelectorAll('#space-list button')].find(b => b.textContent === arguments[0]);"
        "return b && b.getAttribute('aria-pressed') === 'true'", label), message=f"{label} chosen")


def listed(driver):
    return driver.execute_script("return [...document.querySelectorAll('#notes li .note-title')].map(e => e.textContent)")


def note_space(driver):
    return driver.execute_script("const e = document.getElementById('note-space'); return e.hidden ? '' : e.textContent")


def latest_author(base, account, note_id, space):
    revisions = api(base, account, "GET", f"/v1/records/notes/{note_id}/revisions?space={space}")["revisions"]
    return max((r for r in revisions if not r.get("conflict")), key=lambda r: r["rev"])["author"]


def test_two_users_share_a_space_edit_one_note_offline_both_edits_kept_and_the_page_says_who(srv, profile_dir):
    base = srv.base
    ann, bob = register(base, "ann"), register(base, "bob")
    a, b = chromium(profile_dir()), chromium(profile_dir())
    try:
        for d, account in ((a, ann), (b, bob)):
            sign_in(d, base, account)

        # Ann makes the space and invites Bob in the Share dialog.
        a.find_element(By.ID, "new-space").click()
        a.find_element(By.ID, "new-space-name").send_keys("Team")
        a.find_element(By.ID, "new-space-create").click()
        wait(a, lambda d: "Team · owner" in spaces_listed(d), timeout=15, message="the new space listed")
        choose(a, "Team · owner")
        a.find_element(By.ID, "share").click()
        wait(a, lambda d: d.find_element(By.ID, "share-dialog").is_displayed(), message="the Share dialog")
        a.find_element(By.ID, "invite-username").send_keys(bob[0])
        a.find_element(By.ID, "invite-send").click()
        wait(a, lambda d: f"Invited {bob[0]} as editor" in d.find_element(By.ID, "share-status").text, timeout=15, message="invited")
        a.find_element(By.ID, "share-close").click()
        space = space_id(base, ann, "Team")

        # Bob sees the invitation (read again when the window gets focus) and accepts it.
        b.execute_script("window.dispatchEvent(new Event('focus'))")
        accept = '[aria-label="Accept the invitation to Team"]'
        wait(b, lambda d: d.find_elements(By.CSS_SELECTOR, accept), timeout=15, message="the invitation shown")
        assert ann[0] in b.find_element(By.ID, "invitations").text
        b.find_element(By.CSS_SELECTOR, accept).click()
        wait(b, lambda d: "Team · editor" in spaces_listed(d), timeout=15, message="Bob in the space")

        # A note made in the space by Ann reaches Bob's page, in the space.
        web.new_note(a, "Plan", SENTENCE)
        wait(a, lambda d: any(f.get("body") == SENTENCE for f in space_notes(base, ann, space).values()), timeout=15, message="in the space on the server")
        note_id = next(i for i, f in space_notes(base, ann, space).items() if f.get("title") == "Plan")
        choose(b, "Team · editor")
        wait(b, lambda d: "Plan" in listed(d), timeout=15, message="the note on Bob's page")
        choose(b, "Personal")
        wait(b, lambda d: "Plan" not in listed(d), message="not among Bob's personal notes")
        choose(b, "Team · editor")
        open_exactly(b, "Plan")
        assert stored(b, note_id)["space"] == space
        wait(b, lambda d: note_space(d) == f"In Team · last edited by {ann[0]}", timeout=15, message="who edited it, on Bob's page")

        # Both offline, each edits another word: both edits kept, both pages converge.
        for d in (a, b):
            set_offline(d, True)
            wait(d, lambda d: status(d).startswith(("offline", "connecting")), timeout=15, message="offline")
        replace_word(a, "quick", "slow")
        replace_word(b, "lazy", "sleepy")
        for d, text in ((a, "The slow brown fox jumps over the lazy dog."), (b, "The quick brown fox jumps over the sleepy dog.")):
            wait(d, lambda d: (stored(d, note_id) or {}).get("local", {}).get("body") == text and edited(stored(d, note_id)),
                 timeout=15, message="the edit stored, pending")
        for d in (a, b):
            set_offline(d, False)
        merged = "The slow brown fox jumps over the sleepy dog."
        wait(a, lambda d: space_notes(base, ann, space).get(note_id, {}).get("body") == merged, timeout=30, message="both edits on the server")
        for d in (a, b):
            wait(d, lambda d: body(d) == merged and status(d) == "online", timeout=30, message="both edits on the page, nothing pending")
        author = latest_author(base, ann, note_id, space)
        assert author in (ann[0], bob[0])
        for d in (a, b):
            wait(d, lambda d: note_space(d) == f"In Team · last edited by {author}", timeout=15, message="the last editor shown")
        assert list(space_notes(base, ann, space)) == [note_id], "one note, not two"
    finally:
        a.quit()
        b.quit()


def test_a_viewer_who_joined_by_a_link_sees_the_space_read_only(srv, profile_dir):
    base = srv.base
    ann, cat = register(base, "ann"), register(base, "cat")
    space = share(base, ann, "Rules", [])
    note_id = str(uuid.uuid4())
    chores_id = str(uuid.uuid4())
    push_to_space(base, ann, space, {note_id: ("House rules", "no running"), chores_id: ("Chores", "- [ ] sweep")})
    a, c = chromium(profile_dir()), chromium(profile_dir())
    try:
        sign_in(a, base, ann)
        choose(a, "Rules · owner")
        a.find_element(By.ID, "share").click()
        wait(a, lambda d: d.find_element(By.ID, "share-dialog").is_displayed(), message="the Share dialog")
        wait(a, lambda d: ann[0] in d.find_element(By.ID, "members").text, timeout=15, message="the members listed")
        a.find_element(By.CSS_SELECTOR, "#link-role option[value=viewer]").click()
        a.find_element(By.ID, "link-create").click()
        wait(a, lambda d: d.find_element(By.ID, "link-url").is_displayed(), timeout=15, message="the link shown")
        url = a.find_element(By.ID, "link-url").get_attribute("value")
        assert "#join=" in url, url
        secret = url.split("#join=", 1)[1]

        sign_in(c, base, cat)
        c.get(base + "/#join=" + secret)
        wait(c, lambda d: "Rules · viewer (read-only)" in spaces_listed(d), timeout=15, message="joined by the link")
        wait(c, lambda d: d.execute_script("return location.hash") == "", message="the fragment removed")
        choose(c, "Rules · viewer (read-only)")
        assert not c.find_element(By.ID, "new-note").is_enabled(), "a viewer adds no note"
        open_exactly(c, "House rules")
        assert c.execute_script("return ['title', 'body', 'folder', 'tags'].every(id => document.getElementById(id).readOnly)")
        assert not c.find_element(By.ID, "trash").is_enabled()
        wait(c, lambda d: "read-only: you are a viewer" in note_space(d), message="said read-only")
        by_label(c, "Body").send_keys(" or shouting")
        assert body(c) == "no running"
        assert c.execute_script("return window.noted.store.pendingRecords().then(r => r.length)") == 0
        assert space_notes(base, ann, space)[note_id]["body"] == "no running"
        # A file pasted or dropped on a shared space's note is not attached (left to the browser).
        handled = c.execute_script("""
          const body = document.getElementById('body');
          const data = new DataTransfer();
          data.items.add(new File(['hello'], 'hello.txt', { type: 'text/plain' }));
          const drop = new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true });
          const over = new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true });
          const paste = new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true });
          body.dispatchEvent(over); body.dispatchEvent(drop); body.dispatchEvent(paste);
          return [over.defaultPrevented, drop.defaultPrevented, paste.defaultPrevented];
        """)
        assert handled == [False, False, False], handled
        # A task's box in the preview is drawn disabled and ticks nothing.
        open_exactly(c, "Chores")
        c.find_element(By.ID, "preview-toggle").click()
        wait(c, lambda d: d.find_elements(By.CSS_SELECTOR, "#preview input[type=checkbox]"), message="the task drawn")
        box = c.find_element(By.CSS_SELECTOR, "#preview input[type=checkbox]")
        assert not box.is_enabled(), "a viewer's task box is disabled"
        c.execute_script("const b = arguments[0]; b.disabled = false; b.click();", box)
        time.sleep(0.5)
        assert body(c) == "- [ ] sweep"
        assert c.execute_script("return window.noted.store.pendingRecords().then(r => r.length)") == 0
        # Ann sees Cat as a viewer among the members.
        a.find_element(By.ID, "share-close").click()
        a.find_element(By.ID, "share").click()
        wait(a, lambda d: f"{cat[0]} · viewer" in d.find_element(By.ID, "members").text, timeout=15, message="Cat a member")
    finally:
        a.quit()
        c.quit()


def test_a_member_removed_loses_the_space_but_keeps_an_unsynced_edit_and_can_copy_it(srv, profile_dir):
    base = srv.base
    ann, bob = register(base, "ann"), register(base, "bob")
    space = share(base, ann, "Trip", [(bob, "editor")])
    plan, budget = str(uuid.uuid4()), str(uuid.uuid4())
    push_to_space(base, ann, space, {plan: ("Day one", "the museum"), budget: ("Budget", "100")})
    b = chromium(profile_dir())
    try:
        sign_in(b, base, bob)
        wait(b, lambda d: {"Day one", "Budget"} <= set(listed(d)), timeout=15, message="the space's notes on Bob's page")
        open_exactly(b, "Day one")
        set_offline(b, True)
        wait(b, lambda d: status(d).startswith(("offline", "connecting")), timeout=15, message="offline")
        replace_word(b, "museum", "beach")
        wait(b, lambda d: edited(stored(d, plan)), timeout=15, message="the edit stored, pending")

        members = api(base, ann, "GET", f"/v1/spaces/{space}")["members"]
        bob_id = next(m["id"] for m in members if m["username"] == bob[0])
        api(base, ann, "DELETE", f"/v1/spaces/{space}/members/{bob_id}")
        set_offline(b, False)

        wait(b, lambda d: "Budget" not in listed(d) and stored(d, budget) is None, timeout=30, message="the space's synced note gone")
        wait(b, lambda d: ((stored(d, plan) or {}).get("sync") or {}).get("refusal", "").startswith("read_only: you are no longer a member"),
             timeout=15, message="the unsynced edit kept, refused")
        assert body(b) == "the beach"
        assert "Trip" not in " ".join(spaces_listed(b))
        assert space_notes(base, ann, space)[plan]["body"] == "the museum", "never sent"
        wait(b, lambda d: d.find_element(By.ID, "copy-personal").is_displayed(), message="the copy offered")
        assert "no longer a member" in note_space(b)
        b.find_element(By.ID, "copy-personal").click()
        wait(b, lambda d: stored(d, plan) is None, timeout=15, message="the original dropped")
        mine = lambda: [r for r in web.server_notes(base, bob) if not r.get("deleted") and r["fields"].get("title") == "Day one"]  # noqa: E731
        wait(b, lambda d: mine() and mine()[0]["fields"]["body"] == "the beach", timeout=30, message="the copy in Bob's personal space")
        wait(b, lambda d: body(d) == "the beach" and note_space(d) == "", timeout=15, message="the copy open, a personal note")
    finally:
        b.quit()


# Writes the legacy `noted` database as version 4 of the app left it (records in the Swift
# client's stored form, no `space` index), signed in, pulled to `cursor`, holding the server's
# note `synced` and the same note with an edit not yet sent.
WRITE_VERSION_4_DATABASE = """
const [tokens, id, title, text, rev, cursor, done] = arguments;
const req = indexedDB.open("noted", 4);
req.onupgradeneeded = () => {
  const db = req.result;
  const records = db.createObjectStore("records", { keyPath: "id" });
  records.createIndex("pending", "pend");
  db.createObjectStore("meta");
  db.createObjectStore("blobs", { keyPath: "sha" }).createIndex("pending", "pend");
  db.createObjectStore("tombstones");
};
req.onsuccess = () => {
  const db = req.result;
  const sub = JSON.parse(atob(tokens.access_token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub;
  const tx = db.transaction(["records", "meta"], "readwrite");
  const meta = tx.objectStore("meta");
  meta.put({ accessToken: tokens.access_token, refreshToken: tokens.refresh_token, expiresAt: Date.now() + tokens.expires_in * 1000, user: sub }, "session");
  meta.put(cursor, "cursor");
  meta.put(crypto.randomUUID(), "device");
  const fields = { title, body: text, tags: [], folder: null, pinned: false, trashed: false, created: null, modified: null, attachments: [] };
  tx.objectStore("records").put({ id, collection: "notes", local: { ...fields, body: text + " + edited offline" }, shadow: fields, rev,
    createdAt: Date.now(), updatedAt: Date.now(), sync: { edited: true }, lv: 3, pend: 1 });
  tx.oncomplete = () => { db.close(); done(true); };
  tx.onerror = () => done(String(tx.error));
};
req.onerror = () => done(String(req.error));
"""


def test_a_version_4_database_with_a_pending_edit_upgrades_and_syncs(srv, profile_dir):
    """IndexedDB version 5 adds the records' index `space`: a database of version 4 keeps every
    record and its pending edit, which then syncs (protocol 2)."""
    base = srv.base
    account = register(base, "v4")
    note_id = str(uuid.uuid4())
    web.push_notes(base, account, {note_id: ("Kept", "server text")})
    record = next(r for r in web.server_notes(base, account) if r["id"] == note_id)
    r = requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]})
    assert r.status_code == 200, r.text
    driver = chromium(profile_dir())
    try:
        driver.get(base + "/manifest.webmanifest")
        written = driver.execute_async_script(WRITE_VERSION_4_DATABASE, r.json(), note_id, "Kept", "server text", record["rev"], record["seq"])
        assert written is True, written
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": web.BLOCK_SYNC})
        driver.get(base + "/")
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), timeout=30, message="the app, signed in from version 4's session")
        wait(driver, lambda d: "Kept" in " ".join(listed(d)), timeout=15, message="the note listed")
        upgraded = driver.execute_async_script("const done = arguments[0];"
                                               "const req = indexedDB.open('noted'); req.onsuccess = () => { const db = req.result;"
                                               " done([db.version, [...db.transaction('records').objectStore('records').indexNames]]); db.close(); }")
        assert upgraded == [5, ["pending", "space"]]
        held = stored(driver, note_id)
        assert held["local"]["body"] == "server text + edited offline" and edited(held), held
        driver.execute_script("window.__syncBlocked = false; window.dispatchEvent(new Event('online'))")
        wait(driver, lambda d: web.server_note(base, account, note_id)["body"] == "server text + edited offline", timeout=30, message="the edit synced")
        wait(driver, lambda d: status(d) == "online", timeout=30, message="nothing pending")
    finally:
        driver.quit()
