// The local store: IndexedDB holds the notes (Web/records.js's stored form: the Swift client's,
// its sync state included), the tombstones (ids of records purged on the server, never taken
// in again), the sync cursor and the session. Every local edit and its outbox state are written
// in one transaction, and so is every outcome of a record's `transition` (the record, its
// tombstone, a new note keeping its text).
//
// Every write of a record goes through `stamp`: it numbers the record's versions (`lv`, +1 per
// write, so a reader can tell a newer state of a note from an older one whatever order
// events arrive in) and keeps `pend` (1 while the record has edits the server has not
// acknowledged, including edits it refused: see `isUnsynced`) for the `pending` index, so that
// the sync engine finds its outbox, and sign-out what it would leave behind, without reading
// every record. A synced note's shadow (the server's fields) is most often its local fields
// again: it is then written as the same object, which IndexedDB's structured clone stores once
// (as the Swift client stores it as "="), halving what a pulled page costs to write and
// start-up costs to read.

import { EMPTY_FIELDS, SCALAR_FIELDS, TEXT_FIELDS, fromVersion3, isPending, isUnsynced, marked, newRecord, normalizeFields, stamp, unchanged } from "./records.js";

// The records' pure functions live in Web/records.js (the engine and the in-memory store use them too).
export { EMPTY_FIELDS, SCALAR_FIELDS, TEXT_FIELDS, isPending, isUnsynced, newRecord, normalizeFields, stamp };

const DB_NAME = "noted"; // the one database of the versions before one database per account (accounts.js)
// 3: the object store `blobs` (Web/attachments.js); 4: records in the Swift client's stored
// form, and the object store `tombstones`; 5: records of shared spaces (protocol 2) carry
// `space` (absent: the personal space), found by the records' index `space`, each space's
// cursor in the meta as "cursor:ID". The upgrade only adds the index: every record, pending
// edits included, stays as it was (a record without `space` is in the personal space).
const DB_VERSION = 5;
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

/** The record as written to IndexedDB: a shadow equal to the local fields is the same object (stored once). */
function pack(record) {
  const { local, shadow } = record;
  if (!shadow || shadow === local || JSON.stringify(shadow) !== JSON.stringify(local)) return record;
  return { ...record, shadow: local };
}

/**
 * A record as version 3 and before wrote it (its shadow, when equal to the local fields, as
 * `{ rev, same: true }`), its shadow filled in again: what `fromVersion3` takes.
 */
function unpackVersion3(record) {
  if (!record || !record.shadow || !record.shadow.same) return record;
  return { ...record, shadow: { rev: record.shadow.rev, fields: record.local } };
}

/**
 * Version 4's upgrade, in the upgrade's transaction: every record of an older version in the
 * stored form (Web/records.js's `fromVersion3`: unsent edits, changes in flight and refusals
 * kept), with its outbox mark; a record nothing needs any more goes.
 */
function upgradeRecords(records) {
  records.openCursor().onsuccess = (event) => {
    const cursor = event.target.result;
    if (!cursor) return;
    const record = fromVersion3(unpackVersion3(cursor.value));
    if (record === null) {
      cursor.delete();
    } else {
      cursor.update(pack(marked(record)));
    }
    cursor.continue();
  };
}

/**
 * Writes a transition's outcome (`decide(current, buried)`'s, see Web/memory-store.js) into a
 * transaction's `records` and `tombstones`, noting in `written` what changed.
 */
