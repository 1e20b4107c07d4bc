// The sync engine (docs/protocol.md): hello, pull to the end, resend in-flight changes, push dirty
// notes with at most one change in flight per note, apply broadcasts, reconnect with backoff.
//
// It holds no rule about what happens to a record: every pulled record, broadcast, ack, reject
// (and a change too large to send), snapshot end and discard goes through Web/records.js's
// `transition`, the Swift client's `RecordTransition` (pinned to it by
// Tests/web/vectors/record-state.json), whose outcome the store writes and whose effect the
// engine tells (docs/architecture.md, "One record, two clients"). What is left here is the
// connection, hello and welcome, paging, the outbox (a change built from a record's local
// fields against its shadow, stored in flight before it is sent), timers and the upload gate.
//
// The engine touches no IndexedDB, DOM or WebSocket of its own (docs/reliability.md, "The
// engine outside the page"): it is given
// - `store`: the records, the tombstones, the outbox, the meta (cursor, device): getMeta,
//   setMeta, keys, pendingRecords, update, commit, storePage, as Web/db.js's LocalStore
//   (IndexedDB, the page) and Web/memory-store.js's MemoryStore (node) implement them;
// - `transport`: the connection to the server and the network's state (Web/transport.js);
// - `auth`: the access token (Web/auth.js: accessToken, invalidateAccessToken, refusedBecause,
//   refreshSoon);
// - `blobs` (set later, optional): the uploads a change adding a file waits for;
// - `clock` (optional): the time and the timers (`now`, `setTimeout`, `clearTimeout`,
//   `setInterval`, `clearInterval`), the real ones by default; node tests pass a virtual clock
//   (Tests/web/support/virtual-clock.mjs) and move time on instead of waiting for it.

import { changeID, uuid } from "./text.js";
import { isPending, newRecord, noteFields, refusalOf, spaceOf, syncState, transition } from "./records.js";
import { DEFAULT_LIMITS, LEFT_SPACE, SyncState, applyExactly, changeOps } from "./record-state.js";
import { changeAddsShas, parseElement, shaOf } from "./elements.js";
import { OPEN } from "./transport.js";

const CLIENT = "noted-web/0.1.0";
const PAGE = 500;
const PROTOCOL = 2;

export { LEFT_SPACE };

/** The meta key of a space's pull cursor (null: the personal space's). */
export const cursorKey = (space) => (space ? `cursor:${space}` : "cursor");
const snapshotKey = (space) => (space ? `snapshot:${space}` : "snapshot");

/**
 * `decide` (a store's, see Web/memory-store.js) with the outcome's records placed in a space:
 * `space` (null: the personal space), or, undefined, the space of the record held. `transition`
 * knows nothing of spaces (the Swift client keeps a record's space beside it, too).
 */
function inSpace(decide, space) {
  return (current, buried) => {
    const outcome = decide(current, buried);
    if (!outcome) return outcome;
    const where = space === undefined ? spaceOf(current) : space;
    const place = (record) => {
      if (!record) return record;
      const { space: _, ...rest } = record;
      return where ? { ...rest, space: where } : rest;
    };
    return { ...outcome, record: place(outcome.record), fork: place(outcome.fork) };
  };
}

// The real time and timers. Wrapped, not referenced: a browser's `setTimeout` called as a
// method of another object throws ("Illegal invocation").
const REAL_CLOCK = {
  now: () => Date.now(),
  setTimeout: (run, ms) => setTimeout(run, ms),
  clearTimeout: (id) => clearTimeout(id),
  setInterval: (run, ms) => setInterval(run, ms),
  clearInterval: (id) => clearInterval(id),
};

/** A stored change's body read back, or null when it is not a JSON object. */
function parseBody(text) {
  try {
    const body = JSON.parse(text);
    return body && typeof body === "object" && !Array.isArray(body) ? body : null;
  } catch {
    return null;
  }
}

