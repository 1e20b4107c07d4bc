// Unit tests of the Markdown preview's parser (Web/markdown.js): the tree it makes, the URLs it
// lets through, toggleTask, and how long hostile or large notes take. No DOM here: the browser
// test (Tests/peers/test_webapp_markdown.py) draws it.
//   node --test Tests/web/
import { test } from "node:test";
import assert from "node:assert/strict";
import { parse, parseInlines, safeUrl, tasksOf, toggleTask } from "../../Web/markdown.js";

const blocks = (text) => parse(text).children;
const types = (nodes) => nodes.map((n) => n.type);
/** The inline nodes as compact text: text as is, other nodes as type(children). */
function show(nodes) {
  return nodes.map((n) => {
    if (n.type === "text") return n.value;
    if (n.type === "code") return `code(${n.value})`;
    if (n.type === "softbreak" || n.type === "hardbreak") return `${n.type}`;
    if (n.type === "link") return `link[${n.url}${n.title ? ` "${n.title}"` : ""}](${show(n.children)})`;
    if (n.type === "image") return `image[${n.attachment ? `attachment ${n.attachment.slice(0, 4)}` : n.url}](${n.alt})`;
    return `${n.type}(${show(n.children)})`;
  }).join("");
}
const inl = (text) => show(parseInlines(text));

/** Every link and image URL anywhere in a tree. */
function urls(node, out = []) {
  if (node.url !== undefined) out.push(node.url);
  for (const key of ["children", "head", "rows"]) {
    const value = node[key];
    if (Array.isArray(value)) value.flat(2).forEach((child) => child && typeof child === "object" && urls(child, out));
  }
  return out;
}

test("ATX and setext headings, paragraphs, thematic breaks", () => {
  const doc = blocks("# One\n## Two ##\n###### Six\n####### seven\n#no\n\nPara\nline two\n\nSetext\n===\n\n---\n***\n_ _ _\n");
  assert.deepEqual(types(doc), ["heading", "heading", "heading", "paragraph", "paragraph", "heading", "thematic_break", "thematic_break", "thematic_break"]);
  assert.deepEqual(doc.slice(0, 3).map((h) => [h.level, show(h.children)]), [[1, "One"], [2, "Two"], [6, "Six"]]);
  assert.equal(show(doc[3].children), "####### seven" + "softbreak" + "#no");
  assert.equal(show(doc[4].children), "Para" + "softbreak" + "line two");
  assert.deepEqual([doc[5].level, show(doc[5].children)], [1, "Setext"]);
});

test("bullet and ordered lists, nested by indentation", () => {
  const doc = blocks("- a\n- b\n  - b1\n    * b1x\n- c\n\n3. three\n4. four\n   1) inner\n\n+ plus");
  assert.deepEqual(types(doc), ["list", "list", "list"]);
  const [bullets, ordered, plus] = doc;
  assert.equal(bullets.ordered, false);
  assert.equal(bullets.children.length, 3);
  const b = bullets.children[1];
  assert.deepEqual(types(b.children), ["paragraph", "list"]);
  assert.deepEqual(types(b.children[1].children[0].children), ["paragraph", "list"], "a third level");
  assert.equal(show(b.children[1].children[0].children[1].children[0].children[0].children), "b1x");
  assert.equal(ordered.ordered, true);
  assert.equal(ordered.start, 3);
  assert.deepEqual(types(ordered.children[1].children), ["paragraph", "list"]);
  assert.equal(ordered.children[1].children[1].ordered, true);
  assert.equal(show(plus.children[0].children[0].children), "plus");
  // A lazy continuation line stays in its item; a different marker starts another list.
  const lazy = blocks("- one\ncontinued\n* other");
  assert.deepEqual(types(lazy), ["list", "list"]);
  assert.equal(show(lazy[0].children[0].children[0].children), "one" + "softbreak" + "continued");
});

