// The web app's sync engine (Web/sync.js) under node against a real `noted-server` (issue 19,
// docs/reliability.md "The engine outside the page"): JavaScript clients of one user on
// in-memory or file-persisted stores over real WebSockets, taken offline and back, their
// messages lost and repeated, the server killed and restarted under them.
// NOTED_SERVER_BIN: the server to start (skipped with a notice without it).
// The seeded simulation: NOTED_WEB_SIM_SEED (first seed, 1), NOTED_WEB_SIM_RUNS (12, besides the
// regression seeds), NOTED_WEB_SIM_STEPS (24), NOTED_WEB_SIM_JOBS (runs at a time against the
// one server, each with its own user; 4), NOTED_WEB_SIM_SHRINK=0 (no shrinking of the first
// failure), NOTED_WEB_SIM_SHRINK_SECONDS (180), NOTED_WEB_SIM_REQUEST_TIMEOUT_MS (the engines'
// request timeout, 1500), NOTED_WEB_SIM_KEEP (a shrunk plan's step numbers, to replay it).
// A failure prints the seed, the plan and the trace, then the shrunk plan and its trace.
// Node 20 needs --experimental-websocket for the global WebSocket (scripts/test passes it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, createAccount, heal, random, revisionTexts, serverNotes, signIn, sleep, startServer } from "./support/live.mjs";
import { openFileStore } from "./support/file-store.mjs";
import { FaultTransport } from "./support/faults.mjs";
import { shrink } from "./support/shrink.mjs";

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

const env = process.env;
const RUNS = Number(env.NOTED_WEB_SIM_RUNS ?? 12);
const STEPS = Number(env.NOTED_WEB_SIM_STEPS || 24);
const SEED = Number(env.NOTED_WEB_SIM_SEED || 1);
const JOBS = Math.max(1, Number(env.NOTED_WEB_SIM_JOBS || 4));
const SHRINK = env.NOTED_WEB_SIM_SHRINK !== "0";
const SHRINK_SECONDS = Number(env.NOTED_WEB_SIM_SHRINK_SECONDS || 180);
const REQUEST_TIMEOUT_MS = Number(env.NOTED_WEB_SIM_REQUEST_TIMEOUT_MS || 1500);
// A plan's steps to keep (comma-separated indices), to replay a shrunk trace: with one seed.
const KEEP = env.NOTED_WEB_SIM_KEEP ? new Set(env.NOTED_WEB_SIM_KEEP.split(",").map(Number)) : null;
const NAMES = ["A", "B", "C"];
const RESTART_GAP_MS = 8000;
let lastRestart = 0;

/**
 * The model of issue 19's first simulation (seed 108 found its bug in it): creates, word edits,
 * offline periods and client restarts only, drawn exactly as it drew them, so that a regression
 * seed of it replays its schedule (as far as real time lets it).
 */
function planV1(seed, steps = 14) {
  const rand = random(seed);
  const plan = [{ n: -1, kind: "create", client: 0, pause: 0, first: true }];
  let created = 1;
  for (let n = 0; n < steps; n++) {
    const client = Math.floor(rand() * 3);
    const roll = rand();
    let step;
    if (roll < 0.15) step = { kind: "toggle-online" };
    else if (roll < 0.2) step = { kind: "restart-client" };
    else if (roll < 0.25 && created < 4) {
      created++;
      step = { kind: "create" };
    } else {
      const note = rand();
      const place = rand();
      const insert = rand() < 0.3;
      step = { kind: "edit", note, place, insert };
    }
    plan.push({ n, client, ...step, pause: Math.floor(rand() * 250) });
  }
  return plan;
}

/**
 * The full model (docs/reliability.md): each step draws its client, its kind and every
 * parameter it needs up front, so a plan with steps left out runs the rest unchanged (a note is
 * a fraction, taken of the notes created by then). Kinds and probabilities:
 * offline/online 0.10, client killed and restarted on its file 0.04, create 0.08 (at most 6),
 * pin/unpin 0.05, trash/restore 0.06, purge 0.04, purge race 0.03 (another client goes
 * offline and edits the note's text, then this one purges it), drop the connection 0.05 (half
 * at once, half with the next push), drop the next answer 0.05, duplicate the last push 0.05,
 * server restart 0.03 (SIGKILL or SIGTERM, half each), word edit the rest (0.42; insert 3 in 10,
 * else replace). Then a pause of 0–250 ms.
 */
