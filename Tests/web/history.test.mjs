// Unit tests of the history panel's pure part (Web/history.js, issue 23): revisions grouped by
// local calendar day under "Today", "Yesterday" or a date, newest first, and sizes written in SI
// units. No DOM here: the browser test (test_history_panel_lists_revisions_and_restores_one in
// Tests/peers/test_webapp.py) draws the panel against a real server.
//   node --experimental-detect-module --test Tests/web/history.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { dayLabel, formatSize, groupRevisionsByDay, revisionDetails, revisionText, revisionTime } from "../../Web/history.js";

const DAY = { weekday: "long", day: "numeric", month: "long", year: "numeric" };
let seq = 0;
/** A revision summary as the server lists it, at a local `date`. */
function summary(rev, date, extra = {}) {
  seq += 1;
  return { rev, seq, updatedAt: date.toISOString(), device: "d1", ccid: `c${seq}`, conflict: false, ...extra };
}
const shape = (days) => days.map((d) => [d.label, d.revisions.map((r) => r.rev)]);

/** Runs `body` with the process in time zone `zone` (node reads TZ again when it is set). */
function inZone(zone, body) {
  const before = process.env.TZ;
  process.env.TZ = zone;
  try {
    return body();
  } finally {
    if (before === undefined) delete process.env.TZ;
    else process.env.TZ = before;
  }
}

test("revisions either side of local midnight go in two days, newest day and newest revision first", () => {
  const now = new Date(2026, 10, 24, 9, 30); // Tuesday 24 November 2026, 09:30 local
  const revisions = [ // as the server lists them: oldest first
    summary(1, new Date(2026, 10, 23, 23, 58)),
    summary(2, new Date(2026, 10, 23, 23, 59, 59)),
    summary(3, new Date(2026, 10, 24, 0, 0, 0)),
    summary(4, new Date(2026, 10, 24, 0, 1)),
  ];
  assert.deepEqual(shape(groupRevisionsByDay(revisions, now)), [["Today", [4, 3]], ["Yesterday", [2, 1]]]);
});

test("Today, Yesterday, then the locale's long date for older days", () => {
  const now = new Date(2026, 10, 24, 0, 5); // just after midnight: yesterday was minutes ago
  const older = new Date(2026, 10, 22, 12, 0);
  const lastYear = new Date(2025, 11, 31, 23, 0);
  const days = groupRevisionsByDay([
    summary(1, lastYear),
    summary(2, older),
    summary(3, new Date(2026, 10, 23, 0, 0)),
    summary(4, new Date(2026, 10, 24, 0, 1)),
  ], now);
  assert.deepEqual(days.map((d) => d.label), ["Today", "Yesterday", older.toLocaleDateString(undefined, DAY), lastYear.toLocaleDateString(undefined, DAY)]);
  assert.match(new Date(2026, 10, 23, 12).toLocaleDateString("en-GB", DAY), /^Monday,? 23 November 2026$/); // the headings in en-GB (the comma: ICU's version)
  assert.equal(dayLabel(new Date(2026, 10, 23, 23, 59), now), "Yesterday");
  assert.equal(dayLabel(new Date(2026, 10, 24, 23, 59), now), "Today");
  assert.equal(dayLabel(new Date(2026, 10, 22, 23, 59), now), older.toLocaleDateString(undefined, DAY));
});

test("Yesterday is the calendar day before, across the start of a month and of a year", () => {
  assert.equal(dayLabel(new Date(2026, 10, 30, 22), new Date(2026, 11, 1, 8)), "Yesterday");
  assert.equal(dayLabel(new Date(2025, 11, 31, 23, 59), new Date(2026, 0, 1, 0, 0)), "Yesterday");
  assert.equal(dayLabel(new Date(2026, 1, 28, 12), new Date(2026, 2, 1, 12)), "Yesterday");
});

