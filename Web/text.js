// Text helpers shared by the sync engine: UTF-16 deltas in the diff-match-patch format
// (docs/protocol.md section 1), never splitting a surrogate pair; the edit deltas and the
// strict rebase of the Swift client (`RecordMath`), computed with Web/dmp.js.

import {
  DELETE, EQUAL, INSERT, diff, diffCleanupEfficiency, diffCleanupSemanticLossless, fromDelta, patchApply, patchMake, text2Of, toDelta,
} from "./dmp.js";

const isHigh = (c) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c) => c >= 0xdc00 && c <= 0xdfff;

/** Common prefix length of a and b in UTF-16 code units, backed off a split pair. */
function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i > 0 && isHigh(a.charCodeAt(i - 1))) i--;
  return i;
}

/** Common suffix length of a and b (not overlapping `skip` units of prefix), pair-safe. */
function commonSuffix(a, b, skip = 0) {
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

/**
 * Applies a delta to `base`; throws on a malformed delta, one that does not fit, or one that
 * splits a surrogate pair. Read by Web/dmp.js's `fromDelta`, strict, as the server reads a
 * pushed delta (FieldMerger): a broadcast's delta is then read here as it was read there.
 */
export function applyDelta(base, delta) {
  return text2Of(fromDelta(base, delta, { strict: true }));
}

/**
 * Three-way merge of two edits of `base` for the editor (typing merged with a newer stored
 * state): both survive when they touch different places; where they overlap, `mine` wins.
 * Never loses what is typed. The sync engine uses the strict `rebase` below instead.
 */
export function mergeText(base, mine, theirs) {
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

/**
 * Whether two texts are equal as Swift's `String ==` sees them (canonical equivalence): the
 * Swift client leaves a field whose text only changed normalization alone, and so does this
 * (and Web/record-state.js compares field values so).
 */
export function sameText(a, b) {
  return a === b || a.normalize("NFC") === b.normalize("NFC");
}

/**
 * The edit from `old` to `neu` as the Swift client sends it (`RecordMath.editDiffs`): a diff
 * without stray one-letter matches (efficiency cleanup), aligned with words (lossless
 * cleanup), each change widened to the whole words it touches.
 */
export function editDiffs(old, neu) {
  let diffs = diff(old, neu);
  diffs = diffCleanupEfficiency(diffs);
  diffs = diffCleanupSemanticLossless(diffs);
  return wholeWords(diffs);
}

/** The word-widened delta the Swift client sends for an edit of a text field; null: no edit. */
export function editDelta(old, neu) {
  if (sameText(old, neu)) return null;
  return toDelta(editDiffs(old, neu));
}

/**
 * This device's edit (`base` to `mine`) placed onto a newer server text (`theirs`) with the
 * strict patch application, as `RecordMath.rebaseReportingConflicts` does: `{ text, clean }`,
 * clean when every hunk found its place (an unplaced hunk is left out of `text`).
 */
export function rebase(base, mine, theirs) {
  if (sameText(mine, base)) return { text: theirs, clean: true };
  if (sameText(theirs, base) || sameText(theirs, mine)) return { text: mine, clean: true };
  const patches = patchMake(base, editDiffs(base, mine));
  const applied = patchApply(patches, theirs, { strict: true });
  return { text: applied.text, clean: !applied.results.includes(false) };
}

// Word widening (`EditRuns` in RecordMath.swift) on extended grapheme clusters, as Swift's
// `Character`s: each diff's text is split on its own, as `Array(diff.text)` does. Only the
// clusters at the edges of the changes are ever looked at, so a run of text is split lazily
// (`Intl.Segmenter`'s `containing`): splitting a whole long note is slow in some engines.

const segmenter = typeof Intl !== "undefined" && Intl.Segmenter ? new Intl.Segmenter(undefined, { granularity: "grapheme" }) : null;

/** A piece of a run: `text.slice(start, end)`, split into clusters as `text` is on its own. */
class Piece {
  constructor(text, atom = false) {
    this.text = text;
    this.start = 0;
    this.end = text.length;
    this.atom = atom; // one cluster moved from another run: kept whole
    this.segments = null;
  }

  cluster(at) {
    if (this.atom) return this.text;
    if (!segmenter) {
      // Without Intl.Segmenter: code points.
      const c = this.text.codePointAt(at);
      if (c === undefined) return "";
      if (c <= 0xffff && at > 0 && (c & 0xfc00) === 0xdc00 && (this.text.charCodeAt(at - 1) & 0xfc00) === 0xd800) return this.text.slice(at - 1, at + 1);
      return String.fromCodePoint(c);
    }
    this.segments ??= segmenter.segment(this.text);
    return this.segments.containing(at).segment;
  }

  get first() {
    return this.cluster(this.start);
  }

  get last() {
    return this.cluster(this.end - 1);
  }
}

/** A run of clusters (Swift's `[Character]`) with what widening does to it. */
class Run {
  constructor() {
    this.pieces = [];
  }

  get isEmpty() {
    return this.pieces.length === 0;
  }

  get first() {
    return this.pieces.length ? this.pieces[0].first : null;
  }

  get last() {
    return this.pieces.length ? this.pieces[this.pieces.length - 1].last : null;
  }

  add(text) {
    if (text.length) this.pieces.push(new Piece(text));
  }

  removeFirst() {
    const piece = this.pieces[0];
    const c = piece.first;
    piece.start += c.length;
    if (piece.start >= piece.end) this.pieces.shift();
    return c;
  }

  removeLast() {
    const piece = this.pieces[this.pieces.length - 1];
    const c = piece.last;
    piece.end -= c.length;
    if (piece.start >= piece.end) this.pieces.pop();
    return c;
  }

  prepend(c) {
    this.pieces.unshift(new Piece(c, true));
  }

  append(c) {
    this.pieces.push(new Piece(c, true));
  }

  concat(other) {
    this.pieces.push(...other.pieces);
  }

  toString() {
    return this.pieces.map((p) => p.text.slice(p.start, p.end)).join("");
  }
}

const WHITE_SPACE = /^\p{White_Space}/u;

/** Swift's `Character.isWhitespace`: the Unicode White_Space property of its first scalar. */
function isWhitespace(character) {
  return WHITE_SPACE.test(character);
}

/** `diffs` with every change widened to the words it touches (`RecordMath.wholeWords`). */
function wholeWords(diffs) {
  // Runs of kept text with one change between each two: kept[i] before change i, kept[i + 1] after.
  const kept = [new Run()];
  const deleted = [];
  const inserted = [];
  let open = false;
  for (const [op, text] of diffs) {
    if (op === EQUAL) {
      kept[kept.length - 1].add(text);
      open = false;
      continue;
    }
    if (!open) {
      deleted.push(new Run());
      inserted.push(new Run());
      kept.push(new Run());
      open = true;
    }
    (op === DELETE ? deleted : inserted)[deleted.length - 1].add(text);
  }
  const touchesWord = (atStart, i) => [deleted[i], inserted[i]]
    .some((run) => !run.isEmpty && !isWhitespace(atStart ? run.first : run.last));
  const join = (i) => {
    deleted[i].concat(deleted[i + 1]);
    inserted[i].concat(inserted[i + 1]);
    kept.splice(i + 1, 1);
    deleted.splice(i + 1, 1);
    inserted.splice(i + 1, 1);
  };
  // One step of widening change i: [whether anything moved, i] (i may move back by one).
  const widen = (i) => {
    let widened = false;
    if (!kept[i].isEmpty && !isWhitespace(kept[i].last) && touchesWord(true, i)) {
      const last = kept[i].removeLast();
      deleted[i].prepend(last);
      inserted[i].prepend(last);
      widened = true;
    }
    if (!kept[i + 1].isEmpty && !isWhitespace(kept[i + 1].first) && touchesWord(false, i)) {
      const first = kept[i + 1].removeFirst();
      deleted[i].append(first);
      inserted[i].append(first);
      widened = true;
    }
    // A run of kept text used up: the changes on either side become one.
    if (kept[i].isEmpty && i > 0) {
      join(i - 1);
      return [true, i - 1];
    } else if (kept[i + 1].isEmpty && i + 1 < deleted.length) {
      join(i);
      return [true, i];
    }
    return [widened, i];
  };
  for (let i = 0; i < deleted.length; i++) {
    for (;;) {
      const [widened, at] = widen(i);
      i = at;
      if (!widened) break;
    }
  }
  const out = [];
  for (let k = 0; k < kept.length; k++) {
    if (!kept[k].isEmpty) out.push([EQUAL, kept[k].toString()]);
    if (k >= deleted.length) continue;
    if (!deleted[k].isEmpty) out.push([DELETE, deleted[k].toString()]);
    if (!inserted[k].isEmpty) out.push([INSERT, inserted[k].toString()]);
  }
  return out;
}

/**
 * The next `ccid` of this page: a version-8 UUID (RFC 9562) of 74 random bits drawn once per
 * page load and a 48-bit counter, `rrrrrrrr-rrrr-8rrr-Vrrr-cccccccccccc`, as NotedClient's
 * `ChangeID`. A random v4 id per change costs about 18 bytes of every push even with
 * permessage-deflate; consecutive ids of one page differ only in the counter, which deflate's
 * context takeover sends as a back-reference (docs/benchmarks.md, "Bytes per keystroke"). The
 * random prefix keeps two pages' (two tabs', two devices') ids apart, the counter one page's;
 * a change is stored with its ccid before the first send, so a reload never needs the counter.
 */
export function changeID() {
  if (!ccidHead) {
    const b = crypto.getRandomValues(new Uint8Array(10));
    const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
    const variant = (8 | (b[9] & 3)).toString(16);
    ccidHead = `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(12, 15)}-${variant}${h.slice(15, 18)}-`;
  }
  ccidCount += 1;
  return ccidHead + ccidCount.toString(16).padStart(12, "0");
}
let ccidHead = null;
let ccidCount = 0;

/** A random v4 UUID in canonical lower-case form. */
export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
