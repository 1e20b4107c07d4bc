// The Noted web app: a master/detail notes UI over the local store, synced by SyncEngine.
//
// The page keeps a summary of every note (NoteIndex), loaded once at start-up and then changed
// by the ids each event names; nothing reads every record after that. A note's body is read
// when it opens. The list draws only its visible rows (NoteList), at most once per animation
// frame; search goes through a word index in a worker (Search). Typing touches only the note
// typed in: its row is redrawn in place, the text is written to the store when typing pauses
// (a Draft per note: what the store holds plus what is typed on top, merged with changes that
// arrive meanwhile), and the list re-sorts after that write, not on every key.

import { TEXT_FIELDS, isPurging, newRecord, noteFields, normalizeFields, onServer, refusalOf, spaceOf, withEdit, withPurge } from "./records.js";
import { Auth } from "./auth.js";
import { accountOf, openCurrent, openFor, ownerOf, removeAccountDatabase, removeLocalCopy, unsyncedOf, unsyncedSentence } from "./accounts.js";
import { AccountPanel, deleteAccount as deleteServerAccount, saveFile, signOutEverywhere as endEverySignIn } from "./account.js";
import { SyncEngine } from "./sync.js";
import { browserTransport } from "./transport.js";
import { hunk, mergeText, uuid } from "./text.js";
import { NoteIndex, firstLine, summarize } from "./notes-index.js";
import { NoteList } from "./list.js";
import { Search } from "./search-client.js";
import { renderMarkdown, toggleTask } from "./markdown.js";
import { Attachments, AttachmentsEditor, ObjectUrls, shaOf } from "./attachments.js";
import { groupRevisionsByDay, revisionDetails, revisionTime } from "./history.js";
import {
  acceptInvitation, canRemove, canShare, canWrite, createLink, createSpace, declineInvitation, fetchSpaces, invite, joinSecret, joinSpace,
  latestAuthor, leaveSpace, removeMember, revisionsOf, sharedSpaces, spaceDetails, spaceLabel,
} from "./spaces.js";

const TEXT = TEXT_FIELDS;
const SAVE_DELAY = 200; // ms without a key before typing is written to the store
const SAVE_MAX_DELAY = 1000; // typing without a pause is written at least this often
const PUSH_DELAY = 100; // ms from a written edit to its push (typing is already debounced)
const PULL_LIST_INTERVAL = 250; // ms between two makings of the list while pulled pages arrive
const SIGNED_OUT_NOTE = "noted.signed-out"; // sessionStorage: why the page starts signed out (said once)
const UNSAVED_KEY = "noted.unsaved"; // sessionStorage: typing not yet written when the page went away
const PREVIEW_KEY = "noted.preview"; // localStorage: "on" when this device shows notes as Markdown
const JOIN_KEY = "noted.join"; // sessionStorage: a join link's secret, kept over the sign-in

const $ = (id) => document.getElementById(id);
const ui = {
  signedOut: $("signed-out"), app: $("app"), signIn: $("sign-in"), signInError: $("sign-in-error"), signedOutReason: $("signed-out-reason"),
  newNote: $("new-note"), sync: $("sync-status"), account: $("account"), signOut: $("sign-out"), search: $("search"),
  filter: $("filter"), sort: $("sort"), notes: $("notes"), notesScroll: $("notes-scroll"), empty: $("empty"), editor: $("editor"), back: $("back"),
  pin: $("pin"), trash: $("trash"), restore: $("restore"), purge: $("purge"),
  historyToggle: $("history-toggle"), history: $("history"), revisions: $("revisions"),
  previewToggle: $("preview-toggle"), preview: $("preview"),
  title: $("title"), body: $("body"), folder: $("folder"), tags: $("tags"), toast: $("toast"),
  refusal: $("refusal"), refusalText: $("refusal-text"), discard: $("discard"),
  signOutDialog: $("sign-out-dialog"), signOutTitle: $("sign-out-title"), signOutText: $("sign-out-text"), signOutExported: $("sign-out-exported"),
  signOutExport: $("sign-out-export"), signOutAnyway: $("sign-out-anyway"), signOutCancel: $("sign-out-cancel"),
  signOutRemove: $("sign-out-remove"), signOutWarning: $("sign-out-warning"), signOutSync: $("sign-out-sync"), signOutSyncing: $("sign-out-syncing"),
  localCopy: $("local-copy"), localCopyRemove: $("local-copy-remove"), localCopyConfirm: $("local-copy-confirm"), localCopyWarning: $("local-copy-warning"),
  localCopyExport: $("local-copy-export"), localCopyAnyway: $("local-copy-anyway"), localCopyKeep: $("local-copy-keep"),
  localCopyExported: $("local-copy-exported"), localCopyError: $("local-copy-error"),
  spaceList: $("space-list"), share: $("share"), leaveSpace: $("leave-space"), newSpace: $("new-space"), newSpaceForm: $("new-space-form"),
  newSpaceName: $("new-space-name"), invitations: $("invitations"), noteSpace: $("note-space"), copyPersonal: $("copy-personal"),
  attachmentsSection: $("attachments"),
  shareDialog: $("share-dialog"), shareTitle: $("share-title"), inviteForm: $("invite-form"), inviteUsername: $("invite-username"),
  inviteRole: $("invite-role"), linkRole: $("link-role"), linkCreate: $("link-create"), linkUrl: $("link-url"), linkUrlLabel: $("link-url-label"),
  shareStatus: $("share-status"), shareError: $("share-error"), members: $("members"), shareClose: $("share-close"),
};

let store;
let auth;
let engine;
let search;
let list;
let accountPanel;
let attachmentsEditor; // Web/attachments.js: the editor's files
let attachments; // Web/attachments.js: the account's files (uploads, reads, the cached copies)
let leaving = false; // signing out: the session ends on purpose
let deleting = false; // the account is deleted: its database goes, then the page reloads
let everywhere = false; // what the sign-out dialog's "Sign out anyway" does: sign out every device
let removing = false; // this browser's copy of the account is being removed: nothing more is written or kept
let unsyncedShown = null; // what the sign-out dialog counted (`unsyncedOf`)
let syncingFirst = 0; // the sign-out dialog's "Sync, then sign out" under way (its number)
const index = new NoteIndex();
let selectedId = null; // the note chosen in the list
let draft = null; // the note the editor shows
const drafts = new Map(); // id -> Draft: the editor's, and ones still being written after it moved on
let selecting = 0;
let loaded = false; // the store has been read once
let shown = []; // the entries the list shows
// Shared spaces (Web/spaces.js): those the server lists (by name), the invitations waiting, and
// the space the list shows ("all", "personal" or a shared space's id).
let spaces = [];
let invitations = [];
let chosenSpace = "all";
const authors = new Map(); // note id -> who edited it last (a shared space's note, read when it opens)

function toast(message) {
  ui.toast.textContent = message;
  ui.toast.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (ui.toast.hidden = true), 5000);
}

