"""`noted-server --collections DIR` driven as an operator would: the real binary, a folder of
schema documents (docs/collections.md), plain HTTP from outside, restarts on the same data
directory with the schema changed, and the one-line refusal with exit status 2."""
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import uuid

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))

WORRIES = {"name": "worries", "version": 1, "fields": {
    "text": {"kind": "text", "searchable": True},
    "intensity": {"kind": "scalar", "types": ["number"], "min": 0, "max": 10, "default": 0, "indexed": True},
    "category": {"kind": "scalar", "types": ["string"], "enum": ["health", "work", "other"], "default": "other", "indexed": True},
    "tags": {"kind": "set"},
    "resolved": {"kind": "scalar", "types": ["bool"], "default": False},
    "remindAt": {"kind": "scalar", "types": ["string", "null"], "default": None},
}}


class Server:
    def __init__(self, data, collections):
        self.proc = subprocess.Popen(
            [BIN, "--port", "0", "--data", data, "--collections", collections, "--log-level", "error"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"noted-server listening on (http://\S+)", line)
        if not m:
            self.proc.wait(timeout=30)
            self.url = None
            self.stderr = self.proc.stderr.read()
        else:
            self.url = m.group(1)

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=20) == 0


def write_schema(folder, schema, name="worries.json"):
    with open(os.path.join(folder, name), "w") as f:
        json.dump(schema, f)


def sign_in(url, name):
    password = "correct horse battery"
    requests.post(url + "/v1/accounts", json={"username": name, "password": password})
    r = requests.post(url + "/v1/sessions", json={"username": name, "password": password})
    assert r.status_code == 200, r.text
    return {"Authorization": "Bearer " + r.json()["access_token"]}


def change(record_id, base_rev, fields):
    return {"ccid": str(uuid.uuid4()), "collection": "worries", "id": record_id, "baseRev": base_rev, "op": "upsert", "fields": fields}


def test_a_schema_folder_is_served_evolves_and_refuses_breaking_changes():
    data = tempfile.mkdtemp(prefix="noted-col-")
    folder = tempfile.mkdtemp(prefix="noted-col-schemas-")
    try:
        write_schema(folder, WORRIES)
        server = Server(data, folder)
        assert server.url, server.stderr
        name = "col" + secrets.token_hex(4)
        auth = sign_in(server.url, name)
        listed = requests.get(server.url + "/v1/collections", headers=auth).json()
        assert [c["name"] for c in listed["collections"]] == ["notes", "worries"]
        record = str(uuid.uuid4())
        r = requests.post(server.url + "/v1/push", headers=auth, json={"changes": [
            change(record, 0, {"text": {"set": "the exam"}, "intensity": {"set": 7}, "category": {"set": "work"},
                               "tags": {"add": ["school"]}, "remindAt": {"set": "2026-11-25T09:00"}}),
            change(str(uuid.uuid4()), 0, {"category": {"set": "money"}}),
        ]}).json()["results"]
        assert r[0]["status"] == "applied", r
        assert r[1]["code"] == "invalid_field" and '"category"' in r[1]["message"], r
        server.stop()

        # Safe: a field added. The record is still there and the new field takes writes.
        evolved = json.loads(json.dumps(WORRIES))
        evolved["version"] = 2
        evolved["fields"]["mood"] = {"kind": "scalar", "types": ["string", "null"]}
        write_schema(folder, evolved)
        server = Server(data, folder)
        assert server.url, server.stderr
        auth = sign_in(server.url, name)  # the issuer names the new port
        got = requests.get(server.url + f"/v1/records/worries/{record}", headers=auth).json()
        assert got["fields"]["text"] == "the exam" and got["fields"]["intensity"] == 7
        r = requests.post(server.url + "/v1/push", headers=auth, json={"changes": [change(record, 1, {"mood": {"set": "calm"}})]}).json()
        assert r["results"][0]["status"] == "applied", r
        server.stop()

        # Breaking: a kind changed. One line, exit 2, and the data still served afterwards.
        broken = json.loads(json.dumps(evolved))
        broken["fields"]["tags"] = {"kind": "text"}
        write_schema(folder, broken)
        server = Server(data, folder)
        assert server.url is None and server.proc.returncode == 2, server.stderr
        assert server.stderr.strip().splitlines()[-1] == \
            "noted-server: the collections would break stored records: worries.tags changed kind from set to text"

        # A broken document: one line naming the file, exit 2.
        with open(os.path.join(folder, "worries.json"), "w") as f:
            f.write('{"name": "worries", "version": 1, "fields": {"text": {"kind": "text", "serchable": true}}}')
        server = Server(data, folder)
        assert server.url is None and server.proc.returncode == 2
        last = server.stderr.strip().splitlines()[-1]
        assert last.startswith("noted-server: ") and "worries.json" in last and '"serchable"' in last, last

        write_schema(folder, evolved)
        server = Server(data, folder)
        assert server.url, server.stderr
        auth = sign_in(server.url, name)  # the issuer names the new port
        got = requests.get(server.url + f"/v1/records/worries/{record}", headers=auth).json()
        assert got["rev"] == 2 and got["fields"]["mood"] == "calm"
        server.stop()
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
