#!/usr/bin/env python3
"""Load generator of scripts/bench-load (run by it; not meant to be run by hand).

Each sub-command runs one measurement against one server and prints one JSON object on
standard output. Every loop is bounded by a count and by a deadline. The generator measures
its own CPU time (user + system) against the wall clock of the measurement, so a result where
the generator itself was saturated can be recognised ("generator_cpu" close to 1.0).

Systems:
  noted   noted-server's WebSocket /v1/sync (docs/protocol.md). "push -> ack": a `push` of one
          change to the `ack` of that change (the server answers after the durable commit).
          "push -> change": the `push` sent by one connection to the `change` broadcast
          received by another connection of the same user.
  yjs     pycrdt-websocket (Yjs sync protocol, in memory unless --store). "push": a y-protocols
          update message of one single-character insert. "ack" (the equivalent round trip):
          the server's broadcast of that update arriving back at the sender (pycrdt-websocket
          sends every applied update to every client of the room, the sender included, after
          applying it to the room's document). "push -> change": the same update arriving at
          another client of the room. With `yjs-server --store sqlite` the rooms also write
          every update to pycrdt's SQLiteYStore, after broadcasting it (so the echo still does
          not wait for the disk).
  relay   a bare WebSocket relay (relay-server: websockets + uvloop, no storage): each message
          goes back to its sender and to the room's other clients; the floor of push -> ack
          with this generator on this machine.
"""
import argparse
import asyncio
import json
import os
import random
import resource
import sys
import time
import urllib.error
import urllib.request
import uuid

import websockets
from websockets.asyncio.client import connect

# ---------------------------------------------------------------------------------------------
# helpers


def now():
    return time.monotonic()


# The ccids of this generator, as NotedClient (`ChangeID`) and the web app (`changeID`) make
# them: a version-8 UUID of random bits drawn once per process and a counter, so that
# consecutive pushes share all but the counter's digits (what permessage-deflate compresses).
# RANDOM_CCIDS switches to a random v4 id per change, as the clients did before (`bytes` shows
# both).
_CCID_PREFIX = os.urandom(10)
_CCID_HEAD = "{0}-{1}-8{2}-{3:x}{4}-".format(
    _CCID_PREFIX.hex()[0:8], _CCID_PREFIX.hex()[8:12], _CCID_PREFIX.hex()[12:15],
    8 | (_CCID_PREFIX[9] & 3), _CCID_PREFIX.hex()[15:18])
_ccid_count = 0
RANDOM_CCIDS = False


def next_ccid():
    global _ccid_count
    if RANDOM_CCIDS:
        return str(uuid.uuid4())
    _ccid_count += 1
    return _CCID_HEAD + "%012x" % _ccid_count


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]


def summary_ms(values):
    return {
        "n": len(values),
        "p50_ms": round(pct(values, 50) * 1000, 3) if values else None,
        "p95_ms": round(pct(values, 95) * 1000, 3) if values else None,
        "p99_ms": round(pct(values, 99) * 1000, 3) if values else None,
        "max_ms": round(max(values) * 1000, 3) if values else None,
    }