function relativeTime(then) {
  if (!then) return "";
  const s = Math.round((Date.now() - then) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  if (s < 7 * 86400) return `${Math.round(s / 86400)} d ago`;
  return new Date(then).toLocaleDateString();
}

// ---------------------------------------------------------------------------------------------
// Drawing: at most once per animation frame.

const dirty = { list: false, rows: false };
let frame = 0;
let facetsShown = -1;
let filterKey = "";
let searchRunning = false;
let searchResult = null; // { query, version, hits } of the last search
let listBuiltAt = 0; // when the list was last made (performance.now())
let listTimer = 0;

function schedule(what) {
  if (what) dirty[what] = true;
  if (!frame) frame = requestAnimationFrame(render);
}

function render() {
  frame = 0;
  const query = ui.search.value.trim();
  if (query && !searchRunning && (!searchResult || searchResult.query !== query || searchResult.version !== index.version)) {
    runSearch(query);
  }
  if (dirty.list && !listWaits(query)) {
    dirty.list = false;
    dirty.rows = false;
    shown = currentEntries(query);
    list.setItems(shown);
    // The search the rows reflect (for tests and scripts/bench-web; "" when none).
    const reflects = !query ? "" : searchResult && searchResult.query === query ? query : ui.notes.dataset.search || "";
    if (ui.notes.dataset.search !== reflects) ui.notes.dataset.search = reflects;
    listBuiltAt = performance.now();
  } else if (dirty.rows) {
    dirty.rows = false;
    list.refresh();
  }
  ui.notesScroll.hidden = shown.length === 0;
  ui.empty.hidden = !loaded || shown.length > 0;
  renderFilters();
  renderStatus();
}

/**
 * While a pull brings pages (a first sign-in: thousands of notes a second), the list is made
 * again at most every PULL_LIST_INTERVAL ms, not once per page: each time costs a pass over
 * every note. Returns true (and sets a timer) when it has to wait.
 */
function listWaits(query) {
  if (query || !engine || !engine.progress) return false;
  const wait = listBuiltAt + PULL_LIST_INTERVAL - performance.now();
  if (wait <= 0) return false;
  if (!listTimer) {
    listTimer = setTimeout(() => {
      listTimer = 0;
      schedule();
    }, wait);
  }
  return true;
}

function currentEntries(query) {
  const filter = ui.filter.value;
  if (!query) return index.query(filter, null, chosenSpace);
  if (!searchResult || searchResult.query !== query) return shown; // its search is under way
  return searchResult.hits ? index.query(filter, searchResult.hits, chosenSpace) : [];
}

/** One search at a time, in the worker; keys typed meanwhile make one more when it answers. */
function runSearch(query) {
  searchRunning = true;
  const version = index.version;
  search.match(query).then((hits) => {
    searchRunning = false;
    searchResult = { query, version, hits };
    schedule("list");
  });
}

function renderRow(li, entry, oldKey) {
  const refused = entry.refusal ? `not synced: ${refusalReason(entry.refusal)}` : "";
  const meta = relativeTime(Math.max(entry.updatedAt, entry.touchedAt || 0)) + (entry.pending && !refused ? " · not synced" : "");
  const title = entry.title || "Untitled";
  const line = entry.line || "No text";
  const key = `${entry.pinned ? 1 : 0}\u0001${title}\u0001${line}\u0001${meta}\u0001${refused}`;
  if (key === oldKey) return key;
  const head = document.createElement("div");
  head.className = "note-title";
  if (refused) head.append(symbol("refused", "refused by the server", "⚠"));
  if (entry.pinned) head.append(symbol("pin", "pinned", "📌"));
  head.append(title);
  const lineDiv = document.createElement("div");
  lineDiv.className = "note-line";
  lineDiv.textContent = line;
  const metaDiv = document.createElement("div");
  metaDiv.className = "note-meta";
  metaDiv.textContent = meta;
  if (refused) {
    const reason = document.createElement("span");
    reason.className = "refused-reason";
    reason.textContent = refused;
    metaDiv.append(reason);
  }
  li.replaceChildren(head, lineDiv, metaDiv);
  return key;
}

/** A symbol in a row, with its accessible text. */
function symbol(className, label, text) {
  const span = document.createElement("span");
  span.className = className;
  span.setAttribute("role", "img");
  span.setAttribute("aria-label", label);
  span.textContent = text;
  return span;
}

const REFUSALS = {
  too_large: "too large for the server",
  invalid_field: "a field the server does not accept",
  bad_request: "a change the server could not read",
  unknown_collection: "a kind of record the server does not keep",
  read_only: "read-only for you",
  quota_exceeded: "the space's owner is out of storage",
};

/** Why the server refused a note's change, in a few words. */
function refusalReason(refusal) {
  return REFUSALS[refusal.code] || `refused (${refusal.code})`;
}

/** The filter menu, from the counts the index keeps (rebuilt only when they change). */
function renderFilters() {
  if (index.facets === facetsShown) return;
  facetsShown = index.facets;
  const c = index.counts;
  const n = (x) => x.toLocaleString();
  const current = ui.filter.value;
  const options = [["all", `All notes (${n(c.all)})`], ["trash", `Trash (${n(c.trash)})`]];
  const folders = [...c.folders.keys()].sort();
  const tags = [...c.tags.keys()].sort();
  // The menu keeps the folder or tag it shows even when no note has it any more.
  if (current.startsWith("folder:") && !c.folders.has(current.slice(7))) folders.push(current.slice(7));
  if (current.startsWith("tag:") && !c.tags.has(current.slice(4))) tags.push(current.slice(4));
  for (const f of folders) options.push([`folder:${f}`, `Folder: ${f} (${n(c.folders.get(f) || 0)})`]);
  for (const t of tags) options.push([`tag:${t}`, `Tag: ${t} (${n(c.tags.get(t) || 0)})`]);
  const key = options.map(([value, label]) => `${value}\u0001${label}`).join("\u0002");
  if (key === filterKey) return;
  filterKey = key;
  ui.filter.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
  ui.filter.value = current;
}

function renderStatus() {
  const state = engine ? engine.state : "offline";
  let text = state;
  const progress = engine && engine.progress;
  if (progress && state === "syncing" && progress.notes > 0) {
    const span = progress.to - progress.from;
    const part = span > 0 ? Math.min(1, (progress.cursor - progress.from) / span) : 1;
    text = `syncing ${progress.notes.toLocaleString()} notes · ${Math.floor(part * 100)}%`;
  }
  if (index.counts.pending) text += ` · ${index.counts.pending} pending`;
  if (index.counts.refused) text += ` · ${index.counts.refused} refused`;
  if (ui.sync.textContent !== text) ui.sync.textContent = text;
  if (ui.sync.dataset.state !== state) ui.sync.dataset.state = state;
}

// ---------------------------------------------------------------------------------------------
// The index, changed by ids.

/** A note's new stored state (null: deleted) into the index and the search index. */
function noteChanged(id, record) {
  if (!record) {
    const entry = index.remove(id);
    if (entry) search.set(entry.doc, null);
  } else {
    const entry = index.put(summarize(record));
    if (entry) search.set(entry.doc, isPurging(record) ? null : id);
  }
  schedule("list");
}

async function onRecords({ ids = [], records, moved = [] }) {
  // The open note of a shared space changed on the server (a broadcast, a pull, an ack): who
  // edited it last may have changed.
  if (draft && ids.includes(draft.id) && spaceOf(draft.record)) authorMayHaveChanged();
  for (const { from, to } of moved) {
    // The server no longer has the note; its text lives on as a new one: so does its draft.
    const d = drafts.get(from);
    if (d) {
      drafts.delete(from);
      d.id = to;
      d.lv = 0;
      drafts.set(to, d);
    }
    if (selectedId === from) {
      selectedId = to;
      list.setSelected(to);
    }
  }
  const found = records || (await store.getMany(ids));
  for (const id of ids) {
    if (!found.has(id)) continue; // not changed by this page
    const record = found.get(id) || null;
    noteChanged(id, record);
    const d = drafts.get(id);
    if (d) arrive(d, record);
  }
}

// ---------------------------------------------------------------------------------------------
// The editor: a Draft is a note's text as the store holds it (`base`, at version `lv`) plus what
// is typed on top, shown in the editor or, once the editor moved on, kept until written.

class Draft {
  constructor(record) {
    this.id = record.id;
    this.lv = record.lv || 0;
    const f = noteFields(record);
    this.base = { title: f.title, body: f.body };
    this.record = record;
    this.shown = false;
    this.text = null; // the text while the editor does not show it
    this.writing = false;
    this.writingValue = null; // the text a write under way stores
    this.again = false;
    this.deferred = undefined; // a newer stored state that arrived while writing (null: deleted)
    this.timer = 0;
    this.firstUnsaved = 0;
  }

  content() {
    return this.shown ? { title: ui.title.value, body: ui.body.value } : this.text;
  }

  setContent(name, value) {
    if (this.shown) {
      setField(ui[name], value);
      if (name === "body") renderPreview();
    } else {
      this.text[name] = value;
    }
  }

  get dirty() {
    const c = this.content();
    return c.title !== this.base.title || c.body !== this.base.body;
  }
}

/** Replaces a field's text keeping the caret where it was relative to the text around it. */
function setField(el, next) {
  if (el.value === next) return;
  // The body keeps its caret under the preview too, for when the preview is turned off.
  const focused = document.activeElement === el || (el === ui.body && previewing);
  const start = el.selectionStart;
  const end = el.selectionEnd;
  const h = hunk(el.value, next);
  const map = (pos) => (pos >= h.end ? pos + (h.toEnd - h.end) : pos > h.start ? h.toEnd : pos);
  el.value = next;
  if (focused) el.setSelectionRange(map(start), map(end));
}

function scheduleSave(d) {
  clearTimeout(d.timer);
  const now = performance.now();
  if (!d.firstUnsaved) d.firstUnsaved = now;
  const wait = Math.max(0, Math.min(SAVE_DELAY, d.firstUnsaved + SAVE_MAX_DELAY - now));
  d.timer = setTimeout(() => save(d), wait);
}

function settle(d) {
  if (!d.shown && !d.writing && !d.timer && drafts.get(d.id) === d && !d.dirty) drafts.delete(d.id);
}

/**
 * Writes a draft's typing to the store: one write at a time per note, the text read when the
 * write starts. If the stored note moved on since the draft's base (a pull, an ack, another
 * tab), the typing is merged onto it, and the editor gets what was merged in.
 */
async function save(d) {
  clearTimeout(d.timer);
  d.timer = 0;
  if (d.writing) {
    d.again = true;
    return;
  }
  const value = { ...d.content() };
  d.firstUnsaved = 0;
  if (value.title === d.base.title && value.body === d.base.body) {
    settle(d);
    return;
  }
  d.writing = true;
  d.writingValue = value;
  const base = { ...d.base };
  const lv = d.lv;
  let written;
  try {
    written = await store.update(d.id, (current) => {
      if (!current || isPurging(current)) return undefined;
      const stored = noteFields(current);
      const local = { ...current.local };
      for (const name of TEXT) {
        local[name] = (current.lv || 0) === lv ? value[name] : mergeText(base[name], value[name], stored[name]);
      }
      // An imported note's modification date stands until its content is edited here.
      if (local.title !== stored.title || local.body !== stored.body) local.modified = null;
      return withEdit(current, local);
    });
  } catch (error) {
    d.writing = false;
    d.writingValue = null;
    toast(`Could not save "${value.title || "Untitled"}": ${error.message}. Retrying.`);
    d.timer = setTimeout(() => save(d), 2000);
    return;
  }
  d.writing = false;
  d.writingValue = null;
  if (written) {
    const f = noteFields(written);
    for (const name of TEXT) {
      if (f[name] !== value[name]) d.setContent(name, mergeText(value[name], d.content()[name], f[name]));
    }
    d.base = { title: f.title, body: f.body };
    d.lv = written.lv;
    d.record = written;
    noteChanged(d.id, written);
    if (d === draft) renderMeta();
    engine.schedulePush(PUSH_DELAY);
  } else if (d.deferred === undefined) {
    // Deleted, or purged here, under the typing: see what the store holds.
    d.deferred = (await store.get(d.id)) || null;
  }
  const later = d.deferred;
  d.deferred = undefined;
  if (later !== undefined) arrive(d, later);
  if (d.again) {
    d.again = false;
    save(d);
  } else if (d.dirty && !d.timer && drafts.get(d.id) === d) {
    if (d.shown) scheduleSave(d);
    else save(d);
  } else {
    settle(d);
  }
}

/** A newer stored state of a draft's note (null: deleted): merged under the typing. */
function arrive(d, record) {
  if (d.writing) {
    if (record === null || (d.deferred !== null && (d.deferred === undefined || (record.lv || 0) > (d.deferred.lv || 0)))) {
      d.deferred = record;
    }
    return;
  }
  if (record === null || isPurging(record)) {
    gone(d, record);
    return;
  }
  if ((record.lv || 0) <= d.lv) return;
  const f = noteFields(record);
  for (const name of TEXT) {
    const theirs = f[name];
    const base = d.base[name];
    if (theirs === base) continue;
    const mine = d.content()[name];
    d.setContent(name, mine === base ? theirs : mergeText(base, mine, theirs));
  }
  d.base = { title: f.title, body: f.body };
  d.lv = record.lv || 0;
  d.record = record;
  if (d === draft) renderMeta();
  if (d.dirty) {
    if (d.shown) scheduleSave(d);
    else save(d);
  }
}

/** A draft's note was deleted (elsewhere, or purged here): typing not yet written becomes a new note. */
function gone(d, record) {
  const text = d.content() ? { ...d.content() } : null;
  const unsaved = text && d.dirty && !(record && isPurging(record));
  clearTimeout(d.timer);
  d.timer = 0;
  if (drafts.get(d.id) === d) drafts.delete(d.id);
  if (d === draft) {
    draft = null;
    closeEditor();
  }
  if (unsaved) {
    const space = spaceOf(d.record);
    const listed = space && spaces.find((s) => s.id === space);
    createNote({ ...noteFields(d.record), title: text.title, body: text.body }, listed && canWrite(listed.role) ? space : null);
    toast("This note was deleted on another device; what you typed is kept as a new note.");
  }
}

function flushAll() {
  if (removing) return;
  for (const d of drafts.values()) if (d.timer || d.dirty) save(d);
}

/**
 * The page is going away (a reload, a navigation, the tab closed) with typing not yet written:
 * the write `flushAll` starts then does not finish (its read of the note is answered to no one
 * once the page is gone: keys typed within SAVE_DELAY of a reload were lost, found by
 * Tests/peers/test_webapp_offline.py). So the typing also goes to sessionStorage, at once, and
 * this tab's next start writes it to the store (`restoreUnsaved`) before anything syncs.
 */
function keepUnsaved() {
  if (removing) {
    forgetUnsaved();
    return;
  }
  const unsaved = [];
  for (const d of drafts.values()) {
    if (!d.dirty) continue;
    unsaved.push({ id: d.id, lv: d.lv, base: d.base, text: { ...d.content() }, writing: d.writingValue, local: noteFields(d.record), synced: onServer(d.record) });
  }
  try {
    if (unsaved.length) sessionStorage.setItem(UNSAVED_KEY, JSON.stringify({ database: store.name, unsaved }));
    else sessionStorage.removeItem(UNSAVED_KEY);
  } catch {
    // No storage: as before, only what was written stays.
  }
}

/** Drops what `keepUnsaved` kept (this browser's copy of the account is being removed). */
function forgetUnsaved() {
  try {
    sessionStorage.removeItem(UNSAVED_KEY);
  } catch {
    // No storage: nothing kept.
  }
}

/** What `keepUnsaved` kept when this tab's page last went away (read once: it goes). */
function takeUnsaved() {
  try {
    const kept = JSON.parse(sessionStorage.getItem(UNSAVED_KEY) || "null");
    sessionStorage.removeItem(UNSAVED_KEY);
    return kept;
  } catch {
    return null;
  }
}

/**
 * Writes the typing `keepUnsaved` kept to the store, as `save` would have: onto the note as it
 * was typed on (or as the write under way left it, if that one finished), else merged onto
 * what the store holds now. A note the store lacks is created (a new note whose first write
 * did not finish), under a new id if the server had it (as `gone` keeps typing).
 */
async function restoreUnsaved(kept) {
  if (!kept || kept.database !== store.name || !Array.isArray(kept.unsaved)) return;
  for (const u of kept.unsaved) {
    const text = { title: String(u.text.title), body: String(u.text.body) };
    let missing = false;
    await store.update(u.id, (current) => {
      if (!current) {
        missing = true;
        return undefined;
      }
      if (isPurging(current)) return undefined;
      const stored = noteFields(current);
      const finished = u.writing && TEXT.every((name) => stored[name] === u.writing[name]);
      const base = finished ? u.writing : u.base;
      const local = { ...current.local };
      for (const name of TEXT) {
        local[name] = (current.lv || 0) === u.lv || finished ? text[name] : mergeText(base[name], text[name], stored[name]);
      }
      if (TEXT.every((name) => local[name] === stored[name])) return undefined;
      local.modified = null;
      return withEdit(current, local);
    });
    if (missing) {
      const id = u.synced ? uuid() : u.id;
      await store.update(id, (current) => current || newRecord(id, { ...u.local, ...text }));
    }
  }
}

/** Whether `record` is a note of a shared space the user only views (the server would refuse an edit). */
function isReadOnly(record) {
  const space = spaceOf(record);
  const listed = space ? spaces.find((s) => s.id === space) : null;
  return Boolean(listed) && !canWrite(listed.role);
}

/** Whether files may be added to the note shown: not to a shared space's note (nor a read-only one). */
function canAttach() {
  return Boolean(draft) && !spaceOf(draft.record) && !isReadOnly(draft.record);
}

function renderMeta() {
  const f = noteFields(draft.record);
  if (document.activeElement !== ui.folder) ui.folder.value = f.folder || "";
  if (document.activeElement !== ui.tags) ui.tags.value = f.tags.join(", ");
  ui.pin.textContent = f.pinned ? "Unpin" : "Pin";
  ui.pin.setAttribute("aria-pressed", String(f.pinned));
  ui.trash.hidden = f.trashed;
  ui.restore.hidden = !f.trashed;
  ui.purge.hidden = !f.trashed;
  if (attachmentsEditor) attachmentsEditor.render(draft.id, f.attachments);
  if (previewing && (f.attachments || []).join("\n") !== previewFiles) renderPreview(); // a file came or went
  // A shared space's note: read-only for a viewer (the server would refuse the edit: `read_only`).
  const space = spaceOf(draft.record);
  const readOnly = isReadOnly(draft.record);
  for (const el of [ui.title, ui.body, ui.folder, ui.tags]) el.readOnly = readOnly;
  for (const el of [ui.pin, ui.trash, ui.restore, ui.purge]) el.disabled = readOnly;
  // Files in shared spaces are not there yet (the server refuses such a change: docs/protocol.md).
  ui.attachmentsSection.hidden = readOnly || Boolean(space);
  if (readOnly) ui.editor.dataset.readOnly = "true";
  else delete ui.editor.dataset.readOnly;
  renderNoteSpace();
  const refusal = refusalOf(draft.record);
  ui.refusal.hidden = !refusal;
  // A space the user is no longer in: what they wrote can be kept in their own space.
  ui.copyPersonal.hidden = !(refusal && space && !spaces.some((s) => s.id === space));
  if (refusal) {
    const detail = refusal.message ? `${refusal.code}: ${refusal.message}` : refusal.code;
    const after = onServer(draft.record) ? "the server's version returns" : "the note is removed: the server never had it";
    ui.refusalText.textContent = `Not synced: the server refused this version, ${refusalReason(refusal)} (${detail}). ` +
      `It stays in this browser and is not sent again until you edit it. Discard it and ${after}.`;
  }
}

function closeEditor() {
  ui.editor.hidden = true;
  ui.app.classList.remove("editing");
  // Nothing shows the note's images now: their object URLs go.
  ui.preview.replaceChildren();
  previewUrls.release();
  if (attachmentsEditor) attachmentsEditor.clear();
}

/** Shows a draft in the editor; the one shown before is kept until its typing is written. */
function open(next) {
  if (draft && draft !== next) {
    const old = draft;
    old.text = { title: ui.title.value, body: ui.body.value };
    old.shown = false;
    if (old.dirty || old.timer) save(old);
    else settle(old);
  }
  draft = next;
  if (!next) {
    closeEditor();
    return;
  }
  drafts.set(next.id, next);
  if (!next.shown) {
    const text = next.text || next.base;
    ui.title.value = text.title;
    ui.body.value = text.body;
    next.text = null;
    next.shown = true;
  }
  ui.editor.hidden = false;
  renderPreview(); // first: renderMeta then finds it drawn with the note's files
  renderMeta();
  loadAuthor(next);
}

// ---------------------------------------------------------------------------------------------
// The preview: the body drawn as Markdown (Web/markdown.js) in place of the textarea, on this
// device until turned off. A task's box edits the text as typing does (onType: the same save,
// the same debounce, pushed as a text delta), and the preview is drawn again; so it is when the
// text changes under it (a change from another device, a merge, a discard).

let previewing = false;
const previewUrls = new ObjectUrls(); // the blob: URLs of the images the preview shows
let previewFiles = ""; // the attachments field the preview was drawn with

function setPreview(on, { remember = true } = {}) {
  const was = previewing;
  previewing = on;
  ui.previewToggle.setAttribute("aria-pressed", String(on));
  ui.body.hidden = on;
  ui.preview.hidden = !on;
  if (remember) {
    try {
      localStorage.setItem(PREVIEW_KEY, on ? "on" : "off");
    } catch {
      // Storage refused (a private window): for this page only.
    }
  }
  if (on) {
    renderPreview();
  } else {
    ui.preview.replaceChildren();
    previewUrls.release();
    if (was && remember && draft) {
      // Back to the text, the caret where it was (kept by setField while the preview showed).
      const { selectionStart, selectionEnd } = ui.body;
      ui.body.focus();
      ui.body.setSelectionRange(selectionStart, selectionEnd);
    }
  }
}

function renderPreview() {
  if (!previewing) return;
  const active = document.activeElement;
  const task = active && ui.preview.contains(active) && active.dataset ? active.dataset.task : undefined;
  const scroll = ui.preview.scrollTop;
  // Files are shown when the note lists them in its attachments field (docs/protocol.md): read
  // from this browser, else fetched from the server and kept for offline use.
  const elements = (draft && noteFields(draft.record).attachments) || [];
  previewFiles = elements.join("\n");
  const listed = new Set(elements.map(shaOf));
  const readOnly = Boolean(draft) && isReadOnly(draft.record);
  const fragment = renderMarkdown(ui.body.value, {
    onToggleTask: readOnly ? null : toggleTaskAt,
    readOnly, // a viewer's boxes are drawn disabled
    loadAttachment: (sha) => (attachments && listed.has(sha) ? attachments.loadAttachment(sha) : null),
    urls: previewUrls,
  });
  if (!fragment.firstChild) {
    const empty = document.createElement("p");
    empty.className = "preview-empty";
    empty.textContent = "Nothing to preview yet: turn Preview off to write.";
    fragment.append(empty);
  }
  ui.preview.replaceChildren(fragment);
  ui.preview.scrollTop = scroll;
  if (task !== undefined) {
    const box = ui.preview.querySelector(`input[data-task="${task}"]`);
    if (box) box.focus();
  }
}

/** A task's box clicked in the preview: its "[ ]" or "[x]" flips in the text, saved as typing is. */
function toggleTaskAt(index) {
  if (!draft || isReadOnly(draft.record)) return; // a viewer edits nothing
  const next = toggleTask(ui.body.value, index);
  if (next !== ui.body.value) {
    setField(ui.body, next);
    onType();
  }
  renderPreview();
}

/** Opens a note: its body is read now (or `record` is given). */
async function select(id, record = null) {
  selectedId = id;
  list.setSelected(id);
  ui.history.hidden = true;
  ui.historyToggle.setAttribute("aria-expanded", "false");
  ui.app.classList.add("editing");
  if (draft && draft.id === id) {
    ui.editor.hidden = false;
    return;
  }
  const token = ++selecting;
  let next = drafts.get(id);
  if (!next) {
    const stored = record || (await store.get(id));
    if (token !== selecting) return;
    next = drafts.get(id) || (stored && !isPurging(stored) ? new Draft(stored) : null);
  }
  open(next);
}

function onType() {
  const d = draft;
  if (!d) return;
  const entry = index.touch(d.id, { title: ui.title.value, line: firstLine(ui.body.value), pending: true });
  if (entry) {
    entry.touchedAt = Date.now();
    list.refreshRow(d.id);
  }
  scheduleSave(d);
  schedule();
}

/** One local edit of a note's other fields: the new fields and the outbox mark in one transaction. */
async function edit(id, change) {
  if (!id) return undefined;
  const written = await store.update(id, (current) => {
    if (!current || isPurging(current)) return undefined;
    const before = noteFields(current);
    const local = { ...current.local, ...normalizeFields(change({ ...before, tags: [...before.tags] })) };
    if (local.folder !== before.folder || local.tags.join("\u0001") !== before.tags.join("\u0001")) local.modified = null;
    return withEdit(current, local);
  });
  if (written) {
    noteChanged(id, written);
    const d = drafts.get(id);
    if (d) arrive(d, written);
  }
  engine.schedulePush(0);
  return written;
}

/**
 * A new note, shown at once (before it is stored: typing right away lands in it), in `space`
 * (null: the personal space; undefined: the space the list shows, if the user may write there).
 */
function createNote(fields = null, space = undefined) {
  if (space === undefined) {
    const chosen = spaces.find((s) => s.id === chosenSpace);
    if (chosen && !canWrite(chosen.role)) {
      toast(`You are a viewer of ${chosen.name}: you cannot add notes to it.`);
      return;
    }
    space = chosen ? chosen.id : null;
  }
  const id = uuid();
  const filter = ui.filter.value;
  const placed = (record) => (space ? { ...record, space } : record);
  const record = placed(newRecord(id, fields || {
    folder: filter.startsWith("folder:") ? filter.slice(7) : null,
    tags: filter.startsWith("tag:") ? [filter.slice(4)] : [],
  }));
  record.lv = 1; // what the store's first write makes it
  if (previewing) setPreview(false, { remember: false }); // a new note is for writing
  const stored = store.update(id, () => placed(newRecord(id, record.local, record.createdAt)));
  if (filter === "trash") ui.filter.value = "all";
  noteChanged(id, record);
  select(id, record);
  if (!fields) ui.title.focus();
  stored.then((written) => {
    noteChanged(id, written);
    engine.schedulePush(0);
  }, (error) => toast(`Could not create the note: ${error.message}`));
}

async function purge() {
  if (!draft || !confirm("Delete this note forever?")) return;
  const d = draft;
  clearTimeout(d.timer);
  d.timer = 0;
  const written = await store.update(d.id, (current) => (current && !isPurging(current) ? withPurge(current) : undefined));
  if (written !== undefined) noteChanged(d.id, written);
  if (drafts.get(d.id) === d) drafts.delete(d.id);
  if (draft === d) {
    draft = null;
    selectedId = null;
    list.setSelected(null);
    closeEditor();
  }
  engine.schedulePush(0);
}

/**
 * Gives up this device's version of a note the server refused: the server's version returns
 * (a note the server never had is removed). Typing not yet written goes with it.
 */
async function discard() {
  const d = draft;
  if (!d) return;
  clearTimeout(d.timer);
  d.timer = 0;
  while (d.writing) await new Promise((resolve) => setTimeout(resolve, 20));
  const written = await engine.discard(d.id);
  if (written === undefined) return;
  noteChanged(d.id, written);
  if (written === null) {
    drafts.delete(d.id);
    if (draft === d) {
      draft = null;
      selectedId = null;
      list.setSelected(null);
      closeEditor();
    }
    toast("Discarded: the note was only in this browser.");
    return;
  }
  const f = noteFields(written);
  for (const name of TEXT) d.setContent(name, f[name]);
  d.base = { title: f.title, body: f.body };
  d.lv = written.lv;
  d.record = written;
  if (d === draft) renderMeta();
  settle(d);
  toast("Discarded your version: the note is the server's again.");
}

/**
 * Opens or closes the History panel; opening it lists the note's revisions from the server by
 * local day (newest first), each with its time, its size and a Restore button.
 */
async function showHistory() {
  const open = ui.history.hidden;
  ui.history.hidden = !open;
  ui.historyToggle.setAttribute("aria-expanded", String(open));
  if (!open || !draft) return;
  const id = draft.id;
  const space = spaceOf(draft.record);
  ui.revisions.replaceChildren(Object.assign(document.createElement("li"), { textContent: "Loading…" }));
  try {
    const revisions = space ? await revisionsOf(auth, id, space) : (await auth.fetchJSON(`/v1/records/notes/${id}/revisions`)).revisions;
    ui.revisions.replaceChildren(...groupRevisionsByDay(revisions).map((day) => historyDay(id, day)));
  } catch (error) {
    ui.revisions.replaceChildren(Object.assign(document.createElement("li"), { textContent: navigator.onLine ? `History unavailable (${error.message}).` : "History needs a connection." }));
  }
}

/** One day of the History panel: its heading ("Today", "Yesterday", a date) over its revisions. */
function historyDay(id, day) {
  const li = document.createElement("li");
  const heading = Object.assign(document.createElement("h3"), { textContent: day.label });
  const list = document.createElement("ul");
  list.append(...day.revisions.map((rev) => historyEntry(id, rev)));
  li.append(heading, list);
  return li;
}

/**
 * A revision in the History panel: its local time, its size (when the server sends one),
 * "conflict" for a conflict revision, and its Restore button ("Restore revision N" to tools).
 */
function historyEntry(id, rev) {
  const li = document.createElement("li");
  const label = document.createElement("span");
  const time = revisionTime(rev);
  if (time) label.append(Object.assign(document.createElement("time"), { dateTime: rev.updatedAt, textContent: time }));
  else label.append(`Revision ${rev.rev}`);
  for (const detail of revisionDetails(rev)) label.append(` · ${detail}`);
  if (rev.conflict) label.className = "conflict";
  if (ui.editor.dataset.readOnly) {
    li.append(label); // a viewer restores nothing
    return li;
  }
  const button = document.createElement("button");
  button.type = "button";
  button.className = "quiet";
  button.textContent = "Restore";
  button.setAttribute("aria-label", `Restore revision ${rev.rev}`);
  button.addEventListener("click", () => restoreRevision(id, rev));
  li.append(label, " ", button);
  return li;
}

async function restoreRevision(id, rev) {
  const record = draft && draft.id === id ? draft.record : await store.get(id);
  if (record && isReadOnly(record)) return; // a viewer restores nothing
  const space = draft && draft.id === id ? spaceOf(draft.record) : null;
  const params = [...(rev.conflict ? ["conflict=true"] : []), ...(space ? [`space=${encodeURIComponent(space)}`] : [])];
  const query = params.length ? `?${params.join("&")}` : "";
  const body = await auth.fetchJSON(`/v1/records/notes/${id}/revisions/${rev.rev}${query}`);
  const fields = normalizeFields(body.fields || body);
  await edit(id, (f) => ({ ...f, title: fields.title, body: fields.body }));
  toast(`Restored revision ${rev.rev}.`);
}

// ---------------------------------------------------------------------------------------------
// Signing out: the account's database stays (its unsynced notes sync when it signs in again),
// unless the person removes this browser's copy (a shared or lent computer: security review 3,
// L2): offered in the sign-out dialog (off), in the Account panel for "Sign out everywhere" (on)
// and on the welcome page after a sign-out. With notes unsynced, a dialog asks first and offers
// them as a file; removing them with the copy is never the default.

/** Writes every draft's typing to the store (what a sign-out counts must include it). */
async function flushDrafts() {
  for (let round = 0; round < 50; round++) {
    const busy = [...drafts.values()].filter((d) => d.writing || d.timer || d.dirty);
    if (busy.length === 0) return;
    await Promise.all(busy.map((d) => (d.writing ? new Promise((resolve) => setTimeout(resolve, 20)) : save(d))));
  }
}

/**
 * Signs out (`all`: every device, this one too; `remove`: this browser's copy of the account
 * goes too), asking first when notes are unsynced (or, to remove the copy, attached files not
 * uploaded); the Account panel's "Sign out everywhere" comes here as the toolbar's "Sign out"
 * does. The dialog's checkbox to remove the copy starts off: what it would lose is kept unless
 * the person ticks it and signs out anyway.
 */
async function askSignOut(all = false, { remove = false } = {}) {
  if (ui.signOutDialog.open) return;
  await flushDrafts();
  const unsynced = await unsyncedOf(store);
  if (unsynced.edits === 0 && (!remove || unsynced.files === 0)) {
    await signOut(all, { remove });
    return;
  }
  everywhere = all;
  unsyncedShown = unsynced;
  ui.signOutTitle.textContent = all ? "Sign out everywhere?" : "Sign out?";
  ui.signOutText.textContent = signOutSentence(unsynced);
  ui.signOutExport.hidden = unsynced.edits === 0;
  ui.signOutExported.textContent = "";
  ui.signOutSyncing.textContent = "";
  ui.signOutRemove.checked = false;
  showRemoveChoice();
  ui.signOutDialog.showModal();
}

/** The sign-out dialog's sentence: what is unsynced, and that signing out keeps it. */
function signOutSentence({ edits, refused, files }) {
  if (edits === 0) {
    const one = files === 1;
    return `${files} attached file${one ? " is" : "s are"} not uploaded yet. Signing out keeps ${one ? "it" : "them"} in this ` +
      `browser, to upload when you sign in again.`;
  }
  const one = edits === 1;
  return `${edits} note${one ? " is" : "s are"} not synced yet` +
    (refused ? ` (the server refused ${one ? "its version" : refused === edits ? "all of them" : `${refused} of them`})` : "") +
    `. Signing out keeps ${one ? "it" : "them"} in this browser, to sync when you sign in again; ` +
    `export ${one ? "it" : "them"} to keep a copy of your own.`;
}

/** The dialog as its checkbox says: the warning, and what "Sign out anyway" does. */
function showRemoveChoice() {
  const remove = ui.signOutRemove.checked;
  const u = unsyncedShown || { edits: 0, files: 0 };
  const them = u.edits + u.files === 1 ? "it" : "them";
  ui.signOutWarning.textContent = remove
    ? `${unsyncedSentence(u)}: removing this browser’s copy loses ${them}. Sync first to keep ${them}, or remove anyway.`
    : "";
  ui.signOutAnyway.textContent = remove ? "Remove anyway and sign out" : "Sign out anyway";
}

/**
 * The dialog's "Sync, then sign out": pushes, and waits (up to `ms`) until nothing is unsynced,
 * then signs out as the dialog says; otherwise says what still waits and why, the dialog open.
 */
async function syncThenSignOut(ms = 30000) {
  const run = ++syncingFirst;
  const all = everywhere;
  const say = (text) => (ui.signOutSyncing.textContent = text);
  say("Syncing…");
  engine.kick();
  engine.schedulePush(0);
  attachments.kick();
  const deadline = Date.now() + ms;
  for (;;) {
    if (run !== syncingFirst || !ui.signOutDialog.open) return; // cancelled, or signed out meanwhile
    const u = await unsyncedOf(store);
    if (u.edits === 0 && u.files === 0) {
      ui.signOutDialog.close();
      await signOut(all, { remove: ui.signOutRemove.checked });
      return;
    }
    const still = unsyncedSentence(u);
    if (u.refused > 0 && u.edits === u.refused && u.files === 0) {
      say(`${still}: the server refused ${u.refused === 1 ? "it" : "them"}, so ${u.refused === 1 ? "it" : "they"} cannot sync. ` +
        `Export ${u.refused === 1 ? "it" : "them"}, or keep ${u.refused === 1 ? "it" : "them"} in this browser.`);
      return;
    }
    if (!navigator.onLine) {
      say(`${still}: this browser is offline. Sign out keeping ${u.edits + u.files === 1 ? "it" : "them"}, or wait until it is online.`);
      return;
    }
    if (Date.now() >= deadline) {
      say(`${still}: the server did not answer in time. Try again, or sign out keeping ${u.edits + u.files === 1 ? "it" : "them"}.`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Signs out (`all`: every sign-in of the account is ended first, on the server; `remove`: then
 * this browser's copy of the account is removed, see `removeThisCopy`).
 */
async function signOut(all = false, { remove = false } = {}) {
  leaving = true;
  syncingFirst++;
  engine.stop();
  if (all) {
    try {
      await endEverySignIn(auth);
    } catch (error) {
      leaving = false;
      engine.start();
      throw error;
    }
  }
  if (remove) {
    removing = true; // from here the page writes nothing (and does not reload on the session's end)
    attachments.stop();
  }
  await auth.signOut(); // the page reloads when the session is gone
  if (remove) await removeThisCopy();
  location.reload();
}

/**
 * Removes this browser's copy of the signed-out account: its database (notes, outbox, session,
 * attachments' blobs), the entry naming it as the one opened at start, Cache Storage entries of
 * the API and this tab's typing kept over a reload. Said on the welcome page only if it failed.
 */
async function removeThisCopy() {
  for (const d of drafts.values()) clearTimeout(d.timer);
  drafts.clear();
  forgetUnsaved();
  try {
    await removeLocalCopy(store, { onBlocked: () => toast("Close Noted’s other tabs to finish removing the notes.") });
  } catch (error) {
    rememberSignedOutNote(`Signed out, but this browser’s copy of the notes could not be removed (${error.message}).`);
  }
}

function signOutFailed(error, all) {
  if (all && accountPanel.isOpen) accountPanel.showDevicesError(`Could not sign out everywhere: ${error.message}`);
  else toast(`Could not sign out: ${error.message}`);
}

/** Unsynced notes (typing written first), for the delete-account dialog. */
async function unsyncedCount() {
  await flushDrafts();
  return (await store.pendingRecords()).length;
}

/**
 * Writes every draft's typing to the store and, while online, waits up to `ms` for the
 * engine to push what is pending (a download of everything is made by the server from what
 * it holds); the notes still unsynced after that: their count.
 */
async function settleUnsynced(ms = 8000) {
  await flushDrafts();
  const deadline = Date.now() + ms;
  for (;;) {
    const records = await store.pendingRecords();
    const waiting = records.filter((r) => !refusalOf(r)).length;
    if (waiting === 0 || !navigator.onLine || Date.now() >= deadline) return records.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Deletes the account (the server checks `password`, and with two-factor sign-in on `code`), then
 * this browser's database of it (its notes, unsynced ones too, and its session): the page starts
 * again signed out and says so. Nothing syncs meanwhile; a refusal leaves everything as it was
 * and rejects.
 */
async function deleteAccount(password, { code, onBlocked } = {}) {
  engine.stop();
  try {
    await deleteServerAccount(auth, password, code);
  } catch (error) {
    engine.start();
    throw error;
  }
  deleting = true;
  await auth.forget();
  let note = "Your account was deleted.";
  try {
    await removeAccountDatabase(store, { onBlocked });
  } catch (error) {
    note += ` This browser's copy of its notes could not be removed (${error.message}).`;
  }
  rememberSignedOutNote(note);
  location.reload();
}

// ---------------------------------------------------------------------------------------------
// A lost session (signed out on another device, the password changed, the account deleted):
// the welcome page says why. The account's database stays, unsynced notes included.

function rememberSignedOutNote(note) {
  try {
    sessionStorage.setItem(SIGNED_OUT_NOTE, note);
  } catch {
    // No storage: the welcome page says nothing more.
  }
}

/** What the welcome page says after the session was lost (`said`: the server's reason, if it gave one). */
async function sessionLost(said) {
  let note;
  if (/account was deleted/i.test(said || "")) {
    note = "Signed out: the account was deleted.";
  } else {
    note = /session was revoked/i.test(said || "")
      ? "Signed out: this browser was signed out on another device, or the password was changed."
      : "Signed out: this browser's sign-in has ended (signed out on another device, the password changed or the account deleted).";
    const unsynced = await store.pendingRecords().then((records) => records.length, () => 0);
    if (unsynced) {
      const one = unsynced === 1;
      note += ` ${unsynced} note${one ? "" : "s"} not synced yet ${one ? "is" : "are"} kept in this browser: ` +
        `${one ? "it syncs" : "they sync"} when you sign in again.`;
    }
  }
  rememberSignedOutNote(note);
}

/** The welcome page says once why it is shown (after a lost session or a deleted account). */
function showSignedOutNote() {
  let note = null;
  try {
    note = sessionStorage.getItem(SIGNED_OUT_NOTE);
    sessionStorage.removeItem(SIGNED_OUT_NOTE);
  } catch {
    return;
  }
  // Written once the page is shown: a live region announces changes, not what it held at first.
  if (note) setTimeout(() => (ui.signedOutReason.textContent = note), 100);
}

/**
 * The welcome page, with the database of the account that signed in last still in this browser:
 * offers to remove it. What the server has not got yet is said first, and kept unless the person
 * removes it anyway (signed out, it cannot sync: signing in again does that).
 */
function offerRemoval(options) {
  ui.localCopy.hidden = false;
  const failed = (error) => (ui.localCopyError.textContent = `Could not remove the notes: ${error.message}`);
  const remove = async () => {
    ui.localCopyError.textContent = "";
    try {
      await removeLocalCopy(store, { onBlocked: () => (ui.localCopyError.textContent = "Close Noted’s other tabs to finish removing the notes.") });
    } catch (error) {
      store = await openCurrent(options).catch(() => null); // closed for the deletion: open again, to try again
      throw error;
    }
    store = null;
    ui.localCopy.hidden = true;
    ui.signIn.focus(); // the button that had focus is gone
    ui.signedOutReason.textContent = "This browser’s copy of the notes was removed.";
  };
  ui.localCopyRemove.addEventListener("click", async () => {
    if (!store) return;
    try {
      const u = await unsyncedOf(store);
      if (u.edits === 0 && u.files === 0) {
        await remove();
        return;
      }
      const one = u.edits + u.files === 1;
      ui.localCopyWarning.textContent = `${unsyncedSentence(u)}. Sign in again to sync ${one ? "it" : "them"} first, ` +
        `or remove ${one ? "it" : "them"} with the rest.`;
      ui.localCopyExport.hidden = u.edits === 0;
      ui.localCopyExported.textContent = "";
      ui.localCopyConfirm.hidden = false;
      ui.localCopyKeep.focus();
    } catch (error) {
      failed(error);
    }
  });
  ui.localCopyKeep.addEventListener("click", () => {
    ui.localCopyConfirm.hidden = true;
    ui.localCopyRemove.focus();
  });
  ui.localCopyExport.addEventListener("click", () => exportUnsynced()
    .then((said) => (ui.localCopyExported.textContent = said), failed));
  ui.localCopyAnyway.addEventListener("click", () => store && remove().catch(failed));
}

/** Downloads the unsynced notes as a JSON file (a dialog stays open): the sentence saying so. */
async function exportUnsynced() {
  const records = await store.pendingRecords();
  const notes = records.map((r) => ({
    id: r.id, ...noteFields(r), createdAt: new Date(r.createdAt).toISOString(), updatedAt: new Date(r.updatedAt).toISOString(),
    onServer: onServer(r), deletedHere: isPurging(r), refusal: refusalOf(r),
  }));
  const file = `noted-unsynced-${new Date().toISOString().slice(0, 10)}.json`;
  saveFile(new Blob([JSON.stringify({ exportedAt: new Date().toISOString(), notes }, null, 2)], { type: "application/json" }), file);
  return `Exported ${notes.length} note${notes.length === 1 ? "" : "s"} to ${file}.`;
}

// ---------------------------------------------------------------------------------------------
// Shared spaces (protocol 2, docs/protocol.md "Spaces"; Web/spaces.js): the sidebar lists
// Personal and each shared space with the user's role, and the invitations waiting; choosing a
// space shows its notes and "New note" writes there (not for a viewer, whose notes are
// read-only). Owners and admins share a space (invitations, links, members). The engine keeps
// the list as the server sends it (`spaces` events) and syncs each space.

function spaceButton(value, label) {
  const li = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "quiet";
  button.dataset.space = value;
  button.textContent = label;
  button.setAttribute("aria-pressed", String(value === chosenSpace));
  button.addEventListener("click", () => chooseSpace(value));
  li.append(button);
  return li;
}

function renderSpaces() {
  if (chosenSpace !== "all" && chosenSpace !== "personal" && !spaces.some((s) => s.id === chosenSpace)) chosenSpace = "all";
  const items = spaces.length ? [spaceButton("all", "All spaces"), spaceButton("personal", "Personal"), ...spaces.map((s) => spaceButton(s.id, spaceLabel(s)))] : [];
  ui.spaceList.replaceChildren(...items);
  ui.spaceList.hidden = items.length === 0;
  const chosen = spaces.find((s) => s.id === chosenSpace);
  ui.share.hidden = !(chosen && canShare(chosen.role));
  ui.leaveSpace.hidden = !(chosen && chosen.role !== "owner");
  const readOnly = Boolean(chosen) && !canWrite(chosen.role);
  ui.newNote.disabled = readOnly;
  ui.newNote.title = readOnly ? `You are a viewer of ${chosen.name}: its notes are read-only` : "New note (Alt+N)";
  ui.invitations.replaceChildren(...invitations.map(invitationItem));
  ui.invitations.hidden = invitations.length === 0;
}

function invitationItem(invitation) {
  const li = document.createElement("li");
  const text = document.createElement("span");
  text.textContent = `${invitation.invitedBy || "Someone"} invites you to ${invitation.name} as ${invitation.role}`;
  const accept = document.createElement("button");
  accept.type = "button";
  accept.className = "primary";
  accept.textContent = "Accept";
  accept.setAttribute("aria-label", `Accept the invitation to ${invitation.name}`);
  accept.addEventListener("click", () => answerInvitation(invitation, true));
  const decline = document.createElement("button");
  decline.type = "button";
  decline.className = "quiet";
  decline.textContent = "Decline";
  decline.setAttribute("aria-label", `Decline the invitation to ${invitation.name}`);
  decline.addEventListener("click", () => answerInvitation(invitation, false));
  li.append(text, accept, decline);
  return li;
}

async function answerInvitation(invitation, yes) {
  try {
    if (yes) {
      await acceptInvitation(auth, invitation.space);
      chosenSpace = invitation.space;
      toast(`You joined ${invitation.name}.`);
    } else {
      await declineInvitation(auth, invitation.space);
    }
  } catch (error) {
    toast(`Could not ${yes ? "accept" : "decline"} the invitation: ${error.message}`);
  }
  await refreshSpaces();
}

function chooseSpace(value) {
  chosenSpace = value;
  renderSpaces();
  schedule("list");
}

/** The spaces the engine heard of (`welcome`, `spaces`): the sidebar and the editor follow. */
function spacesChanged(list) {
  spaces = sharedSpaces(list);
  renderSpaces();
  if (draft) renderMeta();
  schedule("list");
}

/** GET /v1/spaces: the spaces and the invitations waiting (online only; quietly skipped offline). */
async function refreshSpaces() {
  if (!navigator.onLine) return;
  try {
    const listed = await fetchSpaces(auth);
    invitations = listed.invitations;
    spacesChanged(listed.spaces);
  } catch {
    // Offline or signed out meanwhile: the list stays as the engine last heard it.
  }
}

/** The editor's line for a shared space's note: which space, read-only for a viewer, who edited it last. */
function renderNoteSpace() {
  const space = draft && spaceOf(draft.record);
  if (!space) {
    ui.noteSpace.hidden = true;
    ui.noteSpace.textContent = "";
    return;
  }
  const listed = spaces.find((s) => s.id === space);
  const parts = [listed ? `In ${listed.name}` : "In a space you are no longer a member of"];
  if (listed && !canWrite(listed.role)) parts.push("read-only: you are a viewer");
  const author = authors.get(draft.id);
  if (author) parts.push(`last edited by ${author}`);
  const text = parts.join(" · ");
  if (ui.noteSpace.textContent !== text) ui.noteSpace.textContent = text;
  ui.noteSpace.hidden = false;
}

/** Who edited a shared space's note last (its newest revision's author), read when online. */
async function loadAuthor(d) {
  const space = d && spaceOf(d.record);
  if (!space || !navigator.onLine || !spaces.some((s) => s.id === space) || !onServer(d.record)) return;
  try {
    const author = latestAuthor(await revisionsOf(auth, d.id, space));
    if (author) authors.set(d.id, author);
  } catch {
    return; // offline, or no longer a member: nothing said
  }
  if (draft === d) renderNoteSpace();
}

let authorTimer = 0;
/** The open note changed on the server: who edited it is read again (at most twice a second). */
function authorMayHaveChanged() {
  clearTimeout(authorTimer);
  authorTimer = setTimeout(() => draft && loadAuthor(draft), 500);
}

/** "Save a copy to my space": a refused note of a space left becomes a new personal note. */
async function copyToPersonal() {
  const d = draft;
  if (!d) return;
  await save(d);
  while (d.writing) await new Promise((resolve) => setTimeout(resolve, 20));
  clearTimeout(d.timer);
  d.timer = 0;
  drafts.delete(d.id);
  draft = null;
  closeEditor();
  const copy = await engine.copyToPersonalSpace(d.id);
  chosenSpace = chosenSpace === "all" ? "all" : "personal";
  renderSpaces();
  const record = await store.get(copy);
  if (record) {
    noteChanged(copy, record);
    select(copy, record);
  }
  toast("Saved a copy in your personal space.");
}

/** The Share dialog of the space the list shows (owner and admins). */
async function openShare() {
  const space = spaces.find((s) => s.id === chosenSpace);
  if (!space || !canShare(space.role)) return;
  ui.shareDialog.dataset.space = space.id;
  ui.shareTitle.textContent = `Share ${space.name}`;
  ui.shareStatus.textContent = "";
  ui.shareError.textContent = "";
  ui.inviteUsername.value = "";
  ui.linkUrl.value = "";
  ui.linkUrl.hidden = true;
  ui.linkUrlLabel.hidden = true;
  ui.members.replaceChildren();
  ui.shareDialog.showModal();
  await renderMembers(space);
}

async function renderMembers(space) {
  try {
    const details = await spaceDetails(auth, space.id);
    const me = auth.session && auth.session.user;
    ui.members.replaceChildren(...(details.members || []).map((member) => {
      const li = document.createElement("li");
      const name = document.createElement("span");
      name.textContent = `${member.username} · ${member.role}`;
      li.append(name);
      const self = me && (member.id === me || member.username === me);
      if (!self && canRemove(space.role, member.role)) {
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "danger";
        remove.textContent = "Remove";
        remove.setAttribute("aria-label", `Remove ${member.username}`);
        remove.addEventListener("click", async () => {
          try {
            await removeMember(auth, space.id, member.id);
            ui.shareStatus.textContent = `${member.username} was removed.`;
          } catch (error) {
            ui.shareError.textContent = `Could not remove ${member.username}: ${error.message}`;
          }
          await renderMembers(space);
        });
        li.append(remove);
      }
      return li;
    }));
  } catch (error) {
    ui.shareError.textContent = `Could not read the members: ${error.message}`;
  }
}

function wireSpaces() {
  ui.share.addEventListener("click", () => openShare().catch((error) => toast(String(error))));
  ui.shareClose.addEventListener("click", () => ui.shareDialog.close());
  ui.inviteForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const space = spaces.find((s) => s.id === ui.shareDialog.dataset.space);
    const username = ui.inviteUsername.value.trim();
    if (!space || !username) return;
    ui.shareError.textContent = "";
    try {
      await invite(auth, space.id, username, ui.inviteRole.value);
      ui.shareStatus.textContent = `Invited ${username} as ${ui.inviteRole.value}.`;
      ui.inviteUsername.value = "";
    } catch (error) {
      ui.shareError.textContent = error.code === "unknown_user" ? `No account is called ${username}.` : `Could not invite ${username}: ${error.message}`;
    }
  });
  ui.linkCreate.addEventListener("click", async () => {
    const space = spaces.find((s) => s.id === ui.shareDialog.dataset.space);
    if (!space) return;
    ui.shareError.textContent = "";
    try {
      const link = await createLink(auth, space.id, ui.linkRole.value);
      ui.linkUrl.value = link.url;
      ui.linkUrl.hidden = false;
      ui.linkUrlLabel.hidden = false;
      ui.linkUrl.select();
      ui.shareStatus.textContent = `Whoever opens this link joins ${space.name} as ${link.role}.`;
    } catch (error) {
      ui.shareError.textContent = `Could not create the link: ${error.message}`;
    }
  });
  ui.leaveSpace.addEventListener("click", async () => {
    const space = spaces.find((s) => s.id === chosenSpace);
    if (!space || !confirm(`Leave ${space.name}? Its notes leave this browser.`)) return;
    try {
      await leaveSpace(auth, space.id);
    } catch (error) {
      toast(`Could not leave ${space.name}: ${error.message}`);
    }
    await refreshSpaces();
  });
  ui.newSpace.addEventListener("click", () => {
    const open = ui.newSpaceForm.hidden;
    ui.newSpaceForm.hidden = !open;
    ui.newSpace.setAttribute("aria-expanded", String(open));
    if (open) ui.newSpaceName.focus();
  });
  ui.newSpaceForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const name = ui.newSpaceName.value.trim();
    if (!name) return;
    try {
      const space = await createSpace(auth, name);
      ui.newSpaceName.value = "";
      ui.newSpaceForm.hidden = true;
      ui.newSpace.setAttribute("aria-expanded", "false");
      chosenSpace = space.id;
      await refreshSpaces();
    } catch (error) {
      toast(`Could not create the space: ${error.message}`);
    }
  });
  ui.copyPersonal.addEventListener("click", () => copyToPersonal().catch((error) => toast(`Could not copy the note: ${error.message}`)));
  window.addEventListener("focus", () => refreshSpaces());
  // A join link opened in this tab while the app runs.
  window.addEventListener("hashchange", () => {
    const secret = joinSecret(location.hash);
    if (!secret) return;
    keepJoin(secret);
    joinFromLink();
  });
  window.addEventListener("online", () => refreshSpaces());
}

/**
 * A join link (`#join=SECRET`, kept in sessionStorage over the sign-in): joined once signed in
 * (POST /v1/join), then the fragment leaves the address. A secret that does not work is
 * dropped, said once; offline, it waits for the next start.
 */
async function joinFromLink() {
  let secret = null;
  try {
    secret = sessionStorage.getItem(JOIN_KEY);
  } catch {
    secret = joinSecret(location.hash);
  }
  if (!secret) return;
  try {
    const joined = await joinSpace(auth, secret);
    forgetJoin();
    chosenSpace = joined.space;
    toast(`You joined ${joined.name} as ${joined.role}.`);
    await refreshSpaces();
  } catch (error) {
    if (error.code !== "offline") forgetJoin();
    toast(error.code === "link_unusable" ? "This link no longer works: ask for a new one." : `Could not join the space: ${error.message}`);
  }
}

/**
 * A join link's secret kept in sessionStorage for the sign-in, and, once kept, taken out of the
 * address at once (not left in the history or shown). Without storage it stays in the address,
 * read from there (joined only if already signed in).
 */
function keepJoin(secret) {
  try {
    sessionStorage.setItem(JOIN_KEY, secret);
  } catch {
    return; // no storage: read from the address
  }
  history.replaceState(null, "", location.pathname + location.search);
}

function forgetJoin() {
  try {
    sessionStorage.removeItem(JOIN_KEY);
  } catch {
    // No storage.
  }
  if (joinSecret(location.hash)) history.replaceState(null, "", location.pathname + location.search);
}

function wireApp() {
  ui.signOut.addEventListener("click", () => askSignOut().catch((error) => signOutFailed(error, false)));
  ui.signOutExport.addEventListener("click", () => exportUnsynced()
    .then((said) => (ui.signOutExported.textContent = said), (error) => toast(`Could not export: ${error.message}`)));
  ui.signOutAnyway.addEventListener("click", () => {
    const remove = ui.signOutRemove.checked;
    ui.signOutDialog.close();
    const all = everywhere;
    signOut(all, { remove }).catch((error) => signOutFailed(error, all));
  });
  ui.signOutRemove.addEventListener("change", showRemoveChoice);
  ui.signOutSync.addEventListener("click", () => {
    if (ui.signOutSync.getAttribute("aria-disabled")) return;
    ui.signOutSync.setAttribute("aria-disabled", "true");
    const all = everywhere;
    syncThenSignOut()
      .catch((error) => signOutFailed(error, all))
      .finally(() => ui.signOutSync.removeAttribute("aria-disabled"));
  });
  ui.signOutDialog.addEventListener("close", () => syncingFirst++);
  accountPanel = new AccountPanel(auth, {
    signOutEverywhere: (options) => askSignOut(true, options),
    deleteAccount,
    unsynced: unsyncedCount,
    settleUnsynced,
    exportUnsynced,
  });
  ui.account.addEventListener("click", () => accountPanel.open(ui.account));
  ui.signOutCancel.addEventListener("click", () => ui.signOutDialog.close());
  ui.discard.addEventListener("click", () => discard().catch((error) => toast(`Could not discard: ${error.message}`)));
  ui.newNote.addEventListener("click", () => createNote());
  ui.search.addEventListener("input", () => schedule("list"));
  ui.filter.addEventListener("change", () => schedule("list"));
  // The list's order, kept for the next visit (a preference, not a note: not synced).
  try {
    if (localStorage.getItem("noted.sort") === "created") ui.sort.value = "created";
  } catch {
    // Storage refused (a private window): the default order.
  }
  index.orderBy(ui.sort.value);
  ui.sort.addEventListener("change", () => {
    index.orderBy(ui.sort.value);
    try {
      localStorage.setItem("noted.sort", ui.sort.value);
    } catch {
      // As above.
    }
    schedule("list");
  });
  ui.title.addEventListener("input", onType);
  ui.body.addEventListener("input", onType);
  ui.folder.addEventListener("change", () => edit(draft && draft.id, (f) => ({ ...f, folder: ui.folder.value.trim() || null })));
  ui.tags.addEventListener("change", () => edit(draft && draft.id, (f) => ({ ...f, tags: ui.tags.value.split(",").map((t) => t.trim()).filter(Boolean) })));
  ui.pin.addEventListener("click", () => edit(draft && draft.id, (f) => ({ ...f, pinned: !f.pinned })));
  ui.trash.addEventListener("click", () => edit(draft && draft.id, (f) => ({ ...f, trashed: true })));
  ui.restore.addEventListener("click", () => edit(draft && draft.id, (f) => ({ ...f, trashed: false })));
  ui.purge.addEventListener("click", purge);
  ui.back.addEventListener("click", () => {
    ui.app.classList.remove("editing");
    if (selectedId) requestAnimationFrame(() => list.focusRow(selectedId));
  });
  ui.historyToggle.addEventListener("click", showHistory);
  let preview = false;
  try {
    preview = localStorage.getItem(PREVIEW_KEY) === "on";
  } catch {
    // As for the sort.
  }
  setPreview(preview, { remember: false });
  ui.previewToggle.addEventListener("click", () => setPreview(!previewing));
  document.addEventListener("keydown", (e) => {
    if (e.altKey && (e.key === "n" || e.key === "N")) {
      e.preventDefault();
      createNote();
    } else if (e.altKey && (e.key === "f" || e.key === "F")) {
      e.preventDefault();
      ui.search.focus();
    } else if (e.altKey && (e.key === "p" || e.key === "P") && draft && !ui.editor.hidden) {
      e.preventDefault();
      setPreview(!previewing);
    }
  });
  // Typing not yet written goes to the store when the page is hidden or closed.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") flushAll();
  });
  window.addEventListener("pagehide", () => {
    keepUnsaved();
    flushAll();
  });
  // Back from the back-forward cache: this page writes its typing itself.
  window.addEventListener("pageshow", (event) => {
    if (!event.persisted) return;
    try {
      sessionStorage.removeItem(UNSAVED_KEY);
    } catch {
      // No storage.
    }
  });
  setInterval(() => schedule("rows"), 30000); // "2 min ago"
  wireSpaces();
}

async function main() {
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("sw.js").catch(() => {});
  }
  const options = {
    onBlocked: () => toast("Close Noted's other tabs to finish updating it."),
    // Another tab removed this browser's copy of the account (or deleted the account): start
    // again, signed out, with nothing of it shown.
    onGone: () => {
      removing = true;
      location.reload();
    },
  };
  // A join link opened: its secret waits for the sign-in (the sign-in's redirect drops the fragment).
  const secret = joinSecret(location.hash);
  if (secret) keepJoin(secret);
  auth = new Auth();
  ui.signIn.addEventListener("click", () => auth.signIn().catch((e) => (ui.signInError.textContent = e.message)));
  let signedInNow = false;
  try {
    signedInNow = await auth.completeRedirect();
  } catch (error) {
    ui.signInError.textContent = error.message;
  }
  // Each account has a database of its own (accounts.js): the one signing in now, or the one
  // that signed in last.
  if (signedInNow) {
    const account = accountOf(auth.session);
    if (!account) throw new Error("the sign-in names no user");
    store = await openFor(account, options);
    auth.store = store;
    await store.setMeta("session", auth.session);
  } else {
    store = await openCurrent(options);
    auth.store = store;
    await auth.load();
  }
  // Typing this tab's last page could not write (`keepUnsaved`); a signed-out start drops it
  // (signing out and a lost session write every draft first).
  const unsaved = takeUnsaved();
  if (!auth.signedIn) {
    ui.signedOut.hidden = false;
    showSignedOutNote();
    if (store) offerRemoval(options);
    return;
  }
  try {
    sessionStorage.removeItem(SIGNED_OUT_NOTE); // signed in again meanwhile: old news
  } catch {
    // No storage.
  }
  ui.app.hidden = false;
  search = new Search(store, { onError: (message) => toast(`Search: ${message}`) });
  list = new NoteList(ui.notes, ui.notesScroll, { render: renderRow, onOpen: (id) => select(id) });
  wireApp();
  const owner = await ownerOf(store);
  engine = new SyncEngine({ store, auth, transport: browserTransport(), user: owner && owner.user });
  engine.addEventListener("records", (e) => onRecords(e.detail).catch((error) => toast(String(error))));
  engine.addEventListener("state", () => schedule());
  engine.addEventListener("pending", () => schedule());
  engine.addEventListener("error", (e) => toast(e.detail.message));
  engine.addEventListener("spaces", (e) => {
    spacesChanged(e.detail.spaces);
    refreshSpaces(); // the invitations too
  });
  spaces = sharedSpaces(await store.getMeta("spaces"));
  renderSpaces();
  auth.addEventListener("change", () => {
    // Signed out, or the session lost: typing not yet written is written first (the
    // account's database keeps it for its next sign-in); a lost session is explained on the
    // welcome page. A deleted account's database is being removed: nothing to keep.
    if (auth.signedIn || deleting || removing) return;
    const lost = leaving ? null : auth.lost;
    flushDrafts()
      .then(() => lost && sessionLost(lost.said))
      .finally(() => location.reload());
  });
  // Attachments (Web/attachments.js): files are uploaded before the changes that add them.
  attachments = new Attachments({ store, auth });
  engine.blobs = attachments;
  attachments.addEventListener("uploaded", () => engine.schedulePush(0));
  attachments.addEventListener("error", (e) => toast(e.detail.message));
  attachmentsEditor = new AttachmentsEditor(attachments, {
    ui: { body: ui.body, input: $("attach-input"), list: $("attachment-list"), error: $("attach-error") },
    note: () => draft && { id: draft.id, attachments: noteFields(draft.record).attachments },
    edit,
    saveFile,
    canAttach,
  });
  attachments.start();
  // /Attachments
  window.noted = { store, auth, engine, index, attachments }; // for tests and the curious
  await restoreUnsaved(unsaved).catch((error) => toast(`Could not restore the typing of before the reload: ${error.message}`));
  engine.start();
  refreshSpaces();
  joinFromLink();
  // The one read of every record (the search worker reads the texts itself). Records of an
  // older version were put in the stored form by the database's upgrade (Web/db.js), refusals
  // of a version before that and purges it kept for ever included.
  await store.scan((batch) => {
    for (const record of batch) noteChanged(record.id, record);
  });
  loaded = true;
  schedule("list");
}

main().catch((error) => {
  document.body.textContent = `Noted could not start: ${error.message}`;
});
