// A store for the sync engine (Web/sync.js) held in memory: what Web/db.js's LocalStore does
// with IndexedDB, for node (docs/reliability.md, "The engine outside the page"). No DOM, no
// IndexedDB, no node modules: the page could use it too.
//
// The storage interface the engine needs (both stores implement it; every method async):
// - getMeta(key), setMeta(key, value), deleteMeta(key): the cursor ("cursor"), the device id
//   ("device") and the like;
// - get(id), getMany(ids), keys(), scan(visit): the records;
// - pendingRecords(): the outbox (records dirty, in flight or refused: `pend` set by `stamp`);
// - update(id, change): `change(current)` (undefined for a missing record) returns the next
//   record, null to delete it, undefined to leave it, or a `replacement` (Web/records.js: it
//   is deleted and a new record added under the new one's id); written atomically, returns
//   what was stored (stamped) or null (deleted, replaced too) or undefined;
// - storePage(apply, cursor, since): the pulled records (`apply`: [id, change] pairs, `change`
//   as for `update`) and the new cursor written together, only if the stored cursor is still
//   `since` (else nothing is written and it rejects); returns a Map from id to what was stored
//   (null: deleted; a replacement's new record under its own id).
// Records are copied in and out (structuredClone), as IndexedDB does: a caller holding one never
// sees a later write. Blobs pending upload are not here: Web/attachments.js keeps them in
// IndexedDB and the engine reaches them only through its `blobs` gate.
//
// `onWrite(state)` (optional) is called after every write with the whole state
// ({ records: [...], meta: {...} }), which `MemoryStore.from(state)` reads back: a node client
// persisted to a file restarts with its outbox (Tests/web/support/file-store.mjs).

import { isReplacement, isUnsynced, stamp } from "./records.js";

const copy = (value) => (value === undefined ? undefined : structuredClone(value));

export class MemoryStore {
  constructor({ onWrite = null } = {}) {
    this.records = new Map();
    this.meta = new Map();
    this.onWrite = onWrite;
    this.name = "memory";
  }

  /** A store holding `state` (what `snapshot()` returned). */
  static from(state, options) {
    const store = new MemoryStore(options);
    for (const record of (state && state.records) || []) store.records.set(record.id, copy(record));
    for (const [key, value] of Object.entries((state && state.meta) || {})) store.meta.set(key, copy(value));
    return store;
  }

  /** The whole state, a copy (JSON-safe as long as the records are). */
  snapshot() {
    return { records: [...this.records.values()].map(copy), meta: Object.fromEntries([...this.meta].map(([k, v]) => [k, copy(v)])) };
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
    if (isReplacement(next)) {
      this.replace(id, next);
      next = null;
    } else if (next === null) {
      this.records.delete(id);
    } else if (next !== undefined) {
      this.records.set(id, copy((next = stamp(next, current))));
    }
    if (next !== undefined) await this.written();
    return copy(next);
  }

  async storePage(apply, cursor, since) {
    if (since !== undefined && (this.meta.get("cursor") || 0) !== since) {
      throw new Error("a page did not follow the stored cursor (an earlier page was not stored); pulling again");
    }
    const written = new Map();
    for (const [id, change] of apply) {
      const current = copy(this.records.get(id));
      const next = change(current);
      if (isReplacement(next)) {
        const added = this.replace(id, next);
        if (current) written.set(id, null);
        written.set(added.id, copy(added));
      } else if (next === null) {
        if (current) {
          this.records.delete(id);
          written.set(id, null);
        }
      } else if (next !== undefined) {
        const out = stamp(next, current);
        this.records.set(id, copy(out));
        written.set(id, copy(out));
      }
    }
    this.meta.set("cursor", cursor);
    await this.written();
    return written;
  }

  /** A `replacement`: the record `id` deleted, the new one added (stamped as new); returns it. */
  replace(id, { replacedBy }) {
    this.records.delete(id);
    const added = stamp(replacedBy, undefined);
    this.records.set(added.id, copy(added));
    return added;
  }

  /** The records with edits the server has not acknowledged (for tests: the outbox, refused included). */
  unsynced() {
    return [...this.records.values()].filter(isUnsynced).map(copy);
  }
}
