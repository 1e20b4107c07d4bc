// Node clients of the real server for Tests/web/engine-live.test.mjs: a `noted-server` child
// process, accounts and tokens over HTTP, and JavaScript sync engines (Web/sync.js) on
// in-memory stores over real WebSockets, each with a transport that can be taken offline.

import { spawn } from "node:child_process";
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { SyncEngine } from "../../../Web/sync.js";
import { MemoryStore } from "../../../Web/memory-store.js";
import { isPurging, newRecord, noteFields, normalizeFields, refusalOf, syncState, withEdit, withPurge } from "../../../Web/records.js";
import { sameValue } from "../../../Web/record-state.js";
import { uuid } from "../../../Web/text.js";

export const PASSWORD = "correct horse battery";
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `noted-server --port 0 --data <tmpdir>`: resolves with { base, port, dir, stop(), restart() }
 * once it listens. `restart({ signal })` kills it (SIGTERM by default, or SIGKILL) and starts it
 * again on the same data directory and port, so clients reconnect by themselves; restarts are
 * serialized, and one may be awaited while another is under way.
 */
export async function startServer(bin) {
  const dir = mkdtempSync(join(tmpdir(), "noted-web-live-"));
  let proc = null;
  const launch = async (port) => {
    // One issuer whatever the port: its default (http://HOST:PORT) would be port 0's at the first
    // start, and the tokens issued then refused after a restart on the real port.
    const child = spawn(bin, ["--port", String(port), "--data", dir, "--issuer", "http://noted-web-live.invalid", "--auth-attempts-per-minute", "100000"], { stdio: ["ignore", "pipe", "ignore"] });
    const lines = createInterface({ input: child.stdout });
    const first = await new Promise((resolve, reject) => {
      lines.once("line", resolve);
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`noted-server exited (${code}) before listening`)));
    });
    const m = /noted-server listening on (http:\/\/\S+)/.exec(first);
    if (!m) {
      child.kill("SIGKILL");
      throw new Error(`unexpected first line ${JSON.stringify(first)}`);
    }
    lines.on("line", () => {}); // keep reading: a full pipe would block the server
    proc = child;
    return m[1];
  };
  const kill = async (signal) => {
    const child = proc;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill(signal);
    await Promise.race([exited, sleep(3000)]);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await exited;
    }
  };
  const base = await launch(0);
  const port = Number(new URL(base).port);
  let restarting = Promise.resolve();
  const server = {
    base,
    port,
    dir,
    restarts: 0,
    /** Killed with `signal` and started again on the same data and port (retried while the port is not free yet). */
    restart({ signal = "SIGTERM", downMs = 0 } = {}) {
      restarting = restarting.then(async () => {
        await kill(signal);
        if (downMs) await sleep(downMs);
        for (let attempt = 0; ; attempt++) {
          try {
            await launch(port);
            break;
          } catch (error) {
            if (attempt >= 20) throw error;
            await sleep(250);
          }
        }
        server.restarts++;
      });
      return restarting;
    },
    async stop() {
      await restarting.catch(() => {});
      await kill("SIGTERM");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

/**
 * One HTTP request on a connection of its own (node:http, no keep-alive): the parsed JSON.
 * Not `fetch`: node's WebSocket shares fetch's connection pool, and an upgrade sent on a
 * connection kept alive after a `POST /v1/sessions` was refused ("non-101 status code").
 */
function http(base, method, path, { token, body, conflictIfRetried = false } = {}) {
  return httpRetrying(base, method, path, { token, body, conflictIfRetried });
}

/**
 * While the server restarts (a simulation step), a request finds no one listening, or its
 * connection is reset: it is tried again for up to 30 s. A POST is sent again too: a second
 * session is harmless, and an account whose creation was answered by a reset may exist already
 * (`conflictIfRetried`: a 409 after a retry then counts as done).
 */
async function httpRetrying(base, method, path, options) {
  const until = Date.now() + 30000;
  let retried = false;
  for (;;) {
    try {
      return await httpOnce(base, method, path, options);
    } catch (error) {
      if (retried && options.conflictIfRetried && / 409 /.test(error.message)) return null;
      const lost = ["ECONNREFUSED", "ECONNRESET", "EPIPE"].includes(error.code) || /socket hang up/.test(error.message);
      if (!lost || Date.now() > until) throw error;
      retried = true;
      await sleep(200);
    }
  }
}

function httpOnce(base, method, path, { token, body } = {}) {
  const headers = { Connection: "close" };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { method, headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => {
        if (res.statusCode < 200 || res.statusCode > 299) reject(new Error(`${method} ${path}: ${res.statusCode} ${text}`));
        else resolve(text ? JSON.parse(text) : null);
      });
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

export async function createAccount(base, username) {
  await http(base, "POST", "/v1/accounts", { body: { username, password: PASSWORD }, conflictIfRetried: true });
}

/** A new session's access token (POST /v1/sessions), as each device of the user gets its own. */
export async function signIn(base, username) {
  const tokens = await http(base, "POST", "/v1/sessions", { body: { username, password: PASSWORD, device: uuid() } });
  return tokens.access_token;
}

/** GET with the token: the parsed JSON. */
export async function get(base, token, path) {
  return http(base, "GET", path, { token });
}

/** The server's live notes: a Map from id to { rev, fields } (GET /v1/changes from 0). */
export async function serverNotes(base, token) {
  const out = new Map();
  let since = 0;
  for (;;) {
    const page = await get(base, token, `/v1/changes?since=${since}&limit=1000`);
    for (const r of page.records || []) {
      if (r.collection && r.collection !== "notes") continue;
      if (r.deleted) out.delete(r.id);
      else out.set(r.id, { rev: r.rev, fields: normalizeFields(r.fields) });
    }
    since = page.cursor;
    if (!page.more) return out;
  }
}

/** Every text a note's revisions hold, its conflict revisions' included (GET …/revisions). */
export async function revisionTexts(base, token, id) {
  const { revisions } = await get(base, token, `/v1/records/notes/${id}/revisions`);
  const texts = [];
  for (const r of revisions) {
    const one = await get(base, token, `/v1/records/notes/${id}/revisions/${r.rev}${r.conflict ? "?conflict=true" : ""}`);
    texts.push({ conflict: Boolean(r.conflict), rev: r.rev, title: one.fields.title || "", body: one.fields.body || "" });
  }
  return texts;
}

/** A transport to the server that can be taken offline: it then refuses to connect. */
export class SwitchTransport {
  constructor(base) {
    this.base = base;
    this.up = true;
    this.hooks = null;
    this.sockets = new Set();
  }

  connect() {
    if (!this.up) throw new Error("offline");
    const url = new URL("/v1/sync", this.base);
    url.protocol = "ws:";
    const ws = new WebSocket(url);
    this.sockets.add(ws);
    ws.addEventListener("close", () => this.sockets.delete(ws));
    return ws;
  }

  online() {
    return this.up;
  }

  watch(hooks) {
    this.hooks = hooks;
  }

  setOnline(up) {
    if (this.up === up) return;
    this.up = up;
    if (up) this.hooks?.online();
    else {
      this.hooks?.offline();
      for (const ws of this.sockets) ws.close(4000, "offline");
    }
  }
}

/** One JS client: a store, a transport, an engine; edits written as the page writes them (Web/app.js). */
export class Client {
  constructor(name, base, token, { store = new MemoryStore(), transport = new SwitchTransport(base), requestTimeoutMs = undefined } = {}) {
    this.name = name;
    this.base = base;
    this.token = token;
    this.store = store;
    this.transport = transport;
    this.errors = [];
    const auth = {
      accessToken: async () => token,
      invalidateAccessToken() {},
      refusedBecause(message) { throw new Error(`refused: ${message}`); },
    };
    this.engine = new SyncEngine({ store, auth, transport: this.transport, debounceMs: 20, ...(requestTimeoutMs ? { requestTimeoutMs } : {}) });
    this.engine.addEventListener("error", (e) => this.errors.push(e.detail.message));
  }

  start() {
    this.engine.start();
  }

  dispose() {
    this.engine.dispose();
    for (const ws of this.transport.sockets) ws.close(1000);
  }

  get online() {
    return this.transport.up;
  }

  setOnline(up) {
    this.transport.setOnline(up);
  }

  async create(fields) {
    const id = uuid();
    await this.store.update(id, () => newRecord(id, fields));
    this.engine.schedulePush(0);
    return id;
  }

  /** `edit(local)` returns the note's next local fields (null: the note is not here, nothing written). */
  async edit(id, edit) {
    let done = false;
    await this.store.update(id, (current) => {
      if (!current || isPurging(current)) return undefined;
      const local = edit(noteFields(current));
      if (!local) return undefined;
      done = true;
      return withEdit(current, { ...current.local, ...normalizeFields(local) });
    });
    if (done) this.engine.schedulePush();
    return done;
  }

  /** Purges the note as the page's purge does (Web/app.js): a note the server never had goes at once. Whether anything was written. */
  async purge(id) {
    let done = false;
    await this.store.update(id, (current) => {
      if (!current || isPurging(current)) return undefined;
      done = true;
      return withPurge(current); // null (deleted at once) when it never reached the server
    });
    if (done) this.engine.schedulePush(0);
    return done;
  }

  async notes() {
    const out = new Map();
    for (const id of await this.store.keys()) {
      const r = await this.store.get(id);
      if (r && !isPurging(r)) out.set(id, r);
    }
    return out;
  }

  /** What a failure prints: the engine's state, its errors and its records. */
  async describe() {
    const e = this.engine;
    const records = [...(await this.notes()).values()].map((r) => {
      const state = syncState(r);
      return {
        id: r.id.slice(0, 8), body: r.local.body, rev: r.rev, edited: state.edited, inflight: Boolean(state.inflight),
        next: state.next, refusal: refusalOf(r),
      };
    });
    return `${this.name}: ${e.state}, ready ${e.ready}, ${e.pending.size} unanswered, online ${this.online}, errors ${JSON.stringify(this.errors)}, records ${JSON.stringify(records)}`;
  }

  /** Online, welcomed, nothing unanswered and nothing in the outbox. */
  async quiet() {
    const e = this.engine;
    return e.state === "online" && e.ready && e.pending.size === 0 && (await this.store.pendingRecords()).length === 0;
  }
}

/**
 * Waits until every client is quiet and holds exactly the server's notes (ids, revs, fields);
 * returns { server, differences } (differences empty when healed) after `timeoutMs` at most.
 */
export async function heal(clients, base, token, timeoutMs = 20000) {
  for (const c of clients) c.setOnline(true);
  const until = Date.now() + timeoutMs;
  let differences = [];
  let server = new Map();
  for (;;) {
    differences = [];
    const quiet = await Promise.all(clients.map((c) => c.quiet()));
    clients.forEach((c, i) => quiet[i] || differences.push(`${c.name}: not quiet (${c.engine.state}, ${c.engine.pending.size} unanswered)`));
    if (differences.length === 0) {
      server = await serverNotes(base, token);
      for (const c of clients) differences.push(...compare(c.name, await c.notes(), server));
      if (differences.length === 0) return { server, differences };
    }
    if (Date.now() > until) return { server, differences };
    await sleep(50);
  }
}

function compare(name, notes, server) {
  const out = [];
  for (const [id, s] of server) {
    const r = notes.get(id);
    if (!r) out.push(`${name}: lacks ${id}`);
    else if (r.rev !== s.rev) out.push(`${name}: ${id} at rev ${r.rev}, the server at ${s.rev}`);
    else if (!sameValue(noteFields(r), s.fields)) out.push(`${name}: ${id} holds ${JSON.stringify(r.local.body)}, the server ${JSON.stringify(s.fields.body)}`);
  }
  for (const id of notes.keys()) if (!server.has(id)) out.push(`${name}: holds ${id}, which the server has not`);
  return out;
}

/** mulberry32: the simulations' small seeded generator (a function returning [0, 1)). */
export function random(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
