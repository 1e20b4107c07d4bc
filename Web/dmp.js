// Diff, match and patch for the web app, written from the Swift port in this repository
// (Sources/DiffMatchPatch) so that both clients compute the same diffs, deltas and strict
// patch applications for the same inputs (Tests/web/vectors.test.mjs checks it against
// vectors the Swift code generated).
//
// Everything works on JavaScript strings, that is on UTF-16 code units, as the Swift port
// does on its `[UInt16]`: every offset and length is in code units. Diffs are `[op, text]`
// pairs with op DELETE (-1), EQUAL (0) or INSERT (1). The functions a caller uses keep
// surrogate pairs whole (`repairPairs`, the Swift `Surrogates.repair`), as the Swift public
// API does; the internal ones are the step-for-step ports.

export const DELETE = -1;
export const EQUAL = 0;
export const INSERT = 1;

/** The Swift `DiffMatchPatch.Configuration` defaults (the reference's). */
export const config = {
  diffTimeout: 1.0, // seconds; 0: no limit (and no half-match)
  diffEditCost: 4,
  matchThreshold: 0.5,
  matchDistance: 1000,
  patchDeleteThreshold: 0.5,
  patchMargin: 4,
  matchMaxBits: 32,
};

const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

/** The deadline of a diff started now (ms on `now()`'s clock), or null for none. */
function defaultDeadline() {
  const s = config.diffTimeout;
  if (!(s > 0) || !Number.isFinite(s) || s >= 365 * 24 * 3600) return null;
  return now() + s * 1000;
}

const maxBits = () => Math.min(32, Math.max(4, config.matchMaxBits));
const margin = () => Math.min(Math.max(0, config.patchMargin), Math.floor((maxBits() - 2) / 2));

const isHigh = (u) => (u & 0xfc00) === 0xd800;
const isLow = (u) => (u & 0xfc00) === 0xdc00;

