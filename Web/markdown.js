// Markdown for the note preview: a CommonMark-like subset with GitHub's tables, strikethrough
// and task lists, parsed into a plain tree (`parse`, no DOM: the node tests read it) and drawn as
// DOM nodes (`renderMarkdown`). Nothing in a note is ever read as HTML: `<script>` is text, and
// only http(s), mailto and attachment URLs become links or images (`safeUrl`).
//
// Not supported (shown as text): raw HTML, reference links and their definitions, footnotes.
// A line break inside a paragraph is kept as a line break (as GitHub's comments and most notes
// apps do), not joined into one line.
//
// The parser is linear in the text, give or take constant factors: containers (quotes, list
// items) nested deeper than MAX_DEPTH are shown as text, link destinations and titles are
// scanned for a bounded length, and code spans remember which closing runs are not there.

const MAX_DEPTH = 32; // quotes and lists nested deeper are a paragraph of their text
const MAX_URL = 2048; // a longer link destination is not a link
const MAX_TITLE = 1024;
const MAX_PAREN_DEPTH = 32;

// ---------------------------------------------------------------------------------------------
// Blocks. A line is { t: its text (container prefixes taken off), o: the offset of t[0] in the
// note }: task items keep where their box is, for toggleTask.

function splitLines(text) {
  const lines = [];
  let start = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || c === 13) {
      lines.push({ t: text.slice(start, i), o: start });
      if (c === 13 && text.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
    }
  }
  if (start < n) lines.push({ t: text.slice(start), o: start });
  return lines;
}

function isBlank(t) {
  for (let i = 0; i < t.length; i++) {
    const c = t[i];
    if (c !== " " && c !== "\t") return false;
  }
  return true;
}

/** Columns of leading whitespace (a tab to the next multiple of 4). */
function indentCols(t) {
  let cols = 0;
  for (let i = 0; i < t.length; i++) {
    if (t[i] === " ") cols++;
    else if (t[i] === "\t") cols += 4 - (cols % 4);
    else break;
  }
  return cols;
}

/** The line without its first `n` columns of indentation. */
function stripCols(line, n) {
  const t = line.t;
  let cols = 0;
  let i = 0;
  while (i < t.length && cols < n) {
    if (t[i] === " ") cols++;
    else if (t[i] === "\t") cols += 4 - (cols % 4);
    else break;
    i++;
  }
  return i ? { t: t.slice(i), o: line.o + i } : line;
}

function leadingSpaces(t, max) {
  let k = 0;
  while (k < max && t[k] === " ") k++;
  return k;
}

function atxHeading(s) {
  let h = 0;
  while (h < s.length && s[h] === "#") h++;
  if (h < 1 || h > 6 || (h < s.length && s[h] !== " " && s[h] !== "\t")) return null;
  let content = s.slice(h).trim();
  let e = content.length;
  while (e > 0 && content[e - 1] === "#") e--;
  if (e === 0) content = "";
  else if (e < content.length && (content[e - 1] === " " || content[e - 1] === "\t")) content = content.slice(0, e).trimEnd();
  return { level: h, raw: content };
}

function isThematicBreak(s) {
  const ch = s[0];
  if (ch !== "-" && ch !== "*" && ch !== "_") return false;
  let count = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === ch) count++;
    else if (c !== " " && c !== "\t") return false;
  }
  return count >= 3;
}

function fenceOpen(s) {
  const ch = s[0];
  if (ch !== "`" && ch !== "~") return null;
  let len = 0;
  while (s[len] === ch) len++;
  if (len < 3) return null;
  const info = s.slice(len).trim();
  if (ch === "`" && info.includes("`")) return null;
  return { ch, len, info };
}

function isFenceClose(t, fence) {
  const k = leadingSpaces(t, 3);
  let len = 0;
  while (t[k + len] === fence.ch) len++;
  return len >= fence.len && isBlank(t.slice(k + len));
}

/** A list item's marker at the start of `t` (indented at most 3 spaces), or null. */
function listMarker(t) {
  if (indentCols(t) >= 4) return null;
  const k = leadingSpaces(t, 3);
  let p = k;
  let ordered = false;
  let start = 1;
  let ch = t[p];
  if (ch === "-" || ch === "*" || ch === "+") {
    p++;
  } else {
    let q = p;
    while (q < t.length && q - p < 9 && t[q] >= "0" && t[q] <= "9") q++;
    if (q === p || (t[q] !== "." && t[q] !== ")")) return null;
    ordered = true;
    start = parseInt(t.slice(p, q), 10);
    ch = t[q];
    p = q + 1;
  }
  if (p < t.length && t[p] !== " " && t[p] !== "\t") return null;
  let q = p;
  while (q < t.length && (t[q] === " " || t[q] === "\t")) q++;
  const empty = q >= t.length;
  let content = q;
  if (empty || q - p > 4) content = p + 1; // a blank start, or indented code after the marker
  return { ordered, ch, start, empty, contentIndent: empty ? p + 1 : content, contentStart: Math.min(content, t.length) };
}

