"""The CLI and the import against untrusted exports (issue 43; review security-3 L3), driven
as a user would: an attachment named `.bash_login` is fetched as `bash_login`; escape sequences
in a note are shown as U+FFFD on a terminal (and passed through to a pipe); `noted account
usage` says what the account uses.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN and NOTED_BIN name the executables.
"""
import hashlib
import json
import os
import pty
import re
import shutil
import subprocess
import tempfile
import uuid

import pytest
import requests

from test_cli_attachments import noted

SERVER = os.path.abspath(os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server"))
NOTED = os.path.abspath(os.environ.get("NOTED_BIN", ".build/debug/noted"))
PASSWORD = "correct horse battery"


@pytest.fixture()
def server():
    # test_cli_attachments' server, with a quota to report.
    work = tempfile.mkdtemp(prefix="noted-hostile-cli-")
    proc, base = start([SERVER, "--port", "0", "--data", os.path.join(work, "data"), "--auth-attempts-per-minute", "1000",
                        "--quota-bytes", "5000000"])
    yield base, work
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(work, ignore_errors=True)


def start(command):
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.match(r"noted-server listening on (http://\S+)", proc.stdout.readline())
    assert m
    return proc, m.group(1)


def on_terminal(home, *args):
    """What `noted` prints when its standard output is a terminal (a pseudo-terminal here)."""
    out = b""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(NOTED, [NOTED, "--home", home, *args])
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def register(base, home, name):
    noted(home, "--server", base, "register", "--username", name, "--password-stdin", stdin=(PASSWORD + "\n").encode())
    token = requests.post(base + "/v1/sessions", json={"username": name, "password": PASSWORD}).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def test_names_and_text_from_others_cannot_reach_the_shell_or_the_terminal(server):
    base, work = server
    home = os.path.join(work, "home")
    auth = register(base, home, "lou")
    blob = b"echo owned\n"
    sha = hashlib.sha256(blob).hexdigest()
    assert requests.put(f"{base}/v1/blobs/{sha}", data=blob, headers=dict(auth, **{"Content-Type": "text/plain"})).status_code == 201
    evil = "Hello \x1b]52;c;b3duZWQ=\x07\x1b]0;title\x07\x9b31m world"
    note = str(uuid.uuid4())
    change = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note, "baseRev": 0, "op": "upsert",
              "fields": {"title": {"set": evil}, "body": {"set": evil}, "attachments": {"set": [f"{sha} {len(blob)} text/plain .bash_login"]}}}
    assert requests.post(base + "/v1/push", json={"changes": [change]}, headers=auth).json()["results"][0]["type"] == "ack"
    noted(home, "sync")
    out_dir = tempfile.mkdtemp(dir=work)
    noted(home, "fetch", note[:8], sha[:10], cwd=out_dir)
    assert os.listdir(out_dir) == ["bash_login"], os.listdir(out_dir)
    shown = on_terminal(home, "show", note[:8])
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown and "\ufffd" in shown, repr(shown)
    listed = on_terminal(home, "list")
    assert "\x1b" not in listed and "Hello" in listed, repr(listed)
    # To a pipe, the text is the note's own.
    assert evil.encode() in noted(home, "show", note[:8]).stdout


def test_account_usage_says_what_the_account_stores(server):
    base, work = server
    home = os.path.join(work, "home")
    register(base, home, "max")
    noted(home, "new", "--title", "Mine", "--body", "my own words")
    noted(home, "sync")
    usage = json.loads(noted(home, "account", "usage", "--json").stdout)
    assert usage["quotaBytes"] == 5000000 and usage["records"] == 1 and usage["bytes"] > 0 and usage["historyBytes"] > 0, usage
    text = noted(home, "account", "usage").stdout.decode()
    assert "of 5000000" in text and "history" in text, text