/** What Swift's String makes of UTF-16 units: an unpaired surrogate becomes U+FFFD. */
export function wellFormed(s) {
  if (typeof s.isWellFormed === "function") return s.isWellFormed() ? s : s.toWellFormed();
  return s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

// MARK: Diff

function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

function commonSuffix(a, b) {
  const l1 = a.length;
  const l2 = b.length;
  const n = Math.min(l1, l2);
  let i = 0;
  while (i < n && a.charCodeAt(l1 - 1 - i) === b.charCodeAt(l2 - 1 - i)) i++;
  return i;
}

/** Length of the longest suffix of `a` that is a prefix of `b`. */
function commonOverlap(a, b) {
  if (a.length === 0 || b.length === 0) return 0;
  if (a.length > b.length) a = a.substring(a.length - b.length);
  else if (a.length < b.length) b = b.substring(0, a.length);
  const textLength = Math.min(a.length, b.length);
  if (a === b) return textLength;
  let best = 0;
  let length = 1;
  for (;;) {
    const pattern = a.substring(textLength - length);
    const found = b.indexOf(pattern);
    if (found === -1) return best;
    length += found;
    if (found === 0 || a.substring(textLength - length) === b.substring(0, length)) {
      best = length;
      length++;
    }
  }
}

function diffMain(text1, text2, checkLines, deadline) {
  if (text1 === text2) return text1.length ? [[EQUAL, text1]] : [];
  const prefixLength = commonPrefix(text1, text2);
  const prefix = text1.substring(0, prefixLength);
  let a = text1.substring(prefixLength);
  let b = text2.substring(prefixLength);
  const suffixLength = commonSuffix(a, b);
  const suffix = a.substring(a.length - suffixLength);
  a = a.substring(0, a.length - suffixLength);
  b = b.substring(0, b.length - suffixLength);
  const diffs = diffCompute(a, b, checkLines, deadline);
  if (prefix.length) diffs.unshift([EQUAL, prefix]);
  if (suffix.length) diffs.push([EQUAL, suffix]);
  cleanupMerge(diffs);
  return diffs;
}

function diffCompute(text1, text2, checkLines, deadline) {
  if (!text1.length) return [[INSERT, text2]];
  if (!text2.length) return [[DELETE, text1]];
  const longFirst = text1.length > text2.length;
  const longText = longFirst ? text1 : text2;
  const shortText = longFirst ? text2 : text1;
  const i = longText.indexOf(shortText);
  if (i !== -1) {
    const op = longFirst ? DELETE : INSERT;
    return [[op, longText.substring(0, i)], [EQUAL, shortText], [op, longText.substring(i + shortText.length)]];
  }
  if (shortText.length === 1) return [[DELETE, text1], [INSERT, text2]];
  const hm = halfMatch(text1, text2);
  if (hm) {
    const diffs = diffMain(hm.text1A, hm.text2A, checkLines, deadline);
    diffs.push([EQUAL, hm.common]);
    return diffs.concat(diffMain(hm.text1B, hm.text2B, checkLines, deadline));
  }
  if (checkLines && text1.length > 100 && text2.length > 100) return diffLineMode(text1, text2, deadline);
  return bisect(text1, text2, deadline);
}

/** A quick line-level diff, then a character diff of the replaced blocks. */
function diffLineMode(text1, text2, deadline) {
  const { chars1, chars2, lineArray } = linesToChars(text1, text2);
  const diffs = diffMain(chars1, chars2, false, deadline);
  charsToLines(diffs, lineArray);
  cleanupSemantic(diffs);
  diffs.push([EQUAL, ""]);
  let pointer = 0;
  let countDelete = 0;
  let countInsert = 0;
  let textDelete = "";
  let textInsert = "";
  while (pointer < diffs.length) {
    switch (diffs[pointer][0]) {
      case INSERT:
        countInsert++;
        textInsert += diffs[pointer][1];
        break;
      case DELETE:
        countDelete++;
        textDelete += diffs[pointer][1];
        break;
      case EQUAL:
        if (countDelete >= 1 && countInsert >= 1) {
          const start = pointer - countDelete - countInsert;
          diffs.splice(start, countDelete + countInsert);
          pointer = start;
          const sub = diffMain(textDelete, textInsert, false, deadline);
          diffs.splice(pointer, 0, ...sub);
          pointer += sub.length;
        }
        countInsert = 0;
        countDelete = 0;
        textDelete = "";
        textInsert = "";
        break;
    }
    pointer++;
  }
  diffs.pop();
  return diffs;
}

/** Myers' O(ND) bisection: finds the middle snake and recurses on both halves. */
function bisect(text1, text2, deadline) {
  const length1 = text1.length;
  const length2 = text2.length;
  const maxD = Math.floor((length1 + length2 + 1) / 2);
  const vOffset = maxD;
  const vLength = 2 * maxD;
  const v1 = new Int32Array(vLength + 2).fill(-1);
  const v2 = new Int32Array(vLength + 2).fill(-1);
  v1[vOffset + 1] = 0;
  v2[vOffset + 1] = 0;
  const delta = length1 - length2;
  const front = delta % 2 !== 0;
  let k1start = 0;
  let k1end = 0;
  let k2start = 0;
  let k2end = 0;
  let split = null;
  outer: for (let d = 0; d < maxD; d++) {
    if (deadline !== null && now() > deadline) break;
    for (let k1 = -d + k1start; k1 <= d - k1end; k1 += 2) {
      const k1Offset = vOffset + k1;
      let x1;
      if (k1 === -d || (k1 !== d && v1[k1Offset - 1] < v1[k1Offset + 1])) x1 = v1[k1Offset + 1];
      else x1 = v1[k1Offset - 1] + 1;
      let y1 = x1 - k1;
      while (x1 < length1 && y1 < length2 && text1.charCodeAt(x1) === text2.charCodeAt(y1)) {
        x1++;
        y1++;
      }
      v1[k1Offset] = x1;
      if (x1 > length1) {
        k1end += 2;
      } else if (y1 > length2) {
        k1start += 2;
      } else if (front) {
        const k2Offset = vOffset + delta - k1;
        if (k2Offset >= 0 && k2Offset < vLength && v2[k2Offset] !== -1) {
          const x2 = length1 - v2[k2Offset];
          if (x1 >= x2) {
            split = [x1, y1];
            break outer;
          }
        }
      }
    }
    for (let k2 = -d + k2start; k2 <= d - k2end; k2 += 2) {
      const k2Offset = vOffset + k2;
      let x2;
      if (k2 === -d || (k2 !== d && v2[k2Offset - 1] < v2[k2Offset + 1])) x2 = v2[k2Offset + 1];
      else x2 = v2[k2Offset - 1] + 1;
      let y2 = x2 - k2;
      while (x2 < length1 && y2 < length2 &&
        text1.charCodeAt(length1 - x2 - 1) === text2.charCodeAt(length2 - y2 - 1)) {
        x2++;
        y2++;
      }
      v2[k2Offset] = x2;
      if (x2 > length1) {
        k2end += 2;
      } else if (y2 > length2) {
        k2start += 2;
      } else if (!front) {
        const k1Offset = vOffset + delta - k2;
        if (k1Offset >= 0 && k1Offset < vLength && v1[k1Offset] !== -1) {
          const x1 = v1[k1Offset];
          const y1 = vOffset + x1 - k1Offset;
          if (x1 >= length1 - x2) {
            split = [x1, y1];
            break outer;
          }
        }
      }
    }
  }
  if (split) {
    const [x, y] = split;
    const diffs = diffMain(text1.substring(0, x), text2.substring(0, y), false, deadline);
    return diffs.concat(diffMain(text1.substring(x), text2.substring(y), false, deadline));
  }
  // Out of time, or no commonality at all.
  return [[DELETE, text1], [INSERT, text2]];
}

/** Maps each line of both texts to one code unit, for a line-level diff. */
function linesToChars(text1, text2) {
  // Index 0 stays empty so that no line maps to U+0000.
  const lineArray = [""];
  const lineHash = new Map();
  function munge(text, maxLines) {
    let chars = "";
    let lineStart = 0;
    let lineEnd = -1;
    while (lineEnd < text.length - 1) {
      lineEnd = text.indexOf("\n", lineStart);
      if (lineEnd === -1) lineEnd = text.length - 1;
      let line = text.substring(lineStart, lineEnd + 1);
      const index = lineHash.get(line);
      if (index !== undefined) {
        chars += String.fromCharCode(index & 0xffff);
      } else {
        if (lineArray.length === maxLines) {
          // Out of code units: the rest of the text is one "line".
          line = text.substring(lineStart);
          lineEnd = text.length;
        }
        chars += String.fromCharCode(lineArray.length & 0xffff);
        lineHash.set(line, lineArray.length);
        lineArray.push(line);
      }
      lineStart = lineEnd + 1;
    }
    return chars;
  }
  const chars1 = munge(text1, 40000);
  const chars2 = munge(text2, 65535);
  return { chars1, chars2, lineArray };
}

function charsToLines(diffs, lineArray) {
  for (const diff of diffs) {
    let text = "";
    for (let j = 0; j < diff[1].length; j++) {
      const c = diff[1].charCodeAt(j);
      if (c < lineArray.length) text += lineArray[c];
    }
    diff[1] = text;
  }
}

/** Whether the texts share a substring at least half the length of the longer one. */
function halfMatch(text1, text2) {
  if (config.diffTimeout <= 0) return null;
  const longFirst = text1.length > text2.length;
  const longText = longFirst ? text1 : text2;
  const shortText = longFirst ? text2 : text1;
  if (longText.length < 4 || shortText.length * 2 < longText.length) return null;

  function halfMatchI(i) {
    const seed = longText.substring(i, i + Math.floor(longText.length / 4));
    let j = -1;
    let bestCommon = 0;
    let best = null;
    for (;;) {
      j = shortText.indexOf(seed, j + 1);
      if (j === -1) break;
      const prefixLength = commonPrefix(longText.substring(i), shortText.substring(j));
      const suffixLength = commonSuffix(longText.substring(0, i), shortText.substring(0, j));
      if (bestCommon < suffixLength + prefixLength) {
        bestCommon = suffixLength + prefixLength;
        best = {
          longA: longText.substring(0, i - suffixLength), longB: longText.substring(i + prefixLength),
          shortA: shortText.substring(0, j - suffixLength), shortB: shortText.substring(j + prefixLength),
          common: bestCommon, commonStart: j - suffixLength,
        };
      }
    }
    return bestCommon * 2 >= longText.length ? best : null;
  }
  const hm1 = halfMatchI(Math.floor((longText.length + 3) / 4));
  const hm2 = halfMatchI(Math.floor((longText.length + 1) / 2));
  let hm;
  if (!hm1 && !hm2) return null;
  else if (!hm2) hm = hm1;
  else if (!hm1) hm = hm2;
  else hm = hm1.common > hm2.common ? hm1 : hm2;
  const common = shortText.substring(hm.commonStart, hm.commonStart + hm.common);
  if (longFirst) return { text1A: hm.longA, text1B: hm.longB, text2A: hm.shortA, text2B: hm.shortB, common };
  return { text1A: hm.shortA, text1B: hm.shortB, text2A: hm.longA, text2B: hm.longB, common };
}

// MARK: Cleanup

/** Reorders and merges like edit sections and factors out common prefixes and suffixes. */
function cleanupMerge(diffs) {
  diffs.push([EQUAL, ""]);
  let pointer = 0;
  let countDelete = 0;
  let countInsert = 0;
  let textDelete = "";
  let textInsert = "";
  while (pointer < diffs.length) {
    const op = diffs[pointer][0];
    if (op === INSERT) {
      countInsert++;
      textInsert += diffs[pointer][1];
      pointer++;
    } else if (op === DELETE) {
      countDelete++;
      textDelete += diffs[pointer][1];
      pointer++;
    } else {
      if (countDelete + countInsert > 1) {
        if (countDelete !== 0 && countInsert !== 0) {
          let common = commonPrefix(textInsert, textDelete);
          if (common !== 0) {
            const before = pointer - countDelete - countInsert;
            if (before > 0 && diffs[before - 1][0] === EQUAL) {
              diffs[before - 1][1] += textInsert.substring(0, common);
            } else {
              diffs.unshift([EQUAL, textInsert.substring(0, common)]);
              pointer++;
            }
            textInsert = textInsert.substring(common);
            textDelete = textDelete.substring(common);
          }
          common = commonSuffix(textInsert, textDelete);
          if (common !== 0) {
            diffs[pointer][1] = textInsert.substring(textInsert.length - common) + diffs[pointer][1];
            textInsert = textInsert.substring(0, textInsert.length - common);
            textDelete = textDelete.substring(0, textDelete.length - common);
          }
        }
        pointer -= countDelete + countInsert;
        diffs.splice(pointer, countDelete + countInsert);
        if (textDelete.length) {
          diffs.splice(pointer, 0, [DELETE, textDelete]);
          pointer++;
        }
        if (textInsert.length) {
          diffs.splice(pointer, 0, [INSERT, textInsert]);
          pointer++;
        }
        pointer++;
      } else if (pointer !== 0 && diffs[pointer - 1][0] === EQUAL) {
        diffs[pointer - 1][1] += diffs[pointer][1];
        diffs.splice(pointer, 1);
      } else {
        pointer++;
      }
      countInsert = 0;
      countDelete = 0;
      textDelete = "";
      textInsert = "";
    }
  }
  if (diffs.length && diffs[diffs.length - 1][1] === "") diffs.pop();

  // Second pass: single edits surrounded by equalities that can be shifted sideways to
  // eliminate an equality, e.g. A<ins>BA</ins>C -> <ins>AB</ins>AC.
  let changes = false;
  pointer = 1;
  while (pointer < diffs.length - 1) {
    if (diffs[pointer - 1][0] === EQUAL && diffs[pointer + 1][0] === EQUAL) {
      const previous = diffs[pointer - 1][1];
      const edit = diffs[pointer][1];
      const next = diffs[pointer + 1][1];
      if (edit.length >= previous.length && edit.substring(edit.length - previous.length) === previous) {
        diffs[pointer][1] = previous + edit.substring(0, edit.length - previous.length);
        diffs[pointer + 1][1] = previous + next;
        diffs.splice(pointer - 1, 1);
        changes = true;
      } else if (edit.length >= next.length && edit.substring(0, next.length) === next) {
        diffs[pointer - 1][1] += next;
        diffs[pointer][1] = edit.substring(next.length) + next;
        diffs.splice(pointer + 1, 1);
        changes = true;
      }
    }
    pointer++;
  }
  if (changes) cleanupMerge(diffs);
}

/**
 * The reference's stack of equality indices, with its quirk: its length may drop below zero,
 * and later pushes then fill negative slots (reproduced as the Swift port does).
 */
class EqualityStack {
  constructor() {
    this.storage = new Map();
    this.length = 0;
  }
  push(index) {
    this.storage.set(this.length, index);
    this.length++;
  }
  pop() {
    this.length--;
  }
  get top() {
    const v = this.storage.get(this.length - 1);
    return v === undefined ? -1 : v;
  }
}

/** Removes semantically trivial equalities, then aligns edits and factors out overlaps. */
function cleanupSemantic(diffs) {
  let changes = false;
  const equalities = new EqualityStack();
  let lastEquality = null;
  let pointer = 0;
  let lengthInsertions1 = 0;
  let lengthDeletions1 = 0;
  let lengthInsertions2 = 0;
  let lengthDeletions2 = 0;
  while (pointer < diffs.length) {
    if (diffs[pointer][0] === EQUAL) {
      equalities.push(pointer);
      lengthInsertions1 = lengthInsertions2;
      lengthDeletions1 = lengthDeletions2;
      lengthInsertions2 = 0;
      lengthDeletions2 = 0;
      lastEquality = diffs[pointer][1];
    } else {
      if (diffs[pointer][0] === INSERT) lengthInsertions2 += diffs[pointer][1].length;
      else lengthDeletions2 += diffs[pointer][1].length;
      if (lastEquality !== null && lastEquality.length &&
        lastEquality.length <= Math.max(lengthInsertions1, lengthDeletions1) &&
        lastEquality.length <= Math.max(lengthInsertions2, lengthDeletions2)) {
        const at = equalities.top;
        diffs.splice(at, 0, [DELETE, lastEquality]);
        diffs[at + 1][0] = INSERT;
        equalities.pop();
        equalities.pop();
        pointer = equalities.length > 0 ? equalities.top : -1;
        lengthInsertions1 = 0;
        lengthDeletions1 = 0;
        lengthInsertions2 = 0;
        lengthDeletions2 = 0;
        lastEquality = null;
        changes = true;
      }
    }
    pointer++;
  }
  if (changes) cleanupMerge(diffs);
  cleanupSemanticLossless(diffs);

  // Overlaps between deletions and insertions, when as big as the edit ahead or behind.
  pointer = 1;
  while (pointer < diffs.length) {
    if (diffs[pointer - 1][0] === DELETE && diffs[pointer][0] === INSERT) {
      const deletion = diffs[pointer - 1][1];
      const insertion = diffs[pointer][1];
      const overlap1 = commonOverlap(deletion, insertion);
      const overlap2 = commonOverlap(insertion, deletion);
      if (overlap1 >= overlap2) {
        if (overlap1 >= deletion.length / 2 || overlap1 >= insertion.length / 2) {
          diffs.splice(pointer, 0, [EQUAL, insertion.substring(0, overlap1)]);
          diffs[pointer - 1][1] = deletion.substring(0, deletion.length - overlap1);
          diffs[pointer + 1][1] = insertion.substring(overlap1);
          pointer++;
        }
      } else if (overlap2 >= deletion.length / 2 || overlap2 >= insertion.length / 2) {
        diffs.splice(pointer, 0, [EQUAL, deletion.substring(0, overlap2)]);
        diffs[pointer - 1] = [INSERT, insertion.substring(0, insertion.length - overlap2)];
        diffs[pointer + 1] = [DELETE, deletion.substring(overlap2)];
        pointer++;
      }
      pointer++;
    }
    pointer++;
  }
}

/** `/[a-zA-Z0-9]/` on one code unit. */
function isAlphaNumeric(u) {
  return (u >= 0x30 && u <= 0x39) || (u >= 0x41 && u <= 0x5a) || (u >= 0x61 && u <= 0x7a);
}

/** JavaScript's `/\s/` on one code unit, as the Swift port spells it out. */
function isSpace(u) {
  return (u >= 0x09 && u <= 0x0d) || u === 0x20 || u === 0xa0 || u === 0x1680 || (u >= 0x2000 && u <= 0x200a) ||
    u === 0x2028 || u === 0x2029 || u === 0x202f || u === 0x205f || u === 0x3000 || u === 0xfeff;
}

/** `/\n\r?\n$/` */
function endsWithBlankLine(t) {
  const n = t.length;
  if (n >= 2 && t.charCodeAt(n - 1) === 0x0a && t.charCodeAt(n - 2) === 0x0a) return true;
  return n >= 3 && t.charCodeAt(n - 3) === 0x0a && t.charCodeAt(n - 2) === 0x0d && t.charCodeAt(n - 1) === 0x0a;
}

/** `/^\r?\n\r?\n/` */
function startsWithBlankLine(t) {
  let i = 0;
  if (t.charCodeAt(i) === 0x0d) i++;
  if (t.charCodeAt(i) !== 0x0a) return false;
  i++;
  if (t.charCodeAt(i) === 0x0d) i++;
  return t.charCodeAt(i) === 0x0a;
}

/** How good a boundary between `one` and `two` is: 6 (text edge) down to 0 (mid-word). */
function semanticScore(one, two) {
  if (!one.length || !two.length) return 6;
  const char1 = one.charCodeAt(one.length - 1);
  const char2 = two.charCodeAt(0);
  const nonAlphaNumeric1 = !isAlphaNumeric(char1);
  const nonAlphaNumeric2 = !isAlphaNumeric(char2);
  const whitespace1 = nonAlphaNumeric1 && isSpace(char1);
  const whitespace2 = nonAlphaNumeric2 && isSpace(char2);
  const lineBreak1 = whitespace1 && (char1 === 0x0d || char1 === 0x0a);
  const lineBreak2 = whitespace2 && (char2 === 0x0d || char2 === 0x0a);
  const blankLine1 = lineBreak1 && endsWithBlankLine(one);
  const blankLine2 = lineBreak2 && startsWithBlankLine(two);
  if (blankLine1 || blankLine2) return 5;
  if (lineBreak1 || lineBreak2) return 4;
  if (nonAlphaNumeric1 && !whitespace1 && whitespace2) return 3;
  if (whitespace1 || whitespace2) return 2;
  if (nonAlphaNumeric1 || nonAlphaNumeric2) return 1;
  return 0;
}

/** Slides single edits surrounded by equalities to the best word or line boundary. */
function cleanupSemanticLossless(diffs) {
  let pointer = 1;
  while (pointer < diffs.length - 1) {
    if (diffs[pointer - 1][0] === EQUAL && diffs[pointer + 1][0] === EQUAL) {
      let equality1 = diffs[pointer - 1][1];
      let edit = diffs[pointer][1];
      let equality2 = diffs[pointer + 1][1];
      // First, shift the edit as far left as possible.
      const commonOffset = commonSuffix(equality1, edit);
      if (commonOffset > 0) {
        const common = edit.substring(edit.length - commonOffset);
        equality1 = equality1.substring(0, equality1.length - commonOffset);
        edit = common + edit.substring(0, edit.length - commonOffset);
        equality2 = common + equality2;
      }
      // Then step right one unit at a time, keeping the best fit.
      let bestEquality1 = equality1;
      let bestEdit = edit;
      let bestEquality2 = equality2;
      let bestScore = semanticScore(equality1, edit) + semanticScore(edit, equality2);
      let offset2 = 0;
      while (edit.length && offset2 < equality2.length && edit.charCodeAt(0) === equality2.charCodeAt(offset2)) {
        equality1 += edit[0];
        edit = edit.substring(1) + equality2[offset2];
        offset2++;
        const rest = equality2.substring(offset2);
        const score = semanticScore(equality1, edit) + semanticScore(edit, rest);
        if (score >= bestScore) {
          bestScore = score;
          bestEquality1 = equality1;
          bestEdit = edit;
          bestEquality2 = rest;
        }
      }
      if (diffs[pointer - 1][1] !== bestEquality1) {
        // An improvement was found: save it.
        if (bestEquality1.length) {
          diffs[pointer - 1][1] = bestEquality1;
        } else {
          diffs.splice(pointer - 1, 1);
          pointer--;
        }
        diffs[pointer][1] = bestEdit;
        if (bestEquality2.length) {
          diffs[pointer + 1][1] = bestEquality2;
        } else {
          diffs.splice(pointer + 1, 1);
          pointer--;
        }
      }
    }
    pointer++;
  }
}

/** Removes equalities that cost more to keep than to fold into the surrounding edits. */
function cleanupEfficiency(diffs) {
  let changes = false;
  const equalities = new EqualityStack();
  let lastEquality = null;
  let pointer = 0;
  let preIns = false;
  let preDel = false;
  let postIns = false;
  let postDel = false;
  const editCost = config.diffEditCost;
  while (pointer < diffs.length) {
    if (diffs[pointer][0] === EQUAL) {
      if (diffs[pointer][1].length < editCost && (postIns || postDel)) {
        equalities.push(pointer);
        preIns = postIns;
        preDel = postDel;
        lastEquality = diffs[pointer][1];
      } else {
        equalities.length = 0;
        lastEquality = null;
      }
      postIns = false;
      postDel = false;
    } else {
      if (diffs[pointer][0] === DELETE) postDel = true;
      else postIns = true;
      const sides = (preIns ? 1 : 0) + (preDel ? 1 : 0) + (postIns ? 1 : 0) + (postDel ? 1 : 0);
      if (lastEquality !== null && lastEquality.length &&
        ((preIns && preDel && postIns && postDel) || (lastEquality.length < editCost / 2 && sides === 3))) {
        const at = equalities.top;
        diffs.splice(at, 0, [DELETE, lastEquality]);
        diffs[at + 1][0] = INSERT;
        equalities.pop();
        lastEquality = null;
        if (preIns && preDel) {
          // No changes made that could affect previous entries: keep going.
          postIns = true;
          postDel = true;
          equalities.length = 0;
        } else {
          equalities.pop();
          pointer = equalities.length > 0 ? equalities.top : -1;
          postIns = false;
          postDel = false;
        }
        changes = true;
      }
    }
    pointer++;
  }
  if (changes) cleanupMerge(diffs);
}

// MARK: Surrogate pairs

function splitsPair(diffs) {
  for (const [, text] of diffs) {
    if (!text.length) continue;
    if (isLow(text.charCodeAt(0)) || isHigh(text.charCodeAt(text.length - 1))) return true;
  }
  return false;
}

/** Whether `text` holds an unpaired surrogate. */
export function hasUnpaired(text) {
  for (let i = 0; i < text.length; i++) {
    const u = text.charCodeAt(i);
    if (isHigh(u)) {
      if (i + 1 < text.length && isLow(text.charCodeAt(i + 1))) i++;
      else return true;
    } else if (isLow(u)) {
      return true;
    }
  }
  return false;
}

/**
 * Diffs with the same texts on both sides in which no boundary splits a surrogate pair
 * (the Swift `Surrogates.repair`; the identity on diffs that split none).
 */
export function repairPairs(diffs) {
  if (!splitsPair(diffs)) return diffs;
  // Equalities and edit groups, alternating.
  const segments = [];
  for (const diff of diffs) {
    const [op, text] = diff;
    if (!text.length) continue;
    const last = segments[segments.length - 1];
    if (op === EQUAL) {
      if (last && last.equal !== undefined) last.equal += text;
      else segments.push({ equal: text });
    } else if (last && last.equal === undefined) {
      if (op === DELETE) last.delete += text;
      else last.insert += text;
      last.original.push(diff);
    } else {
      segments.push({ delete: op === DELETE ? text : "", insert: op === INSERT ? text : "", original: [diff], touched: false });
    }
  }
  // Move a split half out of each equality into the neighbouring edit group (both sides).
  let i = 0;
  while (i < segments.length) {
    if (segments[i].equal === undefined) {
      i++;
      continue;
    }
    let text = segments[i].equal;
    const left = i > 0 ? segments[i - 1] : null;
    const right = i + 1 < segments.length ? segments[i + 1] : null;
    if (left && left.equal === undefined && text.length && isLow(text.charCodeAt(0))) {
      left.delete += text[0];
      left.insert += text[0];
      left.touched = true;
      text = text.substring(1);
    }
    if (right && right.equal === undefined && text.length && isHigh(text.charCodeAt(text.length - 1))) {
      const last = text[text.length - 1];
      right.delete = last + right.delete;
      right.insert = last + right.insert;
      right.touched = true;
      text = text.substring(0, text.length - 1);
    }
    if (!text.length && left && right && left.equal === undefined && right.equal === undefined) {
      left.delete += right.delete;
      left.insert += right.insert;
      left.original.push(...right.original);
      left.touched = true;
      segments.splice(i, 2);
      continue;
    }
    segments[i].equal = text;
    i++;
  }
  const out = [];
  const appendEqual = (text) => {
    if (!text.length) return;
    const last = out[out.length - 1];
    if (last && last[0] === EQUAL) last[1] += text;
    else out.push([EQUAL, text]);
  };
  for (const segment of segments) {
    if (segment.equal !== undefined) {
      appendEqual(segment.equal);
      continue;
    }
    const inner = segment.original.some(([, t]) => isLow(t.charCodeAt(0)) || isHigh(t.charCodeAt(t.length - 1)));
    if (!segment.touched && !inner) {
      for (const d of segment.original) out.push([d[0], d[1]]);
      continue;
    }
    const del = segment.delete;
    const ins = segment.insert;
    let prefix = 0;
    while (prefix < del.length && prefix < ins.length && del.charCodeAt(prefix) === ins.charCodeAt(prefix)) prefix++;
    if (prefix > 0 && isHigh(del.charCodeAt(prefix - 1))) prefix--;
    let suffix = 0;
    while (suffix < del.length - prefix && suffix < ins.length - prefix &&
      del.charCodeAt(del.length - 1 - suffix) === ins.charCodeAt(ins.length - 1 - suffix)) suffix++;
    if (suffix > 0 && isLow(del.charCodeAt(del.length - suffix))) suffix--;
    appendEqual(del.substring(0, prefix));
    const d = del.substring(prefix, del.length - suffix);
    const n = ins.substring(prefix, ins.length - suffix);
    if (d.length) out.push([DELETE, d]);
    if (n.length) out.push([INSERT, n]);
    if (suffix > 0) appendEqual(del.substring(del.length - suffix));
  }
  return out;
}

/** Copies of diffs (the Swift diffs are values; these are mutated in place). */
const copy = (diffs) => diffs.map(([op, text]) => [op, text]);

/** Diffs as the Swift public API hands them out: pairs whole, texts well formed. */
function published(diffs) {
  return repairPairs(diffs).map(([op, text]) => [op, wellFormed(text)]);
}

// MARK: Delta

const UNESCAPED = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789;,/?:@&=+$-_.!~*'()# ") {
  UNESCAPED[c.charCodeAt(0)] = 1;
}
const HEX = "0123456789ABCDEF";
const esc = (b) => "%" + HEX[b >> 4] + HEX[b & 15];

