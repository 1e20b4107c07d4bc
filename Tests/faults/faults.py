#!/usr/bin/env python3
"""Real-process fault tests of noted-server and noted (issue 7); run by scripts/faults.

Real `noted-server` processes (SQLite in a temporary directory, or PostgreSQL) on loopback,
driven by protocol-speaking clients written here (they record every ack they see) and by real
`noted` command-line homes. Faults: SIGKILL at the Nth fsync/fdatasync (strace fault
injection), SIGSTOP/SIGCONT, SIGKILL of a `noted` client mid-sync, a full disk (tmpfs), a
network partition (network namespace + iptables), PostgreSQL restarts, SIGKILL of a PostgreSQL
process at the Nth WAL flush (strace attached to the running cluster).

The checker after every scenario, per user:
  - every marker a client saw acknowledged is in the server's records (no lost acked write);
  - no marker appears twice anywhere on the server (exactly once);
  - every client's view equals the server (convergence).

Every loop is bounded by a count and a deadline; every process is killed at the end.
Environment: NOTED_SERVER_BIN, NOTED_BIN, NOTED_FAULTS_SWEEP (fsync indices, e.g. "3,8,20"
or a count), NOTED_FAULTS_ONLY (comma-separated scenario names), NOTED_FAULTS_SEED,
NOTED_FAULTS_POSTGRES_BIN (the PostgreSQL bin directory; found under /usr/lib/postgresql),
NOTED_FAULTS_PG_SWEEP (postgres-fsync's rounds, see pg_sweep), NOTED_FAULTS_PG_INTERVAL (seconds
between a postgres-fsync client's pushes, 0.2), NOTED_FAULTS_PG_OPTS (extra postgres options).
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
        self.statuses = {}  # ack status (applied, merged, duplicate) -> count
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
            self.statuses[m.get("status")] = self.statuses.get(m.get("status"), 0) + 1
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


class PgCluster:
    """A throwaway PostgreSQL cluster (initdb/pg_ctl like scripts/test) on a free port in a
    temporary directory, with one database for noted-server. `skip_reason` is set when there is
    no PostgreSQL here; `stop()` stops it (immediate) and removes its directory."""

    def __init__(self, dbname):
        self.dbname = dbname
        self.pgbin = os.environ.get("NOTED_FAULTS_POSTGRES_BIN", "")
        if not self.pgbin:
            for d in sorted(glob.glob("/usr/lib/postgresql/*/bin")):
                if os.access(os.path.join(d, "initdb"), os.X_OK):
                    self.pgbin = d
        self.skip_reason = None if self.pgbin else "PostgreSQL (initdb) not found"
        self.dir = None
        self.port = free_port()
        self.opts = f"-c listen_addresses=127.0.0.1 -c max_connections=200 -p {self.port}"
        self.opts += " " + os.environ.get("NOTED_FAULTS_PG_OPTS", "")  # e.g. "-c log_statement=all"
        self.url = f"postgres://noted@127.0.0.1:{self.port}/{dbname}"

    def start(self):
        """initdb, pg_ctl start, createdb. Returns False (with skip_reason) when initdb fails."""
        self.dir = tempfile.mkdtemp(prefix="noted-faults-pg.")
        os.chmod(self.dir, 0o755)
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres")
        self.data = os.path.join(self.dir, "data")
        self.logpath = os.path.join(self.dir, "log")
        self.opts += f" -k {self.dir}"
        r = pg_as(f"{self.pgbin}/initdb", "-D", self.data, "-U", "noted", "-A", "trust", "--no-sync")
        if r.returncode != 0:
            self.skip_reason = f"initdb failed: {r.stderr.strip()[:200]}"
            return False
        r = self.pg_ctl("-w", "start")
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start: {r.stderr.strip()[:200]}")
        r = pg_as(f"{self.pgbin}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "noted", self.dbname)
        if r.returncode != 0:
            raise RuntimeError(f"createdb: {r.stderr.strip()[:200]}")
        return True

    def pg_ctl(self, *args):
        return pg_as(f"{self.pgbin}/pg_ctl", "-D", self.data, "-l", self.logpath, "-o", self.opts, *args)

    def restart(self):
        return self.pg_ctl("-m", "fast", "-w", "restart")

    def psql(self, sql):
        r = subprocess.run([f"{self.pgbin}/psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "noted",
                            "-d", self.dbname, "-Atc", sql], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {r.stderr.strip()[:200]}")
        return r.stdout.strip()

    def ready(self):
        r = subprocess.run([f"{self.pgbin}/pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"],
                           capture_output=True, text=True, timeout=10)
        return r.returncode == 0

    def postmaster_pid(self):
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            return int(f.readline())

    def log_size(self):
        try:
            return os.path.getsize(self.logpath)
        except OSError:
            return 0

    def log_since(self, offset):
        with open(self.logpath, errors="replace") as f:
            f.seek(offset)
            return f.read()

    def stop(self):
        if self.dir is None:
            return
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self.pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


async def scenario_postgres():
    check = Check("PostgreSQL: kill server, restart PG")
    cluster = PgCluster("noted_faults")
    if cluster.skip_reason:
        return skip(check, cluster.skip_reason)
    loop = asyncio.get_running_loop()
    try:
        if not cluster.start():
            return skip(check, cluster.skip_reason)
        server = Server("pg", ["--database", cluster.url])
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
            r = await loop.run_in_executor(None, cluster.restart)
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
        cluster.stop()
    return check


def pg_children(pid):
    """The live child processes of `pid` (from /proc), with their titles."""
    kids = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat, "rb") as f:
                raw = f.read()
            ppid = int(raw[raw.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            child = int(stat.split("/")[2])
            kids[child] = proc_title(child)
    return kids


def proc_title(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def tracer_pid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def pg_role(pid, postmaster, title):
    if pid == postmaster:
        return "postmaster"
    for role in ("walwriter", "checkpointer", "background writer", "startup", "autovacuum", "walsender"):
        if role in title:
            return role
    return "backend" if title.startswith("postgres: ") else (title or "gone")


class TraceUnavailable(RuntimeError):
    """strace may not attach here (no CAP_SYS_PTRACE, Yama's ptrace_scope): a skip, not a failure."""


class WalFlushTracer:
    """strace attached to a running PostgreSQL: the postmaster (-f: every process it forks later,
    backends and the processes of a crash restart, is followed) and each of its existing children
    (the walwriter, checkpointer, the server's pooled backends). Every fsync/fdatasync is held 30 ms
    at its entry (delay_enter); the harness reads strace's output as it comes (the entry is
    written before the delay, the line is finished only when the call returns) and counts the
    flushes of WAL (a file descriptor under pg_wal: strace -y) over all processes. At the
    `kill_at`th it calls `on_flush(pid)` (a SIGKILL of that process, or of noted-server) while
    the call is still held, so the flush never ran when the flushing process is the one killed.
    `signal=SIGKILL:when=N` is no use here: strace counts it per process, and each backend is its
    own process. With calls="write" it counts the writes of WAL (pwrite64, held the same way)
    instead: killed there, the commit record never reaches even the page cache, so the
    transaction is lost and must not have been acknowledged."""

    ENTRY = re.compile(rb"(?:\[pid\s+(\d+)\] )?(fsync|fdatasync|pwrite64|write|pwritev2?)\((\d+)<([^>\n]*)>")

    def __init__(self, name, cluster, kill_at, on_flush, calls="flush", role=None):
        self.role = role  # only a call of this role fires (the first from the Nth on)
        self.calls = "fsync,fdatasync" if calls == "flush" else "pwrite64,write,pwritev,pwritev2"
        self.cluster = cluster
        self.kill_at = kill_at
        self.on_flush = on_flush
        self.logpath = os.path.join(TMP, f"{name}.strace")
        self.proc = None
        self.wal_flushes = 0
        self.other_syncs = 0
        self.by_role = {}
        self.killed = None  # (pid, role, path, offset in the strace output) once fired
        self.attached = set()
        self.text = bytearray()
        self.lock = threading.Lock()

    def start(self, wait=15.0):
        postmaster = self.cluster.postmaster_pid()
        self.postmaster = postmaster
        pids = [postmaster] + sorted(pg_children(postmaster))
        cmd = ["strace", "-f", "-y", "-s", "0", "-e", f"trace={self.calls}",
               "-e", f"inject={self.calls}:delay_enter=30000"]
        for pid in pids:
            cmd += ["-p", str(pid)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, start_new_session=True)
        PROCS.append(self.proc)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with self.lock:
                attached, said = set(self.attached), bytes(self.text[-600:])
            if b"Operation not permitted" in said:
                self.stop()
                raise TraceUnavailable(f"strace cannot attach to PostgreSQL: {said.decode(errors='replace').strip()[-200:]}")
            if self.proc.poll() is not None:
                raise RuntimeError(f"strace exited ({self.proc.returncode}): {said[-300:]!r}")
            if set(pids) <= attached:
                break
            time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"strace attached {sorted(attached)} of {pids} within {wait}s")
        # A child forked between the listing and the postmaster's attach would be untraced:
        # every process of the cluster must have this strace as its tracer.
        untraced = [p for p in [postmaster] + list(pg_children(postmaster))
                    if tracer_pid(p) not in (self.proc.pid, None)]
        if untraced:
            raise RuntimeError(f"PostgreSQL processes not traced: {untraced}")
        return pids

    def _read(self):
        fd = self.proc.stderr.fileno()
        buf = b""
        with open(self.logpath, "ab") as out:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                out.write(chunk)
                out.flush()
                with self.lock:
                    base = len(self.text) - len(buf)
                    self.text += chunk
                buf += chunk
                for m in re.finditer(rb"Process (\d+) attached", chunk):
                    with self.lock:
                        self.attached.add(int(m.group(1)))
                consumed = 0
                for m in self.ENTRY.finditer(buf):
                    consumed = m.end()
                    pid = int(m.group(1)) if m.group(1) else self.postmaster
                    path = m.group(4).decode(errors="replace")
                    if "/pg_wal" not in path:
                        self.other_syncs += 1
                        continue
                    self.wal_flushes += 1
                    if self.role is None:
                        fire = self.wal_flushes == self.kill_at and self.killed is None
                        if fire:
                            self.on_flush(pid)  # first: the call is held only 30 ms
                        role = pg_role(pid, self.postmaster, proc_title(pid))
                    else:
                        role = pg_role(pid, self.postmaster, proc_title(pid))
                        fire = self.wal_flushes >= self.kill_at and self.killed is None and role == self.role
                        if fire:
                            self.on_flush(pid)
                    self.by_role[role] = self.by_role.get(role, 0) + 1
                    if fire:
                        self.killed = (pid, role, path, base + consumed)
                keep = buf.rfind(b"\n") + 1
                buf = buf[max(keep, consumed):]

    def killed_at_entry(self):
        """Whether the killed process died with its flush still held at entry (True), after it
        returned (False), or unknown (None), from strace's output after the entry."""
        if self.killed is None:
            return None
        pid, offset = self.killed[0], self.killed[3]
        with self.lock:
            rest = bytes(self.text[offset:])
        line = rest.split(b"\n", 1)[0]
        if b"<unfinished" not in line:
            # Finished on its own line: "= ?" when it never returned (killed in the call).
            return None if b"=" not in line else line.rstrip().endswith(b"= ?")
        m = re.search(rb"\[pid\s+%d\] (<\.\.\. \w+ resumed>[^\n]*|\+\+\+ killed by SIGKILL)" % pid, rest)
        if m is None:
            return None
        return m.group(1).startswith(b"+++") or m.group(1).rstrip().endswith(b"= ?")

    def stop(self):
        """Detaches (SIGINT: strace lets its tracees go), then kills strace if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.kill(self.proc.pid, signal.SIGINT)
            self.proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            kill_proc(self.proc)


def pg_sweep():
    """The rounds of postgres-fsync: (who is killed, at which call, N). NOTED_FAULTS_PG_SWEEP is a
    list ("12,40,s30,w25"): "N" SIGKILLs the PostgreSQL process making the Nth WAL flush (a
    backend committing, the walwriter, the checkpointer), "sN" SIGKILLs noted-server instead at
    the Nth flush (the commit goes on, its acks are never sent), "wN" SIGKILLs the process making
    the Nth WAL write (the commit record lost), "vN" the walwriter at its first flush from the Nth
    on. Or a count of flush rounds (default 3): each N drawn from the seed in its own equal band
    of the storm's first PG_STORM_FLUSHES flushes (early, middle, late), plus one "s" and one "w"
    round drawn from the middle band and one "v" round from the first third."""
    raw = os.environ.get("NOTED_FAULTS_PG_SWEEP", "")
    kinds = {"s": ("server", "flush"), "w": ("postgres", "write"), "v": ("walwriter", "flush")}
    if raw and not raw.isdigit():
        return [kinds.get(x[0], ("postgres", "flush")) + (int(x.lstrip("swv")),) for x in raw.split(",") if x]
    count = int(raw) if raw else 3
    draw = random.Random(SEED * 7919 + 18)  # its own generator: the same indices for a seed
    lo, hi = 3, PG_STORM_FLUSHES
    width = (hi - lo) / max(1, count)
    rounds = [("postgres", "flush", lo + int(width * i + draw.random() * width)) for i in range(count)]
    for kind in ("s", "w"):
        rounds.append(kinds[kind] + (lo + int((hi - lo) * (0.35 + draw.random() * 0.3)),))
    rounds.append(kinds["v"] + (lo + int((hi - lo) * draw.random() / 3),))
    return rounds


PG_STORM_FLUSHES = 70  # fewer than one round's storm flushes WAL here (90-140 measured; N is drawn below it)
PG_EDITS = 80  # edits per client per round
PG_EDIT_INTERVAL = float(os.environ.get("NOTED_FAULTS_PG_INTERVAL", "0.2"))  # between a client's pushes


async def scenario_postgres_fsync():
    check = Check("PostgreSQL: SIGKILL at Nth WAL flush")
    if shutil.which("strace") is None:
        return skip(check, "strace not installed")
    cluster = PgCluster("noted_faults")
    if cluster.skip_reason:
        return skip(check, cluster.skip_reason)
    loop = asyncio.get_running_loop()
    server = None
    try:
        if not cluster.start():
            return skip(check, cluster.skip_reason)
        settings = dict(zip(("wal_sync_method", "fsync", "synchronous_commit"),
                            cluster.psql("SHOW wal_sync_method; SHOW fsync; SHOW synchronous_commit").split("\n")))
        check.facts["settings"] = settings
        if settings.get("wal_sync_method") not in ("fdatasync", "fsync") or settings.get("fsync") != "on":
            return skip(check, f"WAL not flushed by fsync/fdatasync here: {settings}")
        server = Server("pgfsync", ["--database", cluster.url])
        if not server.start():
            raise RuntimeError("server did not start on PostgreSQL")
        tokens = {u: signin(server.url, u) for u in ("pgwa", "pgwb", "pgwc")}
        clients = {u: [] for u in tokens}
        outcomes, killed_roles = [], {}
        for i, (victim, calls, n) in enumerate(pg_sweep()):
            label = {"server": "s", "postgres": "", "walwriter": "v"}[victim] + ("w" if calls == "write" else "")
            round_edits = max(PG_EDITS, n + 20)  # six clients: more than n flushes (about 1.25 per edit)
            # Three users, two clients each, each push holding a few changes: one user's pushes
            # take turns, and the group commit puts several users' changes in one transaction.
            round_clients = []
            for u, tag in (("pgwa", "ab"), ("pgwb", "cd"), ("pgwc", "ef")):
                for c in tag:
                    round_clients.append(Client(f"w{i}{c}", server, tokens[u]))
                    clients[u].append(round_clients[-1])
            log_at = cluster.log_size()
            fired = threading.Event()

            def on_flush(pid, victim=victim):
                try:
                    if victim in ("postgres", "walwriter"):
                        os.kill(pid, signal.SIGKILL)
                    else:
                        os.killpg(server.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                fired.set()

            tracer = WalFlushTracer(f"pgfsync-{i}", cluster, n, on_flush, calls,
                                    role="walwriter" if victim == "walwriter" else None)
            try:
                await loop.run_in_executor(None, tracer.start)
            except TraceUnavailable as error:
                return skip(check, str(error))

            async def watch_progress(i=i):
                # Diagnostics: when no change is acknowledged for 8 s after the kill, what the
                # server's PostgreSQL sessions are doing (pg_stat_activity) goes to the log.
                last, since = -1, time.monotonic()
                while not all(c.counter >= round_edits and not c.inflight for c in round_clients):
                    acks = sum(len(c.acked) for c in round_clients)
                    if acks != last:
                        last, since = acks, time.monotonic()
                    elif time.monotonic() - since > 8:
                        try:
                            activity = await loop.run_in_executor(None, lambda: cluster.psql(
                                "SELECT pid, backend_start, xact_start, state, wait_event_type, wait_event, "
                                "left(query, 60) FROM pg_stat_activity WHERE datname = current_database() "
                                "AND pid <> pg_backend_pid()"))
                        except RuntimeError as error:
                            activity = str(error)
                        log(f"round {i}: no ack for 8 s after the kill; pg_stat_activity:\n{activity}")
                        return
                    await asyncio.sleep(0.2)

            async def fault(tracer=tracer, victim=victim):
                for _ in range(600):  # up to 60 s for the Nth flush
                    if fired.is_set():
                        await asyncio.sleep(0.5)  # the crash restart's processes start traced
                        await loop.run_in_executor(None, tracer.stop)
                        if victim == "server":
                            await loop.run_in_executor(None, server.kill)  # waits for its port
                            await asyncio.sleep(rng.random() * 0.5)
                            await loop.run_in_executor(None, server.start)
                        await watch_progress()
                        return "killed"
                    if all(c.counter >= round_edits and not c.inflight for c in round_clients):
                        break
                    await asyncio.sleep(0.1)
                await loop.run_in_executor(None, tracer.stop)
                return "not reached"

            round_started = time.monotonic()
            result, ok = await storm_until(server, round_clients, round_edits, 120 + round_edits // 2, fault, edit_interval=PG_EDIT_INTERVAL)
            tracer.stop()
            what = f"{label}N={n}:{result}"
            round_seconds = time.monotonic() - round_started
            if tracer.killed:
                pid, role, path, _ = tracer.killed
                held = tracer.killed_at_entry()
                if victim != "server":
                    what += f"({role}{', held at entry' if held else ', after return' if held is False else ''})"
                else:
                    what += f"(noted-server, while a {role} flushed)"
                key = role if victim != "server" else "noted-server"
                killed_roles[key] = killed_roles.get(key, 0) + 1
                log(f"round {i}: WAL {calls} {n} by {role} pid {pid} ({os.path.basename(path)}): SIGKILL "
                    + (f"it; held at entry: {held}" if victim != "server" else "noted-server"))
                if victim != "server" and held is False:
                    check.fail(f"{label}N={n}: the {role} was killed only after its {calls} returned")
            statuses = {}
            for c in round_clients:
                for k, v in c.statuses.items():
                    statuses[k] = statuses.get(k, 0) + v
            what += f" dup={statuses.get('duplicate', 0)} {round_seconds:.0f}s {calls}{'es' if calls == 'flush' else 's'}={tracer.wal_flushes} {tracer.by_role}"
            outcomes.append(what)
            if tracer.by_role.get("postmaster"):
                check.fail(f"{label}N={n}: the postmaster itself did a WAL {calls} {tracer.by_role['postmaster']} times")
            if not ok:
                check.fail(f"{what}: clients did not finish within {120 + round_edits // 2} s")
            pglog = cluster.log_since(log_at)
            if tracer.killed and victim != "server":
                for needle in (f"(PID {tracer.killed[0]}) was terminated by signal 9",
                               "all server processes terminated; reinitializing",
                               "database system is ready to accept connections"):
                    if needle not in pglog:
                        check.fail(f"{label}N={n}: PostgreSQL's log lacks {needle!r}")
            elif "terminated by signal" in pglog:
                check.fail(f"{label}N={n}: a PostgreSQL process died though PostgreSQL was not killed")
            if not server.alive():
                check.fail(f"{label}N={n}: noted-server exited")
                server.start()
            log(f"round {i} ({what}): ack statuses {statuses}, connections {[c.connects for c in round_clients]}")
            for u, token in tokens.items():
                check_user(check, server.url, token, clients[u])
        acked = on_server = 0
        for u, token in tokens.items():
            check_user(check, server.url, token, clients[u])
            acked += check.facts["acked"]
            on_server += check.facts["on_server"]
        check.facts["acked"], check.facts["on_server"] = acked, on_server
        check.facts["rounds"] = " ".join(re.sub(r" (flushes|writes)=.*", "", o) for o in outcomes)
        check.facts["killed_by_role"] = killed_roles
        check.facts["detail"] = outcomes
        check.facts["killed"] = sum(1 for o in outcomes if ":killed" in o)
        if not any(":killed(" in o and o[0] in "Nwv" for o in outcomes):
            check.fail("no PostgreSQL process was killed at a WAL flush: the sweep tested nothing")
    finally:
        if server is not None:
            server.kill()
        cluster.stop()
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
    "postgres-fsync": scenario_postgres_fsync,
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
