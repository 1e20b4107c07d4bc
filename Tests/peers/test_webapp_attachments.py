"""Attachments in the web app (issue 17), in a real browser (headless Chromium driven by
Selenium against a real noted-server with the blob API): a file attached through "Attach file",
pasted or dropped onto the body is uploaded (the server's bytes are the file's), listed in the
note's `attachments` field and linked from its body; another session of the account shows it
and downloads the same bytes; one attached offline survives a reload and is uploaded and synced
once online; one over the server's --max-blob-bytes is refused with a message and stored
nowhere; another account cannot read it. Skipped with a printed notice where Chromium cannot be
found (as test_webapp.py, whose helpers these are)."""
import base64
import hashlib
import os
import random
import struct
import tempfile
import time
import zlib

import pytest
import requests

from test_webapp import (  # noqa: F401 (skips this module, as that one, without Chromium)
    By, browser, new_note, open_note, register, run_server, set_offline, sign_in, status, wait,
)

MAX_BLOB = 100000


@pytest.fixture(scope="module")
def blob_server():
    yield from run_server("--auth-attempts-per-minute", "1000", "--max-blob-bytes", str(MAX_BLOB))


def png(width, height, seed):
    """A valid PNG of random pixels (so that it does not compress away)."""
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def write(folder, name, data):
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def a_file(name, data):
    """The file `name` holding `data` in a new folder: its path and SHA-256."""
    return write(tempfile.mkdtemp(prefix="noted-web-attach-"), name, data), hashlib.sha256(data).hexdigest()


class Api:
    """The account over HTTP, beside the browser (one first-party sign-in)."""

    def __init__(self, base, account):
        self.base = base
        r = requests.post(base + "/v1/sessions", json={"username": account[0], "password": account[1]})
        assert r.status_code == 200, r.text
        self.headers = {"Authorization": "Bearer " + r.json()["access_token"]}

    def notes(self):
        r = requests.get(self.base + "/v1/changes?since=0", headers=self.headers)
        assert r.status_code == 200, r.text
        return r.json()["records"]

    def note(self, title):
        return next((r["fields"] for r in self.notes() if r["fields"].get("title") == title), None)

    def blob(self, sha):
        return requests.get(f"{self.base}/v1/blobs/{sha}", headers=self.headers)

    def blobs(self):
        r = requests.get(self.base + "/v1/blobs", headers=self.headers)
        assert r.status_code == 200, r.text
        return r.json()


def attach(driver, path):
    driver.find_element(By.CSS_SELECTOR, 'input[type=file][aria-label="Attach file"]').send_keys(path)


def body(driver):
    return driver.find_element(By.ID, "body").get_attribute("value")


def listed(driver):
    """The editor's list of files: [(name, size text, thumbnail src or None)]."""
    return driver.execute_script("""
      return [...document.querySelectorAll('#attachment-list li')].map(li => [
        li.querySelector('.attachment-name').textContent, li.querySelector('.attachment-size').textContent,
        (li.querySelector('img.thumb:not([hidden])') || {}).src || null]);""")


# The page's object URLs, counted: URL.createObjectURL and revokeObjectURL wrapped before the
# app's scripts run, keeping each live URL's blob (the page's CSP lets no script fetch a blob: URL).
TRACK_OBJECT_URLS = """
window.liveObjectUrls = new Map();
const create = URL.createObjectURL.bind(URL);
const revoke = URL.revokeObjectURL.bind(URL);
URL.createObjectURL = (blob) => { const url = create(blob); window.liveObjectUrls.set(url, blob); return url; };
URL.revokeObjectURL = (url) => { window.liveObjectUrls.delete(url); return revoke(url); };
"""


def track_object_urls(driver):
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TRACK_OBJECT_URLS})


def live_object_urls(driver):
    return driver.execute_script("return [...window.liveObjectUrls.keys()]")


def object_url_bytes(driver, url):
    """The bytes an object URL of the page holds (the page must track them)."""
    got = driver.execute_async_script("""
      const [url, done] = arguments;
      const blob = window.liveObjectUrls.get(url);
      if (!blob) return done(null);
      blob.arrayBuffer().then((b) => {
        let s = '';
        for (const x of new Uint8Array(b)) s += String.fromCharCode(x);
        done(btoa(s));
      });""", url)
    return base64.b64decode(got) if got is not None else None


