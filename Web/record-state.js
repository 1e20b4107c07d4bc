// One record's state as the Swift client stores it (issue 47): its sync state (`SyncState`,
// Sources/NotedClient/Store/SyncState.swift) in its stored JSON form, and the field arithmetic
// of the notes collection its transitions use (`RecordMath`, with the server's op application,
// `ChangeParser` and `FieldMerger`, that `RecordMath.apply(ops:)` runs on a broadcast's ops).
// Pure functions, no storage: Web/records.js's `transition`, the port of `RecordTransition`, is
// built on them, and Tests/web/record-state.test.mjs pins both to the Swift client's vectors.

import { applyDelta, editDelta, rebase, sameText } from "./text.js";
import { parseElement } from "./elements.js";

// MARK: The notes schema

/** 9999-12-31T23:59:59.999Z in milliseconds: the latest `created` or `modified` (`CollectionSchema.latestDate`). */
const LATEST_DATE = 253_402_300_799_999;

/**
 * The notes collection (`CollectionSchema.notes`): each field's kind, the value a missing field
 * reads as, and for scalars the JSON types they take and their bounds; `attachments` holds
 * files (`AttachmentReference` elements).
 */
export const NOTES = Object.freeze({
  title: { kind: "text", default: "" },
  body: { kind: "text", default: "" },
  tags: { kind: "set", default: [] },
  folder: { kind: "scalar", default: null, types: ["string", "null"] },
  pinned: { kind: "scalar", default: false, types: ["boolean"] },
  trashed: { kind: "scalar", default: false, types: ["boolean"] },
  created: { kind: "scalar", default: null, types: ["number", "null"], minimum: 0, maximum: LATEST_DATE },
  modified: { kind: "scalar", default: null, types: ["number", "null"], minimum: 0, maximum: LATEST_DATE },
  attachments: { kind: "set", default: [], attachments: true },
});

/** The protocol's default limits (`Limits()`), those a broadcast's ops are checked against. */
export const DEFAULT_LIMITS = Object.freeze({ maxTextLength: 200_000, maxTags: 100, maxTagLength: 200 });

/** A text `delta` of more operations is refused (`FieldMerger.maxDeltaOps`). */
const MAX_DELTA_OPS = 50_000;

// MARK: Field values

/** Whether a JSON value is an object (what Swift's `objectValue` reads): not null, not an array. */
export const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * Every field of the notes schema with its value in `fields`, or its default when missing
 * (`CollectionSchema.completed`). Unlike Web/records.js's `normalizeFields`, values are kept
 * exactly as they are (no type fixing, no de-duplication), and unknown keys stay.
 */
export function completed(fields) {
  const out = { ...fields };
  for (const [name, spec] of Object.entries(NOTES)) {
    if (!Object.hasOwn(out, name)) out[name] = Array.isArray(spec.default) ? [] : spec.default;
  }
  return out;
}

/**
 * Whether two JSON values are equal as Swift's `JSONValue ==` sees them: arrays in order (a
 * set field with its elements reordered is a different value), objects by their keys, strings
 * by canonical equivalence (Swift's `String ==`).
 */
export function sameValue(a, b) {
  if (typeof a === "string" && typeof b === "string") return sameText(a, b);
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && sameValue(a[key], b[key]));
  }
  return a === b;
}

/** A text field's value as text (`stringValue ?? ""`). */
const textOf = (value) => (typeof value === "string" ? value : "");

/** A set field's elements: its strings, in order (`RecordMath.strings`). */
const stringsOf = (value) => (Array.isArray(value) ? value.filter((x) => typeof x === "string") : []);

/** What a Swift `Set<String>` hashes a string by: canonically equivalent strings are one element. */
const setKey = (text) => text.normalize("NFC");

// MARK: Rebase (RecordMath)

