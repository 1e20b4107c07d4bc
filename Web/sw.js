// The service worker: keeps the app shell so that Noted opens with no network.
// The shell is served from the cache and refreshed in the background; API calls never are.

// A new file in SHELL, or one dropped from it: bump CACHE (the old cache is deleted on activate).
const CACHE = "noted-shell-v17";
const SHELL = ["./", "index.html", "app.js", "account.js", "accounts.js", "auth.js", "db.js", "sync.js", "text.js", "dmp.js", "style.css",
  "notes-index.js", "list.js", "search.js", "search-client.js", "search-worker.js", "search-text.js", "qr.js", "markdown.js", "attachments.js", "elements.js", "records.js", "record-state.js", "transport.js", "memory-store.js", "history.js", "usage.js", "spaces.js",
  "manifest.webmanifest", "icon.svg", "icon-192.png", "icon-512.png"];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()),
  );
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== location.origin) return;
  if (/^\/(v1|oauth|\.well-known|metrics|health)(\/|$)/.test(url.pathname)) return;
  // Navigations (with or without ?code=…) get the shell's index.
  const key = event.request.mode === "navigate" ? new URL("./", self.registration.scope).href : event.request;
  event.respondWith(
    caches.open(CACHE).then(async (cache) => {
      const cached = await cache.match(key, { ignoreSearch: event.request.mode === "navigate" });
      const network = fetch(event.request).then((response) => {
        if (response.ok && event.request.mode !== "navigate") cache.put(event.request, response.clone());
        else if (response.ok) cache.put(key, response.clone());
        return response;
      });
      if (cached) {
        event.waitUntil(network.catch(() => {}));
        return cached;
      }
      return network;
    }),
  );
});
