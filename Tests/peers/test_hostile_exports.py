"""`GET /v1/export` against a hostile account (issue 43; review security-3 H4), driven from
outside over real sockets against the real `noted-server` process: the zip is made as it is
sent, so an export of an account of 80 MB grows the server's peak memory by a fraction of it;
nothing is written to disk (a reset connection leaves no folder behind); one export per user at
a time, its slot given back however the answer ended; a client that stops reading is dropped;
both formats read back with Python's zipfile, and the Markdown one imports into a fresh
account.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import io
import json
import os
import re
import secrets
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse
import uuid
import zipfile

import pytest
import requests

from test_hostile_imports import account, peak_rss_kib, storage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request):
    data = tempfile.mkdtemp(prefix="noted-hostile-export-")
    tmp = tempfile.mkdtemp(prefix="noted-export-tmp-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, "--log-level", "error", "--auth-attempts-per-minute", "1000",
                             "--max-pushes-per-second", "1000", "--max-import-bytes", "100000000", *storage(request.param)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            # One malloc arena: the peak then measures what the code holds, not
                            # how glibc's per-thread arenas keep freed pages (with the default,
                            # three plain pulls of the same 80 MB grew the process by 250, 70
                            # and 60 MB).
                            env=dict(os.environ, TMPDIR=tmp, MALLOC_ARENA_MAX="1"))
    m = re.match(r"noted-server listening on (http://\S+)", proc.stdout.readline())
    assert m
    yield {"base": m.group(1), "proc": proc, "data": data, "tmp": tmp}
    proc.terminate()
    proc.wait(timeout=20)


def fill(base, auth, notes, chars):
    """`notes` notes of `chars` characters each, a few per push (a push is at most 1 MiB)."""
    per_push = max(1, 900_000 // (chars + 200))
    made = 0
    while made < notes:
        changes = []
        for _ in range(min(per_push, notes - made)):
            # Random (half as compressible as text), so an export is as large as the account.
            body = secrets.token_hex(chars // 2)
            changes.append({"ccid": str(uuid.uuid4()), "collection": "notes", "id": str(uuid.uuid4()), "baseRev": 0, "op": "upsert",
                            "fields": {"title": {"set": f"Note {made}"}, "body": {"set": body}, "folder": {"set": "Big/One"}}})
            made += 1
        answer = requests.post(base + "/v1/push", json={"changes": changes}, headers=auth)
        assert answer.status_code == 200 and all(r["type"] == "ack" for r in answer.json()["results"]), answer.text[:300]


def export_request(server, auth, fmt, rcvbuf=None):
    """A raw socket that has sent `GET /v1/export`."""
    host, port = server["base"][len("http://"):].split(":")
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect((host, int(port)))
    s.sendall(f"GET /v1/export?format={fmt} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: {auth['Authorization']}\r\n\r\n".encode())
    return s


def test_an_export_is_streamed_and_reads_back_in_both_formats(server):
    base, proc = server["base"], server["proc"]
    auth = account(base)
    fill(base, auth, 400, 200_000)  # 80 MB of notes
    # A pull of every note first: the peak of reading the notes a page at a time, which any
    # export needs as well, is reached before the export is measured.
    since = 0
    while True:
        page = requests.get(base + f"/v1/changes?since={since}&snapshot=true", headers=auth).json()
        if not page.get("more"):
            break
        since = page["cursor"]
    for fmt in ("json", "markdown"):
        before = peak_rss_kib(proc.pid)
        answer = requests.get(base + f"/v1/export?format={fmt}", headers=auth, timeout=300)
        grown = peak_rss_kib(proc.pid) - before
        assert answer.status_code == 200, answer.text[:300]
        assert "Content-Length" not in answer.headers and answer.headers["Cache-Control"] == "no-store"
        # Before, every note was held at once, and more than once: the JSON export of the same
        # account grew the peak by 145 MB after the same warm-up pull; now by about 4 MB.
        assert grown < 40_000, f"{fmt}: peak memory grew by {grown} KiB for an 80 MB account"
        with zipfile.ZipFile(io.BytesIO(answer.content)) as z:
            assert z.testzip() is None
            names = z.namelist()
            if fmt == "json":
                document = json.loads(z.read("notes.json"))
                assert document["format"] == "noted-export" and document["version"] == 1 and len(document["notes"]) == 400
                assert all(len(n["body"]) > 190_000 for n in document["notes"])
            else:
                assert len([n for n in names if n.endswith(".md")]) == 400 and all(n.startswith("Big/One/") for n in names)
        if fmt == "markdown":  # Noted's own Markdown export imports as it is (docs/import-export.md)
            fresh = account(base)
            summary = requests.post(base + "/v1/import?name=export.zip", data=answer.content,
                                    headers=dict(fresh, **{"Content-Type": "application/octet-stream"}), timeout=300).json()
            assert summary["imported"] == 400, summary
    assert os.listdir(server["tmp"]) == [], "nothing written to the temporary folder"


def test_one_export_per_user_and_its_slot_comes_back_however_the_answer_ended(server):
    base = server["base"]
    auth = account(base)
    fill(base, auth, 60, 200_000)
    # Reset right after the request (SO_LINGER 0): before, the export's folder stayed for good.
    for _ in range(3):
        s = export_request(server, auth, "markdown")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    time.sleep(1)
    # While one is being sent (not read), a second of the same user is refused...
    s = export_request(server, auth, "json", rcvbuf=4096)
    time.sleep(1)
    second = requests.get(base + "/v1/export?format=json", headers=auth, timeout=60)
    assert second.status_code == 409 and second.json()["error"] == "export_running", second.text
    # ...and another user's goes through.
    other = account(base)
    assert requests.get(base + "/v1/export", headers=other, timeout=60).status_code == 200
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    deadline = time.monotonic() + 30
    while True:
        again = requests.get(base + "/v1/export?format=json", headers=auth, timeout=60)
        if again.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert again.status_code == 200, again.text
    assert os.listdir(server["tmp"]) == [] and not [n for n in os.listdir(server["data"]) if n.startswith("noted-export")]


def test_a_client_that_stops_reading_is_dropped(server):
    base = server["base"]
    auth = account(base)
    fill(base, auth, 100, 200_000)  # 20 MB: far more than the socket buffers hold
    s = export_request(server, auth, "json", rcvbuf=4096)
    started = time.monotonic()
    # Read nothing for the write deadline (60 s) and a little more: the server gives up and
    # the user's slot is free again.
    time.sleep(75)
    again = requests.get(base + "/v1/export?format=markdown", headers=auth, timeout=120)
    assert again.status_code == 200, (time.monotonic() - started, again.text[:200])
    s.settimeout(10)
    received = 0
    try:
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            received += len(chunk)
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    assert received < 20_000_000, "the server sent the whole export to a client that stopped reading"
