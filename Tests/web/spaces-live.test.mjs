// Shared spaces (protocol 2, docs/protocol.md "Spaces") synced by the web app's engine
// (Web/sync.js) against the real server: two users share a space and both sync it; offline
// edits of one note by both merge; a viewer's edit is refused (`read_only`) and kept as refused;
// a member removed loses the space's records but for an unsynced edit, kept refused, which can
// be copied to their personal space; and a store the previous version wrote (protocol 1: no
// `space`, one cursor) with a pending edit keeps it and syncs it.
// NOTED_SERVER_BIN: the server (skipped with a notice without it); node 20 needs
// --experimental-websocket.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { Client, PASSWORD, createAccount, signIn, sleep, startServer } from "./support/live.mjs";
import { MemoryStore } from "../../Web/memory-store.js";
import { LEFT_SPACE, cursorKey } from "../../Web/sync.js";
import { isUnsynced, newRecord, normalizeFields, refusalOf, spaceOf, syncState } from "../../Web/records.js";
import { uuid } from "../../Web/text.js";

const BIN = process.env.NOTED_SERVER_BIN;
const NO_WEBSOCKET = typeof WebSocket === "undefined";
const skip = !BIN ? "NOTED_SERVER_BIN is not set" : NO_WEBSOCKET ? "no global WebSocket (node 20: --experimental-websocket)" : false;
if (skip) console.log(`spaces-live.test.mjs: NOTICE: skipped: ${skip}`);

let server = null;
let users = 0;

before(async () => {
  if (!skip) server = await startServer(BIN);
});

after(async () => {
  if (server) await server.stop();
});

/** One HTTP request (node:http, no keep-alive, as Tests/web/support/live.mjs does): [status, JSON]. */
function http(method, path, token, body) {
  const headers = { Connection: "close" };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, server.base), { method, headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (text += chunk));
      res.on("end", () => resolve([res.statusCode, text ? JSON.parse(text) : null]));
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

async function ok(method, path, token, body) {
  const [status, json] = await http(method, path, token, body);
  assert.ok(status >= 200 && status < 300, `${method} ${path}: ${status} ${JSON.stringify(json)}`);
  return json;
}

/** A new account: { username, token } (its own session). */
async function account(name) {
  const username = `${name}${++users}x${process.pid}`;
  await createAccount(server.base, username);
  return { username, token: await signIn(server.base, username) };
}

/** A started client of `user` on a session of its own. */
async function client(name, user, store = undefined) {
  const c = new Client(name, server.base, await signIn(server.base, user.username), { store });
  c.start();
  return c;
}

/** `owner` shares a new space with each of `members` ([user, role]): the space's id. */
async function share(owner, name, members) {
  const space = await ok("POST", "/v1/spaces", owner.token, { name });
  for (const [user, role] of members) {
    await ok("POST", `/v1/spaces/${space.id}/invitations`, owner.token, { username: user.username, role });
    await ok("POST", `/v1/spaces/${space.id}/accept`, user.token);
  }
  return space.id;
}

/** Waits for `check()` (async) to be truthy: its value; fails with `message` after `ms`. */
async function until(check, message, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) assert.fail(`timed out: ${message}`);
    await sleep(50);
  }
}

/** A new note in `space` written as the page writes one (Web/app.js), pushed soon. */
async function create(c, fields, space) {
  const id = uuid();
  await c.store.update(id, () => ({ ...newRecord(id, fields), ...(space ? { space } : {}) }));
  c.engine.schedulePush(0);
  return id;
}

/** The server's fields of a record of `space` (GET /v1/records/notes/ID?space=), or null. */
async function serverRecord(token, id, space) {
  const [status, json] = await http("GET", `/v1/records/notes/${id}${space ? `?space=${space}` : ""}`, token);
  return status === 200 ? json : null;
}

const synced = async (c) => c.engine.ready && c.engine.pending.size === 0 && (await c.store.pendingRecords()).every((r) => refusalOf(r) !== null);

