// The `noted` command-line client (the Swift NotedClient's sync engine) driven from node, for
// Tests/web/mixed-live.test.mjs: one home directory per device (`--home`), signed in to the
// test server with `login --username --password-stdin`, its notes read back with
// `list --offline --json` (and `--trashed`), edits written with `new`/`edit --body`/`trash`/
// `restore`/`purge`, `--offline` (written to the home's database only) or not (then the command
// syncs before it exits), and `noted sync` (exit status 0 only when everything is synced).
// Commands run asynchronously (the JavaScript clients of the same test keep syncing meanwhile),
// one at a time per home.

import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { normalizeFields } from "../../../Web/records.js";
import { PASSWORD, sleep } from "./live.mjs";

/** One `noted` run: { code, stdout, stderr } (never throws for a non-zero exit). */
function run(bin, args, { input, timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { timeout: timeoutMs, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") reject(new Error(`${args.join(" ")}: ${error.message} ${stderr}`));
      else resolve({ code: error ? error.code : 0, stdout, stderr });
    });
    // A command that does not read its input may exit before it is written: no EPIPE.
    child.stdin.on("error", () => {});
    child.stdin.end(input ?? "");
  });
}

/** A `noted` home: a device of the user, its database and credentials in `dir/name`. */
export class CliHome {
  constructor(bin, dir, name) {
    this.bin = bin;
    this.name = name;
    this.home = join(dir, name);
    mkdirSync(this.home, { recursive: true });
    this.queue = Promise.resolve();
    this.log = []; // every command and its exit status, for a failure's report
  }

  /** `noted --home H …args`, after this home's earlier commands; throws on a non-zero exit when `check`. */
  noted(args, { input, check = true, timeoutMs } = {}) {
    const next = this.queue.then(async () => {
      const result = await run(this.bin, ["--home", this.home, ...args], { input, timeoutMs });
      this.log.push(`${args.join(" ")} -> ${result.code}${result.code ? `: ${result.stderr.trim().slice(-300)}` : ""}`);
      if (check && result.code !== 0) throw new Error(`${this.name}: noted ${args.join(" ")}: exit ${result.code}: ${result.stderr.trim()}`);
      return result;
    });
    this.queue = next.catch(() => {});
    return next;
  }

  async login(base, username) {
    await this.noted(["--server", base, "login", "--username", username, "--password-stdin", "--no-sync"], { input: `${PASSWORD}\n` });
  }

  /** A new note; its id. */
  async create({ title, body }, { offline = false } = {}) {
    const { stdout } = await this.noted(["new", "--title", title, "--body", body, "--json", ...(offline ? ["--offline"] : [])]);
    return JSON.parse(stdout).id;
  }

  /** The note's body replaced by `edit(body)` (null from it: nothing written); false when the note is not here. */
  async edit(id, edit, { offline = false } = {}) {
    const note = (await this.notes()).get(id);
    if (!note) return false;
    const body = edit(note.fields.body);
    if (body === null || body === undefined) return false;
    await this.noted(["edit", id, "--body", body, ...(offline ? ["--offline"] : [])]);
    return true;
  }

  /** `noted trash|restore|purge ID`; false when the note is not here. */
  async act(verb, id, { offline = false } = {}) {
    if (!(await this.notes()).has(id)) return false;
    await this.noted([verb, id, ...(offline ? ["--offline"] : [])]);
    return true;
  }

  /** `noted sync` once: whether it said everything is synced (exit 0). */
  async syncOnce() {
    const { code } = await this.noted(["sync", "--timeout", "10"], { check: false });
    return code === 0;
  }

  /** `noted sync` until it exits 0 (at most `tries` times): whether it did. */
  async sync(tries = 10) {
    for (let i = 0; i < tries; i++) {
      if (await this.syncOnce()) return true;
      await sleep(200);
    }
    return false;
  }

  /**
   * The home's notes as the CLI reports them, trashed ones included: a Map from id to
   * { rev, pending, refusal, fields } (fields normalized as the web app's, for comparison).
   */
  async notes() {
    const out = new Map();
    for (const extra of [[], ["--trashed"]]) {
      const { stdout } = await this.noted(["list", "--offline", "--json", ...extra]);
      for (const n of JSON.parse(stdout)) {
        out.set(n.id, {
          rev: n.rev, pending: n.pending, refusal: n.refusal,
          fields: normalizeFields({ title: n.title, body: n.body, tags: n.tags, folder: n.folder, pinned: n.pinned, trashed: n.trashed }),
        });
      }
    }
    return out;
  }
}

/** Differences between a CLI home's notes and the server's (ids, revs, title, body, tags, folder, pinned, trashed). */
export function compareCli(name, notes, server) {
  const out = [];
  const scalar = ["title", "body", "folder", "pinned", "trashed"];
  for (const [id, s] of server) {
    const n = notes.get(id);
    if (!n) out.push(`${name}: lacks ${id}`);
    else if (n.rev !== s.rev) out.push(`${name}: ${id} at rev ${n.rev}, the server at ${s.rev}`);
    else if (n.pending) out.push(`${name}: ${id} still pending`);
    else {
      for (const f of scalar) if (n.fields[f] !== s.fields[f]) out.push(`${name}: ${id} ${f} ${JSON.stringify(n.fields[f])}, the server ${JSON.stringify(s.fields[f])}`);
      if ([...n.fields.tags].sort().join("\n") !== [...s.fields.tags].sort().join("\n")) out.push(`${name}: ${id} tags differ`);
    }
  }
  for (const id of notes.keys()) if (!server.has(id)) out.push(`${name}: holds ${id}, which the server has not`);
  return out;
}
