// Web/accounts.js: removing this browser's copy of an account (security review 3, L2): what it
// would lose, said before (`unsyncedOf`, `unsyncedSentence`), and the Cache Storage entries that
// could hold the account's data (`removeCachedAccountData`). The IndexedDB side (the database
// deleted, the entry naming it gone) is checked in a real browser by
// Tests/peers/test_webapp_account.py and Tests/peers/test_webapp_offline.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { removeCachedAccountData, unsyncedOf, unsyncedSentence } from "../../Web/accounts.js";
import { MemoryStore } from "../../Web/memory-store.js";
import { newRecord, withEdit } from "../../Web/records.js";

test("unsyncedSentence: edits and attached files, singular and plural; nothing: no sentence", () => {
  assert.equal(unsyncedSentence({ edits: 0, files: 0 }), "");
  assert.equal(unsyncedSentence({}), "");
  assert.equal(unsyncedSentence({ edits: 1 }), "1 edit on this browser has not reached the server yet");
  assert.equal(unsyncedSentence({ edits: 3, files: 0 }), "3 edits on this browser have not reached the server yet");
  assert.equal(unsyncedSentence({ edits: 0, files: 1 }), "1 attached file on this browser has not reached the server yet");
  assert.equal(unsyncedSentence({ edits: 1, files: 1 }), "1 edit and 1 attached file on this browser have not reached the server yet");
  assert.equal(unsyncedSentence({ edits: 2, files: 5 }), "2 edits and 5 attached files on this browser have not reached the server yet");
});

test("unsyncedOf: the outbox's notes (refused ones counted apart) and the blobs waiting for their upload", async () => {
  const store = new MemoryStore();
  assert.deepEqual(await unsyncedOf(store), { edits: 0, refused: 0, files: 0 });
  await store.update("a", () => newRecord("a", { title: "A" }));
  await store.update("b", () => newRecord("b", { title: "B" }));
  await store.update("c", () => newRecord("c", { title: "C" }));
  // Synced: not counted.
  await store.update("c", (r) => ({ ...r, shadow: r.local, rev: 1, sync: null }));
  // Refused by the server: still unsynced, and counted as refused.
  await store.update("b", (r) => ({ ...withEdit(r, { ...r.local, body: "x" }), shadow: r.local, rev: 1, sync: { refusal: "too_large: " } }));
  assert.deepEqual(await unsyncedOf(store), { edits: 2, refused: 1, files: 0 });
  // A store that keeps blobs (Web/db.js's LocalStore) tells how many wait for their upload.
  store.pendingBlobCount = async () => 2;
  assert.deepEqual(await unsyncedOf(store), { edits: 2, refused: 1, files: 2 });
});

/** A CacheStorage in memory: cache name -> URLs. */
function fakeCaches(contents) {
  const caches = new Map(Object.entries(contents).map(([name, urls]) => [name, new Set(urls)]));
  return {
    caches,
    async keys() {
      return [...caches.keys()];
    },
    async open(name) {
      if (!caches.has(name)) caches.set(name, new Set());
      const urls = caches.get(name);
      return {
        async keys() {
          return [...urls].map((url) => ({ url }));
        },
        async delete(req) {
          return urls.delete(typeof req === "string" ? req : req.url);
        },
      };
    },
  };
}

test("removeCachedAccountData: the API's and the sign-in's entries of the origin go, in every cache; the shell stays", async () => {
  const origin = "http://127.0.0.1:8080";
  const storage = fakeCaches({
    "noted-shell-v12": [`${origin}/`, `${origin}/app.js`, `${origin}/index.html`, `${origin}/v1/blobs/${"a".repeat(64)}`, `${origin}/v1x.js`],
    "other": [`${origin}/v1/changes?since=0`, `${origin}/oauth/token`, `${origin}/v1`, "https://elsewhere.example/v1/blobs/x"],
  });
  assert.equal(await removeCachedAccountData(storage, origin), 4);
  assert.deepEqual([...storage.caches.get("noted-shell-v12")], [`${origin}/`, `${origin}/app.js`, `${origin}/index.html`, `${origin}/v1x.js`]);
  assert.deepEqual([...storage.caches.get("other")], ["https://elsewhere.example/v1/blobs/x"]);
  // Again: nothing left to remove.
  assert.equal(await removeCachedAccountData(storage, origin), 0);
});

test("removeCachedAccountData: no Cache Storage (an insecure origin, node): nothing to do", async () => {
  assert.equal(await removeCachedAccountData(undefined, "http://x"), 0);
  assert.equal(await removeCachedAccountData(null, "http://x"), 0);
});
