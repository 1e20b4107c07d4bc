// The page's picture of the notes: one small summary per note (no body), kept in list order,
// with the counts the filter menu shows. Loaded once at start-up, then changed by the ids each
// event names: an edit costs one entry, never a pass over every record of the store.

import { isPending, isPurging, noteFields, refusalOf, spaceOf } from "./records.js";

const LINE = 160; // characters of a note's first line kept for its row

/** The first line of `body` with text in it (untrimmed, cut to LINE characters), or "". */
export function firstLine(body) {
  let start = 0;
  while (start <= body.length) {
    let end = body.indexOf("\n", start);
    if (end < 0) end = body.length;
    // A long line is cut before it is tested: a megabyte without a newline costs nothing.
    const line = body.slice(start, Math.min(end, start + LINE));
    if (line.trim()) return line;
    if (end === body.length) break;
    start = end + 1;
  }
  return "";
}

/** What the list needs of a stored record. */
export function summarize(record) {
  const f = noteFields(record);
  return {
    id: record.id,
    lv: record.lv || 0,
    title: f.title.length > LINE ? f.title.slice(0, LINE) : f.title,
    line: firstLine(f.body),
    tags: f.tags,
    folder: f.folder,
    pinned: f.pinned,
    trashed: f.trashed,
    // An imported note's own modification date until it is edited here (its `modified`), and
    // its own creation date (its `created`).
    updatedAt: typeof f.modified === "number" ? f.modified : record.updatedAt || 0,
    createdAt: typeof f.created === "number" ? f.created : record.createdAt || 0,
    pending: isPending(record),
    refusal: refusalOf(record), // { code, message } of a change the server refused for good
    purged: isPurging(record),
    space: spaceOf(record), // the shared space it is in, null for the personal space
  };
}

/** List order: pinned first, then the most recently changed, then by id (as the native client). */
export function compare(a, b) {
  return (b.pinned - a.pinned) || (b.updatedAt - a.updatedAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** The other list order: pinned first, then the latest written (`noted list --sort created`). */
export function compareCreated(a, b) {
  return (b.pinned - a.pinned) || (b.createdAt - a.createdAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

function bump(map, key, by) {
  const n = (map.get(key) || 0) + by;
  if (n > 0) map.set(key, n);
  else map.delete(key);
}

export class NoteIndex {
  constructor() {
    this.entries = new Map(); // id -> summary (with `doc`, its number in the word index)
    this.order = []; // the listed entries (not purged), in list order
    this.unordered = new Set(); // entries added, moved or removed since `order` was last made
    this.gone = new Map(); // id -> last version of a removed record: older news is ignored
    this.counts = { all: 0, trash: 0, pending: 0, refused: 0, folders: new Map(), tags: new Map() };
    this.nextDoc = 0;
    this.version = 0; // changes when what a query returns may have changed
    this.facets = 0; // changes when the counts changed
    this.compare = compare; // the list order: `compare` or `compareCreated`
  }

  /** Orders the list by "updated" (the default) or "created"; every entry is placed again. */
  orderBy(by) {
    const next = by === "created" ? compareCreated : compare;
    if (next === this.compare) return;
    this.compare = next;
    for (const entry of this.order) this.unordered.add(entry);
    this.order = [];
    this.version++;
  }

  get size() {
    return this.entries.size;
  }

  get(id) {
    return this.entries.get(id);
  }

  /**
   * Adds or updates a note from its summary; ignored when it is not newer than what the index
   * holds (events may arrive out of order). Returns the entry, or null when ignored.
   */
  put(summary) {
    const old = this.entries.get(summary.id);
    if (old) {
      if (summary.lv <= old.lv) return null;
      this.count(old, -1);
      const moved = this.compare(old, summary) !== 0 || old.purged !== summary.purged;
      Object.assign(old, summary);
      this.count(old, 1);
      if (moved) this.unordered.add(old);
      this.version++;
      return old;
    }
    const gone = this.gone.get(summary.id);
    if (gone !== undefined && summary.lv <= gone) return null;
    this.gone.delete(summary.id);
    const entry = { ...summary, doc: this.nextDoc++ };
    this.entries.set(entry.id, entry);
    this.count(entry, 1);
    this.unordered.add(entry);
    this.version++;
    return entry;
  }

  /** Forgets a note (deleted from the store); returns its entry, if it had one. */
  remove(id) {
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    this.count(entry, -1);
    this.entries.delete(id);
    entry.removed = true;
    this.unordered.add(entry);
    this.gone.set(id, entry.lv);
    this.version++;
    return entry;
  }

  /** Shows typing in a note's row at once: title, first line, pending; the order waits. */
  touch(id, { title, line, pending }) {
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (pending !== entry.pending) {
      this.counts.pending += pending ? 1 : -1;
      this.facets++;
    }
    entry.title = title.length > LINE ? title.slice(0, LINE) : title;
    entry.line = line;
    entry.pending = pending;
    return entry;
  }

  count(entry, by) {
    const c = this.counts;
    this.facets++;
    if (entry.pending) c.pending += by;
    // A purged note is in no view, where its refusal could be read or discarded: not counted.
    if (entry.purged) return;
    if (entry.refusal) c.refused += by;
    if (entry.trashed) {
      c.trash += by;
      return;
    }
    c.all += by;
    if (entry.folder) bump(c.folders, entry.folder, by);
    for (const tag of entry.tags) bump(c.tags, tag, by);
  }

  /** The listed entries in list order; re-sorts only the entries that changed. */
  sorted() {
    if (this.unordered.size === 0) return this.order;
    const changed = this.unordered;
    this.unordered = new Set();
    const keep = this.order.filter((e) => !changed.has(e));
    const add = [];
    for (const e of changed) if (!e.removed && !e.purged && this.entries.get(e.id) === e) add.push(e);
    add.sort(this.compare);
    if (add.length === 0) {
      this.order = keep;
      return keep;
    }
    const out = new Array(keep.length + add.length);
    let i = 0;
    let j = 0;
    let k = 0;
    while (i < keep.length && j < add.length) out[k++] = this.compare(keep[i], add[j]) <= 0 ? keep[i++] : add[j++];
    while (i < keep.length) out[k++] = keep[i++];
    while (j < add.length) out[k++] = add[j++];
    this.order = out;
    return out;
  }

  /**
   * The entries a view shows: `filter` is "all", "trash", "folder:NAME" or "tag:NAME";
   * `matches` (from SearchIndex.match) keeps only the notes it marks; `space`: "all" (every
   * space), "personal", or a shared space's id.
   */
  query(filter = "all", matches = null, space = "all") {
    const out = [];
    const trash = filter === "trash";
    const folder = filter.startsWith("folder:") ? filter.slice(7) : null;
    const tag = filter.startsWith("tag:") ? filter.slice(4) : null;
    for (const e of this.sorted()) {
      if (e.trashed !== trash) continue;
      if (folder !== null && e.folder !== folder) continue;
      if (tag !== null && !e.tags.includes(tag)) continue;
      if (matches && !matches[e.doc]) continue;
      if (space !== "all" && (e.space ?? null) !== (space === "personal" ? null : space)) continue;
      out.push(e);
    }
    return out;
  }
}
