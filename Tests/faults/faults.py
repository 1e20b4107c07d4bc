#!/usr/bin/env python3
"""Real-process fault tests of noted-server and noted (issue 7); run by scripts/faults.

Real `noted-server` processes (SQLite in a temporary directory, or PostgreSQL) on loopback,
driven by protocol-speaking clients written here (they record every ack they see) and by real
`noted` command-line homes. Faults: SIGKILL at the Nth fsync/fdatasync (strace fault
injection), SIGSTOP/SIGCONT, SIGKILL of a `noted` client mid-sync, a full disk (tmpfs), a
network partition (network namespace + iptables), PostgreSQL restarts.

The checker after every scenario, per user:
  - every marker a client saw acknowledged is in the server's records (no lost acked write);
  - no marker appears twice anywhere on the server (exactly once);
  - every client's view equals the server (convergence).

Every loop is bounded by a count and a deadline; every process is killed at the end.
Environment: NOTED_SERVER_BIN, NOTED_BIN, NOTED_FAULTS_SWEEP (fsync indices, e.g. "3,8,20"
or a count), NOTED_FAULTS_ONLY (comma-separated scenario names), NOTED_FAULTS_SEED,
NOTED_FAULTS_POSTGRES_BIN (the PostgreSQL bin directory; found under /usr/lib/postgresql).
"""
import asyncio
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

import websockets
from websockets.asyncio.client import connect

SERVER_BIN = os.environ.get("NOTED_SERVER_BIN", "")
NOTED_BIN = os.environ.get("NOTED_BIN", "")
SEED = int(os.environ.get("NOTED_FAULTS_SEED", str(random.randrange(1 << 30))))
rng = random.Random(SEED)
PASSWORD = "correct horse battery"
PROCS = []  # every process started here (Popen), killed by cleanup()
REQUEST_TIMEOUT = 5.0  # an unanswered request this long means a dead connection
TMP = tempfile.mkdtemp(prefix="noted-faults.")


