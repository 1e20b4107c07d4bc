// Web/sync.js's protocol-2 pulls under node with a fake transport (as Tests/web/engine.test.mjs):
// hello says protocol 2; the personal space is pulled first, then one shared space at a time,
// only those whose seq in the welcome is past this device's cursor (a new one from 0, as a
// snapshot whose end drops only records of that space); a reconnect with nothing new pulls
// nothing; a `spaces` message pulls a space joined and drops one left; a broadcast names its
// space; a change of a shared space's record names it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LEFT_SPACE, SyncEngine, cursorKey } from "../../Web/sync.js";
import { MemoryStore } from "../../Web/memory-store.js";
import { newRecord, normalizeFields, refusalOf, spaceOf } from "../../Web/records.js";
import { VirtualClock } from "./support/virtual-clock.mjs";

const T = "2026-01-01T00:00:00.000Z";
const wire = (id, title, rev = 1) => ({ collection: "notes", id, rev, deleted: false, fields: { title, body: "" }, createdAt: T, updatedAt: T });
const space = (id, seq, role = "editor") => ({ id, name: id.toUpperCase(), personal: false, role, owner: "ann", members: 2, seq, createdAt: T });
const PERSONAL = { id: "me", name: "Personal", personal: true, role: "owner", owner: "me", members: 1, seq: 0, createdAt: T };

/** An engine on a fake transport, opened and said hello; `say`, `sent(type)` as engine.test.mjs's. */
async function opened(store) {
  const sockets = [];
  const transport = { connect() { const ws = { readyState: 0, sent: [], send(t) { this.sent.push(t); }, close() { this.readyState = 3; } }; sockets.push(ws); return ws; } };
  const clock = new VirtualClock();
  const engine = new SyncEngine({ store, auth: { accessToken: async () => "t", invalidateAccessToken() {}, refusedBecause() {} }, transport, clock, debounceMs: 0 });
  engine.start();
  await clock.advance(10);
  const ws = sockets[0];
  ws.readyState = 1;
  await ws.onopen();
  const sent = (type) => ws.sent.map((text) => JSON.parse(text)).filter((m) => m.type === type);
  return { engine, clock, sent, say: (message) => engine.onMessage(JSON.stringify(message)) };
}

test("protocol 2: the personal space first, then each shared space whose seq moved, one at a time; a reconnect with nothing new pulls nothing", async () => {
  const store = new MemoryStore();
  await store.setMeta(cursorKey("b"), 7); // b pulled to its latest before
  const s = await opened(store);
  try {
    assert.equal(s.sent("hello")[0].protocol, 2);
    await s.say({ type: "welcome", protocol: 2, seq: 3, spaces: [PERSONAL, space("a", 5), space("b", 7), space("c", 2, "viewer")] });
    let pulls = s.sent("pull");
    assert.deepEqual(pulls.map((p) => p.space ?? null), [null], "one pull at a time, the personal space first");
    await s.say({ type: "changes", rid: pulls[0].rid, records: [wire("p1", "Mine")], cursor: 3, more: false });
    pulls = s.sent("pull");
    assert.deepEqual(pulls.map((p) => [p.space ?? null, p.since, Boolean(p.snapshot)]), [[null, 0, true], ["a", 0, true]]);
    assert.equal(s.engine.ready, false, "not caught up before every space is pulled");
    await s.say({ type: "changes", rid: pulls[1].rid, space: "a", records: [wire("a1", "Shared")], cursor: 5, more: false });
    pulls = s.sent("pull");
    assert.deepEqual(pulls.slice(2).map((p) => [p.space, p.since]), [["c", 0]], "b's seq did not move: not pulled");
    await s.say({ type: "changes", rid: pulls[2].rid, space: "c", records: [wire("c1", "Read")], cursor: 2, more: false });
    assert.equal(s.engine.ready, true);
    assert.deepEqual([spaceOf(await store.get("p1")), spaceOf(await store.get("a1")), spaceOf(await store.get("c1"))], [null, "a", "c"]);
    assert.deepEqual([await store.getMeta("cursor"), await store.getMeta(cursorKey("a")), await store.getMeta(cursorKey("c"))], [3, 5, 2]);
    s.engine.dispose();

    // Again, nothing new: the personal space only (its pull is how the engine catches up).
    const again = await opened(store);
    try {
      await again.say({ type: "welcome", protocol: 2, seq: 3, spaces: [PERSONAL, space("a", 5), space("b", 7), space("c", 2)] });
      await again.say({ type: "changes", rid: again.sent("pull")[0].rid, records: [], cursor: 3, more: false });
      assert.deepEqual(again.sent("pull").map((p) => p.space ?? null), [null]);
      assert.equal(again.engine.ready, true);
      assert.ok(await store.get("a1"), "a personal pull drops no record of a shared space");
    } finally {
      again.engine.dispose();
    }
  } finally {
    s.engine.dispose();
  }
});