function planV2(seed, steps = STEPS) {
  const rand = random(seed);
  const plan = [{ n: -1, kind: "create", client: 0, pause: 0, first: true }];
  let created = 1;
  for (let n = 0; n < steps; n++) {
    const client = Math.floor(rand() * 3);
    const other = (client + 1 + Math.floor(rand() * 2)) % 3;
    const roll = rand();
    const note = rand();
    const place = rand();
    const flip = rand() < 0.5;
    const insert = rand() < 0.3;
    const pause = Math.floor(rand() * 250);
    let step;
    if (roll < 0.10) step = { kind: "toggle-online" };
    else if (roll < 0.14) step = { kind: "restart-client" };
    else if (roll < 0.22) step = created < 6 ? (created++, { kind: "create" }) : { kind: "edit", note, place, insert };
    else if (roll < 0.27) step = { kind: "pin", note };
    else if (roll < 0.33) step = { kind: "trash", note };
    else if (roll < 0.37) step = { kind: "purge", note };
    else if (roll < 0.40) step = { kind: "purge-race", note, other, place, insert };
    else if (roll < 0.45) step = { kind: "drop-connection", onPush: flip };
    else if (roll < 0.50) step = { kind: "drop-answer" };
    else if (roll < 0.55) step = { kind: "duplicate-push" };
    else if (roll < 0.58) step = { kind: "restart-server", signal: flip ? "SIGKILL" : "SIGTERM" };
    else step = { kind: "edit", note, place, insert };
    plan.push({ n, client, ...step, pause });
  }
  return plan;
}

function makePlan({ seed, model = "v2", steps }) {
  const plan = model === "v1" ? planV1(seed, steps) : planV2(seed, steps);
  return KEEP ? plan.filter((s) => s.first || KEEP.has(s.n)) : plan;
}

function describeStep(s) {
  const c = NAMES[s.client];
  switch (s.kind) {
    case "create": return `${s.n} ${c} create`;
    case "edit": return `${s.n} ${c} ${s.insert ? "insert" : "replace"} t${s.n}${c} at ${s.place.toFixed(2)} in note ${s.note.toFixed(2)}`;
    case "purge-race": return `${s.n} ${NAMES[s.other]} offline, ${s.insert ? "inserts" : "replaces"} t${s.n}${NAMES[s.other]} in note ${s.note.toFixed(2)}; ${c} purges it`;
    case "drop-connection": return `${s.n} ${c} drop connection${s.onPush ? " with its next push" : ""}`;
    case "restart-server": return `${s.n} server ${s.signal} and restart`;
    default: return `${s.n} ${c} ${s.kind}${s.note !== undefined ? ` note ${s.note.toFixed(2)}` : ""}`;
  }
}

/** A new user (its name unique in this process) and its sign-in token. */
async function newUser() {
  const username = `web${++users}x${process.pid}`;
  await createAccount(server.base, username);
  return username;
}

/**
 * Plays `plan` for a new user: three clients (stores persisted to files, fault transports,
 * requests given up after REQUEST_TIMEOUT_MS), then heal and check the invariants
 * (docs/reliability.md): all clients equal to the server and quiet; no purged note on the
 * server; every note created and not purged there; any other note on the server is a purged
 * note's text kept as a new note (it holds tokens of exactly one purged note, no two alike, at
 * most one per client); every token at most once in a note, and in no two notes unless its note
 * was purged (then once per note kept so); every token written is in its note or one of its
 * conflict revisions, unless a later edit replaced it or its note was purged.
 */
