// The page's rules for shared spaces (Web/spaces.js) and the list's space filter
// (Web/notes-index.js): what a role may do, labels, a join link's secret, the newest author.
import { test } from "node:test";
import assert from "node:assert/strict";
import { canRemove, canShare, canWrite, joinSecret, latestAuthor, sharedSpaces, spaceLabel } from "../../Web/spaces.js";
import { NoteIndex, summarize } from "../../Web/notes-index.js";
import { newRecord, spaceOf, stamp, unchanged } from "../../Web/records.js";

test("roles: editors and above write, admins and the owner share; nobody removes the owner, an admin only editors and viewers", () => {
  assert.deepEqual(["owner", "admin", "editor", "viewer"].map(canWrite), [true, true, true, false]);
  assert.deepEqual(["owner", "admin", "editor", "viewer"].map(canShare), [true, true, false, false]);
  assert.equal(canRemove("owner", "admin"), true);
  assert.equal(canRemove("admin", "admin"), false);
  assert.equal(canRemove("admin", "viewer"), true);
  assert.equal(canRemove("owner", "owner"), false);
  assert.equal(canRemove("editor", "viewer"), false);
});

test("labels, the shared spaces of a list by name, a join link's secret", () => {
  assert.equal(spaceLabel({ personal: true, name: "x" }), "Personal");
  assert.equal(spaceLabel({ name: "Trip", role: "editor" }), "Trip · editor");
  assert.equal(spaceLabel({ name: "Rules", role: "viewer" }), "Rules · viewer (read-only)");
  const list = [{ id: "me", personal: true, name: "Personal" }, { id: "b", name: "Zoo", role: "owner" }, { id: "a", name: "Art", role: "viewer" }, null, { id: "", name: "bad" }];
  assert.deepEqual(sharedSpaces(list).map((s) => s.id), ["a", "b"]);
  assert.deepEqual(sharedSpaces(undefined), []);
  assert.equal(joinSecret("#join=abc-DEF_123"), "abc-DEF_123");
  assert.equal(joinSecret("join=abc"), "abc");
  assert.equal(joinSecret("#other=abc"), null);
  assert.equal(joinSecret("#join=<script>"), null);
  assert.equal(joinSecret(""), null);
});

test("the newest revision's author; conflict revisions and revisions without one are passed over", () => {
  assert.equal(latestAuthor([{ rev: 1, author: "ann" }, { rev: 3, author: "bob" }, { rev: 2, author: "cat" }]), "bob");
  assert.equal(latestAuthor([{ rev: 1, author: "ann" }, { rev: 2, conflict: true, author: "bob" }]), "ann");
  assert.equal(latestAuthor([{ rev: 1 }]), null);
  assert.equal(latestAuthor(null), null);
});

test("the list shows every space, the personal one or one shared space; a record's space counts as a change", () => {
  const index = new NoteIndex();
  const mine = stamp(newRecord("m", { title: "Mine" }, 1), undefined);
  const shared = stamp({ ...newRecord("s", { title: "Shared" }, 2), space: "sp1" }, undefined);
  const other = stamp({ ...newRecord("o", { title: "Other" }, 3), space: "sp2" }, undefined);
  for (const r of [mine, shared, other]) index.put(summarize(r));
  const ids = (space) => index.query("all", null, space).map((e) => e.id).sort();
  assert.deepEqual(ids("all"), ["m", "o", "s"]);
  assert.deepEqual(ids("personal"), ["m"]);
  assert.deepEqual(ids("sp1"), ["s"]);
  assert.equal(spaceOf(mine), null);
  assert.equal(spaceOf(shared), "sp1");
  assert.equal(unchanged({ ...shared, space: "sp2" }, shared), false);
  assert.equal(unchanged({ ...shared }, shared), true);
});