def log(*parts):
    print("faults:", *parts, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_json(method, url, body=None, token=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw or b"{}")
        except ValueError:
            return error.code, {"raw": raw.decode(errors="replace")}


def kill_proc(p, sig=signal.SIGKILL):
    if p is None or p.poll() is not None:
        return
    try:
        os.killpg(p.pid, sig)  # its own session: strace and the server it traces
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def cleanup():
    for p in PROCS:
        kill_proc(p)
    for p in PROCS:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# ---------------------------------------------------------------------------------------------
# The server


class Server:
    """One noted-server on a fixed loopback port (kept across restarts so clients reconnect)."""

    def __init__(self, name, store_args, host="127.0.0.1", port=None, netns_prefix=None):
        self.name = name
        self.store_args = store_args
        self.host = host
        self.port = port or free_port()
        self.proc = None
        self.logpath = os.path.join(TMP, f"{name}.log")
        self.netns_prefix = netns_prefix or []
        self.url = f"http://{host}:{self.port}"

    def start(self, fsync_kill_at=None, wait=30.0):
        """Starts the server; with fsync_kill_at=N under strace, which SIGKILLs it at its Nth
        fsync/fdatasync. Returns True once it listens, False when it died first."""
        cmd = self.netns_prefix + [SERVER_BIN, "serve", "--host", self.host, "--port", str(self.port),
                                   "--max-pushes-per-second", "1000", "--log-level", os.environ.get("NOTED_FAULTS_LOG_LEVEL", "warning")] + self.store_args
        if fsync_kill_at is not None:
            # strace counts injections per thread, and the server's commits run on changing
            # threads; so strace only reports every fsync/fdatasync at entry (each delayed 30 ms
            # there) and a watcher here SIGKILLs the server at the Nth one counted over all
            # threads, while that fsync is still held at its entry.
            cmd = ["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync",
                   "-e", "inject=fsync,fdatasync:delay_enter=30000"] + cmd
        logf = open(self.logpath, "a")
        logf.write(f"--- start {' '.join(cmd)}\n")
        logf.flush()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE if fsync_kill_at is not None else logf,
                                     start_new_session=True)
        PROCS.append(self.proc)
        self.fsyncs = 0
        if fsync_kill_at is not None:
            proc = self.proc

            def watch():
                for line in proc.stderr:
                    if re.search(rb"\b(fsync|fdatasync)\(", line) and b"resumed>" not in line:
                        self.fsyncs += 1
                        if self.fsyncs == fsync_kill_at:
                            try:
                                os.killpg(proc.pid, signal.SIGKILL)
                            except ProcessLookupError:
                                pass
                    elif not re.search(rb"(fsync|fdatasync)", line):
                        logf.write(line.decode(errors="replace"))
                        logf.flush()
            threading.Thread(target=watch, daemon=True).start()
        deadline = time.monotonic() + wait
        os.set_blocking(self.proc.stdout.fileno(), False)
        buf = b""
        while time.monotonic() < deadline:
            chunk = self.proc.stdout.read()
            if chunk:
                buf += chunk
                if b"listening on" in buf:
                    return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: no 'listening' line within {wait}s (log {self.logpath})")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        kill_proc(self.proc)
        self.wait_port_free()

    def wait_port_free(self, seconds=15.0):
        # strace's tracee (the server) may outlive strace by a moment; its port is free only
        # once it is gone.
        if self.netns_prefix:
            time.sleep(0.5)  # its address lives in the namespace: cannot probe from here
            return
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.host, self.port))
                return
            except OSError:
                time.sleep(0.1)
            finally:
                s.close()
        raise RuntimeError(f"{self.name}: port {self.port} still in use after the kill")

    def stop_signal(self, sig):
        os.killpg(self.proc.pid, sig)

    def wait_exit(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False


def signin(base, username):
    for attempt in range(30):
        try:
            status, body = http_json("POST", base + "/v1/accounts", {"username": username, "password": PASSWORD})
            if status not in (201, 409):
                raise RuntimeError(f"sign-up {username}: {status} {body}")
            status, body = http_json("POST", base + "/v1/sessions",
                                     {"username": username, "password": PASSWORD, "device": str(uuid.uuid4())})
            if status == 200:
                return body["access_token"]
            raise RuntimeError(f"sign-in {username}: {status} {body}")
        except (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout):
            time.sleep(0.3)
    raise RuntimeError(f"sign-in {username}: server unreachable")


def server_records(base, token, deadline_s=30):
    """All live records of the token's user, via HTTP pull (bounded pages and time)."""
    deadline = time.monotonic() + deadline_s
    records, since = {}, 0
    for _ in range(10000):
        if time.monotonic() > deadline:
            raise RuntimeError("server pull: deadline")
        status, page = http_json("GET", f"{base}/v1/changes?since={since}&limit=1000", token=token)
        if status != 200:
            raise RuntimeError(f"server pull: {status} {page}")
        for r in page["records"]:
            if r.get("deleted"):
                records.pop(r["id"], None)
            else:
                records[r["id"]] = r
        since = page["cursor"]
        if not page["more"]:
            return records
    raise RuntimeError("server pull: too many pages")


# ---------------------------------------------------------------------------------------------
# A protocol client that records every ack


def marker_re():
    return re.compile(r"\((?:[a-z0-9]+)\.(?:\d+)\)")


class Client:
    """Speaks /v1/sync. Owns `notes` records of its own; appends one marker `(name.k)` per change
    to a note's body with a delta (one change in flight per note, resent unchanged with the same
    ccid after a reconnect, like the real client). `acked` holds every marker whose change it saw
    acknowledged; `bodies` is its view of each note (the acked server state)."""

    def __init__(self, name, server, token, notes=4):
        self.name = name
        self.server = server
        self.token = token
        self.device = str(uuid.uuid4())
        self.note_ids = [str(uuid.uuid4()) for _ in range(notes)]
        self.rev = {i: 0 for i in self.note_ids}
        self.bodies = {i: "" for i in self.note_ids}
        self.inflight = {}  # note id -> (change, marker, new body)
        self.counter = 0
        self.acked = set()
        self.sent = set()
        self.rejects = {}  # code -> count
        self.errors = {}  # code -> count
        self.connects = 0
        self.stop = False
        self.ws = None

    def _next_change(self, note_id):
        self.counter += 1
        marker = f"({self.name}.{self.counter})"
        body = self.bodies[note_id]
        if self.rev[note_id] == 0:
            fields = {"title": {"set": f"{self.name} {note_id[:8]}"}, "body": {"set": marker}}
            new_body = marker
        else:
            fields = {"body": {"delta": f"={len(body)}\t+{marker}" if body else f"+{marker}"}}
            new_body = body + marker
        change = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note_id,
                  "baseRev": self.rev[note_id], "op": "upsert", "fields": fields}
        self.sent.add(marker)
        return change, marker, new_body

    def _on_result(self, m):
        note_id = m.get("id")
        entry = self.inflight.get(note_id)
        if entry is None or entry[0]["ccid"] != m.get("ccid"):
            return
        if m["type"] == "ack":
            del self.inflight[note_id]
            self.rev[note_id] = m["rev"]
            self.acked.add(entry[1])
            if m.get("status") in ("merged", "duplicate") and "fields" in m:
                self.bodies[note_id] = m["fields"]["body"]
            else:
                self.bodies[note_id] = entry[2]
        else:
            code = m.get("code")
            self.rejects[code] = self.rejects.get(code, 0) + 1
            if code != "rate_limited":
                # Not expected for private notes: keep it visible, drop the change.
                del self.inflight[note_id]
            self._resend_due = True

    async def _session(self, edits_left_fn, edit_interval):
        url = self.server.url.replace("http://", "ws://") + "/v1/sync"
        async with connect(url, open_timeout=5, close_timeout=1, ping_interval=None, max_size=None) as ws:
            self.ws = ws
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "token": self.token,
                                      "device": self.device, "client": "faults/1"}))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if welcome.get("type") != "welcome":
                raise ConnectionError(f"no welcome: {welcome}")
            self.connects += 1
            # Resend what was in flight, unchanged (same ccid, same body).
            if self.inflight:
                await ws.send(json.dumps({"type": "push", "changes": [e[0] for e in self.inflight.values()]}))
            last_send = 0.0
            last_rx = time.monotonic()
            while True:
                if (self.stop or edits_left_fn() <= 0) and not self.inflight:
                    return
                now = time.monotonic()
                if getattr(self, "_resend_due", False) and self.inflight and now - last_send > 0.2:
                    self._resend_due = False
                    await ws.send(json.dumps({"type": "push", "changes": [e[0] for e in self.inflight.values()]}))
                    last_send = now
                if not self.stop and edits_left_fn() > 0 and now - last_send >= edit_interval:
                    batch = []
                    for note_id in self.note_ids:
                        if note_id not in self.inflight and edits_left_fn() > len(batch):
                            entry = self._next_change(note_id)
                            self.inflight[note_id] = entry
                            batch.append(entry[0])
                    if batch:
                        await ws.send(json.dumps({"type": "push", "changes": batch}))
                        last_send = now
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.05)
                    last_rx = time.monotonic()
                except asyncio.TimeoutError:
                    if self.inflight and time.monotonic() - last_rx > REQUEST_TIMEOUT:
                        raise ConnectionError("request timeout: dead connection")
                    continue
                m = json.loads(raw)
                if m["type"] in ("ack", "reject"):
                    self._on_result(m)
                elif m["type"] == "error":
                    code = m.get("code")
                    self.errors[code] = self.errors.get(code, 0) + 1
                    self._resend_due = True

    async def run(self, edits, deadline, edit_interval=0.0):
        """Pushes `edits` changes, reconnecting (bounded by `deadline`, monotonic) whenever the
        connection drops; returns when all are acknowledged or at the deadline."""
        budget = [edits]

        def left():
            return budget[0] - (self.counter)

        while time.monotonic() < deadline:
            if left() <= 0 and not self.inflight:
                return True
            try:
                self.stop = left() <= 0
                await asyncio.wait_for(self._session(left, edit_interval), max(0.1, deadline - time.monotonic()))
                if left() <= 0 and not self.inflight:
                    return True
            except (OSError, websockets.WebSocketException, ConnectionError, asyncio.TimeoutError,
                    json.JSONDecodeError):
                await asyncio.sleep(0.1 + rng.random() * 0.2)
            self.stop = left() <= 0
        return left() <= 0 and not self.inflight