/** `encodeURI(text).replace(/%20/g, " ")`, with an unpaired surrogate written as U+FFFD. */
export function encodeURIText(text) {
  let out = "";
  const n = text.length;
  let i = 0;
  let plain = 0; // start of a run of unescaped ASCII
  while (i < n) {
    const u = text.charCodeAt(i);
    if (u < 0x80 && UNESCAPED[u]) {
      i++;
      continue;
    }
    if (plain < i) out += text.substring(plain, i);
    let scalar;
    if (u < 0x80) {
      out += esc(u);
      i++;
      plain = i;
      continue;
    } else if (isHigh(u) && i + 1 < n && isLow(text.charCodeAt(i + 1))) {
      scalar = 0x10000 + ((u - 0xd800) << 10) + (text.charCodeAt(i + 1) - 0xdc00);
      i += 2;
    } else if ((u & 0xf800) === 0xd800) {
      scalar = 0xfffd;
      i++;
    } else {
      scalar = u;
      i++;
    }
    if (scalar < 0x800) {
      out += esc(0xc0 | (scalar >> 6)) + esc(0x80 | (scalar & 0x3f));
    } else if (scalar < 0x10000) {
      out += esc(0xe0 | (scalar >> 12)) + esc(0x80 | ((scalar >> 6) & 0x3f)) + esc(0x80 | (scalar & 0x3f));
    } else {
      out += esc(0xf0 | (scalar >> 18)) + esc(0x80 | ((scalar >> 12) & 0x3f)) + esc(0x80 | ((scalar >> 6) & 0x3f)) +
        esc(0x80 | (scalar & 0x3f));
    }
    plain = i;
  }
  if (plain < n) out += text.substring(plain);
  return out;
}