def offline_with_a_synced_note(driver, base, account, api, title, text):
    """Signs in, writes a note, waits for the server to have it, then takes the browser offline."""
    sign_in(driver, base, account)
    new_note(driver, title, text)
    wait(driver, lambda d: api.note(title) is not None, timeout=15, message="the note on the server")
    time.sleep(1)  # the service worker has cached the shell (the page reloads offline)
    set_offline(driver, True)
    wait(driver, lambda d: status(d).startswith("offline"), message="offline")


# A file given to the page as a paste or a drop onto the body (the events the browser makes).
DISPATCH = """
const [kind, name, type, b64] = arguments;
const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
const data = new DataTransfer();
data.items.add(new File([bytes], name, { type }));
const body = document.getElementById('body');
body.focus();
body.setSelectionRange(body.value.length, body.value.length);
const event = kind === 'paste'
  ? new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true })
  : new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true });
body.dispatchEvent(event);
return event.defaultPrevented;
"""


def test_attach_paste_drop_upload_and_download_in_another_session(blob_server):
    base = blob_server
    account = register(base, "att")
    api = Api(base, account)
    downloads = tempfile.mkdtemp(prefix="noted-web-downloads-")
    image = png(40, 40, 1)
    path, sha = a_file("whiteboard.png", image)
    a, b = browser(), browser()
    try:
        track_object_urls(a)
        sign_in(a, base, account)
        new_note(a, "Whiteboard", "see below")
        attach(a, path)
        link = f"![whiteboard.png](attachment:{sha})"
        wait(a, lambda d: link in body(d), message="the image's link at the caret")
        element = f"{sha} {len(image)} image/png whiteboard.png"
        wait(a, lambda d: (api.note("Whiteboard") or {}).get("attachments") == [element], timeout=15, message="the field on the server")
        assert link in api.note("Whiteboard")["body"]
        got = api.blob(sha)
        assert got.status_code == 200 and got.content == image
        # The list shows it, with a thumbnail (an object URL of the file's bytes).
        wait(a, lambda d: len(listed(d)) == 1 and listed(d)[0][2], message="the listed file and its thumbnail")
        name, size, thumb = listed(a)[0]
        assert (name, size) == ("whiteboard.png", f"{round(len(image) / 1024, 1) if len(image) < 10240 else round(len(image) / 1024)} KB")
        assert thumb.startswith("blob:")
        assert object_url_bytes(a, thumb) == image

        # A paste and a drop onto the body attach files too (a text file: a link, not an image).
        text = "pasted text, 😀\n".encode()
        text_sha = hashlib.sha256(text).hexdigest()
        assert a.execute_script(DISPATCH, "paste", "notes.txt", "text/plain", base64.b64encode(text).decode())
        wait(a, lambda d: f"[notes.txt](attachment:{text_sha})" in body(d) and f"![notes.txt]" not in body(d), message="the pasted file's link")
        dropped = png(8, 8, 2)
        dropped_sha = hashlib.sha256(dropped).hexdigest()
        assert a.execute_script(DISPATCH, "drop", "dropped.png", "image/png", base64.b64encode(dropped).decode())
        wait(a, lambda d: f"![dropped.png](attachment:{dropped_sha})" in body(d), message="the dropped image's link")
        expected = {element, f"{text_sha} {len(text)} text/plain notes.txt", f"{dropped_sha} {len(dropped)} image/png dropped.png"}
        wait(a, lambda d: set((api.note("Whiteboard") or {}).get("attachments", [])) == expected, timeout=15, message="three files on the server")
        assert api.blob(text_sha).content == text and api.blob(dropped_sha).content == dropped

        # Another session of the account shows the files and downloads the same bytes.
        b.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        sign_in(b, base, account)
        open_note(b, "Whiteboard")
        wait(b, lambda d: sorted(x[0] for x in listed(d)) == ["dropped.png", "notes.txt", "whiteboard.png"], message="the other session's list")
        wait(b, lambda d: all(x[2] for x in listed(d) if x[0].endswith(".png")), message="thumbnails read from the server")
        b.find_element(By.CSS_SELECTOR, '[aria-label="Download whiteboard.png"]').click()
        target = os.path.join(downloads, "whiteboard.png")
        wait(b, lambda d: os.path.exists(target) and open(target, "rb").read() == image, message="the download's bytes")

        # Removing a file takes it out of the field (the other files stay).
        b.find_element(By.CSS_SELECTOR, '[aria-label="Remove notes.txt"]').click()
        wait(b, lambda d: set((api.note("Whiteboard") or {}).get("attachments", [])) == expected - {f"{text_sha} {len(text)} text/plain notes.txt"},
             timeout=15, message="the removal on the server")
        wait(a, lambda d: sorted(x[0] for x in listed(d)) == ["dropped.png", "whiteboard.png"], message="the removal reaches the first session")

        # Editing the text keeps the files.
        a.find_element(By.ID, "body").send_keys(" and more")
        wait(a, lambda d: (api.note("Whiteboard") or {}).get("body", "").endswith(" and more"), timeout=15, message="the edit")
        assert set(api.note("Whiteboard")["attachments"]) == expected - {f"{text_sha} {len(text)} text/plain notes.txt"}

        # Another account cannot read the file: 404, as for a hash nobody has.
        other = Api(base, register(base, "oth"))
        assert other.blob(sha).status_code == 404
        assert other.blob("0" * 64).status_code == 404
    finally:
        a.quit()
        b.quit()