test("block quotes, nested, with lists and lazy lines", () => {
  const doc = blocks("> quoted\nlazy\n>\n> > deeper\n> - item\n\nafter");
  assert.deepEqual(types(doc), ["blockquote", "paragraph"]);
  const quote = doc[0];
  assert.deepEqual(types(quote.children), ["paragraph", "blockquote", "list"]);
  assert.equal(show(quote.children[0].children), "quoted" + "softbreak" + "lazy");
  assert.equal(show(quote.children[1].children[0].children), "deeper");
});

test("fenced and indented code blocks keep their text as is", () => {
  const doc = blocks("```js info\n<b>*not em*</b>\n  - [ ] not a task\n```\n\n~~~\nx\n~~~~\n\n    indented *code*\n\n    more\n\n````\nunclosed ```\n");
  assert.deepEqual(types(doc), ["code_block", "code_block", "code_block", "code_block"]);
  assert.equal(doc[0].info, "js info");
  assert.equal(doc[0].text, "<b>*not em*</b>\n  - [ ] not a task");
  assert.equal(doc[1].text, "x");
  assert.equal(doc[2].text, "indented *code*\n\nmore");
  assert.equal(doc[3].text, "unclosed ```", "an unclosed fence runs to the end");
  assert.deepEqual(blocks("  ```\n  two\n   three\n  ```")[0].text, "two\n three", "the fence's indentation comes off");
});

test("GFM tables: header, alignment classes, escaped pipes, ragged rows", () => {
  const doc = blocks("| Name | Qty | Price | Note |\n|:-----|:---:|------:|------|\n| *tea* | 2 | 3.50 | a \\| b |\n| short |\n\nafter");
  assert.deepEqual(types(doc), ["table", "paragraph"]);
  const table = doc[0];
  assert.deepEqual(table.align, ["left", "center", "right", null]);
  assert.deepEqual(table.head.map(show), ["Name", "Qty", "Price", "Note"]);
  assert.deepEqual(table.rows.map((row) => row.map(show)), [["emph(tea)", "2", "3.50", "a | b"], ["short", "", "", ""]]);
  assert.deepEqual(types(blocks("a | b\n--|--\n1 | 2")), ["table"], "without outer pipes");
  assert.deepEqual(types(blocks("| a | b |\n|---|\n")), ["paragraph"], "the delimiter row must match the header");
  assert.deepEqual(types(blocks("text\n| a |\n|---|\n| 1 |")), ["paragraph", "table"], "a table ends a paragraph");
});

