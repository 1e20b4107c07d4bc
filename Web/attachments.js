// Attachments (docs/protocol.md section 8, "Attachments"): files kept as blobs by their SHA-256.
//
// A note's `attachments` field holds one element per file, "<sha256> <size> <type> <name>",
// and its body shows a file with `![name](attachment:<sha256>)` (an image) or
// `[name](attachment:<sha256>)` (a link). This module holds:
// - the elements' encoding (names shortened keeping the extension, as NotedCore's
//   AttachmentReference.fittedName does), hashing, and the cache's eviction rule: pure functions;
// - `BlobCache`: the blobs in this browser, in the account's database (the object store `blobs`
//   of Web/db.js): those added here and not yet uploaded (`pend`, never evicted) and those read
//   from the server (a cache for offline use, least recently used evicted beyond a cap);
// - `Attachments`: uploads (PUT /v1/blobs/{sha256} for a small file; a larger one in pieces
//   with PATCH from the offset the server reports, so an upload cut off continues where the
//   server got to; retried with backoff), reads (`loadAttachment`: this browser first, else GET
//   from the server, then cached), the gate the sync engine asks before pushing a change that
//   adds a file, and the editor's list, paste, drop and "Attach file";
// - `ObjectUrls`: the blob: URLs images are shown with, each revoked once nothing shows it.
// The access token goes in the Authorization header only, never in a URL.

import { done, request } from "./db.js";
import { MAX_ELEMENT, OCTET, addedElements, changeAddsShas, encodeElement, fittedName, isSha256, normalizeType, parseElement, shaOf } from "./elements.js";

// The elements' pure functions live in Web/elements.js (the sync engine uses them too).
export { MAX_ELEMENT, addedElements, changeAddsShas, encodeElement, fittedName, isSha256, normalizeType, parseElement, shaOf };

export const DEFAULT_MAX_BLOB_BYTES = 26214400; // the server's default --max-blob-bytes (25 MiB)
export const DEFAULT_CACHE_BYTES = 200 * 1024 * 1024;
const BLOBS = "blobs"; // the object store (Web/db.js creates it)
const LIMITS_KEY = "blob-limits"; // meta: the server's GET /v1/blobs?limit=0 limits, for offline use
export const RESUMABLE_BYTES = 1024 * 1024; // larger files go up in PATCH pieces, resumable
export const PIECE_BYTES = 2 * 1024 * 1024; // the bytes of one PATCH (kept by the server when it ends)

// ---------------------------------------------------------------------------------------------
// Pure functions (and Web/elements.js).

export function isImageType(type) {
  return /^image\/(png|jpeg|gif|webp|avif|bmp)$/.test(type);
}

/** The Markdown a body shows a file with: an image inline, any other file as a link. */
export function markdownFor({ sha256, type, name }) {
  const label = String(name).replace(/[[\]]/g, "\\$&");
  return `${isImageType(type) ? "!" : ""}[${label}](attachment:${sha256})`;
}

/** A size for people: "512 bytes", "1.5 KB", "23 MB" (1 KB = 1024 bytes). */
export function humanSize(bytes) {
  if (bytes < 1024) return `${bytes} byte${bytes === 1 ? "" : "s"}`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = -1;
  do {
    value /= 1024;
    unit++;
  } while (value >= 1024 && unit < units.length - 1);
  return `${value < 10 ? Math.round(value * 10) / 10 : Math.round(value)} ${units[unit]}`;
}

