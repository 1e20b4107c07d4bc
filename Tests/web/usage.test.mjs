// Unit tests of what the Account panel says the account uses (Web/usage.js): sizes in units of
// 1024, the quotas or "no limit", and the warning at or over a quota. No DOM here: the browser
// test (test_account_panel_shows_what_the_account_uses_and_when_it_is_full in
// Tests/peers/test_webapp_account.py) draws it against a real server with a small quota.
//   node --experimental-detect-module --test Tests/web/usage.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { SIZE_UNITS, formatBytes, usageSummary } from "../../Web/usage.js";

const KB = 1024;
const MB = 1024 * KB;
const GB = 1024 * MB;

test("formatBytes: whole bytes under 1 KB, then KB, MB, GB in units of 1024", () => {
  assert.equal(formatBytes(0, "en"), "0 bytes");
  assert.equal(formatBytes(1, "en"), "1 byte");
  assert.equal(formatBytes(812, "en"), "812 bytes");
  assert.equal(formatBytes(1023, "en"), "1,023 bytes");
  assert.equal(formatBytes(1024, "en"), "1 KB");
  assert.equal(formatBytes(1536, "en"), "1.5 KB");
  assert.equal(formatBytes(50 * KB, "en"), "50 KB");
  assert.equal(formatBytes(Math.round(12.3 * MB), "en"), "12.3 MB");
  assert.equal(formatBytes(Math.round(2.14 * MB), "en"), "2.1 MB");
  assert.equal(formatBytes(GB, "en"), "1 GB", "the server's default quota, 1 GiB");
  assert.equal(formatBytes(512 * MB, "en"), "512 MB");
  assert.equal(formatBytes(2 * 1024 * GB, "en"), "2 TB");
  assert.equal(formatBytes(5000 * 1024 * GB, "en"), "5,000 TB", "TB is the largest unit");
  assert.match(SIZE_UNITS, /1 KB = 1024 bytes/);
});

test("formatBytes: one decimal under 100, none from 100, and the unit goes up at a rounded 1024", () => {
  assert.equal(formatBytes(99.94 * KB, "en"), "99.9 KB");
  assert.equal(formatBytes(99.96 * KB, "en"), "100 KB");
  assert.equal(formatBytes(123.4 * KB, "en"), "123 KB");
  assert.equal(formatBytes(1023.4 * KB, "en"), "1,023 KB");
  assert.equal(formatBytes(1023.6 * KB, "en"), "1 MB", "not 1,024 KB");
  assert.equal(formatBytes(MB - 1, "en"), "1 MB");
  assert.equal(formatBytes(GB - 1, "en"), "1 GB");
});

test("formatBytes: the locale's digits; nothing for what is not a size", () => {
  assert.equal(formatBytes(Math.round(12.3 * MB), "de"), "12,3 MB");
  assert.equal(formatBytes(1023, "de"), "1.023 bytes");
  for (const bad of [undefined, null, "12", -1, NaN, Infinity]) assert.equal(formatBytes(bad, "en"), "", String(bad));
});

test("usageSummary: used, history and the quotas", () => {
  const s = usageSummary({ bytes: Math.round(12.3 * MB), history_bytes: Math.round(2.1 * MB), records: 1234, quota_bytes: GB, quota_records: 1000000 }, "en");
  assert.equal(s.text, "Storage: 12.3 MB of 1 GB used (history 2.1 MB) · 1,234 notes and records of 1,000,000");
  assert.equal(s.storage, "Storage: 12.3 MB of 1 GB used (history 2.1 MB)");
  assert.equal(s.records, "1,234 notes and records of 1,000,000");
  assert.equal(s.bytes, Math.round(12.3 * MB));
  assert.equal(s.quotaBytes, GB);
  assert.equal(s.used, "12.3 MB of 1 GB, 1% used");
  assert.equal(s.full, null);
  assert.equal(s.warning, "");
});

test("usageSummary: a null quota is no limit", () => {
  const s = usageSummary({ bytes: 2048, history_bytes: 0, records: 1, quota_bytes: null, quota_records: null }, "en");
  assert.equal(s.text, "Storage: 2 KB used, no limit (history 0 bytes) · 1 note or record, no limit");
  assert.equal(s.quotaBytes, null);
  assert.equal(s.used, "");
  assert.equal(s.full, null);
  // Absent or nonsense quotas too (0 is the server's flag for no limit, never sent as a quota).
  assert.equal(usageSummary({ bytes: 0, history_bytes: 0, records: 0, quota_bytes: 0 }, "en").text,
    "Storage: 0 bytes used, no limit (history 0 bytes) · 0 notes and records, no limit");
});

test("usageSummary: at or over the storage quota, edits are refused until something is deleted", () => {
  const under = usageSummary({ bytes: 51199, history_bytes: 40000, records: 3, quota_bytes: 51200, quota_records: 100 }, "en");
  assert.equal(under.full, null);
  assert.equal(under.used, "50 KB of 50 KB, 99% used", "rounded down: not 100% until it is");
  for (const bytes of [51200, 60000]) {
    const s = usageSummary({ bytes, history_bytes: 40000, records: 3, quota_bytes: 51200, quota_records: 100 }, "en");
    assert.equal(s.full, "bytes");
    assert.match(s.warning, /new edits are refused until something is deleted/);
    assert.match(s.warning, /also deletes its history/);
  }
  assert.equal(usageSummary({ bytes: 60000, history_bytes: 0, records: 0, quota_bytes: 51200 }, "en").used, "58.6 KB of 50 KB, 117% used");
});

test("usageSummary: at the count of records, new notes are refused", () => {
  const s = usageSummary({ bytes: 100, history_bytes: 0, records: 10, quota_bytes: null, quota_records: 10 }, "en");
  assert.equal(s.full, "records");
  assert.match(s.warning, /new notes are refused until some are deleted/);
  assert.equal(s.records, "10 notes and records of 10");
});

test("usageSummary: none from a server that does not report usage", () => {
  assert.equal(usageSummary(undefined), null);
  assert.equal(usageSummary(null), null);
  assert.equal(usageSummary("12 MB"), null);
  // Missing or bad numbers count as 0 rather than showing "NaN".
  assert.equal(usageSummary({}, "en").text, "Storage: 0 bytes used, no limit (history 0 bytes) · 0 notes and records, no limit");
});
