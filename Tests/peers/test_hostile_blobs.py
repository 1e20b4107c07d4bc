"""Blobs against a hostile account (issue 43; review security-3 M4 and L1), driven from outside
against the real `noted-server` process: a file counts at least 4 KiB (1,000 three-byte files
used to fit under a 1 MB quota), an account holds at most --max-blobs files, `GET /v1/blobs` is
paged and answers the limits alone with `limit=0`, a PATCH that does not end its upload
carries at least 32 KiB, one user reads at most 8 files at once, and an upload finished after
pushes filled the account is refused (uploads begun under the quota used to reach twice it).

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import hashlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import pytest
import requests

from test_hostile_imports import account, storage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))


def start(*flags):
    data = tempfile.mkdtemp(prefix="noted-hostile-blobs-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, "--log-level", "error", "--auth-attempts-per-minute", "1000", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.match(r"noted-server listening on (http://\S+)", proc.stdout.readline())
    assert m
    return proc, m.group(1)


def put(base, auth, blob):
    return requests.put(f"{base}/v1/blobs/{hashlib.sha256(blob).hexdigest()}", data=blob,
                        headers=dict(auth, **{"Content-Type": "application/octet-stream"}), timeout=60)


def patch(base, auth, blob, offset, body):
    headers = dict(auth, **{"Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset), "Upload-Length": str(len(blob))})
    return requests.patch(f"{base}/v1/blobs/{hashlib.sha256(blob).hexdigest()}", data=body, headers=headers, timeout=60)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_tiny_files_are_charged_and_counted(kind):
    proc, base = start("--quota-bytes", "100000", "--max-blobs", "1000", *storage(kind))
    try:
        auth = account(base)
        answers = [put(base, auth, f"{i:03d}".encode()) for i in range(40)]
        stored = [a for a in answers if a.status_code == 201]
        refused = [a for a in answers if a.status_code == 413]
        # 100,000 bytes hold 24 files of 4 KiB (before: all 40, and 1,000 under 1 MB).
        assert len(stored) == 100_000 // 4096 and all(a.json()["error"] == "quota_exceeded" for a in refused), [a.status_code for a in answers]
        usage = requests.get(base + "/v1/account", headers=auth).json()["usage"]
        assert usage["bytes"] == len(stored) * 4096, usage
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    proc, base = start("--max-blobs", "5", *storage(kind))
    try:
        auth = account(base)
        codes = [put(base, auth, os.urandom(100)).status_code for _ in range(7)]
        assert codes == [201] * 5 + [413, 413], codes
        limits = requests.get(base + "/v1/blobs?limit=0", headers=auth).json()
        assert limits["blobs"] == [] and limits["blobCount"] == 5 and limits["maxBlobs"] == 5, limits
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_list_is_paged_and_small_pieces_are_refused():
    proc, base = start()
    try:
        auth = account(base)
        hashes = set()
        for _ in range(7):
            blob = os.urandom(50)
            assert put(base, auth, blob).status_code == 201
            hashes.add(hashlib.sha256(blob).hexdigest())
        seen, after, pages = [], None, 0
        while True:
            query = "?limit=3" + (f"&after={after}" if after else "")
            page = requests.get(base + "/v1/blobs" + query, headers=auth).json()
            pages += 1
            assert len(page["blobs"]) <= 3
            seen += [b["sha256"] for b in page["blobs"]]
            after = page["next"]
            if not after:
                break
        assert pages == 3 and seen == sorted(hashes), (pages, seen)
        for bad in ("?limit=1001", "?limit=-1", "?limit=x", "?after=nothex"):
            assert requests.get(base + "/v1/blobs" + bad, headers=auth).status_code == 400, bad
        big = os.urandom(200_000)
        small = patch(base, auth, big, 0, big[:1000])
        assert small.status_code == 400 and small.json()["error"] == "piece_too_small", small.text
        assert patch(base, auth, big, 0, big[:40_000]).status_code == 204
        assert patch(base, auth, big, 40_000, big[40_000:]).status_code == 204
        assert requests.get(f"{base}/v1/blobs/{hashlib.sha256(big).hexdigest()}", headers=auth).content == big
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_reads_of_one_user_at_once_are_bounded():
    proc, base = start()
    host, port = base[len("http://"):].split(":")
    held = []
    try:
        auth = account(base)
        blob = os.urandom(20_000_000)
        assert put(base, auth, blob).status_code == 201
        name = hashlib.sha256(blob).hexdigest()
        for _ in range(8):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect((host, int(port)))
            s.sendall(f"GET /v1/blobs/{name} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: {auth['Authorization']}\r\n\r\n".encode())
            held.append(s)
        time.sleep(1)
        ninth = requests.get(f"{base}/v1/blobs/{name}", headers=auth, timeout=30)
        assert ninth.status_code == 429 and ninth.json()["error"] == "rate_limited", ninth.status_code
        assert requests.get(f"{base}/v1/blobs/{name}", headers=account(base), timeout=30).status_code == 404, "another user is not held back"
        for s in held:
            s.close()
        held = []
        time.sleep(1)
        assert requests.get(f"{base}/v1/blobs/{name}", headers=auth, timeout=60).status_code == 200
    finally:
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_upload_finished_after_pushes_filled_the_account_is_refused(kind):
    proc, base = start("--quota-bytes", "300000", *storage(kind))
    try:
        auth = account(base)
        blob = os.urandom(150_000)
        # Begun under the quota (150 KB reserved)...
        assert patch(base, auth, blob, 0, blob[:40_000]).status_code == 204
        # ...then notes fill the account (pushes do not count uploads under way)...
        change = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": str(uuid.uuid4()), "baseRev": 0, "op": "upsert",
                  "fields": {"body": {"set": "x" * 80_000}}}
        assert requests.post(base + "/v1/push", json={"changes": [change]}, headers=auth).json()["results"][0]["type"] == "ack"
        # ...and finishing the upload is checked again: refused, not stored.
        last = patch(base, auth, blob, 40_000, blob[40_000:])
        assert last.status_code == 413 and last.json()["error"] == "quota_exceeded", last.text
        assert requests.get(f"{base}/v1/blobs/{hashlib.sha256(blob).hexdigest()}", headers=auth).status_code == 404
        usage = requests.get(base + "/v1/account", headers=auth).json()["usage"]
        assert usage["bytes"] <= 300_000, usage
    finally:
        proc.terminate()
        proc.wait(timeout=20)