# ---------------------------------------------------------------------------------------------
# noted command-line homes


def noted(home, *args, timeout=60, check=True, input_text=None):
    cmd = [NOTED_BIN, "--home", home] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input_text)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p


def cli_login(home, server, username):
    os.makedirs(home, exist_ok=True)
    noted(home, "--server", server.url, "login", "--username", username, "--password-stdin",
          input_text=PASSWORD + "\n")


def cli_notes(home):
    p = noted(home, "list", "--offline", "--json")
    notes = json.loads(p.stdout)
    result = {}
    for n in notes if isinstance(notes, list) else notes.get("notes", []):
        shown = json.loads(noted(home, "show", n["id"], "--offline", "--json").stdout)
        result[n["id"]] = shown
    return result


def cli_sync(home, deadline_s=60):
    """`noted sync` until it exits 0 (fully synced), bounded."""
    deadline = time.monotonic() + deadline_s
    for _ in range(60):
        p = noted(home, "sync", "--timeout", "10", check=False, timeout=30)
        if p.returncode == 0:
            return True
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return False


# ---------------------------------------------------------------------------------------------
# The checker


class Check:
    def __init__(self, scenario):
        self.scenario = scenario
        self.problems = []
        self.facts = {}

    def fail(self, text):
        self.problems.append(text)