test("a spaces message pulls a space joined from 0 and drops one left, keeping an unsent edit refused; a broadcast names its space; a change names it", async () => {
  const store = new MemoryStore();
  const s = await opened(store);
  try {
    await s.say({ type: "welcome", protocol: 2, seq: 0, spaces: [PERSONAL, space("a", 1)] });
    await s.say({ type: "changes", rid: s.sent("pull")[0].rid, records: [], cursor: 0, more: false });
    await s.say({ type: "changes", rid: s.sent("pull")[1].rid, space: "a", records: [wire("a1", "One"), wire("a2", "Two"), wire("a3", "Three")], cursor: 1, more: false });
    assert.equal(s.engine.ready, true);

    // A broadcast of a new space's record, then the spaces message naming it: pulled from 0.
    await s.say({ type: "spaces", spaces: [PERSONAL, space("a", 1), space("n", 4)] });
    const pull = s.sent("pull").at(-1);
    assert.deepEqual([pull.space, pull.since, pull.snapshot], ["n", 0, true]);
    await s.say({ type: "changes", rid: pull.rid, space: "n", records: [wire("n1", "New")], cursor: 4, more: false });
    await s.say({ type: "change", space: "n", collection: "notes", id: "n2", rev: 1, prevRev: 0, seq: 5, op: "upsert", fields: { title: { set: "Heard" } }, updatedAt: T });
    assert.equal(spaceOf(await store.get("n2")), "n");

    // A change of a shared space's record names it.
    await store.update("a1", (r) => ({ ...r, local: normalizeFields({ ...r.local, body: "edited" }), sync: { edited: true } }));
    s.engine.schedulePush(0);
    await s.clock.advance(10);
    const change = s.sent("push").flatMap((p) => p.changes).find((c) => c.id === "a1");
    assert.equal(change.space, "a");
    const created = "x1";
    await store.update(created, () => ({ ...newRecord(created, { title: "Mine" }), space: "a" }));
    await store.update("a2", (r) => ({ ...r, local: normalizeFields({ ...r.local, body: "unsent" }), sync: { edited: true } }));

    // Left: a's synced records go; its unsent edits stay, refused; the one in flight waits for its answer.
    s.engine.ready = false; // held: nothing more is sent before the list
    await s.say({ type: "spaces", spaces: [PERSONAL, space("n", 5)] });
    assert.equal(await store.get("a2").then((r) => refusalOf(r).code), "read_only");
    assert.equal(await store.get(created).then((r) => refusalOf(r).code), "read_only");
    assert.ok(await store.get("a1"), "in flight: kept until its answer");
    assert.equal(await store.get("a3"), undefined, "synced: gone");
    assert.equal(await store.getMeta(cursorKey("a")), undefined);
    assert.ok(await store.get("n1"));
  } finally {
    s.engine.dispose();
  }
});

/** An engine caught up with the personal space and shared space "a" holding `records`. */
async function caughtUp(store, records = [wire("a1", "One"), wire("a2", "Two")]) {
  const s = await opened(store);
  await s.say({ type: "welcome", protocol: 2, seq: 0, spaces: [PERSONAL, space("a", 1)] });
  await s.say({ type: "changes", rid: s.sent("pull")[0].rid, records: [], cursor: 0, more: false });
  await s.say({ type: "changes", rid: s.sent("pull")[1].rid, space: "a", records, cursor: 1, more: false });
  assert.equal(s.engine.ready, true);
  return s;
}

