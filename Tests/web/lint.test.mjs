// The web app's lint (issue 47), run with the node tests: every module of Web/ and of these
// tests parses as an ES module; no trailing whitespace, tab indentation or `debugger`; every
// relative import names a file that exists and names only what that file exports. No npm
// package: node's own parser (`--check`) and the sources' text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync, existsSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The .js/.mjs files under `dir`, recursively, leaving out fixtures and vectors (data). */
function modules(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      if (!["fixtures", "vectors", "node_modules"].includes(name)) out.push(...modules(path));
    } else if (/\.m?js$/.test(name)) {
      out.push(path);
    }
  }
  return out;
}

const files = [...modules(join(root, "Web")), ...modules(join(root, "Tests/web"))];
const sources = new Map(files.map((path) => [path, readFileSync(path, "utf8")]));
const name = (path) => relative(root, path);

/** `import { a, b as c } from "./x.js"` and `import x, { … } from …`: [{ names, from }]. */
function importsOf(source) {
  const out = [];
  const pattern = /^\s*import\s+(?:[\w$]+\s*,\s*)?(?:\{([^}]*)\}\s*from\s*)?(?:\*\s+as\s+[\w$]+\s+from\s*)?["']([^"']+)["']/gm;
  for (const match of source.matchAll(pattern)) {
    const names = (match[1] || "").split(",").map((part) => part.trim().split(/\s+as\s+/)[0]).filter(Boolean);
    out.push({ names, from: match[2] });
  }
  for (const match of source.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)) out.push({ names: [], from: match[1] });
  return out;
}

/** The names a module exports (declarations, `export { a as b }` lists, re-exports). */
function exportsOf(source) {
  const out = new Set();
  for (const match of source.matchAll(/^\s*export\s+(?:default\s+)?(?:async\s+)?(?:function\*?|class|const|let|var)\s+([\w$]+)/gm)) out.add(match[1]);
  for (const match of source.matchAll(/^\s*export\s*\{([^}]*)\}/gm)) {
    for (const part of match[1].split(",").map((p) => p.trim()).filter(Boolean)) out.add(part.split(/\s+as\s+/).pop());
  }
  if (/^\s*export\s+default\b/m.test(source)) out.add("default");
  return out;
}

test("every module parses as an ES module", () => {
  for (const [path, source] of sources) {
    const checked = spawnSync(process.execPath, ["--input-type=module", "--check"], { input: source, encoding: "utf8" });
    assert.equal(checked.status, 0, `${name(path)} does not parse: ${checked.stderr.split("\n").slice(0, 5).join("\n")}`);
  }
});

test("no trailing whitespace, tab indentation or debugger statements", () => {
  const found = [];
  for (const [path, source] of sources) {
    source.split("\n").forEach((line, index) => {
      if (/[ \t]+$/.test(line)) found.push(`${name(path)}:${index + 1}: trailing whitespace`);
      if (/^\t/.test(line)) found.push(`${name(path)}:${index + 1}: indented with a tab`);
      if (/^\s*debugger\s*;?\s*$/.test(line)) found.push(`${name(path)}:${index + 1}: debugger`);
    });
  }
  assert.deepEqual(found, []);
});

test("every relative import names a file that exports what is imported", () => {
  const found = [];
  for (const [path, source] of sources) {
    for (const { names, from } of importsOf(source)) {
      if (!from.startsWith(".")) continue;
      const target = resolve(dirname(path), from);
      if (!existsSync(target)) {
        found.push(`${name(path)}: imports ${from}, which does not exist`);
        continue;
      }
      const exported = exportsOf(sources.get(target) ?? readFileSync(target, "utf8"));
      for (const imported of names) {
        if (!exported.has(imported)) found.push(`${name(path)}: imports ${imported} from ${from}, which does not export it`);
      }
    }
  }
  assert.deepEqual(found, []);
});