export class SyncEngine extends EventTarget {
  constructor({ store, auth, transport, clock = REAL_CLOCK, user = null, debounceMs = 300, requestTimeoutMs = 15000 }) {
    super();
    this.store = store;
    this.transport = transport;
    this.clock = clock;
    this.auth = auth;
    this.user = user; // the account whose database `store` is: a welcome for another is refused
    this.debounceMs = debounceMs;
    this.requestTimeoutMs = requestTimeoutMs;
    this.ws = null;
    this.state = "offline"; // offline | connecting | syncing | online
    this.ready = false; // welcomed and caught up: may push
    this.attempt = 0;
    this.pushTimer = null;
    this.reconnectTimer = null;
    this.pending = new Map(); // rid -> { kind, ids, sentAt, since }
    this.pushing = false; // a pushDirty runs
    this.pushAgain = false; // asked for while one ran: another after it
    this.rid = 0;
    this.stopped = true;
    this.connecting = false; // awaiting the token for a connection
    this.limits = { maxChangesPerPush: 100 };
    // Records with a change sent on this connection and not answered, with its ccid (a
    // change in flight not here is resent unchanged by the next push).
    this.inFlight = new Map();
    this.pulling = false; // a pull under way, to its last page
    this.pullAgain = false; // and another wanted once it ends (a broadcast that did not apply)
    this.progress = null; // { from, to, cursor, notes } while pulling: how far the pull has come
    this.latestSeq = 0; // the welcome's seq
    // Protocol 2 (docs/protocol.md, "Spaces"): the space of the pull under way or the last one
    // (null: the personal space), the spaces whose pull waits for it (one pull at a time, the
    // personal space first), the shared spaces listed (id -> the server's Space object; null
    // before the first welcome or `spaces` message), and the seq a broadcast of a space was
    // heard at while not caught up.
    this.pullSpace = null;
    this.pullQueue = [];
    this.spaces = null;
    this.leftSpaces = new Set(); // spaces once listed, no longer (their records leave this device)
    this.storingPages = 0; // pages being stored (the next one is asked for meanwhile)
    this.pullFailed = false; // a pull asked ahead was refused while its page before was stored
    this.missed = new Map();
    // Records whose server state this engine learned from a broadcast or an ack, with that
    // change's seq, not yet covered by a stored page's cursor: a snapshot read before that
    // change does not name them, and must not drop them (see `dropAbsent`).
    this.heardSeqs = new Map();
    // Attachments (Web/attachments.js): { blocking(shas), missing(shas) }: a change adding a file
    // waits for its upload; a `missing_blob` reject uploads it again. Null: no gate.
    this.blobs = null;
    transport.watch?.({ online: () => this.kick(), offline: () => this.drop("browser offline") });
    this.watchdog = clock.setInterval(() => this.checkTimeouts(), 1000);
  }

  emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  setState(state) {
    if (this.state !== state) {
      this.state = state;
      this.emit("state", { state });
    }
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    this.clock.clearTimeout(this.reconnectTimer);
    if (this.ws) this.ws.close(1000);
    this.ws = null;
    this.setState("offline");
  }

  /** Stopped for good: its timers cleared too (a node process ends once every engine is disposed). */
  dispose() {
    this.stop();
    this.clock.clearTimeout(this.pushTimer);
    this.clock.clearInterval(this.watchdog);
  }

  /** Try to connect now (after a network change or a local edit while offline). */
  kick() {
    if (this.stopped) return;
    if (!this.ws) {
      this.clock.clearTimeout(this.reconnectTimer);
      this.connect();
    }
  }

  async connect() {
    // One connection at a time: a kick (an edit, the network back) while the token is being
    // fetched must not open a second one, and a stop meanwhile opens none (issue 19: found by
    // the node tests; the connection opened first was left open and unused).
    if (this.stopped || this.ws || this.connecting) return;
    this.connecting = true;
    let token;
    try {
      token = await this.auth.accessToken().catch(() => null);
    } finally {
      this.connecting = false;
    }
    if (this.stopped || this.ws) return;
    if (!token) {
      this.setState("offline");
      this.scheduleReconnect();
      return;
    }
    this.setState("connecting");
    let ws;
    try {
      ws = this.transport.connect();
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    this.ready = false;
    this.welcomed = false;
    this.connectedAt = this.clock.now();
    this.pending.clear();
    this.inFlight.clear();
    this.pulling = false;
    this.pullAgain = false;
    this.pullSpace = null;
    this.pullQueue = [];
    this.pullFailed = false;
    this.storingPages = 0;
    this.missed.clear();
    ws.onopen = async () => {
      const device = await this.deviceId();
      this.send({ type: "hello", protocol: PROTOCOL, token, device, client: CLIENT });
    };
    ws.onmessage = (event) => this.onMessage(event.data).catch((e) => this.emit("error", { message: String(e) }));
    ws.onclose = (event) => {
      if (this.ws === ws) {
        this.ws = null;
        this.ready = false;
        this.setState("offline");
        if (event.code === 4001) this.auth.invalidateAccessToken();
        this.scheduleReconnect();
      }
    };
    ws.onerror = () => {};
  }

  drop(reason) {
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      this.ready = false;
      try { ws.close(4000, reason.slice(0, 100)); } catch {}
      this.setState("offline");
      this.scheduleReconnect();
    }
  }

  scheduleReconnect() {
    if (this.stopped) return;
    this.clock.clearTimeout(this.reconnectTimer);
    const base = Math.min(30000, 500 * 2 ** Math.min(this.attempt, 6));
    const delay = base / 2 + Math.random() * base / 2;
    this.attempt++;
    this.reconnectTimer = this.clock.setTimeout(() => this.connect(), this.transport.online?.() === false ? Math.max(delay, 2000) : delay);
  }

  async deviceId() {
    let id = await this.store.getMeta("device");
    if (!id) {
      id = uuid();
      await this.store.setMeta("device", id);
    }
    return id;
  }