def test_attached_offline_survives_a_reload_and_syncs_online(blob_server):
    base = blob_server
    account = register(base, "off")
    api = Api(base, account)
    image = png(30, 20, 3)
    path, sha = a_file("receipt 2024 ✓.png", image)
    driver = browser()
    try:
        offline_with_a_synced_note(driver, base, account, api, "Receipt", "paid")
        attach(driver, path)
        link = f"![receipt 2024 ✓.png](attachment:{sha})"
        wait(driver, lambda d: link in body(d), message="the link, offline")
        wait(driver, lambda d: status(d) == "offline · 1 pending", message="1 pending")
        time.sleep(0.5)  # the typing is written (the store's write follows a pause)
        driver.refresh()
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), message="the app opens offline")
        open_note(driver, "Receipt")
        assert link in body(driver)
        wait(driver, lambda d: [x[0] for x in listed(d)] == ["receipt 2024 ✓.png"] and listed(d)[0][2], message="listed offline, with its thumbnail")
        assert api.blob(sha).status_code == 404  # not uploaded while offline
        assert not api.note("Receipt").get("attachments")
        set_offline(driver, False)
        element = f"{sha} {len(image)} image/png receipt 2024 ✓.png"
        wait(driver, lambda d: (api.note("Receipt") or {}).get("attachments") == [element], timeout=30, message="synced once online")
        assert link in api.note("Receipt")["body"]
        assert api.blob(sha).content == image
        wait(driver, lambda d: status(d) == "online", timeout=10, message="nothing pending")
    finally:
        driver.quit()


def test_missing_blob_uploads_the_file_again_and_resends(blob_server):
    """A change refused `missing_blob` (the server lacks a file this browser took for uploaded:
    collected, or uploaded from a tab that lost it) uploads the file again and is sent again."""
    base = blob_server
    account = register(base, "mis")
    api = Api(base, account)
    data = b"%PDF-1.4 not really a pdf\n" * 20
    path, sha = a_file("scan.pdf", data)
    driver = browser()
    try:
        offline_with_a_synced_note(driver, base, account, api, "Scan", "a file")
        attach(driver, path)
        wait(driver, lambda d: f"[scan.pdf](attachment:{sha})" in body(d), message="the link")
        # This browser now believes the server has the file (it does not).
        marked = driver.execute_async_script("""
          const [sha, done] = arguments;
          const tx = window.noted.store.db.transaction('blobs', 'readwrite');
          const store = tx.objectStore('blobs');
          store.get(sha).onsuccess = (e) => { const v = e.target.result; delete v.pend; store.put(v); };
          tx.oncomplete = () => done(true);""", sha)
        assert marked
        driver.execute_script("""
          const onResult = window.noted.engine.onResult.bind(window.noted.engine);
          window.rejects = [];
          window.noted.engine.onResult = (m) => { if (m.type === 'reject') window.rejects.push(m.code); return onResult(m); };""")
        set_offline(driver, False)
        element = f"{sha} {len(data)} application/pdf scan.pdf"
        wait(driver, lambda d: (api.note("Scan") or {}).get("attachments") == [element], timeout=30, message="synced after missing_blob")
        assert api.blob(sha).content == data
        rejected = driver.execute_script("return window.rejects")
        assert "missing_blob" in rejected, rejected
        wait(driver, lambda d: status(d) == "online", message="nothing pending, nothing refused")
    finally:
        driver.quit()


