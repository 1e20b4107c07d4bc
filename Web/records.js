// A note's record as the web app keeps it, in the Swift client's stored form (the fields'
// defaults, a new note, the outbox marks, what the page reads of a record, a local edit and a
// purge): pure functions, no storage and no DOM, shared by the IndexedDB store (Web/db.js), the
// in-memory store (Web/memory-store.js), the sync engine (Web/sync.js) and the page, and run by
// node. And `transition`, what one record becomes when something about it arrives, as the Swift
// client decides it (`RecordTransition`): the only place the web app holds those rules.

import { DEFAULT_LIMITS, SyncState, applyOps, completed, isObject, rebaseReportingConflicts, sameValue } from "./record-state.js";

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

function dateField(value) {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** The text fields of a note (docs/protocol.md section 1): edited by deltas, merged. */
export const TEXT_FIELDS = ["title", "body"];

/** The set fields of a note: elements added and removed, merged as sets. */
export const SET_FIELDS = ["tags", "attachments"];

/** The scalar fields of a note (docs/protocol.md section 1): replaced whole, the later change wins. */
export const SCALAR_FIELDS = ["folder", "pinned", "trashed", "created", "modified"];

// MARK: The stored form

// A record is stored as the Swift client stores it (`RecordRow`): `{ id, collection, local,
// shadow, rev, createdAt, updatedAt, sync }`: the fields as the user sees them, the server's
// fields at `rev` (null and 0 before the server first acknowledged it), times in milliseconds,
// and `sync` the stored form of its `SyncState` (Web/record-state.js; null when synced). The
// stores add `lv` and `pend` (`stamp`). What the sync engine does to one is `transition`'s
// (below); the page reads a record only through the accessors here.

/** A new local note (rev 0: not on the server yet): everything is to be sent. */
export function newRecord(id, fields, now = Date.now()) {
  return {
    id, collection: "notes", local: normalizeFields(fields), shadow: null, rev: 0, createdAt: now, updatedAt: now,
    sync: SyncState.stored(SyncState.created),
  };
}

/** The record's `SyncState`. */
export function syncState(record) {
  return SyncState.read(record.sync);
}

/** The note's fields as the page shows them (the schema's defaults where one is missing). */
export function noteFields(record) {
  return normalizeFields(record.local);
}

/** The shared space the record is in (protocol 2, docs/protocol.md "Spaces"), null for the personal space. */
export function spaceOf(record) {
  return (record && typeof record.space === "string" && record.space) || null;
}

/** Whether the server has had the record (acknowledged a change of it, or sent it). */
export function onServer(record) {
  return record.rev > 0;
}

/** Whether the user purged the record here (its purge not yet acknowledged): no view shows it. */
export function isPurging(record) {
  return Boolean(record) && syncState(record).purging;
}

/** Whether a record has edits waiting to be sent or answered (the outbox). */
export function isPending(record) {
  return Boolean(record) && SyncState.pending(syncState(record));
}

/**
 * Why the server refused the record's last change for good, `{ code, message }` (the Swift
 * client's "code: message"), or null. The edit is held here, not sent until the user edits the
 * note or discards this device's version.
 */
export function refusalOf(record) {
  const refusal = record ? syncState(record).refusal : null;
  if (refusal === null) return null;
  const at = refusal.indexOf(": ");
  return at < 0 ? { code: refusal, message: "" } : { code: refusal.slice(0, at), message: refusal.slice(at + 2) };
}

/**
 * Whether a record has edits the server has not acknowledged: pending ones, or ones it refused
 * for good. What signing out would leave behind.
 */
export function isUnsynced(record) {
  return isPending(record) || refusalOf(record) !== null;
}

/** The record with the user's fields `local` (the whole note), to be sent (`SyncState.edit`). */
export function withEdit(record, local, now = Date.now()) {
  return { ...record, local, updatedAt: now, sync: SyncState.stored(SyncState.edit(syncState(record))) };
}

/**
 * The record purged by the user (`LocalTransaction.purge`): null (deleted at once) when the
 * server never had it and no change of it is in flight, else marked to send the purge.
 */
export function withPurge(record) {
  const state = syncState(record);
  if (record.rev === 0 && !state.inflight) return null;
  return { ...record, sync: SyncState.stored(SyncState.purge(state)) };
}

/** The record as stored: its version number one above `current`'s, its outbox mark kept. */
export function stamp(next, current) {
  return marked({ ...next, lv: ((current && current.lv) || 0) + 1 });
}

/** The record with its outbox mark (`pend`: 1 while it is unsynced, for the stores' `pending` index). */
export function marked(record) {
  const out = { ...record };
  if (isUnsynced(out)) out.pend = 1;
  else delete out.pend;
  return out;
}

/**
 * Whether a store holds nothing new in `next` (a transition's record) over `current`: then it
 * is not written (nor its version numbered again). Field objects a transition did not touch are
 * `current`'s own.
 */
export function unchanged(next, current) {
  return Boolean(current) && next.rev === current.rev && (next.space ?? null) === (current.space ?? null) && next.createdAt === current.createdAt && next.updatedAt === current.updatedAt &&
    sameJSON(next.local, current.local) && sameJSON(next.shadow, current.shadow) && sameJSON(next.sync, current.sync ?? null);
}

function sameJSON(a, b) {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

// MARK: Records of the previous stored form (IndexedDB version 3)

/**
 * A record as the web app stored it before it took the Swift client's form (IndexedDB version
 * 3 and before; a node store's file): `{ id, collection, local, shadow: { fields, rev } | null,
 * dirty, inflight: { ccid, baseRev, change, sent, absentAtSeq } | null, purged, refusal:
 * { code, message }, forceSet, staleBase, stash, createdAt, updatedAt (RFC 3339) }`, its shadow
 * unpacked. In the stored form, losing nothing: unsent edits stay to be sent, a change in flight
 * stays in flight (resent byte for byte), a refusal stays; null for a record nothing needs (a
 * purge the server has taken, kept by a version before for ever). A record already in the
 * stored form is returned as it is.
 */
export function fromVersion3(old) {
  if (!old || typeof old.rev === "number") return old ?? null;
  const shadow = old.shadow && old.shadow.fields ? old.shadow : null;
  const pending = Boolean(old.dirty || old.inflight);
  if (old.purged && !shadow && !pending) return null;
  const local = old.local ?? {};
  const createdAt = millis(old.createdAt, 0);
  const updatedAt = millis(old.updatedAt, createdAt);
  const state = {
    ...SyncState.synced,
    edited: Boolean(old.dirty),
    purging: Boolean(old.purged),
    next: old.forceSet ? { set: Number.isSafeInteger(old.staleBase) ? old.staleBase : null } : null,
    inflight: old.inflight ? inflightOf(old.inflight, old.stash, local, updatedAt) : null,
    refusal: refusalText(old, shadow),
  };
  return {
    id: old.id, collection: old.collection ?? "notes", local, shadow: shadow ? shadow.fields : null, rev: shadow ? shadow.rev : 0,
    createdAt, updatedAt, sync: SyncState.stored(state), ...(old.lv ? { lv: old.lv } : {}),
  };
}

/** An old in-flight change, with the newer server state seen meanwhile (`stash`), in `SyncState`'s form. */
function inflightOf(inflight, stash, local, updatedAt) {
  const change = inflight.change ?? {};
  const newest = stash && Number.isSafeInteger(stash.rev)
    ? { fields: stash.deleted ? null : stash.fields ?? {}, rev: stash.rev, updatedAt: millis(stash.updatedAt, updatedAt) }
    : null;
  return {
    ccid: inflight.ccid ?? change.ccid, baseRev: inflight.baseRev ?? change.baseRev ?? 0, body: JSON.stringify(change),
    sent: change.op === "delete" ? null : inflight.sent ?? local, newest,
    absentAtSeq: Number.isSafeInteger(inflight.absentAtSeq) ? inflight.absentAtSeq : null,
  };
}

/**
 * An old refusal as the Swift client's text. A version before that (`refused: code`, not in the
 * outbox) kept the note looking synced: it is refused if its text still differs from the server's.
 */
function refusalText(old, shadow) {
  if (old.refusal) return `${old.refusal.code}: ${old.refusal.message ?? ""}`;
  if (!old.refused || old.dirty || old.inflight || old.purged) return null;
  const held = !shadow || !sameValue(normalizeFields(old.local), normalizeFields(shadow.fields));
  return held ? `${old.refused}: ` : null;
}

/** An RFC 3339 date (or milliseconds) as milliseconds; `fallback` when it is neither. */
function millis(value, fallback) {
  const ms = typeof value === "number" ? value : Date.parse(value);
  return Number.isFinite(ms) ? ms : fallback;
}

// MARK: What a record becomes (RecordTransition)

/**
 * What one record becomes when something about it arrives: a port of the Swift client's
 * `RecordTransition` (Sources/NotedClient/Sync/RecordTransition.swift), the rules of
 * docs/protocol.md section 5 and docs/architecture.md ("One record, two clients"), pinned to it
 * by Tests/web/vectors/record-state.json. Pure: no storage, no clock, no randomness.
 *
 * `record`: the record as the Swift client stores it, null when this device holds none:
 * `{ id, collection, local, shadow | null, rev, createdAt, updatedAt, sync }`, times in
 * milliseconds, `sync` the stored form of its `SyncState` (null when synced; see
 * Web/record-state.js). It is not changed; the result may share field objects with it, so
 * treat both as read-only.
 *
 * `event`, as it comes off the wire (dates RFC 3339):
 * - `{ type: "record", record, buried }`: a server state (a pulled page, the newest state seen);
 *   `buried`: the id is in the tombstones (asked only when no record is held);
 * - `{ type: "broadcast", message, buried }`: a `change` broadcast;
 * - `{ type: "ack", message }`: the answer to a change;
 * - `{ type: "refused", ccid, code, message, current, absentAttachment }`: a `reject` of the
 *   change `ccid` (or this client's own `too_large`), `current` the server state it carries or
 *   null, `absentAttachment` (for `missing_blob`) a file the change adds that neither the
 *   server nor this device has, null when every one can go up again;
 * - `{ type: "absentFromSnapshot", cursor }`: a snapshot ending at `cursor` did not name it;
 * - `{ type: "discard" }`: the user gives up this device's unsent edits.
 *
 * `now`: the time (milliseconds) an answered change's record is stamped with and a kept copy is
 * made at; `newID()`: the id of a new note keeping the text of a purged one; `limits`: the
 * server's (a broadcast's ops are checked against them).
 *
 * Returns `{ record, buried, fork, effect }`, and `applied` for a broadcast (false: pull instead):
 * the record as it ends (null: not held, or no longer), an id to add to the tombstones, a new
 * record keeping text of a purged one, and what to tell (`StoreEffect`: `{ changed, removed,
 * added (sorted), forked: [[from, to]], needsPull, retryLater, refused: [[id, message]],
 * conflicts: [[id, fields]] }`).
 */
export function transition(record, event, { now, newID, limits = DEFAULT_LIMITS }) {
  const rules = new RecordTransition(now, newID);
  const out = { record: record ? readRecord(record) : null, buried: null, fork: null, effect: newEffect() };
  let applied;
  switch (event.type) {
    case "record": rules.absorb(readServerRecord(event.record), event.buried === true, out); break;
    case "broadcast": applied = rules.broadcast(readBroadcast(event.message), event.buried === true, limits, out); break;
    case "absentFromSnapshot": rules.absentFromSnapshot(event.cursor, out); break;
    case "ack": rules.ack(readAck(event.message), out); break;
    case "refused": rules.refused(readRefusal(event), out); break;
    case "discard": rules.discard(out); break;
    default: throw new Error(`unknown event "${event.type}"`);
  }
  const result = { record: storedRecord(out.record), buried: out.buried, fork: storedRecord(out.fork), effect: storedEffect(out.effect) };
  if (event.type === "broadcast") result.applied = applied;
  return result;
}

/**
 * The rules, method by method as `RecordTransition`'s. `out` is its `Outcome`: `{ record,
 * buried, fork, effect }`, records as `readRecord` gives them (`state`: a `SyncState`). A
 * method takes a shallow copy of `out.record` to change (Swift's `var row = out.record`); field
 * objects and states are replaced, never changed in place.
 */
class RecordTransition {
  constructor(now, newID) {
    this.now = now;
    this.newID = newID;
  }

  /**
   * Takes a server state of the record: rebases local edits onto it, or stashes it while a
   * change is in flight (the answer to that change decides how local edits move).
   */
  absorb(server, buried, out) {
    if (!out.record) {
      if (server.deleted) {
        out.buried = server.id;
        return;
      }
      if (buried) return;
      const fields = completed(server.fields);
      out.record = {
        id: server.id, collection: server.collection, local: fields, shadow: fields, rev: server.rev,
        createdAt: server.createdAt, updatedAt: server.updatedAt, state: SyncState.synced,
      };
      addTo(out.effect, server.id);
      return;
    }
    const row = { ...out.record };
    if (row.state.inflight) {
      if (server.rev > SyncState.heldRev(row.state, row.rev)) {
        row.state = SyncState.sawNewer(row.state, server.deleted ? null : server.fields, server.rev, server.updatedAt);
        out.record = row;
      }
      return;
    }
    if (server.rev <= row.rev) return;
    if (server.deleted) {
      this.removeOrFork(row, out);
      return;
    }
    this.move(row, server.fields, server.rev, server.updatedAt, shadowFields(row));
    out.record = row;
    out.effect.changed.push(row.id);
  }

  /**
   * A `change` broadcast: applied when the record is exactly at its `prevRev` (a purge at any
   * revision: a client whose first pull was from 0 would otherwise never hear of it), onto the
   * newest state held. False when the client must pull instead (another revision held, or ops
   * that do not apply).
   */
  broadcast(message, buried, limits, out) {
    const row = out.record;
    if (!row && buried) return true;
    const held = row ? SyncState.heldRev(row.state, row.rev) : 0;
    if (message.rev <= held) return true;
    const isDelete = message.op === "delete";
    if (held !== message.prevRev && !isDelete) return false;
    const newest = row && row.state.inflight && row.state.inflight.newest;
    const base = !row ? {} : newest ? newest.fields ?? {} : shadowFields(row);
    let fields = {};
    if (!isDelete) {
      try {
        fields = applyOps(message.fields, base, limits);
      } catch {
        return false;
      }
    }
    const server = {
      collection: message.collection, id: message.id, rev: message.rev, deleted: isDelete, fields,
      createdAt: row ? row.createdAt : message.updatedAt, updatedAt: message.updatedAt,
    };
    this.absorb(server, buried, out);
    return true;
  }

  /**
   * A snapshot pull ending at `cursor` did not name the record: it was purged on the server,
   * as if its tombstone had arrived (text edited here, refused too, is kept as a new note). A
   * record with a change in flight (a create too) waits for the answer (see `ack`); one the
   * server never had stays.
   */
  absentFromSnapshot(cursor, out) {
    if (!out.record) return;
    const row = { ...out.record };
    if (row.state.inflight) {
      row.state = SyncState.absentFromSnapshot(row.state, cursor);
      out.record = row;
    } else if (row.rev > 0) {
      // As if its tombstone had arrived; a record the server never had stays.
      this.removeOrFork(row, out);
    }
  }

  /**
   * Takes an `ack` of the change in flight: the shadow moves to the acknowledged state (or a
   * newer one seen meanwhile) and edits made since the send are rebased onto it. An ack of
   * another change (an older one, resent and answered twice) changes nothing.
   */
  ack(ack, out) {
    if (!out.record || out.record.state.inflight?.ccid !== ack.ccid) return;
    const row = { ...out.record };
    const [change, state] = SyncState.answered(row.state);
    row.state = state;
    if (change.sent === null) {
      // A purge, acknowledged.
      bury(row, out);
      return;
    }
    const acknowledged = ack.fields ?? change.sent;
    if (change.absentAtSeq !== null && ack.seq !== null && ack.seq <= change.absentAtSeq) {
      // Applied before a snapshot that no longer had the record: purged since. Only text edited
      // after the send is kept, as if the ack and then the tombstone had arrived.
      row.shadow = acknowledged;
      this.removeOrFork(row, out);
      return;
    }
    let stash = null;
    if (change.newest && change.newest.rev > ack.rev) {
      // Purged after our change: nothing newer than the purge. As if the ack and then the
      // tombstone had arrived: only text edited after the send is kept.
      if (change.newest.fields === null) {
        row.shadow = acknowledged;
        this.removeOrFork(row, out);
        return;
      }
      stash = change.newest;
    }
    const conflicts = ack.conflicts ?? [];
    row.state = SyncState.merged(row.state, conflicts);
    if (conflicts.length) out.effect.conflicts.push([row.id, conflicts]);
    this.rebase(row, acknowledged, ack.rev, stash, change.sent, change.baseRev);
    out.record = row;
    out.effect.changed.push(row.id);
  }

  /**
   * A refusal of the change in flight, as docs/protocol.md section 5 prescribes for its code:
   * `rate_limited` keeps it to be resent later; `missing_blob` too, unless a file it adds is
   * nowhere (then it is refused, saying which); `gone` and `not_found` remove the record or keep
   * its text as a new note; the others go by `SyncState.refused`, then the newest state seen
   * meanwhile and the one the reject carries are taken in. `already_exists` and
   * `invalid_version` with neither ask for a pull.
   */
  refused({ ccid, code, message, current, absentAttachment }, out) {
    const change = out.record && out.record.state.inflight;
    if (!change || change.ccid !== ccid) return;
    const row = { ...out.record };
    if (code === "rate_limited" || (code === "missing_blob" && absentAttachment === null)) {
      out.effect.retryLater = true;
      return;
    }
    if (code === "missing_blob") {
      const why = `the attachment ${absentAttachment} is neither on the server nor on this device; remove it from the note`;
      row.state = SyncState.refused(row.state, code, why);
      out.record = row;
      if (row.state.refusal !== null) out.effect.refused.push([row.id, row.state.refusal]);
      out.effect.changed.push(row.id);
      return;
    }
    if (code === "not_found" && spaceOf(row)) {
      // A shared space's `not_found`: the user is no longer in it (the `spaces` message saying
      // so may come after). Not a purge: nothing buried or forked; the edits are kept refused
      // (sent again if the user is back in the space), a delete simply done here.
      if (row.state.purging) {
        out.record = null;
        out.effect.removed.push(row.id);
        return;
      }
      row.state = SyncState.outOfSpace(row.state);
      out.record = row;
      out.effect.refused.push([row.id, row.state.refusal]);
      out.effect.changed.push(row.id);
      return;
    }
    const { newest } = change;
    const stash = newest && {
      collection: row.collection, id: row.id, rev: newest.rev, deleted: newest.fields === null, fields: newest.fields ?? {},
      createdAt: row.createdAt, updatedAt: newest.updatedAt,
    };
    row.state = SyncState.refused(row.state, code, message);
    out.record = row;
    if (code === "gone" || code === "not_found") {
      this.removeOrFork(row, out);
      return;
    }
    if (code === "already_exists" || code === "invalid_version") {
      if (!current && !stash) out.effect.needsPull = true;
    } else if (row.state.refusal !== null) {
      out.effect.refused.push([row.id, row.state.refusal]);
    }
    for (const server of [stash, current]) {
      if (!server) continue;
      this.absorb(server, false, out);
      if (!out.record) return;
    }
    out.effect.changed.push(row.id);
  }

  /**
   * The user gives up this device's edits not yet sent: it shows the server's version again
   * (or, with a change in flight, what that change sent: its answer brings the server's state),
   * and a record the server never acknowledged goes.
   */
  discard(out) {
    if (!out.record) return;
    const row = { ...out.record };
    const change = row.state.inflight;
    if (change) {
      if (change.sent !== null) row.local = change.sent;
    } else if (row.rev === 0) {
      out.record = null;
      out.effect.removed.push(row.id);
      return;
    } else {
      row.local = shadowFields(row);
    }
    row.state = SyncState.discard(row.state);
    out.record = row;
    out.effect.changed.push(row.id);
  }

  /**
   * Moves a record without an in-flight change (`row`, changed in place) to a newer server
   * state, rebasing local edits made against `base` onto it. When a text hunk of them cannot
   * be placed (`requireClean`), nothing moves and false is returned: the edits then go to the
   * server against the older revision, where it merges them and keeps a conflict revision if
   * it cannot place them either.
   */
  move(row, fields, rev, updatedAt, base, requireClean = true) {
    const server = completed(fields);
    const local = completed(row.local);
    const hasEdits = !sameValue(local, completed(base));
    if (hasEdits) {
      const rebased = rebaseReportingConflicts(local, base, server);
      if (!rebased.clean && requireClean) {
        row.state = SyncState.stillToSend(row.state);
        return false;
      }
      row.local = rebased.fields;
    } else {
      row.local = server;
    }
    row.shadow = server;
    row.rev = rev;
    row.state = SyncState.moved(row.state, !sameValue(completed(row.local), server));
    if (!hasEdits) row.updatedAt = updatedAt;
    return true;
  }

  /**
   * After an ack: the record moves to the newest state seen (`stash`), if the edits made since
   * the send fit onto it, else to the acknowledged state. When not even that takes them (a
   * merged ack moved the text they edit), the user's text stays and goes next as `set`s against
   * the revision it was edited on, so that the server keeps the text they replace as a
   * conflict revision (`SyncState.keepUnplacedEdits`).
   */
  rebase(row, acknowledged, ackRev, stash, sent, sentBaseRev) {
    const local = completed(row.local);
    const editedSince = !sameValue(local, completed(sent));
    if (stash && this.move(row, stash.fields, stash.rev, editedSince ? row.updatedAt : stash.updatedAt, sent)) return;
    if (this.move(row, acknowledged, ackRev, editedSince ? row.updatedAt : this.now, sent)) return;
    this.move(row, acknowledged, ackRev, row.updatedAt, sent, false);
    row.local = local;
    row.state = SyncState.keepUnplacedEdits(row.state, Math.max(1, Math.min(sentBaseRev, ackRev - 1)));
  }

  /**
   * A record purged on the server: it goes (its id buried), unless it holds unsynced text,
   * kept as a new note. Edits that changed no text (a pin, a tag, the trash) do not bring a
   * purged note back, nor does one the user was purging.
   */
  removeOrFork(row, out) {
    bury(row, out);
    const local = completed(row.local);
    const base = completed(shadowFields(row));
    const textEdited = TEXT_FIELDS.some((name) => !sameValue(local[name], base[name]));
    if (row.state.purging || !textEdited) return;
    const id = this.newID();
    out.fork = {
      id, collection: row.collection, local, shadow: null, rev: 0, createdAt: row.createdAt, updatedAt: this.now,
      state: SyncState.created,
    };
    out.effect.forked.push([row.id, id]);
    addTo(out.effect, id);
  }
}

/** The record goes and its id is buried: never taken in again. */
function bury(row, out) {
  out.record = null;
  out.buried = row.id;
  out.effect.removed.push(row.id);
}

/** The server's fields the record is based on (none before its first acknowledgement). */
function shadowFields(row) {
  return row.shadow ?? {};
}

function newEffect() {
  return { changed: [], removed: [], added: new Set(), forked: [], needsPull: false, retryLater: false, refused: [], conflicts: [] };
}

/** A record new on this device: changed, and added. */
function addTo(effect, id) {
  effect.changed.push(id);
  effect.added.add(id);
}

function storedEffect(effect) {
  return { ...effect, added: [...effect.added].sort() };
}

/** A stored record as the rules take it: its `sync` read into `state`. */
function readRecord({ sync, ...record }) {
  return { ...record, local: record.local ?? {}, shadow: record.shadow ?? null, state: SyncState.read(sync) };
}

function storedRecord(row) {
  if (!row) return null;
  const { id, collection, local, shadow, rev, createdAt, updatedAt, state } = row;
  return { id, collection, local, shadow, rev, createdAt, updatedAt, sync: SyncState.stored(state) };
}

/** A record off the wire (`Record(json:)`), times in milliseconds. */
function readServerRecord(wire) {
  return {
    collection: wire.collection, id: wire.id, rev: wire.rev, deleted: wire.deleted === true,
    fields: isObject(wire.fields) ? wire.fields : {}, createdAt: Date.parse(wire.createdAt), updatedAt: Date.parse(wire.updatedAt),
  };
}

/** A `change` broadcast off the wire (`Broadcast(reader:)`). */
function readBroadcast(wire) {
  return {
    collection: wire.collection, id: wire.id, rev: wire.rev, prevRev: wire.prevRev, op: wire.op ?? "upsert",
    fields: isObject(wire.fields) ? wire.fields : {}, updatedAt: Date.parse(wire.updatedAt),
  };
}

/** An `ack` off the wire (`Ack(reader:)`): `seq`, `fields` and `conflicts` null when absent. */
function readAck(wire) {
  return {
    ccid: wire.ccid, rev: wire.rev, seq: Number.isSafeInteger(wire.seq) ? wire.seq : null,
    fields: isObject(wire.fields) ? wire.fields : null,
    conflicts: Array.isArray(wire.conflicts) ? wire.conflicts.filter((x) => typeof x === "string") : null,
  };
}

function readRefusal(event) {
  return {
    ccid: event.ccid, code: event.code, message: event.message, current: event.current ? readServerRecord(event.current) : null,
    absentAttachment: typeof event.absentAttachment === "string" ? event.absentAttachment : null,
  };
}
