// Unit tests of Web/attachments.js (elements, hashing, the cache's eviction rule, object URLs,
// resumable uploads against a fake server) and of the change Web/sync.js builds for a note
// with attachments:
//   node --test Tests/web/
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Attachments, MAX_ELEMENT, ObjectUrls, RESUMABLE_BYTES, addedElements, backoff, changeAddsShas, encodeElement, evictions,
  fittedName, humanSize, markdownFor, normalizeType, parseElement, sha256Hex, shaOf,
} from "../../Web/attachments.js";
import { changeOps } from "../../Web/record-state.js";
import { normalizeFields } from "../../Web/db.js";

const SHA = "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b";
const OTHER = "b".repeat(64);

test("elements: encoded as '<sha256> <size> <type> <name>' and parsed back", () => {
  const e = encodeElement({ sha256: SHA, size: 48213, type: "image/png", name: "whiteboard 2024-03-05.png" });
  assert.equal(e, `${SHA} 48213 image/png whiteboard 2024-03-05.png`);
  assert.deepEqual(parseElement(e), { sha256: SHA, size: 48213, type: "image/png", name: "whiteboard 2024-03-05.png" });
  assert.equal(shaOf(e), SHA);
  // Emoji and other scripts are kept as they are.
  const emoji = encodeElement({ sha256: SHA, size: 1, type: "text/plain", name: "notes 😀 東京.txt" });
  assert.equal(parseElement(emoji).name, "notes 😀 東京.txt");
  // Types: lower case, no parameters; anything else is application/octet-stream.
  assert.equal(normalizeType("Text/Plain; charset=UTF-8"), "text/plain");
  assert.equal(normalizeType(""), "application/octet-stream");
  assert.equal(normalizeType("image/svg+xml"), "image/svg+xml");
  assert.equal(normalizeType("not a type"), "application/octet-stream");
  assert.equal(encodeElement({ sha256: SHA, size: 3, type: "", name: "a" }), `${SHA} 3 application/octet-stream a`);
  // What an element may not hold in its name becomes '_'; an empty name is "file".
  assert.equal(parseElement(encodeElement({ sha256: SHA, size: 3, type: "text/plain", name: "a/b\\c\nd" })).name, "a_b_c_d");
  assert.equal(parseElement(encodeElement({ sha256: SHA, size: 3, type: "text/plain", name: "" })).name, "file");
  // Not elements.
  for (const bad of ["", `${SHA} 01 text/plain a`, `${SHA.toUpperCase()} 1 text/plain a`, `${SHA} 1 Text/plain a`,
    `${SHA} 1 text/plain`, `${SHA} -1 text/plain a`, `${SHA} 1 text/plain a/b`, "x 1 text/plain a"]) {
    assert.equal(parseElement(bad), null, bad);
  }
  assert.equal(encodeElement({ sha256: "abc", size: 1, type: "text/plain", name: "a" }), null);
});

test("elements: long names are shortened to 200 UTF-16 units, keeping the extension", () => {
  const long = "x".repeat(296) + ".pdf"; // 300 characters
  const e = encodeElement({ sha256: SHA, size: 123456, type: "application/pdf", name: long });
  assert.equal(e.length, MAX_ELEMENT);
  assert.ok(parseElement(e).name.endsWith(".pdf"));
  assert.ok(parseElement(e).name.startsWith("xxx"));
  // Emoji (two UTF-16 units each) are never split in half, and the element still fits.
  const emoji = "😀".repeat(150) + ".jpeg";
  const e2 = encodeElement({ sha256: SHA, size: 9, type: "image/jpeg", name: emoji });
  assert.ok(e2.length <= MAX_ELEMENT, String(e2.length));
  const name = parseElement(e2).name;
  assert.ok(name.endsWith(".jpeg"));
  assert.ok(/^(😀)+\.jpeg$/u.test(name), name);
  assert.ok(!/[\ud800-\udbff](?![\udc00-\udfff])/.test(name), "no lone surrogate");
  // A long extension is not kept whole (it would leave no room for the name).
  const ext = fittedName("a." + "e".repeat(150), SHA, 1, "text/plain");
  assert.equal(`${SHA} 1 text/plain ${ext}`.length, MAX_ELEMENT);
  // A short name is left alone.
  assert.equal(fittedName("a.txt", SHA, 1, "text/plain"), "a.txt");
});