def test_a_file_over_the_limit_is_refused_and_stored_nowhere(blob_server):
    base = blob_server
    account = register(base, "big")
    api = Api(base, account)
    assert api.blobs()["maxBlobBytes"] == MAX_BLOB
    path, sha = a_file("too big.bin", random.Random(4).randbytes(MAX_BLOB + 1))
    driver = browser()
    try:
        sign_in(driver, base, account)
        new_note(driver, "Big", "nothing attached")
        attach(driver, path)
        error = driver.find_element(By.ID, "attach-error")
        wait(driver, lambda d: error.is_displayed() and "too big.bin" in error.text and "up to" in error.text, message="the refusal")
        assert "100,001 bytes" in error.text and "up to 100,000 bytes" in error.text, error.text  # the server's limit
        time.sleep(1)
        assert "attachment:" not in body(driver)
        assert listed(driver) == []
        wait(driver, lambda d: (api.note("Big") or {}).get("body") == "nothing attached", timeout=15, message="the note synced")
        assert not api.note("Big").get("attachments")
        assert api.blob(sha).status_code == 404 and api.blobs()["blobs"] == []
        stored = driver.execute_async_script("""
          const done = arguments[0];
          const tx = window.noted.store.db.transaction('blobs', 'readonly');
          const req = tx.objectStore('blobs').getAllKeys();
          req.onsuccess = () => done(req.result);""")
        assert stored == []
    finally:
        driver.quit()


# The page's fetches, recorded before the app's scripts run: [method, URL] for each.
TRACK_FETCHES = """
window.fetchedUrls = [];
const fetchFirst = window.fetch.bind(window);
window.fetch = (input, init) => {
  const url = typeof input === 'string' ? input : (input instanceof URL ? input.href : input.url);
  const at = new URL(url, location.href);
  window.fetchedUrls.push([(init && init.method) || (input && input.method) || 'GET', at.pathname + at.search]);
  return fetchFirst(input, init);
};
"""


def test_the_limits_are_read_without_listing_the_files(blob_server):
    """Attaching reads the server's limits with GET /v1/blobs?limit=0, never the unbounded list
    of every file (security review 3, M4); the limit read so still refuses a file over it. A
    server before `limit` answers the list too: the page reads the same keys either way."""
    base = blob_server
    account = register(base, "lim")
    api = Api(base, account)
    small, small_sha = a_file("small.txt", b"a small file\n")
    big, big_sha = a_file("too big.bin", random.Random(5).randbytes(MAX_BLOB + 1))
    driver = browser()
    try:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TRACK_FETCHES})
        sign_in(driver, base, account)
        new_note(driver, "Limits", "two files")
        attach(driver, small)
        wait(driver, lambda d: api.blob(small_sha).status_code == 200, timeout=15, message="the small file uploaded")
        attach(driver, big)
        error = driver.find_element(By.ID, "attach-error")
        wait(driver, lambda d: error.is_displayed() and "up to 100,000 bytes" in error.text, message="the refusal, with the server's limit")
        assert api.blob(big_sha).status_code == 404
        fetched = driver.execute_script("return window.fetchedUrls")
        reads = [url for method, url in fetched if method == "GET" and url.split("?")[0] in ("/v1/blobs", "/v1/blobs/")]
        assert reads and set(reads) == {"/v1/blobs?limit=0"}, fetched
        # What such a read answers: the limits (and, from a server that knows `limit`, no files).
        r = requests.get(base + "/v1/blobs?limit=0", headers=api.headers)
        assert r.status_code == 200, r.text
        limits = r.json()
        assert limits["maxBlobBytes"] == MAX_BLOB and limits["storedBytes"] > 0 and "quotaBytes" in limits
        if "blobCount" in limits:
            assert limits["blobs"] == [] and limits["blobCount"] == 1, limits
    finally:
        driver.quit()


