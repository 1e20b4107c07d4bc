#!/usr/bin/env python3
"""Spaces at scale (issue 42), against a running noted-server (scripts/bench-spaces starts one).

  fanout     one writer; 99 other sessions receive each change. Side by side: a shared space
             of 100 members with a protocol-2 session each, and one user's 100 sessions (its
             personal space). Reports push -> last change received, p50/p99, and the ratio.
  reconnect  a user in 500 spaces and a user in 1 space reconnect with nothing new: hello,
             welcome, and a pull of each space whose `seq` in the welcome is past the
             client's cursor (none here), as a protocol-2 client does (docs/protocol.md,
             "Spaces"). Reports the time per reconnect, p50/p99, and the ratio; also the
             time to pull every space once (a client that pulled each on reconnect).

Prints one JSON object. Loopback only; the server's per-address and per-user limits must be
lifted (scripts/bench-spaces does).
"""

import argparse
import asyncio
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_load import http_json, noted_signin, now, pct  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

PASSWORD = "bench spaces password"


def ms(values):
    return {"n": len(values), "p50_ms": round(pct(values, 50) * 1000, 2), "p99_ms": round(pct(values, 99) * 1000, 2)}


class Session:
    """One protocol-2 sync connection."""

    def __init__(self, url, token):
        self.url, self.token = url, token
        self.changes = asyncio.Queue()
        self.answers = asyncio.Queue()

    async def open(self):
        self.ws = await connect(self.url.replace("http://", "ws://") + "/v1/sync", max_size=None,
                                ping_interval=None, open_timeout=60, compression=None)
        await self.ws.send(json.dumps({"type": "hello", "protocol": 2, "token": self.token,
                                       "device": str(uuid.uuid4()), "client": "bench-spaces/1"}))
        self.welcome = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
        assert self.welcome.get("type") == "welcome", self.welcome
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self):
        try:
            async for message in self.ws:
                t = now()
                if '"type":"change"' in message:
                    self.changes.put_nowait(t)
                else:
                    self.answers.put_nowait(json.loads(message))
        except Exception:
            pass

    async def request(self, message):
        await self.ws.send(json.dumps(message))
        while True:
            answer = await asyncio.wait_for(self.answers.get(), 60)
            if answer.get("type") in ("ack", "reject", "changes", "error"):
                return answer

    async def close(self):
        self.reader.cancel()
        await self.ws.close()


def signin_all(url, names):
    return [noted_signin(url, name, PASSWORD) for name in names]


def space(url, token, name):
    status, body = http_json("POST", url + "/v1/spaces", {"name": name}, token)
    assert status == 201, body
    return body["id"]


def add(url, owner_token, space_id, username, token, role="editor"):
    status, body = http_json("POST", f"{url}/v1/spaces/{space_id}/invitations",
                             {"username": username, "role": role}, owner_token)
    assert status == 201, body
    status, body = http_json("POST", f"{url}/v1/spaces/{space_id}/accept", {}, token)
    assert status == 200, body


async def fanout_once(writer, readers, change):
    for r in readers:
        while not r.changes.empty():
            r.changes.get_nowait()
    sent = now()
    answer = await writer.request({"type": "push", "changes": [change]})
    assert answer.get("status") == "applied", answer
    arrivals = await asyncio.wait_for(asyncio.gather(*[r.changes.get() for r in readers]), 30)
    return max(arrivals) - sent


async def fanout(url, prefix, members, pushes):
    names = [f"{prefix}m{i}" for i in range(members)]
    tokens = signin_all(url, names)
    shared = space(url, tokens[0], "Bench space")
    for name, token in zip(names[1:], tokens[1:]):
        add(url, tokens[0], shared, name, token)
    space_sessions = [await Session(url, t).open() for t in tokens]
    one_user = [await Session(url, tokens[0]).open() for _ in range(members)]
    results = {}
    for label, sessions, space_id in (("space", space_sessions, shared), ("devices", one_user, None)):
        note = str(uuid.uuid4())
        writer, readers = sessions[0], sessions[1:]
        base = {"ccid": str(uuid.uuid4()), "collection": "notes", "id": note, "baseRev": 0, "op": "upsert",
                "fields": {"body": {"set": "x"}}}
        if space_id:
            base["space"] = space_id
        await fanout_once(writer, readers, base)
        samples = []
        for rev in range(1, pushes + 1):
            change = dict(base, ccid=str(uuid.uuid4()), baseRev=rev, fields={"body": {"set": "x" * (rev % 50 + 1)}})
            samples.append(await fanout_once(writer, readers, change))
        results[label] = ms(samples)
    for s in space_sessions + one_user:
        await s.close()
    results["ratio_p50"] = round(results["space"]["p50_ms"] / results["devices"]["p50_ms"], 2)
    results["ratio_p99"] = round(results["space"]["p99_ms"] / results["devices"]["p99_ms"], 2)
    return results


async def pull_each(session, spaces):
    for entry in spaces:
        message = {"type": "pull", "since": entry["seq"]}
        if not entry.get("personal"):
            message["space"] = entry["id"]
        page = await session.request(message)
        assert page.get("type") == "changes" and not page.get("records"), page


async def reconnect_times(url, token, repeats, pull_all=False):
    first = await Session(url, token).open()
    cursors = {entry["id"]: entry["seq"] for entry in first.welcome.get("spaces", [])}
    await first.close()
    times = []
    for _ in range(repeats):
        started = now()
        session = await Session(url, token).open()
        spaces = session.welcome.get("spaces", [])
        await pull_each(session, spaces if pull_all else [e for e in spaces if e["seq"] > cursors.get(e["id"], -1)])
        times.append(now() - started)
        await session.close()
    return times


async def reconnect(url, prefix, spaces, repeats):
    many, one = signin_all(url, [f"{prefix}many", f"{prefix}one"])
    for i in range(spaces):
        space(url, many, f"Space {i:04d}")
    space(url, one, "Only")
    results = {"spaces": spaces, "many": ms(await reconnect_times(url, many, repeats)),
               "one": ms(await reconnect_times(url, one, repeats)),
               "many_pulling_every_space": ms(await reconnect_times(url, many, max(3, repeats // 5), pull_all=True))}
    results["ratio_p50"] = round(results["many"]["p50_ms"] / results["one"]["p50_ms"], 2)
    results["ratio_p99"] = round(results["many"]["p99_ms"] / results["one"]["p99_ms"], 2)
    return results


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--pushes", type=int, default=200)
    parser.add_argument("--spaces", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--only", choices=["fanout", "reconnect"])
    args = parser.parse_args()
    prefix = "b" + uuid.uuid4().hex[:6]
    out = {}
    if args.only != "reconnect":
        out["fanout"] = await fanout(args.url, prefix, args.members, args.pushes)
    if args.only != "fanout":
        out["reconnect"] = await reconnect(args.url, prefix, args.spaces, args.repeats)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