/**
 * Local edits made against `base` moved onto `onto`, a newer server state, with whether every
 * text hunk found its place (`RecordMath.rebaseReportingConflicts`): `{ fields, clean }`.
 * Text: the strict rebase of Web/text.js (pinned to Swift by record-math.json); sets: the
 * elements removed here leave the server's set, then those added here are appended, in this
 * device's order; scalars: the value set here.
 */
export function rebaseReportingConflicts(local, base, onto) {
  const mineFields = completed(local);
  const oldFields = completed(base);
  const result = completed(onto);
  let clean = true;
  for (const [name, spec] of Object.entries(NOTES)) {
    const [mine, old, theirs] = [mineFields[name], oldFields[name], result[name]];
    if (sameValue(mine, old)) continue;
    if (spec.kind === "text") {
      const [mineText, oldText, theirsText] = [textOf(mine), textOf(old), textOf(theirs)];
      if (sameText(theirsText, oldText) || sameText(theirsText, mineText)) {
        result[name] = mine;
      } else {
        const rebased = rebase(oldText, mineText, theirsText);
        if (!rebased.clean) clean = false;
        result[name] = rebased.text;
      }
    } else if (spec.kind === "set") {
      result[name] = rebaseSet(stringsOf(mine), stringsOf(old), stringsOf(theirs));
    } else {
      result[name] = mine;
    }
  }
  return { fields: result, clean };
}

/** The set branch of `rebaseReportingConflicts`: `theirs` without what was removed here, then what was added here. */
function rebaseSet(mine, old, theirs) {
  const oldSet = new Set(old.map(setKey));
  const mineSet = new Set(mine.map(setKey));
  const values = theirs.filter((value) => !(oldSet.has(setKey(value)) && !mineSet.has(setKey(value))));
  const present = new Set(values.map(setKey));
  for (const value of mine) {
    if (oldSet.has(setKey(value)) || present.has(setKey(value))) continue;
    present.add(setKey(value));
    values.push(value);
  }
  return values;
}

// MARK: A broadcast's ops (RecordMath.apply: ChangeParser, then FieldMerger)

/**
 * The fields of a `change` broadcast's ops applied to `fields`, the state at its `prevRev`
 * (`RecordMath.apply(ops:to:limits:)`): the ops are checked as the server checks a pushed
 * change (`ChangeParser`), then applied exactly (`FieldMerger.apply` with no base). Throws
 * when they do not parse or apply: the client then pulls instead.
 */
export function applyOps(ops, fields, limits = DEFAULT_LIMITS) {
  if (!isObject(ops)) throw new Error("fields must be a JSON object");
  const parsed = Object.keys(ops).sort().map((name) => [name, parseOp(ops[name], name, limits)]);
  const current = completed(fields);
  const out = { ...current };
  for (const [name, op] of parsed) out[name] = applyOp(op, current[name] ?? null, name, limits);
  return out;
}

/** One field's op as `ChangeParser.parseOp` reads it: `{ set }`, `{ delta }`, `{ add, remove }`; throws when invalid. */
function parseOp(raw, name, limits) {
  if (!Object.hasOwn(NOTES, name)) throw new Error(`unknown field "${name}"`);
  const spec = NOTES[name];
  if (!isObject(raw)) throw new Error(`the op of "${name}" must be a JSON object`);
  const only = (key) => Object.keys(raw).length === 1 && Object.hasOwn(raw, key);
  if (spec.kind === "text") {
    if (only("set") && typeof raw.set === "string") return { set: checkText(raw.set, name, limits) };
    if (only("delta") && typeof raw.delta === "string") return { delta: raw.delta };
    throw new Error(`"${name}" is a text field: use {"set": text} or {"delta": delta}`);
  }
  if (spec.kind === "set") return parseSetOp(raw, name, spec, limits);
  if (!only("set")) throw new Error(`"${name}" is a scalar field: use {"set": value}`);
  const value = raw.set;
  if (!spec.types.includes(value === null ? "null" : typeof value)) throw new Error(`"${name}" does not accept this type`);
  if (typeof value === "string") checkText(value, name, limits);
  if (typeof value === "number" && (value < spec.minimum || value > spec.maximum)) throw new Error(`"${name}" is out of bounds`);
  return { set: value };
}

