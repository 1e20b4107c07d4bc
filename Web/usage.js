// What the account uses, as the Account panel says it (its pure part; Web/account.js draws it,
// Tests/web/usage.test.mjs tests this). GET /v1/account's `usage` (docs/protocol.md, "The
// signed-in account"): {"bytes","history_bytes","records","quota_bytes","quota_records"},
// `bytes` what the quota counts (the records' fields, attachments and the history's stored
// revisions), `history_bytes` the history's part of it; a quota is null where there is no limit.
// No DOM here.

const UNITS = ["KB", "MB", "GB", "TB"];

/** How sizes are counted, said where they are shown (a tooltip): the server's default quota, 1 GiB, reads "1 GB". */
export const SIZE_UNITS = "1 KB = 1024 bytes, 1 MB = 1024 KB, 1 GB = 1024 MB";

/** `value` rounded as shown: one decimal under 100 ("12.3"), whole from 100 ("512"). */
function shown(value) {
  return value < 99.95 ? Math.round(value * 10) / 10 : Math.round(value);
}

/**
 * A size in bytes as people read it, in units of 1024 (SIZE_UNITS): whole bytes under 1 KB
 * ("812 bytes", "1 byte"), else KB, MB, GB or TB with one decimal under 100 and none from 100,
 * a trailing ".0" left out ("12.3 MB", "1 GB", "512 MB"), written in `locale`'s digits (the
 * page's by default). "" if `bytes` is not a size.
 */
export function formatBytes(bytes, locale = undefined) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes) || bytes < 0) return "";
  if (bytes < 1024) {
    const n = Math.round(bytes);
    return `${n.toLocaleString(locale)} byte${n === 1 ? "" : "s"}`;
  }
  let value = bytes / 1024;
  let unit = 0;
  // 1,048,500 bytes is 1 MB, not 1024 KB: the unit goes up when the rounded value reaches 1024.
  while (shown(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${shown(value).toLocaleString(locale, { maximumFractionDigits: 1 })} ${UNITS[unit]}`;
}

/** A count as a non-negative whole number (0 for anything else). */
function count(n) {
  const v = Number(n);
  return Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

/** A quota: a positive number, else null (no limit). */
function limit(n) {
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? n : null;
}

/**
 * What the panel says of `usage` (GET /v1/account's), or null if there is none (a server
 * before usage was reported):
 * - `storage`: "Storage: 12.3 MB of 1 GB used (history 2.1 MB)", or "Storage: 12.3 MB used,
 *   no limit (history 2.1 MB)";
 * - `records`: "1,234 notes and records of 1,000,000", or "…, no limit";
 * - `text`: the two, joined by " · ";
 * - `bytes`, `quotaBytes` (null: no limit): for a meter of the storage used, and `used`, what
 *   it says of them ("12.3 MB of 1 GB, 1% used", the percentage rounded down; "" without a quota);
 * - `full`: "bytes" when the account is at or over its storage quota (every edit but a delete
 *   is refused), "records" at or over its count of records (new notes are refused), else null;
 * - `warning`: what to say of it, "" when not full.
 */
export function usageSummary(usage, locale = undefined) {
  if (!usage || typeof usage !== "object") return null;
  const bytes = count(usage.bytes);
  const history = count(usage.history_bytes);
  const records = count(usage.records);
  const quotaBytes = limit(usage.quota_bytes);
  const quotaRecords = limit(usage.quota_records);
  const storage = `Storage: ${formatBytes(bytes, locale)}` +
    (quotaBytes === null ? " used, no limit" : ` of ${formatBytes(quotaBytes, locale)} used`) +
    ` (history ${formatBytes(history, locale)})`;
  const kinds = records === 1 ? "note or record" : "notes and records";
  const counted = `${records.toLocaleString(locale)} ${kinds}` +
    (quotaRecords === null ? ", no limit" : ` of ${quotaRecords.toLocaleString(locale)}`);
  let full = null;
  let warning = "";
  if (quotaBytes !== null && bytes >= quotaBytes) {
    full = "bytes";
    warning = "The account’s storage is full: new edits are refused until something is deleted. " +
      "Deleting a note (Delete forever, in the Trash) also deletes its history.";
  } else if (quotaRecords !== null && records >= quotaRecords) {
    full = "records";
    warning = "The account has as many notes and records as it may keep: new notes are refused until some are deleted " +
      "(Delete forever, in the Trash).";
  }
  const used = quotaBytes === null ? ""
    : `${formatBytes(bytes, locale)} of ${formatBytes(quotaBytes, locale)}, ${Math.floor((100 * bytes) / quotaBytes).toLocaleString(locale)}% used`;
  return { storage, records: counted, text: `${storage} · ${counted}`, bytes, quotaBytes, used, full, warning };
}
