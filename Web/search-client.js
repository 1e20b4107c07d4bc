// The page's side of the search index: notes' texts go to a worker (Web/search-worker.js) in
// batches, searches come back as a Uint8Array over note numbers. Where module workers are
// missing the same index runs on the page.

import { SearchIndex } from "./search.js";

export class Search {
  constructor() {
    this.batch = [];
    this.flushing = false;
    this.waiting = new Map(); // request id -> resolve
    this.next = 0;
    try {
      this.worker = new Worker(new URL("./search-worker.js", import.meta.url), { type: "module" });
      this.worker.onmessage = (event) => {
        const { id, hits } = event.data;
        const resolve = this.waiting.get(id);
        this.waiting.delete(id);
        if (resolve) resolve(hits);
      };
    } catch {
      this.worker = null;
      this.local = new SearchIndex();
    }
  }

  /** Indexes a note's text (title, body, tags) as note number `doc`; null forgets it. */
  set(doc, text) {
    this.batch.push([doc, text]);
    if (!this.flushing) {
      this.flushing = true;
      queueMicrotask(() => this.flush());
    }
  }

  flush() {
    this.flushing = false;
    if (this.batch.length === 0) return;
    const docs = this.batch;
    this.batch = [];
    if (this.worker) {
      this.worker.postMessage({ type: "set", docs });
    } else {
      for (const [doc, text] of docs) {
        if (text === null) this.local.delete(doc);
        else this.local.set(doc, text);
      }
    }
  }

  /** The notes matching `query` (see SearchIndex.match), after every text given so far. */
  match(query) {
    this.flush();
    if (!this.worker) return Promise.resolve(this.local.match(query));
    const id = ++this.next;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.worker.postMessage({ type: "match", id, query });
    });
  }
}

/** The text of a note the index holds: title, body and tags. */
export function searchText(fields) {
  return `${fields.title}\n${fields.body}\n${fields.tags.join(" ")}`;
}