def preview_images(driver):
    """The preview's images: [(src, naturalWidth, alt)]."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#preview img')].map(i => [i.src, i.complete ? i.naturalWidth : 0, i.alt])")


def set_preview(driver, on):
    toggle = driver.find_element(By.ID, "preview-toggle")
    if (toggle.get_attribute("aria-pressed") == "true") != on:
        toggle.click()
    wait(driver, lambda d: d.find_element(By.ID, "preview").is_displayed() == on, message=f"preview {on}")


def paste(driver, name, type_, data):
    assert driver.execute_script(DISPATCH, "paste", name, type_, base64.b64encode(data).decode())


def test_an_image_shows_inline_in_another_sessions_preview_and_offline_after_a_reload(blob_server):
    """Issue 17's "the browser pastes an image and another session shows it": inline in the
    Preview, through an object URL; fetched when the note is opened and kept for offline use; an
    attachment link to another file downloads it."""
    base = blob_server
    account = register(base, "inl")
    api = Api(base, account)
    downloads = tempfile.mkdtemp(prefix="noted-web-downloads-")
    image = png(48, 32, 5)
    sha = hashlib.sha256(image).hexdigest()
    text = b"minutes of the meeting\n"
    text_sha = hashlib.sha256(text).hexdigest()
    a, b = browser(), browser()
    try:
        sign_in(a, base, account)
        new_note(a, "Board", "the board:")
        paste(a, "board.png", "image/png", image)
        paste(a, "minutes.txt", "text/plain", text)
        wait(a, lambda d: f"[minutes.txt](attachment:{text_sha})" in body(d), message="the links at the caret")
        wait(a, lambda d: len((api.note("Board") or {}).get("attachments", [])) == 2
             and f"![board.png](attachment:{sha})" in api.note("Board")["body"], timeout=15, message="both files on the server")

        track_object_urls(b)
        b.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
        sign_in(b, base, account)
        open_note(b, "Board")
        set_preview(b, True)
        wait(b, lambda d: len(preview_images(d)) == 1 and preview_images(d)[0][1] == 48, message="the image inline in the preview")
        src, width, alt = preview_images(b)[0]
        assert src.startswith("blob:") and alt == "board.png"
        assert object_url_bytes(b, src) == image
        # The link to the text file downloads it.
        b.find_element(By.CSS_SELECTOR, "#preview a.md-attachment-link").click()
        target = os.path.join(downloads, "minutes.txt")
        wait(b, lambda d: os.path.exists(target) and open(target, "rb").read() == text, message="the link's download")

        # Offline, after a reload: the image was kept in this browser, and shows still.
        time.sleep(1)  # the service worker has cached the shell
        set_offline(b, True)
        b.refresh()
        wait(b, lambda d: d.find_element(By.ID, "app").is_displayed(), message="the app opens offline")
        wait(b, lambda d: status(d).startswith("offline"), message="offline")
        open_note(b, "Board")
        set_preview(b, True)  # remembered on this device: on already
        wait(b, lambda d: len(preview_images(d)) == 1 and preview_images(d)[0][1] == 48, message="the image inline, offline")
        src = preview_images(b)[0][0]
        assert src.startswith("blob:") and object_url_bytes(b, src) == image
        assert "not available offline" not in b.find_element(By.ID, "preview").text
    finally:
        a.quit()
        b.quit()


def test_no_object_url_outlives_the_notes_that_showed_it(blob_server):
    base = blob_server
    account = register(base, "url")
    api = Api(base, account)
    images = {name: png(20 + i, 16, 10 + i) for i, name in enumerate(["one.png", "two.png", "three.png"])}
    driver = browser()
    try:
        track_object_urls(driver)
        sign_in(driver, base, account)
        for title, names in [("Pics A", ["one.png", "two.png"]), ("Pics B", ["three.png"])]:
            new_note(driver, title, "pictures")
            for name in names:
                paste(driver, name, "image/png", images[name])
            wait(driver, lambda d: all(f"![{n}](attachment:" in body(d) for n in names), message=f"{title}'s links")
        new_note(driver, "Plain", "no pictures")
        wait(driver, lambda d: {n: len(f.get("attachments", [])) for n in ["Pics A", "Pics B", "Plain"] for f in [api.note(n) or {}]}
             == {"Pics A": 2, "Pics B": 1, "Plain": 0}, timeout=15, message="the notes on the server")
        set_preview(driver, True)

        def shown(d, count):
            """The preview's images and the list's thumbnails, every one loaded: their URLs."""
            imgs = preview_images(d)
            thumbs = [x[2] for x in listed(d)]
            if len(imgs) != count or len(thumbs) != count or not all(i[1] > 0 for i in imgs) or not all(thumbs):
                return None
            return {i[0] for i in imgs} | set(thumbs)

        for _ in range(3):
            for title, count in [("Pics A", 2), ("Pics B", 1)]:
                open_note(driver, title)
                wait(driver, lambda d: shown(d, count), message=f"{title}'s images")
                # Exactly the URLs shown are live: one per image in the preview, one per thumbnail.
                wait(driver, lambda d: set(live_object_urls(d)) == shown(d, count), message="only what is shown is live")
                assert len(live_object_urls(driver)) == 2 * count
        # Preview off: only the thumbnails' URLs stay.
        set_preview(driver, False)
        wait(driver, lambda d: len(live_object_urls(d)) == 1, message="the preview's URLs revoked")
        assert live_object_urls(driver) == [listed(driver)[0][2]]
        set_preview(driver, True)
        wait(driver, lambda d: shown(d, 1), message="drawn again")
        # A note without images: nothing is live.
        open_note(driver, "Plain")
        wait(driver, lambda d: listed(d) == [] and "no pictures" in d.find_element(By.ID, "preview").text, message="the plain note")
        wait(driver, lambda d: live_object_urls(d) == [], message="no object URL left")
        # The note closed (deleted forever): nothing is live either.
        open_note(driver, "Pics A")
        wait(driver, lambda d: shown(d, 2), message="Pics A again")
        driver.execute_script("window.confirm = () => true")
        driver.find_element(By.ID, "trash").click()
        wait(driver, lambda d: d.find_element(By.ID, "purge").is_displayed(), message="trashed")
        driver.find_element(By.ID, "purge").click()
        wait(driver, lambda d: not d.find_element(By.ID, "editor").is_displayed(), message="the editor closed")
        wait(driver, lambda d: live_object_urls(d) == [], message="no object URL left after closing")
    finally:
        driver.quit()


MIB = 1024 * 1024


@pytest.fixture(scope="module")
def large_blob_server():
    """The server's default limits (files up to 25 MiB)."""
    yield from run_server("--auth-attempts-per-minute", "1000")