const RESERVED = new Set([..."; /?:@&=+$,#"].filter((c) => c !== " ").map((c) => c.charCodeAt(0)));

function hexValue(u) {
  if (u >= 0x30 && u <= 0x39) return u - 0x30;
  if (u >= 0x41 && u <= 0x46) return u - 0x41 + 10;
  if (u >= 0x61 && u <= 0x66) return u - 0x61 + 10;
  return -1;
}

/**
 * `decodeURI`, except that an escaped surrogate (`%ED%A0%BD`, which some ports emit for half
 * a pair) decodes to that code unit, as the Swift port reads it; throws on a malformed escape.
 */
export function decodeURIText(text) {
  let out = "";
  let i = 0;
  const end = text.length;
  const byte = (k) => {
    if (!(k + 2 < end) || text.charCodeAt(k) !== 0x25) throw new Error("illegal escape in delta");
    const hi = hexValue(text.charCodeAt(k + 1));
    const lo = hexValue(text.charCodeAt(k + 2));
    if (hi < 0 || lo < 0) throw new Error("illegal escape in delta");
    return (hi << 4) | lo;
  };
  while (i < end) {
    const u = text.charCodeAt(i);
    if (u !== 0x25) {
      const next = text.indexOf("%", i);
      const stop = next === -1 ? end : next;
      out += text.substring(i, stop);
      i = stop;
      continue;
    }
    const first = byte(i);
    if (first < 0x80) {
      out += RESERVED.has(first) ? text.substring(i, i + 3) : String.fromCharCode(first);
      i += 3;
      continue;
    }
    let count;
    let scalar;
    if (first >= 0xc2 && first <= 0xdf) {
      count = 2;
      scalar = first & 0x1f;
    } else if (first >= 0xe0 && first <= 0xef) {
      count = 3;
      scalar = first & 0x0f;
    } else if (first >= 0xf0 && first <= 0xf4) {
      count = 4;
      scalar = first & 0x07;
    } else {
      throw new Error("illegal escape in delta");
    }
    let k = i + 3;
    for (let c = 1; c < count; c++) {
      const next = byte(k);
      if ((next & 0xc0) !== 0x80) throw new Error("illegal escape in delta");
      scalar = (scalar << 6) | (next & 0x3f);
      k += 3;
    }
    const minimum = count === 2 ? 0x80 : count === 3 ? 0x800 : 0x10000;
    if (scalar < minimum || scalar > 0x10ffff) throw new Error("illegal escape in delta");
    if (scalar >= 0x10000) {
      const v = scalar - 0x10000;
      out += String.fromCharCode(0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
    } else {
      out += String.fromCharCode(scalar);
    }
    i = k;
  }
  return out;
}

/** The diffs as a compact delta: `=3\t-2\t+ing` keeps 3, deletes 2, inserts "ing". */
export function toDelta(diffs) {
  const out = [];
  for (const [op, text] of diffs) {
    if (op === INSERT) out.push("+" + encodeURIText(text));
    else if (op === DELETE) out.push("-" + text.length);
    else out.push("=" + text.length);
  }
  return out.join("\t");
}

/** A decimal count of at most 15 digits; nothing else. */
function parseCount(digits) {
  if (!/^[0-9]{1,15}$/.test(digits)) return null;
  return Number(digits);
}

function fromDeltaUnits(text1, delta) {
  const diffs = [];
  let pointer = 0;
  for (const token of delta.split("\t")) {
    if (!token.length) continue;
    const sign = token[0];
    const param = token.substring(1);
    if (sign === "+") {
      diffs.push([INSERT, decodeURIText(param)]);
    } else if (sign === "-" || sign === "=") {
      const n = parseCount(param);
      if (n === null) throw new Error("invalid number in delta: " + param.slice(0, 20));
      if (n > text1.length - pointer) throw new Error(`delta covers more than the ${text1.length} UTF-16 code units of the source text`);
      diffs.push([sign === "=" ? EQUAL : DELETE, text1.substring(pointer, pointer + n)]);
      pointer += n;
    } else {
      throw new Error("invalid operation in delta: " + token.slice(0, 20));
    }
  }
  if (pointer !== text1.length) throw new Error(`delta length (${pointer}) does not equal source text length (${text1.length})`);
  return diffs;
}

/**
 * The diffs a delta describes against `text1`; throws for a malformed delta or one that does
 * not fit. A delta that splits a surrogate pair is repaired (refused with `strict`).
 */
export function fromDelta(text1, delta, { strict = false } = {}) {
  const diffs = fromDeltaUnits(text1, delta);
  const splits = splitsPair(diffs);
  if (strict && splits) throw new Error("delta splits a surrogate pair");
  const repaired = splits ? repairPairs(diffs) : diffs;
  for (const [op, text] of repaired) {
    if (op === INSERT && hasUnpaired(text)) throw new Error("delta inserts an unpaired surrogate");
  }
  if (splits && splitsPair(repaired)) throw new Error("delta splits a surrogate pair");
  return repaired;
}

// MARK: Measures

export function text1Of(diffs) {
  let t = "";
  for (const [op, text] of diffs) if (op !== INSERT) t += text;
  return t;
}

export function text2Of(diffs) {
  let t = "";
  for (const [op, text] of diffs) if (op !== DELETE) t += text;
  return t;
}

function xIndex(diffs, location) {
  let chars1 = 0;
  let chars2 = 0;
  let lastChars1 = 0;
  let lastChars2 = 0;
  let x = 0;
  for (; x < diffs.length; x++) {
    if (diffs[x][0] !== INSERT) chars1 += diffs[x][1].length;
    if (diffs[x][0] !== DELETE) chars2 += diffs[x][1].length;
    if (chars1 > location) break;
    lastChars1 = chars1;
    lastChars2 = chars2;
  }
  if (x !== diffs.length && diffs[x][0] === DELETE) return lastChars2;
  return lastChars2 + (location - lastChars1);
}

function levenshtein(diffs) {
  let total = 0;
  let insertions = 0;
  let deletions = 0;
  for (const [op, text] of diffs) {
    if (op === INSERT) insertions += text.length;
    else if (op === DELETE) deletions += text.length;
    else {
      total += Math.max(insertions, deletions);
      insertions = 0;
      deletions = 0;
    }
  }
  return total + Math.max(insertions, deletions);
}

// MARK: Match

/** The best match for `pattern` near `location` in `text`, or -1. */
export function matchMain(text, pattern, location) {
  const loc = Math.max(0, Math.min(location, text.length));
  if (text === pattern) return 0;
  if (!text.length) return -1;
  if (loc + pattern.length <= text.length && text.substring(loc, loc + pattern.length) === pattern) return loc;
  if (pattern.length > maxBits()) {
    // Beyond Bitap's reach (the reference throws): the exact occurrence nearest to loc.
    const after = text.indexOf(pattern, loc);
    const before = text.lastIndexOf(pattern, loc);
    if (before === -1) return after;
    if (after === -1) return before;
    return loc - before <= after - loc ? before : after;
  }
  return matchBitap(text, pattern, loc);
}

function matchAlphabet(pattern) {
  const s = new Map();
  const n = pattern.length;
  for (let i = 0; i < n; i++) {
    const c = pattern.charCodeAt(i);
    s.set(c, (s.get(c) || 0) | (1 << ((n - i - 1) & 31)));
  }
  return s;
}

/** Bitap: the best fuzzy match of `pattern` (at most matchMaxBits units) near `loc`. */
function matchBitap(text, pattern, loc) {
  const s = matchAlphabet(pattern);
  const patternLength = pattern.length;
  const threshold = config.matchThreshold;
  const distance = config.matchDistance;
  const score = (e, x) => {
    const accuracy = e / patternLength;
    const proximity = Math.abs(loc - x);
    if (distance === 0) return proximity !== 0 ? 1.0 : accuracy;
    return accuracy + proximity / distance;
  };
  let scoreThreshold = threshold;
  let bestLoc = text.indexOf(pattern, loc);
  if (bestLoc !== -1) {
    scoreThreshold = Math.min(score(0, bestLoc), scoreThreshold);
    bestLoc = text.lastIndexOf(pattern, loc + patternLength);
    if (bestLoc !== -1) scoreThreshold = Math.min(score(0, bestLoc), scoreThreshold);
  }
  const matchmask = 1 << ((patternLength - 1) & 31);
  bestLoc = -1;
  let binMin;
  let binMid;
  let binMax = patternLength + text.length;
  let lastRd = null;
  for (let d = 0; d < patternLength; d++) {
    binMin = 0;
    binMid = binMax;
    while (binMin < binMid) {
      if (score(d, loc + binMid) <= scoreThreshold) binMin = binMid;
      else binMax = binMid;
      binMid = Math.floor((binMax - binMin) / 2) + binMin;
    }
    binMax = binMid;
    let start = Math.max(1, loc - binMid + 1);
    const finish = Math.min(loc + binMid, text.length) + patternLength;
    const rd = new Int32Array(finish + 2);
    rd[finish + 1] = ((1 << (d & 31)) - 1) | 0;
    for (let j = finish; j >= start; j--) {
      const charMatch = j - 1 < text.length ? (s.get(text.charCodeAt(j - 1)) || 0) : 0;
      if (d === 0) {
        rd[j] = ((rd[j + 1] << 1) | 1) & charMatch;
      } else {
        const last1 = j + 1 < lastRd.length ? lastRd[j + 1] : 0;
        const last0 = j < lastRd.length ? lastRd[j] : 0;
        rd[j] = (((rd[j + 1] << 1) | 1) & charMatch) | (((last1 | last0) << 1) | 1) | last1;
      }
      if (rd[j] & matchmask) {
        const value = score(d, j - 1);
        if (value <= scoreThreshold) {
          scoreThreshold = value;
          bestLoc = j - 1;
          if (bestLoc > loc) {
            // When passing loc, don't exceed our current distance from it.
            start = Math.max(1, 2 * loc - bestLoc);
          } else {
            break;
          }
        }
      }
    }
    // No hope for a better match at greater error levels.
    if (score(d + 1, loc) > scoreThreshold) break;
    lastRd = rd;
  }
  return bestLoc;
}

// MARK: Patch

/** One hunk: diffs with context; start and length in the source (1) and result (2) text. */
export function newPatch() {
  return { diffs: [], start1: 0, start2: 0, length1: 0, length2: 0 };
}

const copyPatch = (p) => ({ diffs: copy(p.diffs), start1: p.start1, start2: p.start2, length1: p.length1, length2: p.length2 });

/** Grows a patch's context until it is unique in `text` (within Bitap's reach), plus a margin. */
function patchAddContext(patch, text) {
  if (!text.length) return;
  const m = margin();
  const clampedSub = (from, to) => {
    const a = Math.max(0, Math.min(from, text.length));
    const b = Math.max(0, Math.min(to, text.length));
    return text.substring(Math.min(a, b), Math.max(a, b));
  };
  const isUnique = (pattern) => {
    if (!pattern.length) return !text.length;
    const first = text.indexOf(pattern);
    return first === -1 || text.indexOf(pattern, first + 1) === -1;
  };
  let pattern = clampedSub(patch.start2, patch.start2 + patch.length1);
  let padding = 0;
  while (m > 0 && pattern.length < maxBits() - m - m && !isUnique(pattern)) {
    padding += m;
    pattern = clampedSub(patch.start2 - padding, patch.start2 + patch.length1 + padding);
  }
  padding += m;
  let prefixStart = Math.max(0, Math.min(patch.start2 - padding, text.length));
  const prefixEnd = Math.max(prefixStart, Math.min(patch.start2, text.length));
  if (prefixStart > 0 && prefixStart < prefixEnd && isLow(text.charCodeAt(prefixStart)) && isHigh(text.charCodeAt(prefixStart - 1))) {
    prefixStart--;
  }
  const prefix = text.substring(prefixStart, prefixEnd);
  const suffixStart = Math.max(0, Math.min(patch.start2 + patch.length1, text.length));
  let suffixEnd = Math.max(suffixStart, Math.min(patch.start2 + patch.length1 + padding, text.length));
  if (suffixEnd > suffixStart && suffixEnd < text.length && isHigh(text.charCodeAt(suffixEnd - 1)) && isLow(text.charCodeAt(suffixEnd))) {
    suffixEnd++;
  }
  const suffix = text.substring(suffixStart, suffixEnd);
  if (prefix.length) patch.diffs.unshift([EQUAL, prefix]);
  if (suffix.length) patch.diffs.push([EQUAL, suffix]);
  patch.start1 -= prefix.length;
  patch.start2 -= prefix.length;
  patch.length1 += prefix.length + suffix.length;
  patch.length2 += prefix.length + suffix.length;
}

function patchMakeUnits(text1, diffs) {
  if (!diffs.length) return [];
  const m = margin();
  const patches = [];
  let patch = newPatch();
  let charCount1 = 0;
  let charCount2 = 0;
  // The rolling context: each hunk's context is the text after the earlier hunks are applied.
  let prepatchText = text1;
  let postpatchText = text1;
  for (let x = 0; x < diffs.length; x++) {
    const [op, text] = diffs[x];
    if (!patch.diffs.length && op !== EQUAL) {
      patch.start1 = charCount1;
      patch.start2 = charCount2;
    }
    if (op === INSERT) {
      patch.diffs.push([op, text]);
      patch.length2 += text.length;
      postpatchText = postpatchText.substring(0, charCount2) + text + postpatchText.substring(charCount2);
    } else if (op === DELETE) {
      patch.length1 += text.length;
      patch.diffs.push([op, text]);
      postpatchText = postpatchText.substring(0, charCount2) + postpatchText.substring(charCount2 + text.length);
    } else if (text.length <= 2 * m && patch.diffs.length && diffs.length !== x + 1) {
      // Small equality inside a patch.
      patch.diffs.push([op, text]);
      patch.length1 += text.length;
      patch.length2 += text.length;
    } else if (text.length >= 2 * m && patch.diffs.length) {
      // Time for a new patch.
      patchAddContext(patch, prepatchText);
      patches.push(patch);
      patch = newPatch();
      prepatchText = postpatchText;
      charCount1 = charCount2;
    }
    if (op !== INSERT) charCount1 += text.length;
    if (op !== DELETE) charCount2 += text.length;
  }
  if (patch.diffs.length) {
    patchAddContext(patch, prepatchText);
    patches.push(patch);
  }
  return patches;
}

/**
 * Patches that apply `diffs` to `text1` (`patchMake(text1, diffs)`), or that turn `text1`
 * into `text2` (`patchMake(text1, text2)`: diff, then semantic and efficiency cleanups).
 */
export function patchMake(text1, b) {
  let diffs;
  if (typeof b === "string") {
    diffs = diffMain(text1, b, true, defaultDeadline());
    if (diffs.length > 2) {
      cleanupSemantic(diffs);
      cleanupEfficiency(diffs);
    }
    diffs = repairPairs(diffs);
  } else {
    diffs = b;
  }
  // The Swift patches hold Strings: a half pair would read as U+FFFD.
  return patchMakeUnits(text1, diffs).map((p) => ({ ...p, diffs: p.diffs.map(([op, t]) => [op, wellFormed(t)]) }));
}

/** Adds the null padding put around the text before applying patches; returns it. */
function patchAddPadding(patches) {
  const paddingLength = margin();
  let nullPadding = "";
  for (let i = 1; i <= paddingLength; i++) nullPadding += String.fromCharCode(i);
  for (const p of patches) {
    p.start1 += paddingLength;
    p.start2 += paddingLength;
  }
  if (!patches.length) return nullPadding;
  let patch = patches[0];
  let diffs = patch.diffs;
  if (!diffs.length || diffs[0][0] !== EQUAL) {
    diffs.unshift([EQUAL, nullPadding]);
    patch.start1 -= paddingLength;
    patch.start2 -= paddingLength;
    patch.length1 += paddingLength;
    patch.length2 += paddingLength;
  } else if (paddingLength > diffs[0][1].length) {
    const extraLength = paddingLength - diffs[0][1].length;
    diffs[0][1] = nullPadding.substring(diffs[0][1].length) + diffs[0][1];
    patch.start1 -= extraLength;
    patch.start2 -= extraLength;
    patch.length1 += extraLength;
    patch.length2 += extraLength;
  }
  patch = patches[patches.length - 1];
  diffs = patch.diffs;
  if (!diffs.length || diffs[diffs.length - 1][0] !== EQUAL) {
    diffs.push([EQUAL, nullPadding]);
    patch.length1 += paddingLength;
    patch.length2 += paddingLength;
  } else if (paddingLength > diffs[diffs.length - 1][1].length) {
    const extraLength = paddingLength - diffs[diffs.length - 1][1].length;
    diffs[diffs.length - 1][1] += nullPadding.substring(0, extraLength);
    patch.length1 += extraLength;
    patch.length2 += extraLength;
  }
  return nullPadding;
}

/**
 * Splits hunks longer than Bitap can match into smaller ones (non-strict application only;
 * `keepingPairs`: no cut or context inside a surrogate pair).
 */
export function patchSplitMax(patches, keepingPairs = true) {
  const patchSize = maxBits();
  const m = margin();
  let x = 0;
  while (x < patches.length) {
    if (patches[x].length1 <= patchSize) {
      x++;
      continue;
    }
    const bigpatch = patches.splice(x, 1)[0];
    let start1 = bigpatch.start1;
    let start2 = bigpatch.start2;
    let precontext = "";
    const bigDiffs = copy(bigpatch.diffs);
    while (bigDiffs.length) {
      const patch = newPatch();
      let empty = true;
      patch.start1 = start1 - precontext.length;
      patch.start2 = start2 - precontext.length;
      if (precontext.length) {
        patch.length1 = precontext.length;
        patch.length2 = precontext.length;
        patch.diffs.push([EQUAL, precontext]);
      }
      while (bigDiffs.length && patch.length1 < patchSize - m) {
        const first = bigDiffs[0];
        const diffType = first[0];
        if (diffType === INSERT) {
          // Insertions are harmless.
          patch.length2 += first[1].length;
          start2 += first[1].length;
          patch.diffs.push(bigDiffs.shift());
          empty = false;
        } else if (diffType === DELETE && patch.diffs.length === 1 && patch.diffs[0][0] === EQUAL && first[1].length > 2 * patchSize) {
          // A large deletion: let it pass in one chunk.
          patch.length1 += first[1].length;
          start1 += first[1].length;
          empty = false;
          patch.diffs.push(bigDiffs.shift());
        } else {
          // Deletion or equality: only take as much as we can stomach.
          let cut = Math.min(first[1].length, patchSize - patch.length1 - m);
          if (keepingPairs && cut < first[1].length && cut > 0 && isHigh(first[1].charCodeAt(cut - 1))) {
            cut--;
            if (cut === 0) cut = Math.min(2, first[1].length);
          }
          const diffText = first[1].substring(0, cut);
          patch.length1 += diffText.length;
          start1 += diffText.length;
          if (diffType === EQUAL) {
            patch.length2 += diffText.length;
            start2 += diffText.length;
          } else {
            empty = false;
          }
          patch.diffs.push([diffType, diffText]);
          if (cut === first[1].length) bigDiffs.shift();
          else first[1] = first[1].substring(cut);
        }
      }
      // The head context for the next patch.
      precontext = text2Of(patch.diffs);
      let keep = Math.min(m, precontext.length);
      if (keepingPairs && keep < precontext.length && keep > 0 && isLow(precontext.charCodeAt(precontext.length - keep))) keep++;
      precontext = precontext.substring(precontext.length - keep);
      // The end context for this patch.
      const rest = text1Of(bigDiffs);
      let take = Math.min(m, rest.length);
      if (keepingPairs && take < rest.length && take > 0 && isHigh(rest.charCodeAt(take - 1))) take++;
      const postcontext = rest.substring(0, take);
      if (postcontext.length) {
        patch.length1 += postcontext.length;
        patch.length2 += postcontext.length;
        const last = patch.diffs[patch.diffs.length - 1];
        if (last && last[0] === EQUAL) last[1] += postcontext;
        else patch.diffs.push([EQUAL, postcontext]);
      }
      if (!empty) {
        patches.splice(x, 0, patch);
        x++;
      }
    }
  }
}

/** Whether `index` falls between the two halves of a surrogate pair of `text`. */
function insidePair(text, index) {
  return index > 0 && index < text.length && isLow(text.charCodeAt(index)) && isHigh(text.charCodeAt(index - 1));
}

/** Whitespace, a control character (the patch padding is made of those) or a separator. */
function isWordBoundary(u) {
  return u <= 0x20 || u === 0x85 || u === 0xa0 || u === 0x1680 || (u >= 0x2000 && u <= 0x200a) ||
    u === 0x2028 || u === 0x2029 || u === 0x202f || u === 0x205f || u === 0x3000;
}

/**
 * The edits of one hunk applied at `startLoc` of `box.text`, positions mapped through `diffs`
 * (from the hunk's expected text to the text found there). With `strict`, returns false at a
 * deletion that would remove anything but the text it deleted in the expected text, and at
 * an insertion that would go inside a word of the found text where the expected text had a
 * word boundary (`box.text` is then partly edited).
 */
function applyEdits(edits, diffs, startLoc, box, keepingPairs, strict) {
  let text = box.text;
  let index1 = 0;
  let index2 = 0;
  const expectedText = strict ? text1Of(edits) : "";
  const changed = [];
  if (strict) {
    for (const [op, t] of diffs) {
      if (op === INSERT) continue;
      for (let k = 0; k < t.length; k++) changed.push(op === DELETE);
    }
  }
  let expected = 0;
  // Strict: what this hunk's edits have added to the text so far, less what they removed.
  let shift = 0;
  // Strict: where the run of edits (deletions and insertions between two equalities) the
  // current edit belongs to begins and ends in the expected text: the boundaries an insertion
  // of it must not glue across are around the whole run.
  let runStart = 0;
  let runEnd = 0;
  for (let e = 0; e < edits.length; e++) {
    const [op, modText] = edits[e];
    if (strict && op !== EQUAL && (e === 0 || edits[e - 1][0] === EQUAL)) {
      runStart = expected;
      runEnd = expected;
      for (let f = e; f < edits.length && edits[f][0] !== EQUAL; f++) if (edits[f][0] === DELETE) runEnd += edits[f][1].length;
    }
    // Strict: an edit's place is its place in the expected text, mapped, plus what the hunk
    // changed before it. The reference maps `index1`, which counts the insertions, through a
    // mapping of the expected text only: past the found text's end it can land a unit short and
    // glue an insertion onto a word (the web simulation, seed 5248).
    if (op !== EQUAL) index2 = strict ? xIndex(diffs, expected) + shift : xIndex(diffs, index1);
    if (strict && op === INSERT) {
      // Where the text before it is still as it was, and not inside a new word.
      if (expected > 0 && expected <= changed.length && changed[expected - 1]) return false;
      const at = Math.min(startLoc + index2, text.length);
      const splitsWord = at > 0 && at < text.length && !isWordBoundary(text.charCodeAt(at - 1)) && !isWordBoundary(text.charCodeAt(at));
      const wasInWord = expected > 0 && expected < expectedText.length &&
        !isWordBoundary(expectedText.charCodeAt(expected - 1)) && !isWordBoundary(expectedText.charCodeAt(expected));
      if (splitsWord && !wasInWord) return false;
      // Nor glued onto a word on a side where the expected text had a boundary.
      const gluesBefore = at > 0 && modText.length > 0 && runStart > 0 && isWordBoundary(expectedText.charCodeAt(runStart - 1)) &&
        !isWordBoundary(text.charCodeAt(at - 1)) && !isWordBoundary(modText.charCodeAt(0));
      const gluesAfter = at < text.length && modText.length > 0 && runEnd < expectedText.length && isWordBoundary(expectedText.charCodeAt(runEnd)) &&
        !isWordBoundary(text.charCodeAt(at)) && !isWordBoundary(modText.charCodeAt(modText.length - 1));
      if (gluesBefore || gluesAfter) return false;
    }
    if (strict && op === DELETE) {
      // Only text that is still exactly as it was.
      const from = Math.min(expected, changed.length);
      const to = Math.min(expected + modText.length, changed.length);
      for (let k = from; k < to; k++) if (changed[k]) return false;
    }
    if (op !== INSERT) expected += modText.length;
    if (op === INSERT) {
      let at = Math.min(startLoc + index2, text.length);
      if (keepingPairs && insidePair(text, at)) at--;
      text = text.substring(0, at) + modText + text.substring(at);
      box.text = text;
      shift += modText.length;
    } else if (op === DELETE) {
      let from = Math.min(startLoc + index2, text.length);
      const end = strict ? xIndex(diffs, expected) + shift : xIndex(diffs, index1 + modText.length);
      let to = Math.min(Math.max(from, startLoc + end), text.length);
      if (keepingPairs && insidePair(text, from)) from++;
      if (keepingPairs && insidePair(text, to)) to--;
      if (strict && text.substring(from, to) !== modText) return false;
      if (from < to) {
        text = text.substring(0, from) + text.substring(to);
        box.text = text;
        shift -= to - from;
      }
    }
    if (op !== DELETE) index1 += modText.length;
  }
  return true;
}

function patchApplyOnce(patchesIn, textIn, keepingPairs, strict, until) {
  if (!patchesIn.length) return { text: textIn, results: [] };
  const patches = patchesIn.map(copyPatch);
  const nullPadding = patchAddPadding(patches);
  let text = nullPadding + textIn + nullPadding;
  // Strict: a hunk stays whole (split to 32 units, a deletion or insertion is cut mid-word and
  // each piece may fit somewhere it does not belong); a long hunk is found by its two ends.
  if (!strict) patchSplitMax(patches, false);
  const bits = maxBits();
  let delta = 0;
  const results = new Array(patches.length).fill(false);
  for (let x = 0; x < patches.length; x++) {
    const patch = patches[x];
    const expectedLoc = patch.start2 + delta;
    if (until != null && now() > until) {
      results[x] = false;
      delta -= patch.length2 - patch.length1;
      continue;
    }
    const text1 = text1Of(patch.diffs);
    let startLoc;
    let endLoc = -1;
    if (text1.length > bits) {
      // Long patch: match its start and its end separately.
      startLoc = matchMain(text, text1.substring(0, bits), expectedLoc);
      if (startLoc !== -1) {
        endLoc = matchMain(text, text1.substring(text1.length - bits), expectedLoc + text1.length - bits);
        if (endLoc === -1 || startLoc >= endLoc) startLoc = -1;
      }
    } else {
      startLoc = matchMain(text, text1, expectedLoc);
    }
    if (startLoc === -1) {
      results[x] = false;
      delta -= patch.length2 - patch.length1;
      continue;
    }
    results[x] = true;
    delta = startLoc - expectedLoc;
    const end = Math.min(endLoc === -1 ? startLoc + text1.length : endLoc + bits, text.length);
    const text2 = text.substring(startLoc, Math.max(startLoc, end));
    if (text1 === text2) {
      // Perfect match, just shove the replacement text in.
      text = text.substring(0, startLoc) + text2Of(patch.diffs) + text.substring(Math.min(startLoc + text1.length, text.length));
      continue;
    }
    // Imperfect match: a diff gives a framework of equivalent indices.
    const deadline = earliest(defaultDeadline(), until);
    const diffs = diffMain(text1, text2, false, deadline);
    if (text1.length > bits && levenshtein(diffs) / text1.length > config.patchDeleteThreshold) {
      // The end points match, but the content is unacceptably bad.
      results[x] = false;
      continue;
    }
    cleanupSemanticLossless(diffs);
    const box = { text };
    if (strict) {
      if (!applyEdits(patch.diffs, diffs, startLoc, box, keepingPairs, true)) {
        // An edit would take or split text it did not know: leave the hunk out.
        results[x] = false;
        delta -= patch.length2 - patch.length1;
        continue;
      }
    } else {
      applyEdits(patch.diffs, diffs, startLoc, box, keepingPairs, false);
    }
    text = box.text;
  }
  const strip = Math.min(nullPadding.length, Math.floor(text.length / 2));
  return { text: text.substring(strip, text.length - strip), results };
}

function earliest(a, b) {
  if (a == null) return b ?? null;
  if (b == null) return a;
  return Math.min(a, b);
}

/**
 * Applies patches to `text` with fuzzy matching: `{ text, results }`, a boolean per patch.
 *
 * With `strict` (docs/protocol.md, "Placing a stale text delta"), a hunk found where the text
 * differs from what it expects applies only if each of its deletions covers exactly the text
 * it deleted, and none of its insertions goes inside a word where the original had a word
 * boundary; otherwise it is left out (false). `until`: a deadline (ms on performance.now()).
 * Positions falling inside a surrogate pair are moved off it, as the Swift port does.
 */
export function patchApply(patches, text, { strict = false, until = null } = {}) {
  const exact = patchApplyOnce(patches, text, false, strict, until);
  let result = exact;
  if (hasUnpaired(exact.text) && !hasUnpaired(text)) result = patchApplyOnce(patches, text, true, strict, until);
  return { text: wellFormed(result.text), results: result.results };
}

// MARK: Public diff functions (the Swift public API: results never split a pair)

/** The differences between two texts, simplest edit first. */
export function diff(text1, text2, { checkLines = true, deadline } = {}) {
  return published(diffMain(text1, text2, checkLines, deadline === undefined ? defaultDeadline() : deadline));
}

/** A cleanup run on a copy of `diffs`, handed out as the Swift public API does. */
const cleaned = (cleanup) => (diffs) => {
  const d = copy(diffs);
  cleanup(d);
  return published(d);
};

/** Removes equalities that cost more to keep than `diffEditCost`; returns new diffs. */
export const diffCleanupEfficiency = cleaned(cleanupEfficiency);
/** Slides single edits to word and line boundaries; returns new diffs. */
export const diffCleanupSemanticLossless = cleaned(cleanupSemanticLossless);
/** Removes coincidental equalities; returns new diffs. */
export const diffCleanupSemantic = cleaned(cleanupSemantic);
/** Merges like edits and factors out common prefixes and suffixes; returns new diffs. */
export const diffCleanupMerge = cleaned(cleanupMerge);

export { matchBitap, xIndex, levenshtein, commonPrefix, commonSuffix, commonOverlap };