/** A set field's op (`ChangeParser.parseOp`, `.set`): a whole set of distinct elements, or elements added and removed. */
function parseSetOp(raw, name, spec, limits) {
  const keys = Object.keys(raw);
  if (keys.length === 1 && keys[0] === "set") {
    const values = elements(raw.set, name, limits);
    if (spec.attachments) checkAttachments(values, name);
    if (new Set(values.map(setKey)).size !== values.length) throw new Error(`"${name}": set elements must be distinct`);
    if (values.length > limits.maxTags) throw new Error(`"${name}" has more than ${limits.maxTags} elements`);
    return { replace: values };
  }
  if (keys.length > 0 && keys.every((key) => key === "add" || key === "remove")) {
    const add = Object.hasOwn(raw, "add") ? elements(raw.add, name, limits) : [];
    const remove = Object.hasOwn(raw, "remove") ? elements(raw.remove, name, limits) : [];
    if (spec.attachments) checkAttachments(add, name);
    if (add.length > limits.maxTags || remove.length > limits.maxTags) throw new Error(`"${name}" has more than ${limits.maxTags} elements`);
    return { add: uniqued(add), remove: uniqued(remove) };
  }
  throw new Error(`"${name}" is a set field: use {"set": [...]} or {"add": [...], "remove": [...]}`);
}

/** An op's array of elements: strings, each at most `maxTagLength` UTF-16 code units. */
function elements(value, name, limits) {
  if (!Array.isArray(value) || !value.every((x) => typeof x === "string")) throw new Error(`"${name}" takes an array of strings`);
  if (value.some((x) => x.length > limits.maxTagLength)) throw new Error(`"${name}": an element is too long`);
  return value;
}

/**
 * Each element an attachments op adds must be an `AttachmentReference` (Web/elements.js reads
 * them as NotedCore does, but for sizes above 2^53, which it refuses).
 */
function checkAttachments(values, name) {
  if (values.some((value) => parseElement(value) === null)) throw new Error(`"${name}": an element is not "<sha256> <size> <type> <name>"`);
}

function checkText(text, name, limits) {
  if (text.length > limits.maxTextLength) throw new Error(`"${name}" is longer than ${limits.maxTextLength} UTF-16 code units`);
  return text;
}

function uniqued(values) {
  const seen = new Set();
  return values.filter((value) => !seen.has(setKey(value)) && seen.add(setKey(value)));
}

/** One parsed op applied to the field's current value (`FieldMerger.apply`, the change not stale). */
function applyOp(op, value, name, limits) {
  if (Object.hasOwn(op, "delta")) {
    if (op.delta.split("\t").filter(Boolean).length > MAX_DELTA_OPS) throw new Error(`the delta of "${name}" has too many operations`);
    return checkText(applyDelta(textOf(value), op.delta), name, limits);
  }
  if (Object.hasOwn(op, "add")) {
    const removed = new Set(op.remove.map(setKey));
    const result = stringsOf(value).filter((x) => !removed.has(setKey(x)));
    const present = new Set(result.map(setKey));
    for (const x of op.add) {
      if (present.has(setKey(x))) continue;
      present.add(setKey(x));
      result.push(x);
    }
    if (result.length > limits.maxTags) throw new Error(`"${name}" would have more than ${limits.maxTags} elements`);
    return result;
  }
  return Object.hasOwn(op, "replace") ? op.replace : op.set;
}

// MARK: A change's ops (RecordMath.ops, RecordMath.applyExactly)

