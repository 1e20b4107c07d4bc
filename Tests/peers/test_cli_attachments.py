"""`noted attach`, `noted attachments` and `noted fetch` (issue 17), driven as a user would:
a file attached offline on one device goes up with the next sync, before the change naming it;
another device lists it and fetches identical bytes (then has it offline); mistakes (no such
file, a bad type, an unknown name, an existing output file, a file over the server's limit) are
one clear line on standard error with nothing changed.

Run by scripts/test after `swift build`; NOTED_SERVER_BIN and NOTED_BIN name the executables.
"""
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile

import pytest
import requests

SERVER = os.path.abspath(os.environ.get("NOTED_SERVER_BIN", ".build/debug/noted-server"))
NOTED = os.path.abspath(os.environ.get("NOTED_BIN", ".build/debug/noted"))
PASSWORD = "correct horse battery"
SEED = int(os.environ.get("NOTED_TEST_SEED", str(random.randrange(1 << 30))))


@pytest.fixture()
def server():
    work = tempfile.mkdtemp(prefix="noted-cli-att-")
    proc = subprocess.Popen([SERVER, "--port", "0", "--data", os.path.join(work, "data"), "--auth-attempts-per-minute", "1000",
                             "--max-blob-bytes", "3000000"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.match(r"noted-server listening on (http://\S+)", proc.stdout.readline())
    assert m
    yield m.group(1), work
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(work, ignore_errors=True)


def noted(home, *args, check=True, stdin=None, cwd=None):
    result = subprocess.run([NOTED, "--home", home, *args], input=stdin, capture_output=True, timeout=120, cwd=cwd)
    if check:
        assert result.returncode == 0, (args, result.stderr.decode())
    return result


def test_a_file_attached_offline_reaches_another_device_whole(server):
    base, work = server
    a, b = os.path.join(work, "a"), os.path.join(work, "b")
    noted(a, "--server", base, "register", "--username", "ann", "--password-stdin", stdin=(PASSWORD + "\n").encode())
    noted(b, "--server", base, "login", "--username", "ann", "--password-stdin", stdin=(PASSWORD + "\n").encode())
    note = json.loads(noted(a, "new", "--title", "Receipts", "--json").stdout)["id"]
    photo = random.Random(SEED).randbytes(2_500_000)
    path = os.path.join(work, "receipt march.jpg")
    with open(path, "wb") as f:
        f.write(photo)
    out = noted(a, "--offline", "attach", note[:8], path).stdout.decode()
    sha = hashlib.sha256(photo).hexdigest()
    assert f"![receipt march.jpg](attachment:{sha})" in out, out
    listed = json.loads(noted(a, "attachments", note[:8], "--json").stdout)
    assert listed == [{"sha256": sha, "size": len(photo), "type": "image/jpeg", "name": "receipt march.jpg"}]
    # Nothing on the server yet; the next sync takes the file, then the change.
    token = requests.post(base + "/v1/sessions", json={"username": "ann", "password": PASSWORD}).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    assert requests.head(f"{base}/v1/blobs/{sha}", headers=auth).status_code == 404
    noted(a, "sync")
    assert requests.get(f"{base}/v1/blobs/{sha}", headers=auth).content == photo
    record = requests.get(f"{base}/v1/records/notes/{note}", headers=auth).json()
    assert record["fields"]["attachments"] == [f"{sha} {len(photo)} image/jpeg receipt march.jpg"]

    noted(b, "sync")
    assert "receipt march.jpg (2500000 bytes)" in noted(b, "show", note[:8]).stdout.decode()
    out_dir = tempfile.mkdtemp(dir=work)
    noted(b, "fetch", note[:8], "receipt march.jpg", cwd=out_dir)
    assert open(os.path.join(out_dir, "receipt march.jpg"), "rb").read() == photo, SEED
    # Kept on the device: offline, by a prefix of the hash, to standard output.
    got = noted(b, "--offline", "fetch", note[:8], sha[:10], "-o", "-").stdout
    assert got == photo
    # Never over an existing file without --force.
    again = noted(b, "fetch", note[:8], "receipt march.jpg", cwd=out_dir, check=False)
    assert again.returncode != 0 and b"exists" in again.stderr
    noted(b, "fetch", note[:8], "receipt march.jpg", "--force", cwd=out_dir)


def test_mistakes_are_one_clear_line_and_change_nothing(server):
    base, work = server
    home = os.path.join(work, "c")
    noted(home, "--server", base, "register", "--username", "cy", "--password-stdin", stdin=(PASSWORD + "\n").encode())
    note = json.loads(noted(home, "new", "--title", "Plain", "--json").stdout)["id"]
    before = noted(home, "show", note, "--json").stdout

    missing = noted(home, "attach", note, os.path.join(work, "nope.png"), check=False)
    assert missing.returncode != 0 and b"no such file" in missing.stderr
    bad_type = os.path.join(work, "x.bin")
    with open(bad_type, "wb") as f:
        f.write(b"x")
    refused = noted(home, "attach", note, bad_type, "--type", "not a type", check=False)
    assert refused.returncode != 0 and b"MIME" in refused.stderr
    big = os.path.join(work, "big.pdf")
    with open(big, "wb") as f:
        f.write(os.urandom(3_000_001))
    too_big = noted(home, "attach", note, big, check=False)
    assert too_big.returncode != 0 and b"3000000" in too_big.stderr, too_big.stderr
    unknown = noted(home, "fetch", note, "nothing.txt", check=False)
    assert unknown.returncode != 0 and b"no attachment" in unknown.stderr and b"has none" in unknown.stderr
    assert noted(home, "show", note, "--json").stdout == before
    assert noted(home, "attachments", note).stdout.decode().strip() == "no attachments"
    for result in (missing, refused, too_big, unknown):
        assert len(result.stderr.decode().strip().splitlines()) == 1, result.stderr
