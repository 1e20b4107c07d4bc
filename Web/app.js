// The Noted web app: a master/detail notes UI over the local store, synced by SyncEngine.

import { LocalStore, isPending, newRecord, normalizeFields } from "./db.js";
import { Auth } from "./auth.js";
import { SyncEngine } from "./sync.js";
import { hunk, rebase, uuid } from "./text.js";

const $ = (id) => document.getElementById(id);
const ui = {
  signedOut: $("signed-out"), app: $("app"), signIn: $("sign-in"), signInError: $("sign-in-error"),
  newNote: $("new-note"), sync: $("sync-status"), signOut: $("sign-out"), search: $("search"),
  filter: $("filter"), notes: $("notes"), empty: $("empty"), editor: $("editor"), back: $("back"),
  pin: $("pin"), trash: $("trash"), restore: $("restore"), purge: $("purge"),
  historyToggle: $("history-toggle"), history: $("history"), revisions: $("revisions"),
  title: $("title"), body: $("body"), folder: $("folder"), tags: $("tags"), toast: $("toast"),
};

let store;
let auth;
let engine;
let selectedId = null;
let saved = { title: "", body: "" }; // what the editor last wrote to the store
let records = [];

function toast(message) {
  ui.toast.textContent = message;
  ui.toast.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (ui.toast.hidden = true), 5000);
}

