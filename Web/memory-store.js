// A store for the sync engine (Web/sync.js) held in memory: what Web/db.js's LocalStore does
// with IndexedDB, for node (docs/reliability.md, "The engine outside the page"). No DOM, no
// IndexedDB, no node modules: the page could use it too.
//
// The storage interface the engine needs (both stores implement it; every method async):
// - getMeta(key), setMeta(key, value), deleteMeta(key), metaKeys(): the cursor ("cursor"), the device id
//   ("device") and the like;
// - get(id), getMany(ids), keys(), scan(visit): the records (Web/records.js's stored form);
// - pendingRecords(): the outbox (records pending or refused: `pend` set by `stamp`);
// - update(id, change): a local write: `change(current)` (undefined for a missing record)
//   returns the next record, null to delete it, or undefined to leave it; written atomically,
//   returns what was stored (stamped), null (deleted) or undefined;
// - commit(id, decide): what `transition` (Web/records.js) decided, written atomically:
//   `decide(current, buried)` (`buried`: the id is in the tombstones, asked when no record is
//   held) returns its outcome `{ record, buried, fork }` or undefined; the record is written
//   (only if it changed) or deleted, the id buried, the fork added. Returns a Map from id to
//   what was stored (null: deleted) for the records that changed, the fork's too;
// - storePage(apply, cursor, since, key = "cursor"): the pulled records (`apply`: [id, decide]
//   pairs, `decide` as for `commit`) and the new cursor written together under the meta `key`
//   (a shared space's is "cursor:ID"), only if the stored cursor is still `since` (else nothing
//   is written and it rejects); returns the Map as `commit` does;
// - sharedRecords(listed): the records of shared spaces (a `space` set: protocol 2) other than
//   the spaces in the Set `listed`.
// `decide` may be called more than once for one id (Web/db.js adds a record first, and reads
// the one held only if the id is taken): the last call's outcome is the one written.
// Records are copied in and out (structuredClone), as IndexedDB does: a caller holding one never
// sees a later write. Blobs pending upload are not here: Web/attachments.js keeps them in
// IndexedDB and the engine reaches them only through its `blobs` gate.
//
// `onWrite(state)` (optional) is called after every write with the whole state
// ({ records: [...], tombstones: [...], meta: {...} }), which `MemoryStore.from(state)` reads
// back: a node client persisted to a file restarts with its outbox
// (Tests/web/support/file-store.mjs). A state written before the Swift client's stored form
// (records of Web/records.js's `fromVersion3`) is converted as it is read.

import { fromVersion3, isUnsynced, marked, stamp, unchanged } from "./records.js";

const copy = (value) => (value === undefined ? undefined : structuredClone(value));

export class MemoryStore {
  constructor({ onWrite = null } = {}) {
    this.records = new Map();
    this.tombstones = new Set();
    this.meta = new Map();
    this.onWrite = onWrite;
    this.name = "memory";
  }

  /** A store holding `state` (what `snapshot()` returned). */
  static from(state, options) {
    const store = new MemoryStore(options);
    for (const old of (state && state.records) || []) {
      const record = fromVersion3(copy(old));
      if (record) store.records.set(record.id, marked(record));
    }
    for (const id of (state && state.tombstones) || []) store.tombstones.add(id);
    for (const [key, value] of Object.entries((state && state.meta) || {})) store.meta.set(key, copy(value));
    return store;
  }

  /** The whole state, a copy (JSON-safe as long as the records are). */
  snapshot() {
    return { records: [...this.records.values()].map(copy), tombstones: [...this.tombstones], meta: Object.fromEntries([...this.meta].map(([k, v]) => [k, copy(v)])) };
  }

  async written() {
    if (this.onWrite) await this.onWrite(this.snapshot());
  }

  close() {}

  async getMeta(key) {
    return copy(this.meta.get(key));
  }

  async setMeta(key, value) {
    this.meta.set(key, copy(value));
    await this.written();
  }

  async deleteMeta(key) {
    this.meta.delete(key);
    await this.written();
  }

  /** The keys of the meta held (the pull cursors among them: "cursor", "cursor:<space>"). */
  async metaKeys() {
    return [...this.meta.keys()];
  }

  async get(id) {
    return copy(this.records.get(id));
  }

  async getMany(ids) {
    return new Map(ids.map((id) => [id, copy(this.records.get(id))]));
  }

  async keys() {
    return [...this.records.keys()].sort();
  }

  async pendingRecords() {
    return [...this.records.values()].filter((r) => r.pend === 1).map(copy);
  }

  async scan(visit, chunk = 1000) {
    const all = [...this.records.keys()].sort();
    for (let i = 0; i < all.length; i += chunk) await visit(all.slice(i, i + chunk).map((id) => copy(this.records.get(id))));
  }

  /** Like LocalStore.update: atomic here, as nothing else runs between the read and the write. */
  async update(id, change) {
    const current = copy(this.records.get(id));
    let next = change(current);
    if (next === null) {
      this.records.delete(id);
    } else if (next !== undefined) {
      this.records.set(id, copy((next = stamp(next, current))));
    }
    if (next !== undefined) await this.written();
    return copy(next);
  }

  async commit(id, decide) {
    const written = new Map();
    this.decided(id, decide, written);
    if (written.size) await this.written();
    return written;
  }

  async storePage(apply, cursor, since, key = "cursor") {
    if (since !== undefined && (this.meta.get(key) || 0) !== since) {
      throw new Error("a page did not follow the stored cursor (an earlier page was not stored); pulling again");
    }
    const written = new Map();
    for (const [id, decide] of apply) this.decided(id, decide, written);
    this.meta.set(key, cursor);
    await this.written();
    return written;
  }

  /** Runs `decide` on the record `id` and writes its outcome (see the interface above), noting what changed in `written`. */
  decided(id, decide, written) {
    const current = copy(this.records.get(id));
    const outcome = decide(current, !current && this.tombstones.has(id));
    if (!outcome) return;
    const { record, buried, fork } = outcome;
    if (record && !unchanged(record, current)) {
      const out = stamp(record, current);
      this.records.set(id, copy(out));
      written.set(id, copy(out));
    } else if (!record && current) {
      this.records.delete(id);
      written.set(id, null);
    }
    if (buried) this.tombstones.add(buried);
    if (fork) {
      const added = stamp(fork, undefined);
      this.records.set(added.id, copy(added));
      written.set(added.id, copy(added));
    }
  }

  /** The records of shared spaces (those with a `space`) not in `listed` (a Set of ids): the engine's check of the spaces listed. */
  async sharedRecords(listed = new Set()) {
    return [...this.records.values()].filter((r) => typeof r.space === "string" && r.space && !listed.has(r.space)).map(copy);
  }

  /** The records with edits the server has not acknowledged (for tests: the outbox, refused included). */
  unsynced() {
    return [...this.records.values()].filter(isUnsynced).map(copy);
  }
}