def http_json(method, url, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def tree_cpu_seconds(pid):
    """CPU seconds of `pid` and its direct children (PostgreSQL: the postmaster and its backends)."""
    total = proc_cpu_seconds(pid)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        total += proc_cpu_seconds(int(entry))
            except (OSError, ValueError):
                pass
    return total


def delta_insert(length, position, char):
    """A diff-match-patch delta inserting one ASCII character into an ASCII text."""
    parts = []
    if position > 0:
        parts.append(f"={position}")
    parts.append("+" + char)
    if length - position > 0:
        parts.append(f"={length - position}")
    return "\t".join(parts)


# ---------------------------------------------------------------------------------------------
# Noted


class NotedConn:
    """One authenticated /v1/sync connection; pushes one-character inserts into its notes."""

    def __init__(self, base, token, compression=None):
        self.base = base
        self.token = token
        self.compression = compression
        self.ws = None
        self.pending = {}  # ccid -> (future, sent_at)
        self.notes = {}  # id -> [rev, length]
        self.on_change = None
        self.errors = 0
        self.reader = None
        self.welcome = None

    async def open(self):
        url = self.base.replace("http://", "ws://") + "/v1/sync"
        self.ws = await connect(url, compression=self.compression, max_size=None, open_timeout=60,
                                ping_interval=None, close_timeout=2)
        await self.ws.send(json.dumps({"type": "hello", "protocol": 1, "token": self.token,
                                       "device": str(uuid.uuid4()), "client": "bench-load/1"}))
        self.welcome = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
        if self.welcome.get("type") != "welcome":
            raise RuntimeError(f"no welcome: {self.welcome}")
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        try:
            async for message in self.ws:
                t = now()
                if '"type":"change"' in message:
                    if self.on_change:
                        self.on_change(message, t)
                    continue
                m = json.loads(message)
                kind = m.get("type")
                if kind == "ack":
                    entry = self.pending.pop(m.get("ccid"), None)
                    note = self.notes.get(m.get("id"))
                    if note is not None:
                        note[0] = m["rev"]
                    if entry and not entry[0].done():
                        entry[0].set_result((t, m))
                elif kind == "reject":
                    self.errors += 1
                    entry = self.pending.pop(m.get("ccid"), None)
                    if entry and not entry[0].done():
                        entry[0].set_result((t, m))
                elif kind == "error":
                    self.errors += 1
        except websockets.ConnectionClosed:
            pass

    async def push(self, changes):
        futures = []
        for change in changes:
            future = asyncio.get_running_loop().create_future()
            self.pending[change["ccid"]] = (future, now())
            futures.append(future)
        text = json.dumps({"type": "push", "changes": changes}, separators=(",", ":"))
        await self.ws.send(text)
        return futures, text

    async def create_notes(self, count, body="", title="bench"):
        ids = []
        batch = []
        limit = self.welcome["limits"]["maxChangesPerPush"]
        for i in range(count):
            note_id = str(uuid.uuid4())
            ids.append(note_id)
            text = body(i) if callable(body) else body
            batch.append({"ccid": str(uuid.uuid4()), "collection": "notes", "id": note_id, "baseRev": 0,
                          "op": "upsert", "fields": {"title": {"set": f"{title} {i}"}, "body": {"set": text}}})
            self.notes[note_id] = [0, len(text)]
            if len(batch) == limit or i == count - 1:
                futures, _ = await self.push(batch)
                results = await asyncio.wait_for(asyncio.gather(*futures), 120)
                for _, m in results:
                    if m.get("type") != "ack":
                        raise RuntimeError(f"create failed: {m}")
                batch = []
        return ids

    def keystroke(self, note_id):
        rev, length = self.notes[note_id]
        position = random.randint(0, length)
        self.notes[note_id][1] = length + 1
        return {"ccid": next_ccid(), "collection": "notes", "id": note_id, "baseRev": rev,
                "op": "upsert", "fields": {"body": {"delta": delta_insert(length, position, "x")}}}

    async def close(self):
        if self.reader:
            self.reader.cancel()
        if self.ws:
            try:
                await asyncio.wait_for(self.ws.close(), 2)
            except Exception:
                pass


def noted_signin(base, username, password):
    status, body = http_json("POST", base + "/v1/accounts", {"username": username, "password": password})
    if status not in (201, 409):
        raise RuntimeError(f"sign-up {username}: {status} {body}")
    status, body = http_json("POST", base + "/v1/sessions",
                             {"username": username, "password": password, "device": str(uuid.uuid4())})
    if status != 200:
        raise RuntimeError(f"sign-in {username}: {status} {body}")
    return body["access_token"]


async def cmd_setup(args):
    """Signs up and in `--users` users concurrently; writes their tokens to --out."""
    loop = asyncio.get_running_loop()
    names = [f"{args.prefix}{i}" for i in range(args.users)]
    start = now()
    tokens = []
    # In small groups: the server hashes passwords with bcrypt on its own core.
    for i in range(0, len(names), 8):
        group = names[i:i + 8]
        tokens += await asyncio.gather(*[loop.run_in_executor(None, noted_signin, args.url, n, args.password)
                                         for n in group])
    with open(args.out, "w") as f:
        json.dump({"users": [{"username": n, "token": t} for n, t in zip(names, tokens)]}, f)
    return {"users": len(tokens), "seconds": round(now() - start, 2)}


def load_tokens(path, count):
    users = json.load(open(path))["users"]
    if len(users) < count:
        raise RuntimeError(f"{path} holds {len(users)} users, {count} needed")
    return [u["token"] for u in users[:count]]


# ---------------------------------------------------------------------------------------------
# Yjs (pycrdt-websocket)


class EchoConn:
    """What the pycrdt and relay clients share: a WebSocket with a reader task, and updates
    that come back in order (the sender's own first answers its oldest pending push)."""

    def _echo(self, message, t):
        if self.pending:
            future, _ = self.pending.pop(0)
            self.echoed += 1
            if not future.done():
                future.set_result((t, None))
        elif self.on_change:
            self.on_change(message, t)

    async def close(self):
        self.reader.cancel()
        try:
            await asyncio.wait_for(self.ws.close(), 2)
        except Exception:
            pass


class YConn(EchoConn):
    """One client of one pycrdt-websocket room, doing single-character inserts in a Y.Text."""

    def __init__(self, base, room):
        import pycrdt
        self.pycrdt = pycrdt
        self.url = base.replace("http://", "ws://") + "/" + room
        self.doc = pycrdt.Doc()
        self.text = self.doc.get("text", type=pycrdt.Text)
        self.pending = []  # FIFO of (future, sent_at): the server echoes updates in order
        self.on_change = None
        self.errors = 0
        self.synced = None
        self.room = room
        self.echoed = 0  # own updates echoed back (the durable phase's "accepted")

    async def open(self):
        self.ws = await connect(self.url, compression=None, max_size=None, open_timeout=60,
                                ping_interval=None, close_timeout=2)
        self.synced = asyncio.get_running_loop().create_future()
        self.reader = asyncio.create_task(self._read())
        await self.ws.send(self.pycrdt.create_sync_message(self.doc))
        await asyncio.wait_for(self.synced, 60)
        return self

    async def _read(self):
        pycrdt = self.pycrdt
        try:
            async for message in self.ws:
                t = now()
                if message[0] != pycrdt.YMessageType.SYNC:
                    continue
                sub = message[1]
                if sub == pycrdt.YSyncMessageType.SYNC_UPDATE:
                    # Not applied to the local document: every client here is a writer or a
                    # reader of its own room, and applying costs the generator CPU.
                    self._echo(message, t)
                    continue
                reply = pycrdt.handle_sync_message(message[1:], self.doc)
                if reply is not None:
                    await self.ws.send(reply)
                if sub == pycrdt.YSyncMessageType.SYNC_STEP2 and not self.synced.done():
                    self.synced.set_result(True)
        except websockets.ConnectionClosed:
            pass

    async def keystroke_push(self, text="x"):
        """Inserts one character (or `text`) at a random place and sends the update;
        returns (future, wire message)."""
        state = self.doc.get_state()
        position = random.randint(0, len(self.text))
        self.text.insert(position, text)
        update = self.doc.get_update(state)
        message = self.pycrdt.create_update_message(update)
        future = asyncio.get_running_loop().create_future()
        self.pending.append((future, now()))
        await self.ws.send(message)
        return future, message




# ---------------------------------------------------------------------------------------------
# The bare WebSocket relay (the floor): no protocol, no storage


class RelayConn(EchoConn):
    """One client of the relay server (relay-server below): sends a text message of the size of
    a Noted keystroke push; the relay sends it back to the sender (the "ack") and to the other
    clients of the room. Echoes come back in order, so a FIFO matches them."""

    def __init__(self, base, room):
        self.url = base.replace("http://", "ws://") + "/" + room
        self.room = room
        self.pending = []
        self.on_change = None
        self.errors = 0
        self.echoed = 0
        self.body = 0

    async def open(self):
        self.ws = await connect(self.url, compression=None, max_size=None, open_timeout=60,
                                ping_interval=None, close_timeout=2)
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        try:
            async for message in self.ws:
                t = now()
                self._echo(message, t)
        except websockets.ConnectionClosed:
            pass

    async def keystroke_push(self, text="x"):
        self.body += 1
        message = json.dumps({"type": "push", "changes": [{
            "ccid": str(uuid.uuid4()), "collection": "notes", "id": self.room, "baseRev": self.body,
            "op": "upsert", "fields": {"body": {"delta": delta_insert(self.body, random.randint(0, self.body), text)}}}]},
            separators=(",", ":"))
        future = asyncio.get_running_loop().create_future()
        self.pending.append((future, now()))
        await self.ws.send(message)
        return future, message



# ---------------------------------------------------------------------------------------------
# shapes


async def open_all(factories, concurrency=200):
    semaphore = asyncio.Semaphore(concurrency)

    async def one(factory):
        async with semaphore:
            return await factory().open()

    return await asyncio.gather(*[one(f) for f in factories])


async def cmd_fanout(args):
    """One writer, N readers of the same user (Noted) or room (Yjs); push -> change received."""
    n = args.readers
    if args.system == "noted":
        token = load_tokens(args.tokens, 1)[0]
        writer = await NotedConn(args.url, token).open()
        note_id = (await writer.create_notes(1, body="hello"))[0]
        readers = await open_all([lambda: NotedConn(args.url, token)] * n)
    else:
        room = f"fanout-{uuid.uuid4().hex[:8]}"
        writer = await YConn(args.url, room).open()
        readers = await open_all([lambda: YConn(args.url, room)] * n)
    await asyncio.sleep(0.5)
    samples = []
    missing = 0
    state = {"count": 0, "sent": 0.0, "done": None}

    def on_change(message, t):
        samples.append(t - state["sent"])
        state["count"] += 1
        if state["count"] >= n and state["done"] and not state["done"].done():
            state["done"].set_result(True)

    for r in readers:
        r.on_change = on_change
    deadline = now() + args.max_seconds
    c0, t0 = cpu(), now()
    pushes = 0
    for _ in range(args.pushes):
        if now() > deadline:
            break
        state["count"] = 0
        state["done"] = asyncio.get_running_loop().create_future()
        state["sent"] = now()
        if args.system == "noted":
            futures, _ = await writer.push([writer.keystroke(note_id)])
        else:
            future, _ = await writer.keystroke_push()
            futures = [future]
        try:
            await asyncio.wait_for(asyncio.gather(state["done"], *futures), 10)
        except asyncio.TimeoutError:
            missing += n - state["count"]
        pushes += 1
        await asyncio.sleep(args.gap)
    wall = now() - t0
    result = {"system": args.system, "readers": n, "pushes": pushes, "missing": missing,
              "errors": writer.errors + sum(r.errors for r in readers),
              "generator_cpu": round((cpu() - c0) / wall, 3), **summary_ms(samples)}
    await asyncio.gather(writer.close(), *[r.close() for r in readers])
    return result


async def run_rate(args, conns, targets, rate, seconds, server_pid):
    """Offers `rate` keystroke pushes per second spread over `targets` [(conn, note id)];
    at most one change in flight per note; returns accepted/s, ack latencies and errors."""
    period = len(targets) / rate  # seconds between two pushes of one target
    latencies = []
    counts = {"accepted": 0, "rejected": 0, "late": 0, "sent": 0}
    start = now() + 0.2
    end = start + seconds

    async def drive(index, conn, note_id):
        next_at = start + (index / len(targets)) * period
        while True:
            if next_at >= end:
                return
            delay = next_at - now()
            if delay > 0:
                await asyncio.sleep(delay)
            t = now()
            if args.system == "noted":
                futures, _ = await conn.push([conn.keystroke(note_id)])
                future = futures[0]
            else:
                future, _ = await conn.keystroke_push()
            counts["sent"] += 1
            try:
                t_ack, m = await asyncio.wait_for(future, 5)
            except asyncio.TimeoutError:
                counts["late"] += 1
                return
            if m is None or m.get("type") == "ack":
                counts["accepted"] += 1
                latencies.append(t_ack - t)
            else:
                counts["rejected"] += 1
            next_at += period
            if next_at < now():  # behind schedule: the offered rate is not being met
                next_at = now()

    c0 = cpu()
    s0 = proc_cpu_seconds(server_pid) if server_pid else None
    d0 = tree_cpu_seconds(args.db_pid) if getattr(args, "db_pid", None) else None
    t0 = now()
    await asyncio.gather(*[drive(i, c, nid) for i, (c, nid) in enumerate(targets)])
    wall = seconds  # every push counted was sent within [start, end)
    errors = sum(c.errors for c in conns)
    for c in conns:
        c.errors = 0
    result = {"offered_per_s": rate, "seconds": round(wall, 2), "drain_s": round(now() - end, 2), "sent": counts["sent"],
              "accepted": counts["accepted"], "accepted_per_s": round(counts["accepted"] / wall, 1),
              "errors": errors + counts["late"] + (counts["rejected"] if args.system == "noted" else 0),
              "generator_cpu": round((cpu() - c0) / (now() - t0), 3), **summary_ms(latencies)}
    if s0 is not None:
        result["server_cpu"] = round((proc_cpu_seconds(server_pid) - s0) / (now() - t0), 3)
    if d0 is not None:
        result["database_cpu"] = round((tree_cpu_seconds(args.db_pid) - d0) / (now() - t0), 3)
    return result


async def open_writers(args, users, notes_per_user):
    if args.system == "noted":
        tokens = load_tokens(args.tokens, users)
        conns = await open_all([(lambda t=t: NotedConn(args.url, t)) for t in tokens])
        targets = []
        for c in conns:
            for note_id in await c.create_notes(notes_per_user, body="hello"):
                targets.append((c, note_id))
    else:
        # One room (document) per user; one connection per note so that echoes match in order.
        conns = await open_all([(lambda i=i, k=k: YConn(args.url, f"user{i}-{k}"))
                                for i in range(users) for k in range(notes_per_user)])
        targets = [(c, None) for c in conns]
    return conns, targets


async def cmd_sustained(args):
    conns, targets = await open_writers(args, args.users, 1)
    result = await run_rate(args, conns, targets, args.users * args.edits_per_second, args.seconds, args.server_pid)
    result.update({"system": args.system, "users": args.users, "edits_per_user_per_s": args.edits_per_second})
    await asyncio.gather(*[c.close() for c in conns])
    return result


async def cmd_maxrate(args):
    conns, targets = await open_writers(args, args.users, args.notes_per_user)
    steps = []
    best = None
    deadline = now() + args.max_seconds
    for rate in [int(r) for r in args.rates.split(",")]:
        if now() + args.step_seconds > deadline:
            break
        step = await run_rate(args, conns, targets, rate, args.step_seconds, args.server_pid)
        steps.append(step)
        ok = step["p99_ms"] is not None and step["p99_ms"] <= args.p99_limit_ms and step["errors"] == 0
        if ok and (best is None or step["accepted_per_s"] > best):
            best = step["accepted_per_s"]
        if not ok or step["accepted_per_s"] < 0.9 * rate:
            break
        await asyncio.sleep(1)
    await asyncio.gather(*[c.close() for c in conns])
    return {"system": args.system, "connections": len(conns), "targets": len(targets),
            "p99_limit_ms": args.p99_limit_ms, "max_accepted_per_s": best, "steps": steps}


async def cmd_idle(args):
    """Opens authenticated idle connections in steps; server RSS before and after each step.
    --deflate: every connection negotiates permessage-deflate, as browsers and NotedClient do."""
    token = load_tokens(args.tokens, 1)[0]
    compression = "deflate" if args.deflate else None
    conns = []
    steps = []
    warm = await NotedConn(args.url, token).open()  # first connection: lazy allocations
    await warm.close()
    await asyncio.sleep(1)
    base = rss_bytes(args.server_pid)
    steps.append({"connections": 0, "rss_bytes": base})
    deadline = now() + args.max_seconds
    for target in [int(s) for s in args.steps.split(",")]:
        if now() > deadline:
            break
        more = target - len(conns)
        conns += await open_all([lambda: NotedConn(args.url, token, compression=compression)] * more, concurrency=100)
        await asyncio.sleep(2)
        steps.append({"connections": len(conns), "rss_bytes": rss_bytes(args.server_pid)})
    top = steps[-1]
    per = (top["rss_bytes"] - base) / top["connections"] if top["connections"] else None
    gen_rss = rss_bytes(os.getpid())
    # What the open, silent connections cost the server's CPU (timers, pings).
    s0, t0 = proc_cpu_seconds(args.server_pid), now()
    await asyncio.sleep(5)
    idle_cpu = (proc_cpu_seconds(args.server_pid) - s0) / (now() - t0)
    await asyncio.gather(*[c.close() for c in conns])
    return {"steps": steps, "deflate": bool(args.deflate), "bytes_per_connection": round(per) if per else None,
            "generator_rss_bytes": gen_rss, "server_cpu_while_idle": round(idle_cpu, 3)}


async def cmd_idle_stages(args):
    """Where the memory of an idle connection goes: K connections per stage, each stage kept
    open while the next is added, server RSS after each (freed memory cannot be reused and
    blur the next stage, as nothing is closed): authenticated without compression,
    authenticated with permessage-deflate, plain TCP (no HTTP request), WebSocket upgraded
    but no `hello` yet (measured within the 15 s hello deadline)."""
    import socket
    token = load_tokens(args.tokens, 1)[0]
    k = args.count
    host, port = args.url.replace("http://", "").split(":")
    warm = await NotedConn(args.url, token).open()
    await warm.close()
    await asyncio.sleep(1)
    rows = []
    last = rss_bytes(args.server_pid)
    keep = []

    def step(name):
        nonlocal last
        now_rss = rss_bytes(args.server_pid)
        rows.append({"stage": name, "connections": k, "rss_delta_bytes": now_rss - last,
                     "bytes_per_connection": round((now_rss - last) / k)})
        last = now_rss

    keep += await open_all([lambda: NotedConn(args.url, token)] * k, concurrency=100)
    await asyncio.sleep(2)
    step("authenticated, no compression")
    keep += await open_all([lambda: NotedConn(args.url, token, compression="deflate")] * k, concurrency=100)
    await asyncio.sleep(2)
    step("authenticated, permessage-deflate")
    sockets = []
    for _ in range(k):
        sock = socket.create_connection((host, int(port)))
        sockets.append(sock)
    await asyncio.sleep(2)
    step("TCP connected, no request")
    url = args.url.replace("http://", "ws://") + "/v1/sync"
    bare = []
    for i in range(0, k, 100):
        bare += await asyncio.gather(*[connect(url, compression=None, ping_interval=None, open_timeout=60)
                                       for _ in range(min(100, k - i))])
    await asyncio.sleep(1)
    step("WebSocket upgraded, before hello")
    for sock in sockets:
        sock.close()
    await asyncio.gather(*[c.close() for c in keep], *[b.close() for b in bare], return_exceptions=True)
    return {"stages": rows}


class Counting:
    """Counts the bytes of a websockets connection's TCP stream (plain asyncio transports)."""

    def __init__(self, conn):
        self.sent = 0
        self.received = 0
        transport = conn.transport
        write = transport.write

        def counting_write(data):
            self.sent += len(data)
            return write(data)

        transport.write = counting_write
        received = conn.data_received

        def counting_received(data):
            self.received += len(data)
            return received(data)

        conn.data_received = counting_received


async def cmd_bytes(args):
    """One single-keystroke change into a 1,000-character note: the push, the ack, the
    broadcast `change`; frame payloads (UTF-8 bytes) and TCP bytes with WebSocket framing,
    without compression and with permessage-deflate where the server negotiates it."""
    global RANDOM_CCIDS
    out = {}
    token = load_tokens(args.tokens, 1)[0]
    # "deflate-random-ccid": the clients' ids before they were made sequential (NotedClient's
    # `ChangeID`), for the comparison.
    for mode in ["none", "deflate", "deflate-random-ccid"]:
        compression = None if mode == "none" else "deflate"
        RANDOM_CCIDS = mode == "deflate-random-ccid"
        writer = await NotedConn(args.url, token, compression=compression).open()
        reader = await NotedConn(args.url, token, compression=compression).open()
        negotiated = writer.ws.response.headers.get("Sec-WebSocket-Extensions")
        note_id = (await writer.create_notes(1, body="a" * 1000))[0]
        await asyncio.sleep(0.3)
        got = asyncio.get_running_loop().create_future()
        reader.on_change = lambda m, t: got.done() or got.set_result(m)
        # Warm-up keystroke (deflate's context takeover makes later messages smaller).
        futures, _ = await writer.push([writer.keystroke(note_id)])
        await asyncio.wait_for(asyncio.gather(got, *futures), 10)
        warm_change = got.result()
        # --pause: quiet for longer than the server keeps a session's zlib streams (1-2 s), so
        # the measured keystroke goes through streams made again from the kept windows.
        await asyncio.sleep(args.pause)
        got = asyncio.get_running_loop().create_future()
        reader.on_change = lambda m, t: got.done() or got.set_result(m)
        wc, rc = Counting(writer.ws), Counting(reader.ws)
        futures, push_text = await writer.push([writer.keystroke(note_id)])
        (t_ack, ack), = await asyncio.wait_for(asyncio.gather(*futures), 10)
        change_text = await asyncio.wait_for(got, 10)
        await asyncio.sleep(0.2)
        if mode != "none":
            # What the broadcast would take if the server compressed it too (it leaves frames
            # under its minFrameSizeToCompress, 256 bytes, uncompressed): raw deflate with
            # context takeover, primed with the warm-up change, as RFC 7692 frames it.
            import zlib
            z = zlib.compressobj(wbits=-15)
            z.compress(warm_change.encode())
            z.flush(zlib.Z_SYNC_FLUSH)
            body = z.compress(change_text.encode()) + z.flush(zlib.Z_SYNC_FLUSH)
            estimate = len(body) - 4 + 2
        out[mode] = {"negotiated": negotiated,
                     "push_payload_bytes": len(push_text.encode()),
                     "ack_payload_bytes": len(json.dumps(ack, separators=(",", ":")).encode()),
                     "change_payload_bytes": len(change_text.encode()),
                     "push_tcp_bytes": wc.sent, "ack_tcp_bytes": wc.received, "change_tcp_bytes": rc.received,
                     "push_example": push_text, "change_example": change_text}
        if mode != "none":
            out[mode]["change_tcp_bytes_if_compressed_estimate"] = estimate
        await writer.close()
        await reader.close()
    if args.yjs_url:
        room = f"bytes-{uuid.uuid4().hex[:8]}"
        writer = await YConn(args.yjs_url, room).open()
        reader = await YConn(args.yjs_url, room).open()
        # The 1,000 characters typed one by one (as in a real Yjs document: one item per
        # keystroke), then a warm-up keystroke, then the measured one.
        got = asyncio.get_running_loop().create_future()
        reader.on_change = lambda m, t: None
        for _ in range(1000):
            future, _ = await writer.keystroke_push("a")
            await asyncio.wait_for(future, 10)
        reader.on_change = lambda m, t: got.done() or got.set_result(m)
        future, _ = await writer.keystroke_push()
        await asyncio.wait_for(asyncio.gather(future, got), 10)
        got = asyncio.get_running_loop().create_future()
        reader.on_change = lambda m, t: got.done() or got.set_result(m)
        wc, rc = Counting(writer.ws), Counting(reader.ws)
        future, message = await writer.keystroke_push()
        await asyncio.wait_for(asyncio.gather(future, got), 10)
        change = got.result()
        await asyncio.sleep(0.2)
        out["yjs"] = {"push_payload_bytes": len(message), "change_payload_bytes": len(change),
                      "push_tcp_bytes": wc.sent, "change_tcp_bytes": rc.received}
        await writer.close()
        await reader.close()
    return out


async def cmd_seed(args):
    """Creates --notes notes of --size bytes for the first user (for the initial-sync test), each
    with a text of its own (until 2026-11-27 one random text served 500 notes: a compressor with a
    32 KiB window then sent a page as back-references, which no real account allows)."""
    token = load_tokens(args.tokens, 1)[0]
    conn = await NotedConn(args.url, token).open()
    start = now()
    alphabet = "abcdefghijklmnopqrstuvwxyz     "
    vocabulary = None
    if args.text == "words":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "peers"))
        import seed_notes
        vocabulary = seed_notes._vocabulary(random.Random(1))

    def body(i):
        if vocabulary is not None:
            return seed_notes.note_text(created + i, args.size, random, vocabulary)[1]
        return "".join(random.choice(alphabet) for _ in range(args.size))
    created = 0
    while created < args.notes and now() - start < args.max_seconds:
        count = min(500, args.notes - created)
        await conn.create_notes(count, body=body, title=f"note {created}")
        created += count
    await conn.close()
    return {"notes": created, "size": args.size, "seconds": round(now() - start, 2)}


