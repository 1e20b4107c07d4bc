// Swift clients beside JavaScript clients of one user against a real `noted-server` (issue:
// "the web client held to the same proof as the Swift client"; docs/reliability.md, "Swift
// and JavaScript clients together"): the `noted` CLI (the Swift NotedClient sync engine, one
// home directory per device, Tests/web/support/cli.mjs) and the web app's engine (Web/sync.js,
// Tests/web/support/live.mjs) edit the same notes, offline and online, then all heal and the
// invariants of docs/reliability.md are checked over both kinds of client. In the seeded
// schedule the JS clients' messages are lost and repeated (the FaultTransport of engine-live)
// and the server is killed and restarted under all of them.
// NOTED_SERVER_BIN and NOTED_BIN: the server and the CLI (skipped with a notice without either);
// NOTED_WEB_SIM_SEED / NOTED_WEB_SIM_RUNS: the seeded schedule's first seed (1) and runs (1), as
// in engine-live.test.mjs; NOTED_MIX_STEPS: steps per run (24); NOTED_WEB_SIM_REQUEST_TIMEOUT_MS:
// the JS engines' request timeout in the schedule (1500, as engine-live). A failing seed prints
// its schedule and every client's state.
// Node 20 needs --experimental-websocket for the global WebSocket (scripts/test passes it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, createAccount, heal, random, revisionTexts, serverNotes, signIn, sleep, startServer } from "./support/live.mjs";
import { openFileStore } from "./support/file-store.mjs";
import { CliHome, compareCli } from "./support/cli.mjs";
import { FaultTransport } from "./support/faults.mjs";
import { isPurging, syncState, withPurge } from "../../Web/records.js";

const SERVER_BIN = process.env.NOTED_SERVER_BIN;
const CLI_BIN = process.env.NOTED_BIN;
const skip = !SERVER_BIN ? "NOTED_SERVER_BIN is not set"
  : !CLI_BIN ? "NOTED_BIN (the noted CLI) is not set"
    : typeof WebSocket === "undefined" ? "no global WebSocket (node 20: --experimental-websocket)" : false;
if (skip) console.log(`mixed-live.test.mjs: NOTICE: skipped: ${skip}`);

let server = null;
let users = 0;
let dirs = [];

before(async () => {
  if (!skip) server = await startServer(SERVER_BIN);
});