# PATCHes the page sends, counted; with `window.holdPatches = n`, every PATCH after the n-th
# answered one waits for `window.releasePatch()` (so that the test can cut the upload there).
COUNT_PATCHES = """
window.patches = [];
window.holdPatches = 0;
const realFetch = window.fetch.bind(window);
window.fetch = async (url, init = {}) => {
  if (!init || init.method !== 'PATCH') return realFetch(url, init);
  const record = { offset: Number(init.headers['Upload-Offset']), bytes: init.body.size, status: null };
  if (window.holdPatches && window.patches.filter((p) => p.status === 204).length >= window.holdPatches) {
    record.held = true;
    await new Promise((resolve) => { window.releasePatch = resolve; });
  }
  window.patches.push(record);
  try {
    const response = await realFetch(url, init);
    record.status = response.status;
    return response;
  } catch (error) {
    record.status = 'failed';
    throw error;
  }
};
"""


def head(api, sha):
    r = requests.head(f"{api.base}/v1/blobs/{sha}", headers=api.headers)
    return r.status_code, r.headers.get("Upload-Offset"), r.headers.get("Upload-Length")


def upload_text(driver):
    return driver.execute_script(
        "const e = document.querySelector('#attachment-list .attachment-progress-text'); return e ? e.textContent : ''")