/**
 * The ops of the change that brings the server from `shadow` to `local` (`RecordMath.ops`),
 * field by field in name order, only the fields that differ (as Swift's `JSONValue ==` sees
 * them: a set reordered here differs, but sends nothing, having added and removed nothing):
 * text as the word-widened delta the Swift client sends, or as a `set` when `textAsSet` (a
 * create, or a resend after `base_unavailable`); sets as what was added and removed (a `set`
 * with `textAsSet`); scalars as a `set`.
 */
export function changeOps(shadow, local, textAsSet) {
  const old = completed(shadow);
  const neu = completed(local);
  const ops = {};
  for (const name of Object.keys(NOTES).sort()) {
    const spec = NOTES[name];
    if (sameValue(neu[name], old[name])) continue;
    if (spec.kind === "text") {
      const text = textOf(neu[name]);
      ops[name] = textAsSet ? { set: text } : { delta: editDelta(textOf(old[name]), text) ?? "" };
    } else if (spec.kind === "set") {
      const [before, after] = [stringsOf(old[name]), stringsOf(neu[name])];
      const [had, has] = [new Set(before.map(setKey)), new Set(after.map(setKey))];
      const add = after.filter((value) => !had.has(setKey(value)));
      const remove = before.filter((value) => !has.has(setKey(value)));
      if (textAsSet) ops[name] = { set: after };
      else if (add.length || remove.length) ops[name] = { add, remove };
    } else {
      ops[name] = { set: neu[name] };
    }
  }
  return ops;
}

/** No limits: what a change's own ops produce is checked by the server, not here. */
const NO_LIMITS = Object.freeze({ maxTextLength: Infinity, maxTags: Infinity, maxTagLength: Infinity });

/**
 * The fields `ops` produce when applied exactly to `shadow` (`RecordMath.applyExactly`): what
 * an `applied` ack means the server holds, kept as the in-flight change's `sent`. Ops that do
 * not apply (an attachment element that is none) leave the shadow as it was.
 */
export function applyExactly(ops, shadow) {
  try {
    return applyOps(ops, shadow, NO_LIMITS);
  } catch {
    return completed(shadow);
  }
}

// MARK: SyncState

/**
 * A record's sync state (`SyncState`): `{ edited, purging, next, inflight, refusal, conflicts }`,
 * every key present. `next`: null to send text as deltas, `{ set: baseRev | null }` to send
 * `set`s (after `base_unavailable` or `invalid_delta`; with a stale base after edits a merged
 * ack did not take). `inflight`: null, or `{ ccid, baseRev, body, sent, newest, absentAtSeq }`
 * (`sent` null for a purge; `newest` null, or `{ fields | null, rev, updatedAt }` in
 * milliseconds, the newest server state seen meanwhile, fields null for a purge). Its
 * transitions return a new state; `read` and `stored` convert the stored JSON form.
 */
