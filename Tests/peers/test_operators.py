"""The operator's tools on the real binaries, as an operator runs them beside a live server
(issue 16): `noted-server users list|disable|enable|delete|reset-password` and `noted-server
backup` / `restore`, checked by what clients then see: a disabled account's open sync
connection closes within seconds, its tokens and its password stop working and work again once
enabled; a backup taken while a client keeps writing restores into a fresh server that a new
device syncs every acknowledged note from.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN and NOTED_BIN name the executables.
"""
import hashlib
import json
import os
import re
import secrets
import sqlite3
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
import requests

BIN = os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server")
NOTED = os.environ.get("NOTED_BIN", ".build/debug/noted")
PASSWORD = "correct horse battery"


def start(data, *flags):
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, *flags], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.match(r"noted-server listening on (http://\S+)", line)
    assert m, f"unexpected first line {line!r}"
    return proc, m.group(1)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def admin(data, *args, check=True):
    result = subprocess.run([BIN, *args, "--data", data], capture_output=True, text=True, timeout=120)
    if check:
        assert result.returncode == 0, f"noted-server {' '.join(args)}: {result.stderr}"
    return result


def register(base, name):
    r = requests.post(base + "/v1/accounts", json={"username": name, "password": PASSWORD})
    assert r.status_code == 201, r.text


def sign_in(base, name, password=PASSWORD):
    return requests.post(base + "/v1/sessions", json={"username": name, "password": password})


def ws_session(base, access):
    from websockets.sync.client import connect
    ws = connect(base.replace("http://", "ws://") + "/v1/sync", max_size=None, legacy=True) if "legacy" in connect.__code__.co_varnames else connect(base.replace("http://", "ws://") + "/v1/sync", max_size=None)
    ws.send(json.dumps({"type": "hello", "protocol": 1, "token": access, "device": str(uuid.uuid4())}))
    while json.loads(ws.recv(timeout=30))["type"] != "welcome":
        pass
    return ws


def push(base, access, *titles):
    changes = [{"ccid": str(uuid.uuid4()), "collection": "notes", "id": str(uuid.uuid4()), "baseRev": 0, "op": "upsert",
                "fields": {"title": {"set": title}, "body": {"set": "written before the backup"}}} for title in titles]
    r = requests.post(base + "/v1/push", json={"changes": changes}, headers={"Authorization": "Bearer " + access})
    return r


@pytest.fixture
def server():
    data = tempfile.mkdtemp(prefix="noted-operators-")
    proc, base = start(data, "--auth-attempts-per-minute", "1000", "--max-pushes-per-second", "100000")
    yield data, base
    stop(proc)