const pushed = (s, id) => s.sent("push").flatMap((p) => p.changes).filter((c) => c.id === id);

test("a shared space's not_found keeps the edit refused (no tombstone, no fork, not resent), deletes a note being deleted; listed again, the edit goes", async () => {
  const store = new MemoryStore();
  const s = await caughtUp(store);
  try {
    await store.update("a1", (r) => ({ ...r, local: normalizeFields({ ...r.local, body: "mine" }), sync: { edited: true } }));
    await store.update("a2", (r) => ({ ...r, sync: { edited: true, purging: true } }));
    s.engine.schedulePush(0);
    await s.clock.advance(10);
    const [change] = pushed(s, "a1");
    const [purge] = pushed(s, "a2");
    assert.equal(purge.op, "delete");
    const keys = await store.keys();
    await s.say({ type: "reject", id: "a1", ccid: change.ccid, code: "not_found", message: "no such space" });
    await s.say({ type: "reject", id: "a2", ccid: purge.ccid, code: "not_found", message: "no such space" });
    const held = await store.get("a1");
    assert.deepEqual(refusalOf(held), { code: "read_only", message: LEFT_SPACE });
    assert.equal(held.local.body, "mine");
    assert.equal(await store.get("a2"), undefined, "a delete refused not_found: done here");
    assert.deepEqual(await store.keys(), keys.filter((id) => id !== "a2"), "no note forked");
    assert.equal(store.tombstones.has("a1"), false, "not buried");
    await s.clock.advance(5000);
    assert.equal(pushed(s, "a1").length, 1, "not sent again");

    // Listed again (the `spaces` message): the edit goes out.
    await s.say({ type: "spaces", spaces: [PERSONAL, space("a", 2)] });
    assert.equal(refusalOf(await store.get("a1")), null);
    s.engine.schedulePush(0);
    await s.clock.advance(10);
    assert.equal(pushed(s, "a1").length, 2, "sent again once back in the space");
  } finally {
    s.engine.dispose();
  }
});

test("a personal note's not_found is still a purge (the shared vectors' rule)", async () => {
  const store = new MemoryStore();
  const s = await caughtUp(store);
  try {
    await s.say({ type: "change", collection: "notes", id: "p1", rev: 1, prevRev: 0, seq: 1, op: "upsert", fields: { title: { set: "P" } }, updatedAt: T });
    await store.update("p1", (r) => ({ ...r, local: normalizeFields({ ...r.local, title: "P", body: "text" }), sync: { edited: true } }));
    s.engine.schedulePush(0);
    await s.clock.advance(10);
    const [change] = pushed(s, "p1");
    await s.say({ type: "reject", id: "p1", ccid: change.ccid, code: "not_found", message: "purged" });
    assert.equal(await store.get("p1"), undefined);
    assert.equal(store.tombstones.has("p1"), true);
  } finally {
    s.engine.dispose();
  }
});

test("a change in flight for a space left is sent again on the next connection, and its not_found settles it", async () => {
  const store = new MemoryStore();
  const s = await caughtUp(store);
  let again;
  try {
    await store.update("a1", (r) => ({ ...r, local: normalizeFields({ ...r.local, body: "mine" }), sync: { edited: true } }));
    s.engine.schedulePush(0);
    await s.clock.advance(10);
    const [change] = pushed(s, "a1");
    s.engine.dispose(); // the connection lost before the answer
    again = await opened(store);
    await again.say({ type: "welcome", protocol: 2, seq: 0, spaces: [PERSONAL] });
    await again.say({ type: "changes", rid: again.sent("pull")[0].rid, records: [], cursor: 0, more: false });
    assert.equal(again.engine.ready, true);
    await again.clock.advance(10);
    const resent = pushed(again, "a1");
    assert.equal(resent.length, 1, "in flight: sent again whatever its space");
    assert.equal(resent[0].ccid, change.ccid);
    await again.say({ type: "reject", id: "a1", ccid: change.ccid, code: "not_found", message: "not a member" });
    assert.deepEqual(refusalOf(await store.get("a1")), { code: "read_only", message: LEFT_SPACE });
  } finally {
    s.engine.dispose();
    again?.engine.dispose();
  }
});

