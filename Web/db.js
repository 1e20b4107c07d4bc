// The local store: IndexedDB holds the notes (local state, shadow, dirty mark, in-flight
// change), the sync cursor and the session. Every local edit and its outbox state are written
// in one transaction.
//
// Every write of a record goes through `stamp`: it numbers the record's versions (`lv`, +1 per
// write, so a reader can tell a newer state of a note from an older one whatever order
// events arrive in) and keeps `pend` (1 while the record has edits the server has not
// acknowledged, including edits it refused: see `isUnsynced`) for the `pending` index, so that
// the sync engine finds its outbox, and sign-out what it would leave behind, without reading
// every record. A synced note's shadow (the server's fields) is most often its local
// fields again: then it is stored as `{ rev, same: true }` and filled in when read, which
// halves what a pulled page costs to write and start-up costs to read.

import { EMPTY_FIELDS, SCALAR_FIELDS, TEXT_FIELDS, isPending, isReplacement, isUnsynced, newRecord, normalizeFields, stamp } from "./records.js";

// The records' pure functions live in Web/records.js (the engine and the in-memory store use them too).
export { EMPTY_FIELDS, SCALAR_FIELDS, TEXT_FIELDS, isPending, isUnsynced, newRecord, normalizeFields, stamp };

const DB_NAME = "noted"; // the one database of the versions before one database per account (accounts.js)
const DB_VERSION = 3; // 3: the object store `blobs` (Web/attachments.js)
const CHUNK = 1000;

/** An IndexedDB request as a promise (also for Web/attachments.js). */
export function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** A transaction's end as a promise. */
export function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error || new Error("transaction aborted"));
    tx.onerror = () => reject(tx.error);
  });
}

function sameFields(a, b) {
  return a.title === b.title && a.body === b.body && a.folder === b.folder && a.pinned === b.pinned &&
    a.trashed === b.trashed && a.tags.length === b.tags.length && a.tags.every((t, i) => t === b.tags[i]) &&
    sameList(a.attachments, b.attachments);
}

function sameList(a = [], b = []) {
  return a.length === b.length && a.every((t, i) => t === b[i]);
}

/** The record as written to IndexedDB (a shadow equal to the local fields left out). */
function pack(record) {
  const shadow = record.shadow;
  if (!shadow || !shadow.fields || !record.local || !sameFields(record.local, shadow.fields)) return record;
  return { ...record, shadow: { rev: shadow.rev, same: true } };
}

/** The record as read from IndexedDB (its shadow filled in again). */
export function unpack(record) {
  if (!record || !record.shadow || !record.shadow.same) return record;
  const local = record.local;
  return { ...record, shadow: { rev: record.shadow.rev, fields: { ...local, tags: [...local.tags], ...(local.attachments ? { attachments: [...local.attachments] } : {}) } } };
}

/** A `replacement` in a transaction's records store: `id` deleted, the new record added; returns it (stamped). */
function replace(store, id, { replacedBy }) {
  store.delete(id);
  const added = stamp(replacedBy, undefined);
  store.put(pack(added));
  return added;
}