test("sha256Hex matches the known vectors", async () => {
  assert.equal(await sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(await sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(await sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  assert.equal(await sha256Hex(new Uint8Array(1000000).fill(0x61)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  assert.equal(await sha256Hex(new Blob(["abc"])), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
});

test("evictions: least recently used first, down to the cap, never a blob pending upload", () => {
  const entries = [
    { sha: "a", size: 50, usedAt: 1 },
    { sha: "b", size: 50, usedAt: 5, pending: true },
    { sha: "c", size: 50, usedAt: 3 },
    { sha: "d", size: 50, usedAt: 4 },
  ];
  assert.deepEqual(evictions(entries, 200), []);
  assert.deepEqual(evictions(entries, 199), ["a"]);
  assert.deepEqual(evictions(entries, 100), ["a", "c"]);
  // Pending blobs stay even beyond the cap; everything else goes.
  assert.deepEqual(evictions(entries, 10), ["a", "c", "d"]);
  assert.deepEqual(evictions([{ sha: "p", size: 500, usedAt: 0, pending: true }], 100), []);
  assert.deepEqual(evictions([], 0), []);
});

test("markdown, sizes and backoff", () => {
  assert.equal(markdownFor({ sha256: SHA, type: "image/png", name: "a [1].png" }), `![a \\[1\\].png](attachment:${SHA})`);
  assert.equal(markdownFor({ sha256: SHA, type: "application/pdf", name: "r.pdf" }), `[r.pdf](attachment:${SHA})`);
  assert.equal(humanSize(1), "1 byte");
  assert.equal(humanSize(512), "512 bytes");
  assert.equal(humanSize(1536), "1.5 KB");
  assert.equal(humanSize(26214400), "25 MB");
  assert.equal(backoff(0, () => 0), 500);
  assert.equal(backoff(100, () => 1), 300000);
});

function synced(fields, rev = 3) {
  const f = normalizeFields(fields);
  return { id: "00000000-0000-4000-8000-000000000001", local: { ...f }, shadow: { ...f }, rev };
}

/** The change Web/sync.js builds for a record (its ops: text as a delta, but for a note the server never had). */
const buildChange = (record) => ({ fields: changeOps(record.shadow ?? {}, record.local, record.rev === 0) });

test("a change of a note with attachments carries an attachments op only when they changed", () => {
  const a = `${SHA} 10 image/png a.png`;
  const b = `${OTHER} 20 application/pdf b.pdf`;
  const record = synced({ title: "T", body: "before", attachments: [a] });
  // Only the body changed: no attachments op (the files are not touched, not even re-sent).
  record.local = { ...record.local, body: "before and after" };
  const change = buildChange(record);
  assert.ok(change.fields.body);
  assert.equal(change.fields.attachments, undefined);
  assert.deepEqual(Object.keys(change.fields), ["body"]);
  // A record an earlier version stored (no attachments field at all) edits the same way.
  const old = synced({ title: "T", body: "x" });
  delete old.local.attachments;
  delete old.shadow.attachments;
  old.local.body = "y";
  assert.deepEqual(Object.keys(buildChange(old).fields), ["body"]);
  // A file added: an add; removed: a remove.
  const added = synced({ body: "x", attachments: [a] });
  added.local.attachments = [a, b];
  assert.deepEqual(buildChange(added).fields, { attachments: { add: [b], remove: [] } });
  assert.deepEqual(changeAddsShas(buildChange(added)), [OTHER]);
  const removed = synced({ body: "x", attachments: [a, b] });
  removed.local.attachments = [b];
  assert.deepEqual(buildChange(removed).fields, { attachments: { add: [], remove: [a] } });
  assert.deepEqual(changeAddsShas(buildChange(removed)), []);
  // A new note sends its files as a set.
  const fresh = { id: "00000000-0000-4000-8000-000000000002", local: normalizeFields({ body: "x", attachments: [a] }), shadow: null, rev: 0 };
  assert.deepEqual(buildChange(fresh).fields.attachments, { set: [a] });
  assert.deepEqual(changeAddsShas(buildChange(fresh)), [SHA]);
  assert.deepEqual(addedElements([a], [a, b]), [b]);
});

test("normalizeFields keeps a record's attachments", () => {
  const a = `${SHA} 10 image/png a.png`;
  assert.deepEqual(normalizeFields({ attachments: [a, a, 3] }).attachments, [a]);
  assert.deepEqual(normalizeFields({}).attachments, []);
});

/** A page's URL.createObjectURL/revokeObjectURL, counting the live ones. */
function fakeUrlApi() {
  let n = 0;
  const live = new Set();
  return {
    live,
    createObjectURL: () => {
      const url = `blob:fake/${++n}`;
      live.add(url);
      return url;
    },
    revokeObjectURL: (url) => live.delete(url),
  };
}

test("ObjectUrls: one URL per key while shown, revoked when drawn without it or released", () => {
  const api = fakeUrlApi();
  const urls = new ObjectUrls(api);
  const blob = new Blob(["x"], { type: "image/png" });
  urls.keepOnly([SHA, OTHER]);
  const a = urls.get(SHA, blob);
  assert.equal(urls.get(SHA, blob), a); // made once
  assert.equal(urls.peek(SHA), a);
  urls.get(OTHER, blob);
  assert.equal(api.live.size, 2);
  urls.keepOnly([SHA]); // drawn again without OTHER
  assert.deepEqual([...api.live], [a]);
  assert.equal(urls.get(OTHER, blob), null); // a load that ends after: no URL for what is not shown
  assert.equal(api.live.size, 1);
  urls.release();
  assert.equal(api.live.size, 0);
  assert.equal(urls.get(SHA, blob), null);
  assert.equal(urls.size, 0);
});

/**
 * A fake blob endpoint as noted-server answers HEAD and PATCH (docs/protocol.md section 8),
 * keeping `have` bytes of an upload; `cut(n)` makes the next PATCH keep only n bytes and fail
 * as a network error does.
 */
function fakeServer(sha, total) {
  const server = { have: 0, stored: false, patches: [], cutAt: null, bytes: [] };
  server.fetch = async (path, init = {}) => {
    assert.equal(path, `/v1/blobs/${sha}`);
    const headers = (h) => ({ get: (name) => (name in h ? String(h[name]) : null) });
    const answer = (status, h = {}, body = {}) => {
      const r = { status, ok: status >= 200 && status < 300, headers: headers(h), json: async () => body };
      r.clone = () => r;
      return r;
    };
    if (init.method === "HEAD") {
      return server.stored ? answer(200, { "Upload-Offset": total, "Upload-Length": total }) : answer(404, { "Upload-Offset": server.have, ...(server.have ? { "Upload-Length": total } : {}) });
    }
    assert.equal(init.method, "PATCH");
    assert.equal(init.headers["Content-Type"], "application/offset+octet-stream");
    assert.equal(init.headers["Upload-Length"], String(total));
    assert.equal(init.headers["Noted-Blob-Type"], "application/pdf");
    const offset = Number(init.headers["Upload-Offset"]);
    if (offset !== server.have) return answer(409, { "Upload-Offset": server.have }, { error: "offset_mismatch" });
    const piece = new Uint8Array(await init.body.arrayBuffer());
    server.patches.push({ offset, size: piece.length });
    if (server.cutAt !== null) {
      const kept = piece.slice(0, server.cutAt);
      server.bytes.push(kept);
      server.have += kept.length;
      server.cutAt = null;
      throw new TypeError("Failed to fetch");
    }
    server.bytes.push(piece);
    server.have += piece.length;
    if (server.have === total) server.stored = true;
    return answer(204, { "Upload-Offset": server.have });
  };
  return server;
}

function joined(pieces) {
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** An Attachments over one pending blob, with `fetch` the fake server's. */
function uploader(server, sha, blob) {
  const a = Object.create(Attachments.prototype); // no constructor: no page, no database
  let entry = { sha, blob, size: blob.size, type: "application/pdf", pend: 1 };
  a.fetch = server.fetch;
  a.pieceBytes = 256 * 1024;
  a.events = [];
  a.emit = (type, detail) => a.events.push([type, detail]);
  a.cache = {
    get: async () => entry,
    update: async (_, change) => (entry = change(entry)),
    evict: async () => {},
  };
  a.entry = () => entry;
  return a;
}

test("uploads over 1 MiB go in PATCH pieces and continue from the server's offset after a cut", async () => {
  const total = RESUMABLE_BYTES + 300 * 1024 + 7;
  const data = new Uint8Array(total).map((_, i) => (i * 31 + (i >> 9)) & 255);
  const blob = new Blob([data], { type: "application/pdf" });
  const sha = await sha256Hex(data);
  const server = fakeServer(sha, total);
  const a = uploader(server, sha, blob);
  // The second piece is cut off after 1000 bytes (the network went): retry later.
  const orig = server.fetch;
  let calls = 0;
  a.fetch = async (path, init) => {
    if (init.method === "PATCH" && ++calls === 2) server.cutAt = 1000;
    return orig(path, init);
  };
  assert.equal(await a.upload(sha), "retry");
  assert.equal(server.have, 256 * 1024 + 1000);
  assert.ok(a.entry().pend);
  assert.deepEqual(a.events.at(-1), ["progress", { sha, total, paused: true }]);
  // Later: HEAD says where the server is; the upload goes on from there.
  a.fetch = orig;
  const before = server.patches.length;
  assert.equal(await a.upload(sha), "done");
  const after = server.patches.slice(before);
  assert.equal(after[0].offset, 256 * 1024 + 1000);
  assert.equal(after.reduce((n, p) => n + p.size, 0), total - (256 * 1024 + 1000)); // nothing sent twice
  assert.ok(after.every((p) => p.size <= 256 * 1024));
  assert.deepEqual(joined(server.bytes), data);
  assert.equal(a.entry().pend, undefined);
  assert.deepEqual(a.events.at(-1), ["uploaded", { sha }]);
  assert.deepEqual(a.events.at(-2), ["progress", { sha, sent: total, total }]);
});

test("an offset_mismatch continues from the server's Upload-Offset", async () => {
  const total = RESUMABLE_BYTES + 10;
  const data = new Uint8Array(total).fill(7);
  const sha = await sha256Hex(data);
  const server = fakeServer(sha, total);
  const a = uploader(server, sha, new Blob([data]));
  // Another tab sent a piece between this one's HEAD and its PATCH.
  const orig = server.fetch;
  let headed = false;
  a.fetch = async (path, init) => {
    const r = await orig(path, init);
    if (init.method === "HEAD" && !headed) {
      headed = true;
      server.bytes.push(data.slice(0, 5000));
      server.have = 5000;
    }
    return r;
  };
  assert.equal(await a.upload(sha), "done");
  assert.deepEqual(server.patches.map((p) => p.offset).slice(0, 2), [5000, 5000 + 256 * 1024]);
  assert.deepEqual(joined(server.bytes), data);
});