def test_disable_enable_reset_and_delete_beside_a_running_server(server):
    data, base = server
    register(base, "Ada")
    register(base, "bob")
    ada = sign_in(base, "ada").json()
    bob = sign_in(base, "bob").json()
    assert push(base, ada["access_token"], "ada's note").status_code == 200

    listed = [json.loads(line) for line in admin(data, "users", "list", "--json").stdout.splitlines()]
    assert [u["username"] for u in listed] == ["Ada", "bob"]
    assert listed[0]["records"] == 1 and listed[0]["storedBytes"] > 0 and listed[0]["disabled"] is False and listed[0]["lastSeen"]
    plain = admin(data, "users", "list")
    assert plain.stdout.startswith("Ada\t") and "2 account(s)" in plain.stderr

    # Disabled while connected: the open connection hears why and closes within seconds.
    ws = ws_session(base, ada["access_token"])
    bob_ws = ws_session(base, bob["access_token"])
    started = time.monotonic()
    out = admin(data, "users", "disable", "ada").stdout
    assert out.strip() == "Ada disabled; 1 sign-in(s) ended", out
    said = json.loads(ws.recv(timeout=10))
    assert said["type"] == "error" and "disabled" in said["message"], said
    with pytest.raises(Exception):
        while True:
            ws.recv(timeout=10)
    assert ws.close_code == 4001 and time.monotonic() - started < 10
    assert requests.get(base + "/v1/changes?since=0", headers={"Authorization": "Bearer " + ada["access_token"]}).status_code == 401
    refused = sign_in(base, "ada")
    assert refused.status_code == 403 and refused.json()["error"] == "account_disabled", refused.text
    assert sign_in(base, "ada", "wrong password!").json()["error"] == "invalid_credentials", "a wrong password says nothing more"
    assert requests.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": ada["refresh_token"]}).status_code == 400
    # Bob is untouched.
    bob_ws.send(json.dumps({"type": "pull", "since": 0}))
    assert json.loads(bob_ws.recv(timeout=10))["type"] == "changes"
    assert [u["disabled"] for u in map(json.loads, admin(data, "users", "list", "--json").stdout.splitlines())] == [True, False]

    admin(data, "users", "enable", "ADA")
    again = sign_in(base, "ada")
    assert again.status_code == 200, again.text

    # A reset password: printed once, the old one and every sign-in end.
    reset = admin(data, "users", "reset-password", "ada")
    temporary = reset.stdout.strip()
    assert re.fullmatch(r"[a-z2-9]{4}(-[a-z2-9]{4}){3}", temporary), reset.stdout
    assert sign_in(base, "ada").status_code == 401
    assert sign_in(base, "ada", temporary).status_code == 200
    # The running server hears of the ended sign-ins within seconds (it reads the file's
    # account events once a second): until then the old access token still works.
    deadline = time.monotonic() + 10
    while requests.get(base + "/v1/account", headers={"Authorization": "Bearer " + again.json()["access_token"]}).status_code != 401:
        assert time.monotonic() < deadline, "the old access token still works 10 s after the reset"
        time.sleep(0.1)

    # A username that is another account's id: the operator is told, nothing is done.
    bob_id = [u["id"] for u in map(json.loads, admin(data, "users", "list", "--json").stdout.splitlines()) if u["username"] == "bob"][0]
    register(base, bob_id)
    ambiguous = admin(data, "users", "disable", bob_id, check=False)
    assert ambiguous.returncode == 1 and "give that id instead" in ambiguous.stderr, ambiguous.stderr
    assert sign_in(base, "bob").status_code == 200 and sign_in(base, bob_id).status_code == 200
    # A mistyped data directory is said so, not answered with an empty list.
    assert "no database at" in admin(os.path.join(data, "nope"), "users", "list", check=False).stderr

    # Unknown accounts and missing confirmations are one clear line, nothing changed.
    unknown = admin(data, "users", "disable", "nobody", check=False)
    assert unknown.returncode == 1 and unknown.stderr.strip() == "Error: no account nobody on this server", unknown.stderr
    unconfirmed = admin(data, "users", "delete", "ada", check=False)
    assert unconfirmed.returncode != 0 and "--yes" in unconfirmed.stderr
    assert sign_in(base, "ada", temporary).status_code == 200

    ws = ws_session(base, sign_in(base, "ada", temporary).json()["access_token"])
    assert admin(data, "users", "delete", "ada", "--yes").stdout.strip() == "Ada deleted"
    said = json.loads(ws.recv(timeout=10))
    assert said["type"] == "error" and "deleted" in said["message"], said
    assert sign_in(base, "ada", temporary).status_code == 401
    register(base, "ada")  # the name is free again
    assert sorted(u["username"] for u in map(json.loads, admin(data, "users", "list", "--json").stdout.splitlines())) == sorted(["ada", "bob", bob_id])


