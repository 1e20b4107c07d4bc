// The search index in its own thread: notes' words are read, indexed and searched here, off
// the page's main thread (Web/search.js holds the index; Web/search-client.js talks to this).
// The page sends note numbers and ids only; the texts are read here from the page's IndexedDB,
// so a synced page of notes costs the main thread nothing for search.

import { SearchIndex } from "./search.js";
import { searchText } from "./search-text.js";
import { isPurging, noteFields } from "./records.js";

const index = new SearchIndex();
let db = null;
let queue = Promise.resolve();

function open(name) {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(name);
    req.onsuccess = () => {
      req.result.onversionchange = () => req.result.close();
      resolve(req.result);
    };
    req.onerror = () => reject(req.error);
    req.onblocked = () => reject(new Error("the database is being upgraded"));
  });
}

/** Indexes notes [doc, id] from the store (id null: forget the note). */
async function indexNotes(notes) {
  const read = notes.filter(([, id]) => id !== null);
  for (const [doc, id] of notes) if (id === null) index.delete(doc);
  if (read.length === 0) return;
  const tx = db.transaction("records", "readonly");
  const store = tx.objectStore("records");
  await new Promise((resolve, reject) => {
    for (const [doc, id] of read) {
      const req = store.get(id);
      req.onsuccess = () => {
        const record = req.result;
        if (record && !isPurging(record)) index.set(doc, searchText(noteFields(record)));
        else index.delete(doc);
      };
    }
    tx.oncomplete = resolve;
    tx.onabort = () => reject(tx.error);
  });
}

self.onmessage = (event) => {
  const message = event.data;
  // One message at a time, in order: a search sees every note indexed before it was asked.
  queue = queue.then(async () => {
    if (message.type === "open") {
      db = await open(message.name);
    } else if (message.type === "index") {
      await indexNotes(message.notes);
    } else if (message.type === "match") {
      const hits = index.match(message.query);
      self.postMessage({ type: "match", id: message.id, hits }, hits ? [hits.buffer] : []);
    }
  }).catch((error) => self.postMessage({ type: "error", message: String(error && error.message || error) }));
};