async function play(seed, plan, trace) {
  const dir = mkdtempSync(join(tmpdir(), "noted-web-sim-"));
  const username = await newUser();
  const log = (line) => trace.push(`  ${line}`);
  const open = async (name) => {
    const transport = new FaultTransport(server.base, { log: (line) => log(`${name}: ${line}`) });
    const c = new Client(name, server.base, await signIn(server.base, username), {
      store: openFileStore(join(dir, `${name}.json`)), transport, requestTimeoutMs: REQUEST_TIMEOUT_MS,
    });
    c.start();
    return c;
  };
  const list = [];
  for (const name of NAMES) list.push(await open(name));
  const token = await signIn(server.base, username);
  const created = []; // ids, in order
  const tokens = new Map(); // token -> { id, client, step }
  const replaced = new Set(); // tokens a later edit replaced (their loss is the edit, not sync's)
  const purged = new Set(); // ids a client purged
  const counts = { restarts: 0, faults: 0, purges: 0, forks: 0 };
  const pick = (f) => (created.length ? created[Math.floor(f * created.length)] : null);
  const writeWord = async (c, id, word, place, insert) => c.edit(id, (f) => {
    const words = f.body.split(" ");
    const i = Math.min(words.length - 1, Math.floor(place * words.length));
    if (insert) words.splice(i, 0, word);
    else {
      if (tokens.has(words[i])) replaced.add(words[i]);
      words[i] = word;
    }
    return { ...f, body: words.join(" ") };
  });
  try {
    for (const s of plan) {
      const c = list[s.client];
      const short = (id) => (id ? id.slice(0, 8) : "none");
      let line = describeStep(s);
      switch (s.kind) {
        case "toggle-online":
          c.setOnline(!c.online);
          line += `: ${c.online ? "online" : "offline"}`;
          break;
        case "restart-client": {
          // Killed (whatever it had not written to its file is gone) and started again on its file.
          c.dispose();
          list[s.client] = await open(c.name);
          list[s.client].setOnline(c.online);
          break;
        }
        case "create": {
          const id = await c.create(s.first ? { title: "first", body: "one two three four five six seven eight" } : { title: `note ${s.n}`, body: "red green blue cyan magenta yellow" });
          created.push(id);
          line += ` ${short(id)}`;
          break;
        }
        case "edit": {
          const id = pick(s.note);
          const word = `t${s.n}${c.name}`;
          const done = id ? await writeWord(c, id, word, s.place, s.insert) : false;
          if (done) tokens.set(word, { id, client: c.name, step: s.n });
          line += ` (${short(id)})${done ? "" : " (not here)"}`;
          break;
        }
        case "pin":
        case "trash": {
          const id = pick(s.note);
          const field = s.kind === "pin" ? "pinned" : "trashed";
          let value = null;
          const done = id ? await c.edit(id, (f) => ({ ...f, [field]: (value = !f[field]) })) : false;
          line += ` (${short(id)})${done ? ` ${field} ${value}` : " (not here)"}`;
          break;
        }
        case "purge": {
          const id = pick(s.note);
          const done = id ? await c.purge(id) : false;
          if (done) purged.add(id), counts.purges++;
          line += ` (${short(id)})${done ? "" : " (not here)"}`;
          break;
        }
        case "purge-race": {
          const id = pick(s.note);
          const e = list[s.other];
          e.setOnline(false);
          const word = `t${s.n}${e.name}`;
          const edited = id ? await writeWord(e, id, word, s.place, s.insert) : false;
          if (edited) tokens.set(word, { id, client: e.name, step: s.n });
          const done = id ? await c.purge(id) : false;
          if (done) purged.add(id), counts.purges++;
          line += ` (${short(id)}): edited ${edited}, purged ${done}`;
          break;
        }
        case "drop-connection":
          if (s.onPush) c.transport.loseNextPush();
          else line += c.transport.dropConnection() ? "" : " (no connection)";
          counts.faults++;
          break;
        case "drop-answer":
          c.transport.dropNextAnswer();
          counts.faults++;
          break;
        case "duplicate-push":
          line += c.engine.ready && c.transport.duplicateLastPush() ? "" : " (nothing to duplicate)";
          counts.faults++;
          break;
        case "restart-server":
          // Runs in parallel share the server: a restart within RESTART_GAP_MS of another (of
          // any run) is left out, or together they would keep it down and every client's
          // reconnect backoff at its longest.
          if (Date.now() - lastRestart < RESTART_GAP_MS) line += " (skipped: the server restarted just before)";
          else {
            lastRestart = Date.now();
            await server.restart({ signal: s.signal });
            lastRestart = Date.now();
            counts.restarts++;
          }
          break;
      }
      trace.push(line);
      if (s.pause) await sleep(s.pause);
    }
    trace.push("heal");
    for (const c of list) c.transport.calm();
    const result = await heal(list, server.base, token, 45000);
    if (result.differences.length) {
      for (const c of list) trace.push(await c.describe());
      const held = await serverNotes(server.base, token);
      trace.push(`server: ${JSON.stringify([...held].map(([id, n]) => [id.slice(0, 8), n.rev, n.fields.body]))}`);
    }
    const notes = healed(result, ` (seed ${seed})`);
    check({ notes, created, purged, tokens });
    // Tokens: at most once in a note; in no two notes unless their note was purged.
    const where = new Map(); // token -> [ids]
    for (const [id, note] of notes) {
      for (const w of `${note.fields.title} ${note.fields.body}`.split(/\s+/)) {
        if (!tokens.has(w)) continue;
        const at = where.get(w) || [];
        assert.ok(!at.includes(id), `token ${w} twice in note ${id}`);
        at.push(id);
        where.set(w, at);
      }
    }
    const forks = new Map(); // fork id -> the purged note whose text it keeps
    for (const [id, note] of notes) {
      if (created.includes(id)) continue;
      const from = new Set(`${note.fields.title} ${note.fields.body}`.split(/\s+/).filter((w) => tokens.has(w)).map((w) => tokens.get(w).id));
      assert.ok(from.size === 1 && purged.has([...from][0]), `note ${id} was not created here and is no purged note's text kept (${JSON.stringify(note.fields.body)})`);
      forks.set(id, [...from][0]);
    }
    counts.forks = forks.size;
    for (const x of purged) {
      const kept = [...forks].filter(([, from]) => from === x).map(([id]) => notes.get(id).fields.body);
      assert.ok(kept.length <= NAMES.length, `purged note ${x} kept as ${kept.length} new notes`);
      assert.equal(new Set(kept).size, kept.length, `purged note ${x} kept twice with the same text: ${JSON.stringify(kept)}`);
    }
    const revisions = new Map();
    let conflicts = 0;
    for (const [w, { id }] of tokens) {
      const at = where.get(w) || [];
      if (at.length > 1 || (at.length === 1 && at[0] !== id)) {
        assert.ok(purged.has(id) && at.every((x) => forks.has(x)), `token ${w} of note ${id} is in ${JSON.stringify(at)}`);
        continue;
      }
      if (at.length === 1 || replaced.has(w) || purged.has(id)) continue;
      if (!revisions.has(id)) revisions.set(id, await revisionTexts(server.base, token, id));
      const kept = revisions.get(id).some((r) => r.conflict && `${r.title} ${r.body}`.split(/\s+/).includes(w));
      assert.ok(kept, `token ${w} (${JSON.stringify(tokens.get(w))}) is neither in note ${id} nor in a conflict revision of it`);
      conflicts++;
    }
    const faults = list.reduce((sum, c) => sum + c.transport.counts.answersDropped + c.transport.counts.duplicated + c.transport.counts.dropped + c.transport.counts.pushesLost, 0);
    const duplicateAcks = list.reduce((sum, c) => sum + c.transport.counts.duplicateAcks, 0);
    return { notes: notes.size, tokens: tokens.size, conflicts, ...counts, faultsFired: faults, duplicateAcks };
  } finally {
    for (const c of list) c.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The note-level invariants: no purged note on the server, every other created note there. */
function check({ notes, created, purged }) {
  for (const id of purged) assert.ok(!notes.has(id), `purged note ${id} is on the server`);
  for (const id of created) if (!purged.has(id)) assert.ok(notes.has(id), `note ${id} lost`);
}

/** A run of `seed`: its trace, and its result or error. */
async function runOnce(spec, plan = makePlan(spec)) {
  const trace = [];
  try {
    return { trace, result: await play(spec.seed, plan, trace) };
  } catch (error) {
    return { trace, error };
  }
}

// Seeds that found a bug, run every time (model v1: issue 19's first model, replayed as drawn):
// 108, a note created offline-to-be and edited elsewhere meanwhile stayed at its first revision
// for ever (a resent create's duplicate ack replaced the newer state its pull had brought;
// fixed with a stash in Web/sync.js).
// Model v2 (the full model, 24 steps), found in batches of 6 runs in parallel against one server
// (other runs' server restarts included), so a seed alone does not replay exactly:
// 21, 34 (and 42, 48, 51, 55, 57 of the same batch): a purge made while a change was in flight,
// or before a newer state came, was lost (its `dirty` recomputed from the fields; fixed in
// `moved`). Run alone on the engine before any fix, 21 and 34 stayed `connecting` after a server
// restart instead: node 20's WebSocket fires `error` and never `close` on a refused connection,
// and the engine had no timeout for a handshake or hello (seeds 8-12 of an earlier batch; fixed:
// given up after the request timeout).
// 15: stuck `connecting` in that batch (restarts of the parallel runs every few seconds kept the
// reconnect backoff at its longest; the harness now leaves out a restart within 8 s of another);
// run alone on the engine before the fixes it failed with the purge lost.
// 53: a client restarted with its cursor still 0 kept a note purged meanwhile (a pull from 0
// carries no tombstones; fixed: a pull from 0 is a snapshot that drops what it does not name);
// it passed once alone before the fix (the deterministic test in engine.test.mjs fails).
// 5248 (found by a 1,000-run batch from seed 5001): the server's merge of a stale delta glued an
// insertion onto a word ("threet19C  four"), in the strict patch application the Swift
// DiffMatchPatch and Web/dmp.js share; failed every time before the fix (3 of 3), passes since.
const REGRESSION_SEEDS = [
  { seed: 108, model: "v1", steps: 14 },
  ...[15, 21, 34, 53, 5248].map((seed) => ({ seed, model: "v2", steps: 24 })),
];

async function pool(items, jobs, work) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, async () => {
    while (next < items.length) await work(items[next++]);
  }));
}