def test_a_backup_taken_while_writing_restores_into_a_fresh_server(server):
    data, base = server
    register(base, "carol")
    access = sign_in(base, "carol").json()["access_token"]
    acknowledged = []
    stop_writing = threading.Event()

    def writer():
        n = 0
        while not stop_writing.is_set():
            title = f"note {n}"
            try:
                if push(base, access, title).status_code == 200:
                    acknowledged.append(title)
            except requests.RequestException:
                return
            n += 1

    for start_at in range(0, 200, 50):
        assert push(base, access, *[f"first {n}" for n in range(start_at, start_at + 50)]).status_code == 200
    # An attachment: its file goes into the backup and comes back with the restore.
    photo = os.urandom(300_000)
    photo_sha = hashlib.sha256(photo).hexdigest()
    assert requests.put(f"{base}/v1/blobs/{photo_sha}", data=photo, headers={"Authorization": f"Bearer {access}", "Content-Type": "image/png"}).status_code == 201
    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.5)
    before = len(acknowledged)
    assert before > 0, "the writer is writing while the backup runs"
    backup = os.path.join(tempfile.mkdtemp(prefix="noted-backup-"), "noted.backup")
    out = admin(data, "backup", backup).stdout
    after = len(acknowledged)
    stop_writing.set()
    thread.join()
    assert re.match(r"backed up 1 account\(s\), \d+ bytes, to ", out), out
    assert oct(os.stat(backup).st_mode & 0o777) == "0o600"
    assert open(os.path.join(backup + ".blobs", os.listdir(backup + ".blobs")[0], photo_sha), "rb").read() == photo
    with sqlite3.connect(backup) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    # Never over an existing file.
    refused = admin(data, "backup", backup, check=False)
    assert refused.returncode == 1 and "exists" in refused.stderr

    fresh = tempfile.mkdtemp(prefix="noted-restored-")
    restored = admin(os.path.join(fresh, "data"), "restore", backup).stdout
    assert restored.strip() == f"restored 1 account(s) from {backup}", restored
    proc, other = start(os.path.join(fresh, "data"))
    try:
        home = tempfile.mkdtemp(prefix="noted-home-")
        subprocess.run([NOTED, "--home", home, "--server", other, "login", "--username", "carol", "--password-stdin"],
                       input=PASSWORD + "\n", check=True, capture_output=True, text=True, timeout=60)
        subprocess.run([NOTED, "--home", home, "sync"], check=True, capture_output=True, text=True, timeout=120)
        notes = json.loads(subprocess.run([NOTED, "--home", home, "list", "--json"], check=True, capture_output=True, text=True).stdout)
        titles = {n["title"] for n in notes}
        assert {f"first {n}" for n in range(200)} <= titles
        # Everything acknowledged before the backup began is in it; nothing beyond what was
        # acknowledged by its end.
        assert set(acknowledged[:before]) <= titles
        assert len(titles) <= 200 + after + 1
        token = sign_in(other, "carol").json()["access_token"]
        got = requests.get(f"{other}/v1/blobs/{photo_sha}", headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 200 and got.content == photo
    finally:
        stop(proc)

    # Over a database: refused unless --replace, which keeps the one there beside it.
    again = admin(os.path.join(fresh, "data"), "restore", backup, check=False)
    assert again.returncode == 1 and "--replace" in again.stderr
    replaced = admin(os.path.join(fresh, "data"), "restore", backup, "--replace").stdout
    kept = re.search(r"now (\S+)$", replaced.strip()).group(1)
    assert os.path.exists(kept)
    # Not a backup: refused, nothing changed.
    junk = os.path.join(fresh, "junk")
    with open(junk, "w") as f:
        f.write("not a database")
    bad = admin(os.path.join(fresh, "other"), "restore", junk, check=False)
    assert bad.returncode == 1 and "not a Noted backup" in bad.stderr, bad.stderr
    assert not os.path.exists(os.path.join(fresh, "other", "noted.sqlite"))


def test_backup_of_postgres_points_to_pg_dump():
    result = subprocess.run([BIN, "backup", "/tmp/x.backup", "--database", "postgres://noted@127.0.0.1:1/none"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "pg_dump" in result.stderr, result.stderr
