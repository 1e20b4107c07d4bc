// Web/memory-store.js: the storage interface of the sync engine held in memory (and persisted to
// a file by Tests/web/support/file-store.mjs), as Web/db.js's LocalStore holds it in IndexedDB.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MemoryStore } from "../../Web/memory-store.js";
import { newRecord, replacement } from "../../Web/records.js";
import { openFileStore } from "./support/file-store.mjs";

test("update: writes, stamps, deletes, leaves; the outbox follows the marks", async () => {
  const store = new MemoryStore();
  const a = await store.update("a", () => newRecord("a", { title: "A" }));
  assert.equal(a.lv, 1);
  assert.equal(a.pend, 1);
  assert.deepEqual((await store.pendingRecords()).map((r) => r.id), ["a"]);
  assert.equal(await store.update("a", () => undefined), undefined);
  const synced = await store.update("a", (r) => ({ ...r, dirty: false, shadow: { fields: r.local, rev: 1 } }));
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
  const page = [["a", () => ({ ...newRecord("a", { title: "A" }), dirty: false, shadow: { fields: { title: "A" }, rev: 1 } })]];
  const written = await store.storePage(page, 5, 0);
  assert.equal(written.get("a").lv, 1);
  assert.equal(await store.getMeta("cursor"), 5);
  await assert.rejects(store.storePage([["b", () => newRecord("b", {})]], 9, 0), /did not follow the stored cursor/);
  assert.equal(await store.getMeta("cursor"), 5);
  assert.deepEqual(await store.keys(), ["a"]);
  const again = await store.storePage([["a", () => null]], 6, 5);
  assert.equal(again.get("a"), null);
  assert.deepEqual(await store.keys(), []);
});

test("a replacement deletes the record and adds the new one in the same write (update and storePage)", async () => {
  const store = new MemoryStore();
  await store.update("a", () => ({ ...newRecord("a", { title: "A" }), lv: 4 }));
  assert.equal(await store.update("a", () => replacement(newRecord("b", { title: "A" }))), null);
  assert.deepEqual(await store.keys(), ["b"]);
  const b = await store.get("b");
  assert.equal(b.lv, 1, "stamped as a new record");
  assert.equal(b.pend, 1, "in the outbox");
  const written = await store.storePage([["b", () => replacement(newRecord("c", { title: "A" }))]], 2, 0);
  assert.equal(written.get("b"), null);
  assert.equal(written.get("c").lv, 1);
  assert.deepEqual(await store.keys(), ["c"]);
  assert.equal(await store.getMeta("cursor"), 2);
});

test("a file store restarts with its records, cursor and outbox", async () => {
  const dir = mkdtempSync(join(tmpdir(), "noted-store-"));
  try {
    const path = join(dir, "client.json");
    const first = openFileStore(path);
    await first.update("a", () => newRecord("a", { title: "unsent" }));
    await first.setMeta("cursor", 7);
    await first.setMeta("device", "d1");
    const second = openFileStore(path); // the first "killed": only its file is left
    assert.equal(await second.getMeta("cursor"), 7);
    assert.equal(await second.getMeta("device"), "d1");
    const outbox = await second.pendingRecords();
    assert.deepEqual(outbox.map((r) => [r.id, r.local.title, r.dirty]), [["a", "unsent", true]]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
