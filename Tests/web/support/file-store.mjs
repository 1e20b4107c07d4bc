// A MemoryStore persisted to a JSON file after every write (written to a temporary file and
// renamed over it, so a killed process leaves the old state or the new, never half of one): a
// node client "killed" and started again on the same file restarts with its records, cursor
// and outbox (docs/reliability.md, "The engine outside the page").

import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { MemoryStore } from "../../../Web/memory-store.js";

export function openFileStore(path) {
  let state = null;
  try {
    state = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    if (error.code !== "ENOENT") throw error;
  }
  const onWrite = (snapshot) => {
    writeFileSync(path + ".tmp", JSON.stringify(snapshot));
    renameSync(path + ".tmp", path);
  };
  return MemoryStore.from(state, { onWrite });
}