def check_user(check, base, token, clients=(), homes=()):
    """acked ⊆ server, no marker twice, every client equals the server."""
    records = server_records(base, token)
    texts = []
    for r in records.values():
        texts.append(r["fields"].get("title", ""))
        texts.append(r["fields"].get("body", ""))
    found = marker_re().findall("\n".join(texts))
    counts = {}
    for m in found:
        counts[m] = counts.get(m, 0) + 1
    twice = [m for m, c in counts.items() if c > 1]
    if twice:
        check.fail(f"markers twice on the server: {twice[:5]} ({len(twice)})")
    acked = set()
    for c in clients:
        acked |= c.acked
        for note_id in c.note_ids:
            if c.rev[note_id] == 0 and note_id not in c.inflight:
                continue
            r = records.get(note_id)
            if r is None:
                if c.rev[note_id] > 0:
                    check.fail(f"{c.name}: acked note {note_id} missing on the server")
                continue
            if r["rev"] != c.rev[note_id] or r["fields"]["body"] != c.bodies[note_id]:
                check.fail(f"{c.name}: note {note_id[:8]} differs: client rev {c.rev[note_id]} "
                           f"server rev {r['rev']}")
            if note_id in c.inflight:
                check.fail(f"{c.name}: change still unacknowledged for {note_id[:8]}")
    for home in homes:
        local = cli_notes(home)
        for note_id, r in records.items():
            shown = local.get(note_id)
            if shown is None:
                check.fail(f"{os.path.basename(home)}: lacks {note_id[:8]}")
                continue
            body = shown.get("body", shown.get("fields", {}).get("body"))
            title = shown.get("title", shown.get("fields", {}).get("title"))
            if body != r["fields"]["body"] or title != r["fields"]["title"]:
                check.fail(f"{os.path.basename(home)}: {note_id[:8]} differs from the server")
            if shown.get("pending"):
                check.fail(f"{os.path.basename(home)}: {note_id[:8]} still pending")
        extra = set(local) - set(records)
        if extra:
            check.fail(f"{os.path.basename(home)}: notes the server lacks: {[e[:8] for e in extra]}")
    lost = acked - set(counts)
    if lost:
        check.fail(f"acked markers lost: {sorted(lost)[:5]} ({len(lost)})")
    check.facts["acked"] = len(acked)
    check.facts["on_server"] = len(counts)
    return records, counts


def cli_markers(home):
    found = set()
    for shown in cli_notes(home).values():
        found |= set(marker_re().findall(f"{shown.get('title', '')}\n{shown.get('body', '')}"))
    return found


# ---------------------------------------------------------------------------------------------
# Scenarios


def sweep_values():
    raw = os.environ.get("NOTED_FAULTS_SWEEP", "")
    if raw and "," in raw:
        return [int(x) for x in raw.split(",")]
    count = int(raw) if raw else 3
    # Startup and sign-in take a few fsyncs; beyond them each commit of the storm takes one.
    base = [12, 25, 40, 60, 90, 130, 180, 240, 310, 400]
    return base[:count] if count <= len(base) else base + [400 + 37 * i for i in range(1, count - len(base) + 1)]


