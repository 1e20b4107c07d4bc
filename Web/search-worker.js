// The search index in its own thread: notes' words are indexed and searched here, off the
// page's main thread (Web/search.js holds the index; Web/search-client.js talks to this).

import { SearchIndex } from "./search.js";

const index = new SearchIndex();

self.onmessage = (event) => {
  const message = event.data;
  if (message.type === "set") {
    for (const [doc, text] of message.docs) {
      if (text === null) index.delete(doc);
      else index.set(doc, text);
    }
  } else if (message.type === "match") {
    const hits = index.match(message.query);
    self.postMessage({ type: "match", id: message.id, hits }, hits ? [hits.buffer] : []);
  }
};