function quoteStrip(line) {
  const t = line.t;
  if (indentCols(t) >= 4) return null;
  const k = leadingSpaces(t, 3);
  if (t[k] !== ">") return null;
  let p = k + 1;
  if (t[p] === " " || t[p] === "\t") p++;
  return { t: t.slice(p), o: line.o + p };
}

/** Does this line end a paragraph (start another block)? */
function interrupts(t) {
  if (indentCols(t) >= 4) return false;
  const s = t.slice(leadingSpaces(t, 3));
  if (s[0] === ">" || atxHeading(s) || fenceOpen(s) || isThematicBreak(s)) return true;
  const m = listMarker(t);
  return Boolean(m && !m.empty && (!m.ordered || m.start === 1));
}

/** The cells of a table row, split at pipes that are not escaped. */
function splitRow(t) {
  let s = t.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cell = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "\\" && s[i + 1] === "|") {
      cell += "|";
      i++;
    } else if (c === "|") {
      cells.push(cell.trim());
      cell = "";
    } else {
      cell += c;
    }
  }
  cells.push(cell.trim());
  return cells;
}

const DELIMITER_CELL = /^:?-+:?$/;

/** The alignments of a table whose header row is lines[i], or null when it is no table. */
function tableAt(lines, i) {
  if (i + 1 >= lines.length) return null;
  const head = lines[i].t;
  const delim = lines[i + 1].t;
  if (!head.includes("|") || !delim.includes("|") || indentCols(head) >= 4 || indentCols(delim) >= 4) return null;
  const cells = splitRow(delim);
  if (!cells.every((c) => DELIMITER_CELL.test(c))) return null;
  const headCells = splitRow(head);
  if (headCells.length !== cells.length) return null;
  const align = cells.map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : null));
  return { align, head: headCells };
}

const TASK = /^\[([ xX])\](?=[ \t]|$)/;