async def cmd_pull(args):
    """The server's side of an initial sync: every page of `pull since 0` over one connection,
    parsed and dropped (no client storage), timed from the first pull to the last page
    (`payload_bytes`: decompressed)."""
    token = load_tokens(args.tokens, 1)[0]
    url = args.url.replace("http://", "ws://") + "/v1/sync"
    ws = await connect(url, compression="deflate" if args.deflate else None, max_size=None, open_timeout=60, ping_interval=None)
    await ws.send(json.dumps({"type": "hello", "protocol": 1, "token": token, "device": str(uuid.uuid4())}))
    json.loads(await ws.recv())
    since, records, pages, wire = 0, 0, 0, 0
    page_times = []
    start = now()
    while pages < 10000 and now() - start < args.max_seconds:
        t = now()
        await ws.send(json.dumps({"type": "pull", "since": since, "limit": args.limit}))
        text = await asyncio.wait_for(ws.recv(), 60)
        page_times.append(now() - t)
        wire += len(text.encode())
        page = json.loads(text)
        if page.get("type") != "changes":
            raise RuntimeError(f"pull: {text[:200]}")
        records += len(page["records"])
        pages += 1
        since = page["cursor"]
        if not page["more"]:
            break
    seconds = now() - start
    await ws.close()
    return {"seconds": round(seconds, 3), "records": records, "pages": pages, "limit": args.limit,
            "payload_bytes": wire, "page_ms": summary_ms(page_times)}