export const SyncState = Object.freeze({
  /** Nothing to send, nothing in flight, nothing to report (stored as null). */
  synced: Object.freeze({ edited: false, purging: false, next: null, inflight: null, refusal: null, conflicts: [] }),

  /** A record created here (a note keeping a purged one's text): everything is to be sent. */
  created: Object.freeze({ edited: true, purging: false, next: null, inflight: null, refusal: null, conflicts: [] }),

  /** The state from its stored form, null when synced (`SyncState.init(json:)`). */
  read(stored) {
    const object = isObject(stored) ? stored : {};
    const next = object.next;
    return {
      edited: object.edited === true,
      purging: object.purging === true,
      next: isObject(next) && Object.hasOwn(next, "set") ? { set: Number.isSafeInteger(next.set) ? next.set : null } : null,
      inflight: object.inflight === undefined || object.inflight === null ? null : readInflight(object.inflight),
      refusal: typeof object.refusal === "string" ? object.refusal : null,
      conflicts: Array.isArray(object.conflicts) ? object.conflicts.filter((x) => typeof x === "string") : [],
    };
  },

  /** The stored form: keys at their default left out, null when synced (`SyncState.json`). */
  stored(state) {
    const object = {};
    if (state.edited) object.edited = true;
    if (state.purging) object.purging = true;
    if (state.next) object.next = { set: state.next.set };
    if (state.inflight) object.inflight = storedInflight(state.inflight);
    if (state.refusal !== null) object.refusal = state.refusal;
    if (state.conflicts.length) object.conflicts = state.conflicts;
    return Object.keys(object).length ? object : null;
  },

  /** Whether the record is in the outbox: edits to send, a change in flight, or a purge. */
  pending(state) {
    return state.edited || state.inflight !== null || state.purging;
  },

  /** The newest revision held: the shadow's, or one seen while a change was in flight. */
  heldRev(state, shadowRev) {
    return Math.max(shadowRev, state.inflight?.newest?.rev ?? 0);
  },

  /** The `baseRev` the next change names: the shadow's, or the older one of `next`. */
  nextBaseRev(state, shadowRev) {
    return state.next && state.next.set !== null ? state.next.set : shadowRev;
  },

  /** Whether the next change sends text as `set`s (`next` is `{ set }`). */
  sendsTextAsSet(state) {
    return state.next !== null;
  },

  /** The user changed the record: to be sent; a refusal or a conflict is over. */
  edit(state) {
    return { ...state, edited: true, refusal: null, conflicts: [] };
  },

  /**
   * The user purged the record: the purge replaces any refused edit (which would otherwise
   * still be listed as refused, on a record the user can no longer open).
   */
  purge(state) {
    return { ...state, purging: true, edited: true, refusal: null };
  },

  /** The pending edits go out as `change`: one change per record is in flight at a time. */
  send(state, change) {
    if (state.inflight) throw new Error("a second change in flight for one record");
    return { ...state, inflight: change, edited: false, next: null, refusal: null };
  },

  /** The pending edits turned out to change nothing the server holds. */
  nothingToSend(state) {
    return { ...state, edited: false };
  },

  /** A newer server state arrived while a change was in flight; an older one is ignored. */
  sawNewer(state, fields, rev, updatedAt) {
    const change = state.inflight;
    if (!change || rev <= (change.newest?.rev ?? 0)) return state;
    return { ...state, inflight: { ...change, newest: { fields, rev, updatedAt } } };
  },

  /** A snapshot pull ending at `seq` did not name the record while a change was in flight. */
  absentFromSnapshot(state, seq) {
    return state.inflight ? { ...state, inflight: { ...state.inflight, absentAtSeq: seq } } : state;
  },

  /** The change in flight was answered: `[that change, the state without it]`. */
  answered(state) {
    return [state.inflight, { ...state, inflight: null }];
  },

  /** Local edits could not be moved onto a newer server state: they go out as they are, unless refused for good. */
  stillToSend(state) {
    return state.refusal === null ? { ...state, edited: true } : state;
  },

  /**
   * The record moved to a newer server state: whatever still differs is to be sent (a purge
   * still goes). Refused edits are moved along but not sent; once nothing differs, the refusal
   * is over.
   */
  moved(state, localDiffers) {
    const refusal = localDiffers ? state.refusal : null;
    return { ...state, refusal, edited: state.purging || (localDiffers && refusal === null) };
  },

  /** The user dropped the edits not yet sent; a change in flight stays in flight. */
  discard(state) {
    return { ...state, edited: false, purging: false, refusal: null, conflicts: [], next: null };
  },

  /** A merge could not place all of this device's edit in these text fields. */
  merged(state, fields) {
    return fields.length ? { ...state, conflicts: fields } : state;
  },

  /**
   * Edits made since a merged change could not be rebased onto the acknowledged state: the
   * next change sends them as stale `set`s against `staleBase`, so that the server keeps the
   * text they replace as a conflict revision. Only once the merged change has been answered.
   */
  keepUnplacedEdits(state, staleBase) {
    if (state.inflight) throw new Error("unplaced edits kept while a change is in flight");
    return { ...state, edited: true, conflicts: ["body"], next: { set: staleBase } };
  },

  /**
   * The server refused the change in flight (docs/protocol.md section 5), which is then no
   * longer in flight. `rate_limited` changes nothing (resent later, unchanged). Otherwise the
   * edits are to be sent again: as `set`s after `base_unavailable` or `invalid_delta`; as they
   * are after `gone`, `not_found`, `already_exists`, `invalid_version` and `ccid_reused`
   * (a new change, a new ccid); any other code refuses them for good (held, not sent), unless
   * the record was edited after the send: those edits may be the user's correction, and go.
   */
  refused(state, code, message) {
    if (code === "rate_limited") return state;
    const editedSince = state.inflight !== null && state.edited;
    const next = { ...state, inflight: null, edited: true };
    if (code === "base_unavailable" || code === "invalid_delta") return { ...next, next: { set: null } };
    if (RESENT_AS_THEY_ARE.includes(code) || editedSince) return next;
    return { ...next, edited: false, refusal: `${code}: ${message}` };
  },

  /**
   * The record's space is no longer the user's (a `spaces` list without it, or a shared
   * space's `not_found`): its edits are kept, refused, never sent (`SyncState.outOfSpace`).
   * Not part of the shared vectors: the personal space never comes here.
   */
  outOfSpace(state) {
    return { ...state, inflight: null, edited: false, purging: false, refusal: LEFT_SPACE_REFUSAL };
  },

  /** The user is in the record's space again: edits kept by `outOfSpace` go out (`SyncState.backInSpace`). */
  backInSpace(state) {
    return state.refusal === LEFT_SPACE_REFUSAL ? { ...state, refusal: null, edited: true } : state;
  },
});