/** The SHA-256 of bytes (an ArrayBuffer, a typed array, a Blob or a string's UTF-8) as 64 hex digits. */
export async function sha256Hex(data) {
  let bytes = data;
  if (typeof data === "string") bytes = new TextEncoder().encode(data);
  else if (data && typeof data.arrayBuffer === "function") bytes = await data.arrayBuffer();
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * What the cache evicts to hold at most `cap` bytes: the hashes of the least recently used
 * entries ({ sha, size, usedAt, pending }), oldest first, never one pending upload (those count
 * toward the total all the same, and stay even beyond the cap).
 */
export function evictions(entries, cap) {
  let total = entries.reduce((n, e) => n + (e.size || 0), 0);
  const out = [];
  const candidates = entries.filter((e) => !e.pending).sort((a, b) => (a.usedAt - b.usedAt) || (a.sha < b.sha ? -1 : 1));
  for (const e of candidates) {
    if (total <= cap) break;
    out.push(e.sha);
    total -= e.size || 0;
  }
  return out;
}

/** The delay before upload attempt `n` (0-based) after failures: 1 s doubling to 5 min, jittered. */
export function backoff(n, random = Math.random) {
  const base = Math.min(300000, 1000 * 2 ** Math.min(n, 9));
  return Math.round(base / 2 + random() * base / 2);
}

// ---------------------------------------------------------------------------------------------
// Object URLs.

/**
 * The blob: URLs one view shows images with (the preview, the list's thumbnails), by a key (a
 * hash): made once per key while wanted, and revoked when the view is drawn again without it
 * (`keepOnly`) or goes away (`release`), so none outlives what shows it. `api` is the page's URL
 * (createObjectURL, revokeObjectURL).
 */
export class ObjectUrls {
  constructor(api = globalThis.URL) {
    this.api = api;
    this.urls = new Map(); // key -> url
    this.wanted = new Set();
  }

  /** The keys the view shows now: the URLs of others are revoked, and none is made for them later. */
  keepOnly(keys) {
    this.wanted = new Set(keys);
    for (const [key, url] of this.urls) {
      if (!this.wanted.has(key)) {
        this.urls.delete(key);
        this.api.revokeObjectURL(url);
      }
    }
  }

  /** Adds a key to those the view shows. */
  want(key) {
    this.wanted.add(key);
  }

  /** The URL made for `key`, if any. */
  peek(key) {
    return this.urls.get(key) || null;
  }

  /** The URL of `key`'s blob, made now if need be; null when the view no longer shows `key`. */
  get(key, blob) {
    if (!this.wanted.has(key)) return null;
    let url = this.urls.get(key);
    if (!url) {
      url = this.api.createObjectURL(blob);
      this.urls.set(key, url);
    }
    return url;
  }

  /** The view went away: every URL is revoked. */
  release() {
    this.keepOnly([]);
  }

  get size() {
    return this.urls.size;
  }
}

// ---------------------------------------------------------------------------------------------
// The blobs in this browser.

/**
 * The object store `blobs` of the account's database: { sha, blob, size, type, usedAt, pend? ,
 * failed? } by `sha`; `pend` (1) while the server has not got it (the `pending` index).
 */
export class BlobCache {
  constructor(db, cap = DEFAULT_CACHE_BYTES) {
    this.db = db;
    this.cap = cap;
  }

  async get(sha) {
    const tx = this.db.transaction(BLOBS, "readonly");
    return request(tx.objectStore(BLOBS).get(sha));
  }

  /** Stores a blob: `pending` for one added here (kept until uploaded), else a cached copy. */
  async put(sha, blob, { pending = false, type = blob.type } = {}) {
    const tx = this.db.transaction(BLOBS, "readwrite");
    const store = tx.objectStore(BLOBS);
    const current = await request(store.get(sha));
    const entry = { sha, blob, size: blob.size, type: type || OCTET, usedAt: Date.now() };
    if (pending || (current && current.pend)) entry.pend = 1;
    store.put(entry);
    await done(tx);
    if (!entry.pend) await this.evict();
    return entry;
  }

  /** Changes an entry in one transaction (`change` returns the new entry, or undefined). */
  async update(sha, change) {
    const tx = this.db.transaction(BLOBS, "readwrite");
    const store = tx.objectStore(BLOBS);
    const current = await request(store.get(sha));
    const next = current ? change(current) : undefined;
    if (next) store.put(next);
    await done(tx);
    return next;
  }

  touch(sha) {
    return this.update(sha, (e) => ({ ...e, usedAt: Date.now() })).catch(() => {});
  }

  /** The entries waiting for their upload (blob included). */
  async pending() {
    const tx = this.db.transaction(BLOBS, "readonly");
    return request(tx.objectStore(BLOBS).index("pending").getAll());
  }

  /** Deletes the least recently used cached blobs beyond the cap (never a pending one). */
  async evict() {
    const tx = this.db.transaction(BLOBS, "readwrite");
    const store = tx.objectStore(BLOBS);
    const entries = [];
    store.openCursor().onsuccess = (event) => {
      const cursor = event.target.result;
      if (!cursor) {
        for (const sha of evictions(entries, this.cap)) store.delete(sha);
        return;
      }
      const v = cursor.value;
      entries.push({ sha: v.sha, size: v.size, usedAt: v.usedAt || 0, pending: Boolean(v.pend) });
      cursor.continue();
    };
    await done(tx);
  }
}

// ---------------------------------------------------------------------------------------------
// Uploads and reads.

let current = null; // the page's Attachments, for the module-level loadAttachment

/**
 * The blob of a file, by its hash: this browser's copy, else the server's (then cached); null
 * when neither has it (offline and not cached, or not this account's). The hook the Markdown
 * preview shows images with.
 */
export function loadAttachment(sha256) {
  return current ? current.loadAttachment(sha256) : Promise.resolve(null);
}

export class Attachments extends EventTarget {
  /** `store`: the account's LocalStore; `auth`: its Auth (access tokens for the Authorization header). */
  constructor({ store, auth, cap = DEFAULT_CACHE_BYTES }) {
    super();
    this.store = store;
    this.auth = auth;
    this.cache = new BlobCache(store.db, cap);
    this.loading = new Map(); // sha -> Promise<Blob|null>: one read of a blob at a time
    this.uploading = null; // the upload round under way
    this.failures = 0;
    this.timer = 0;
    this.limits = null; // { maxBlobBytes, storedBytes, quotaBytes }
    this.stopped = false;
    this.pieceBytes = PIECE_BYTES;
    current = this;
    window.addEventListener("online", () => this.kick());
  }

  start() {
    this.stopped = false;
    this.kick();
    this.refreshLimits().catch(() => {});
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  emit(type, detail = {}) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  /** A fetch with the access token (a 401 retried once after a refresh); rejects offline. */
  async fetch(path, init = {}) {
    for (let attempt = 0; ; attempt++) {
      const token = await this.auth.accessToken();
      if (!token) throw Object.assign(new Error("not signed in"), { code: "unauthenticated" });
      const response = await fetch(path, { ...init, headers: { ...(init.headers || {}), Authorization: `Bearer ${token}` } });
      if (response.status === 401 && attempt === 0) {
        this.auth.invalidateAccessToken();
        continue;
      }
      return response;
    }
  }

  /**
   * The server's limits, kept for offline use: GET /v1/blobs?limit=0, the limits without the
   * list of files (a server before `limit` lists every file too: the same keys are read).
   */
  async refreshLimits() {
    const response = await this.fetch("/v1/blobs?limit=0");
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const body = await response.json();
    this.limits = { maxBlobBytes: body.maxBlobBytes, storedBytes: body.storedBytes, quotaBytes: body.quotaBytes ?? null };
    await this.store.setMeta(LIMITS_KEY, this.limits).catch(() => {});
    return this.limits;
  }

  /** The largest file the server takes: asked now when online, else the last answer, else 25 MiB. */
  async maxBlobBytes() {
    try {
      return (await this.refreshLimits()).maxBlobBytes;
    } catch {
      if (!this.limits) this.limits = (await this.store.getMeta(LIMITS_KEY).catch(() => null)) || null;
      return (this.limits && this.limits.maxBlobBytes) || DEFAULT_MAX_BLOB_BYTES;
    }
  }

  /**
   * A file the user added (picked, pasted, dropped): refused over the server's limit (rejects
   * with `code` "too_large" and a message for people); else hashed and kept here, pending its
   * upload. Resolves to { element, sha256, size, type, name, markdown }.
   */
  async addFile(file, max = undefined) {
    const limit = max ?? (await this.maxBlobBytes());
    const name = file.name || (file.type.startsWith("image/") ? `pasted image.${file.type.slice(6).split(/[+;]/)[0]}` : "file");
    if (file.size > limit) {
      // Sizes in bytes when the rounded ones would read the same ("98 KB: up to 98 KB").
      const [is, max] = humanSize(file.size) === humanSize(limit)
        ? [`${file.size.toLocaleString()} bytes`, `${limit.toLocaleString()} bytes`] : [humanSize(file.size), humanSize(limit)];
      throw Object.assign(new Error(`"${name}" is ${is}: the server takes files up to ${max}. It was not attached.`), { code: "too_large" });
    }
    const bytes = await file.arrayBuffer();
    const sha256 = await sha256Hex(bytes);
    const type = normalizeType(file.type);
    const element = encodeElement({ sha256, size: bytes.byteLength, type, name });
    if (!element) throw new Error(`"${name}" cannot be attached (its name does not fit).`);
    const blob = new Blob([bytes], { type });
    const had = await this.cache.get(sha256);
    // A file this browser has from the server is not uploaded again; a new one waits for its upload.
    await this.cache.put(sha256, blob, { pending: !had, type });
    this.kick();
    const parts = parseElement(element);
    return { ...parts, element, markdown: markdownFor(parts) };
  }

  /** The blob of `sha256`: here, else from the server (then cached); null when unavailable. */
  loadAttachment(sha256) {
    if (!isSha256(sha256)) return Promise.resolve(null);
    let promise = this.loading.get(sha256);
    if (!promise) {
      promise = this.read(sha256).finally(() => this.loading.delete(sha256));
      this.loading.set(sha256, promise);
    }
    return promise;
  }

  async read(sha256) {
    const local = await this.cache.get(sha256).catch(() => null);
    if (local && local.blob) {
      this.cache.touch(sha256);
      return local.blob;
    }
    let response;
    try {
      // Not through the browser's HTTP cache (the server allows it a year): the copy kept is
      // the one above, in the account's database, which goes when this browser's copy of the
      // account is removed; the HTTP cache cannot be emptied from the page.
      response = await this.fetch(`/v1/blobs/${sha256}`, { cache: "no-store" });
    } catch {
      return null; // offline, or signed out
    }
    if (!response.ok) return null;
    const bytes = await response.arrayBuffer();
    if ((await sha256Hex(bytes)) !== sha256) return null;
    const type = normalizeType(response.headers.get("Content-Type"));
    const blob = new Blob([bytes], { type });
    if (blob.size <= this.cache.cap) await this.cache.put(sha256, blob, { type }).catch(() => {});
    return blob;
  }

  /** Hashes among `shas` this browser has not uploaded yet: a change adding them waits. */
  async blocking(shas) {
    const out = [];
    for (const sha of shas) {
      const entry = await this.cache.get(sha).catch(() => null);
      if (entry && entry.pend && !entry.failed) out.push(sha);
    }
    if (out.length) this.wake();
    return out;
  }

  /**
   * The server said `missing_blob` for these hashes: each one this browser has is marked pending
   * again and uploaded; resolves to those it does not have (or cannot upload): a change adding
   * them cannot succeed.
   */
  async missing(shas) {
    const lost = [];
    for (const sha of shas) {
      const entry = await this.cache.update(sha, (e) => (e.failed ? undefined : { ...e, pend: 1 })).catch(() => undefined);
      if (!entry) lost.push(sha);
    }
    this.kick();
    return lost;
  }

  /** Upload now (after a new file, a network change). */
  kick() {
    this.later(0);
  }

  /** Upload soon unless an upload is under way or waits out a failure's backoff. */
  wake() {
    if (!this.uploading && !this.timer) this.kick();
  }

  later(delay) {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = 0;
      this.uploadPending();
    }, delay);
  }

  /** Uploads every pending blob, one at a time; on a failure tries again later, with backoff. */
  async uploadPending() {
    if (this.uploading) {
      this.again = true;
      return this.uploading;
    }
    this.uploading = (async () => {
      let failed = false;
      try {
        for (const entry of await this.cache.pending()) {
          if (entry.failed) continue;
          const result = await this.upload(entry.sha);
          if (result === "retry") {
            failed = true;
            break;
          }
        }
      } catch {
        failed = true;
      }
      return failed;
    })();
    const failed = await this.uploading;
    this.uploading = null;
    if (this.stopped) return;
    if (failed) {
      this.later(backoff(this.failures++));
    } else {
      this.failures = 0;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    }
  }

  /**
   * Uploads one blob, after a HEAD says the server lacks it: a file up to RESUMABLE_BYTES with
   * one PUT, a larger one with PATCHes of PIECE_BYTES from the offset the server has (so one cut
   * off, by going offline or closing the page, continues from there). "done", "retry" (offline,
   * the server busy, the quota full: later) or "failed" (for good: too large, or the bytes here do
   * not hash to the name, which never succeeds). Says how far it got with "progress" events.
   */
  async upload(sha) {
    const entry = await this.cache.get(sha);
    if (!entry) return "done";
    const total = entry.blob.size;
    let response;
    try {
      const head = await this.fetch(`/v1/blobs/${sha}`, { method: "HEAD" });
      if (head.ok) {
        response = head;
      } else if (total > RESUMABLE_BYTES && head.status === 404) {
        response = await this.patchFrom(sha, entry, offsetOf(head) ?? 0);
      } else {
        this.emit("progress", { sha, sent: 0, total });
        response = await this.fetch(`/v1/blobs/${sha}`, {
          method: "PUT", headers: { "Content-Type": entry.type || OCTET }, body: entry.blob,
        });
      }
    } catch {
      this.emit("progress", { sha, total, paused: true });
      return "retry";
    }
    if (response.ok) {
      await this.cache.update(sha, (e) => {
        const { pend, ...rest } = e;
        return { ...rest, usedAt: Date.now() };
      });
      await this.cache.evict().catch(() => {});
      this.emit("uploaded", { sha });
      return "done";
    }
    const body = await response.json().catch(() => ({}));
    const code = body.error || `HTTP ${response.status}`;
    if (response.status === 413 && code === "quota_exceeded") {
      this.emit("progress", { sha, total, paused: true });
      this.emit("error", { message: `A file could not be uploaded: ${body.message || "the account's storage is full"}. Trying again later.` });
      return "retry";
    }
    if ((response.status === 413 && code === "too_large") || code === "hash_mismatch" || code === "bad_request") {
      await this.cache.update(sha, (e) => ({ ...e, failed: { code, message: body.message || "" } }));
      this.emit("error", { message: `A file could not be uploaded: ${body.message || code}.` });
      this.emit("uploaded", { sha }); // the change waiting for it goes, and is refused, saying so
      return "failed";
    }
    this.emit("progress", { sha, total, paused: true });
    return "retry";
  }

  /**
   * Sends a blob's bytes from `offset` (what the server has) in PATCHes of `pieceBytes`; each one
   * the server keeps, so an interruption loses at most the piece under way. An
   * `offset_mismatch` continues from the server's `Upload-Offset`. Resolves to the last
   * response: ok once the server has it all; rejects when the network fails.
   */
  async patchFrom(sha, entry, offset) {
    const total = entry.blob.size;
    let mismatches = 0;
    for (;;) {
      this.emit("progress", { sha, sent: offset, total });
      if (offset >= total) throw new Error("the server has every byte but not the blob"); // later: HEAD again
      const end = Math.min(total, offset + this.pieceBytes);
      const response = await this.fetch(`/v1/blobs/${sha}`, {
        method: "PATCH",
        headers: {
          "Content-Type": "application/offset+octet-stream",
          "Upload-Offset": String(offset),
          "Upload-Length": String(total),
          "Noted-Blob-Type": entry.type || OCTET,
        },
        body: entry.blob.slice(offset, end),
      });
      const reached = offsetOf(response);
      if (response.status === 409 && reached !== null && reached <= total && mismatches < 3) {
        const body = await response.clone().json().catch(() => ({}));
        if (body.error !== "offset_mismatch") return response;
        mismatches++;
        offset = reached;
        continue;
      }
      if (!response.ok) return response;
      if (reached === null || reached <= offset) throw new Error("the server kept nothing of the piece");
      mismatches = 0;
      offset = reached;
      if (offset >= total) {
        this.emit("progress", { sha, sent: total, total });
        return response;
      }
    }
  }
}