const specs = [...REGRESSION_SEEDS, ...Array.from({ length: RUNS }, (_, run) => ({ seed: SEED + run, model: "v2", steps: STEPS }))];

test("seeded schedules: edits, purges, lost and repeated messages, client and server restarts of three JS clients heal to the server's state", { skip, timeout: 600000 + specs.length * 90000 }, async (t) => {
  const started = Date.now();
  const failures = [];
  const totals = {};
  let done = 0;
  await pool(specs, JOBS, async (spec) => {
    const plan = makePlan(spec);
    const { trace, result, error } = await runOnce(spec, plan);
    done++;
    for (const [key, value] of Object.entries(result || {})) totals[key] = (totals[key] || 0) + value;
    if (error) {
      failures.push({ spec, plan, trace, error });
      console.log(`engine-live.test.mjs: FAILED seed NOTED_WEB_SIM_SEED=${spec.seed} (${spec.model}): ${error.message}\n  plan:\n    ${plan.map(describeStep).join("\n    ")}\n  trace:\n    ${trace.join("\n    ")}`);
    } else if (specs.length <= 40) {
      t.diagnostic(`seed ${spec.seed} (${spec.model}): ${JSON.stringify(result)}`);
    }
    if (specs.length > 40 && done % 50 === 0) {
      console.log(`engine-live.test.mjs: ${done} of ${specs.length} runs, ${failures.length} failed (${failures.map((f) => f.spec.seed).join(", ")}), ${Math.round((Date.now() - started) / 1000)} s`);
    }
  });
  const seconds = Math.round((Date.now() - started) / 1000);
  t.diagnostic(`${specs.length} runs (${JOBS} at a time), ${specs.length - failures.length} passed, ${seconds} s, ${server.restarts} server restarts`);
  console.log(`engine-live.test.mjs: ${specs.length} runs (${JOBS} at a time), ${specs.length - failures.length} passed, ${seconds} s; failed: ${failures.map((f) => f.spec.seed).join(", ") || "none"}; totals of the passing runs ${JSON.stringify(totals)}`);
  if (failures.length === 0) return;
  const first = failures[0];
  if (SHRINK) {
    const deadline = Date.now() + SHRINK_SECONDS * 1000;
    let last = first;
    const fails = async (steps) => {
      for (let attempt = 0; attempt < 2; attempt++) {
        const outcome = await runOnce(first.spec, steps);
        if (outcome.error) {
          last = { ...outcome, plan: steps };
          return true;
        }
      }
      return false;
    };
    const body = first.plan.filter((s) => !s.first);
    const shrunk = await shrink(body, (steps) => fails([first.plan[0], ...steps]), { deadline });
    console.log(`engine-live.test.mjs: seed ${first.spec.seed} shrunk from ${body.length} steps to ${shrunk.steps.length} in ${shrunk.tries} tries${shrunk.complete ? "" : " (stopped at the time limit)"}; replay with NOTED_WEB_SIM_SEED=${first.spec.seed} NOTED_WEB_SIM_RUNS=1 NOTED_WEB_SIM_KEEP=${shrunk.steps.map((s) => s.n).join(",")}\n  last failure: ${last.error.message}\n  plan:\n    ${[first.plan[0], ...shrunk.steps].map(describeStep).join("\n    ")}\n  trace:\n    ${last.trace.join("\n    ")}`);
  }
  throw first.error;
});

test("the shrinker finds the steps a failure needs", async () => {
  const steps = Array.from({ length: 40 }, (_, i) => i);
  // Fails when steps 7 and 23 are both in, flakily: the first try of each candidate passes.
  const tried = new Map();
  const fails = async (candidate) => {
    const key = candidate.join(",");
    tried.set(key, (tried.get(key) || 0) + 1);
    return candidate.includes(7) && candidate.includes(23) && tried.get(key) > 1;
  };
  const anyOfTwo = async (candidate) => (await fails(candidate)) || fails(candidate);
  const out = await shrink(steps, anyOfTwo);
  assert.deepEqual(out.steps, [7, 23]);
  assert.ok(out.complete);
  // A deadline stops it with what it has.
  const early = await shrink(steps, anyOfTwo, { maxTries: 3 });
  assert.ok(!early.complete && early.steps.length <= 40 && early.steps.includes(7) && early.steps.includes(23));
});
