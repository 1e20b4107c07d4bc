// The web app's sync engine (Web/sync.js) at size, under node: a `noted-server` (a fresh data
// directory), one account seeded over HTTP with N notes of S characters (random words, as
// scripts/bench-web's), then a new JavaScript client on a MemoryStore signs in and syncs them:
// the time from its start to its store holding every note, the engine online with nothing
// pending. Each run is a new client of the same account (its first sync).
//
//   NOTED_SERVER_BIN=/path/to/noted-server node --experimental-websocket scripts/bench-web-engine.mjs [--notes 10000] [--size 2000] [--runs 3]

import { Client, createAccount, signIn, startServer } from "../Tests/web/support/live.mjs";
import { uuid } from "../Web/text.js";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const NOTES = option("notes", 10000);
const SIZE = option("size", 2000);
const RUNS = option("runs", 3);
const BIN = process.env.NOTED_SERVER_BIN;
if (!BIN) {
  console.error("NOTED_SERVER_BIN is not set");
  process.exit(2);
}

/** mulberry32, seeded: the same notes every run. */
function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function text(rand, size) {
  const letters = "abcdefghijklmnopqrstuvwxyz";
  let out = "";
  while (out.length < size) {
    const n = 2 + Math.floor(rand() * 8);
    for (let i = 0; i < n; i++) out += letters[Math.floor(rand() * 26)];
    out += " ";
  }
  return out.slice(0, size);
}

/** POST /v1/push with `changes`, retried while the server says the pushes come too fast. */
async function push(base, token, changes) {
  for (;;) {
    const res = await fetch(new URL("/v1/push", base), {
      method: "POST", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: JSON.stringify({ changes }),
    });
    const body = await res.json();
    if (res.status === 429 || (body.results || []).some((r) => r.code === "rate_limited")) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      continue;
    }
    if (!res.ok || !body.results.every((r) => r.type === "ack")) throw new Error(`push: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    return;
  }
}

const server = await startServer(BIN);
try {
  const username = `bench${process.pid}`;
  await createAccount(server.base, username);
  const token = await signIn(server.base, username);
  const rand = random(1);
  let t = performance.now();
  for (let i = 0; i < NOTES; i += 100) {
    const changes = [];
    for (let j = i; j < Math.min(NOTES, i + 100); j++) {
      changes.push({ ccid: uuid(), collection: "notes", id: uuid(), baseRev: 0, op: "upsert", fields: { title: { set: `Note ${j}` }, body: { set: text(rand, SIZE) } } });
    }
    await push(server.base, token, changes);
  }
  console.log(`seeded ${NOTES} notes of ${SIZE} characters in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  const times = [];
  for (let run = 0; run < RUNS; run++) {
    const client = new Client(`run${run}`, server.base, await signIn(server.base, username));
    t = performance.now();
    client.start();
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      if (client.store.records.size >= NOTES && (await client.quiet())) break;
    }
    const seconds = (performance.now() - t) / 1000;
    times.push(seconds);
    console.log(`run ${run + 1}: ${NOTES} notes synced into a new node client in ${seconds.toFixed(2)} s`);
    client.dispose();
  }
  console.log(`median ${times.sort((a, b) => a - b)[Math.floor(times.length / 2)].toFixed(2)} s`);
} finally {
  await server.stop();
}
