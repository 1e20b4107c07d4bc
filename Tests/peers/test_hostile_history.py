"""History is charged (issue 43; review security-3 H3), driven from outside against the real
`noted-server` process: stale whole-text saves that each keep a whole conflict revision used to
be free (200 saves of 600 KB under a 2 MB quota were all acknowledged and the data directory
grew by 122 MB); now every stored revision counts toward the account's bytes, the saves are
refused `quota_exceeded` once the account is full, `GET /v1/account` shows what it uses, and
deleting the note gives the room back.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN names the executable.
"""
import os
import re
import subprocess
import tempfile
import uuid

import pytest
import requests

from test_hostile_imports import account, storage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NOTED_SERVER_BIN", os.path.join(ROOT, ".build/debug/noted-server"))
QUOTA = 2_000_000


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_stale_saves_are_charged_and_refused_once_the_account_is_full(kind):
    data = tempfile.mkdtemp(prefix="noted-hostile-history-")
    proc = subprocess.Popen([BIN, "--port", "0", "--data", data, "--log-level", "error", "--max-pushes-per-second", "1000",
                             "--quota-bytes", str(QUOTA), *storage(kind)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base = re.match(r"noted-server listening on (http://\S+)", proc.stdout.readline()).group(1)
        auth = account(base)
        note = str(uuid.uuid4())

        def push(change):
            answer = requests.post(base + "/v1/push", json={"changes": [dict(change, ccid=str(uuid.uuid4()), collection="notes", id=note)]},
                                   headers=auth)
            assert answer.status_code == 200, answer.text
            return answer.json()["results"][0]

        assert push({"baseRev": 0, "op": "upsert", "fields": {"body": {"set": "x"}}})["type"] == "ack"
        before = dir_bytes(data)
        a, b = "a" * 60_000, "b" * 60_000
        answers = []
        for i in range(30):
            text = a if i % 2 else b
            # Stale: based on rev 1, so each keeps what it replaces as a whole conflict revision.
            answers.append(push({"baseRev": 1, "op": "upsert", "fields": {k: {"set": text} for k in ("title", "body", "folder")}}))
        acked = [r for r in answers if r["type"] == "ack"]
        refused = [r for r in answers if r["type"] == "reject"]
        assert refused and all(r["code"] == "quota_exceeded" for r in refused), answers[-1]
        # Each save is 180 KB of fields and keeps as much again in history: about five fit
        # (before, all 30 were acknowledged, and 200 of 600 KB grew the data directory by 122 MB).
        assert len(acked) < 12, f"{len(acked)} stale saves acknowledged under a {QUOTA} byte quota"
        usage = requests.get(base + "/v1/account", headers=auth).json()["usage"]
        assert usage["quota_bytes"] == QUOTA and usage["records"] == 1
        assert usage["history_bytes"] > 0 and usage["bytes"] <= QUOTA + 400_000, usage
        if kind == "sqlite":
            # The data directory grew by about what the quota allows (before: 122 MB for 200 saves).
            assert dir_bytes(data) - before < 3 * QUOTA + 8_000_000, dir_bytes(data) - before
        # Deleting the note takes its history with it: the room is back.
        current = requests.get(base + "/v1/changes?since=0", headers=auth).json()["records"][0]
        assert push({"baseRev": current["rev"], "op": "delete"})["type"] == "ack"
        usage = requests.get(base + "/v1/account", headers=auth).json()["usage"]
        assert usage["bytes"] == 0 and usage["history_bytes"] == 0 and usage["records"] == 0, usage
    finally:
        proc.terminate()
        proc.wait(timeout=20)