test("a note of a space not listed yet (created or joined just now) is sent, not refused; a list without the personal space is ignored", async () => {
  const store = new MemoryStore();
  const s = await caughtUp(store);
  try {
    await store.update("n1", () => ({ ...newRecord("n1", { title: "New space's" }), space: "new" }));
    s.engine.schedulePush(0);
    await s.clock.advance(10);
    assert.equal(refusalOf(await store.get("n1")), null);
    assert.equal(pushed(s, "n1")[0].space, "new");

    await s.say({ type: "spaces", spaces: [space("b", 1)] });
    assert.ok(s.engine.spaces.has("a"), "a list without the personal space is not taken");
    assert.ok(await store.get("a1"));
  } finally {
    s.engine.dispose();
  }
});

test("a failed personal-space pull ends the catch-up; so does a page ahead refused while its page before is stored", async () => {
  const store = new MemoryStore();
  const s = await opened(store);
  try {
    await s.say({ type: "welcome", protocol: 2, seq: 3, spaces: [PERSONAL, space("a", 4)] });
    await s.say({ type: "error", rid: s.sent("pull")[0].rid, code: "internal", message: "try later" });
    let pulls = s.sent("pull");
    assert.equal(pulls.at(-1).space, "a", "the next space queued is pulled");
    // A page with more: the next one is asked at once; its error comes while the page is stored.
    const page = s.say({ type: "changes", rid: pulls[1].rid, space: "a", records: [wire("a1", "One")], cursor: 2, more: true });
    pulls = s.sent("pull");
    await s.say({ type: "error", rid: pulls.at(-1).rid, code: "internal", message: "try later" });
    await page;
    assert.equal(s.engine.ready, true, "caught up: pushes are not held for ever");
    assert.ok(await store.get("a1"));
  } finally {
    s.engine.dispose();
  }
});

test("a page of a space the spaces message removed is not stored, nor its cursor kept; every unlisted cursor goes", async () => {
  const store = new MemoryStore();
  await store.setMeta(cursorKey("old"), 9);
  await store.setMeta("snapshot:old", true);
  const s = await opened(store);
  try {
    await s.say({ type: "welcome", protocol: 2, seq: 0, spaces: [PERSONAL, space("a", 3)] });
    assert.equal(await store.getMeta(cursorKey("old")), undefined);
    assert.equal(await store.getMeta("snapshot:old"), undefined);
    await s.say({ type: "changes", rid: s.sent("pull")[0].rid, records: [], cursor: 0, more: false });
    const pull = s.sent("pull").at(-1);
    assert.equal(pull.space, "a");
    await s.say({ type: "spaces", spaces: [PERSONAL] });
    await s.say({ type: "changes", rid: pull.rid, space: "a", records: [wire("a1", "One")], cursor: 3, more: false });
    assert.equal(await store.get("a1"), undefined, "not stored");
    assert.equal(await store.getMeta(cursorKey("a")), undefined, "no cursor kept");
    assert.equal(s.engine.ready, true);

    // Removed while the page is being stored: checked again after it.
    await s.say({ type: "spaces", spaces: [PERSONAL, space("b", 2)] });
    const pullB = s.sent("pull").at(-1);
    assert.equal(pullB.space, "b");
    const page = s.say({ type: "changes", rid: pullB.rid, space: "b", records: [wire("b1", "Bee")], cursor: 2, more: false });
    await s.say({ type: "spaces", spaces: [PERSONAL] });
    await page;
    assert.equal(await store.getMeta(cursorKey("b")), undefined, "no cursor kept");
    assert.equal(await store.get("b1"), undefined, "its records leave");
  } finally {
    s.engine.dispose();
  }
});
