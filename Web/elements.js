// Attachments' elements (docs/protocol.md): "<sha256> <size> <type> <name>", the strings a note's
// `attachments` set holds. Pure functions, no DOM and no storage: Web/attachments.js (the page)
// and Web/sync.js (the engine, which holds a change adding a file until it is uploaded) share
// them, and node runs them.

export const MAX_ELEMENT = 200; // maxTagLength: the longest set element, in UTF-16 units
export const OCTET = "application/octet-stream";

export function isSha256(text) {
  return typeof text === "string" && /^[0-9a-f]{64}$/.test(text);
}

/** A file's type as an element holds it: lower case, no parameters, else application/octet-stream. */
export function normalizeType(type) {
  const t = String(type || "").split(";")[0].trim().toLowerCase();
  const part = "[a-z0-9][a-z0-9!#$&^_.+-]*";
  return new RegExp(`^${part}/${part}$`).test(t) && new TextEncoder().encode(t).length <= 100 ? t : OCTET;
}

function graphemes(text) {
  if (typeof Intl !== "undefined" && Intl.Segmenter) {
    return [...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(text)].map((s) => s.segment);
  }
  return [...text];
}

/**
 * `name` cleaned (control characters, '/' and '\' become '_'; empty becomes "file") and
 * shortened, keeping its extension, so that the element with the other parts is at most `limit`
 * UTF-16 units; null when even one character does not fit. As NotedCore's fittedName.
 */
export function fittedName(name, sha256, size, type, limit = MAX_ELEMENT) {
  let cleaned = [...String(name ?? "")].map((c) => {
    const v = c.codePointAt(0);
    return v < 0x20 || v === 0x7f || c === "/" || c === "\\" ? "_" : c;
  }).join("");
  if (!cleaned) cleaned = "file";
  const room = limit - `${sha256} ${size} ${type} `.length;
  if (room < 1) return null;
  if (cleaned.length <= room) return cleaned;
  let ext = "";
  const dot = cleaned.lastIndexOf(".");
  if (dot > 0 && cleaned.length - dot < room / 2) ext = cleaned.slice(dot);
  const stem = graphemes(cleaned.slice(0, cleaned.length - ext.length));
  let length = stem.reduce((n, g) => n + g.length, 0);
  while (length + ext.length > room && stem.length) length -= stem.pop().length;
  const fitted = stem.join("") + ext;
  return fitted || null;
}

/** The element of a file: "<sha256> <size> <type> <name>" (name fitted), or null. */
export function encodeElement({ sha256, size, type, name }, limit = MAX_ELEMENT) {
  if (!isSha256(sha256) || !Number.isSafeInteger(size) || size < 0) return null;
  const t = normalizeType(type);
  const n = fittedName(name, sha256, size, t, limit);
  return n === null ? null : `${sha256} ${size} ${t} ${n}`;
}

/** An element's parts { sha256, size, type, name }, or null when it is not one. */
export function parseElement(element) {
  if (typeof element !== "string") return null;
  const m = /^([0-9a-f]{64}) (0|[1-9][0-9]*) ([^ ]+) ([^]+)$/.exec(element);
  if (!m) return null;
  const size = Number(m[2]);
  if (!Number.isSafeInteger(size) || normalizeType(m[3]) !== m[3]) return null;
  if (/[\u0000-\u001f\u007f/\\]/.test(m[4])) return null;
  return { sha256: m[1], size, type: m[3], name: m[4] };
}

/** The hash an element names (null if it is not one). */
export function shaOf(element) {
  const parsed = parseElement(element);
  return parsed ? parsed.sha256 : null;
}

/** The elements of `after` that `before` lacks. */
export function addedElements(before, after) {
  const had = new Set(before || []);
  return (after || []).filter((e) => !had.has(e));
}

/** The hashes a change adds to its note's attachments field (its `add`, or its `set`). */
export function changeAddsShas(change, before = []) {
  const op = change && change.fields && change.fields.attachments;
  if (!op) return [];
  const added = "set" in op ? addedElements(before, op.set) : op.add || [];
  return [...new Set(added.map(shaOf).filter(Boolean))];
}
