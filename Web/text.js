// Text helpers shared by the sync engine: UTF-16 deltas in the diff-match-patch format
// (docs/protocol.md section 1), never splitting a surrogate pair.

const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;

/** Common prefix length of a and b in UTF-16 code units, backed off a split pair. */
export function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i > 0 && isHigh(a.charCodeAt(i - 1))) i--;
  return i;
}

/** Common suffix length of a and b (not overlapping `skip` units of prefix), pair-safe. */
export function commonSuffix(a, b, skip = 0) {
  const n = Math.min(a.length, b.length) - skip;
  let i = 0;
  while (i < n && a.charCodeAt(a.length - 1 - i) === b.charCodeAt(b.length - 1 - i)) i++;
  if (i > 0 && isLow(a.charCodeAt(a.length - i))) i--;
  return i;
}

/** The one hunk that turns `from` into `to`: start, end in `from`, end in `to`. */
export function hunk(from, to) {
  const p = commonPrefix(from, to);
  const q = commonSuffix(from, to, p);
  return { start: p, end: from.length - q, toEnd: to.length - q };
}

/** encodeURI as the reference's diff_toDelta uses it: spaces stay spaces. */
export function encodeText(text) {
  return encodeURI(text).replace(/%20/g, " ");
}

/** A diff-match-patch delta that turns `from` into `to` (one hunk is enough to be valid). */
export function makeDelta(from, to) {
  const h = hunk(from, to);
  const parts = [];
  if (h.start > 0) parts.push("=" + h.start);
  if (h.end > h.start) parts.push("-" + (h.end - h.start));
  if (h.toEnd > h.start) parts.push("+" + encodeText(to.slice(h.start, h.toEnd)));
  if (from.length - h.end > 0) parts.push("=" + (from.length - h.end));
  return parts.join("\t");
}

/** Applies a delta to `base`; throws on a malformed delta or one that does not fit. */
export function applyDelta(base, delta) {
  let out = "";
  let pointer = 0;
  for (const token of delta.split("\t")) {
    if (token === "") continue;
    const sign = token[0];
    const param = token.slice(1);
    if (sign === "+") {
      out += decodeURI(param);
    } else if (sign === "=" || sign === "-") {
      if (!/^\d+$/.test(param)) throw new Error("bad delta count " + param);
      const n = Number(param);
      if (pointer + n > base.length) throw new Error("delta longer than its base");
      if (sign === "=") out += base.slice(pointer, pointer + n);
      pointer += n;
    } else {
      throw new Error("bad delta operation " + sign);
    }
  }
  if (pointer !== base.length) throw new Error("delta shorter than its base");
  return out;
}

/**
 * Three-way merge of two edits of `base`: both survive when they touch different places;
 * where they overlap, `mine` wins (the server keeps the other version in the history).
 */
export function rebase(base, mine, theirs) {
  if (mine === base) return theirs;
  if (theirs === base || theirs === mine) return mine;
  const m = hunk(base, mine);
  const t = hunk(base, theirs);
  // Two insertions at the same place: the server's text goes first, then the local one.
  const bothInsertHere = m.start === m.end && t.start === t.end && m.start === t.start;
  if (m.end <= t.start && !bothInsertHere) {
    // Mine comes first.
    return base.slice(0, m.start) + mine.slice(m.start, m.toEnd) + base.slice(m.end, t.start) +
      theirs.slice(t.start, t.toEnd) + base.slice(t.end);
  }
  if (t.end <= m.start) {
    return base.slice(0, t.start) + theirs.slice(t.start, t.toEnd) + base.slice(t.end, m.start) +
      mine.slice(m.start, m.toEnd) + base.slice(m.end);
  }
  // Overlap: replace the union of both regions with mine's text for it.
  const start = Math.min(m.start, t.start);
  const end = Math.max(m.end, t.end);
  const mineTail = base.length - end;
  return theirs.slice(0, start) + mine.slice(start, mine.length - mineTail) +
    theirs.slice(theirs.length - mineTail);
}

/** A random v4 UUID in canonical lower-case form. */
export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