test("task items in every list marker, nested in lists and quotes", () => {
  const text = "- [ ] dash\n* [x] star\n+ [X] plus\n1. [ ] one\n2) [x] paren\n- [ ]\n- [x]not a task\n- [y] not a task\n" +
    "- parent\n  - [ ] nested\n> - [x] quoted\n>   > 1. [ ] deep";
  const tasks = parse(text).tasks;
  assert.deepEqual(tasks.map((t) => t.checked), [false, true, true, false, true, false, false, true, false]);
  assert.deepEqual(tasks.map((t) => t.index), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  for (const t of tasks) assert.match(text.slice(t.offset - 1, t.offset + 2), /^\[[ xX]\]$/);
  const first = blocks(text)[0].children[0];
  assert.equal(first.task.checked, false);
  assert.equal(show(first.children[0].children), "dash", "the box is not part of the item's text");
  assert.deepEqual(tasksOf(text), tasks.map(({ index, ...rest }) => rest));
});

test("toggleTask flips only that one box's character", () => {
  const text = "# List\n\n- [ ] one\n- [x] two\n  - [X] two.a\n\n```\n- [ ] in a fence\n```\n\n    - [ ] indented code\n\n> - [ ] quoted\n\n1. [ ] numbered\n";
  assert.deepEqual(tasksOf(text).map((t) => t.checked), [false, true, true, false, false]);
  const cases = [[0, "- [x] one"], [1, "- [ ] two"], [2, "  - [ ] two.a"], [3, "> - [x] quoted"], [4, "1. [x] numbered"]];
  for (const [index, line] of cases) {
    const next = toggleTask(text, index);
    assert.equal(next.length, text.length);
    const diff = [...next].map((c, k) => (c === text[k] ? -1 : k)).filter((k) => k >= 0);
    assert.equal(diff.length, 1, `one character changed for task ${index}`);
    assert.ok(next.split("\n").includes(line), `task ${index}: ${line}`);
    // Twice: the text again ("[X]" comes back as "[x]").
    assert.equal(toggleTask(next, index), index === 2 ? text.replace("[X] two.a", "[x] two.a") : text, "toggled back");
  }
  assert.ok(toggleTask(text, 0).includes("- [ ] in a fence"), "the fenced one is untouched");
  assert.equal(toggleTask(text, 5), text, "out of range: unchanged");
  assert.equal(toggleTask(text, -1), text);
  // [X] toggles to [ ], and back to [x].
  assert.equal(toggleTask("- [X] a", 0), "- [ ] a");
  assert.equal(toggleTask(toggleTask("- [X] a", 0), 0), "- [x] a");
});

test("toggleTask with CRLF and CR line ends, tabs and code fences holding tasks", () => {
  const crlf = "- [ ] a\r\n```\r\n- [ ] code\r\n```\r\n- [ ] b\r\n\r\n> - [x] c\r\n";
  assert.equal(toggleTask(crlf, 1), "- [ ] a\r\n```\r\n- [ ] code\r\n```\r\n- [x] b\r\n\r\n> - [x] c\r\n");
  assert.equal(toggleTask(crlf, 2), "- [ ] a\r\n```\r\n- [ ] code\r\n```\r\n- [ ] b\r\n\r\n> - [ ] c\r\n");
  assert.equal(toggleTask("- [ ] a\r- [ ] b", 1), "- [ ] a\r- [x] b");
  assert.equal(toggleTask("-\t[ ] tab\n\t- [ ] nested", 1), "-\t[ ] tab\n\t- [x] nested");
  assert.equal(toggleTask("~~~\n- [ ] a\n~~~\n- [ ] b", 0), "~~~\n- [ ] a\n~~~\n- [x] b");
  assert.equal(toggleTask("😀 emoji first\n\n- [ ] 🎉", 0), "😀 emoji first\n\n- [x] 🎉", "offsets in UTF-16 units, as JS strings");
});

test("emphasis, strong, strikethrough, code spans", () => {
  assert.equal(inl("*a* _b_ **c** __d__ ~~e~~ ~f~ `g`"), "emph(a) emph(b) strong(c) strong(d) strike(e) strike(f) code(g)");
  assert.equal(inl("***both***"), "emph(strong(both))");
  assert.equal(inl("**bold *and em* inside**"), "strong(bold emph(and em) inside)");
  assert.equal(inl("snake_case_word and 2*3*4"), "snake_case_word and 2emph(3)4");
  assert.equal(inl("* not em *"), "* not em *");
  assert.equal(inl("~~~three~~~"), "~~~three~~~");
  assert.equal(inl("`` a ` b ``"), "code(a ` b)");
  assert.equal(inl("`*not em*` `unclosed"), "code(*not em*) `unclosed");
  assert.equal(inl("**unclosed"), "**unclosed");
});

test("links, autolinks, bare URLs, images, escapes, entities, breaks", () => {
  assert.equal(inl('[a *b*](https://example.com/x "T")'), 'link[https://example.com/x "T"](a emph(b))');
  assert.equal(inl("[paren](https://e.com/a_(b)) [angle](<https://e.com/a b>)"), "link[https://e.com/a_(b)](paren) [angle](<https://e.com/a b>)");
  assert.equal(inl("<https://e.com/q?a=1> <mailto:me@e.com>"), "link[https://e.com/q?a=1](https://e.com/q?a=1) link[mailto:me@e.com](mailto:me@e.com)");
  assert.equal(inl("see https://e.com/path_(x). or http://e.org, done"), "see link[https://e.com/path_(x)](https://e.com/path_(x)). or link[http://e.org/](http://e.org), done");
  assert.equal(inl("[https://inner.com](https://outer.com)"), "link[https://outer.com/](https://inner.com)", "no link in a link");
  assert.equal(inl("[mail](mailto:a@b.c)"), "link[mailto:a@b.c](mail)");
  assert.equal(inl("![a *cat*](attachment:" + "ab".repeat(32) + ")"), "image[attachment abab](a cat)");
  assert.equal(inl("![remote](https://e.com/i.png)"), "image[https://e.com/i.png](remote)");
  assert.equal(inl("[file](attachment:" + "0f".repeat(32) + ")"), `link[attachment:${"0f".repeat(32)}](file)`);
  assert.equal(inl("![bad](attachment:ABC)"), "![bad](attachment:ABC)", "an attachment URL is 64 lower-case hex digits");
  assert.equal(inl("\\*not em\\* \\[not link](x) \\a"), "*not em* [not link](x) \\a");
  assert.equal(inl("&amp; &lt;b&gt; &#65; &#x1F600; &bogus; &#0;"), "& <b> A 😀 &bogus; \ufffd");
  assert.equal(inl("hard  \nbreak\\\nagain\nsoft"), "hardhardbreakbreakhardbreakagainsoftbreaksoft");
  assert.equal(inl("[ref][x] [unclosed](https://e.com"), "[ref][x] [unclosed](link[https://e.com/](https://e.com)");
  assert.equal(inl("relative [a](/x) [b](#top) [c](x.html)"), "relative [a](/x) [b](#top) [c](x.html)", "no page-relative links");
});

const HOSTILE = [
  "<script>alert(1)</script>",
  "<img src=x onerror=alert(1)>",
  "[x](javascript:alert(1))",
  "[x](JaVaScRiPt:alert(1))",
  "[x]( javascript:alert(1))",
  "[x](\tjavascript:alert(1))",
  "[x](java&#x09;script:alert(1))",
  "[x](java&#9;script:alert(1))",
  "[x](&#106;avascript:alert(1))",
  "[x](javascript&colon;alert(1))",
  "[x](java\\\nscript:alert(1))",
  "[x](<javascript:alert(1)>)",
  "[x](\u0001javascript:alert(1))",
  "[x](vbscript:msgbox(1))",
  "[x](file:///etc/passwd)",
  "[x](data:text/html,<script>alert(1)</script>)",
  "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
  "![x](javascript:alert(1))",
  "![x](data:image/svg+xml,<svg onload=alert(1)>)",
  "<javascript:alert(1)>",
  "<data:text/html,hi>",
  "javascript:alert(1)",
  "[x](https://e.com\"onmouseover=\"alert(1))",
  "[a](https://e.com \"title\" onclick=alert(1))",
  "- [ ] [x](javascript:alert(1))\n| [a](javascript:1) |\n|---|\n| ![b](vbscript:1) |\n> [q](JAVASCRIPT:1)\n# [h](data:x)",
];

test("hostile notes: no dangerous URL in any link or image, HTML stays text", () => {
  for (const text of HOSTILE) {
    const doc = parse(text);
    for (const url of urls(doc)) {
      const parsed = safeUrl(url);
      assert.ok(parsed, `${JSON.stringify(text)} gave ${url}`);
      assert.match(url, /^(https?:\/\/|mailto:|attachment:[0-9a-f]{64}$)/, JSON.stringify(text));
      assert.doesNotMatch(url, /javascript|vbscript|data:|file:/i, JSON.stringify(text));
    }
  }
  assert.equal(inl("<script>alert(1)</script>"), "<script>alert(1)</script>");
  assert.equal(inl("<img src=x onerror=alert(1)>"), "<img src=x onerror=alert(1)>");
  assert.equal(inl("[x](javascript:alert(1))"), "[x](javascript:alert(1))", "shown as written");
  assert.equal(inl("![x](javascript:alert(1))"), "![x](javascript:alert(1))");
  assert.equal(inl("a [x](JaVaScRiPt:alert(1)) b"), "a [x](JaVaScRiPt:alert(1)) b");
  // The allow-list itself.
  for (const bad of ["javascript:x", " https://e.com", "https://e.com/a b", "java\tscript:x", "data:image/png;base64,AA", "vbscript:x", "file:///x", "//e.com", "/x", "#a", "x", "", "http://", "mailto:", "attachment:" + "A".repeat(64)]) {
    assert.equal(safeUrl(bad), null, JSON.stringify(bad));
  }
  assert.deepEqual(safeUrl("HTTPS://E.com/a"), { kind: "web", href: "https://e.com/a" });
  assert.deepEqual(safeUrl("attachment:" + "a".repeat(64)), { kind: "attachment", sha256: "a".repeat(64) });
  assert.equal(safeUrl("https://e.com/" + "a".repeat(3000)), null, "too long");
});

/** Parses `text`, prints how long it took, and fails past a generous bound (quadratic parsing takes minutes). */
function timed(name, text) {
  const start = performance.now();
  const doc = parse(text);
  toggleTask(text, 0);
  const ms = performance.now() - start;
  console.log(`markdown: ${name}: ${text.length.toLocaleString("en")} characters in ${ms.toFixed(1)} ms`);
  assert.ok(ms < 10000, `${name} took ${ms} ms`);
  return doc;
}

test("pathological notes finish quickly", () => {
  timed("50,000 *", "*".repeat(50000));
  timed("50,000 _", "_".repeat(50000));
  timed("50,000 [", "[".repeat(50000));
  timed("50,000 ![", "![".repeat(50000));
  timed("25,000 [ then 25,000 ]", "[".repeat(25000) + "]".repeat(25000));
  timed("20,000 [x](", "[x](".repeat(20000));
  timed("20,000 [a](b \"", "[a](b \"".repeat(20000));
  timed("alternating *_", "*_".repeat(25000));
  timed("unclosed emphasis", "*a _b **c ~~d ".repeat(10000));
  timed("backtick runs of every length", Array.from({ length: 300 }, (_, k) => "`".repeat(k + 1)).join("x"));
  timed("50,000 <", "<".repeat(50000));
  timed("20,000 <https://", "<https://".repeat(20000));
  timed("a URL of 130,000 characters", "https://a.b/(".repeat(10000));
  timed("50,000 &#", "&#".repeat(50000));
  timed("50,000 backslashes", "\\".repeat(50000));
  const quotes = timed("10,000 nested >", ">".repeat(10000) + " deep");
  let depth = 0;
  for (let node = quotes.children[0]; node && node.type === "blockquote"; node = node.children[0]) depth++;
  assert.ok(depth >= 30 && depth < 100, `nesting is capped (${depth})`);
  timed("10,000 nested > with spaces", "> ".repeat(10000) + "deep");
  timed("10,000 nested - on a line", "- ".repeat(10000) + "deep");
  timed("10,000 nested 1. on a line", "1. ".repeat(10000) + "deep");
  timed("10,000 lines of nested >", Array.from({ length: 10000 }, (_, k) => ">".repeat(k % 500) + " line").join("\n"));
  const lists = timed("1,000 lines of nested lists", Array.from({ length: 1000 }, (_, k) => "  ".repeat(k) + "- [ ] item").join("\n"));
  assert.ok(lists.tasks.length >= 30, "tasks down to the nesting cap");
  timed("a table of 30,000 rows", "|a|b|\n|-|-|\n" + "|x|*y*|\n".repeat(30000));
  timed("1,000 lines of 1,000 pipes", ("|".repeat(1000) + "\n").repeat(1000));
});

test("a 200,000-character note of mixed Markdown parses (time printed)", () => {
  const section = (k) => `## Section ${k}\n\nSome *emphasis*, **strong**, ~~gone~~, \`code\`, a [link](https://example.com/${k} "t") and <https://e.com/${k}>.\n` +
    `- [ ] task ${k}\n- [x] done ${k}\n  1. nested *item*\n> a quote with https://e.org/${k}\n\n` +
    "```\nconst x = 1; // - [ ] not a task\n```\n\n| a | b |\n|:--|--:|\n| 1 | 2 |\n\n---\n\n";
  let text = "";
  for (let k = 0; text.length < 200000; k++) text += section(k);
  text = text.slice(0, 200000);
  const doc = timed("200,000 characters of mixed Markdown", text);
  assert.ok(doc.tasks.length > 1000);
  assert.ok(doc.children.filter((b) => b.type === "table").length > 500);
});
