// One local database per account in this browser profile (docs/client.md, "Accounts on one
// device"). An account's notes, outbox, cursor, refusals and session live in the IndexedDB
// database `noted:<issuer>:<user id>` (the access token's `iss` and `sub`), so that signing in
// as someone else never erases anything and never shows one account's notes to another, and an
// account signing in again finds what it left unsynced and syncs it. The small database
// `noted-current` (and localStorage, as the versions before) names the database of the account
// that signed in last: the page opens it at start. Signing out keeps the database unless the
// person removes this browser's copy (`removeLocalCopy`, below: for a shared or lent computer).
//
// The versions before kept one database, `noted` (LEGACY), for whoever signed in. It stays the
// database of the account it belongs to (its `account` setting, else the user of the session it
// holds), pending edits included; one that names no account (its session was lost) goes to the
// first account that signs in, as it would have before. Any other account gets its own.

import { LocalStore, done, request } from "./db.js";
import { refusalOf } from "./records.js";
import { claims } from "./auth.js";

const CURRENT = "noted.account"; // localStorage: the database opened at start
// IndexedDB: the same name, kept where it survives the browser being killed. Chromium writes
// localStorage to disk some seconds after a change: a browser killed meanwhile (a crash, the
// system ending it) started signed out, offline with no way back in, though the account's
// session and unsynced notes were in its database (Tests/peers/test_webapp_offline.py). An
// IndexedDB transaction is kept once it completes ("strict": on disk, for this rare write).
const POINTER = "noted-current";
export const LEGACY = "noted";

/** The account a session is for: { issuer, user }, or null. */
export function accountOf(session) {
  if (!session || !session.user) return null;
  return { issuer: session.issuer || claims(session.accessToken).iss || location.origin, user: session.user };
}

export function databaseName(account) {
  return `noted:${account.issuer}:${account.user}`;
}

function sameAccount(a, b) {
  return Boolean(a && b && a.issuer === b.issuer && a.user === b.user);
}

/** Whose database `store` is (null: nobody's yet). */
export async function ownerOf(store) {
  return (await store.getMeta("account")) || accountOf(await store.getMeta("session"));
}

function remembered() {
  try {
    return localStorage.getItem(CURRENT);
  } catch {
    return null;
  }
}

function openPointer() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open(POINTER, 1);
    req.onupgradeneeded = () => req.result.createObjectStore("current");
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

/** The database named in `noted-current` (null: none, or it cannot be read). */
async function pointer() {
  try {
    const db = await openPointer();
    try {
      return (await request(db.transaction("current", "readonly").objectStore("current").get("database"))) || null;
    } finally {
      db.close();
    }
  } catch {
    return null;
  }
}

/** Names `name` in `noted-current` (null: names nothing). */
async function setPointer(name) {
  const db = await openPointer();
  try {
    const tx = db.transaction("current", "readwrite", { durability: "strict" });
    if (name === null) tx.objectStore("current").delete("database");
    else tx.objectStore("current").put(name, "database");
    await done(tx);
  } finally {
    db.close();
  }
}

/**
 * The database of the account that signed in last in this profile (signed in still or not), or
 * null when there is none (nothing is created then).
 */
export async function openCurrent(options) {
  // `noted-current` first: localStorage may be older (a sign-in not yet written to disk).
  let name = (await pointer()) || remembered();
  if (!name && (await LocalStore.exists(LEGACY))) name = LEGACY; // written by a version before
  if (!name) return null;
  const store = await LocalStore.open(name, options);
  if (name === LEGACY && !(await store.getMeta("account"))) {
    const owner = accountOf(await store.getMeta("session"));
    if (owner) await store.setMeta("account", owner);
  }
  return store;
}

/** The database of `account`, which is signing in: from now on the one opened at start. */
export async function openFor(account, options) {
  const own = databaseName(account);
  let store = null;
  if (!(await LocalStore.exists(own)) && (await LocalStore.exists(LEGACY))) {
    const legacy = await LocalStore.open(LEGACY, options);
    const owner = await ownerOf(legacy);
    if (!owner || sameAccount(owner, account)) store = legacy;
    else legacy.close();
  }
  if (!store) store = await LocalStore.open(own, options);
  const owner = await store.getMeta("account");
  if (!sameAccount(owner, account)) await store.setMeta("account", account);
  await setPointer(store.name);
  localStorage.setItem(CURRENT, store.name);
  return store;
}