export class LocalStore {
  /**
   * Opens (or creates) the database `name`. `onBlocked`: another tab holds it open at an older
   * version; `onGone`: it is being deleted elsewhere (another tab removed this browser's copy of
   * the account): this connection is closed first.
   */
  static async open(name = DB_NAME, { onBlocked, onGone } = {}) {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open(name, DB_VERSION);
      req.onupgradeneeded = (event) => {
        const db = req.result;
        const records = db.objectStoreNames.contains("records")
          ? req.transaction.objectStore("records")
          : db.createObjectStore("records", { keyPath: "id" });
        if (!db.objectStoreNames.contains("meta")) db.createObjectStore("meta");
        // Version 3: attachments' blobs, added here or read from the server (Web/attachments.js).
        // Only a new store: every record, the outbox and the session stay as they are.
        if (!db.objectStoreNames.contains("blobs")) {
          const blobs = db.createObjectStore("blobs", { keyPath: "sha" });
          blobs.createIndex("pending", "pend");
        }
        if (!records.indexNames.contains("pending")) {
          records.createIndex("pending", "pend");
          // Version 1 kept no outbox mark: set it on the pending records once.
          if (event.oldVersion >= 1) {
            records.openCursor().onsuccess = (e) => {
              const cursor = e.target.result;
              if (!cursor) return;
              if (isPending(cursor.value)) cursor.update({ ...cursor.value, pend: 1 });
              cursor.continue();
            };
          }
        }
      };
      req.onblocked = () => onBlocked && onBlocked();
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    // Another tab upgrading the database: step aside (it reloads this one's code next time).
    // Or deleting it (`newVersion` null): step aside too, so that the deletion is not blocked.
    db.onversionchange = (event) => {
      db.close();
      if (event.newVersion === null && onGone) onGone();
    };
    return new LocalStore(db);
  }

  /** Whether a database of this name exists (without creating it). */
  static async exists(name) {
    if (indexedDB.databases) return (await indexedDB.databases()).some((d) => d.name === name);
    return new Promise((resolve) => {
      const req = indexedDB.open(name);
      req.onupgradeneeded = () => req.transaction.abort(); // a new database: not created
      req.onsuccess = () => {
        req.result.close();
        resolve(true);
      };
      req.onerror = () => resolve(false);
    });
  }

  /**
   * Deletes the database `name` (close this page's LocalStore on it first): resolves once it is
   * gone. Other connections to it (the search worker, other tabs) close themselves on
   * `versionchange`; `onBlocked` is called while one has not yet.
   */
  static remove(name, { onBlocked } = {}) {
    return new Promise((resolve, reject) => {
      const req = indexedDB.deleteDatabase(name);
      req.onblocked = () => onBlocked && onBlocked();
      req.onsuccess = () => resolve();
      req.onerror = () => reject(req.error);
    });
  }

  constructor(db) {
    this.db = db;
  }

  get name() {
    return this.db.name;
  }

  close() {
    this.db.close();
  }

  async getMeta(key) {
    const tx = this.db.transaction("meta", "readonly");
    return request(tx.objectStore("meta").get(key));
  }

  async setMeta(key, value) {
    const tx = this.db.transaction("meta", "readwrite");
    tx.objectStore("meta").put(value, key);
    await done(tx);
  }

  async deleteMeta(key) {
    const tx = this.db.transaction("meta", "readwrite");
    tx.objectStore("meta").delete(key);
    await done(tx);
  }

  async get(id) {
    const tx = this.db.transaction("records", "readonly");
    return unpack(await request(tx.objectStore("records").get(id)));
  }

  /** Several records read in one transaction: a Map from id to the record (undefined if absent). */
  async getMany(ids) {
    const out = new Map();
    if (ids.length === 0) return out;
    const tx = this.db.transaction("records", "readonly");
    const store = tx.objectStore("records");
    for (const id of ids) {
      const req = store.get(id);
      req.onsuccess = () => out.set(id, unpack(req.result));
    }
    await done(tx);
    return out;
  }

  /** Every record id (keys only, no values read). */
  async keys() {
    const tx = this.db.transaction("records", "readonly");
    return request(tx.objectStore("records").getAllKeys());
  }

  /** The records with edits the server has not acknowledged (dirty, in flight or refused), from the index. */
  async pendingRecords() {
    const tx = this.db.transaction("records", "readonly");
    return (await request(tx.objectStore("records").index("pending").getAll())).map(unpack);
  }

  /** How many attachments' blobs wait for their upload (the `pending` index of `blobs`, Web/attachments.js). */
  async pendingBlobCount() {
    if (!this.db.objectStoreNames.contains("blobs")) return 0;
    const tx = this.db.transaction("blobs", "readonly");
    return request(tx.objectStore("blobs").index("pending").count());
  }

