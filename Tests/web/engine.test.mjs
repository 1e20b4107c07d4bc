// Web/sync.js's SyncEngine under node with a fake transport and Web/memory-store.js: the engine
// needs no IndexedDB, DOM or WebSocket (docs/reliability.md, "The engine outside the page").
// Its timers run on a virtual clock: a test moves time on (`clock.advance`) instead of sleeping.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SyncEngine } from "../../Web/sync.js";
import { MemoryStore } from "../../Web/memory-store.js";
import { isUnsynced, newRecord, normalizeFields, refusalOf, syncState, withEdit, withPurge } from "../../Web/records.js";
import { VirtualClock } from "./support/virtual-clock.mjs";

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

/** An auth whose token takes 100 ms of `clock`'s time to come. */
const slowAuth = (clock) => ({ accessToken: () => clock.wait(100).then(() => "token"), invalidateAccessToken() {}, refusedBecause() {} });

test("kicks while the token is fetched open one connection, not one each", async () => {
  const transport = fakeTransport();
  const clock = new VirtualClock();
  const engine = new SyncEngine({ store: new MemoryStore(), auth: slowAuth(clock), transport, clock });
  try {
    engine.start();
    engine.schedulePush(0); // an edit while connecting kicks too
    engine.kick();
    await clock.advance(250);
    assert.equal(transport.sockets.length, 1);
    assert.equal(engine.state, "connecting");
  } finally {
    engine.dispose();
  }
});

test("a stop while the token is fetched opens no connection", async () => {
  const transport = fakeTransport();
  const clock = new VirtualClock();
  const engine = new SyncEngine({ store: new MemoryStore(), auth: slowAuth(clock), transport, clock });
  engine.start();
  engine.dispose();
  await clock.advance(250);
  assert.equal(transport.sockets.length, 0);
  assert.equal(engine.state, "offline");
});