/** Why an edit of a record of a space the user is no longer in is held (the Swift client's words). */
export const LEFT_SPACE = "you are no longer a member of this record's space; copy it to your space";
/** Its stored refusal (the code the server gives a non-member's edit, then the words). */
const LEFT_SPACE_REFUSAL = `read_only: ${LEFT_SPACE}`;

/** The codes after which the edits go again as they are (`SyncState.refused`). */
const RESENT_AS_THEY_ARE = ["gone", "not_found", "already_exists", "invalid_version", "ccid_reused"];

/** An in-flight change from its stored form (`SyncState.Inflight.init(json:)`). */
function readInflight(object) {
  if (!isObject(object) || typeof object.ccid !== "string" || !Number.isSafeInteger(object.baseRev) || typeof object.body !== "string") {
    throw new Error("a record's sync state is damaged: an in-flight change without ccid, baseRev or body");
  }
  const { newest } = object;
  if (newest !== undefined && !(isObject(newest) && Number.isSafeInteger(newest.rev) && Number.isSafeInteger(newest.updatedAt))) {
    throw new Error("a record's sync state is damaged: a newest state without rev or updatedAt");
  }
  return {
    ccid: object.ccid,
    baseRev: object.baseRev,
    body: object.body,
    sent: isObject(object.sent) ? object.sent : null,
    newest: newest === undefined ? null : { fields: isObject(newest.fields) ? newest.fields : null, rev: newest.rev, updatedAt: newest.updatedAt },
    absentAtSeq: Number.isSafeInteger(object.absentAtSeq) ? object.absentAtSeq : null,
  };
}

/** An in-flight change's stored form (`SyncState.Inflight.json`). */
function storedInflight(change) {
  const object = { ccid: change.ccid, baseRev: change.baseRev, body: change.body };
  if (change.sent !== null) object.sent = change.sent;
  if (change.newest) object.newest = { fields: change.newest.fields, rev: change.newest.rev, updatedAt: change.newest.updatedAt };
  if (change.absentAtSeq !== null) object.absentAtSeq = change.absentAtSeq;
  return object;
}