async def storm_until(server, clients, edits, seconds, fault, edit_interval=0.0):
    """Runs the clients' push storm; `fault` (a coroutine function) runs alongside."""
    deadline = time.monotonic() + seconds
    tasks = [asyncio.create_task(c.run(edits, deadline, edit_interval)) for c in clients]
    fault_result = await fault()
    done = await asyncio.gather(*tasks)
    return fault_result, all(done)


async def scenario_fsync_kill():
    check = Check("fsync-kill (SQLite)")
    if shutil.which("strace") is None:
        return skip(check, "strace not installed")
    data = os.path.join(TMP, "fsync-data")
    server = Server("fsync", ["--data", data])
    if not server.start():
        raise RuntimeError("server did not start")
    token = signin(server.url, "fsync")
    probe = subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync", "-e", "inject=fsync:signal=SIGKILL:when=60000",
                            "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        server.kill()
        return skip(check, f"strace cannot trace here: {probe.stderr.strip()[:200]}")
    server.kill()
    clients = []
    outcomes = []
    for n in sweep_values():
        round_clients = [Client(f"f{n}a", server, token), Client(f"f{n}b", server, token)]
        round_edits = max(40, n)  # two clients: about 2n commits, so the Nth fsync is reached
        clients += round_clients
        started = server.start(fsync_kill_at=n)
        if not started:
            outcomes.append(f"N={n}:startup")
            server.start()
        else:
            async def fault():
                for _ in range(400):  # up to 40 s for the Nth fsync
                    if not server.alive():
                        await asyncio.get_running_loop().run_in_executor(None, server.wait_port_free)
                        await asyncio.sleep(rng.random() * 0.5)
                        await asyncio.get_running_loop().run_in_executor(None, server.start)
                        return "killed"
                    if all(c.counter >= round_edits and not c.inflight for c in round_clients):
                        return "not reached"
                    await asyncio.sleep(0.1)
                return "not reached"
            result, ok = await storm_until(server, round_clients, round_edits, 90, fault)
            outcomes.append(f"N={n}:{result}")
            if not ok:
                check.fail(f"N={n}: clients did not finish within 90 s after the restart")
        # After each round: restart normally (a clean process, not under strace) and check.
        server.kill()
        server.start()
        check_user(check, server.url, token, clients)
        server.kill()
    server.start()
    home = os.path.join(TMP, "fsync-home")
    cli_login(home, server, "fsync")
    if not cli_sync(home):
        check.fail("noted sync did not finish")
    check_user(check, server.url, token, clients, [home])
    server.kill()
    check.facts["rounds"] = " ".join(outcomes)
    check.facts["killed"] = sum(1 for o in outcomes if o.endswith("killed"))
    if check.facts["killed"] == 0:
        check.fail("no round was killed mid-storm: the sweep tested nothing")
    return check


def skip(check, reason):
    # One line: the reason goes into the summary table.
    reason = " ".join(reason.split())
    log(f"NOTICE: {check.scenario} skipped: {reason}")
    check.facts["skipped"] = reason
    return check


