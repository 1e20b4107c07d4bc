// The sync engine's transport (Web/sync.js, docs/reliability.md "The engine outside the page"):
// how it reaches the server, and how it hears of the network. The engine holds no WebSocket,
// window or navigator of its own; the page passes `browserTransport()`, node tests pass
// `webSocketTransport(url)` (node's global WebSocket, `--experimental-websocket` on node 20) or
// a transport of their own that can be taken offline.
//
// A transport is { connect(), online?(), watch?({ online, offline }) }:
// - `connect()` opens a connection to the server's `/v1/sync` and returns it, or throws (then
//   the engine tries again later). The connection is the WebSocket subset the engine uses:
//   `readyState` (1 while open), `send(text)`, `close(code, reason)`, and the handlers the
//   engine sets: `onopen()`, `onmessage({ data })` (one JSON text frame), `onclose({ code })`,
//   `onerror()`. The token goes in the first message (`hello`), never in the URL.
// - `online()`: false when the network is known to be down (reconnects then wait longer);
//   absent means online.
// - `watch({ online, offline })`: calls `online()` when the network comes back (the engine
//   connects at once) and `offline()` when it goes (the engine drops its connection).
//
// The HTTP calls around sync are not the engine's: tokens are the `auth` object's
// (Web/auth.js: accessToken, invalidateAccessToken, refusedBecause, refreshSoon) and uploads
// the `blobs` gate's (Web/attachments.js: blocking, missing); node passes its own.

export const OPEN = 1; // WebSocket.OPEN

/** The page's transport: a WebSocket to this origin's /v1/sync, the window's online/offline. */
export function browserTransport() {
  return {
    connect() {
      const url = new URL("/v1/sync", location.href);
      url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
      return new WebSocket(url);
    },
    online() {
      return navigator.onLine !== false;
    },
    watch({ online, offline }) {
      window.addEventListener("online", online);
      window.addEventListener("offline", offline);
    },
  };
}

/**
 * A transport to `base`'s /v1/sync (an http(s) or ws(s) URL) with `WebSocketImpl` (the global
 * WebSocket by default: node 22, or node 20 with --experimental-websocket).
 */
export function webSocketTransport(base, { WebSocketImpl = globalThis.WebSocket } = {}) {
  return {
    connect() {
      const url = new URL("/v1/sync", base);
      url.protocol = url.protocol === "https:" || url.protocol === "wss:" ? "wss:" : "ws:";
      return new WebSocketImpl(url);
    },
  };
}
