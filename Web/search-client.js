// The page's side of the search index (Web/search-worker.js): notes to index are sent as
// [number, id] once the page is quiet for a moment (or at once before a search), and the
// worker reads their text from IndexedDB itself; searches come back as a Uint8Array over
// note numbers. Where module workers are missing, the same index runs on the page.

import { SearchIndex } from "./search.js";
import { searchText } from "./search-text.js";
import { isPurging, noteFields } from "./records.js";

const QUIET = 300; // ms without changes before the worker is handed the notes that changed

export class Search {
  /** `store`: the page's LocalStore (its database name; its records where no worker runs). */
  constructor(store, { onError = () => {} } = {}) {
    this.store = store;
    this.notes = new Map(); // doc -> id (null: forget), not yet handed over
    this.timer = 0;
    this.changedAt = 0;
    this.waiting = new Map(); // request id -> resolve
    this.next = 0;
    try {
      this.worker = new Worker(new URL("./search-worker.js", import.meta.url), { type: "module" });
      this.worker.onmessage = (event) => {
        const { type, id, hits, message } = event.data;
        if (type === "error") {
          onError(message);
          return;
        }
        const resolve = this.waiting.get(id);
        this.waiting.delete(id);
        if (resolve) resolve(hits);
      };
      this.worker.postMessage({ type: "open", name: store.db.name });
    } catch {
      this.worker = null;
      this.local = new SearchIndex();
    }
  }

  /** Note number `doc` is note `id` as stored now (null: forget it). */
  set(doc, id) {
    this.notes.set(doc, id);
    // One timer for a run of changes (a pulled page sets hundreds), moved on when it fires.
    this.changedAt = performance.now();
    if (!this.timer) this.timer = setTimeout(() => this.quiet(), QUIET);
  }

  quiet() {
    const left = this.changedAt + QUIET - performance.now();
    if (left > 1) {
      this.timer = setTimeout(() => this.quiet(), left);
      return;
    }
    this.flush();
  }

  async flush() {
    clearTimeout(this.timer);
    this.timer = 0;
    if (this.notes.size === 0) return;
    const notes = [...this.notes];
    this.notes.clear();
    if (this.worker) {
      this.worker.postMessage({ type: "index", notes });
      return;
    }
    const records = await this.store.getMany(notes.filter(([, id]) => id !== null).map(([, id]) => id));
    for (const [doc, id] of notes) {
      const record = id === null ? null : records.get(id);
      if (record && !isPurging(record)) this.local.set(doc, searchText(noteFields(record)));
      else this.local.delete(doc);
    }
  }

  /** The notes matching `query` (see SearchIndex.match), after every change given so far. */
  async match(query) {
    const flushed = this.flush();
    if (!this.worker) {
      await flushed;
      return this.local.match(query);
    }
    const id = ++this.next;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.worker.postMessage({ type: "match", id, query });
    });
  }
}