  /**
   * Reads every record once, `CHUNK` at a time, each chunk in its own transaction, handing each
   * chunk to `visit` (which may be async): start-up reads the store this way, once.
   */
  async scan(visit, chunk = CHUNK) {
    let after = null;
    for (;;) {
      const tx = this.db.transaction("records", "readonly");
      const range = after === null ? null : IDBKeyRange.lowerBound(after, true);
      const batch = await request(tx.objectStore("records").getAll(range, chunk));
      if (batch.length === 0) return;
      after = batch[batch.length - 1].id;
      await visit(batch.map(unpack));
      if (batch.length < chunk) return;
    }
  }

  /**
   * Reads a record and writes what `change(record)` returns, in one transaction; returns what
   * was stored (undefined: nothing written, null: deleted).
   * `change` gets undefined for a missing record and may return null to delete it, or a
   * `replacement` (Web/records.js) to delete it and add a new record in the same transaction
   * (then null is returned).
   */
  async update(id, change) {
    const tx = this.db.transaction("records", "readwrite");
    const store = tx.objectStore("records");
    const current = unpack(await request(store.get(id)));
    let next = change(current);
    if (isReplacement(next)) {
      replace(store, id, next);
      next = null;
    } else if (next === null) {
      store.delete(id);
    } else if (next !== undefined) {
      store.put(pack((next = stamp(next, current))));
    }
    await done(tx);
    return next;
  }

  /**
   * Stores pulled records and the new cursor together (the cursor moves only with them), in
   * one transaction without a read per record: a record new to this store is added at once;
   * only where the add finds the id taken (or the change needs the current record, as a
   * tombstone does) is the record read and merged. The requests are pipelined, never awaited
   * one by one. `apply` holds [id, change] pairs, `change` a pure function as for `update`.
   * Returns a Map from id to what was stored (null: deleted) for the records that changed (a
   * `replacement`'s new record under its own id).
   * With `since`, the page is stored only if the stored cursor is still `since` (the one it
   * was pulled from); otherwise nothing is written and the promise rejects.
   */
  async storePage(apply, cursor, since) {
    const tx = this.db.transaction(["records", "meta"], "readwrite");
    const store = tx.objectStore("records");
    const meta = tx.objectStore("meta");
    const written = new Map();
    const finished = done(tx);
    const merge = (id, change) => {
      const req = store.get(id);
      req.onsuccess = () => {
        const current = unpack(req.result);
        const next = change(current);
        if (isReplacement(next)) {
          const added = replace(store, id, next);
          if (current) written.set(id, null);
          written.set(added.id, added);
        } else if (next === null) {
          if (current) {
            store.delete(id);
            written.set(id, null);
          }
        } else if (next !== undefined) {
          const out = stamp(next, current);
          store.put(pack(out));
          written.set(id, out);
        }
      };
    };
    const write = () => {
      for (const [id, change] of apply) {
        const fresh = change(undefined);
        if (!fresh || isReplacement(fresh)) {
          merge(id, change);
          continue;
        }
        const out = stamp(fresh, undefined);
        const req = store.add(pack(out));
        req.onsuccess = () => written.set(id, out);
        req.onerror = (event) => {
          // The id is taken (another tab, or a record this page updates): merge with it instead.
          event.preventDefault();
          event.stopPropagation();
          merge(id, change);
        };
      }
      meta.put(cursor, "cursor");
    };
    let outOfOrder = false;
    if (since === undefined) {
      write();
    } else {
      const check = meta.get("cursor");
      check.onsuccess = () => {
        if ((check.result || 0) === since) {
          write();
        } else {
          outOfOrder = true;
          tx.abort();
        }
      };
    }
    try {
      await finished;
    } catch (error) {
      if (outOfOrder) throw new Error("a page did not follow the stored cursor (an earlier page was not stored); pulling again");
      throw error;
    }
    return written;
  }
}