function writeOutcome(stores, id, current, outcome, written) {
  if (!outcome) return;
  const { record, buried, fork } = outcome;
  if (record && !unchanged(record, current)) {
    const out = stamp(record, current);
    stores.records.put(pack(out));
    written.set(id, out);
  } else if (!record && current) {
    stores.records.delete(id);
    written.set(id, null);
  }
  if (buried) stores.tombstones.put(true, buried);
  if (fork) {
    const added = stamp(fork, undefined);
    stores.records.put(pack(added));
    written.set(added.id, added);
  }
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
        if (!db.objectStoreNames.contains("blobs")) {
          const blobs = db.createObjectStore("blobs", { keyPath: "sha" });
          blobs.createIndex("pending", "pend");
        }
        // Version 4: the ids of records purged on the server (out-of-line keys, value true).
        if (!db.objectStoreNames.contains("tombstones")) db.createObjectStore("tombstones");
        if (!records.indexNames.contains("pending")) records.createIndex("pending", "pend");
        // Version 5: the records of shared spaces (a record without `space` is not in the index).
        if (!records.indexNames.contains("space")) records.createIndex("space", "space");
        // Every record of an older version in the stored form (version 1's get their outbox mark too).
        if (event.oldVersion >= 1 && event.oldVersion < 4) upgradeRecords(records);
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

  /** The keys of the meta held (the pull cursors among them: "cursor", "cursor:<space>"). */
  async metaKeys() {
    const tx = this.db.transaction("meta", "readonly");
    return request(tx.objectStore("meta").getAllKeys());
  }

  async get(id) {
    const tx = this.db.transaction("records", "readonly");
    return request(tx.objectStore("records").get(id));
  }

  /** Several records read in one transaction: a Map from id to the record (undefined if absent). */
  async getMany(ids) {
    const out = new Map();
    if (ids.length === 0) return out;
    const tx = this.db.transaction("records", "readonly");
    const store = tx.objectStore("records");
    for (const id of ids) {
      const req = store.get(id);
      req.onsuccess = () => out.set(id, req.result);
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
    return request(tx.objectStore("records").index("pending").getAll());
  }

  /**
   * The records of shared spaces other than those in `listed` (a Set of ids), from the index:
   * each space held is read once from the index's keys, and only the records of spaces not
   * listed are read.
   */
  async sharedRecords(listed = new Set()) {
    const tx = this.db.transaction("records", "readonly");
    const index = tx.objectStore("records").index("space");
    const held = [];
    await new Promise((resolve, reject) => {
      const req = index.openKeyCursor(null, "nextunique");
      req.onsuccess = () => {
        const cursor = req.result;
        if (!cursor) return resolve();
        if (!listed.has(cursor.key)) held.push(cursor.key);
        cursor.continue();
      };
      req.onerror = () => reject(req.error);
    });
    const out = [];
    for (const space of held) out.push(...(await request(index.getAll(IDBKeyRange.only(space)))));
    return out;
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
      await visit(batch);
      if (batch.length < chunk) return;
    }
  }

  /**
   * A local write: reads a record and writes what `change(record)` returns, in one transaction;
   * returns what was stored (undefined: nothing written, null: deleted). `change` gets
   * undefined for a missing record and may return null to delete it.
   */
  async update(id, change) {
    const tx = this.db.transaction("records", "readwrite");
    const store = tx.objectStore("records");
    const current = await request(store.get(id));
    let next = change(current);
    if (next === null) {
      store.delete(id);
    } else if (next !== undefined) {
      store.put(pack((next = stamp(next, current))));
    }
    await done(tx);
    return next;
  }

  /**
   * Writes a record's `transition` (Web/memory-store.js, the interface): the record read, with
   * whether its id is buried when none is held, and `decide`'s outcome written, in one
   * transaction. Returns a Map from id to what was stored (null: deleted).
   */
  async commit(id, decide) {
    const tx = this.db.transaction(["records", "tombstones"], "readwrite");
    const stores = { records: tx.objectStore("records"), tombstones: tx.objectStore("tombstones") };
    const written = new Map();
    const current = await request(stores.records.get(id));
    const buried = current === undefined && (await request(stores.tombstones.count(id))) > 0;
    writeOutcome(stores, id, current, decide(current, buried), written);
    await done(tx);
    return written;
  }

  /**
   * Stores pulled records and the new cursor together (the cursor moves only with them), in
   * one transaction without a read per record: the page's ids that are buried are read with one
   * request; a record new to this store is then added at once; only where the add finds the id
   * taken (or the outcome needs the record held, as a tombstone's does) is the record read and
   * decided again. The requests are pipelined, never awaited one by one. `apply` holds
   * [id, decide] pairs as for `commit`. Returns a Map from id to what was stored (null:
   * deleted) for the records that changed (a fork under its own id).
   * With `since`, the page is stored only if the stored cursor is still `since` (the one it
   * was pulled from); otherwise nothing is written and the promise rejects. `key`: the meta
   * key of the cursor ("cursor", a shared space's "cursor:ID").
   */
  async storePage(apply, cursor, since, key = "cursor") {
    const tx = this.db.transaction(["records", "meta", "tombstones"], "readwrite");
    const stores = { records: tx.objectStore("records"), tombstones: tx.objectStore("tombstones") };
    const meta = tx.objectStore("meta");
    const written = new Map();
    const finished = done(tx);
    const merge = (id, decide) => {
      const req = stores.records.get(id);
      req.onsuccess = () => {
        const current = req.result;
        if (current !== undefined) {
          writeOutcome(stores, id, current, decide(current, false), written);
          return;
        }
        const buried = stores.tombstones.count(id);
        buried.onsuccess = () => writeOutcome(stores, id, undefined, decide(undefined, buried.result > 0), written);
      };
    };
    const write = (buried) => {
      for (const [id, decide] of apply) {
        const fresh = decide(undefined, buried.has(id));
        if (!fresh || !fresh.record || fresh.buried || fresh.fork) {
          merge(id, decide);
          continue;
        }
        const out = stamp(fresh.record, undefined);
        const req = stores.records.add(pack(out));
        req.onsuccess = () => written.set(id, out);
        req.onerror = (event) => {
          // The id is taken (another tab, or a record this page updates): decided on the one held.
          event.preventDefault();
          event.stopPropagation();
          merge(id, decide);
        };
      }
      meta.put(cursor, key);
    };
    // Which of the page's ids are buried: one lookup each, pipelined in the transaction (a
    // range from the smallest id to the largest would read nearly every tombstone: ids are
    // random).
    const readBuried = () => {
      if (apply.length === 0) return write(new Set());
      const buried = new Set();
      let left = apply.length;
      for (const [id] of apply) {
        const req = stores.tombstones.getKey(id);
        req.onsuccess = () => {
          if (req.result !== undefined) buried.add(id);
          if (--left === 0) write(buried);
        };
      }
    };
    let outOfOrder = false;
    if (since === undefined) {
      readBuried();
    } else {
      const check = meta.get(key);
      check.onsuccess = () => {
        if ((check.result || 0) === since) {
          readBuried();
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
