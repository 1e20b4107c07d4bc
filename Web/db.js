// The local store: IndexedDB holds the notes (local state, shadow, dirty mark, in-flight
// change), the sync cursor and the session. Every local edit and its outbox state are written
// in one transaction.

const DB_NAME = "noted";
const DB_VERSION = 1;

export const EMPTY_FIELDS = Object.freeze({
  title: "", body: "", tags: [], folder: null, pinned: false, trashed: false,
});

/** The notes schema's defaults applied to a (possibly partial) fields object. */
export function normalizeFields(fields) {
  const f = fields || {};
  return {
    title: typeof f.title === "string" ? f.title : "",
    body: typeof f.body === "string" ? f.body : "",
    tags: Array.isArray(f.tags) ? [...new Set(f.tags.filter((t) => typeof t === "string"))] : [],
    folder: typeof f.folder === "string" ? f.folder : null,
    pinned: f.pinned === true,
    trashed: f.trashed === true,
  };
}

function request(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

function done(tx) {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onabort = () => reject(tx.error || new Error("transaction aborted"));
    tx.onerror = () => reject(tx.error);
  });
}

export class LocalStore {
  static async open(name = DB_NAME) {
    const db = await new Promise((resolve, reject) => {
      const req = indexedDB.open(name, DB_VERSION);
      req.onupgradeneeded = () => {
        const db = req.result;
        if (!db.objectStoreNames.contains("records")) db.createObjectStore("records", { keyPath: "id" });
        if (!db.objectStoreNames.contains("meta")) db.createObjectStore("meta");
      };
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    return new LocalStore(db);
  }

  constructor(db) {
    this.db = db;
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
    return request(tx.objectStore("records").get(id));
  }

  async all() {
    const tx = this.db.transaction("records", "readonly");
    return request(tx.objectStore("records").getAll());
  }

  /**
   * Reads a record and writes what `change(record)` returns, in one transaction.
   * `change` gets undefined for a missing record and may return null to delete it.
   */
  async update(id, change) {
    const tx = this.db.transaction("records", "readwrite");
    const store = tx.objectStore("records");
    const current = await request(store.get(id));
    const next = change(current);
    if (next === null) store.delete(id);
    else if (next !== undefined) store.put(next);
    await done(tx);
    return next;
  }

  /** Stores pulled records and the new cursor together: the cursor moves only with them. */
  async storePage(apply, cursor) {
    const tx = this.db.transaction(["records", "meta"], "readwrite");
    const store = tx.objectStore("records");
    for (const [id, change] of apply) {
      const current = await request(store.get(id));
      const next = change(current);
      if (next === null) store.delete(id);
      else if (next !== undefined) store.put(next);
    }
    tx.objectStore("meta").put(cursor, "cursor");
    await done(tx);
  }

  async clearAll() {
    const tx = this.db.transaction(["records", "meta"], "readwrite");
    tx.objectStore("records").clear();
    tx.objectStore("meta").clear();
    await done(tx);
  }
}

/** A new local note (rev 0: not on the server yet). */
export function newRecord(id, fields, now = new Date().toISOString()) {
  return {
    id,
    collection: "notes",
    local: normalizeFields(fields),
    shadow: null, // { fields, rev } once the server has it
    dirty: true,
    inflight: null, // { ccid, baseRev, change, sent } while a change is unanswered
    purged: false,
    updatedAt: now,
    createdAt: now,
  };
}

/** Whether a record has edits the server has not acknowledged. */
export function isPending(record) {
  return Boolean(record && (record.dirty || record.inflight));
}
