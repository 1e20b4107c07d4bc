// Records of the web app's previous stored form (IndexedDB version 3, and the node stores' files
// written then) taken into the Swift client's stored form (Web/records.js's `fromVersion3`, run
// by Web/db.js's upgrade to version 4 and by Web/memory-store.js's `MemoryStore.from`): nothing
// is lost, pending edits included, and they sync. The upgrade of a real IndexedDB database is
// checked in Chromium by Tests/peers/test_webapp_offline.py
// (test_a_version_3_database_with_pending_edits_upgrades_and_syncs).
// NOTED_SERVER_BIN: the server the last test syncs with (skipped with a notice without it).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromVersion3, isUnsynced, normalizeFields, refusalOf, syncState } from "../../Web/records.js";
import { MemoryStore } from "../../Web/memory-store.js";
import { editDelta, uuid } from "../../Web/text.js";
import { openFileStore } from "./support/file-store.mjs";
import { Client, createAccount, heal, serverNotes, signIn, startServer } from "./support/live.mjs";

const T1 = "2026-01-01T00:00:00.000Z";
const T2 = "2026-01-02T00:00:00.000Z";
const ms = Date.parse;

/** A version-3 record: its fields, the server's (`shadow`: { fields, rev } or null) and its marks. */
const v3 = (id, local, shadow, marks = {}) => ({
  id, collection: "notes", local: normalizeFields(local), shadow: shadow && { fields: normalizeFields(shadow.fields), rev: shadow.rev },
  dirty: false, inflight: null, purged: false, createdAt: T1, updatedAt: T2, lv: 4, pend: 1, ...marks,
});

test("fromVersion3: a synced note, an unsent edit and a note never sent keep their fields, revision, dates and outbox state", () => {
  const synced = fromVersion3(v3("s", { title: "S", body: "b" }, { fields: { title: "S", body: "b" }, rev: 3 }, { pend: undefined }));
  assert.deepEqual(synced, {
    id: "s", collection: "notes", local: normalizeFields({ title: "S", body: "b" }), shadow: normalizeFields({ title: "S", body: "b" }),
    rev: 3, createdAt: ms(T1), updatedAt: ms(T2), sync: null, lv: 4,
  });
  const edited = fromVersion3(v3("e", { title: "E", body: "mine" }, { fields: { title: "E", body: "theirs" }, rev: 2 }, { dirty: true }));
  assert.equal(edited.local.body, "mine");
  assert.equal(edited.shadow.body, "theirs");
  assert.equal(edited.rev, 2);
  assert.deepEqual(edited.sync, { edited: true });
  const created = fromVersion3(v3("c", { title: "New" }, null, { dirty: true }));
  assert.deepEqual([created.shadow, created.rev, created.sync], [null, 0, { edited: true }]);
});

test("fromVersion3: a change in flight stays in flight, resent byte for byte, with the newer state seen meanwhile and the snapshot it was absent from", () => {
  const change = { ccid: "c-1", collection: "notes", id: "f", baseRev: 2, op: "upsert", fields: { body: { delta: "=5\t+%20more" } } };
  const local = { title: "F", body: "text more" };
  const old = v3("f", local, { fields: { title: "F", body: "text" }, rev: 2 }, {
    dirty: true, inflight: { ccid: "c-1", baseRev: 2, change, sent: normalizeFields(local), absentAtSeq: 40 },
    stash: { fields: normalizeFields({ title: "F2", body: "text" }), rev: 5, updatedAt: T2 },
  });
  const state = syncState(fromVersion3(old));
  assert.equal(state.edited, true, "edited again after the send");
  assert.deepEqual(state.inflight, {
    ccid: "c-1", baseRev: 2, body: JSON.stringify(change), sent: normalizeFields(local),
    newest: { fields: normalizeFields({ title: "F2", body: "text" }), rev: 5, updatedAt: ms(T2) }, absentAtSeq: 40,
  });
  // A purge in flight, and a purge stashed: `sent` and `fields` null.
  const purge = v3("p", local, { fields: local, rev: 2 }, {
    purged: true, inflight: { ccid: "c-2", baseRev: 2, change: { ccid: "c-2", collection: "notes", id: "p", baseRev: 2, op: "delete" }, sent: normalizeFields(local) },
    stash: { deleted: true, rev: 3 },
  });
  const purging = syncState(fromVersion3(purge));
  assert.equal(purging.purging, true);
  assert.equal(purging.inflight.sent, null);
  assert.deepEqual(purging.inflight.newest, { fields: null, rev: 3, updatedAt: ms(T2) });
});

test("fromVersion3: refusals (both older forms), stale sets and purges to send are kept; a purge the server took is dropped", () => {
  const refused = fromVersion3(v3("r", { title: "R", folder: "bad" }, { fields: { title: "R" }, rev: 1 }, { refusal: { code: "invalid_field", message: "no" } }));
  assert.deepEqual(refusalOf(refused), { code: "invalid_field", message: "no" });
  assert.ok(isUnsynced(refused));
  const older = fromVersion3(v3("o", { title: "O", folder: "bad" }, { fields: { title: "O" }, rev: 1 }, { refused: "too_large", pend: undefined }));
  assert.deepEqual(refusalOf(older), { code: "too_large", message: "" });
  const olderSynced = fromVersion3(v3("q", { title: "Q" }, { fields: { title: "Q" }, rev: 1 }, { refused: "too_large", pend: undefined }));
  assert.equal(olderSynced.sync, null, "its text is the server's: nothing held");
  const stale = fromVersion3(v3("t", { body: "mine" }, { fields: { body: "merged" }, rev: 4 }, { dirty: true, forceSet: true, staleBase: 2 }));
  assert.deepEqual(stale.sync, { edited: true, next: { set: 2 } });
  const resend = fromVersion3(v3("u", { body: "mine" }, { fields: { body: "x" }, rev: 4 }, { dirty: true, forceSet: true, staleBase: null }));
  assert.deepEqual(resend.sync, { edited: true, next: { set: null } });
  const purge = fromVersion3(v3("p", { title: "P" }, { fields: { title: "P" }, rev: 2 }, { purged: true, dirty: true }));
  assert.deepEqual(purge.sync, { edited: true, purging: true });
  assert.equal(fromVersion3(v3("l", { title: "L" }, null, { purged: true, pend: undefined })), null, "a leftover of a version before");
  assert.equal(fromVersion3(refused), refused, "a record in the stored form is left as it is");
});

