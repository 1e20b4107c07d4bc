"""`POST /v1/import` (issue 16), the endpoint the web app uploads an export to, against a real
noted-server: every single-file sample export of Tests/NotedPortingTests/Fixtures (the shapes the
real apps write) gives the notes EXPECTED.json lists, with their dates; a connected device hears
them as changes; uploading again changes nothing, an edited note is updated, a purged one is not
brought back; malformed files, unknown formats and oversized bodies are refused clearly with
nothing written; Noted's own "Download all notes" zip round-trips into a fresh account.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import hashlib
import json
import os
import re
import secrets
import subprocess
import tempfile
import urllib.parse
import uuid

import pytest
import requests

BIN = os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server")
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "NotedPortingTests", "Fixtures")
EXPECTED = json.load(open(os.path.join(FIXTURES, "EXPECTED.json")))


@pytest.fixture(scope="module")
def server():
    data = tempfile.mkdtemp(prefix="noted-import-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, "--auth-attempts-per-minute", "1000", "--max-import-bytes", "3000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.match(r"noted-server listening on (http://\S+)", proc.stdout.readline())
    assert m
    yield m.group(1)
    proc.terminate()
    proc.wait(timeout=20)


def account(base):
    name = "imp" + secrets.token_hex(4)
    assert requests.post(base + "/v1/accounts", json={"username": name, "password": "correct horse battery"}).status_code == 201
    tokens = requests.post(base + "/v1/sessions", json={"username": name, "password": "correct horse battery"}).json()
    return {"Authorization": "Bearer " + tokens["access_token"]}


def upload(base, auth, data, name, fmt=None):
    query = {"name": name}
    if fmt:
        query["from"] = fmt
    headers = dict(auth, **{"Content-Type": "application/octet-stream"})
    return requests.post(base + "/v1/import?" + urllib.parse.urlencode(query), data=data, headers=headers, timeout=120)


def notes(base, auth):
    out, since = {}, 0
    while True:
        page = requests.get(base + f"/v1/changes?since={since}&snapshot=true", headers=auth).json()
        for record in page["records"]:
            if record["collection"] == "notes" and not record["deleted"]:
                out[record["id"]] = record
        if not page.get("more"):
            return out
        since = page["cursor"]


def millis(text):
    from datetime import datetime
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


BY_PATH = {f["path"]: f for f in EXPECTED["fixtures"]}
SINGLE_FILES = [dict(f, notes=f.get("notes") or BY_PATH[f["sameAs"]]["notes"])
                for f in EXPECTED["fixtures"] if os.path.isfile(os.path.join(FIXTURES, f["path"]))]


@pytest.mark.parametrize("fixture", SINGLE_FILES, ids=[f["path"] for f in SINGLE_FILES])
def test_each_apps_export_uploads_to_the_notes_it_holds(server, fixture):
    auth = account(server)
    path = os.path.join(FIXTURES, fixture["path"])
    data = open(path, "rb").read()
    answer = upload(server, auth, data, os.path.basename(path))
    assert answer.status_code == 200, answer.text
    summary = answer.json()
    assert summary["format"] == fixture["format"]
    assert summary["imported"] == fixture["count"] and summary["updated"] == 0 and summary["unchanged"] == 0, summary
    stored = notes(server, auth)
    assert len(stored) == fixture["count"]
    expected = {(n["title"], n["body"]) for n in fixture["notes"]}
    assert {(r["fields"].get("title", ""), r["fields"].get("body", "")) for r in stored.values()} == expected
    for note in fixture["notes"]:
        record = next(r for r in stored.values() if r["fields"].get("title", "") == note["title"] and r["fields"].get("body", "") == note["body"])
        assert sorted(record["fields"].get("tags", [])) == sorted(set(note["tags"]))
        assert record["fields"].get("pinned", False) == note["pinned"] and record["fields"].get("trashed", False) == note["trashed"]
        for field, key in (("created", "created"), ("modified", "updated")):
            # A file without dates (a plain Markdown file) gets none: the record's own dates
            # stand for it, and importing it again changes nothing.
            assert record["fields"].get(field) == (millis(note[key]) if note[key] else None), (field, record)
        # Attachments: each file stored on the server, the field naming it.
        files = note.get("attachments", [])
        assert record["fields"].get("attachments", []) == [f"{f['sha256']} {f['size']} {f['type']} {f['name']}" for f in files], record
        for f in files:
            got = requests.get(f"{server}/v1/blobs/{f['sha256']}", headers=auth)
            assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == f["sha256"], f
    again = upload(server, auth, data, os.path.basename(path)).json()
    assert again["imported"] == 0 and again["updated"] == 0 and again["unchanged"] == fixture["count"], again


def test_a_device_hears_the_import_and_repeats_overwrite_nothing_unasked(server):
    from websockets.sync.client import connect
    auth = account(server)
    ws = connect(server.replace("http://", "ws://") + "/v1/sync")
    ws.send(json.dumps({"type": "hello", "protocol": 1, "token": auth["Authorization"][7:], "device": str(uuid.uuid4())}))
    while json.loads(ws.recv(timeout=30))["type"] != "welcome":
        pass
    export = {"activeNotes": [{"id": f"n{i}", "content": f"Note {i}\nbody {i}", "creationDate": "2020-01-01T00:00:00.000Z",
                               "lastModified": "2021-01-01T00:00:00.000Z", "tags": ["a", "a", "b"]} for i in range(120)],
              "trashedNotes": [{"id": "t", "content": "Gone", "creationDate": "2020-01-01T00:00:00.000Z", "lastModified": "2020-01-01T00:00:00.000Z"}]}
    data = json.dumps(export).encode()
    summary = upload(server, auth, data, "notes.json").json()
    assert summary["imported"] == 121, summary
    heard = set()
    while len(heard) < 121:
        message = json.loads(ws.recv(timeout=30))
        if message["type"] == "change":
            heard.add(message["id"])
    stored = notes(server, auth)
    assert heard == set(stored)
    assert sorted(next(iter(stored.values()))["fields"]["tags"]) == ["a", "b"]

    # Edited on a device, then the same export again: the edit stays and the export's version is
    # added beside it, once; replace=true overwrites it instead.
    one = next(r for r in stored.values() if r["fields"]["title"] == "Note 7")
    edit = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": one["id"], "baseRev": one["rev"], "op": "upsert",
            "fields": {"body": {"set": "changed here"}}}
    assert requests.post(server + "/v1/push", json={"changes": [edit]}, headers=auth).json()["results"][0]["type"] == "ack"
    summary = upload(server, auth, data, "notes.json").json()
    assert (summary["imported"], summary["updated"], summary["unchanged"], summary["copied"]) == (0, 0, 120, 1), summary
    now = notes(server, auth)
    assert now[one["id"]]["fields"]["body"] == "changed here"
    copies = [r for r in now.values() if r["fields"]["title"] == "Note 7" and r["id"] != one["id"]]
    assert len(copies) == 1 and copies[0]["fields"]["body"] == "body 7" and copies[0]["fields"]["tags"] == one["fields"]["tags"], copies
    summary = upload(server, auth, data, "notes.json").json()
    assert (summary["copied"], summary["unchanged"]) == (0, 121), summary
    replaced = requests.post(server + "/v1/import?name=notes.json&replace=true", data=data,
                             headers=dict(auth, **{"Content-Type": "application/octet-stream"}), timeout=120).json()
    assert (replaced["updated"], replaced["copied"], replaced["unchanged"]) == (1, 0, 120), replaced
    assert notes(server, auth)[one["id"]]["fields"]["body"] == "body 7"
    bad = requests.post(server + "/v1/import?name=notes.json&replace=yes", data=data, headers=auth, timeout=120)
    assert bad.status_code == 400 and bad.json()["error"] == "bad_request", bad.text

    # Purged: not brought back.
    purge = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": one["id"], "baseRev": one["rev"] + 2, "op": "delete"}
    assert requests.post(server + "/v1/push", json={"changes": [purge]}, headers=auth).json()["results"][0]["type"] == "ack"
    summary = upload(server, auth, data, "notes.json").json()
    assert summary["unchanged"] == 120 and [s["reason"] for s in summary["skipped"]] == ["deleted on the server"], summary
    assert one["id"] not in notes(server, auth)


def test_bad_uploads_are_refused_clearly_and_write_nothing(server):
    auth = account(server)
    broken = upload(server, auth, b'{"activeNotes": [ {"id": 1,, } ]}', "notes.json")
    assert broken.status_code == 400 and broken.json()["error"] == "bad_import"
    assert broken.json()["message"].startswith("notes.json: line 1, column"), broken.text
    for malformed in EXPECTED["malformed"]:
        path = os.path.join(FIXTURES, malformed["path"])
        if malformed["expect"] != "error" or not os.path.isfile(path):
            continue
        # An account each: uploads are limited to 10 a minute per account.
        other = account(server)
        # As picked with its app's format (a damaged .txt could be a text note otherwise).
        answer = upload(server, other, open(path, "rb").read(), os.path.basename(path), fmt=malformed["path"].split("/")[0])
        assert answer.status_code == 400 and answer.json()["error"] == "bad_import", (malformed["path"], answer.text)
        assert notes(server, other) == {}
    unknown = upload(server, auth, b"{}", "notes.json", fmt="onenote")
    assert unknown.status_code == 400 and "simplenote" in unknown.json()["message"]
    too_big = upload(server, auth, b"x" * 3_000_001, "notes.md")
    assert too_big.status_code == 413 and too_big.json()["error"] == "too_large", too_big.text
    # A small zip that unpacks to far more than the server takes (4 × --max-import-bytes).
    import io
    import zipfile
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("notes/big.md", b"\n" * 20_000_000)
    assert len(packed.getvalue()) < 3_000_000
    bomb = upload(server, auth, packed.getvalue(), "export.zip")
    assert bomb.status_code == 400 and "uncompressed" in bomb.json()["message"], bomb.text
    bad_name = upload(server, auth, b"# hi", "../../etc/passwd")
    assert bad_name.status_code == 400
    assert requests.post(server + "/v1/import?name=a.md", data=b"# hi").status_code == 401
    assert notes(server, auth) == {}, "nothing written"
    busy = account(server)
    limited = [upload(server, busy, b"# hi", "a.md").status_code for _ in range(12)]
    assert limited[:10] == [200] * 10 and limited[-1] == 429, limited


def test_download_all_notes_then_upload_into_a_fresh_account_gives_the_same_notes(server):
    auth = account(server)
    # One file, attached to two notes: the export carries it once, and it comes back.
    photo = os.urandom(150_000)
    sha = hashlib.sha256(photo).hexdigest()
    assert requests.put(f"{server}/v1/blobs/{sha}", data=photo, headers=dict(auth, **{"Content-Type": "image/png"})).status_code == 201
    element = f"{sha} {len(photo)} image/png whiteboard.png"
    changes = [{"ccid": str(uuid.uuid4()), "collection": "notes", "id": str(uuid.uuid4()), "baseRev": 0, "op": "upsert",
                "fields": {"title": {"set": f"T{i} 🎉"}, "body": {"set": f"- [ ] item {i}\n" + (f"![whiteboard.png](attachment:{sha})" if i < 2 else "")},
                           "tags": {"set": ["x"]}, "folder": {"set": "Work/Plans"}, "pinned": {"set": i == 0}, "trashed": {"set": i == 1},
                           "attachments": {"set": [element] if i < 2 else []}}} for i in range(5)]
    assert all(r["type"] == "ack" for r in requests.post(server + "/v1/push", json={"changes": changes}, headers=auth).json()["results"])
    before = notes(server, auth)
    exported = requests.get(server + "/v1/export?format=markdown", headers=auth)
    assert exported.status_code == 200
    import io
    import zipfile
    names = zipfile.ZipFile(io.BytesIO(exported.content)).namelist()
    assert [n for n in names if n.startswith("attachments/")] == [f"attachments/{sha}/whiteboard.png"], names
    fresh = account(server)
    summary = upload(server, fresh, exported.content, "noted-export.zip").json()
    assert summary["format"] == "markdown" and summary["imported"] == 5, summary
    after = notes(server, fresh)
    assert set(after) == set(before), "Noted's own export keeps its ids"
    for id, record in before.items():
        for name in ("title", "body", "tags", "folder", "pinned", "trashed", "attachments"):
            assert after[id]["fields"].get(name) == record["fields"].get(name), (name, after[id], record)
        assert after[id]["fields"]["created"] == millis(record["createdAt"]) and after[id]["fields"]["modified"] == millis(record["updatedAt"])