async def scenario_stop_cont():
    check = Check("sigstop-20s, kill noted, clients first")
    stop_seconds = float(os.environ.get("NOTED_FAULTS_STOP_SECONDS", "20"))
    server = Server("stop", ["--data", os.path.join(TMP, "stop-data")])
    if not server.start():
        raise RuntimeError("server did not start")
    token = signin(server.url, "stop")
    h1, h2 = os.path.join(TMP, "stop-h1"), os.path.join(TMP, "stop-h2")
    cli_login(h1, server, "stop")
    cli_login(h2, server, "stop")
    clients = [Client("sa", server, token), Client("sb", server, token)]
    loop = asyncio.get_running_loop()
    written = set()

    async def fault():
        await asyncio.sleep(1.5)
        server.stop_signal(signal.SIGSTOP)
        # A noted client writes locally, then waits for the stopped server's ack: SIGKILL it there.
        p = subprocess.Popen([NOTED_BIN, "--home", h1, "new", "--title", "(hone.1)", "--body", "(hone.2)"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        PROCS.append(p)
        await asyncio.sleep(3)
        if p.poll() is not None:
            check.fail(f"noted new exited ({p.returncode}) while the server was stopped: not killed before its ack")
        kill_proc(p)
        local = await loop.run_in_executor(None, cli_markers, h1)
        if not {"(hone.1)", "(hone.2)"} <= local:
            check.fail("the killed noted client's local write is not in its database")
        written.update({"(hone.1)", "(hone.2)"})
        await asyncio.sleep(max(0.0, stop_seconds - 3))
        server.stop_signal(signal.SIGCONT)
        await asyncio.sleep(2)
        # Restart in another order: server down, clients first (offline writes, a failing sync).
        await loop.run_in_executor(None, server.kill)
        await loop.run_in_executor(None, lambda: noted(h2, "new", "--offline", "--title", "(htwo.1)",
                                                        "--body", "(htwo.2)"))
        written.update({"(htwo.1)", "(htwo.2)"})
        r = await loop.run_in_executor(None, lambda: noted(h1, "sync", "--timeout", "2", check=False))
        if r.returncode == 0:
            check.fail("noted sync exited 0 with the server down")
        await asyncio.sleep(1)
        await loop.run_in_executor(None, server.start)
        return "stopped+killed"

    result, ok = await storm_until(server, clients, 120, 120, fault, edit_interval=0.3)
    if not ok:
        check.fail("clients did not finish within 120 s")
    for home in (h1, h2, h1):
        if not cli_sync(home):
            check.fail(f"noted sync of {os.path.basename(home)} did not finish")
    _, counts = check_user(check, server.url, token, clients, [h1, h2])
    missing = written - set(counts)
    if missing:
        check.fail(f"noted's local writes missing on the server: {sorted(missing)}")
    check.facts["rounds"] = f"{result}; reconnects {[c.connects for c in clients]}"
    server.kill()
    return check


async def scenario_disk_full():
    check = Check("disk full (tmpfs), then space back")
    mnt = os.path.join(TMP, "full-mnt")
    os.makedirs(mnt)
    size = os.environ.get("NOTED_FAULTS_TMPFS_SIZE", "24m")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode != 0:
        return skip(check, f"cannot mount a tmpfs: {r.stderr.strip()[:200]}")
    try:
        server = Server("full", ["--data", os.path.join(mnt, "data")])
        if not server.start():
            raise RuntimeError("server did not start")
        token = signin(server.url, "full")
        clients = [Client("da", server, token), Client("db", server, token)]
        loop = asyncio.get_running_loop()
        filler = os.path.join(mnt, "filler")

        def fill():
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                for chunk in (1 << 20, 4096, 512):
                    for _ in range(100000):
                        try:
                            os.write(fd, b"\0" * chunk)
                        except OSError:
                            break
            finally:
                os.close(fd)

        async def fault():
            await asyncio.sleep(1.5)
            await loop.run_in_executor(None, fill)
            before = sum(len(c.acked) for c in clients)
            limited = sum(c.rejects.get("rate_limited", 0) for c in clients)
            await asyncio.sleep(4)
            retryable = sum(c.rejects.get("rate_limited", 0) for c in clients) - limited
            check.facts["retryable_rejects_while_full"] = retryable
            if retryable == 0:
                check.fail("no retryable reject (rate_limited) while the disk was full")
            after = sum(len(c.acked) for c in clients)
            check.facts["acked_while_full"] = after - before
            if not server.alive():
                check.fail("the server died on a full disk")
                await loop.run_in_executor(None, server.start)
            status, _ = await loop.run_in_executor(
                None, lambda: http_json("GET", server.url + "/v1/changes?since=0&limit=10", token=token))
            check.facts["read_while_full"] = status
            if status != 200:
                check.fail(f"read while the disk was full: HTTP {status}")
            os.remove(filler)
            return "filled+freed"

        result, ok = await storm_until(server, clients, 150, 120, fault, edit_interval=0.2)
        if not ok:
            check.fail("pending edits did not go through within 120 s after space came back")
        check_user(check, server.url, token, clients)
        codes = {}
        for c in clients:
            for k, v in list(c.rejects.items()) + list(c.errors.items()):
                codes[k] = codes.get(k, 0) + v
        check.facts["rounds"] = f"{result}; codes while full {codes}"
        server.kill()
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)
    return check


def pg_as(*cmd, **kw):
    if os.getuid() == 0:
        cmd = ("runuser", "-u", "postgres", "--") + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


async def scenario_postgres():
    check = Check("PostgreSQL: kill server, restart PG")
    pgbin = os.environ.get("NOTED_FAULTS_POSTGRES_BIN", "")
    if not pgbin:
        for d in sorted(glob.glob("/usr/lib/postgresql/*/bin")):
            if os.access(os.path.join(d, "initdb"), os.X_OK):
                pgbin = d
    if not pgbin:
        return skip(check, "PostgreSQL (initdb) not found")
    pgdir = tempfile.mkdtemp(prefix="noted-faults-pg.")
    os.chmod(pgdir, 0o755)
    if os.getuid() == 0:
        shutil.chown(pgdir, "postgres")
    port = free_port()
    data = os.path.join(pgdir, "data")
    loop = asyncio.get_running_loop()
    try:
        r = pg_as(f"{pgbin}/initdb", "-D", data, "-U", "noted", "-A", "trust", "--no-sync")
        if r.returncode != 0:
            return skip(check, f"initdb failed: {r.stderr.strip()[:200]}")
        opts = f"-p {port} -k {pgdir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        r = pg_as(f"{pgbin}/pg_ctl", "-D", data, "-l", os.path.join(pgdir, "log"), "-w", "-o", opts, "start")
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start: {r.stderr.strip()[:200]}")
        r = pg_as(f"{pgbin}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "noted", "noted_faults")
        if r.returncode != 0:
            raise RuntimeError(f"createdb: {r.stderr.strip()[:200]}")
        server = Server("pg", ["--database", f"postgres://noted@127.0.0.1:{port}/noted_faults"])
        if not server.start():
            raise RuntimeError("server did not start on PostgreSQL")
        token = signin(server.url, "pgfault")
        clients = [Client("pa", server, token), Client("pb", server, token)]

        async def fault():
            await asyncio.sleep(1.5)
            server.kill()  # mid push storm: SIGKILL, transactions in flight
            await asyncio.sleep(rng.random() * 0.5)
            await loop.run_in_executor(None, server.start)
            await asyncio.sleep(1.5)
            r = await loop.run_in_executor(None, lambda: pg_as(f"{pgbin}/pg_ctl", "-D", data, "-m", "fast", "-w",
                                                               "-l", os.path.join(pgdir, "log"), "-o", opts,
                                                               "restart"))
            if r.returncode != 0:
                check.fail(f"pg_ctl restart: {r.stderr.strip()[:200]}")
            return "server killed + PG restarted"

        result, ok = await storm_until(server, clients, 150, 120, fault, edit_interval=0.1)
        if not ok:
            check.fail("clients did not finish within 120 s (did the server reconnect to PostgreSQL?)")
        if not server.alive():
            check.fail("the server exited after the PostgreSQL restart")
            server.start()
        check_user(check, server.url, token, clients)
        check.facts["rounds"] = f"{result}; reconnects {[c.connects for c in clients]}"
        server.kill()
    finally:
        pg_as(f"{pgbin}/pg_ctl", "-D", data, "-m", "immediate", "stop")
        shutil.rmtree(pgdir, ignore_errors=True)
    return check


def run(*cmd):
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)


async def scenario_partition():
    check = Check("network partition (netns+iptables)")
    if shutil.which("ip") is None or shutil.which("iptables") is None:
        return skip(check, "ip or iptables not installed")
    tag = os.getpid() % 100000
    ns, a, b = f"nf{tag}", f"nfa{tag}", f"nfb{tag}"
    octet = 1 + tag % 250
    host_ip, server_ip = f"10.201.{octet}.1", f"10.201.{octet}.2"
    r = run("ip", "netns", "add", ns)
    if r.returncode != 0:
        return skip(check, f"cannot create a network namespace: {r.stderr.strip()[:200]}")
    loop = asyncio.get_running_loop()
    try:
        for cmd in (["ip", "link", "add", a, "type", "veth", "peer", "name", b],
                    ["ip", "link", "set", b, "netns", ns],
                    ["ip", "addr", "add", f"{host_ip}/24", "dev", a], ["ip", "link", "set", a, "up"],
                    ["ip", "netns", "exec", ns, "ip", "addr", "add", f"{server_ip}/24", "dev", b],
                    ["ip", "netns", "exec", ns, "ip", "link", "set", b, "up"],
                    ["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"]):
            r = run(*cmd)
            if r.returncode != 0:
                return skip(check, f"{' '.join(cmd)}: {r.stderr.strip()[:200]}")
        ipt = ["ip", "netns", "exec", ns, "iptables"]
        r = run(*ipt, "-L", "INPUT")
        if r.returncode != 0:
            return skip(check, f"iptables not usable in a namespace: {r.stderr.strip()[:200]}")
        server = Server("partition", ["--data", os.path.join(TMP, "partition-data")], host=server_ip,
                        netns_prefix=["ip", "netns", "exec", ns])
        if not server.start():
            raise RuntimeError("server did not start in the namespace")
        token = signin(server.url, "partition")
        clients = [Client("na", server, token), Client("nb", server, token)]
        drop = ["-p", "tcp", "--dport", str(server.port), "-j", "DROP"]
        reset = ["-p", "tcp", "--dport", str(server.port), "-j", "REJECT", "--reject-with", "tcp-reset"]

        async def fault():
            steps = []
            for rule, seconds in ((drop, 8), (reset, 3), (drop, 3)):
                await asyncio.sleep(1.5)
                before = sum(len(c.acked) for c in clients)
                r = await loop.run_in_executor(None, lambda: run(*ipt, "-I", "INPUT", *rule))
                if r.returncode != 0:
                    check.fail(f"iptables: {r.stderr.strip()[:200]}")
                await asyncio.sleep(seconds)
                during = sum(len(c.acked) for c in clients) - before
                await loop.run_in_executor(None, lambda: run(*ipt, "-D", "INPUT", *rule))
                steps.append(f"{rule[5]} {seconds}s: {during} acks")
            return "; ".join(steps)

        result, ok = await storm_until(server, clients, 200, 150, fault, edit_interval=0.2)
        if not ok:
            check.fail("clients did not finish within 150 s after the partitions healed")
        check_user(check, server.url, token, clients)
        check.facts["rounds"] = f"{result}; connections {[c.connects for c in clients]}"
        server.kill()
    finally:
        run("ip", "link", "del", a)
        run("ip", "netns", "del", ns)
    return check


SCENARIOS = {
    "fsync": scenario_fsync_kill,
    "stop": scenario_stop_cont,
    "full": scenario_disk_full,
    "partition": scenario_partition,
    "postgres": scenario_postgres,
}


def main():
    if not SERVER_BIN or not NOTED_BIN:
        print("faults: set NOTED_SERVER_BIN and NOTED_BIN", file=sys.stderr)
        return 2
    only = [s for s in os.environ.get("NOTED_FAULTS_ONLY", "").split(",") if s]
    log(f"seed {SEED} (NOTED_FAULTS_SEED), temporary files in {TMP}")
    results = []
    try:
        for name, fn in SCENARIOS.items():
            if only and name not in only:
                continue
            started = time.monotonic()
            log(f"scenario {name} ...")
            try:
                check = asyncio.run(fn())
            except Exception as error:  # a crash of the harness is a failure, never a pass
                check = Check(name)
                check.fail(f"harness error: {type(error).__name__}: {error}")
            check.facts["seconds"] = round(time.monotonic() - started, 1)
            results.append(check)
            status = "SKIP" if "skipped" in check.facts and not check.problems else ("FAIL" if check.problems else "PASS")
            log(f"{status} {check.scenario} {json.dumps(check.facts)}")
            for p in check.problems:
                log(f"  problem: {p}")
    finally:
        cleanup()
    print()
    print(f"{'scenario':40} {'result':6} {'acked':>6} {'server':>6} {'s':>6}  notes")
    failed = False
    for c in results:
        status = "SKIP" if "skipped" in c.facts and not c.problems else ("FAIL" if c.problems else "PASS")
        failed |= status == "FAIL"
        extra = c.facts.get("skipped") or c.facts.get("rounds") or c.facts.get("notes", "")
        print(f"{c.scenario:40} {status:6} {c.facts.get('acked', '-'):>6} {c.facts.get('on_server', '-'):>6} "
              f"{c.facts.get('seconds', '-'):>6}  {extra}")
    if failed:
        print(f"faults: FAILED (seed {SEED}; logs in {TMP})")
        return 1
    shutil.rmtree(TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