test("the day is the viewer's local day, not UTC's", () => {
  // Seen at 02:00 UTC on 24 November: 15:00 on the 24th in Auckland (UTC+13 in summer), 21:00
  // on the 23rd in New York (UTC-5).
  const revisions = [
    { rev: 1, seq: 1, updatedAt: "2026-11-23T06:00:00Z", conflict: false }, // Auckland 19:00 on the 23rd, New York 01:00 on the 23rd
    { rev: 2, seq: 2, updatedAt: "2026-11-23T11:30:00Z", conflict: false }, // Auckland 00:30 on the 24th, New York 06:30 on the 23rd
    { rev: 3, seq: 3, updatedAt: "2026-11-24T00:30:00Z", conflict: false }, // Auckland 13:30 on the 24th, New York 19:30 on the 23rd
  ];
  const at = (zone) => inZone(zone, () => shape(groupRevisionsByDay(revisions, new Date("2026-11-24T02:00:00Z"))));
  assert.deepEqual(at("UTC"), [["Today", [3]], ["Yesterday", [2, 1]]]);
  assert.deepEqual(at("Pacific/Auckland"), [["Today", [3, 2]], ["Yesterday", [1]]]);
  assert.deepEqual(at("America/New_York"), [["Today", [3, 2, 1]]]);
  const time = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
  assert.equal(inZone("Pacific/Auckland", () => new Date(revisions[1].updatedAt).toLocaleTimeString("en-GB", time)), "00:30", "the zone is taken");
  assert.equal(inZone("Pacific/Auckland", () => revisionTime(revisions[1])), inZone("Pacific/Auckland", () => new Date(revisions[1].updatedAt).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })));
});

test("within a day, newest first whatever order they come in; one instant: the later listed first", () => {
  const now = new Date(2026, 10, 24, 18);
  const noon = new Date(2026, 10, 24, 12);
  const revisions = [summary(5, new Date(2026, 10, 24, 13)), summary(3, new Date(2026, 10, 24, 9)), summary(6, noon), summary(7, noon, { conflict: true })];
  assert.deepEqual(shape(groupRevisionsByDay(revisions, now)), [["Today", [5, 7, 6, 3]]]);
  assert.deepEqual(groupRevisionsByDay([], now), []);
  assert.equal(revisions.map((r) => r.rev).join(), "5,3,6,7", "the input is left as it was");
});

test("conflict revisions are listed in their day with the others, marked", () => {
  const now = new Date(2026, 10, 24, 18);
  const conflict = summary(4, new Date(2026, 10, 23, 10), { conflict: true, size: 640 });
  const days = groupRevisionsByDay([summary(3, new Date(2026, 10, 23, 9)), conflict, summary(5, new Date(2026, 10, 24, 8))], now);
  assert.deepEqual(shape(days), [["Today", [5]], ["Yesterday", [4, 3]]]);
  assert.equal(days[1].revisions[0], conflict, "the summary itself, for Restore (its rev and conflict flag)");
  assert.deepEqual(revisionDetails(conflict, "en"), ["640 B", "conflict"]);
  assert.equal(revisionText(conflict, "en"), `${revisionTime(conflict)} · 640 B · conflict`);
});

test("sizes: whole bytes under 1000, then KB, MB, GB with one decimal (1 KB = 1000 B)", () => {
  const cases = [[0, "0 B"], [1, "1 B"], [812, "812 B"], [999, "999 B"], [1000, "1.0 KB"], [1049, "1.0 KB"], [1050, "1.1 KB"],
    [20100, "20.1 KB"], [999949, "999.9 KB"], [999950, "1.0 MB"], [1200000, "1.2 MB"], [250000000, "250.0 MB"], [3.4e9, "3.4 GB"]];
  for (const [bytes, text] of cases) assert.equal(formatSize(bytes, "en"), text, `${bytes} bytes`);
  assert.equal(formatSize(20100, "de"), "20,1 KB", "the locale's decimal sign");
});

test("a missing size (servers before issue 23) shows no size", () => {
  for (const size of [undefined, null, "812", Number.NaN, -1, Infinity]) assert.equal(formatSize(size), "", String(size));
  const rev = summary(2, new Date(2026, 10, 24, 14, 3));
  delete rev.size;
  assert.deepEqual(revisionDetails(rev), []);
  assert.equal(revisionText(rev), revisionTime(rev));
  assert.match(revisionTime(rev), /\d{1,2}:\d{2}/);
  assert.equal(revisionText({ ...rev, size: 812 }, "en"), `${revisionTime(rev)} · 812 B`);
  assert.equal(revisionText({ ...rev, size: 812, author: "ann" }, "en"), `${revisionTime(rev)} · by ann · 812 B`);
  for (const author of [null, "", 5]) assert.deepEqual(revisionDetails({ ...rev, author }), [], String(author));
});

test("a revision whose time cannot be read is still listed, last, by its number", () => {
  const now = new Date(2026, 10, 24, 18);
  const days = groupRevisionsByDay([{ rev: 1, updatedAt: "not a time" }, summary(2, new Date(2026, 10, 24, 8)), { rev: 3 }], now);
  assert.deepEqual(shape(days), [["Today", [2]], ["Date unknown", [3, 1]]]);
  assert.equal(revisionText({ rev: 3 }), "Revision 3");
});