after(async () => {
  if (server) await server.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * A new user; `js` started JavaScript clients (stores in files of `dir`) and `cli` signed-in
 * `noted` homes of it. With `faults` (a trace array), the JS clients talk through a
 * FaultTransport (faults.mjs) and give a request up after REQUEST_TIMEOUT_MS, as engine-live's;
 * `open(name, token)` starts such a client again on its file (a killed client's restart).
 */
async function devices(js, cli, { faults = null } = {}) {
  const username = `mix${++users}x${process.pid}`;
  await createAccount(server.base, username);
  const dir = mkdtempSync(join(tmpdir(), "noted-web-mix-"));
  dirs.push(dir);
  const open = (name, token) => {
    const options = { store: openFileStore(join(dir, `${name}.json`)) };
    if (faults) {
      options.transport = new FaultTransport(server.base, { log: (line) => faults.push(`  ${name}: ${line}`) });
      options.requestTimeoutMs = REQUEST_TIMEOUT_MS;
    }
    const c = new Client(name, server.base, token, options);
    c.start();
    return c;
  };
  const clients = [];
  for (let i = 0; i < js; i++) {
    const name = String.fromCharCode(65 + i);
    clients.push(open(name, await signIn(server.base, username)));
  }
  const homes = [];
  for (let i = 0; i < cli; i++) {
    const home = new CliHome(CLI_BIN, dir, `cli${i + 1}`);
    await home.login(server.base, username);
    homes.push(home);
  }
  return { clients, homes, dir, open, token: await signIn(server.base, username) };
}

/**
 * Heals both kinds: every CLI home runs `noted sync` until it exits 0, the JS clients come
 * online and settle, and again, until every JS client and every home holds exactly the server's
 * notes (ids, revs, fields) with nothing pending. Returns { server, differences }.
 */
async function healAll(clients, homes, token, rounds = 5) {
  let differences = [];
  let notes = new Map();
  for (let round = 0; round < rounds; round++) {
    differences = [];
    for (const h of homes) if (!(await h.sync())) differences.push(`${h.name}: noted sync did not finish`);
    const js = await heal(clients, server.base, token, 20000);
    differences.push(...js.differences);
    notes = await serverNotes(server.base, token);
    for (const h of homes) differences.push(...compareCli(h.name, await h.notes(), notes));
    // Still equal after the homes synced: nothing moved meanwhile.
    if (differences.length === 0) {
      const again = await heal(clients, server.base, token, 5000);
      if (again.differences.length === 0 && sameNotes(again.server, notes)) return { server: notes, differences };
      differences.push(...again.differences, "the server moved during the check");
    }
    await sleep(100);
  }
  return { server: notes, differences };
}

function sameNotes(a, b) {
  if (a.size !== b.size) return false;
  for (const [id, n] of a) if (!b.has(id) || b.get(id).rev !== n.rev) return false;
  return true;
}

function healed(result, context = "") {
  assert.deepEqual(result.differences, [], `not healed${context}: ${result.differences.join("; ")}`);
  return result.server;
}

async function describe(clients, homes, token) {
  const lines = [];
  for (const c of clients) lines.push(await c.describe());
  for (const h of homes) {
    lines.push(`${h.name}: ${JSON.stringify([...(await h.notes())].map(([id, n]) => [id.slice(0, 8), n.rev, n.pending, n.fields.body, n.fields.trashed]))}`);
    lines.push(`${h.name} commands: ${h.log.slice(-12).join(" | ")}`);
  }
  const held = await serverNotes(server.base, token);
  lines.push(`server: ${JSON.stringify([...held].map(([id, n]) => [id.slice(0, 8), n.rev, n.fields.body, n.fields.trashed]))}`);
  return lines;
}

function dispose(clients) {
  for (const c of clients) c.dispose();
}

test("a noted home and a JS client (offline) edit different words of one note, then the same word: both converge, the other version kept as a conflict revision", { skip, timeout: 90000 }, async () => {
  const { clients, homes, token } = await devices(1, 1);
  const [web] = clients;
  const [cli] = homes;
  try {
    const id = await cli.create({ title: "Shared", body: "alpha beta gamma delta epsilon" });
    healed(await healAll(clients, homes, token));
    assert.equal((await web.store.get(id)).local.body, "alpha beta gamma delta epsilon");

    // Different words: the JS client offline, the CLI edits and syncs; both placed.
    web.setOnline(false);
    assert.ok(await web.edit(id, (f) => ({ ...f, body: f.body.replace("beta", "BETA") })));
    assert.ok(await cli.edit(id, (body) => body.replace("delta", "DELTA")));
    let notes = healed(await healAll(clients, homes, token));
    assert.equal(notes.get(id).fields.body, "alpha BETA gamma DELTA epsilon");
    assert.equal((await cli.notes()).get(id).fields.body, "alpha BETA gamma DELTA epsilon");

    // The same word: the JS client offline again, the CLI writes offline and syncs first.
    web.setOnline(false);
    assert.ok(await web.edit(id, (f) => ({ ...f, body: f.body.replace("gamma", "WEB") })));
    assert.ok(await cli.edit(id, (body) => body.replace("gamma", "CLI"), { offline: true }));
    assert.ok(await cli.sync());
    notes = healed(await healAll(clients, homes, token));
    const body = notes.get(id).fields.body;
    // The CLI's was first on the server; the web client's, stale, does not fit onto it: the
    // server keeps the text it would replace as a conflict revision (or, if the web client's
    // edit is the one kept, the CLI's is in the conflict revision). Either way both survive.
    // (Words that do not contain the word they replace: "gamma" made "cligamma" on one side
    // and "webgamma" on the other is spliced into "cliwebgamma" by both clients' strict
    // rebase; Tests/web/regressions.test.mjs keeps that case, as a todo.)
    assert.ok(/^alpha BETA (CLI|WEB) DELTA epsilon$/.test(body), body);
    const other = body.includes("CLI") ? "WEB" : "CLI";
    const revisions = await revisionTexts(server.base, token, id);
    assert.ok(revisions.some((r) => r.conflict && r.body.split(/\s+/).includes(other)), `${other} is in no conflict revision: ${JSON.stringify(revisions)}`);
    assert.deepEqual(web.errors, []);
  } finally {
    dispose(clients);
  }
});

const RUNS = Number(process.env.NOTED_WEB_SIM_RUNS || 1);
const SEED = Number(process.env.NOTED_WEB_SIM_SEED || 1);
const STEPS = Number(process.env.NOTED_MIX_STEPS || 24);
const REQUEST_TIMEOUT_MS = Number(process.env.NOTED_WEB_SIM_REQUEST_TIMEOUT_MS || 1500);
const MAX_SERVER_RESTARTS = 2;

/**
 * The fault drawn after a step, from a generator of its own (so the steps are drawn exactly as
 * before the faults came, and a regression seed keeps its schedule), with engine-live's
 * probabilities: for a JS client (A or B, half each), drop its connection 0.05 (half at once,
 * half with its next push), drop its next answer 0.05, duplicate its last push 0.05; a server
 * restart 0.04 (at most MAX_SERVER_RESTARTS a run; SIGKILL or SIGTERM, half each; down for
 * 0.5–2.5 s more, and not waited for: the next steps, `noted` commands included, go on while
 * it is down); else none (0.81).
 */
function drawFault(faultRand) {
  const roll = faultRand();
  const client = Math.floor(faultRand() * 2);
  const flip = faultRand() < 0.5;
  const downMs = 500 + Math.floor(faultRand() * 2000);
  if (roll < 0.05) return { kind: "drop-connection", client, onPush: flip };
  if (roll < 0.10) return { kind: "drop-answer", client };
  if (roll < 0.15) return { kind: "duplicate-push", client };
  if (roll < 0.19) return { kind: "restart-server", signal: flip ? "SIGKILL" : "SIGTERM", downMs };
  return null;
}

/**
 * A `noted` write that may fail (a command that is not `--offline` while the server restarts):
 * `write()`'s value, or, when it threw, `landed()`'s (what the home's database holds: whether
 * the write is there, left for the next `noted sync`; if not, it counts as never written).
 */
async function cliWrite(home, failures, write, landed) {
  try {
    return await write();
  } catch (error) {
    const value = await landed();
    failures.push(`${home.name}: ${error.message.split("\n")[0].slice(0, 200)} (${value ? "written here" : "not written"})`);
    return value;
  }
}

/** A word edit of a body: `token` inserted at, or replacing the word at, `place` (0…1); the replaced word. */
function wordEdit(body, token, place, insert) {
  const words = body.split(" ");
  const i = Math.min(words.length - 1, Math.floor(place * words.length));
  let replaced = null;
  if (insert) words.splice(i, 0, token);
  else [replaced, words[i]] = [words[i], token];
  return { body: words.join(" "), replaced };
}

/**
 * One seeded schedule: two JS clients (A, B; stores in files) and two `noted` homes (cli1,
 * cli2) of one user. Steps: creates, word replacements and insertions (each a unique token) on
 * both kinds, JS clients offline and back, CLI edits written `--offline` (left unsynced until a
 * `noted sync` step or the heal) or online, trash and restore, and now and then a purge from
 * either kind while others edit; after each step maybe a fault (drawFault): a JS client's
 * connection or next answer dropped or its last push sent again, or the server killed and
 * restarted (`noted` commands that fail meanwhile: cliWrite). Then all heal and the invariants
 * are checked.
 */
async function schedule(seed, trace) {
  const rand = random(seed);
  // The faults' own generator: the steps above are drawn from `rand` exactly as before.
  const faultRand = random((seed ^ 0x5eed) + 0x9e3779b9);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const { clients, homes, token, open } = await devices(2, 2, { faults: trace });
  const counts = { faults: 0, serverRestarts: 0, whileDown: 0 };
  const failures = []; // `noted` writes that failed (cliWrite)
  let restarting = null; // a server restart under way: resolves with its error, if any
  let down = false;
  const created = []; // ids
  const purged = new Set(); // ids a client purged
  const tokens = new Map(); // token -> { id, by, step }
  const replaced = new Set(); // tokens a later edit replaced (their loss is that edit, not sync's)
  const kind = (d) => (d instanceof CliHome ? "cli" : "js");
  try {
    const first = await homes[0].create({ title: "first", body: "one two three four five six seven eight" });
    created.push(first);
    trace.push(`cli1 create ${first.slice(0, 8)}`);
    for (let step = 0; step < STEPS; step++) {
      const roll = rand();
      const device = pick([...clients, ...homes]);
      const live = created.filter((id) => !purged.has(id));
      if (down) {
        trace.push(`(the server is down)`);
        if (kind(device) === "cli") counts.whileDown++;
      }
      if (kind(device) === "js" && roll < 0.12) {
        device.setOnline(!device.online);
        trace.push(`${device.name} ${device.online ? "online" : "offline"}`);
      } else if (kind(device) === "js" && roll < 0.15) {
        // Killed (whatever it had not written to its file is gone) and started again on its file.
        device.dispose();
        const again = open(device.name, device.token);
        if (!device.online) again.setOnline(false);
        clients[clients.indexOf(device)] = again;
        trace.push(`${device.name} killed and restarted${device.online ? "" : " (offline)"}`);
      } else if (kind(device) === "cli" && roll < 0.15) {
        const ok = await device.syncOnce();
        trace.push(`${device.name} sync${ok ? "" : " (not finished)"}`);
      } else if (roll < 0.25 && created.length < 5) {
        const fields = { title: `note ${step}`, body: "red green blue cyan magenta yellow" };
        const offline = rand() < 0.5;
        const id = kind(device) === "js" ? await device.create(fields)
          : await cliWrite(device, failures, () => device.create(fields, { offline }),
            async () => [...(await device.notes())].find(([, n]) => n.fields.title === fields.title)?.[0] ?? null);
        if (id) created.push(id);
        trace.push(`${device.name} create ${id ? id.slice(0, 8) : "(failed, not written)"}${kind(device) === "cli" && offline ? " --offline" : ""}`);
      } else if (roll < 0.3 && live.length > 2 && purged.size < 1) {
        const id = pick(live);
        let done;
        if (kind(device) === "js") {
          done = false;
          await device.store.update(id, (r) => {
            if (!r || isPurging(r) || (r.rev === 0 && !syncState(r).inflight)) return undefined;
            done = true;
            return withPurge(r);
          });
          if (done) device.engine.schedulePush(0);
        } else {
          const offline = rand() < 0.5;
          done = await cliWrite(device, failures, () => device.act("purge", id, { offline }), async () => !(await device.notes()).has(id));
        }
        if (done) purged.add(id);
        trace.push(`${device.name} purge ${id.slice(0, 8)}${done ? "" : " (not here yet)"}`);
      } else if (roll < 0.36) {
        const id = pick(live);
        const trashed = rand() < 0.6;
        let done;
        if (kind(device) === "js") done = await device.edit(id, (f) => ({ ...f, trashed }));
        else {
          const offline = rand() < 0.5;
          done = await cliWrite(device, failures, () => device.act(trashed ? "trash" : "restore", id, { offline }),
            async () => (await device.notes()).get(id)?.fields.trashed === trashed);
        }
        trace.push(`${device.name} ${trashed ? "trash" : "restore"} ${id.slice(0, 8)}${done ? "" : " (not here yet)"}`);
      } else {
        const id = pick(live);
        const word = `t${step}${device.name.replace("cli", "c")}`;
        const place = rand();
        const insert = rand() < 0.3;
        const offline = rand() < 0.6;
        let was = null;
        const apply = (body) => {
          const out = wordEdit(body, word, place, insert);
          was = out.replaced;
          return out.body;
        };
        const done = kind(device) === "js"
          ? await device.edit(id, (f) => ({ ...f, body: apply(f.body) }))
          : await cliWrite(device, failures, () => device.edit(id, apply, { offline }),
            async () => Boolean((await device.notes()).get(id)?.fields.body.split(" ").includes(word)));
        if (done) {
          tokens.set(word, { id, by: device.name, step });
          if (was && tokens.has(was)) replaced.add(was);
        }
        trace.push(`${device.name} ${insert ? "insert" : "replace"} ${word} in ${id.slice(0, 8)}${kind(device) === "cli" && offline ? " --offline" : ""}${done ? "" : " (not here yet)"}`);
      }
      const fault = drawFault(faultRand);
      if (fault) {
        const c = clients[fault.client];
        let line = fault.kind === "restart-server" ? "server" : `${c.name}`;
        switch (fault.kind) {
          case "drop-connection":
            if (fault.onPush) {
              c.transport.loseNextPush();
              line += " drop connection with its next push";
            } else line += ` drop connection${c.transport.dropConnection() ? "" : " (no connection)"}`;
            counts.faults++;
            break;
          case "drop-answer":
            c.transport.dropNextAnswer();
            line += " drop next answer";
            counts.faults++;
            break;
          case "duplicate-push":
            line += ` duplicate last push${c.engine.ready && c.transport.duplicateLastPush() ? "" : " (nothing to duplicate)"}`;
            counts.faults++;
            break;
          case "restart-server":
            if (restarting || counts.serverRestarts >= MAX_SERVER_RESTARTS) {
              line += ` ${fault.signal} (skipped: ${restarting ? "a restart is under way" : "enough restarts this run"})`;
              break;
            }
            // Not waited for: the next steps run while it is down.
            counts.serverRestarts++;
            down = true;
            line += ` ${fault.signal}, down ${fault.downMs} ms more, restarted (not waited for)`;
            restarting = server.restart({ signal: fault.signal, downMs: fault.downMs }).then(() => null, (error) => error).then((error) => {
              down = false;
              restarting = null;
              trace.push(`  server up again${error ? `: ${error.message}` : ""}`);
              return error;
            });
            break;
        }
        trace.push(line);
      }
      await sleep(Math.floor(rand() * 200));
    }
    trace.push("heal");
    for (const c of clients) c.transport.calm();
    if (restarting) {
      const error = await restarting;
      if (error) throw error;
    }
    const result = await healAll(clients, homes, token);
    if (result.differences.length) trace.push(...(await describe(clients, homes, token)));
    const notes = healed(result, ` (seed ${seed})`);

    // Every created note there once, unless purged; any other note is text kept from a purged
    // note (edited unsynced somewhere when the purge came), so it holds a token written there.
    for (const id of created) {
      if (purged.has(id)) assert.ok(!notes.has(id), `purged note ${id} is still on the server`);
      else assert.ok(notes.has(id), `note ${id} lost`);
    }
    // A token twice fails, but for the one exception of docs/reliability.md's invariant 2: a
    // note purged while several devices had unsynced text edits in it comes back once per such
    // device, as a new note, so a token of a purged note may be in several such new notes.
    const where = new Map(); // token -> the note holding it
    for (const [id, note] of notes) {
      for (const w of `${note.fields.title} ${note.fields.body}`.split(/\s+/)) {
        if (!tokens.has(w)) continue;
        const forks = purged.has(tokens.get(w).id) && !created.includes(id) && !created.includes(where.get(w));
        assert.ok(!where.has(w) || forks, `token ${w} twice (in ${where.get(w)} and ${id})`);
        if (!where.has(w)) where.set(w, id);
      }
      if (!created.includes(id)) {
        const kept = `${note.fields.title} ${note.fields.body}`.split(/\s+/).some((w) => tokens.has(w) && purged.has(tokens.get(w).id));
        assert.ok(kept, `note ${id} (${JSON.stringify(note.fields.body)}) was never created and keeps no text of a purged note`);
      }
    }
    const extra = [...notes.keys()].filter((id) => !created.includes(id)).length;
    assert.ok(extra <= (purged.size ? clients.length + homes.length - 1 : 0), `${extra} notes nobody created (at most one per other device, and only after a purge)`);
    // Every token in its note, or in one of its conflict revisions, unless a later edit replaced
    // it or its note was purged (a fork may keep it elsewhere: counted above, once).
    const revisions = new Map();
    let conflicts = 0;
    for (const [w, { id }] of tokens) {
      if (where.get(w) === id || replaced.has(w) || purged.has(id)) continue;
      if (!revisions.has(id)) revisions.set(id, await revisionTexts(server.base, token, id));
      const kept = revisions.get(id).some((r) => r.conflict && `${r.title} ${r.body}`.split(/\s+/).includes(w));
      assert.ok(kept, `token ${w} (${JSON.stringify(tokens.get(w))}) is neither in note ${id} nor in a conflict revision of it`);
      conflicts++;
    }
    const errors = clients.flatMap((c) => c.errors);
    assert.deepEqual(errors, [], "the JS clients reported errors");
    const fired = clients.reduce((sum, c) => sum + c.transport.counts.answersDropped + c.transport.counts.duplicated + c.transport.counts.dropped + c.transport.counts.pushesLost, 0);
    return { notes: notes.size, tokens: tokens.size, conflicts, purged: purged.size, ...counts, fired, cliFailures: failures.length };
  } finally {
    if (failures.length) trace.push(`noted writes that failed: ${failures.join("; ")}`);
    dispose(clients);
    if (restarting) await restarting;
  }
}

// Seeds that found a bug, run every time (the schedule depends on real time, so a seed does not
// replay exactly; at 24 steps): 4, two JS clients offline while a noted home purged a note, their
// pulls from 0 (no tombstones) left it with them for ever (Web/sync.js now drops what a
// snapshot lacks, as the Swift client does); 27, a JS client trashed a note another device had
// trashed too and stayed "syncing" for good (nothing left to send; Web/sync.js now goes back
// online); 41, a JS client's purge made offline was dropped when the note's newer state came
// in (never sent; the note stayed everywhere else and hidden there; now sent, as the Swift
// client does).
const REGRESSION_SEEDS = STEPS === 24 ? [4, 27, 41] : [];

test("seeded schedules: two JS clients and two noted homes of one user, offline edits on both kinds, heal to the server's state", { skip, timeout: 60000 + (RUNS + REGRESSION_SEEDS.length) * 120000 }, async (t) => {
  const seeds = [...REGRESSION_SEEDS, ...Array.from({ length: RUNS }, (_, run) => SEED + run)];
  for (const seed of seeds) {
    const trace = [];
    const started = Date.now();
    try {
      const r = await schedule(seed, trace);
      const count = (word) => trace.filter((line) => line.includes(word)).length;
      t.diagnostic(`seed ${seed}: ${r.notes} notes, ${r.tokens} edits (${r.conflicts} kept only in a conflict revision), ${r.purged} purged, ${count("offline")} offline steps, ${count("killed and restarted")} restarts, ${count(" sync")} noted syncs, ${r.faults} fault steps (${r.fired} fired), ${r.serverRestarts} server restarts (${r.whileDown} noted commands while it was down, ${r.cliFailures} failed), ${((Date.now() - started) / 1000).toFixed(1)} s`);
    } catch (error) {
      console.log(`mixed-live.test.mjs: failing seed NOTED_WEB_SIM_SEED=${seed} NOTED_MIX_STEPS=${STEPS}; its schedule:\n  ${trace.join("\n  ")}`);
      throw error;
    }
  }
});