/**
 * Deletes an account's database in this browser (its notes, outbox, cursor, session and the
 * attachments' blobs), once the account itself is deleted on the server or when the person
 * signing out removes this browser's copy, and the entry naming it as the one opened at start:
 * the page then starts signed out. `store` (that account's, open) is closed first. The entry
 * goes before the database, so that another tab reloading meanwhile (its connection closed by
 * the deletion) does not open, and so create again, the database being deleted; should the
 * deletion fail, the entry names it again.
 */
export async function removeAccountDatabase(store, options) {
  const name = store.name;
  store.close();
  const named = (await pointer()) === name;
  const remembers = remembered() === name;
  if (named) await setPointer(null);
  if (remembers) forgetRemembered();
  try {
    await LocalStore.remove(name, options);
  } catch (error) {
    if (named) await setPointer(name).catch(() => {});
    if (remembers) {
      try {
        localStorage.setItem(CURRENT, name);
      } catch {
        // No storage: `noted-current` names it.
      }
    }
    throw error;
  }
}

function forgetRemembered() {
  try {
    localStorage.removeItem(CURRENT);
  } catch {
    // No storage: nothing names it.
  }
}

// ---------------------------------------------------------------------------------------------
// Removing this browser's copy of an account (security review 3, L2): at sign-out, or from the
// welcome page after it, for a shared or lent computer. Never silently: what the server has not
// got yet is counted first and said (`unsyncedSentence`), and kept unless the person removes it
// anyway.

/**
 * What this browser holds of the account that the server has not got: `edits`, the notes with
 * edits not acknowledged (pending, in flight or refused; `refused` of them the server refused),
 * and `files`, attachments not uploaded yet (a store without blobs counts none).
 */
export async function unsyncedOf(store) {
  const records = await store.pendingRecords();
  const files = typeof store.pendingBlobCount === "function" ? await store.pendingBlobCount() : 0;
  return { edits: records.length, refused: records.filter((r) => refusalOf(r)).length, files };
}

/** "N edits [and M attached files] on this browser have not reached the server yet" ("" for none). */
export function unsyncedSentence({ edits = 0, files = 0 }) {
  const parts = [];
  if (edits) parts.push(`${edits} edit${edits === 1 ? "" : "s"}`);
  if (files) parts.push(`${files} attached file${files === 1 ? "" : "s"}`);
  if (parts.length === 0) return "";
  return `${parts.join(" and ")} on this browser ${edits + files === 1 ? "has" : "have"} not reached the server yet`;
}

// What of the account a response cached in Cache Storage could hold: the API's answers (notes,
// attachments' bytes) and the sign-in's. The service worker (Web/sw.js) caches none of them
// today; a version that did, or another worker of the origin, is cleaned up after all the same.
const ACCOUNT_PATHS = /^\/(v1|oauth)(\/|$)/;

/**
 * Deletes the Cache Storage entries (of every cache of the origin) that may hold an account's
 * data: the number deleted. `storage`: the CacheStorage (`caches`); `origin`: the page's.
 */
export async function removeCachedAccountData(storage = globalThis.caches, origin = globalThis.location && globalThis.location.origin) {
  if (!storage) return 0;
  let removed = 0;
  for (const name of await storage.keys()) {
    const cache = await storage.open(name);
    for (const req of await cache.keys()) {
      const url = new URL(req.url);
      if (origin && url.origin !== origin) continue;
      if (ACCOUNT_PATHS.test(url.pathname) && (await cache.delete(req))) removed++;
    }
  }
  return removed;
}

/**
 * Removes this browser's copy of the account whose database `store` is (open; it is closed):
 * the database (notes, outbox, session, the attachments' blobs), the entry naming it as the one
 * opened at start, and the Cache Storage entries of the API. Whether anything was unsynced is
 * the caller's to ask first (`unsyncedOf`).
 */
export async function removeLocalCopy(store, options) {
  await removeAccountDatabase(store, options);
  await removeCachedAccountData().catch(() => 0);
}