function parseBlocks(lines, depth) {
  const out = [];
  const n = lines.length;
  if (depth > MAX_DEPTH) {
    const text = lines.filter((l) => !isBlank(l.t)).map((l) => l.t.trim()).join("\n");
    if (text) out.push({ type: "paragraph", raw: text });
    return out;
  }
  let i = 0;
  while (i < n) {
    const line = lines[i];
    const t = line.t;
    if (isBlank(t)) {
      i++;
      continue;
    }
    const ind = indentCols(t);
    if (ind >= 4) {
      const body = [];
      let j = i;
      while (j < n && (isBlank(lines[j].t) || indentCols(lines[j].t) >= 4)) body.push(stripCols(lines[j++], 4).t);
      while (body.length && isBlank(body[body.length - 1])) body.pop();
      out.push({ type: "code_block", info: "", text: body.join("\n") });
      i = j;
      continue;
    }
    const k = ind; // spaces only (a tab is 4 columns)
    const s = t.slice(k);
    const fence = fenceOpen(s);
    if (fence) {
      const body = [];
      let j = i + 1;
      for (; j < n; j++) {
        const u = lines[j].t;
        if (isFenceClose(u, fence)) {
          j++;
          break;
        }
        body.push(u.slice(leadingSpaces(u, k)));
      }
      out.push({ type: "code_block", info: fence.info, text: body.join("\n") });
      i = j;
      continue;
    }
    const heading = atxHeading(s);
    if (heading) {
      out.push({ type: "heading", level: heading.level, raw: heading.raw });
      i++;
      continue;
    }
    if (isThematicBreak(s)) {
      out.push({ type: "thematic_break" });
      i++;
      continue;
    }
    if (s[0] === ">") {
      const inner = [];
      let j = i;
      while (j < n) {
        const q = quoteStrip(lines[j]);
        if (q) {
          inner.push(q);
          j++;
          continue;
        }
        const u = lines[j].t;
        // A lazy continuation line: more of the quote's paragraph.
        if (isBlank(u) || isBlank(inner[inner.length - 1].t) || interrupts(u) || listMarker(u)) break;
        inner.push(lines[j++]);
      }
      out.push({ type: "blockquote", children: parseBlocks(inner, depth + 1) });
      i = j;
      continue;
    }
    const first = listMarker(t);
    if (first) {
      const list = { type: "list", ordered: first.ordered, start: first.start, children: [] };
      let j = i;
      while (j < n) {
        const m = listMarker(lines[j].t);
        if (!m || m.ordered !== first.ordered || m.ch !== first.ch || isThematicBreak(lines[j].t.trim())) break;
        const head = lines[j];
        const itemLines = [{ t: head.t.slice(m.contentStart), o: head.o + m.contentStart }];
        j++;
        while (j < n) {
          const u = lines[j];
          if (isBlank(u.t)) {
            itemLines.push({ t: "", o: u.o });
            j++;
          } else if (indentCols(u.t) >= m.contentIndent) {
            itemLines.push(stripCols(u, m.contentIndent));
            j++;
          } else if (!isBlank(itemLines[itemLines.length - 1].t) && !interrupts(u.t) && !listMarker(u.t) && !tableAt(lines, j)) {
            itemLines.push(u); // lazy continuation
            j++;
          } else {
            break;
          }
        }
        const item = { type: "item", task: null, children: null };
        const task = m.empty ? null : TASK.exec(itemLines[0].t);
        if (task) {
          item.task = { checked: task[1] !== " ", offset: itemLines[0].o + 1 };
          let p = 3;
          while (itemLines[0].t[p] === " " || itemLines[0].t[p] === "\t") p++;
          itemLines[0] = { t: itemLines[0].t.slice(p), o: itemLines[0].o + p };
        }
        item.children = parseBlocks(itemLines, depth + 1);
        list.children.push(item);
      }
      out.push(list);
      i = j;
      continue;
    }
    const table = tableAt(lines, i);
    if (table) {
      const rows = [];
      let j = i + 2;
      while (j < n && !isBlank(lines[j].t) && !interrupts(lines[j].t)) {
        const cells = splitRow(lines[j].t).slice(0, table.align.length);
        while (cells.length < table.align.length) cells.push("");
        rows.push(cells);
        j++;
      }
      out.push({ type: "table", align: table.align, head: table.head, rows });
      i = j;
      continue;
    }
    // A paragraph, up to a blank line or another block; a setext underline makes it a heading.
    const para = [s];
    let j = i + 1;
    let level = 0;
    while (j < n) {
      const u = lines[j].t;
      if (isBlank(u)) break;
      if (indentCols(u) < 4) {
        const us = u.trim();
        if (/^(?:=+|-+)$/.test(us)) {
          level = us[0] === "=" ? 1 : 2;
          j++;
          break;
        }
        if (interrupts(u) || tableAt(lines, j)) break;
      }
      para.push(u.replace(/^[ \t]+/, ""));
      j++;
    }
    const raw = para.join("\n").replace(/[ \t]+$/, "");
    out.push(level ? { type: "heading", level, raw } : { type: "paragraph", raw });
    i = j;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Inlines: CommonMark's delimiter algorithm over a linked list of nodes.

const ASCII_PUNCT = /[!-/:-@[-`{-~]/;
const PUNCT = /[\p{P}\p{S}]/u;
const ESCAPABLE = ASCII_PUNCT;
const isSpace = (c) => c === undefined || /\s/.test(c);
const isPunct = (c) => c !== undefined && (ASCII_PUNCT.test(c) || PUNCT.test(c));

const ENTITIES = {
  amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0", copy: "©", reg: "®", trade: "™",
  hellip: "…", mdash: "—", ndash: "–", laquo: "«", raquo: "»", lsquo: "‘", rsquo: "’", ldquo: "“", rdquo: "”",
  times: "×", divide: "÷", deg: "°", middot: "·", bull: "•", euro: "€", pound: "£", yen: "¥", sect: "§", para: "¶",
};
const ENTITY = /&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([a-zA-Z][a-zA-Z0-9]{1,31}));/y;

/** The entity at `src[i]` ("&…;") as { text, end }, or null. */
function entityAt(src, i) {
  ENTITY.lastIndex = i;
  const m = ENTITY.exec(src);
  if (!m) return null;
  let text;
  if (m[3]) {
    text = Object.hasOwn(ENTITIES, m[3]) ? ENTITIES[m[3]] : null;
    if (text === null) return null;
  } else {
    const code = parseInt(m[1] || m[2], m[1] ? 16 : 10);
    text = code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff) ? "\ufffd" : String.fromCodePoint(code);
  }
  return { text, end: ENTITY.lastIndex };
}

/** Backslash escapes and entities of a link destination or title. */
function unescapeString(s) {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "\\" && i + 1 < s.length && ESCAPABLE.test(s[i + 1])) {
      out += s[++i];
    } else if (c === "&") {
      const e = entityAt(s, i);
      if (e) {
        out += e.text;
        i = e.end - 1;
      } else {
        out += c;
      }
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * What a URL of a note may become: { kind: "web" | "mail", href } (a link), { kind:
 * "attachment", sha256 }, or null: shown as text. Relative URLs and #anchors are not links (a
 * note has no page of its own for them to point into).
 */
export function safeUrl(url) {
  if (typeof url !== "string" || url.length === 0 || url.length > MAX_URL) return null;
  if (/[\s\x00-\x1f\x7f-\x9f]/.test(url)) return null;
  const m = /^([a-zA-Z][a-zA-Z0-9+.-]{0,31}):/.exec(url);
  if (!m) return null;
  const scheme = m[1].toLowerCase();
  if (scheme === "http" || scheme === "https") {
    try {
      const parsed = new URL(url);
      if (parsed.protocol !== `${scheme}:` || !parsed.hostname) return null;
      return { kind: "web", href: parsed.href };
    } catch {
      return null;
    }
  }
  if (scheme === "mailto") return url.length > 7 ? { kind: "mail", href: `mailto:${url.slice(7)}` } : null;
  if (scheme === "attachment") {
    const sha256 = url.slice(11);
    return /^[0-9a-f]{64}$/.test(sha256) ? { kind: "attachment", sha256 } : null;
  }
  return null;
}

/** The inline link tail "(dest "title")" at src[p] === "(": { dest, title, end } or null. */
function linkTail(src, p) {
  let q = p + 1;
  const skip = () => {
    let newlines = 0;
    while (q < src.length && (src[q] === " " || src[q] === "\t" || src[q] === "\n")) {
      if (src[q] === "\n" && ++newlines > 1) return false;
      q++;
    }
    return true;
  };
  if (!skip()) return null;
  let dest = "";
  if (src[q] === "<") {
    const start = ++q;
    while (q < src.length && src[q] !== ">") {
      if (src[q] === "\n" || src[q] === "<" || q - start > MAX_URL) return null;
      if (src[q] === "\\") q++;
      q++;
    }
    if (src[q] !== ">") return null;
    dest = src.slice(start, q);
    q++;
  } else {
    const start = q;
    let depth = 0;
    while (q < src.length) {
      const c = src[q];
      if (c <= " ") break;
      if (c === "\\" && q + 1 < src.length && ESCAPABLE.test(src[q + 1])) {
        q += 2;
      } else if (c === "(") {
        if (++depth > MAX_PAREN_DEPTH) return null;
        q++;
      } else if (c === ")") {
        if (depth === 0) break;
        depth--;
        q++;
      } else {
        q++;
      }
      if (q - start > MAX_URL) return null;
    }
    if (depth !== 0) return null;
    dest = src.slice(start, q);
  }
  const beforeTitle = q;
  if (!skip()) return null;
  let title = null;
  const open = src[q];
  if (q > beforeTitle && (open === "\"" || open === "'" || open === "(")) {
    const close = open === "(" ? ")" : open;
    const start = ++q;
    while (q < src.length && src[q] !== close) {
      if (src[q] === "\\") q++;
      if (open === "(" && src[q] === "(") return null;
      q++;
      if (q - start > MAX_TITLE) return null;
    }
    if (src[q] !== close) return null;
    title = unescapeString(src.slice(start, q));
    q++;
    if (!skip()) return null;
  }
  if (src[q] !== ")") return null;
  return { dest: unescapeString(dest), title, end: q + 1 };
}

const AUTOLINK = /<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>\x00-\x1f]*)>/y;
const BARE_URL = /https?:\/\/[^\s<>\x00-\x1f]{1,2049}/iy; // longer: not a link (MAX_URL)
const SPECIAL = /[\\`*_~[\]!<&\nhH]/g;

/** A bare URL's end: trailing punctuation and unmatched ")" are not part of it. */
function trimUrl(url) {
  let end = url.length;
  for (;;) {
    const c = url[end - 1];
    if ("?!.,:;*_~'\"".includes(c)) {
      end--;
    } else if (c === ")") {
      let open = 0;
      let close = 0;
      for (let i = 0; i < end; i++) {
        if (url[i] === "(") open++;
        else if (url[i] === ")") close++;
      }
      if (close > open) end--;
      else break;
    } else {
      break;
    }
  }
  return url.slice(0, end);
}

function textNode(value) {
  return { type: "text", value, prev: null, next: null };
}

/** A doubly linked list of inline nodes (the delimiter algorithm wraps runs of it). */
class Chain {
  constructor() {
    this.first = null;
    this.last = null;
  }

  append(node) {
    node.prev = this.last;
    node.next = null;
    if (this.last) this.last.next = node;
    else this.first = node;
    this.last = node;
  }

  remove(node) {
    if (node.prev) node.prev.next = node.next;
    else this.first = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.last = node.prev;
    node.prev = node.next = null;
  }

  /** Takes the nodes strictly between a and b (b null: to the end) out, as a new chain. */
  cut(a, b) {
    const chain = new Chain();
    const from = a ? a.next : this.first;
    if (!from || from === b) return chain;
    const to = b ? b.prev : this.last;
    if (a) a.next = b;
    else this.first = b;
    if (b) b.prev = a;
    else this.last = a;
    from.prev = null;
    to.next = null;
    chain.first = from;
    chain.last = to;
    return chain;
  }

  insertAfter(a, node) {
    node.prev = a;
    node.next = a ? a.next : this.first;
    if (node.next) node.next.prev = node;
    else this.last = node;
    if (a) a.next = node;
    else this.first = node;
  }
}

/** A chain into the tree's plain arrays (adjacent texts joined). */
function toArray(chain) {
  const out = [];
  for (let node = chain.first; node; node = node.next) {
    const { prev, next, chain: children, ...plain } = node;
    if (children) plain.children = toArray(children);
    const last = out[out.length - 1];
    if (plain.type === "text" && last && last.type === "text") last.value += plain.value;
    else if (plain.type !== "text" || plain.value) out.push(plain);
  }
  return out;
}

function plainText(chain) {
  let s = "";
  for (let node = chain.first; node; node = node.next) {
    if (node.type === "text" || node.type === "code") s += node.value;
    else if (node.type === "image") s += node.alt;
    else if (node.chain) s += plainText(node.chain);
    else if (node.type === "softbreak" || node.type === "hardbreak") s += " ";
  }
  return s;
}

/** Parses a paragraph's or a heading's text into inline nodes. */
export function parseInlines(src) {
  const chain = new Chain();
  let delims = null; // the top of the delimiter stack: { node, ch, count, orig, canOpen, canClose, prev, next }
  const brackets = []; // { node, image, active, delims }
  let activeLinks = 0; // "[" openers still able to make a link (no bare URL inside one)
  const failedTicks = new Map(); // backtick run length -> from where no closing run exists
  let text = "";
  const flush = () => {
    if (text) chain.append(textNode(text));
    text = "";
  };
  let i = 0;
  const n = src.length;
  while (i < n) {
    SPECIAL.lastIndex = i;
    const found = SPECIAL.exec(src);
    const at = found ? found.index : n;
    if (at > i) text += src.slice(i, at);
    i = at;
    if (i >= n) break;
    const c = src[i];
    if (c === "\\") {
      const next = src[i + 1];
      if (next === "\n") {
        flush();
        chain.append({ type: "hardbreak" });
        i += 2;
        while (src[i] === " " || src[i] === "\t") i++;
      } else if (next !== undefined && ESCAPABLE.test(next)) {
        text += next;
        i += 2;
      } else {
        text += c;
        i++;
      }
    } else if (c === "\n") {
      const hard = text.endsWith("  ");
      text = text.replace(/[ \t]+$/, "");
      flush();
      chain.append({ type: hard ? "hardbreak" : "softbreak" });
      i++;
      while (src[i] === " " || src[i] === "\t") i++;
    } else if (c === "`") {
      let len = 0;
      while (src[i + len] === "`") len++;
      const from = failedTicks.get(len);
      let close = -1;
      if (from === undefined || i < from) {
        let j = src.indexOf("`", i + len);
        while (j !== -1) {
          let r = 0;
          while (src[j + r] === "`") r++;
          if (r === len) {
            close = j;
            break;
          }
          j = src.indexOf("`", j + r);
        }
        if (close === -1) failedTicks.set(len, i);
      }
      if (close === -1) {
        text += src.slice(i, i + len);
        i += len;
      } else {
        let code = src.slice(i + len, close).replace(/\n/g, " ");
        if (code.length > 1 && code[0] === " " && code[code.length - 1] === " " && code.trim() !== "") code = code.slice(1, -1);
        flush();
        chain.append({ type: "code", value: code });
        i = close + len;
      }
    } else if (c === "*" || c === "_" || c === "~") {
      let len = 0;
      while (src[i + len] === c) len++;
      const before = i > 0 ? src[i - 1] : undefined;
      const after = src[i + len];
      const left = !isSpace(after) && (!isPunct(after) || isSpace(before) || isPunct(before));
      const right = !isSpace(before) && (!isPunct(before) || isSpace(after) || isPunct(after));
      let canOpen = left;
      let canClose = right;
      if (c === "_") {
        canOpen = left && (!right || isPunct(before));
        canClose = right && (!left || isPunct(after));
      } else if (c === "~" && len > 2) {
        canOpen = canClose = false;
      }
      flush();
      const node = textNode(src.slice(i, i + len));
      chain.append(node);
      if (canOpen || canClose) {
        const d = { node, ch: c, count: len, orig: len, canOpen, canClose, prev: delims, next: null };
        if (delims) delims.next = d;
        delims = d;
      }
      i += len;
    } else if (c === "[" || (c === "!" && src[i + 1] === "[")) {
      flush();
      const image = c === "!";
      const node = textNode(image ? "![" : "[");
      chain.append(node);
      brackets.push({ node, image, active: true, delims, at: i });
      if (!image) activeLinks++;
      i += image ? 2 : 1;
    } else if (c === "]") {
      const opener = brackets.pop();
      if (!opener) {
        text += "]";
        i++;
        continue;
      }
      if (!opener.image && opener.active) activeLinks--;
      const tail = opener.active && src[i + 1] === "(" ? linkTail(src, i + 1) : null;
      if (!tail) {
        text += "]";
        i++;
        continue;
      }
      flush();
      delims = processEmphasis(chain, delims, opener.delims);
      const children = chain.cut(opener.node, null);
      const safe = safeUrl(tail.dest);
      let node;
      if (!safe) {
        // Not a URL a note may link to: the whole of it stays text, as written.
        node = textNode(src.slice(opener.at, tail.end));
        chain.remove(opener.node);
        chain.append(node);
      } else if (opener.image) {
        node = { type: "image", alt: plainText(children), title: tail.title, ...safeFields(safe) };
        chain.insertAfter(opener.node, node);
        chain.remove(opener.node);
      } else {
        node = { type: "link", title: tail.title, ...safeFields(safe), chain: children };
        chain.insertAfter(opener.node, node);
        chain.remove(opener.node);
        for (const b of brackets) {
          if (!b.image && b.active) {
            b.active = false;
            activeLinks--;
          }
        }
      }
      i = tail.end;
    } else if (c === "<") {
      AUTOLINK.lastIndex = i;
      const m = AUTOLINK.exec(src);
      const safe = m && safeUrl(m[1]);
      if (safe && safe.kind !== "attachment") {
        flush();
        const node = { type: "link", title: null, ...safeFields(safe), chain: new Chain() };
        node.chain.append(textNode(m[1]));
        chain.append(node);
        i = AUTOLINK.lastIndex;
      } else {
        text += c;
        i++;
      }
    } else if (c === "&") {
      const e = entityAt(src, i);
      if (e) {
        text += e.text;
        i = e.end;
      } else {
        text += c;
        i++;
      }
    } else if ((c === "h" || c === "H") && activeLinks === 0 && (i === 0 || !/[\p{L}\p{N}]/u.test(src[i - 1]))) {
      BARE_URL.lastIndex = i;
      const m = BARE_URL.exec(src);
      const url = m && trimUrl(m[0]);
      const safe = url && safeUrl(url);
      if (safe) {
        flush();
        const node = { type: "link", title: null, ...safeFields(safe), chain: new Chain() };
        node.chain.append(textNode(url));
        chain.append(node);
        i += url.length;
      } else if (m && m[0].length > MAX_URL) {
        text += m[0]; // too long to be a link: text, not scanned again from each "h" in it
        i += m[0].length;
      } else {
        text += c;
        i++;
      }
    } else {
      text += c; // "!" without "[", or a letter "h"
      i++;
    }
  }
  flush();
  processEmphasis(chain, delims, null);
  return toArray(chain);
}

function safeFields(safe) {
  return safe.kind === "attachment" ? { url: `attachment:${safe.sha256}`, attachment: safe.sha256 } : { url: safe.href };
}

/** CommonMark's "process emphasis" over the delimiters above `bottom`; returns the new top. */
function processEmphasis(chain, top, bottom) {
  // The first delimiter above bottom.
  let closer = top;
  if (!closer || closer === bottom) return top;
  while (closer.prev && closer.prev !== bottom) closer = closer.prev;
  const openersBottom = new Map();
  const unlink = (d) => {
    if (d.prev) d.prev.next = d.next;
    if (d.next) d.next.prev = d.prev;
    if (d === top) top = d.prev;
  };
  while (closer) {
    if (!closer.canClose) {
      closer = closer.next;
      continue;
    }
    const key = closer.ch === "~" ? `~${closer.count}` : `${closer.ch}${closer.canOpen ? 1 : 0}${closer.orig % 3}`;
    const floor = openersBottom.has(key) ? openersBottom.get(key) : bottom;
    let opener = closer.prev;
    let found = false;
    while (opener && opener !== bottom && opener !== floor) {
      if (opener.ch === closer.ch && opener.canOpen) {
        if (closer.ch === "~") {
          found = opener.count === closer.count;
        } else {
          const odd = (closer.canOpen || opener.canClose) && (opener.orig + closer.orig) % 3 === 0 && !(opener.orig % 3 === 0 && closer.orig % 3 === 0);
          found = !odd;
        }
        if (found) break;
      }
      opener = opener.prev;
    }
    if (!found) {
      openersBottom.set(key, closer.prev);
      const next = closer.next;
      if (!closer.canOpen) unlink(closer);
      closer = next;
      continue;
    }
    const use = closer.ch === "~" ? closer.count : closer.count >= 2 && opener.count >= 2 ? 2 : 1;
    const type = closer.ch === "~" ? "strike" : use === 2 ? "strong" : "emph";
    opener.count -= use;
    closer.count -= use;
    opener.node.value = opener.node.value.slice(0, opener.count);
    closer.node.value = closer.node.value.slice(0, closer.count);
    const inner = chain.cut(opener.node, closer.node);
    chain.insertAfter(opener.node, { type, chain: inner });
    // The delimiters between them are gone.
    opener.next = closer;
    closer.prev = opener;
    if (opener.count === 0) {
      chain.remove(opener.node);
      unlink(opener);
    }
    if (closer.count === 0) {
      chain.remove(closer.node);
      const next = closer.next;
      unlink(closer);
      closer = next;
    }
  }
  // Everything above bottom is done with.
  while (top && top !== bottom) top = top.prev;
  if (top) top.next = null;
  return top;
}

// ---------------------------------------------------------------------------------------------
// The tree.

function finish(blocks, tasks) {
  for (const block of blocks) {
    if (block.type === "paragraph" || block.type === "heading") {
      block.children = parseInlines(block.raw);
      delete block.raw;
    } else if (block.type === "table") {
      block.head = block.head.map(parseInlines);
      block.rows = block.rows.map((row) => row.map(parseInlines));
    } else if (block.children) {
      if (block.type === "item" && block.task) {
        block.task.index = tasks.length;
        tasks.push(block.task);
      }
      finish(block.children, tasks);
    }
  }
}

function collectTasks(blocks, tasks) {
  for (const block of blocks) {
    if (block.type === "item" && block.task) tasks.push(block.task);
    if (block.children && block.type !== "paragraph" && block.type !== "heading") collectTasks(block.children, tasks);
  }
  return tasks;
}

/**
 * The note's text as a tree: { type: "document", children, tasks } of blocks (heading, paragraph,
 * list, item, blockquote, code_block, thematic_break, table) and inlines (text, softbreak,
 * hardbreak, emph, strong, strike, code, link, image). A task item has `task: { checked,
 * index, offset }`, offset being where its "x" or " " is in the text. Links and images carry
 * only URLs `safeUrl` allows.
 */
export function parse(text) {
  const blocks = parseBlocks(splitLines(String(text ?? "")), 0);
  const tasks = [];
  finish(blocks, tasks);
  return { type: "document", children: blocks, tasks };
}

/** The task items' boxes, in document order: [{ checked, offset }]. */
export function tasksOf(text) {
  return collectTasks(parseBlocks(splitLines(String(text ?? "")), 0), []);
}

/**
 * The text with the index-th task item's box flipped ("[ ]" to "[x]", "[x]" or "[X]" to "[ ]"):
 * only that one character changes. Out of range: the text as it is.
 */
export function toggleTask(text, index) {
  const task = tasksOf(text)[index];
  if (!task) return text;
  return text.slice(0, task.offset) + (task.checked ? " " : "x") + text.slice(task.offset + 1);
}

// ---------------------------------------------------------------------------------------------
// DOM nodes (never HTML).

let taskLabels = 0;

/**
 * The note's text drawn as DOM nodes. `loadAttachment(sha256)` resolves to a Blob (or null) for
 * an `attachment:` image or link; `onToggleTask(index, checked)` is called when a task's box is
 * clicked (the caller edits the text, see toggleTask, and draws it again). Images are shown
 * through blob: URLs: `urls` (an ObjectUrls of Web/attachments.js, owned by the caller, who
 * releases it when the drawing goes away) makes them and is told which this drawing shows
 * (`keepOnly`: the URLs of a drawing before that this one does not show are revoked); without
 * it, each URL is revoked once its image has loaded. `readOnly` draws the tasks' boxes disabled.
 */
export function renderMarkdown(text, { loadAttachment = null, onToggleTask = null, urls = null, readOnly = false, document: doc = globalThis.document } = {}) {
  const tree = parse(text);
  const fragment = doc.createDocumentFragment();
  const images = new Set(); // the hashes of the attachment images drawn
  const el = (tag, className) => {
    const e = doc.createElement(tag);
    if (className) e.className = className;
    return e;
  };

  function inlines(parent, nodes) {
    for (const node of nodes) parent.append(inline(node));
  }

  function unavailable(alt) {
    const span = el("span", "md-attachment-missing");
    span.textContent = alt ? `${alt} (attachment not available offline)` : "(attachment not available offline)";
    return span;
  }

  function attachmentImage(node) {
    const holder = el("span", "md-image");
    holder.textContent = node.alt;
    if (!loadAttachment) {
      holder.replaceChildren(unavailable(node.alt));
      return holder;
    }
    images.add(node.attachment);
    const show = (url, revokeOnLoad) => {
      const img = el("img");
      img.alt = node.alt;
      if (node.title) img.title = node.title;
      if (revokeOnLoad) {
        const revoke = () => URL.revokeObjectURL(url);
        img.addEventListener("load", revoke, { once: true });
        img.addEventListener("error", revoke, { once: true });
      }
      img.src = url; // a blob: URL: the page's policy allows img-src 'self' data: blob:
      holder.replaceChildren(img);
    };
    const made = urls && urls.peek(node.attachment);
    if (made) {
      show(made, false); // drawn before: no wait, no flicker
      return holder;
    }
    Promise.resolve()
      .then(() => loadAttachment(node.attachment))
      .then((blob) => {
        if (!blob || !/^image\//.test(blob.type)) {
          holder.replaceChildren(unavailable(node.alt));
          return;
        }
        if (!urls) {
          show(URL.createObjectURL(blob), true);
          return;
        }
        const url = urls.get(node.attachment, blob);
        if (url) show(url, false); // null: drawn again since without it, or released
      })
      .catch(() => holder.replaceChildren(unavailable(node.alt)));
    return holder;
  }

  function link(url, title) {
    const a = el("a");
    a.href = url;
    a.rel = "noopener noreferrer nofollow";
    a.target = "_blank";
    if (title) a.title = title;
    return a;
  }

  function attachmentLink(node) {
    const a = el("a", "md-attachment-link");
    a.href = node.url;
    if (node.title) a.title = node.title;
    a.addEventListener("click", (event) => {
      event.preventDefault();
      Promise.resolve(loadAttachment ? loadAttachment(node.attachment) : null).then((blob) => {
        if (!blob) {
          if (!a.nextSibling || !a.nextSibling.classList || !a.nextSibling.classList.contains("md-attachment-missing")) a.after(unavailable(""));
          return;
        }
        const url = URL.createObjectURL(blob);
        const save = el("a");
        save.href = url;
        save.download = a.textContent || node.attachment;
        save.click();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      }, () => a.after(unavailable("")));
    });
    return a;
  }

  function inline(node) {
    switch (node.type) {
      case "text":
        return doc.createTextNode(node.value);
      case "softbreak":
      case "hardbreak":
        return el("br");
      case "code": {
        const code = el("code");
        code.textContent = node.value;
        return code;
      }
      case "emph":
      case "strong":
      case "strike": {
        const e = el(node.type === "emph" ? "em" : node.type === "strong" ? "strong" : "del");
        inlines(e, node.children);
        return e;
      }
      case "link": {
        const a = node.attachment ? attachmentLink(node) : link(node.url, node.title);
        inlines(a, node.children);
        return a;
      }
      case "image": {
        if (node.attachment) return attachmentImage(node);
        // A remote image is not loaded (the policy forbids it, and it would tell a server the
        // note was opened): a link to it, named by its alt text.
        const a = link(node.url, node.title);
        a.className = "md-remote-image";
        a.textContent = node.alt || node.url;
        return a;
      }
      default:
        return doc.createTextNode("");
    }
  }

  function item(node, tight) {
    const li = el("li");
    let children = node.children;
    if (node.task) {
      li.className = node.task.checked ? "md-task md-task-checked" : "md-task";
      const box = el("input");
      box.type = "checkbox";
      box.checked = node.task.checked;
      if (readOnly) box.disabled = true; // a viewer's note: its boxes cannot be ticked
      box.className = "md-task-box";
      box.dataset.task = String(node.task.index);
      const label = el("span", "md-task-text");
      label.id = `md-task-${++taskLabels}`;
      box.setAttribute("aria-labelledby", label.id);
      if (children[0] && children[0].type === "paragraph") {
        inlines(label, children[0].children);
        children = children.slice(1);
      }
      if (!label.textContent.trim()) {
        box.removeAttribute("aria-labelledby");
        box.setAttribute("aria-label", `Task ${node.task.index + 1}`);
      }
      const index = node.task.index;
      box.addEventListener("change", () => {
        if (onToggleTask) onToggleTask(index, box.checked);
      });
      li.append(box, " ", label);
    } else if (tight && children[0] && children[0].type === "paragraph") {
      inlines(li, children[0].children);
      children = children.slice(1);
    }
    blocks(li, children);
    return li;
  }

  function blocks(parent, nodes) {
    for (const node of nodes) {
      switch (node.type) {
        case "heading": {
          const h = el(`h${node.level}`);
          inlines(h, node.children);
          parent.append(h);
          break;
        }
        case "paragraph": {
          const p = el("p");
          inlines(p, node.children);
          parent.append(p);
          break;
        }
        case "thematic_break":
          parent.append(el("hr"));
          break;
        case "code_block": {
          const pre = el("pre");
          pre.tabIndex = 0; // scrollable: reachable by keyboard
          const code = el("code");
          code.textContent = node.text;
          pre.append(code);
          parent.append(pre);
          break;
        }
        case "blockquote": {
          const q = el("blockquote");
          blocks(q, node.children);
          parent.append(q);
          break;
        }
        case "list": {
          const list = el(node.ordered ? "ol" : "ul");
          if (node.ordered && node.start !== 1) list.start = node.start;
          if (node.children.some((c) => c.task)) list.className = "md-tasks";
          for (const child of node.children) list.append(item(child, true));
          parent.append(list);
          break;
        }
        case "table": {
          const wrap = el("div", "md-table");
          const table = el("table");
          const row = (cells, tag) => {
            const tr = el("tr");
            cells.forEach((cell, k) => {
              const td = el(tag, node.align[k] ? `md-align-${node.align[k]}` : "");
              if (tag === "th") td.scope = "col";
              inlines(td, cell);
              tr.append(td);
            });
            return tr;
          };
          const thead = el("thead");
          thead.append(row(node.head, "th"));
          table.append(thead);
          if (node.rows.length) {
            const tbody = el("tbody");
            for (const cells of node.rows) tbody.append(row(cells, "td"));
            table.append(tbody);
          }
          wrap.append(table);
          parent.append(wrap);
          break;
        }
        default:
          break;
      }
    }
  }

  blocks(fragment, tree.children);
  if (urls) urls.keepOnly(images);
  return fragment;
}