# ---------------------------------------------------------------------------------------------
# durable edits (issue 18): many users, a fixed rate, and nothing lost


async def open_durable_writers(args, users):
    """One connection and one note (Noted) or one room (pycrdt, relay) per user."""
    if args.system == "noted":
        return await open_writers(args, users, 1)
    cls = YConn if args.system == "yjs" else RelayConn
    conns = await open_all([(lambda i=i: cls(args.url, f"{args.room_prefix}{i}")) for i in range(users)],
                           concurrency=args.open_concurrency)
    return conns, [(c, None) for c in conns]


def ystore_rows(db, prefix):
    """Updates stored by pycrdt's SQLiteYStore per room (path) of this run."""
    import sqlite3
    # Read-write: after a SIGKILL the file may need its journal rolled back, which a read-only
    # connection cannot do ("attempt to write a readonly database").
    connection = sqlite3.connect(db, timeout=60)
    try:
        rows = connection.execute("SELECT path, count(*) FROM yupdates WHERE path LIKE ? GROUP BY path",
                                  (prefix + "%",)).fetchall()
    finally:
        connection.close()
    return dict(rows)


async def cmd_durable(args):
    """`--users` users each editing `--edits-per-second` times a second for `--seconds` (one
    connection and one note or room each, at most one change in flight per note), push -> ack
    (pycrdt: own update echoed; relay: own message echoed). Then writes what was acknowledged to
    --expect (Noted: each note's last acked rev; pycrdt and relay: echoes per room) for `verify`,
    run after the server is killed with SIGKILL and (Noted) started again."""
    opened = now()
    conns, targets = await open_durable_writers(args, args.users)
    open_seconds = round(now() - opened, 2)
    if args.system == "noted":
        created = {nid: c.notes[nid][0] for c, nid in targets}
    load_before = os.getloadavg()[0]
    result = await run_rate(args, conns, targets, args.users * args.edits_per_second, args.seconds, args.server_pid)
    result["loadavg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    await asyncio.sleep(0.5)  # late answers of pushes that timed out still update the expectations
    result.update({"system": args.system, "users": args.users, "connections": len(conns),
                   "edits_per_user_per_s": args.edits_per_second, "fsync_delay_ms": args.fsync_delay_ms,
                   "open_seconds": open_seconds})
    if args.system == "noted":
        expect = [{"token": c.token, "id": nid, "rev": c.notes[nid][0], "created_rev": created[nid]}
                  for c, nid in targets]
        result["acked_changes"] = sum(e["rev"] - e["created_rev"] for e in expect)
    else:
        expect = [{"room": c.room, "echoed": c.echoed} for c in conns]
        result["acked_changes"] = sum(e["echoed"] for e in expect)
        if args.system == "yjs" and args.ystore_db:
            # Stored when the last echo came back (the store writes after echoing).
            stored = ystore_rows(args.ystore_db, args.room_prefix)
            result["stored_at_drain"] = sum(stored.values())
    if args.expect:
        with open(args.expect, "w") as f:
            json.dump({"system": args.system, "room_prefix": args.room_prefix, "expect": expect}, f)
    await asyncio.gather(*[c.close() for c in conns])
    return result


async def noted_stored_revs(base, token, concurrency_guard):
    async with concurrency_guard:
        url = base.replace("http://", "ws://") + "/v1/sync"
        async with connect(url, compression=None, max_size=None, open_timeout=60, ping_interval=None,
                           close_timeout=2) as ws:
            await ws.send(json.dumps({"type": "hello", "protocol": 1, "token": token, "device": str(uuid.uuid4())}))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if welcome.get("type") != "welcome":
                raise RuntimeError(f"verify: no welcome: {welcome}")
            revs, since = {}, 0
            for _ in range(1000):
                await ws.send(json.dumps({"type": "pull", "since": since, "limit": 1000}))
                while True:
                    page = json.loads(await asyncio.wait_for(ws.recv(), 60))
                    if page.get("type") == "changes":
                        break
                for record in page["records"]:
                    revs[record["id"]] = record["rev"]
                since = page["cursor"]
                if not page["more"]:
                    break
            return revs


async def cmd_verify(args):
    """Nothing lost: after the server was killed (SIGKILL) and started again, every change that
    was acknowledged is stored. Noted: pulls each user's records since 0 and compares each note's
    stored rev with the last rev acked for it (a rev is one committed change; a stored rev below
    the acked one is a lost change). pycrdt: rows of its SQLiteYStore per room against the
    updates echoed to that room's writer. Relay: nothing is stored (every echo is "lost")."""
    data = json.load(open(args.expect))
    expect = data["expect"]
    start = now()
    if data["system"] == "noted":
        guard = asyncio.Semaphore(100)
        stored = await asyncio.gather(*[noted_stored_revs(args.url, e["token"], guard) for e in expect])
        lost_notes, lost_changes, acked, kept = 0, 0, 0, 0
        for e, revs in zip(expect, stored):
            rev = revs.get(e["id"], 0)
            acked += e["rev"] - e["created_rev"]
            kept += min(rev, e["rev"]) - e["created_rev"]
            if rev < e["rev"]:
                lost_notes += 1
                lost_changes += e["rev"] - rev
        return {"system": "noted", "notes": len(expect), "acked_changes": acked, "stored_changes": kept,
                "lost_changes": lost_changes, "notes_with_loss": lost_notes, "seconds": round(now() - start, 2)}
    if data["system"] == "yjs":
        rows = ystore_rows(args.ystore_db, data["room_prefix"])
        acked = sum(e["echoed"] for e in expect)
        lost = sum(max(0, e["echoed"] - rows.get(e["room"], 0)) for e in expect)
        return {"system": "yjs", "rooms": len(expect), "acked_changes": acked, "stored_changes": sum(rows.values()),
                "lost_changes": lost, "notes_with_loss": sum(1 for e in expect if rows.get(e["room"], 0) < e["echoed"]),
                "seconds": round(now() - start, 2)}
    acked = sum(e["echoed"] for e in expect)
    return {"system": data["system"], "acked_changes": acked, "stored_changes": 0, "lost_changes": acked,
            "notes_with_loss": len(expect), "seconds": 0}


async def cmd_probe(args):
    """One connection, `--pushes` sequential keystrokes 20 ms apart: push -> ack of a single user
    (shows an fsync delay: every ack of a durable server waits for at least one fsync)."""
    if args.system == "noted":
        conn = await NotedConn(args.url, load_tokens(args.tokens, 1)[0]).open()
        note_id = (await conn.create_notes(1, body="probe"))[0]
    else:
        conn = await (YConn if args.system == "yjs" else RelayConn)(args.url, f"{args.room_prefix}probe").open()
    samples = []
    deadline = now() + args.max_seconds
    for _ in range(args.pushes):
        if now() > deadline:
            break
        t = now()
        if args.system == "noted":
            futures, _ = await conn.push([conn.keystroke(note_id)])
            future = futures[0]
        else:
            future, _ = await conn.keystroke_push()
        await asyncio.wait_for(future, 10)
        samples.append(now() - t)
        await asyncio.sleep(0.02)
    await conn.close()
    return {"system": args.system, "fsync_delay_ms": args.fsync_delay_ms, **summary_ms(samples)}


async def cmd_relay_server(args):
    """The floor: a bare WebSocket relay (websockets + uvloop), no parsing, no storage. Each
    message goes back to its sender and to every other client of the room (the URL path)."""
    from websockets.asyncio.server import serve
    rooms = {}

    async def handler(websocket):
        room = rooms.setdefault(websocket.request.path, set())
        room.add(websocket)
        try:
            async for message in websocket:
                await websocket.send(message)
                for other in room:
                    if other is not websocket:
                        try:
                            await other.send(message)
                        except websockets.ConnectionClosed:
                            pass
        except websockets.ConnectionClosed:
            pass
        finally:
            room.discard(websocket)

    async with serve(handler, "127.0.0.1", args.port, compression=None, max_size=None, ping_interval=None):
        print("listening", flush=True)
        await asyncio.Future()

# ---------------------------------------------------------------------------------------------
# the pycrdt-websocket server


async def cmd_yjs_server(args):
    from pycrdt.websocket import WebsocketServer
    from websockets.asyncio.server import serve

    class Channel:
        """pycrdt's Channel over a `websockets` server connection."""

        def __init__(self, websocket):
            self.websocket = websocket
            self._path = websocket.request.path.lstrip("/")

        @property
        def path(self):
            return self._path

        def __aiter__(self):
            return self

        async def __anext__(self):
            try:
                return await self.recv()
            except websockets.ConnectionClosed:
                raise StopAsyncIteration()

        async def send(self, message):
            try:
                await self.websocket.send(message)
            except websockets.ConnectionClosed:
                pass

        async def recv(self):
            message = await self.websocket.recv()
            return message if isinstance(message, bytes) else message.encode()

    server_class = WebsocketServer
    if args.store == "sqlite":
        # pycrdt's own SQLiteYStore (pycrdt-store), one store object per room, all in one
        # database file, as pycrdt-websocket's documentation sets it up; the room writes each
        # update to it after broadcasting the update (YRoom._broadcast_updates).
        import logging
        from pycrdt.store import SQLiteYStore
        from pycrdt.websocket import YRoom
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="store-log %(levelname)s %(message)s")

        class Store(SQLiteYStore):
            db_path = args.db

        # The database is created once here: a hundred rooms starting at once would each find no
        # file and try to create the tables.
        first = Store(path="-init-")
        async with first:
            await first.db_initialized.wait()
            await first.write(b"\x00\x00")

        class StoredServer(WebsocketServer):
            async def get_room(self, name):
                if name not in self.rooms:
                    self.rooms[name] = YRoom(ready=self.rooms_ready, ystore=Store(path=name),
                                             exception_handler=self.exception_handler, log=self.log)
                room = self.rooms[name]
                await self.start_room(room)
                return room

        server_class = StoredServer
    async with server_class(auto_clean_rooms=False) as server:
        async def handler(websocket):
            await server.serve(Channel(websocket))

        async with serve(handler, "127.0.0.1", args.port, compression=None, max_size=None,
                         ping_interval=None):
            print("listening", flush=True)
            await asyncio.Future()


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--url", required=True)
        p.add_argument("--system", choices=["noted", "yjs", "relay"], default="noted")
        p.add_argument("--tokens", default=None)
        p.add_argument("--server-pid", type=int, default=None)
        p.add_argument("--db-pid", type=int, default=None, help="PostgreSQL's postmaster: its CPU is reported too")
        p.add_argument("--max-seconds", type=float, default=300)
        return p

    p = common(sub.add_parser("setup"))
    p.add_argument("--users", type=int, required=True)
    p.add_argument("--prefix", default="bench")
    p.add_argument("--password", default="bench-load-password")
    p.add_argument("--out", required=True)
    p = common(sub.add_parser("fanout"))
    p.add_argument("--readers", type=int, required=True)
    p.add_argument("--pushes", type=int, default=50)
    p.add_argument("--gap", type=float, default=0.05)
    p = common(sub.add_parser("sustained"))
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--edits-per-second", type=float, default=2)
    p.add_argument("--seconds", type=float, default=60)
    p = common(sub.add_parser("maxrate"))
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--notes-per-user", type=int, default=4)
    p.add_argument("--rates", default="250,500,1000,1500,2000,3000,4000,6000,8000")
    p.add_argument("--step-seconds", type=float, default=8)
    p.add_argument("--p99-limit-ms", type=float, default=100)
    p = common(sub.add_parser("idle"))
    p.add_argument("--steps", default="1000,5000,10000")
    p.add_argument("--deflate", action="store_true", help="connections negotiate permessage-deflate")
    p = common(sub.add_parser("idle-stages"))
    p.add_argument("--count", type=int, default=1000)
    p = common(sub.add_parser("bytes"))
    p.add_argument("--yjs-url", default=None)
    p.add_argument("--pause", type=float, default=0,
                   help="seconds between the warm-up keystroke and the measured one")
    p = common(sub.add_parser("seed"))
    p.add_argument("--notes", type=int, default=10000)
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--text", choices=["words", "letters"], default="words",
                   help="each note's body: words of a made-up vocabulary, as the web app's benchmarks seed "
                        "(Tests/peers/seed_notes.py), or random letters and spaces (every word unique)")
    p = common(sub.add_parser("pull"))
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--deflate", action="store_true", help="negotiate permessage-deflate, as browsers and NotedClient do")
    p = common(sub.add_parser("durable"))
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--edits-per-second", type=float, default=2)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--expect", default=None, help="where to write what was acknowledged, for verify")
    p.add_argument("--ystore-db", default=None, help="pycrdt's SQLiteYStore database (rows counted at the end)")
    p.add_argument("--room-prefix", default="durable-")
    p.add_argument("--open-concurrency", type=int, default=200,
                   help="connections being opened at once (pycrdt with its store under strace: fewer, see bench-load-durable)")
    p.add_argument("--fsync-delay-ms", type=float, default=0, help="recorded in the result (applied by bench-load)")
    p = common(sub.add_parser("verify"))
    p.add_argument("--expect", required=True)
    p.add_argument("--ystore-db", default=None)
    p = common(sub.add_parser("probe"))
    p.add_argument("--pushes", type=int, default=50)
    p.add_argument("--room-prefix", default="probe-")
    p.add_argument("--fsync-delay-ms", type=float, default=0)
    p = sub.add_parser("yjs-server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--store", choices=["none", "sqlite"], default="none")
    p.add_argument("--db", default=None, help="the SQLiteYStore database file (--store sqlite)")
    p = sub.add_parser("relay-server")
    p.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    commands = {"setup": cmd_setup, "fanout": cmd_fanout, "sustained": cmd_sustained, "maxrate": cmd_maxrate,
                "idle": cmd_idle, "idle-stages": cmd_idle_stages, "bytes": cmd_bytes, "seed": cmd_seed, "pull": cmd_pull, "yjs-server": cmd_yjs_server,
                "durable": cmd_durable, "verify": cmd_verify, "probe": cmd_probe, "relay-server": cmd_relay_server}
    if args.command != "bytes" and os.environ.get("BENCH_NO_UVLOOP") is None:
        try:
            import uvloop
            uvloop.install()
        except ImportError:
            pass
    result = asyncio.run(asyncio.wait_for(commands[args.command](args), getattr(args, "max_seconds", 300) + 120)
                         if not args.command.endswith("-server") else commands[args.command](args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