test("two users share a space: a note made by one reaches the other with its space; offline edits of it by both merge", { skip, timeout: 60000 }, async () => {
  const ann = await account("ann");
  const bob = await account("bob");
  const space = await share(ann, "Groceries", [[bob, "editor"]]);
  const a = await client("A", ann);
  const b = await client("B", bob);
  try {
    // Both connected first: a commit between a protocol-2 hello's reading of the spaces and its
    // following them is neither sent to that session nor pulled by it until the space moves
    // again (a server race found here, not fixed yet; this test is about the merge).
    await until(async () => a.engine.ready && b.engine.ready, "both clients connected");
    const id = await create(a, { title: "List", body: "apples bread cheese dates" }, space);
    const got = await until(async () => { const r = await b.store.get(id); return r && r.local.body === "apples bread cheese dates" && r; }, "bob's client has the note");
    assert.equal(spaceOf(got), space, "the record is in the shared space on bob's device");
    assert.equal(spaceOf(await a.store.get(id)), space);
    assert.ok(await serverRecord(ann.token, id, space), "the server has it in the space");
    assert.equal(await serverRecord(ann.token, id, null), null, "not in ann's personal space");
    assert.deepEqual((await b.store.getMeta("spaces")).map((s) => [s.name, s.personal, s.role]), [["Personal", true, "owner"], ["Groceries", false, "editor"]]);

    a.setOnline(false);
    b.setOnline(false);
    assert.ok(await a.edit(id, (f) => ({ ...f, body: f.body.replace("bread", "BREAD") })));
    assert.ok(await b.edit(id, (f) => ({ ...f, body: f.body.replace("dates", "DATES") })));
    a.setOnline(true);
    b.setOnline(true);
    const merged = "apples BREAD cheese DATES";
    await until(async () => (await a.store.get(id)).local.body === merged && (await b.store.get(id)).local.body === merged && (await synced(a)) && (await synced(b)), "both converge on the merge");
    assert.equal((await serverRecord(bob.token, id, space)).fields.body, merged);
    // A broadcast moves no cursor; the reconnect's welcome listed the space's seq past it: pulled.
    await until(async () => (await b.store.getMeta(cursorKey(space))) > 0, "bob's cursor of the space moved");
    const { revisions } = await ok("GET", `/v1/records/notes/${id}/revisions?space=${space}`, ann.token);
    assert.deepEqual(new Set(revisions.map((r) => r.author)), new Set([ann.username, bob.username]), "both named as authors");
    assert.deepEqual([...a.errors, ...b.errors], []);
  } finally {
    a.dispose();
    b.dispose();
  }
});

test("a viewer syncs the space but its edit is refused read_only and kept, refused, on its device", { skip, timeout: 60000 }, async () => {
  const ann = await account("ann");
  const vic = await account("vic");
  const space = await share(ann, "Read me", [[vic, "viewer"]]);
  const a = await client("A", ann);
  const v = await client("V", vic);
  try {
    const id = await create(a, { title: "Rules", body: "no running" }, space);
    await until(async () => (await v.store.get(id))?.local.body === "no running", "the viewer has the note");
    assert.ok(await v.edit(id, (f) => ({ ...f, body: "running allowed" })));
    const refused = await until(async () => { const r = await v.store.get(id); return refusalOf(r) && r; }, "the edit refused");
    assert.equal(refusalOf(refused).code, "read_only");
    assert.equal(refused.local.body, "running allowed", "the edit is kept here");
    assert.ok(isUnsynced(refused));
    assert.equal((await serverRecord(ann.token, id, space)).fields.body, "no running", "never applied");
    assert.ok(v.errors.some((e) => /read_only/.test(e)), v.errors.join("; "));
  } finally {
    a.dispose();
    v.dispose();
  }
});