/** A response's Upload-Offset, or null. */
function offsetOf(response) {
  const value = response.headers.get("Upload-Offset");
  return value !== null && /^[0-9]+$/.test(value) && Number.isSafeInteger(Number(value)) ? Number(value) : null;
}

// ---------------------------------------------------------------------------------------------
// The editor: "Attach file", paste and drop onto the body, and the note's list of files.

/**
 * Wires the editor's attachments. `ui`: { body (the textarea), input (the file input), list (a
 * ul), error (a role=alert line) }; `note()`: { id, attachments } of the note shown (null: none);
 * `edit(id, change)`: a local edit of that note's fields (as app.js's `edit`); `saveFile(blob,
 * name)`: a download.
 */
export class AttachmentsEditor {
  constructor(attachments, { ui, note, edit, saveFile, canAttach = () => true }) {
    this.attachments = attachments;
    this.canAttach = canAttach; // false: files dropped or pasted are left to the browser (a shared space's note, a read-only one)
    this.ui = ui;
    this.note = note;
    this.edit = edit;
    this.saveFile = saveFile;
    this.shownKey = null;
    this.thumbs = new ObjectUrls(); // the thumbnails' blob: URLs, of the files listed now
    this.uploads = new Map(); // sha -> { sent, total, paused }: uploads under way or waiting
    attachments.addEventListener("progress", (e) => this.progress(e.detail));
    attachments.addEventListener("uploaded", (e) => this.progress({ sha: e.detail.sha, done: true }));
    ui.input.addEventListener("change", () => {
      const files = [...ui.input.files];
      ui.input.value = "";
      this.addFiles(files);
    });
    ui.body.addEventListener("paste", (event) => {
      const files = [...((event.clipboardData && event.clipboardData.files) || [])];
      if (files.length === 0 || !this.canAttach()) return;
      event.preventDefault();
      this.addFiles(files);
    });
    ui.body.addEventListener("dragover", (event) => {
      if (!event.dataTransfer || ![...event.dataTransfer.types].includes("Files") || !this.canAttach()) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
    });
    ui.body.addEventListener("drop", (event) => {
      const files = [...((event.dataTransfer && event.dataTransfer.files) || [])];
      if (files.length === 0 || !this.canAttach()) return;
      event.preventDefault();
      this.addFiles(files);
    });
  }

