// The web app's sync engine (Web/sync.js) under node against a real `noted-server` (issue 19,
// docs/reliability.md "The engine outside the page"): JavaScript clients of one user on
// in-memory stores (Web/memory-store.js) over real WebSockets, taken offline and back.
// NOTED_SERVER_BIN: the server to start (skipped with a notice without it);
// NOTED_WEB_SIM_SEED / NOTED_WEB_SIM_RUNS / NOTED_WEB_SIM_STEPS: the seeded schedule's seed
// (1 by default, so that every run of the suite plays the same schedule; printed on failure),
// its number of runs (1) and steps per run (14).
// Node 20 needs --experimental-websocket for the global WebSocket (scripts/test passes it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, createAccount, heal, revisionTexts, serverNotes, signIn, sleep, startServer } from "./support/live.mjs";
import { openFileStore } from "./support/file-store.mjs";

const BIN = process.env.NOTED_SERVER_BIN;
const NO_WEBSOCKET = typeof WebSocket === "undefined";
const skip = !BIN ? "NOTED_SERVER_BIN is not set" : NO_WEBSOCKET ? "no global WebSocket (node 20: --experimental-websocket)" : false;
if (skip) console.log(`engine-live.test.mjs: NOTICE: skipped: ${skip}`);

let server = null;
let users = 0;

before(async () => {
  if (!skip) server = await startServer(BIN);
});

after(async () => {
  if (server) await server.stop();
});

/** A new user and `n` started clients of it, each signed in on its own session (stores in `dir`'s files if given). */
async function clients(n, dir = null) {
  const username = `web${++users}x${process.pid}`;
  await createAccount(server.base, username);
  const out = [];
  for (let i = 0; i < n; i++) {
    const name = String.fromCharCode(65 + i);
    const store = dir ? openFileStore(join(dir, `${name}.json`)) : undefined;
    const c = new Client(name, server.base, await signIn(server.base, username), { store });
    c.start();
    out.push(c);
  }
  return { list: out, token: await signIn(server.base, username) };
}

function healed(result, context = "") {
  assert.deepEqual(result.differences, [], `not healed${context}: ${result.differences.join("; ")}`);
  return result.server;
}

test("two JS clients, one offline, edit different words of one note: both come online and converge, nothing lost", { skip, timeout: 60000 }, async () => {
  const { list: [a, b], token } = await clients(2);
  try {
    const id = await a.create({ title: "Words", body: "alpha beta gamma delta epsilon" });
    healed(await heal([a, b], server.base, token));
    assert.equal((await b.store.get(id)).local.body, "alpha beta gamma delta epsilon");

    a.setOnline(false);
    assert.ok(await a.edit(id, (f) => ({ ...f, body: f.body.replace("beta", "BETA") })));
    assert.ok(await b.edit(id, (f) => ({ ...f, body: f.body.replace("delta", "DELTA") })));
    await sleep(300); // b's edit reaches the server while a is offline
    assert.equal((await a.store.get(id)).local.body, "alpha BETA gamma delta epsilon");

    const notes = healed(await heal([a, b], server.base, token));
    assert.equal(notes.get(id).fields.body, "alpha BETA gamma DELTA epsilon");
    assert.equal((await a.store.get(id)).local.body, "alpha BETA gamma DELTA epsilon");
    assert.equal((await b.store.get(id)).local.body, "alpha BETA gamma DELTA epsilon");
    assert.deepEqual([...a.errors, ...b.errors], []);
  } finally {
    a.dispose();
    b.dispose();
  }
});

/** mulberry32: a small seeded generator. */
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

const RUNS = Number(process.env.NOTED_WEB_SIM_RUNS || 1);
const STEPS = Number(process.env.NOTED_WEB_SIM_STEPS || 14);
const SEED = Number(process.env.NOTED_WEB_SIM_SEED || 1);

/**
 * One seeded schedule: three clients (stores persisted to files) create notes and replace or
 * insert words (each a unique token), go offline and come back, are killed and started again
 * on their files, with pauses between steps; then all heal. Invariants
 * (docs/reliability.md): all clients equal to the server; every token written is in its note's
 * text or in one of its conflict revisions, unless a later edit replaced it; no token twice;
 * no note lost or duplicated.
 */