test("on open the engine says hello with the token and its stored device id", async () => {
  const transport = fakeTransport();
  const store = new MemoryStore();
  const clock = new VirtualClock();
  const engine = new SyncEngine({ store, auth: { ...slowAuth(clock), accessToken: async () => "t1" }, transport, clock });
  try {
    engine.start();
    await clock.advance(20);
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

/**
 * An engine on a fake transport, welcomed and caught up (an empty pull), its pushes sent at once.
 * `say(message)` hands it a server message; `pushes()` the changes it pushed, each with its
 * push's `rid`; `sent(type)` the messages of a type it sent; `errors` what it reported;
 * `records` the details of its "records" events; `clock` the virtual clock of its timers.
 */
async function connected(store = new MemoryStore()) {
  const transport = fakeTransport();
  const clock = new VirtualClock();
  const engine = new SyncEngine({ store, auth: { ...slowAuth(clock), accessToken: async () => "t" }, transport, clock, debounceMs: 0 });
  const errors = [];
  engine.addEventListener("error", (event) => errors.push(event.detail.message));
  engine.start();
  await clock.advance(10);
  const ws = transport.sockets[0];
  ws.readyState = 1;
  await ws.onopen();
  const sent = (type) => ws.sent.map((text) => JSON.parse(text)).filter((m) => m.type === type);
  const records = [];
  engine.addEventListener("records", (event) => records.push(event.detail));
  const s = {
    engine, store, errors, records, sent, clock,
    say: (message) => engine.onMessage(JSON.stringify(message)),
    pushes: () => sent("push").flatMap((push) => push.changes.map((change) => ({ ...change, rid: push.rid }))),
  };
  await s.say({ type: "welcome", seq: 0 });
  await s.say({ type: "changes", rid: sent("pull")[0].rid, records: [], cursor: 0, more: false });
  assert.ok(engine.ready);
  return s;
}

/** The server's answers to a pushed change. */
const reject = (change, code) => ({ type: "reject", rid: change.rid, ccid: change.ccid, collection: "notes", id: change.id, code, message: `${code} (test)` });
const ack = (change, rev) => ({ type: "ack", rid: change.rid, ccid: change.ccid, collection: "notes", id: change.id, rev, seq: rev });

/** A note the server holds at rev 1, synced. */
const synced = (id, fields) => ({ ...newRecord(id, fields), shadow: normalizeFields(fields), rev: 1, sync: null });

/** A local edit as Web/app.js writes it: the new fields, to be sent, any refusal over. */
const edit = (store, id, fields) => store.update(id, (r) => withEdit(r, { ...r.local, ...normalizeFields({ ...r.local, ...fields }) }));

/** A purge as Web/app.js writes it. */
const purge = (store, id) => store.update(id, (r) => withPurge(r));

/** A local write, then a push: what the page does after an edit. */
async function pushAfter(s, write) {
  await write();
  s.engine.schedulePush(0);
  await s.clock.advance(30);
}

test("a change refused for good after edits made since its send: those edits go out, not a refusal", async () => {
  const s = await connected();
  try {
    await pushAfter(s, () => s.store.update("a", () => newRecord("a", { title: "Mood", folder: "bad" })));
    const [first] = s.pushes();
    await edit(s.store, "a", { folder: "good" }); // the user's correction, before the refusal came
    await s.say(reject(first, "invalid_field"));
    await s.clock.advance(30);
    const second = s.pushes().at(-1);
    assert.notEqual(second.ccid, first.ccid, "the correction is sent");
    assert.deepEqual(second.fields.folder, { set: "good" });
    assert.ok(!refusalOf(await s.store.get("a")), "not refused");
    assert.deepEqual(s.errors, []);
    await s.say(ack(second, 1));
    const done = await s.store.get("a");
    assert.equal(isUnsynced(done), false);
    assert.equal(done.local.folder, "good");
  } finally {
    s.engine.dispose();
  }
});

test("edits made since the send that still carry what was refused are refused in turn, then held", async () => {
  const s = await connected();
  try {
    await pushAfter(s, () => s.store.update("a", () => newRecord("a", { title: "Mood", folder: "bad" })));
    const [first] = s.pushes();
    await edit(s.store, "a", { title: "Mood, later" });
    await s.say(reject(first, "invalid_field"));
    await s.clock.advance(30);
    const second = s.pushes().at(-1);
    assert.notEqual(second.ccid, first.ccid);
    assert.deepEqual(second.fields.folder, { set: "bad" });
    await s.say(reject(second, "invalid_field"));
    await s.clock.advance(30);
    const held = await s.store.get("a");
    assert.equal(refusalOf(held).code, "invalid_field");
    assert.equal(syncState(held).edited, false);
    assert.equal(held.local.title, "Mood, later");
    assert.ok(isUnsynced(held), "kept as this device's refused version");
    assert.equal(s.pushes().length, 2, "not sent again until edited");
    assert.equal(s.errors.length, 1);
  } finally {
    s.engine.dispose();
  }
});

test("a purge made while a change was in flight goes out when that change is refused (not listed as refused)", async () => {
  const s = await connected();
  try {
    await s.store.update("a", () => synced("a", { title: "A" }));
    await pushAfter(s, () => edit(s.store, "a", { folder: "bad" }));
    const [first] = s.pushes();
    await purge(s.store, "a");
    await s.say(reject(first, "invalid_field"));
    await s.clock.advance(30);
    assert.ok(!refusalOf(await s.store.get("a")), "not refused");
    const second = s.pushes().at(-1);
    assert.equal(second.op, "delete");
    assert.equal(second.baseRev, 1);
    await s.say(ack(second, 2));
    assert.equal(await s.store.get("a"), undefined);
    assert.deepEqual(s.store.unsynced(), []);
  } finally {
    s.engine.dispose();
  }
});

test("missing_blob for a file nobody has, removed from the note since the send: the note goes without it", async () => {
  const s = await connected();
  s.engine.blobs = { blocking: async () => [], missing: async (shas) => shas }; // this browser lacks every file
  const file = `${"a".repeat(64)} 3 text/plain f.txt`;
  try {
    await pushAfter(s, () => s.store.update("a", () => newRecord("a", { title: "A", attachments: [file] })));
    const [first] = s.pushes();
    assert.deepEqual(first.fields.attachments, { set: [file] });
    await edit(s.store, "a", { attachments: [] });
    await s.say(reject(first, "missing_blob"));
    await s.clock.advance(30);
    assert.ok(!refusalOf(await s.store.get("a")), "not refused");
    const second = s.pushes().at(-1);
    assert.notEqual(second.ccid, first.ccid);
    assert.equal(second.fields.attachments, undefined);
    assert.deepEqual(s.errors, []);
  } finally {
    s.engine.dispose();
  }
});

test("text kept as a new note after `gone` (purged elsewhere) is pushed at once, with no further edit", async () => {
  const s = await connected();
  try {
    await s.store.update("a", () => synced("a", { title: "A", body: "theirs" }));
    await pushAfter(s, () => edit(s.store, "a", { body: "mine" }));
    const [first] = s.pushes();
    await s.say({ ...reject(first, "gone"), current: { collection: "notes", id: "a", rev: 2, deleted: true, fields: {} } });
    await s.clock.advance(30);
    assert.equal(await s.store.get("a"), undefined);
    const [fork] = await s.store.keys();
    assert.notEqual(fork, undefined);
    const change = s.pushes().at(-1);
    assert.equal(change.id, fork, "the new note is sent");
    assert.equal(change.baseRev, 0);
    assert.deepEqual(change.fields.body, { set: "mine" });
  } finally {
    s.engine.dispose();
  }
});

test("a purge of a note whose create is refused after the purge was made: the note goes, nothing left", async () => {
  const s = await connected();
  try {
    await pushAfter(s, () => s.store.update("a", () => newRecord("a", { title: "A", folder: "bad" })));
    const [create] = s.pushes();
    await purge(s.store, "a"); // Web/app.js's purge of a note in flight
    await s.say(reject(create, "invalid_field"));
    await s.clock.advance(30);
    assert.deepEqual(await s.store.keys(), [], "not kept, purged and unsent, for ever");
    assert.equal(s.pushes().length, 1);
    assert.ok(s.records.some((r) => r.ids.includes("a") && !r.moved.length), "the page hears it is gone");
  } finally {
    s.engine.dispose();
  }
});

// Purged elsewhere: the Swift client's `removeOrFork` (docs/protocol.md, "What NotedClient does
// where the contract leaves a client a choice"). A note purged on the server is removed here,
// unless it holds text edited here that the server never acknowledged: that text is kept as a
// new note (a new id), which is sent. A pin, a tag, the trash or a folder brings nothing back; a
// note the user was purging is removed.

/** A purge on the server (rev `rev`) as a broadcast, a pulled record and a `gone`'s `current`. */
const purgeBroadcast = (id, rev) => ({ type: "change", collection: "notes", id, rev, prevRev: rev - 1, seq: rev + 10, op: "delete", fields: {}, updatedAt: "2026-01-01T00:00:00.000Z" });
const tombstone = (id, rev) => ({ collection: "notes", id, rev, seq: rev + 10, deleted: true, fields: {}, createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-01T00:00:00.000Z" });

/** A pull from the stored cursor (`from`) answered by one last page holding `records`. */
async function pulled(s, records, from = 3) {
  await s.store.setMeta("cursor", from);
  await s.engine.pull();
  const { rid, since } = s.sent("pull").at(-1);
  assert.equal(since, from);
  await s.say({ type: "changes", rid, records, cursor: from + 20, more: false });
}

/** The engine idle (the push its catch-up scheduled has run): a write now stays unsent until a push. */
const idle = (s) => s.clock.advance(20);

/** What the store holds once the engine pushed whatever it would: ids, and the changes pushed since `before`. */
async function settled(s, before) {
  s.engine.schedulePush(0);
  await s.clock.advance(30);
  return { ids: await s.store.keys(), pushed: s.pushes().slice(before) };
}

test("a purge of ours crossing another device's: `gone` removes the note, no new note", async () => {
  const s = await connected();
  try {
    await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
    await pushAfter(s, () => purge(s.store, "a"));
    const [del] = s.pushes();
    assert.equal(del.op, "delete");
    await s.say({ ...reject(del, "gone"), current: tombstone("a", 2) });
    const { ids, pushed } = await settled(s, 1);
    assert.deepEqual(ids, [], "nothing brought back");
    assert.deepEqual(pushed, []);
  } finally {
    s.engine.dispose();
  }
});

test("`gone` after edits that changed no text (pin, tags, trash, folder): the note is removed, not brought back", async () => {
  const s = await connected();
  try {
    await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
    await pushAfter(s, () => edit(s.store, "a", { pinned: true, tags: ["x"], trashed: true, folder: "f" }));
    const [first] = s.pushes();
    await s.say({ ...reject(first, "gone"), current: tombstone("a", 2) });
    const { ids, pushed } = await settled(s, 1);
    assert.deepEqual(ids, []);
    assert.deepEqual(pushed, []);
  } finally {
    s.engine.dispose();
  }
});

test("a purge here not yet sent, then the purge from another device (broadcast or page): removed, nothing left", async () => {
  for (const arrives of ["broadcast", "page"]) {
    const s = await connected();
    try {
      await idle(s);
      await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
      await purge(s.store, "a");
      if (arrives === "broadcast") await s.say(purgeBroadcast("a", 2));
      else await pulled(s, [tombstone("a", 2)]);
      const { ids, pushed } = await settled(s, 0);
      assert.deepEqual(ids, [], `${arrives}: no leftover record`);
      assert.deepEqual(pushed, [], arrives);
      assert.deepEqual(s.store.unsynced(), []);
    } finally {
      s.engine.dispose();
    }
  }
});

test("unsent text edits when the purge arrives: the text is sent as a new note, never under the purged id", async () => {
  for (const arrives of ["broadcast", "page"]) {
    const s = await connected();
    try {
      await idle(s);
      await s.store.update("a", () => synced("a", { title: "A", body: "theirs" }));
      await edit(s.store, "a", { body: "mine", pinned: true });
      if (arrives === "broadcast") await s.say(purgeBroadcast("a", 2));
      else await pulled(s, [tombstone("a", 2)]);
      assert.equal(await s.store.get("a"), undefined, `${arrives}: the purged id is gone`);
      const [fork] = await s.store.keys();
      assert.ok(fork && fork !== "a", arrives);
      const kept = await s.store.get(fork);
      assert.equal(kept.local.body, "mine");
      assert.equal(kept.local.pinned, true, "the rest of the note goes with its text");
      assert.deepEqual(s.records.at(-1).moved, [{ from: "a", to: fork }], "an editor showing it follows its text");
      assert.ok(s.records.at(-1).ids.includes(fork));
      await s.clock.advance(30); // no further edit: the new note goes at once
      const pushed = s.pushes();
      assert.deepEqual(pushed.map((c) => [c.id, c.baseRev]), [[fork, 0]], `${arrives}: only the new note is sent`);
      assert.deepEqual(pushed[0].fields.body, { set: "mine" });
    } finally {
      s.engine.dispose();
    }
  }
});

test("unsent edits that changed no text when the purge arrives: removed, nothing sent (a pin brings no copy back)", async () => {
  for (const arrives of ["broadcast", "page"]) {
    const s = await connected();
    try {
      await idle(s);
      await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
      await edit(s.store, "a", { pinned: true, tags: ["x"] });
      if (arrives === "broadcast") await s.say(purgeBroadcast("a", 2));
      else await pulled(s, [tombstone("a", 2)]);
      const { ids, pushed } = await settled(s, 0);
      assert.deepEqual(ids, [], arrives);
      assert.deepEqual(pushed, [], `${arrives}: the purged id is not created again`);
    } finally {
      s.engine.dispose();
    }
  }
});

test("a refused note purged elsewhere: its edited text is sent as a new note, refused again (visibly) if it still carries what was refused", async () => {
  for (const arrives of ["broadcast", "page"]) {
    const s = await connected();
    try {
      await s.store.update("a", () => synced("a", { title: "A", body: "theirs" }));
      await pushAfter(s, () => edit(s.store, "a", { body: "mine", folder: "bad" }));
      const [first] = s.pushes();
      await s.say(reject(first, "invalid_field"));
      await s.clock.advance(30);
      assert.equal(refusalOf(await s.store.get("a")).code, "invalid_field");
      if (arrives === "broadcast") await s.say(purgeBroadcast("a", 2));
      else await pulled(s, [tombstone("a", 2)]);
      await s.clock.advance(30);
      assert.equal(await s.store.get("a"), undefined, arrives);
      const [fork] = await s.store.keys();
      const second = s.pushes().at(-1);
      assert.equal(second.id, fork, `${arrives}: the new note is sent`);
      assert.equal(second.baseRev, 0);
      assert.deepEqual(second.fields.folder, { set: "bad" });
      await s.say(reject(second, "invalid_field"));
      await s.clock.advance(30);
      const held = await s.store.get(fork);
      assert.equal(refusalOf(held).code, "invalid_field", "refused again, shown as refused");
      assert.equal(held.local.body, "mine");
      assert.equal(s.errors.length, 2);
    } finally {
      s.engine.dispose();
    }
  }
});

test("a refused note whose edits changed no text, purged elsewhere: removed", async () => {
  for (const arrives of ["broadcast", "page"]) {
    const s = await connected();
    try {
      await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
      await pushAfter(s, () => edit(s.store, "a", { folder: "bad" }));
      const [first] = s.pushes();
      await s.say(reject(first, "invalid_field"));
      await s.clock.advance(30);
      if (arrives === "broadcast") await s.say(purgeBroadcast("a", 2));
      else await pulled(s, [tombstone("a", 2)]);
      const { ids, pushed } = await settled(s, 1);
      assert.deepEqual(ids, [], arrives);
      assert.deepEqual(pushed, [], arrives);
    } finally {
      s.engine.dispose();
    }
  }
});

test("a purge pulled while a change is in flight goes once it is answered: only text edited since the send is kept", async () => {
  for (const later of [null, { title: "A, later" }]) {
    const s = await connected();
    try {
      await s.store.update("a", () => synced("a", { title: "A", body: "theirs" }));
      await pushAfter(s, () => edit(s.store, "a", { body: "mine" }));
      const [first] = s.pushes();
      if (later) await edit(s.store, "a", later);
      // The change was applied (rev 2), then another device purged the note (rev 3); the page
      // saying so comes before the answer (a resent change answered `duplicate`, say).
      await pulled(s, [tombstone("a", 3)]);
      assert.ok(await s.store.get("a"), "held until the answer");
      await s.say({ ...ack(first, 2), status: "duplicate" });
      const { ids, pushed: all } = await settled(s, 1);
      const pushed = all.filter((c) => c.ccid !== first.ccid); // the pull's end resent the change in flight
      assert.equal(ids.includes("a"), false, "not left at rev 2 for good");
      if (!later) {
        assert.deepEqual(ids, [], "the acknowledged text was the server's: nothing kept");
        assert.deepEqual(pushed, []);
      } else {
        assert.equal(ids.length, 1);
        const kept = await s.store.get(ids[0]);
        assert.equal(kept.local.title, "A, later");
        assert.deepEqual(pushed.map((c) => [c.id, c.baseRev]), [[ids[0], 0]]);
      }
    } finally {
      s.engine.dispose();
    }
  }
});

test("a connection whose handshake or hello is never answered is given up after the request timeout, and another opened", async () => {
  // Node 20's WebSocket, refused a connection, fires `error` and never `close` (found by the
  // node simulation: every client of a run stayed `connecting` after a server restart); a server
  // that stops answering leaves a `hello` unanswered the same way.
  for (const opened of [false, true]) {
    const transport = fakeTransport();
    const clock = new VirtualClock();
    const engine = new SyncEngine({ store: new MemoryStore(), auth: { ...slowAuth(clock), accessToken: async () => "t" }, transport, clock, requestTimeoutMs: 300 });
    try {
      engine.start();
      await clock.advance(20);
      assert.equal(transport.sockets.length, 1);
      if (opened) {
        transport.sockets[0].readyState = 1;
        await transport.sockets[0].onopen(); // hello sent, no welcome comes
      }
      await clock.advance(2500); // the watchdog (every second) gives it up; the reconnect waits 0.25–0.5 s
      assert.ok(transport.sockets.length >= 2, `still waiting on the first connection (opened: ${opened})`);
      assert.equal(transport.sockets[0].readyState, 3, "the first connection closed");
    } finally {
      engine.dispose();
    }
  }
});

test("a purge made while a change is in flight, or before a newer state comes, still goes out", async () => {
  // Found by the node simulation (seeds 21, 34): the answer (or the page) moved the note onto
  // the server's state, `dirty` was recomputed from the fields alone, and the purge was never
  // sent; the note stayed here unseen (purged) and on the server for good.
  const record = (id, rev, body) => ({ collection: "notes", id, rev, seq: rev + 10, deleted: false, fields: { title: "A", body }, createdAt: "2026-01-01T00:00:00.000Z", updatedAt: "2026-01-01T00:00:00.000Z" });
  {
    const s = await connected();
    try {
      await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
      await pushAfter(s, () => edit(s.store, "a", { body: "text more" }));
      const [first] = s.pushes();
      await purge(s.store, "a"); // while the edit is in flight
      await s.say(ack(first, 2));
      const { pushed } = await settled(s, 1);
      assert.deepEqual(pushed.map((c) => [c.id, c.op, c.baseRev]), [["a", "delete", 2]]);
    } finally {
      s.engine.dispose();
    }
  }
  {
    const s = await connected();
    try {
      await s.store.update("a", () => synced("a", { title: "A", body: "text" }));
      await idle(s);
      await purge(s.store, "a"); // not sent yet when the newer state comes
      await pulled(s, [record("a", 2, "text theirs")]);
      const { pushed } = await settled(s, 0);
      assert.deepEqual(pushed.map((c) => [c.id, c.op, c.baseRev]), [["a", "delete", 2]]);
    } finally {
      s.engine.dispose();
    }
  }
});

test("a pull from 0 is a snapshot: a synced note it does not name was purged and goes; one with a change in flight goes if the ack is older than the snapshot", async () => {
  // Found by the node simulation (seed 53): a client restarted with its cursor still at 0 (its
  // first pull had found nothing; broadcasts brought the notes) kept for good a note purged
  // meanwhile, since a pull from 0 carries no tombstones (the Swift client's `dropAbsent`).
  const s = await connected();
  try {
    await s.store.update("flight", () => synced("flight", { title: "F", body: "x" }));
    await pushAfter(s, () => edit(s.store, "flight", { body: "x y" }));
    const change = s.pushes().find((c) => c.id === "flight");
    // Not pushed yet when the snapshot ends (written after the push):
    await s.store.update("gone", () => synced("gone", { title: "Gone", body: "old" }));
    await s.store.update("edited", () => withEdit(synced("edited", { title: "E", body: "old" }), normalizeFields({ title: "E", body: "old mine" })));
    await s.store.update("pinned", () => withEdit(synced("pinned", { title: "P", body: "old" }), normalizeFields({ title: "P", body: "old", pinned: true })));
    await s.store.update("new", () => newRecord("new", { title: "New here" }));
    await s.store.setMeta("cursor", 0);
    await s.engine.pull();
    const { rid, since } = s.sent("pull").at(-1);
    assert.equal(since, 0);
    await s.say({ type: "changes", rid, records: [], cursor: 40, more: false });
    await s.clock.advance(30);
    const ids = await s.store.keys();
    assert.ok(!ids.includes("gone"), "a synced note the snapshot lacks is dropped");
    assert.ok(!ids.includes("pinned"), "an unsent pin does not bring it back");
    assert.ok(!ids.includes("edited"));
    assert.ok(ids.includes("new"), "a note never sent stays");
    const kept = await Promise.all(ids.map((id) => s.store.get(id)));
    assert.ok(kept.some((r) => r.local.body === "old mine" && !["edited"].includes(r.id)), "unsent text kept as a new note");
    assert.ok(ids.includes("flight"), "a change in flight waits for its answer");
    await s.say({ ...ack(change, 2), seq: 30 }); // applied before the snapshot: purged since
    await s.clock.advance(30);
    assert.ok(!(await s.store.keys()).includes("flight"), "gone once the ack says it was applied before the snapshot");
  } finally {
    s.engine.dispose();
  }
});

test("a change in flight whose stored body does not read is skipped; the rest of the outbox still goes", async () => {
  const s = await connected();
  try {
    const damaged = { ...synced("d", { title: "damaged" }), sync: { edited: true, inflight: { ccid: "c-d", baseRev: 1, body: "{not json" } } };
    await s.store.update("d", () => damaged);
    await pushAfter(s, () => s.store.update("a", () => newRecord("a", { title: "fine" })));
    assert.deepEqual(s.pushes().map((change) => change.id), ["a"], "the readable change goes, the damaged one is left");
    assert.deepEqual(s.errors, []);
  } finally {
    s.engine.dispose();
  }
});

test("pushes asked for while one runs: a change in flight is sent once", async () => {
  const s = await connected();
  try {
    // A change in flight, stored, not yet sent on this connection (as after a reconnect).
    const body = JSON.stringify({ ccid: "c-a", collection: "notes", id: "a", baseRev: 1, op: "upsert", fields: { title: { set: "two" } } });
    await s.store.update("a", () => ({ ...synced("a", { title: "one" }), local: normalizeFields({ title: "two" }), sync: { edited: false, inflight: { ccid: "c-a", baseRev: 1, body } } }));
    // Two runs at once, as a timer and an answer can start them.
    await Promise.all([s.engine.pushDirty(), s.engine.pushDirty()]);
    await s.clock.advance(30);
    assert.deepEqual(s.pushes().map((change) => change.id), ["a"], "sent once");
  } finally {
    s.engine.dispose();
  }
});
