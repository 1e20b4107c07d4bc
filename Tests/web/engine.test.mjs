// Web/sync.js's SyncEngine under node with a fake transport and Web/memory-store.js: the engine
// needs no IndexedDB, DOM or WebSocket (docs/reliability.md, "The engine outside the page").
import { test } from "node:test";
import assert from "node:assert/strict";
import { SyncEngine } from "../../Web/sync.js";
import { MemoryStore } from "../../Web/memory-store.js";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A transport counting its connections (never opened: the engine waits in `connecting`). */
function fakeTransport() {
  const sockets = [];
  return {
    sockets,
    connect() {
      const ws = { readyState: 0, sent: [], send(text) { this.sent.push(text); }, close() { this.readyState = 3; } };
      sockets.push(ws);
      return ws;
    },
  };
}

const slowAuth = { accessToken: () => sleep(100).then(() => "token"), invalidateAccessToken() {}, refusedBecause() {} };

test("kicks while the token is fetched open one connection, not one each", async () => {
  const transport = fakeTransport();
  const engine = new SyncEngine({ store: new MemoryStore(), auth: slowAuth, transport });
  try {
    engine.start();
    engine.schedulePush(0); // an edit while connecting kicks too
    engine.kick();
    await sleep(250);
    assert.equal(transport.sockets.length, 1);
    assert.equal(engine.state, "connecting");
  } finally {
    engine.dispose();
  }
});

test("a stop while the token is fetched opens no connection", async () => {
  const transport = fakeTransport();
  const engine = new SyncEngine({ store: new MemoryStore(), auth: slowAuth, transport });
  engine.start();
  engine.dispose();
  await sleep(250);
  assert.equal(transport.sockets.length, 0);
  assert.equal(engine.state, "offline");
});

test("on open the engine says hello with the token and its stored device id", async () => {
  const transport = fakeTransport();
  const store = new MemoryStore();
  const engine = new SyncEngine({ store, auth: { ...slowAuth, accessToken: async () => "t1" }, transport });
  try {
    engine.start();
    await sleep(20);
    const ws = transport.sockets[0];
    ws.readyState = 1;
    await ws.onopen();
    const hello = JSON.parse(ws.sent[0]);
    assert.equal(hello.type, "hello");
    assert.equal(hello.token, "t1");
    assert.equal(hello.device, await store.getMeta("device"));
  } finally {
    engine.dispose();
  }
});