  send(message) {
    if (!this.ws || this.ws.readyState !== OPEN) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  request(message, kind, ids = []) {
    const rid = String(++this.rid);
    this.pending.set(rid, { kind, ids, sentAt: this.clock.now(), since: message.since, space: message.space ?? null });
    if (!this.send({ ...message, rid })) this.pending.delete(rid);
    return rid;
  }

  checkTimeouts() {
    const now = this.clock.now();
    // A handshake or a hello never answered is given up like a request: a refused connection
    // may fire `error` and never `close` (node 20's WebSocket), and a stopped server answers
    // nothing (found by the node simulation: clients stayed `connecting` after a server restart).
    if (this.ws && !this.welcomed && now - this.connectedAt > this.requestTimeoutMs) {
      this.drop("no welcome");
      return;
    }
    for (const entry of this.pending.values()) {
      if (now - entry.sentAt > this.requestTimeoutMs) {
        this.drop("request timed out");
        return;
      }
    }
    this.auth.refreshSoon?.().then((token) => {
      if (token && this.ws && this.ready) this.send({ type: "reauth", token });
    }).catch(() => {});
  }

  async onMessage(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    const entry = message.rid !== undefined ? this.pending.get(String(message.rid)) : undefined;
    switch (message.type) {
      case "welcome":
        if (this.user && message.user && message.user !== this.user) {
          // Never sync one account's database with another's notes (docs/client.md).
          this.emit("error", { message: "The server signed this session in as another account; not syncing." });
          this.stop();
          return;
        }
        this.attempt = 0;
        this.welcomed = true;
        if (message.limits) this.limits = message.limits;
        if (Number.isSafeInteger(message.seq)) this.latestSeq = message.seq;
        if (!this.ready) {
          this.setState("syncing");
          // The personal space first, then each shared space whose seq moved past its cursor.
          this.pulling = true; // no pull starts before the personal space's
          const moved = Array.isArray(message.spaces) ? await this.listSpaces(message.spaces) : [];
          for (const space of moved) if (!this.pullQueue.includes(space)) this.pullQueue.push(space);
          await this.pull(null);
        } else if (Array.isArray(message.spaces)) {
          for (const space of await this.listSpaces(message.spaces)) await this.requestPull(space);
        }
        break;
      case "spaces":
        if (Array.isArray(message.spaces)) {
          for (const space of await this.listSpaces(message.spaces)) await this.requestPull(space);
        }
        break;
      case "changes":
        if (message.rid !== undefined) this.pending.delete(String(message.rid));
        await this.onChanges(message, entry ? entry.since : undefined, entry ? entry.space : (message.space ?? null));
        break;
      case "ack":
      case "reject":
        this.answered(message, entry);
        this.afterAnswer(...(await this.onResult(message)));
        break;
      case "change":
        await this.onBroadcast(message);
        break;
      case "error":
        if (message.rid !== undefined) this.pending.delete(String(message.rid));
        if (entry && entry.kind === "push") {
          // The whole push was refused (too_large, rate_limited): its changes go again later.
          for (const id of entry.ids) this.inFlight.delete(id);
          this.schedulePush(this.retryDelay());
        }
        if (entry && entry.kind === "pull") {
          // A pull refused (a shared space's `not_found`: the user left it meanwhile; or any
          // error, the personal space's too): the next space queued, or caught up. One asked
          // ahead while a page is still being stored: that page's end moves on instead.
          if (this.storingPages > 0) this.pullFailed = true;
          else {
            this.pulling = false;
            await this.pullFinished();
          }
        }
        this.emit("error", { message: message.message || message.code });
        if (message.code === "unauthenticated") this.auth.refusedBecause(message.message);
        else if (message.code === "token_expired") this.auth.invalidateAccessToken();
        break;
    }
  }

  /** An ack or reject arrived: its push waits for one answer less (and, alive, gets a fresh deadline). */
  answered(message, entry) {
    if (entry) {
      entry.ids = entry.ids.filter((id) => id !== message.id);
      if (entry.ids.length === 0) this.pending.delete(String(message.rid));
      else entry.sentAt = this.clock.now();
    }
    if (this.inFlight.get(message.id) === message.ccid) this.inFlight.delete(message.id);
  }

  /**
   * After an answer was taken in (`effect`, the transition's): a pull when the record's state
   * must be learned first; the change kept in flight is resent after a while (`retryLater`);
   * else the next push, unless a full push's worth of changes still waits for answers.
   */
  afterAnswer(effect, space = null) {
    if (effect.needsPull) this.requestPull(space);
    if (effect.retryLater) {
      this.schedulePush(this.retryDelay());
      return;
    }
    if (this.inFlight.size >= Math.max(1, this.limits.maxChangesPerPush || 100)) return;
    this.schedulePush(0);
  }

  /** How long a change kept in flight (`rate_limited`, a file to upload again) waits: 1–2 s, as the Swift client's. */
  retryDelay() {
    return 1000 + Math.random() * 1000;
  }

  /** What `transition` needs besides the record and the event: the time, new ids, the server's limits. */
  rules() {
    return { now: this.clock.now(), newID: uuid, limits: { ...DEFAULT_LIMITS, ...this.limits } };
  }

  /** A pull of `space` (null: the personal space) from its stored cursor. */
  async pull(space = this.pullSpace) {
    this.pulling = true;
    this.pullAgain = false;
    this.resetIds = null;
    this.pullSpace = space;
    let cursor = (await this.store.getMeta(cursorKey(space))) || 0;
    // A snapshot interrupted halfway (the connection lost between its pages) is pulled again
    // from 0: resumed from its last page's cursor, it would never drop what it lacks.
    if (cursor !== 0 && (await this.store.getMeta(snapshotKey(space)))) {
      await this.store.setMeta(cursorKey(space), 0);
      cursor = 0;
    }
    const latest = space ? (this.spaces?.get(space)?.seq ?? cursor) : this.latestSeq;
    this.progress = { from: cursor, to: Math.max(latest, cursor), cursor, notes: 0, space };
    // A pull from 0 starts a snapshot and its pages continue it: the server answers them
    // bounded and never with a reset (docs/protocol.md, section 8, "Pull"). It carries no
    // tombstones, so at its end the records none of its pages named are told they are absent
    // (`dropAbsent`, as the Swift client's: found by its simulation, seeds 66 and 84).
    this.snapshot = cursor === 0;
    if (this.snapshot) {
      this.resetIds = new Set();
      await this.store.setMeta(snapshotKey(space), true);
    }
    this.request({ type: "pull", since: cursor, limit: PAGE, ...(space ? { space } : {}), ...(this.snapshot ? { snapshot: true } : {}) }, "pull");
  }

  /**
   * A pull of `space` (null: the personal space), unless one is under way: then another once it
   * ends, of the same space again or queued after it (the Swift machine's `requestPull`).
   */
  async requestPull(space = null) {
    if (this.pulling) {
      if (space === this.pullSpace) this.pullAgain = true;
      else if (!this.pullQueue.includes(space)) this.pullQueue.push(space);
      return;
    }
    await this.pull(space);
  }

  /** A pull ended: the next space waiting is pulled; none: caught up, the outbox goes. */
  async pullFinished() {
    while (this.pullQueue.length) {
      const space = this.pullQueue.shift();
      if (space !== null && this.spaces && !this.spaces.has(space)) continue; // left meanwhile
      await this.pull(space);
      return;
    }
    this.ready = true;
    this.schedulePush(0);
  }

  /**
   * The user's spaces as the server lists them (`welcome`, `spaces`): kept (meta "spaces", for
   * the page), the cursors of spaces no longer listed dropped, and so are their records, but
   * for unacknowledged edits, kept refused (`orphans`). Returns the shared spaces whose seq is
   * past this device's cursor (a space never seen: from 0), in the server's order.
   */
  async listSpaces(list) {
    // Every list names the personal space: one that does not is not taken (nothing dropped).
    if (!list.some((s) => s && typeof s === "object" && s.personal === true)) return [];
    const shared = list.filter((s) => s && typeof s === "object" && !s.personal && typeof s.id === "string" && s.id);
    const before = this.spaces ? [...this.spaces.keys()] : ((await this.store.getMeta("spaces")) || []).filter((s) => s && !s.personal).map((s) => s.id);
    this.spaces = new Map(shared.map((s) => [s.id, s]));
    for (const id of before) if (!this.spaces.has(id)) this.leftSpaces.add(id);
    for (const id of this.spaces.keys()) this.leftSpaces.delete(id);
    await this.store.setMeta("spaces", list.filter((s) => s && typeof s === "object" && typeof s.id === "string"));
    // The cursors (and snapshot marks) of every space not listed, whatever was listed before.
    for (const key of await this.store.metaKeys()) {
      const at = key.indexOf(":");
      if (at < 0 || !["cursor", "snapshot"].includes(key.slice(0, at))) continue;
      if (!this.spaces.has(key.slice(at + 1))) await this.store.deleteMeta(key);
    }
    this.pullQueue = this.pullQueue.filter((space) => space === null || this.spaces.has(space));
    await this.backInSpaces();
    await this.orphans();
    const moved = [];
    for (const space of shared) {
      const cursor = (await this.store.getMeta(cursorKey(space.id))) || 0;
      if (!Number.isSafeInteger(space.seq) || space.seq > cursor) moved.push(space.id);
    }
    this.emit("spaces", { spaces: list });
    return moved;
  }

  /**
   * The records of spaces not listed (the user left, was removed, or the space was deleted)
   * leave this device, except edits the server has not acknowledged: those are kept, refused,
   * never sent to a space the user is not in, for the user to copy to their personal space
   * (`copyToPersonalSpace`) or discard. One with a change in flight waits for its answer.
   */
  async orphans() {
    if (!this.spaces) return;
    const effects = [];
    const written = new Map();
    for (const held of await this.store.sharedRecords(new Set(this.spaces.keys()))) {
      if (this.spaces.has(held.space)) continue;
      const wrote = await this.store.commit(held.id, (current) => {
        if (!current || !spaceOf(current) || this.spaces.has(spaceOf(current))) return undefined;
        const state = syncState(current);
        // Edits of a space never listed here (created or joined just now, its list still to
        // come) are the server's to judge: only those of a space once listed are held.
        if (!this.leftSpaces.has(spaceOf(current)) && (isPending(current) || refusalOf(current) !== null)) return undefined;
        if ((!isPending(current) && refusalOf(current) === null) || (state.purging && !state.inflight)) {
          // Nothing of the user's to keep (a note being deleted included).
          effects.push({ ...effectOf({ removed: [current.id] }) });
          return { record: null, buried: null, fork: null };
        }
        if (state.inflight || refusalOf(current) !== null) return undefined;
        const refused = SyncState.outOfSpace(state);
        const effect = effectOf({ changed: [current.id] });
        if (refused.refusal !== null) effect.refused.push([current.id, refused.refusal]);
        effects.push(effect);
        return { record: { ...current, sync: SyncState.stored(refused) }, buried: null, fork: null };
      });
      for (const [key, value] of wrote) written.set(key, value);
    }
    if (effects.length) this.tell(effects, written, true);
  }

  /**
   * The records kept refused because their space was left (`orphans`, a shared space's
   * `not_found`) whose space is listed again: their edits go out (the Swift `backInSpace`).
   */
  async backInSpaces() {
    const effects = [];
    const written = new Map();
    for (const held of await this.store.pendingRecords()) {
      if (!spaceOf(held) || !this.spaces.has(spaceOf(held)) || syncState(held).refusal === null) continue;
      const wrote = await this.store.commit(held.id, (current) => {
        if (!current || !this.spaces.has(spaceOf(current))) return undefined;
        const state = syncState(current);
        const back = SyncState.backInSpace(state);
        if (back === state) return undefined;
        effects.push(effectOf({ changed: [current.id] }));
        return { record: { ...current, sync: SyncState.stored(back) }, buried: null, fork: null };
      });
      for (const [key, value] of wrote) written.set(key, value);
    }
    if (effects.length) this.tell(effects, written, true);
  }

  /**
   * A record of a space the user left, kept with edits (refused): a new note in the personal
   * space with its fields, and the original dropped (the Swift client's `copyToPersonalSpace`).
   * Returns the new note's id.
   */
  async copyToPersonalSpace(id) {
    const held = await this.store.get(id);
    if (!held) throw new Error("no such note here");
    const copy = uuid();
    await this.store.update(copy, () => newRecord(copy, noteFields(held)));
    const dropped = await this.store.update(id, (current) => (current && !syncState(current).inflight ? null : undefined));
    const written = new Map([[copy, await this.store.get(copy)]]);
    if (dropped === null) written.set(id, null);
    this.emit("records", { ids: [id, copy], records: written, moved: [], added: [copy], remote: false });
    this.schedulePush(0);
    return copy;
  }

  async onChanges(message, since, space = this.pullSpace) {
    const unlisted = () => space !== null && this.spaces !== null && !this.spaces.has(space);
    if (unlisted()) {
      // A page of a space the `spaces` message removed while it was on its way: not taken, and
      // no page after it asked for; the pull ends there (after the page before it, if that one
      // is still being stored: its end does it).
      if (this.pullSpace === space && this.pulling && this.storingPages === 0) {
        this.pulling = false;
        this.resetIds = null;
        this.progress = null;
        await this.pullFinished();
      }
      return;
    }
    if (message.reset && !this.resetIds) {
      this.resetIds = new Set();
      await this.store.setMeta(snapshotKey(space), true);
    }
    // Records of another collection (another app of the account) are not this app's.
    const records = (message.records || []).filter((record) => (record.collection ?? "notes") === "notes");
    const rules = this.rules();
    const results = [];
    const apply = records.map((record, i) => {
      if (this.resetIds) this.resetIds.add(record.id);
      return [record.id, inSpace((current, buried) => (results[i] = transition(current ?? null, { type: "record", record, buried }, rules)), space)];
    });
    // The next page is asked for now, while this one is stored: the server's work and the
    // store's overlap. Pages are stored in the order they came (each store's transaction is
    // created here, in message order), and a page is stored only onto the cursor it was
    // asked from: if one fails, the ones after it fail too and the pull starts again.
    const ws = this.ws;
    if (message.reset) this.snapshot = true;
    if (!message.more) this.snapshot = false;
    if (message.more) this.request({ type: "pull", since: message.cursor, limit: PAGE, ...(space ? { space } : {}), ...(this.snapshot ? { snapshot: true } : {}) }, "pull");
    let written;
    this.storingPages += 1;
    try {
      written = await this.store.storePage(apply, message.cursor, since, cursorKey(space));
    } catch (error) {
      if (this.ws === ws) this.drop("could not store a page");
      throw error;
    } finally {
      this.storingPages -= 1;
    }
    if (unlisted()) {
      // The space was removed while the page was stored: its cursor goes, and so do its
      // records (but unacknowledged edits, kept refused: `orphans`).
      await this.store.deleteMeta(cursorKey(space));
      await this.store.deleteMeta(snapshotKey(space));
      await this.orphans();
    }
    const failed = this.pullFailed && this.storingPages === 0;
    if (failed) this.pullFailed = false;
    for (const [id, seq] of this.heardSeqs) if (seq <= message.cursor) this.heardSeqs.delete(id);
    if (this.progress) {
      this.progress.notes += records.length;
      this.progress.cursor = message.cursor;
      if (!message.more) this.progress = null;
    }
    // `records` holds what was stored: listeners need not read the page back.
    this.tell(results.filter(Boolean).map((r) => r.effect), written, true);
    if (this.ws !== ws) return;
    if (unlisted() || (failed && message.more)) {
      // Left meanwhile, or the page asked ahead was refused: the pull ends here (once: a page
      // after this one may have ended it already).
      if (this.pullSpace !== space || !this.pulling) return;
      this.pulling = false;
      this.resetIds = null;
      this.progress = null;
      await this.pullFinished();
      return;
    }
    if (message.more) return;
    this.pulling = false;
    if (this.resetIds) {
      const keep = this.resetIds;
      this.resetIds = null;
      await this.dropAbsent(keep, message.cursor, space);
    }
    const missed = this.missed.get(space) || 0;
    this.missed.delete(space);
    if (this.pullAgain || missed > message.cursor) {
      await this.pull(space);
      return;
    }
    await this.pullFinished();
  }

  /**
   * The end of a snapshot (a pull from 0, or a `reset`), stored up to `cursor`: each record none
   * of its pages named (`keep`) is told so (`absentFromSnapshot`: purged on the server, or, with
   * a change in flight, purged if that change's ack is older than the snapshot). Records heard
   * of in a broadcast or an ack newer than the snapshot are kept (the page was read before that
   * change). Only records of the snapshot's own space (`space`, null: the personal space).
   */
  async dropAbsent(keep, cursor, space = null) {
    for (const id of this.heardSeqs.keys()) keep.add(id);
    const rules = this.rules();
    const effects = [];
    const written = new Map();
    for (const id of await this.store.keys()) {
      if (keep.has(id)) continue;
      let result = null;
      result = null;
      const wrote = await this.store.commit(id, inSpace((current) => {
        if (current && spaceOf(current) !== space) return undefined;
        return (result = transition(current ?? null, { type: "absentFromSnapshot", cursor }, rules));
      }));
      for (const [key, value] of wrote) written.set(key, value);
      if (result) effects.push(result.effect);
    }
    await this.store.deleteMeta(snapshotKey(space));
    this.tell(effects, written, true);
  }

  /** Push soon: after the debounce for typing, at once for other edits. */
  schedulePush(delay = this.debounceMs) {
    this.clock.clearTimeout(this.pushTimer);
    this.pushTimer = this.clock.setTimeout(() => this.pushDirty().catch((e) => this.emit("error", { message: String(e) })), delay);
    if (!this.ws) this.kick();
  }

  /**
   * The outbox (the Swift client's `outbox` and the machine's `composed`): first every change
   * in flight that was not sent on this connection, resent unchanged; then a new change for
   * each record with edits and none in flight, stored in flight before it is sent. At most four
   * pushes' worth at a time (the rest after the answers); a change adding a file still
   * uploading waits for it; one larger than the server's messages is refused here.
   */
  async pushDirty() {
    if (!this.ready || !this.ws) return;
    // One at a time: a second run before the first has marked its changes in flight would
    // send them again (answered as duplicates, but counted against the push rate).
    if (this.pushing) {
      this.pushAgain = true;
      return;
    }
    this.pushing = true;
    try {
      await this.pushOutbox();
    } finally {
      this.pushing = false;
      if (this.pushAgain) {
        this.pushAgain = false;
        this.schedulePush(0);
      }
    }
  }

  async pushOutbox() {
    const max = Math.max(1, this.limits.maxChangesPerPush || 100);
    const limit = max * 4;
    let outbox = await this.store.pendingRecords();
    // A new edit of a record of a space left is never sent: held, refused (`orphans`). A change
    // in flight goes again whatever its space: the server's answer (an ack, or `not_found`,
    // which keeps it refused) settles it. A space never listed here (created or joined just
    // now, its `spaces` message still to come) is the server's to judge.
    const left = (r) => spaceOf(r) && this.leftSpaces.has(spaceOf(r)) && !syncState(r).inflight;
    if (outbox.some((r) => left(r) && isPending(r))) {
      await this.orphans();
      outbox = outbox.filter((r) => !left(r));
    }
    const changes = [];
    const effects = [];
    const written = new Map();
    for (const record of outbox) {
      if (changes.length >= limit) break;
      const change = syncState(record).inflight;
      if (!change || this.inFlight.has(record.id)) continue;
      // A body that does not read (a damaged database) is skipped, as the Swift client does.
      const body = parseBody(change.body);
      if (!body || (await this.waitsForUpload(body, record))) continue;
      changes.push({ id: record.id, ccid: change.ccid, body: change.body });
    }
    let raced = false;
    for (const record of outbox) {
      if (changes.length >= limit) break;
      const state = syncState(record);
      if (!state.edited || state.inflight) continue;
      const made = await this.newChange(record, state, effects, written);
      if (made === undefined) raced = true;
      else if (made) changes.push(made);
    }
    if (raced) this.schedulePush(); // a record written meanwhile: its change next time
    await this.sendChanges(changes, max, effects, written);
    this.tell(effects, written, false);
    this.setState(this.pending.size ? "syncing" : "online");
    this.emit("pending");
  }

  /**
   * A new change for `record` (read from the outbox, its `state`), written as in flight; null
   * when there is none to send now (a purge of a note the server never had deletes it, edits
   * that cancel out leave it synced, a file still uploading holds it), undefined when the
   * record changed since it was read (its change then waits for the next push).
   */
  async newChange(record, state, effects, written) {
    const baseRev = SyncState.nextBaseRev(state, record.rev);
    const change = { ccid: changeID(), collection: record.collection, id: record.id, baseRev };
    // A record of a shared space names it (protocol 2); absent: the personal space.
    if (spaceOf(record)) change.space = spaceOf(record);
    let sent = null;
    let next;
    if (state.purging && record.rev === 0) {
      next = null;
    } else if (state.purging) {
      Object.assign(change, { op: "delete", fields: {} });
    } else {
      const ops = changeOps(record.shadow ?? {}, record.local, record.rev === 0 || SyncState.sendsTextAsSet(state));
      if (Object.keys(ops).length === 0 && record.rev !== 0) {
        next = { ...record, sync: SyncState.stored(SyncState.nothingToSend(state)) };
      } else {
        Object.assign(change, { op: "upsert", fields: ops });
        if (await this.waitsForUpload(change, record)) return null;
        sent = applyExactly(ops, record.shadow ?? {});
      }
    }
    if (next === undefined) {
      const inflight = { ccid: change.ccid, baseRev, body: JSON.stringify(change), sent, newest: null, absentAtSeq: null };
      next = { ...record, sync: SyncState.stored(SyncState.send(state, inflight)) };
    }
    const stored = await this.store.update(record.id, (current) => (current && current.lv === record.lv ? next : undefined));
    if (stored === undefined) return undefined;
    written.set(record.id, stored);
    if (stored === null) effects.push(effectOf({ removed: [record.id] }));
    else if (!change.op) effects.push(effectOf({ changed: [record.id] }));
    return change.op ? { id: record.id, ccid: change.ccid, body: JSON.stringify(change) } : null;
  }

  /**
   * Sends `changes` (`{ id, ccid, body }`) in pushes of at most `max` changes and the server's
   * message size; a change larger than a message can hold is refused as if the server had
   * answered `too_large` (the Swift machine's `refuse`), its outcome added to `effects`.
   */
  async sendChanges(changes, max, effects, written) {
    const budget = Number.isSafeInteger(this.limits.maxMessageBytes) ? this.limits.maxMessageBytes - 64 : Infinity;
    let batch = [];
    let size = 0;
    const flush = () => {
      if (batch.length === 0) return;
      const rid = this.request({ type: "push", changes: batch.map((c) => JSON.parse(c.body)) }, "push", batch.map((c) => c.id));
      if (this.pending.has(rid)) for (const c of batch) this.inFlight.set(c.id, c.ccid);
      batch = [];
      size = 0;
    };
    for (const change of changes) {
      const bytes = budget === Infinity ? 0 : new TextEncoder().encode(change.body).length + 1;
      if (bytes > budget) {
        const reason = `the change is larger than the server's ${this.limits.maxMessageBytes}-byte message limit`;
        const event = { type: "refused", ccid: change.ccid, code: "too_large", message: reason, current: null };
        const [effect, wrote] = await this.decide(change.id, event);
        effects.push(effect);
        for (const [key, value] of wrote) written.set(key, value);
        continue;
      }
      if (batch.length >= max || size + bytes > budget) flush();
      batch.push(change);
      size += bytes;
    }
    flush();
  }

  /** Whether `change` (of `record`) adds a file whose upload is still to come: it then waits. */
  async waitsForUpload(change, record) {
    if (!this.blobs) return false;
    const before = record.shadow && Array.isArray(record.shadow.attachments) ? record.shadow.attachments : [];
    const added = changeAddsShas(change, before);
    return added.length > 0 && (await this.blobs.blocking(added)).length > 0;
  }

  /** An ack or a reject of a change of ours, through `transition`: what it did (its effect). */
  async onResult(message) {
    if (typeof message.id !== "string" || typeof message.ccid !== "string") return [effectOf({}), null];
    if (message.type === "ack" && Number.isSafeInteger(message.seq)) this.heard(message.id, message.seq);
    const event = message.type === "ack" ? { type: "ack", message } : {
      type: "refused", ccid: message.ccid, code: String(message.code || "refused"), message: String(message.message || ""),
      current: message.current ?? null, absentAttachment: message.code === "missing_blob" ? await this.absentAttachment(message.id) : null,
    };
    const space = spaceOf(await this.store.get(message.id));
    const [effect, written] = await this.decide(message.id, event);
    this.tell([effect], written, false);
    return [effect, space];
  }

  /**
   * After `missing_blob`: the files the change in flight adds that this browser holds are
   * marked to upload again (Web/attachments.js); the name of one it lacks too (nobody has it:
   * the change is then refused, saying which), or null (every one can go up again: the change
   * waits for them, kept in flight). Without the upload gate (node), no file can go up again.
   */
  async absentAttachment(id) {
    const record = await this.store.get(id);
    const change = record && syncState(record).inflight;
    if (!change) return null;
    const before = record.shadow && Array.isArray(record.shadow.attachments) ? record.shadow.attachments : [];
    const body = parseBody(change.body);
    if (!body) return null;
    const shas = changeAddsShas(body, before);
    const lost = this.blobs ? await this.blobs.missing(shas) : shas;
    const op = body.fields && body.fields.attachments;
    const elements = op ? op.add || op.set || [] : [];
    const element = elements.find((e) => lost.includes(shaOf(e)));
    return element ? parseElement(element).name : null;
  }

  /** Runs `event` through `transition` on the record `id` and writes the outcome: [its effect, what was stored]. */
  async decide(id, event) {
    const rules = this.rules();
    let result = null;
    const written = await this.store.commit(id, inSpace((current, buried) => (result = transition(current ?? null, { ...event, buried }, rules))));
    return [result ? result.effect : effectOf({}), written];
  }

  async onBroadcast(message) {
    const space = typeof message.space === "string" && message.space ? message.space : null;
    if (space && this.spaces && !this.spaces.has(space)) return; // a space just left
    if (!this.ready) {
      // The pull in progress brings it, unless its page was read before this change was made
      // (the page and the broadcast can cross): the pull's end then pulls again. Another
      // space's: its pull is queued.
      if (space !== this.pullSpace) await this.requestPull(space);
      else if (Number.isSafeInteger(message.seq)) this.missed.set(space, Math.max(this.missed.get(space) || 0, message.seq));
      return;
    }
    if ((message.collection ?? "notes") !== "notes") return;
    const rules = this.rules();
    let result = null;
    const written = await this.store.commit(message.id, inSpace((current, buried) => (result = transition(current ?? null, { type: "broadcast", message, buried }, rules)), space));
    if (result.applied) this.heard(message.id, Number.isSafeInteger(message.seq) ? message.seq : Infinity);
    this.tell([result.effect], written, true);
    // Another revision held, or ops that do not apply: what changed is learned by a pull.
    if (!result.applied) await this.requestPull(space);
  }

  /**
   * Gives up this device's edits of note `id` not yet sent (`transition`'s `discard`): it shows
   * the server's version again, and a note the server never had goes. Returns what is stored
   * now (null: removed), undefined when nothing changed.
   */
  async discard(id) {
    const [effect, written] = await this.decide(id, { type: "discard" });
    this.tell([effect], written, false);
    return written.get(id);
  }

  /** A change of record `id` (its `seq`) the next snapshot's pages may have been read before. */
  heard(id, seq) {
    this.heardSeqs.set(id, Math.max(this.heardSeqs.get(id) || 0, seq));
  }

  /**
   * Tells what `effects` (transitions' `StoreEffect`s) did, `written` holding what was stored:
   * a "records" event naming the records changed, removed and added, with `moved` the text of
   * purged notes kept as new ones ({ from, to }, for an editor showing that text: Web/app.js
   * moves it before it hears that the old note is gone) and `added` the records new here; an
   * "error" for each refusal; a "conflicts" event for each merge that could not place all of an
   * edit. A new note keeping a purged one's text goes at once, not with the next edit.
   */
  tell(effects, written, remote) {
    const ids = new Set();
    const moved = [];
    const added = [];
    for (const effect of effects) {
      for (const id of [...effect.changed, ...effect.removed]) ids.add(id);
      for (const [from, to] of effect.forked) moved.push({ from, to });
      added.push(...effect.added);
    }
    this.emit("records", { ids: [...ids], records: written, moved, added, remote });
    for (const effect of effects) {
      for (const [id, why] of effect.refused) {
        const stored = written.get(id);
        const title = (stored && noteFields(stored).title) || "untitled";
        this.emit("error", { message: `Note "${title}" was refused: ${why}`, id });
      }
      for (const [id, fields] of effect.conflicts) this.emit("conflicts", { id, fields });
    }
    if (moved.length) this.schedulePush(0);
  }
}

/** The effect of a write of the engine's own (the outbox's): the records it changed or removed. */
function effectOf({ changed = [], removed = [] }) {
  return { changed, removed, added: [], forked: [], needsPull: false, retryLater: false, refused: [], conflicts: [] };
}
