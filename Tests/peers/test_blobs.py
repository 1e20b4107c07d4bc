"""Attachments' blobs over HTTP (issue 17), against real noted-server processes: PUT, HEAD,
PATCH and GET with ranges on the SQLite default and on PostgreSQL through two nodes; the
server's answers to bad hashes, wrong offsets, oversized files and a full quota; no way to
read or detect another user's file; dangerous types served as downloads; an upload cut off
by a SIGKILL of the server continues from the offset it reports after a restart (SQLite) or
through the other node (PostgreSQL); a change referencing a missing blob is refused
`missing_blob` and accepted once the blob is there.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable;
NOTED_TEST_POSTGRES_URL, when set, adds the PostgreSQL cases (skipped with a notice otherwise).
"""
import hashlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import pytest
import requests

BIN = os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server")
PG_URL = os.environ.get("NOTED_TEST_POSTGRES_URL")
SEED = int(os.environ.get("NOTED_TEST_SEED", str(random.randrange(1 << 30))))


def data(size, salt=0):
    """`size` bytes, the same for one seed and salt (printed on failure through SEED)."""
    return random.Random(SEED * 1000 + salt).randbytes(size)


def sha(blob):
    return hashlib.sha256(blob).hexdigest()


def start(args):
    proc = subprocess.Popen([BIN, "--port", "0", "--auth-attempts-per-minute", "1000"] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    assert m, f"unexpected first line {line!r}"
    return proc, m.group(1)


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nodes(request):
    """Base URLs of the nodes of one deployment: one SQLite node, or two PostgreSQL nodes."""
    work = tempfile.mkdtemp(prefix="noted-blobs-")
    procs, database = [], None
    try:
        if request.param == "sqlite":
            proc, base = start(["--data", os.path.join(work, "data")])
            procs.append(proc)
            yield {"kind": "sqlite", "bases": [base], "procs": procs, "work": work, "args": ["--data", os.path.join(work, "data")]}
        else:
            if not PG_URL or not shutil.which("psql"):
                print("NOTICE: PostgreSQL blob tests skipped: NOTED_TEST_POSTGRES_URL is not set or psql is missing")
                pytest.skip("PostgreSQL is not available")
            name = "noted_blobs_" + secrets.token_hex(4)
            subprocess.run(["psql", PG_URL, "-q", "-c", f"CREATE DATABASE {name}"], check=True)
            parts = urllib.parse.urlsplit(PG_URL)
            database = (name, urllib.parse.urlunsplit(parts._replace(path="/" + name)))
            bases = []
            for index in range(2):
                proc, base = start(["--database", database[1], "--data", os.path.join(work, f"node{index}")])
                procs.append(proc)
                bases.append(base)
            yield {"kind": "postgres", "bases": bases, "procs": procs, "work": work}
    finally:
        for proc in procs:
            stop(proc)
        if database:
            subprocess.run(["psql", PG_URL, "-q", "-c", f"DROP DATABASE IF EXISTS {database[0]} WITH (FORCE)"], check=False)
        shutil.rmtree(work, ignore_errors=True)


def account(base):
    name = "blob" + secrets.token_hex(4)
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": "correct horse battery"}).status_code == 201
    tokens = requests.post(base + "/v1/sessions", json={"username": name, "password": "correct horse battery"}).json()
    return {"Authorization": "Bearer " + tokens["access_token"]}


def put(base, auth, blob, name=None, content_type="image/png"):
    return requests.put(f"{base}/v1/blobs/{name or sha(blob)}", data=blob, headers=dict(auth, **{"Content-Type": content_type}), timeout=60)


def patch(base, auth, name, offset, length, body):
    headers = dict(auth, **{"Content-Type": "application/offset+octet-stream", "Upload-Offset": str(offset), "Upload-Length": str(length)})
    return requests.patch(f"{base}/v1/blobs/{name}", data=body, headers=headers, timeout=60)


def push(base, auth, change):
    r = requests.post(base + "/v1/push", json={"changes": [change]}, headers=auth, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["results"][0]


def attach_change(note, element, base_rev=0):
    return {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note, "baseRev": base_rev, "op": "upsert",
            "fields": {"title": {"set": "With a file"}, "attachments": {"add": [element]}}}


def test_a_file_goes_up_and_comes_back_whole_and_by_range(nodes):
    first, last = nodes["bases"][0], nodes["bases"][-1]
    auth = account(first)
    blob = data(3 * 1024 * 1024 + 123, 1)
    name = sha(blob)
    head = requests.head(f"{first}/v1/blobs/{name}", headers=auth)
    assert head.status_code == 404 and head.headers["Upload-Offset"] == "0", (SEED, head.headers)
    r = put(first, auth, blob)
    assert r.status_code == 201, r.text
    assert r.json() == {"sha256": name, "size": len(blob), "type": "image/png"}
    assert put(first, auth, blob).status_code == 200  # already there
    # Every node serves it.
    head = requests.head(f"{last}/v1/blobs/{name}", headers=auth)
    assert head.status_code == 200 and head.headers["Content-Length"] == str(len(blob)), head.headers
    assert head.headers["Upload-Offset"] == head.headers["Upload-Length"] == str(len(blob))
    r = requests.get(f"{last}/v1/blobs/{name}", headers=auth)
    assert r.status_code == 200 and r.content == blob, SEED
    assert r.headers["Content-Type"] == "image/png"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in r.headers["Content-Security-Policy"] and "default-src 'none'" in r.headers["Content-Security-Policy"]
    assert r.headers["ETag"] == f'"{name}"' and r.headers["Accept-Ranges"] == "bytes"
    assert "Content-Disposition" not in r.headers
    for header, start, end in [("bytes=0-0", 0, 1), ("bytes=1048570-1048599", 1048570, 1048600), ("bytes=3000000-", 3000000, len(blob)),
                               ("bytes=-100", len(blob) - 100, len(blob)), (f"bytes=10-{len(blob) + 500}", 10, len(blob))]:
        r = requests.get(f"{last}/v1/blobs/{name}", headers=dict(auth, Range=header))
        assert r.status_code == 206, (header, r.status_code)
        assert r.content == blob[start:end], (SEED, header)
        assert r.headers["Content-Range"] == f"bytes {start}-{end - 1}/{len(blob)}"
    r = requests.get(f"{last}/v1/blobs/{name}", headers=dict(auth, Range=f"bytes={len(blob)}-"))
    assert r.status_code == 416 and r.headers["Content-Range"] == f"bytes */{len(blob)}"
    # An end far beyond the file (the largest 64-bit number once crashed the server): to the end.
    r = requests.get(f"{last}/v1/blobs/{name}", headers=dict(auth, Range="bytes=5-9223372036854775807"))
    assert r.status_code == 206 and r.content == blob[5:], r.status_code
    r = requests.get(f"{last}/v1/blobs/{name}", headers=dict(auth, Range="bytes=5-99999999999999999999"))
    assert r.status_code == 200 and r.content == blob  # not a number we read: the whole file
    assert requests.get(f"{last}/health").status_code == 200
    # The answer depends on the token: a shared browser cache must not serve it to another account.
    assert "Authorization" in requests.get(f"{last}/v1/blobs/{name}", headers=auth).headers["Vary"]
    # Several ranges, or nonsense: the whole file.
    for header in ["bytes=0-1,5-6", "lines=1-2", "bytes=x-y"]:
        r = requests.get(f"{last}/v1/blobs/{name}", headers=dict(auth, Range=header))
        assert r.status_code == 200 and r.content == blob, header
    listed = requests.get(f"{last}/v1/blobs", headers=auth).json()
    assert [b["sha256"] for b in listed["blobs"]] == [name] and listed["storedBytes"] >= len(blob)


def test_bad_hashes_names_and_offsets_are_refused_and_nothing_is_kept(nodes):
    base = nodes["bases"][0]
    auth = account(base)
    blob = data(200_000, 2)
    wrong = sha(b"something else")
    r = put(base, auth, blob, name=wrong)
    assert r.status_code == 400 and r.json()["error"] == "hash_mismatch", r.text
    assert requests.head(f"{base}/v1/blobs/{wrong}", headers=auth).status_code == 404
    assert requests.get(f"{base}/v1/blobs", headers=auth).json()["blobs"] == []
    for bad in ["ABC", sha(blob).upper(), sha(blob)[:63], "../" + sha(blob)[3:]]:
        r = requests.get(f"{base}/v1/blobs/{urllib.parse.quote(bad, safe='')}", headers=auth)
        assert r.status_code in (400, 404), (bad, r.status_code)
    assert requests.get(f"{base}/v1/blobs/{sha(blob)}").status_code == 401
    assert requests.get(f"{base}/v1/blobs/{sha(blob)}?access_token=x").status_code == 401
    # PATCH: the type of body, the offset and the length are checked.
    name = sha(blob)
    r = requests.patch(f"{base}/v1/blobs/{name}", data=blob[:10], headers=dict(auth, **{"Content-Type": "application/octet-stream",
                                                                                     "Upload-Offset": "0", "Upload-Length": str(len(blob))}))
    assert r.status_code == 415
    assert patch(base, auth, name, 0, len(blob), blob[:50_000]).headers["Upload-Offset"] == "50000"
    r = patch(base, auth, name, 0, len(blob), blob[:10])
    assert r.status_code == 409 and r.json()["error"] == "offset_mismatch" and r.headers["Upload-Offset"] == "50000"
    r = patch(base, auth, name, 50_000, len(blob) + 1, blob[50_000:])
    assert r.status_code == 409 and r.json()["error"] == "length_mismatch"
    r = patch(base, auth, name, 50_000, len(blob), blob[50_000:] + b"extra")
    assert r.status_code == 400
    head = requests.head(f"{base}/v1/blobs/{name}", headers=auth)
    assert head.status_code == 404 and head.headers["Upload-Length"] == str(len(blob))
    offset = int(head.headers["Upload-Offset"])
    r = patch(base, auth, name, offset, len(blob), blob[offset:])
    assert r.status_code == 204 and r.headers["Upload-Offset"] == str(len(blob)), r.text
    assert requests.get(f"{base}/v1/blobs/{name}", headers=auth).content == blob


def test_another_users_file_is_404_like_an_unknown_one(nodes):
    base = nodes["bases"][0]
    alice, mallory = account(base), account(base)
    blob = data(10_000, 3)
    assert put(base, alice, blob).status_code == 201
    unknown = sha(b"never uploaded")
    for method in ("GET", "HEAD"):
        theirs = requests.request(method, f"{base}/v1/blobs/{sha(blob)}", headers=mallory)
        nothing = requests.request(method, f"{base}/v1/blobs/{unknown}", headers=mallory)
        assert theirs.status_code == nothing.status_code == 404
        assert theirs.content == nothing.content
        same = lambda h: {k: v for k, v in h.items() if k != "Date"}
        assert same(theirs.headers) == same(nothing.headers), (theirs.headers, nothing.headers)
        if method == "HEAD":
            assert theirs.headers["Upload-Offset"] == "0"
    # A change naming Alice's hash is refused for Mallory as for any missing blob.
    result = push(base, mallory, attach_change(str(uuid.uuid4()), f"{sha(blob)} {len(blob)} image/png stolen.png"))
    assert result["type"] == "reject" and result["code"] == "missing_blob", result
    # Mallory can upload the same bytes for herself; Alice's copy is untouched.
    assert put(base, mallory, blob).status_code == 201
    assert requests.get(f"{base}/v1/blobs/{sha(blob)}", headers=alice).content == blob


def test_dangerous_types_are_served_as_downloads(nodes):
    base = nodes["bases"][0]
    auth = account(base)
    for content_type, body in [("text/html", b"<script>alert(document.cookie)</script>"),
                               ("image/svg+xml", b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'),
                               ("application/javascript", b"alert(1)"), ("nonsense", b"x" * 10)]:
        r = put(base, auth, body, content_type=content_type)
        assert r.status_code == 201, r.text
        got = requests.get(f"{base}/v1/blobs/{sha(body)}", headers=auth)
        assert got.headers["Content-Type"] == "application/octet-stream", content_type
        assert got.headers["Content-Disposition"] == "attachment"
        assert got.headers["X-Content-Type-Options"] == "nosniff"
    text = b"plain words"
    put(base, auth, text, content_type="text/plain; charset=utf-8")
    assert requests.get(f"{base}/v1/blobs/{sha(text)}", headers=auth).headers["Content-Type"] == "text/plain; charset=utf-8"


def test_a_change_with_a_missing_blob_is_refused_then_accepted_once_it_is_uploaded(nodes):
    first, last = nodes["bases"][0], nodes["bases"][-1]
    auth = account(first)
    blob = data(70_000, 4)
    note = str(uuid.uuid4())
    element = f"{sha(blob)} {len(blob)} image/jpeg receipt 2024.jpg"
    change = attach_change(note, element)
    refused = push(first, auth, change)
    assert refused["type"] == "reject" and refused["code"] == "missing_blob" and sha(blob) in refused["message"], refused
    assert requests.get(f"{first}/v1/records/notes/{note}", headers=auth).status_code == 404
    assert put(last, auth, blob, content_type="image/jpeg").status_code == 201
    applied = push(first, auth, change)  # the same change, the same ccid
    assert applied["type"] == "ack" and applied["status"] == "applied", applied
    record = requests.get(f"{last}/v1/records/notes/{note}", headers=auth).json()
    assert record["fields"]["attachments"] == [element]
    # Malformed elements are invalid fields.
    for bad in [f"{sha(blob)} 70000 IMAGE/JPEG x", f"{sha(blob)} 70000 image/jpeg", "nothing", f"{sha(blob)} 70000 image/jpeg a/b"]:
        result = push(first, auth, attach_change(str(uuid.uuid4()), bad))
        assert result["type"] == "reject" and result["code"] == "invalid_field", (bad, result)


def test_limits_and_quota_are_said_before_any_byte_is_read():
    work = tempfile.mkdtemp(prefix="noted-blob-limits-")
    proc, base = start(["--data", work, "--max-blob-bytes", "1000000", "--quota-bytes", "2500000"])
    try:
        auth = account(base)
        big = data(1_000_001, 5)
        r = put(base, auth, big)
        assert r.status_code == 413 and r.json()["error"] == "too_large" and "1000000" in r.json()["message"], r.text
        r = patch(base, auth, sha(big), 0, len(big), big[:10])
        assert r.status_code == 413 and r.json()["error"] == "too_large"
        assert put(base, auth, data(1_000_000, 6)).status_code == 201
        assert put(base, auth, data(1_000_000, 7)).status_code == 201
        r = put(base, auth, data(1_000_000, 8))
        assert r.status_code == 413 and r.json()["error"] == "quota_exceeded", r.text
        assert len(requests.get(base + "/v1/blobs", headers=auth).json()["blobs"]) == 2
        # No Content-Length: 411.
        url = urllib.parse.urlsplit(base)
        s = socket.create_connection((url.hostname, url.port))
        name = sha(b"chunked")
        s.sendall((f"PUT /v1/blobs/{name} HTTP/1.1\r\nHost: x\r\nAuthorization: {auth['Authorization']}\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n7\r\nchunked\r\n0\r\n\r\n").encode())
        assert b" 411 " in s.recv(4096).split(b"\r\n")[0]
        s.close()
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)


def send_part(base, auth, name, blob, sent):
    """Starts a PUT of all of `blob` and sends only its first `sent` bytes; the socket stays open."""
    url = urllib.parse.urlsplit(base)
    s = socket.create_connection((url.hostname, url.port))
    s.sendall((f"PUT /v1/blobs/{name} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: {auth['Authorization']}\r\n"
               f"Content-Type: application/pdf\r\nContent-Length: {len(blob)}\r\n\r\n").encode() + blob[:sent])
    return s


def wait_for_offset(base, auth, name, at_least, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        head = requests.head(f"{base}/v1/blobs/{name}", headers=auth)
        if int(head.headers.get("Upload-Offset", "0")) >= at_least:
            return head
        time.sleep(0.1)
    raise AssertionError(f"the server did not report {at_least} bytes of the upload (seed {SEED})")


def test_an_upload_cut_off_by_killing_the_server_continues_from_what_it_kept(nodes):
    auth = account(nodes["bases"][0])
    blob = data(5 * 1024 * 1024 + 7, 9)
    name = sha(blob)
    sent = 3 * 1024 * 1024 + 11
    s = send_part(nodes["bases"][0], auth, name, blob, sent)
    # Wait until pieces written so far are visible (a piece is written each time a MiB has
    # gathered: at least two of the three MiB sent).
    wait_for_offset(nodes["bases"][0], auth, name, 2 * 1024 * 1024)
    victim = nodes["procs"][0]
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    s.close()
    if nodes["kind"] == "sqlite":
        proc, base = start(nodes["args"])
        nodes["procs"][0] = proc
        nodes["bases"][0] = base
    else:
        base = nodes["bases"][1]
    head = requests.head(f"{base}/v1/blobs/{name}", headers=auth)
    assert head.status_code == 404, head.status_code
    offset = int(head.headers["Upload-Offset"])
    assert 2 * 1024 * 1024 <= offset <= sent and head.headers["Upload-Length"] == str(len(blob)), (SEED, head.headers)
    r = patch(base, auth, name, offset, len(blob), blob[offset:])
    assert r.status_code == 204 and r.headers["Upload-Offset"] == str(len(blob)), r.text
    got = requests.get(f"{base}/v1/blobs/{name}", headers=auth)
    assert got.status_code == 200 and got.content == blob and got.headers["Content-Type"] == "application/pdf", SEED
    if nodes["kind"] == "postgres":
        # The killed node comes back and serves it too.
        proc, again = start(["--database", procs_database(nodes), "--data", os.path.join(nodes["work"], "node0-again")])
        nodes["procs"][0] = proc
        nodes["bases"][0] = again
        assert requests.get(f"{again}/v1/blobs/{name}", headers=auth).content == blob


def procs_database(nodes):
    """The database URL the PostgreSQL nodes were started with."""
    args = nodes["procs"][1].args
    return args[args.index("--database") + 1]


def test_a_put_sent_again_after_a_cut_skips_what_the_server_has(nodes):
    base = nodes["bases"][0]
    auth = account(base)
    blob = data(2 * 1024 * 1024 + 5, 10)
    name = sha(blob)
    s = send_part(base, auth, name, blob, 1024 * 1024 + 100)
    wait_for_offset(base, auth, name, 1024 * 1024)
    s.close()  # the client goes away: what arrived is kept
    head = wait_for_offset(base, auth, name, 1024 * 1024 + 100)
    assert head.headers["Upload-Offset"] == str(1024 * 1024 + 100), head.headers
    r = put(base, auth, blob, content_type="application/pdf")
    assert r.status_code == 201, r.text
    assert requests.get(f"{base}/v1/blobs/{name}", headers=auth).content == blob


def test_expect_100_continue_is_answered_before_the_body(nodes):
    """curl sends `Expect: 100-continue` for large bodies and waits a second for the answer."""
    base = nodes["bases"][0]
    auth = account(base)
    blob = data(2 * 1024 * 1024, 11)
    url = urllib.parse.urlsplit(base)
    s = socket.create_connection((url.hostname, url.port), timeout=10)
    s.sendall((f"PUT /v1/blobs/{sha(blob)} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: {auth['Authorization']}\r\n"
               f"Content-Type: image/png\r\nContent-Length: {len(blob)}\r\nExpect: 100-continue\r\n\r\n").encode())
    started = time.monotonic()
    first = s.recv(4096)
    assert first.startswith(b"HTTP/1.1 100 Continue\r\n"), first
    assert time.monotonic() - started < 0.9, "the 100 came only after curl's one-second wait"
    s.sendall(blob)
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        answer += chunk
    s.close()
    assert b" 201 " in answer.split(b"\r\n")[0], answer[:200]
    assert requests.get(f"{base}/v1/blobs/{sha(blob)}", headers=auth).content == blob


def test_an_empty_file_is_a_file_too(nodes):
    base = nodes["bases"][0]
    auth = account(base)
    empty = sha(b"")
    r = put(base, auth, b"", content_type="text/plain")
    assert r.status_code == 201 and r.json()["size"] == 0, r.text
    head = requests.head(f"{nodes['bases'][-1]}/v1/blobs/{empty}", headers=auth)
    assert head.status_code == 200 and head.headers["Content-Length"] == "0"
    got = requests.get(f"{nodes['bases'][-1]}/v1/blobs/{empty}", headers=auth)
    assert got.status_code == 200 and got.content == b""
    assert requests.get(f"{base}/v1/blobs/{empty}", headers=dict(auth, Range="bytes=0-")).status_code == 416
    result = push(base, auth, attach_change(str(uuid.uuid4()), f"{empty} 0 text/plain empty.txt"))
    assert result["type"] == "ack", result


def test_downloads_nobody_reads_do_not_fill_the_servers_memory(nodes):
    """A client that asks for a file and does not read it holds a piece of it, not the file."""
    if nodes["kind"] != "sqlite":
        pytest.skip("measured once, on the SQLite node")
    base = nodes["bases"][0]
    auth = account(base)
    blob = data(20 * 1024 * 1024, 12)
    assert put(base, auth, blob).status_code == 201
    pid = nodes["procs"][0].pid

    def rss():
        with open(f"/proc/{pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS:")).split()[1]) * 1024

    url = urllib.parse.urlsplit(base)
    before = rss()
    sockets = []
    for _ in range(15):
        s = socket.create_connection((url.hostname, url.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(f"GET /v1/blobs/{sha(blob)} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: {auth['Authorization']}\r\n\r\n".encode())
        sockets.append(s)
    time.sleep(3)
    grown = rss() - before
    for s in sockets:
        s.close()
    # 15 readers of 20 MiB each held in memory would be 300 MiB; a piece each is a few MiB.
    assert grown < 120 * 1024 * 1024, f"the server grew {grown // (1024 * 1024)} MiB for 15 downloads nobody reads"


def test_download_all_notes_with_large_attachments_stays_small_in_memory(nodes):
    """The export is made on disk and sent piece by piece: not three copies of every file in memory."""
    if nodes["kind"] != "sqlite":
        pytest.skip("measured once, on the SQLite node")
    base = nodes["bases"][0]
    auth = account(base)
    pid = nodes["procs"][0].pid

    def rss():
        with open(f"/proc/{pid}/status") as f:
            return int(next(line for line in f if line.startswith("VmRSS:")).split()[1]) * 1024

    files = [data(20 * 1024 * 1024, 20 + i) for i in range(4)]
    for i, blob in enumerate(files):
        assert put(base, auth, blob).status_code == 201
        assert push(base, auth, attach_change(str(uuid.uuid4()), f"{sha(blob)} {len(blob)} image/jpeg photo {i}.jpg"))["type"] == "ack"
    before = rss()
    peak = before
    with requests.get(f"{base}/v1/export?format=markdown", headers=auth, stream=True, timeout=120) as r:
        assert r.status_code == 200
        total = 0
        for chunk in r.iter_content(1 << 20):
            total += len(chunk)
            peak = max(peak, rss())
    assert total > 80 * 1024 * 1024
    grown = peak - before
    # Held in memory the four files would be 80 MiB at least (three copies: 240 MiB).
    assert grown < 60 * 1024 * 1024, f"the server grew {grown // (1024 * 1024)} MiB while exporting 80 MiB of attachments"