function relativeTime(iso) {
  const then = Date.parse(iso);
  if (!then) return "";
  const s = Math.round((Date.now() - then) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  if (s < 7 * 86400) return `${Math.round(s / 86400)} d ago`;
  return new Date(then).toLocaleDateString();
}

function visible(record) {
  return !record.purged && record.local;
}

function matchesFilter(record) {
  const f = record.local;
  const filter = ui.filter.value;
  if (filter === "trash") return f.trashed;
  if (f.trashed) return false;
  if (filter.startsWith("folder:")) return f.folder === filter.slice(7);
  if (filter.startsWith("tag:")) return f.tags.includes(filter.slice(4));
  return true;
}

function matchesSearch(record) {
  const q = ui.search.value.trim().toLowerCase();
  if (!q) return true;
  const f = record.local;
  return f.title.toLowerCase().includes(q) || f.body.toLowerCase().includes(q) || f.tags.some((t) => t.toLowerCase().includes(q));
}

function renderFilters() {
  const current = ui.filter.value;
  const folders = new Set();
  const tags = new Set();
  for (const r of records) {
    if (!visible(r)) continue;
    if (r.local.folder) folders.add(r.local.folder);
    for (const t of r.local.tags) tags.add(t);
  }
  const options = [["all", "All notes"], ["trash", "Trash"],
    ...[...folders].sort().map((f) => [`folder:${f}`, `Folder: ${f}`]),
    ...[...tags].sort().map((t) => [`tag:${t}`, `Tag: ${t}`])];
  ui.filter.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
  ui.filter.value = options.some(([v]) => v === current) ? current : "all";
}

function renderList() {
  renderFilters();
  const shown = records.filter((r) => visible(r) && matchesFilter(r) && matchesSearch(r));
  shown.sort((a, b) => (b.local.pinned - a.local.pinned) || (Date.parse(b.updatedAt) - Date.parse(a.updatedAt)));
  ui.notes.replaceChildren(...shown.map((r) => {
    const li = document.createElement("li");
    li.role = "option";
    li.tabIndex = 0;
    li.dataset.id = r.id;
    li.setAttribute("aria-selected", String(r.id === selectedId));
    const title = document.createElement("div");
    title.className = "note-title";
    if (r.local.pinned) {
      const pin = document.createElement("span");
      pin.className = "pin";
      pin.textContent = "📌";
      pin.setAttribute("aria-label", "pinned");
      title.append(pin);
    }
    title.append(document.createTextNode(r.local.title || "Untitled"));
    const line = document.createElement("div");
    line.className = "note-line";
    line.textContent = r.local.body.split("\n").find((l) => l.trim()) || "No text";
    const meta = document.createElement("div");
    meta.className = "note-meta";
    meta.textContent = relativeTime(r.updatedAt) + (isPending(r) ? " · not synced" : "");
    li.append(title, line, meta);
    li.addEventListener("click", () => select(r.id));
    li.addEventListener("keydown", (e) => { if (e.key === "Enter") select(r.id); });
    return li;
  }));
  ui.empty.hidden = shown.length > 0;
  const pending = records.filter(isPending).length;
  ui.sync.dataset.state = engine ? engine.state : "offline";
  ui.sync.textContent = (engine ? engine.state : "offline") + (pending ? ` · ${pending} pending` : "");
}

async function reload() {
  records = await store.all();
  renderList();
  renderEditor();
}

/** Shows the selected note; keeps the caret and any typing not yet saved. */
function renderEditor() {
  const record = records.find((r) => r.id === selectedId);
  if (!record || record.purged) {
    ui.editor.hidden = true;
    ui.app.classList.remove("editing");
    return;
  }
  ui.editor.hidden = false;
  const f = record.local;
  for (const name of ["title", "body"]) {
    const el = ui[name];
    if (el.value === f[name]) {
      saved[name] = f[name];
      continue;
    }
    // Typing since the last save is rebased onto the new text rather than lost.
    const typed = el.value !== saved[name];
    const next = typed ? rebase(saved[name], el.value, f[name]) : f[name];
    const focused = document.activeElement === el;
    const start = el.selectionStart;
    const end = el.selectionEnd;
    const h = hunk(el.value, next);
    const map = (pos) => (pos >= h.end ? pos + (h.toEnd - h.end) : pos > h.start ? h.toEnd : pos);
    el.value = next;
    if (focused) el.setSelectionRange(map(start), map(end));
    saved[name] = f[name];
    if (typed) saveText(name);
  }
  if (document.activeElement !== ui.folder) ui.folder.value = f.folder || "";
  if (document.activeElement !== ui.tags) ui.tags.value = f.tags.join(", ");
  ui.pin.textContent = f.pinned ? "Unpin" : "Pin";
  ui.pin.setAttribute("aria-pressed", String(f.pinned));
  ui.trash.hidden = f.trashed;
  ui.restore.hidden = !f.trashed;
  ui.purge.hidden = !f.trashed;
}

async function select(id) {
  selectedId = id;
  const record = records.find((r) => r.id === id);
  saved = { title: record ? record.local.title : "", body: record ? record.local.body : "" };
  ui.title.value = saved.title;
  ui.body.value = saved.body;
  ui.history.hidden = true;
  ui.historyToggle.setAttribute("aria-expanded", "false");
  ui.app.classList.add("editing");
  renderList();
  renderEditor();
}

/** One local edit: the new fields and the outbox mark in one transaction. */
async function edit(id, change, { debounce = false } = {}) {
  await store.update(id, (current) => {
    if (!current) return undefined;
    const local = normalizeFields(change({ ...current.local, tags: [...current.local.tags] }));
    return { ...current, local, dirty: true, updatedAt: new Date().toISOString() };
  });
  records = await store.all();
  renderList();
  engine.schedulePush(debounce ? undefined : 0);
}

function saveText(name) {
  if (!selectedId) return;
  const value = ui[name].value;
  saved[name] = value;
  edit(selectedId, (f) => ({ ...f, [name]: value }), { debounce: true });
}

async function createNote() {
  const id = uuid();
  const filter = ui.filter.value;
  const fields = {
    folder: filter.startsWith("folder:") ? filter.slice(7) : null,
    tags: filter.startsWith("tag:") ? [filter.slice(4)] : [],
  };
  await store.update(id, () => newRecord(id, fields));
  if (filter === "trash") ui.filter.value = "all";
  records = await store.all();
  await select(id);
  ui.title.focus();
  engine.schedulePush(0);
}

async function showHistory() {
  const open = ui.history.hidden;
  ui.history.hidden = !open;
  ui.historyToggle.setAttribute("aria-expanded", String(open));
  if (!open || !selectedId) return;
  ui.revisions.replaceChildren(Object.assign(document.createElement("li"), { textContent: "Loading…" }));
  try {
    const { revisions } = await auth.fetchJSON(`/v1/records/notes/${selectedId}/revisions`);
    ui.revisions.replaceChildren(...revisions.slice().reverse().map((rev) => {
      const li = document.createElement("li");
      const label = document.createElement("span");
      label.textContent = `Revision ${rev.rev} · ${relativeTime(rev.updatedAt)}`;
      if (rev.conflict) {
        label.textContent += " · conflict";
        label.className = "conflict";
      }
      const button = document.createElement("button");
      button.type = "button";
      button.className = "quiet";
      button.textContent = "Restore";
      button.setAttribute("aria-label", `Restore revision ${rev.rev}`);
      button.addEventListener("click", () => restoreRevision(rev));
      li.append(label, " ", button);
      return li;
    }));
  } catch (error) {
    ui.revisions.replaceChildren(Object.assign(document.createElement("li"), { textContent: navigator.onLine ? `History unavailable (${error.message}).` : "History needs a connection." }));
  }
}

async function restoreRevision(rev) {
  const id = selectedId;
  const query = rev.conflict ? "?conflict=true" : "";
  const body = await auth.fetchJSON(`/v1/records/notes/${id}/revisions/${rev.rev}${query}`);
  const fields = normalizeFields(body.fields || body);
  await edit(id, (f) => ({ ...f, title: fields.title, body: fields.body }));
  renderEditor();
  toast(`Restored revision ${rev.rev}.`);
}

function wire() {
  ui.signIn.addEventListener("click", () => auth.signIn().catch((e) => (ui.signInError.textContent = e.message)));
  ui.signOut.addEventListener("click", async () => {
    engine.stop();
    await auth.signOut();
    await store.clearAll();
    location.reload();
  });
  ui.newNote.addEventListener("click", createNote);
  ui.search.addEventListener("input", renderList);
  ui.filter.addEventListener("change", renderList);
  ui.title.addEventListener("input", () => saveText("title"));
  ui.body.addEventListener("input", () => saveText("body"));
  ui.folder.addEventListener("change", () => edit(selectedId, (f) => ({ ...f, folder: ui.folder.value.trim() || null })));
  ui.tags.addEventListener("change", () => edit(selectedId, (f) => ({ ...f, tags: ui.tags.value.split(",").map((t) => t.trim()).filter(Boolean) })));
  ui.pin.addEventListener("click", () => edit(selectedId, (f) => ({ ...f, pinned: !f.pinned })).then(renderEditor));
  ui.trash.addEventListener("click", () => edit(selectedId, (f) => ({ ...f, trashed: true })).then(renderEditor));
  ui.restore.addEventListener("click", () => edit(selectedId, (f) => ({ ...f, trashed: false })).then(renderEditor));
  ui.purge.addEventListener("click", async () => {
    if (!confirm("Delete this note forever?")) return;
    const id = selectedId;
    await store.update(id, (current) => {
      if (!current) return undefined;
      if (!current.shadow && !current.inflight) return null; // never reached the server
      return { ...current, purged: true, dirty: true, updatedAt: new Date().toISOString() };
    });
    selectedId = null;
    await reload();
    engine.schedulePush(0);
  });
  ui.back.addEventListener("click", () => {
    ui.app.classList.remove("editing");
    ui.notes.querySelector(`[data-id="${selectedId}"]`)?.focus();
  });
  ui.historyToggle.addEventListener("click", showHistory);
  document.addEventListener("keydown", (e) => {
    if (e.altKey && (e.key === "n" || e.key === "N")) {
      e.preventDefault();
      createNote();
    } else if (e.altKey && (e.key === "f" || e.key === "F")) {
      e.preventDefault();
      ui.search.focus();
    }
  });
  setInterval(renderList, 30000);
}

async function main() {
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("sw.js").catch(() => {});
  }
  store = await LocalStore.open();
  auth = new Auth(store);
  await auth.load();
  wire();
  try {
    await auth.completeRedirect();
  } catch (error) {
    ui.signInError.textContent = error.message;
  }
  if (!auth.signedIn) {
    ui.signedOut.hidden = false;
    return;
  }
  ui.app.hidden = false;
  engine = new SyncEngine({ store, auth });
  engine.addEventListener("records", () => reload());
  engine.addEventListener("state", () => renderList());
  engine.addEventListener("pending", () => renderList());
  engine.addEventListener("error", (e) => toast(e.detail.message));
  auth.addEventListener("change", () => {
    if (!auth.signedIn) location.reload();
  });
  window.noted = { store, auth, engine }; // for tests and the curious
  await reload();
  engine.start();
}

main().catch((error) => {
  document.body.textContent = `Noted could not start: ${error.message}`;
});