test("MemoryStore.from takes a version-3 state (a node store's file) into the stored form, its outbox marks recomputed", async () => {
  const store = MemoryStore.from({
    records: [
      v3("e", { title: "E", body: "mine" }, { fields: { title: "E", body: "theirs" }, rev: 2 }, { dirty: true }),
      v3("s", { title: "S" }, { fields: { title: "S" }, rev: 1 }, { pend: undefined }),
      v3("l", { title: "L" }, null, { purged: true, pend: undefined }),
    ],
    meta: { cursor: 9, device: "d" },
  });
  assert.deepEqual(await store.keys(), ["e", "s"]);
  assert.deepEqual((await store.pendingRecords()).map((r) => r.id), ["e"]);
  assert.equal((await store.get("e")).rev, 2);
  assert.equal(await store.getMeta("cursor"), 9);
});

const BIN = process.env.NOTED_SERVER_BIN;
const skip = !BIN ? "NOTED_SERVER_BIN is not set" : typeof WebSocket === "undefined" ? "no global WebSocket (node 20: --experimental-websocket)" : false;
if (skip) console.log(`upgrade.test.mjs: NOTICE: the live test is skipped: ${skip}`);
let server = null;
before(async () => {
  if (!skip) server = await startServer(BIN);
});
after(async () => {
  if (server) await server.stop();
});

test("a client restarted on a version-3 file with pending edits (unsent, in flight, created, purged, refused) syncs them all, losing nothing", { skip, timeout: 60000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "noted-web-upgrade-"));
  const username = `upgrade${process.pid}`;
  await createAccount(server.base, username);
  const token = await signIn(server.base, username);
  const a = new Client("A", server.base, await signIn(server.base, username));
  let b = null;
  try {
    // Notes on the server, made by a client of today.
    a.start();
    const ids = {};
    for (const name of ["synced", "edited", "inflight", "purged", "refused"]) ids[name] = await a.create({ title: name, body: "server text" });
    const healed = await heal([a], server.base, token);
    assert.deepEqual(healed.differences, []);
    let held = healed.server;
    // The file a version-3 node client left: each note as the old engine stored it.
    const at = (id) => ({ fields: held.get(id).fields, rev: held.get(id).rev });
    const text = (id, body) => normalizeFields({ ...held.get(id).fields, body });
    const created = uuid();
    const inflight = text(ids.inflight, "server text + sent, never answered");
    const change = {
      ccid: uuid(), collection: "notes", id: ids.inflight, baseRev: at(ids.inflight).rev, op: "upsert",
      fields: { body: { delta: editDelta("server text", inflight.body) } },
    };
    const records = [
      v3(ids.synced, at(ids.synced).fields, at(ids.synced), { pend: undefined }),
      v3(ids.edited, text(ids.edited, "server text + edited offline"), at(ids.edited), { dirty: true }),
      v3(ids.inflight, inflight, at(ids.inflight), { inflight: { ccid: change.ccid, baseRev: change.baseRev, change, sent: inflight } }),
      v3(ids.purged, at(ids.purged).fields, at(ids.purged), { purged: true, dirty: true }),
      v3(ids.refused, text(ids.refused, "refused here"), at(ids.refused), { refusal: { code: "invalid_field", message: "(test)" } }),
      v3(created, { title: "created offline", body: "typed offline" }, null, { dirty: true }),
    ];
    const path = join(dir, "B.json");
    writeFileSync(path, JSON.stringify({ records, meta: { cursor: (await serverCursor(token)), device: uuid() } }));
    b = new Client("B", server.base, await signIn(server.base, username), { store: openFileStore(path) });
    b.start();
    // Everything but the refused edit reaches the server; the refused one stays here, held.
    const until = Date.now() + 20000;
    for (;;) {
      held = await serverNotes(server.base, token);
      const done = held.get(ids.edited)?.fields.body === "server text + edited offline"
        && held.get(ids.inflight)?.fields.body === "server text + sent, never answered"
        && held.get(created)?.fields.body === "typed offline" && !held.has(ids.purged);
      if (done) break;
      assert.ok(Date.now() < until, `the version-3 outbox did not reach the server: ${await b.describe()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal(held.get(ids.synced).fields.body, "server text");
    assert.equal(held.get(ids.refused).fields.body, "server text", "a refused edit is not sent");
    const kept = await b.store.get(ids.refused);
    assert.equal(kept.local.body, "refused here");
    assert.deepEqual(refusalOf(kept), { code: "invalid_field", message: "(test)" });
    assert.equal(held.size, 5, "nothing lost, nothing doubled");
    assert.deepEqual(b.errors, []);
  } finally {
    a.dispose();
    if (b) b.dispose();
    rmSync(dir, { recursive: true, force: true });
  }

  /** The server's latest seq for the account (what a version-3 client had pulled to). */
  async function serverCursor(bearer) {
    const res = await fetch(new URL("/v1/changes?since=0&limit=1000", server.base), { headers: { Authorization: `Bearer ${bearer}` } });
    return (await res.json()).cursor;
  }
});