def start_a_large_upload_and_hold_it(driver, base, account, api, title, name, data):
    """Signs in, writes a note, attaches `data` as `name`, and holds the upload after its first
    piece: the server has 2 MiB of it (HEAD says so), and the page says how far it got."""
    sha = hashlib.sha256(data).hexdigest()
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": COUNT_PATCHES})
    sign_in(driver, base, account)
    new_note(driver, title, "a large file")
    wait(driver, lambda d: api.note(title) is not None, timeout=15, message="the note on the server")
    driver.execute_script("window.holdPatches = 1")
    path = write(tempfile.mkdtemp(prefix="noted-web-attach-"), name, data)
    attach(driver, path)
    wait(driver, lambda d: d.execute_script("return typeof window.releasePatch === 'function'"), timeout=20, message="the second piece held")
    assert head(api, sha) == (404, str(2 * MIB), str(len(data)))  # part of it on the server
    percent = 2 * MIB * 100 // len(data)
    wait(driver, lambda d: upload_text(d) == f"Uploading {name} — {percent}%", message="the progress shown")
    assert driver.execute_script("return document.querySelector('#attachment-list progress').value") == percent
    return sha


def test_a_large_upload_cut_off_by_going_offline_continues_from_the_servers_offset(large_blob_server):
    base = large_blob_server
    account = register(base, "res")
    api = Api(base, account)
    data = random.Random(6).randbytes(6 * MIB)
    driver = browser()
    try:
        sha = start_a_large_upload_and_hold_it(driver, base, account, api, "Tape", "big scan.pdf", data)
        set_offline(driver, True)
        wait(driver, lambda d: status(d).startswith("offline"), message="offline")
        driver.execute_script("window.holdPatches = 0; window.releasePatch()")  # it goes, into no network
        wait(driver, lambda d: d.execute_script("return window.patches.at(-1).status") == "failed", message="the piece fails offline")
        wait(driver, lambda d: "paused at 33%" in upload_text(d), message="the upload shown paused")
        assert head(api, sha) == (404, str(2 * MIB), str(len(data)))
        assert not api.note("Tape").get("attachments")  # the change waits for the file
        sent_before = len(driver.execute_script("return window.patches"))

        set_offline(driver, False)
        element = f"{sha} {len(data)} application/pdf big scan.pdf"
        wait(driver, lambda d: (api.note("Tape") or {}).get("attachments") == [element], timeout=30, message="synced once online")
        assert api.blob(sha).content == data
        after = driver.execute_script("return window.patches")[sent_before:]
        assert [(p["offset"], p["bytes"], p["status"]) for p in after] == [(2 * MIB, 2 * MIB, 204), (4 * MIB, 2 * MIB, 204)], after
        assert sum(p["bytes"] for p in after) < len(data)  # continued: the first 2 MiB not sent again
        wait(driver, lambda d: upload_text(d) == "", message="the progress gone")
        wait(driver, lambda d: status(d) == "online", timeout=10, message="nothing pending")
    finally:
        driver.quit()


def test_a_large_upload_cut_off_by_a_reload_continues_from_the_servers_offset(large_blob_server):
    base = large_blob_server
    account = register(base, "rel")
    api = Api(base, account)
    data = random.Random(7).randbytes(5 * MIB + 12345)
    driver = browser()
    try:
        sha = start_a_large_upload_and_hold_it(driver, base, account, api, "Reel", "reel.mp4", data)
        time.sleep(0.5)  # the typing is written (the store's write follows a pause)
        driver.refresh()  # the page goes with the piece it held
        wait(driver, lambda d: d.find_element(By.ID, "app").is_displayed(), message="the app again")
        element = f"{sha} {len(data)} video/mp4 reel.mp4"
        wait(driver, lambda d: (api.note("Reel") or {}).get("attachments") == [element], timeout=30, message="synced after the reload")
        assert api.blob(sha).content == data
        sent = driver.execute_script("return window.patches")  # the new page's
        assert [(p["offset"], p["status"]) for p in sent] == [(2 * MIB, 204), (4 * MIB, 204)], sent
        assert sum(p["bytes"] for p in sent) == len(data) - 2 * MIB
    finally:
        driver.quit()