  say(message) {
    this.ui.error.textContent = message;
  }

  /**
   * Attaches files to the note shown: each refused over the server's limit (saying so), else
   * kept here (pending its upload), its element added to the note's attachments and its link
   * typed at the caret, a local edit as any other.
   */
  async addFiles(files) {
    const shown = this.note();
    if (!shown || files.length === 0) return;
    const id = shown.id;
    this.say("");
    const added = [];
    const refused = [];
    const max = await this.attachments.maxBlobBytes();
    for (const file of files) {
      try {
        added.push(await this.attachments.addFile(file, max));
      } catch (error) {
        refused.push(error.message);
      }
    }
    if (refused.length) this.say(refused.join(" "));
    if (added.length === 0) return;
    await this.edit(id, (f) => ({ ...f, attachments: [...(f.attachments || []), ...added.map((a) => a.element)] }));
    const now = this.note();
    if (now && now.id === id) this.insert(added.map((a) => a.markdown).join("\n"));
  }

  /** Types `text` at the caret (on a line of its own), as the user would. */
  insert(text) {
    const body = this.ui.body;
    const start = body.selectionStart ?? body.value.length;
    const end = body.selectionEnd ?? start;
    const before = body.value.slice(0, start);
    const after = body.value.slice(end);
    const line = (before && !before.endsWith("\n") ? "\n" : "") + text + (after.startsWith("\n") ? "" : "\n");
    body.focus();
    body.setRangeText(line, start, end, "end");
    body.dispatchEvent(new Event("input", { bubbles: true }));
  }