test("a member removed: the space's records leave their device, but an unsynced edit stays refused and can be copied to their space", { skip, timeout: 60000 }, async () => {
  const ann = await account("ann");
  const bob = await account("bob");
  const space = await share(ann, "Trip", [[bob, "editor"]]);
  const a = await client("A", ann);
  const b = await client("B", bob);
  try {
    const kept = await create(a, { title: "Plan", body: "day one" }, space);
    const other = await create(a, { title: "Budget", body: "100" }, space);
    const mine = await create(b, { title: "Mine", body: "personal" }, null);
    await until(async () => (await b.store.get(kept)) && (await b.store.get(other)) && (await synced(b)), "bob has both notes");

    b.setOnline(false);
    assert.ok(await b.edit(kept, (f) => ({ ...f, body: "day one, then the beach" })));
    const { members } = await ok("GET", `/v1/spaces/${space}`, ann.token);
    const bobID = members.find((m) => m.username === bob.username).id;
    await ok("DELETE", `/v1/spaces/${space}/members/${bobID}`, ann.token);
    b.setOnline(true);

    await until(async () => !(await b.store.get(other)), "the synced note of the space leaves bob's device");
    const held = await until(async () => { const r = await b.store.get(kept); return refusalOf(r) && r; }, "the unsynced edit kept, refused");
    assert.deepEqual(refusalOf(held), { code: "read_only", message: LEFT_SPACE });
    assert.equal(held.local.body, "day one, then the beach");
    assert.ok(await b.store.get(mine), "bob's personal note stays");
    assert.equal(await b.store.getMeta(cursorKey(space)), undefined, "the space's cursor is gone");
    assert.equal((await serverRecord(ann.token, kept, space)).fields.body, "day one", "never sent");

    const copy = await b.engine.copyToPersonalSpace(kept);
    assert.equal(await b.store.get(kept), undefined, "the original dropped");
    await until(async () => (await serverRecord(bob.token, copy, null))?.fields.body === "day one, then the beach", "the copy reaches bob's personal space");
    assert.equal(spaceOf(await b.store.get(copy)), null);
  } finally {
    a.dispose();
    b.dispose();
  }
});

test("joining a space while online: the `spaces` message pulls it from 0, and leaving drops it again", { skip, timeout: 60000 }, async () => {
  const ann = await account("ann");
  const bob = await account("bob");
  const space = await share(ann, "Later", []);
  const a = await client("A", ann);
  const b = await client("B", bob);
  try {
    const id = await create(a, { title: "Old", body: "before bob" }, space);
    await until(() => synced(a), "ann's note synced");
    await until(() => synced(b), "bob online");
    await ok("POST", `/v1/spaces/${space}/invitations`, ann.token, { username: bob.username, role: "editor" });
    await ok("POST", `/v1/spaces/${space}/accept`, bob.token);
    await until(async () => (await b.store.get(id))?.local.body === "before bob", "bob pulls the space he joined");
    await ok("POST", `/v1/spaces/${space}/leave`, bob.token);
    await until(async () => !(await b.store.get(id)), "leaving drops it");
  } finally {
    a.dispose();
    b.dispose();
  }
});

test("a store the previous version wrote (protocol 1: no space, one cursor) keeps its pending edit and syncs it with protocol 2", { skip, timeout: 60000 }, async () => {
  const ann = await account("ann");
  // First a protocol-2 client syncs a note; its state is then written back as the previous
  // version's would be (no `spaces`, no space cursors) with an edit pending.
  const first = await client("A", ann);
  const id = await create(first, { title: "Kept", body: "server text" }, null);
  await until(() => synced(first), "the note synced");
  first.dispose();
  const state = first.store.snapshot();
  assert.deepEqual(Object.keys(state.meta).sort(), ["cursor", "device", "spaces"]);
  delete state.meta.spaces;
  const record = state.records.find((r) => r.id === id);
  record.local = normalizeFields({ ...record.local, body: "server text + edited offline" });
  record.sync = { edited: true };
  record.pend = 1;
  const store = MemoryStore.from(JSON.parse(JSON.stringify(state)));
  assert.ok(syncState(await store.get(id)).edited, "the pending edit survives the reading");
  const again = await client("A2", ann, store);
  try {
    await until(async () => (await serverRecord(ann.token, id, null))?.fields.body === "server text + edited offline", "the edit reaches the server");
    await until(() => synced(again), "nothing pending");
    assert.equal(spaceOf(await store.get(id)), null, "still in the personal space");
    assert.deepEqual(again.errors, []);
  } finally {
    again.dispose();
  }
});
