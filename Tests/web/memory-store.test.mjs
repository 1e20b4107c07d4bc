// Web/memory-store.js: the storage interface of the sync engine held in memory (and persisted to
// a file by Tests/web/support/file-store.mjs), as Web/db.js's LocalStore holds it in IndexedDB.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryStore } from "../../Web/memory-store.js";
import { newRecord, syncState, transition } from "../../Web/records.js";
import { openFileStore } from "./support/file-store.mjs";

const T = "2026-01-01T00:00:00.000Z";
const serverRecord = (id, fields, rev, deleted = false) => ({ collection: "notes", id, rev, seq: rev, deleted, fields, createdAt: T, updatedAt: T });
/** A `decide` for commit and storePage: what `transition` makes of a server state. */
const absorb = (record) => (current, buried) => transition(current ?? null, { type: "record", record, buried }, { now: 0, newID: () => "fork" });

test("update: writes, stamps, deletes, leaves; the outbox follows the marks", async () => {
  const store = new MemoryStore();
  const a = await store.update("a", () => newRecord("a", { title: "A" }));
  assert.equal(a.lv, 1);
  assert.equal(a.pend, 1);
  assert.deepEqual((await store.pendingRecords()).map((r) => r.id), ["a"]);
  assert.equal(await store.update("a", () => undefined), undefined);
  const synced = await store.update("a", (r) => ({ ...r, shadow: r.local, rev: 1, sync: null }));
  assert.equal(synced.lv, 2);
  assert.equal(synced.pend, undefined);
  assert.deepEqual(await store.pendingRecords(), []);
  assert.deepEqual(await store.keys(), ["a"]);
  assert.equal(await store.update("a", () => null), null);
  assert.deepEqual(await store.keys(), []);
  assert.equal(await store.get("a"), undefined);
});

test("records are copied in and out, as IndexedDB does", async () => {
  const store = new MemoryStore();
  const record = newRecord("a", { title: "A", tags: ["x"] });
  await store.update("a", () => record);
  record.local.tags.push("y");
  const read = await store.get("a");
  assert.deepEqual(read.local.tags, ["x"]);
  read.local.title = "changed";
  assert.equal((await store.get("a")).local.title, "A");
});

test("storePage: records and cursor together, only onto the cursor the page was pulled from", async () => {
  const store = new MemoryStore();
  const written = await store.storePage([["a", absorb(serverRecord("a", { title: "A" }, 1))]], 5, 0);
  assert.equal(written.get("a").lv, 1);
  assert.equal(await store.getMeta("cursor"), 5);
  await assert.rejects(store.storePage([["b", absorb(serverRecord("b", {}, 1))]], 9, 0), /did not follow the stored cursor/);
  assert.equal(await store.getMeta("cursor"), 5);
  assert.deepEqual(await store.keys(), ["a"]);
  // The same state again: nothing written, not even a new version number.
  assert.equal((await store.storePage([["a", absorb(serverRecord("a", { title: "A" }, 1))]], 6, 5)).size, 0);
  assert.equal((await store.get("a")).lv, 1);
  const again = await store.storePage([["a", absorb(serverRecord("a", {}, 2, true))]], 7, 6);
  assert.equal(again.get("a"), null);
  assert.deepEqual(await store.keys(), []);
});

test("commit: a purged record's id is buried, and a state of it never taken in again; a fork is added as a new record", async () => {
  const store = new MemoryStore();
  await store.storePage([["a", absorb(serverRecord("a", { title: "A", body: "x" }, 1))]], 1, 0);
  assert.deepEqual([...(await store.commit("a", absorb(serverRecord("a", {}, 2, true))))], [["a", null]]);
  assert.deepEqual([...store.tombstones], ["a"]);
  assert.equal((await store.commit("a", absorb(serverRecord("a", { title: "A again" }, 1)))).size, 0, "buried: not taken in");
  assert.deepEqual(await store.keys(), []);
  // Text edited here when the purge arrives: kept as a new note, in the same write.
  await store.storePage([["b", absorb(serverRecord("b", { title: "B", body: "theirs" }, 1))]], 2, 1);
  await store.update("b", (r) => ({ ...r, local: { ...r.local, body: "mine" }, sync: { edited: true } }));
  const written = await store.commit("b", absorb(serverRecord("b", {}, 2, true)));
  assert.equal(written.get("b"), null);
  assert.equal(written.get("fork").lv, 1, "stamped as a new record");
  assert.equal(written.get("fork").pend, 1, "in the outbox");
  assert.deepEqual(await store.keys(), ["fork"]);
});

test("a file store restarts with its records, tombstones, cursor and outbox", async () => {
  const dir = mkdtempSync(join(tmpdir(), "noted-store-"));
  try {
    const path = join(dir, "client.json");
    const first = openFileStore(path);
    await first.update("a", () => newRecord("a", { title: "unsent" }));
    await first.storePage([["b", absorb(serverRecord("b", {}, 3, true))]], 7, 0);
    await first.setMeta("device", "d1");
    const second = openFileStore(path); // the first "killed": only its file is left
    assert.equal(await second.getMeta("cursor"), 7);
    assert.equal(await second.getMeta("device"), "d1");
    assert.deepEqual([...second.tombstones], ["b"]);
    const outbox = await second.pendingRecords();
    assert.deepEqual(outbox.map((r) => [r.id, r.local.title, syncState(r).edited]), [["a", "unsent", true]]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