  /** The list of the note's files (drawn again only when they changed). */
  render(id, elements = []) {
    const key = `${id}\n${elements.join("\n")}`;
    if (key === this.shownKey) return;
    if (!this.shownKey || !this.shownKey.startsWith(`${id}\n`)) this.say("");
    this.shownKey = key;
    const files = elements.map((element) => parseElement(element) && { ...parseElement(element), element }).filter(Boolean);
    // Thumbnails of files still listed keep their URLs; the others' are revoked.
    this.thumbs.keepOnly(files.filter((f) => isImageType(f.type)).map((f) => f.sha256));
    const items = files.map((file) => this.item(id, file));
    this.ui.list.replaceChildren(...items);
    this.ui.list.hidden = items.length === 0;
  }

  /** No note is shown: the list is emptied and its thumbnails' URLs revoked. */
  clear() {
    this.shownKey = null;
    this.thumbs.release();
    this.ui.list.replaceChildren();
    this.ui.list.hidden = true;
  }

  item(id, file) {
    const li = document.createElement("li");
    li.className = "attachment";
    li.dataset.sha256 = file.sha256;
    if (isImageType(file.type)) {
      const img = document.createElement("img");
      img.className = "thumb";
      img.alt = "";
      img.hidden = true;
      const show = (url) => {
        img.src = url;
        img.hidden = false;
      };
      const url = this.thumbs.peek(file.sha256);
      if (url) {
        show(url);
      } else {
        this.attachments.loadAttachment(file.sha256).then((blob) => {
          const made = blob && li.isConnected ? this.thumbs.get(file.sha256, new Blob([blob], { type: file.type })) : null;
          if (made) show(made);
        }, () => {});
      }
      li.append(img);
    }
    const name = document.createElement("span");
    name.className = "attachment-name";
    name.textContent = file.name;
    const size = document.createElement("span");
    size.className = "attachment-size";
    size.textContent = humanSize(file.size);
    const download = button("Download", `Download ${file.name}`, () => this.download(file));
    const remove = button("Remove", `Remove ${file.name}`, () =>
      this.edit(id, (f) => ({ ...f, attachments: (f.attachments || []).filter((e) => e !== file.element) })));
    // An upload under way: "Uploading whiteboard.jpg — 40%", said politely, with a bar.
    const status = document.createElement("span");
    status.className = "attachment-progress";
    status.setAttribute("aria-live", "polite");
    li.append(name, " ", size, " ", download, " ", remove, status);
    this.showProgress(li, file.name, this.uploads.get(file.sha256));
    return li;
  }

