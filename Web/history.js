// The history panel's pure part (issue 23, "Clients show time, not numbers"): a note's
// revisions, as GET /v1/records/notes/{id}/revisions lists them, grouped by local calendar day
// with the days' headings, and the sizes written as people read them. No DOM here: app.js draws
// the panel, Tests/web/history.test.mjs tests this.
//
// A revision summary: {"rev","seq","updatedAt","device","ccid","conflict","size","author"}, `updatedAt`
// an RFC 3339 UTC time, `size` (bytes of the revision's fields as JSON, UTF-8) absent from
// servers before issue 23.

const DAY = { weekday: "long", day: "numeric", month: "long", year: "numeric" };
const TIME = { hour: "2-digit", minute: "2-digit" };

/** The local calendar day of `date` as a key ("2026-10-23" for 23 November: months count from 0). */
function dayKey(date) {
  return `${date.getFullYear()}-${date.getMonth()}-${date.getDate()}`;
}

/**
 * The heading of the local day `date` falls on, seen on `now`: "Today", "Yesterday", else the
 * date in the page's locale ("Monday 23 November 2026" in en-GB, with a comma after the day's
 * name in recent ICU versions).
 */
export function dayLabel(date, now = new Date()) {
  const key = dayKey(date);
  if (key === dayKey(now)) return "Today";
  // The day before now's, counted in calendar days (a day around a DST change is 23 or 25 hours).
  if (key === dayKey(new Date(now.getFullYear(), now.getMonth(), now.getDate() - 1))) return "Yesterday";
  return date.toLocaleDateString(undefined, DAY);
}

/** The local time of a revision ("14:03", "02:03 PM"), or "" if its `updatedAt` cannot be read. */
export function revisionTime(rev) {
  const at = new Date(rev.updatedAt);
  return Number.isNaN(at.getTime()) ? "" : at.toLocaleTimeString(undefined, TIME);
}

/**
 * Revisions grouped by the local calendar day of their `updatedAt`, as seen on `now`: newest day
 * first, each day's revisions newest first (revisions of one instant: the later listed first,
 * as the server lists oldest first). A revision whose time cannot be read goes in a last group,
 * "Date unknown", so that it can still be restored.
 * @returns {{ label: string, revisions: object[] }[]}
 */
export function groupRevisionsByDay(revisions, now = new Date()) {
  const timed = revisions.map((rev, index) => ({ rev, index, at: Date.parse(rev.updatedAt) }));
  const known = timed.filter((t) => !Number.isNaN(t.at)).sort((a, b) => b.at - a.at || b.index - a.index);
  const unknown = timed.filter((t) => Number.isNaN(t.at)).reverse();
  const days = [];
  let last = null;
  for (const t of known) {
    const date = new Date(t.at);
    const key = dayKey(date);
    if (!last || last.key !== key) {
      last = { key, label: dayLabel(date, now), revisions: [] };
      days.push(last);
    }
    last.revisions.push(t.rev);
  }
  if (unknown.length) days.push({ key: "unknown", label: "Date unknown", revisions: unknown.map((t) => t.rev) });
  return days.map(({ label, revisions: revs }) => ({ label, revisions: revs }));
}

/**
 * A size in bytes as people read it, in SI units (1 KB = 1000 B, 1 MB = 1000 KB, as disks and
 * networks count): whole bytes under 1000 ("812 B"), else KB, MB or GB with one decimal
 * ("20.1 KB", "1.2 MB", "1.0 MB"), written in `locale`'s digits (the page's by default: "20,1 KB"
 * in de). "" if `bytes` is not a size (absent from older servers' summaries): no size is shown.
 */
export function formatSize(bytes, locale = undefined) {
  if (typeof bytes !== "number" || !Number.isFinite(bytes) || bytes < 0) return "";
  if (bytes < 1000) return `${Math.round(bytes)} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1000;
  let unit = 0;
  // 999 950 B is 1.0 MB, not 1000.0 KB: the unit goes up when the rounded value reaches 1000.
  while (Math.round(value * 10) >= 10000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  const digits = { minimumFractionDigits: 1, maximumFractionDigits: 1 };
  return `${value.toLocaleString(locale, digits)} ${units[unit]}`;
}

/**
 * What a revision's entry says after its time: who made it if the server says (revisions saved
 * since spaces: "by ann"), its size if the server sent one, and "conflict" for a conflict
 * revision (["by ann", "812 B", "conflict"]). Shown as text, never as markup.
 */
export function revisionDetails(rev, locale = undefined) {
  const size = formatSize(rev.size, locale);
  const author = typeof rev.author === "string" && rev.author ? [`by ${rev.author}`] : [];
  return [...author, ...(size ? [size] : []), ...(rev.conflict ? ["conflict"] : [])];
}

/**
 * What a revision's entry says before its Restore button: its local time, then its details
 * ("14:03 · 812 B · conflict"); a revision whose time cannot be read is named by its number.
 */
export function revisionText(rev, locale = undefined) {
  return [revisionTime(rev) || `Revision ${rev.rev}`, ...revisionDetails(rev, locale)].join(" · ");
}
