// The web app's ccids (Web/text.js `changeID`): canonical lower-case version-8 UUIDs that the
// server accepts, unique, and one page's consecutive ids share all but the counter, so that
// permessage-deflate sends a keystroke's push in far fewer bytes than with random v4 ids.
import { test } from "node:test";
import assert from "node:assert/strict";
import { constants, createDeflateRaw } from "node:zlib";
import { changeID, uuid } from "../../Web/text.js";

const CANONICAL = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test("ccids are canonical version-8 UUIDs and never repeat", () => {
  const ids = new Set();
  let last = null;
  for (let i = 0; i < 20000; i++) {
    const id = changeID();
    assert.match(id, CANONICAL);
    if (last) {
      assert.equal(id.slice(0, 24), last.slice(0, 24));
      assert.equal(parseInt(id.slice(24), 16), parseInt(last.slice(24), 16) + 1);
    }
    ids.add(id);
    last = id;
  }
  assert.equal(ids.size, 20000);
});

// A keystroke's push as the engine sends it, compressed as permessage-deflate does with context
// takeover (raw deflate, a 1 KiB window as the server negotiates, each message sync-flushed and
// its trailing 00 00 ff ff dropped), after nine earlier keystrokes.
async function lastPushCompressed(makeID) {
  const z = createDeflateRaw({ windowBits: 10 });
  const sizes = [];
  for (let i = 0; i < 10; i++) {
    const push = JSON.stringify({ type: "push", changes: [{ ccid: makeID(), collection: "notes", id: "35ece27d-5361-4c8b-b56a-c0f61791b335",
      baseRev: 2 + i, op: "upsert", fields: { body: { delta: `=${779 + i}\t+x\t=${222 - i}` } } }] });
    const chunks = [];
    z.on("data", (c) => chunks.push(c));
    z.write(Buffer.from(push));
    await new Promise((resolve) => z.flush(constants.Z_SYNC_FLUSH, resolve));
    z.removeAllListeners("data");
    const out = Buffer.concat(chunks);
    assert.deepEqual([...out.subarray(out.length - 4)], [0, 0, 0xff, 0xff]);
    sizes.push(out.length - 4);
  }
  z.close();
  return sizes[sizes.length - 1];
}

test("a keystroke's push compresses to under 30 bytes with these ids, over 45 with random ones", async () => {
  const sequential = await lastPushCompressed(changeID);
  const random = await lastPushCompressed(uuid);
  assert.ok(sequential < 30, `with changeID: ${sequential} bytes`);
  assert.ok(random > 45, `with random v4 ids: ${random} bytes`);
});
