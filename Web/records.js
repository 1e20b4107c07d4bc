// A note's record as the web app keeps it (the fields' defaults, a new note, the outbox marks):
// pure functions, no storage and no DOM, shared by the IndexedDB store (Web/db.js), the
// in-memory store (Web/memory-store.js) and the sync engine (Web/sync.js), and run by node.

export const EMPTY_FIELDS = Object.freeze({
  title: "", body: "", tags: [], folder: null, pinned: false, trashed: false, attachments: [],
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
    // The dates an imported note brought (milliseconds), null for notes written here.
    created: dateField(f.created),
    modified: dateField(f.modified),
    // Files (Web/attachments.js): "<sha256> <size> <type> <name>" each, a set like tags.
    attachments: Array.isArray(f.attachments) ? [...new Set(f.attachments.filter((t) => typeof t === "string"))] : [],
  };
}

/** The text fields of a note (docs/protocol.md section 1): edited by deltas, merged. */
export const TEXT_FIELDS = ["title", "body"];

/** The set fields of a note: elements added and removed, merged as sets. */
export const SET_FIELDS = ["tags", "attachments"];

/** The scalar fields of a note (docs/protocol.md section 1): replaced whole, the later change wins. */
export const SCALAR_FIELDS = ["folder", "pinned", "trashed", "created", "modified"];

/**
 * Whether a record's text differs from the server's last state of it (its shadow; a note the
 * server never had: from an empty note): a text field edited here and not acknowledged. What
 * decides whether a note purged on the server is kept as a new note (Web/sync.js's
 * `removeOrFork`, the Swift client's `removeOrFork`); a pin, a tag, the trash or a folder is
 * not text.
 */
export function textEdited(record) {
  const local = normalizeFields(record.local);
  const base = normalizeFields(record.shadow ? record.shadow.fields : null);
  return TEXT_FIELDS.some((name) => local[name] !== base[name]);
}

function dateField(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** The record as stored: its version number one above `current`'s, its outbox mark kept. */
export function stamp(next, current) {
  const out = { ...next, lv: ((current && current.lv) || 0) + 1 };
  if (isUnsynced(out)) out.pend = 1;
  else delete out.pend;
  return out;
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

/** Whether a record has edits waiting to be sent or answered (the outbox). */
export function isPending(record) {
  return Boolean(record && (record.dirty || record.inflight));
}

/**
 * Whether a record has edits the server has not acknowledged: pending ones, or ones it refused
 * for good (`refusal`: { code, message }, held here and not sent until the user edits the note
 * or discards this device's version). What signing out would leave behind.
 */
export function isUnsynced(record) {
  return Boolean(record && (record.dirty || record.inflight || record.refusal));
}

/**
 * What a store's `change` returns to put `record`, a new note, in the place of the record it
 * was given: that one is deleted and `record` added (stamped as new) in the same write, so the
 * text it keeps is never lost between two writes (Web/sync.js: a note purged on the server
 * whose text edited here is kept under a new id).
 */
export function replacement(record) {
  return { replacedBy: record };
}

/** Whether a store's `change` returned a `replacement`. */
export function isReplacement(next) {
  return Boolean(next && next.replacedBy);
}