  /** An upload's progress (Attachments' "progress" and "uploaded" events), shown in its item. */
  progress({ sha, sent, total, paused = false, done = false }) {
    if (done) {
      this.uploads.delete(sha);
    } else {
      const was = this.uploads.get(sha);
      this.uploads.set(sha, { sent: sent ?? (was ? was.sent : 0), total, paused });
    }
    for (const li of this.ui.list.children) {
      if (li.dataset.sha256 === sha) this.showProgress(li, li.querySelector(".attachment-name").textContent, this.uploads.get(sha));
    }
  }

  showProgress(li, name, upload) {
    const status = li.querySelector(".attachment-progress");
    if (!upload) {
      status.replaceChildren();
      return;
    }
    const percent = upload.total > 0 ? Math.floor((upload.sent / upload.total) * 100) : 0;
    const text = upload.paused
      ? `Upload of ${name} paused at ${percent}%: it goes on when the server can be reached`
      : `Uploading ${name} — ${percent}%`;
    let label = status.querySelector(".attachment-progress-text");
    let bar = status.querySelector("progress");
    if (!label) {
      label = document.createElement("span");
      label.className = "attachment-progress-text";
      label.id = `upload-${li.dataset.sha256}`;
      bar = document.createElement("progress");
      bar.max = 100;
      bar.setAttribute("aria-labelledby", label.id);
      status.replaceChildren(bar, " ", label);
    }
    bar.value = percent;
    if (label.textContent !== text) label.textContent = text;
  }

  async download(file) {
    const blob = await this.attachments.loadAttachment(file.sha256);
    if (!blob) {
      this.say(`"${file.name}" is not in this browser${navigator.onLine ? " and the server did not send it" : ": it needs a connection"}.`);
      return;
    }
    this.saveFile(blob.type === file.type ? blob : new Blob([blob], { type: file.type }), file.name);
  }
}

function button(text, label, onClick) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "quiet";
  b.textContent = text;
  b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}