async function schedule(seed, trace) {
  const rand = random(seed);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const dir = mkdtempSync(join(tmpdir(), "noted-web-sim-"));
  const { list, token } = await clients(3, dir);
  const created = []; // ids
  const tokens = new Map(); // token -> { id, client, step }
  const replaced = new Set(); // tokens a later edit replaced (their loss is the edit, not sync's)
  try {
    created.push(await list[0].create({ title: "first", body: "one two three four five six seven eight" }));
    trace.push("A create first");
    for (let step = 0; step < STEPS; step++) {
      const c = pick(list);
      const roll = rand();
      if (roll < 0.15) {
        c.setOnline(!c.online);
        trace.push(`${c.name} ${c.online ? "online" : "offline"}`);
      } else if (roll < 0.2) {
        // Killed (whatever it had not written to its file is gone) and started again on its file.
        c.dispose();
        const again = new Client(c.name, c.base, c.token, { store: openFileStore(join(dir, `${c.name}.json`)) });
        again.start();
        list[list.indexOf(c)] = again;
        trace.push(`${c.name} killed and restarted`);
      } else if (roll < 0.25 && created.length < 4) {
        const id = await c.create({ title: `note ${step}`, body: "red green blue cyan magenta yellow" });
        created.push(id);
        trace.push(`${c.name} create ${id.slice(0, 8)}`);
      } else {
        const id = pick(created);
        const word = `t${step}${c.name}`;
        const place = rand();
        const insert = rand() < 0.3;
        const done = await c.edit(id, (f) => {
          const words = f.body.split(" ");
          const i = Math.floor(place * words.length);
          if (insert) words.splice(i, 0, word);
          else {
            if (tokens.has(words[i])) replaced.add(words[i]);
            words[i] = word;
          }
          return { ...f, body: words.join(" ") };
        });
        if (done) tokens.set(word, { id, client: c.name, step });
        trace.push(`${c.name} ${insert ? "insert" : "replace"} ${word} in ${id.slice(0, 8)}${done ? "" : " (not here yet)"}`);
      }
      await sleep(Math.floor(rand() * 250));
    }
    trace.push("heal");
    const result = await heal(list, server.base, token, 30000);
    if (result.differences.length) {
      for (const c of list) trace.push(await c.describe());
      const held = await serverNotes(server.base, token);
      trace.push(`server: ${JSON.stringify([...held].map(([id, n]) => [id.slice(0, 8), n.rev, n.fields.body]))}`);
    }
    const notes = healed(result, ` (seed ${seed})`);
    assert.equal(notes.size, created.length, `the server holds ${notes.size} notes, ${created.length} were created`);
    for (const id of created) assert.ok(notes.has(id), `note ${id} lost`);
    const seen = new Map();
    for (const [id, note] of notes) {
      for (const w of note.fields.body.split(/\s+/)) {
        if (!tokens.has(w)) continue;
        assert.ok(!seen.has(w), `token ${w} twice (in ${seen.get(w)} and ${id})`);
        seen.set(w, id);
      }
    }
    const revisions = new Map();
    let conflicts = 0;
    for (const [w, { id }] of tokens) {
      if (seen.get(w) === id || replaced.has(w)) continue;
      if (!revisions.has(id)) revisions.set(id, await revisionTexts(server.base, token, id));
      const kept = revisions.get(id).some((r) => r.conflict && r.body.split(/\s+/).includes(w));
      assert.ok(kept, `token ${w} (${JSON.stringify(tokens.get(w))}) is neither in note ${id} nor in a conflict revision of it`);
      conflicts++;
    }
    return { notes: notes.size, tokens: tokens.size, conflicts };
  } finally {
    for (const c of list) c.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

// Seeds that found a bug, run every time: 108, a note created offline-to-be and edited
// elsewhere meanwhile stayed at its first revision for ever (a resent create's duplicate ack
// replaced the newer state its pull had brought; fixed with a stash in Web/sync.js).
const REGRESSION_SEEDS = [108];

test("seeded schedules: edits, offline periods and reconnects of three JS clients heal to the server's state", { skip, timeout: 120000 + (RUNS + REGRESSION_SEEDS.length) * 60000 }, async (t) => {
  const seeds = [...REGRESSION_SEEDS, ...Array.from({ length: RUNS }, (_, run) => SEED + run)];
  for (const seed of seeds) {
    const trace = [];
    try {
      const result = await schedule(seed, trace);
      const count = (word) => trace.filter((line) => line.includes(word)).length;
      t.diagnostic(`seed ${seed}: ${result.notes} notes, ${result.tokens} edits (${result.conflicts} kept only in a conflict revision), ${count("offline")} offline periods, ${count("restarted")} restarts`);
    } catch (error) {
      console.log(`engine-live.test.mjs: failing seed NOTED_WEB_SIM_SEED=${seed}; its schedule:\n  ${trace.join("\n  ")}`);
      throw error;
    }
  }
});
