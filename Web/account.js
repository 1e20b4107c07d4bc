// The Account panel (docs/protocol.md, "The signed-in account"): see what the account stores
// and its limits, change the password, turn two-factor sign-in on or off, see the signed-in
// devices and sign one or all of them out,
// download every note or import another app's export, delete the account. The requests are
// made here; what ending this browser's own sign-in means (the sign-out path, its
// unsynced-notes dialog, removing the account's database) is the app's, through the callbacks
// it gives.

import { qrMatrix, qrSVG } from "./qr.js";
import { SIZE_UNITS, usageSummary } from "./usage.js";

/** A refusal of an account request: the server's message (`code` its error code). */
export class AccountError extends Error {
  constructor(message, { code = null, status = 0 } = {}) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

/** Makes an account request; an answer that is not 2xx throws an AccountError with the server's message. */
async function call(auth, method, path, body) {
  return answered(await reaching(() => auth.request(method, path, body)));
}

/** Runs a request; a network failure (a TypeError, as fetch's) becomes an AccountError saying so. */
async function reaching(send) {
  try {
    return await send();
  } catch (error) {
    if (error instanceof TypeError) throw new AccountError("the server could not be reached; check the connection", { code: "offline" });
    throw error;
  }
}

/** The answer if it is 2xx; otherwise an AccountError with the server's message and code. */
function answered(answer) {
  if (answer.ok) return answer;
  const said = answer.body || {};
  throw new AccountError(said.message || said.error || `the server answered ${answer.status}`, { code: said.error || null, status: answer.status });
}

/**
 * Changes the password: the number of other sign-ins it ended. `code`: with two-factor sign-in
 * on, a code from the authenticator app or a recovery code (refused without: `code_required`).
 */
export async function changePassword(auth, current, next, code) {
  const answer = await call(auth, "POST", "/v1/account/password", withCode({ current_password: current, new_password: next }, code));
  return Number(answer.body && answer.body.signed_out) || 0;
}

export async function listDevices(auth) {
  const answer = await call(auth, "GET", "/v1/account/devices");
  return (answer.body && answer.body.devices) || [];
}

/** Signs one other device out: false when it was signed out already (404). */
export async function signOutDevice(auth, id) {
  try {
    await call(auth, "DELETE", `/v1/account/devices/${encodeURIComponent(id)}`);
    return true;
  } catch (error) {
    if (error.status === 404) return false;
    throw error;
  }
}

/** Ends every sign-in of the account, this browser's too: how many. */
export async function signOutEverywhere(auth) {
  const answer = await call(auth, "DELETE", "/v1/account/devices");
  return Number(answer.body && answer.body.signed_out) || 0;
}

/**
 * The account: { id, username, two_factor: { enabled, recovery_codes_left }, usage: { bytes,
 * history_bytes, records, quota_bytes, quota_records } } (`usage` absent from older servers).
 */
export async function readAccount(auth) {
  return (await call(auth, "GET", "/v1/account")).body || {};
}

/**
 * Starts turning two-factor sign-in on (if `password` is right): { secret, uri }, the TOTP key
 * (base32) and its otpauth:// URI for the authenticator app. Nothing changes until `enableTwoFactor`.
 */
export async function setUpTwoFactor(auth, password) {
  const { secret, uri } = (await call(auth, "POST", "/v1/account/2fa/setup", { password })).body || {};
  return { secret: String(secret || ""), uri: String(uri || "") };
}

/** Turns two-factor sign-in on with a first code from the app: the recovery codes (shown once). */
export async function enableTwoFactor(auth, code) {
  const answer = await call(auth, "POST", "/v1/account/2fa/enable", { code });
  return ((answer.body && answer.body.recovery_codes) || []).map(String);
}

/** Turns two-factor sign-in off, with the password and a code from the app or a recovery code. */
export async function disableTwoFactor(auth, password, code) {
  await call(auth, "POST", "/v1/account/2fa/disable", { password, code });
}

/**
 * Sends another app's export (`file`, a File) to be imported (`format`: one of the server's
 * names, or "" to let it tell from the name and content; `replace`: overwrite notes already
 * here that the file holds with other content, instead of adding its versions beside them):
 * { imported, updated, unchanged, copied, skipped: [{ source, reason }] }. `progress` as for
 * `Auth.upload`. The notes then arrive by sync.
 */
export async function importNotes(auth, file, format, progress, replace = false) {
  const query = new URLSearchParams({ name: file.name });
  if (format) query.set("from", format);
  if (replace) query.set("replace", "true");
  const answer = answered(await reaching(() => auth.upload(`/v1/import?${query}`, file, progress)));
  const said = answer.body || {};
  const count = (n) => Number(n) || 0;
  return {
    imported: count(said.imported), updated: count(said.updated), unchanged: count(said.unchanged),
    copied: count(said.copied), skipped: Array.isArray(said.skipped) ? said.skipped : [],
  };
}

/**
 * Deletes the account on the server (everything kept for it), if `password` is right (and with
 * two-factor sign-in on, `code`: one from the authenticator app or a recovery code).
 */
export async function deleteAccount(auth, password, code) {
  await call(auth, "DELETE", "/v1/account", withCode({ password }, code));
}

/** A request's body with `code` in it, if there is one (an account without two-factor sign-in needs none). */
function withCode(body, code) {
  return code ? { ...body, code: String(code) } : body;
}

/**
 * Downloads every note of the account from the server as a zip (`format`: "markdown" or
 * "json"), saved by the browser: the file's name. The server makes the zip from what it holds,
 * so notes not yet synced from this browser are not in it.
 */
export async function downloadAll(auth, format) {
  const response = await reaching(() => auth.download(`/v1/export?format=${encodeURIComponent(format)}`));
  if (!response.ok) {
    const said = await response.json().catch(() => ({}));
    throw new AccountError(said.message || said.error || `the server answered ${response.status}`, { code: said.error || null, status: response.status });
  }
  const name = (/filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "") || [])[1] || "noted-export.zip";
  saveFile(await response.blob(), name);
  return name;
}

/** Has the browser save `blob` as a file named `name` (through a Blob URL, revoked a minute later). */
export function saveFile(blob, name) {
  const link = Object.assign(document.createElement("a"), { href: URL.createObjectURL(blob), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
}

/** A time in Unix milliseconds as a local date and time. */
function when(ms) {
  const date = new Date(Number(ms));
  if (!Number.isFinite(date.getTime())) return "unknown";
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** Said of a code field left empty (the password and delete forms, with two-factor sign-in on). */
const CODE_MISSING = "Enter a code from your authenticator app or a recovery code.";

/**
 * What to say of the server's refusal of a code (`code_required`, `invalid_code`), after `what`
 * ("Password not changed"); null for any other refusal.
 */
function codeRefusal(error, what) {
  if (error.code === "code_required") {
    return `${what}: two-factor sign-in is on for this account, so a code from your authenticator app or a recovery code ` +
      "is needed too. Enter one and try again.";
  }
  if (error.code === "invalid_code") {
    return `${what}: the code is not right, or was used already. Enter the one your authenticator app shows now ` +
      "(check that your phone’s clock is right), or an unused recovery code.";
  }
  return null;
}

const $ = (id) => document.getElementById(id);

/**
 * Runs `work` with `button` marked busy (aria-disabled, not disabled: a disabled button loses
 * the keyboard focus); a click while it runs does nothing.
 */
async function busy(button, work) {
  if (button.getAttribute("aria-disabled") === "true") return;
  button.setAttribute("aria-disabled", "true");
  try {
    await work();
  } finally {
    button.removeAttribute("aria-disabled");
  }
}

/**
 * The panel (a modal dialog) and its delete-account dialog. `actions`:
 * - `signOutEverywhere({ remove })`: the app's sign-out, every sign-in ended first (it may ask
 *   about unsynced notes); `remove`: this browser's copy of the notes goes too (the panel's
 *   checkbox, on each time the panel opens); rejects if it could not.
 * - `deleteAccount(password, { code, onBlocked })`: deletes the account and this browser's copy
 *   (`code`: with two-factor sign-in on, one from the authenticator app or a recovery code), then
 *   shows the signed-out page; rejects (an AccountError) if the server refused.
 * - `unsynced()`: how many notes this browser has not synced; `exportUnsynced()`: downloads
 *   them, resolving to a sentence saying so.
 */
export class AccountPanel {
  constructor(auth, actions) {
    this.auth = auth;
    this.actions = actions;
    this.loading = 0;
    this.reading = 0; // the account's reads (two-factor state, usage), as `loading` for the devices
    this.username = "";
    this.turningOn = true; // what the two-factor dialog does
    this.twoFactorChanged = false; // turned on or off since the dialog opened
    this.importing = false;
    this.opener = null;
    this.ui = {
      dialog: $("account-dialog"), close: $("account-close"),
      usageText: $("usage-text"), usageMeter: $("usage-meter"), usageFull: $("usage-full"),
      passwordForm: $("password-form"), current: $("current-password"), next: $("new-password"), confirm: $("confirm-password"),
      passwordCode: $("password-code"), passwordCodeInput: $("password-code-input"),
      passwordError: $("password-error"), passwordDone: $("password-done"), change: $("change-password"),
      devicesTitle: $("devices-title"), devices: $("devices"), devicesStatus: $("devices-status"), devicesError: $("devices-error"),
      everywhere: $("sign-out-everywhere"), everywhereRemove: $("sign-out-everywhere-remove"), deleteOpen: $("delete-account-open"),
      deleteDialog: $("delete-account-dialog"), deleteForm: $("delete-account-form"), password: $("delete-password"),
      deleteCode: $("delete-code"), deleteCodeInput: $("delete-code-input"),
      deleteError: $("delete-account-error"), deleteConfirm: $("delete-account-confirm"), deleteCancel: $("delete-account-cancel"),
      unsynced: $("delete-account-unsynced"), unsyncedText: $("delete-account-unsynced-text"),
      exportUnsynced: $("delete-account-export"), exported: $("delete-account-exported"),
      downloadMarkdown: $("download-markdown"), downloadJSON: $("download-json"),
      downloadError: $("download-error"), downloadDone: $("download-done"),
      twoFactorTitle: $("two-factor-title"), twoFactorState: $("two-factor-state"), twoFactorError: $("two-factor-error"),
      twoFactorDone: $("two-factor-done"), twoFactorOn: $("two-factor-on"), twoFactorOff: $("two-factor-off"),
      tf: {
        dialog: $("two-factor-dialog"), title: $("two-factor-dialog-title"),
        passwordForm: $("two-factor-password-form"), intro: $("two-factor-intro"), password: $("two-factor-password"),
        offCode: $("two-factor-off-code"), offCodeInput: $("two-factor-off-code-input"), passwordError: $("two-factor-password-error"),
        continue: $("two-factor-continue"), passwordCancel: $("two-factor-password-cancel"),
        scanForm: $("two-factor-scan-form"), qr: $("two-factor-qr"), grouped: $("two-factor-secret-grouped"), secret: $("two-factor-secret"),
        uri: $("two-factor-uri"), code: $("two-factor-code"), scanError: $("two-factor-scan-error"), enable: $("two-factor-enable"),
        scanCancel: $("two-factor-scan-cancel"),
        codes: $("two-factor-codes"), codesList: $("two-factor-codes-list"), downloaded: $("two-factor-downloaded"),
        download: $("two-factor-download"), finished: $("two-factor-finished"),
      },
      importForm: $("import-form"), importFile: $("import-file"), importFormat: $("import-format"), importProgress: $("import-progress"),
      importStatus: $("import-status"), importError: $("import-error"), importStart: $("import-start"), importReplace: $("import-replace"),
      importSkipped: $("import-skipped"), importSkippedTitle: $("import-skipped-title"), importSkippedList: $("import-skipped-list"),
    };
    const ui = this.ui;
    ui.close.addEventListener("click", () => ui.dialog.close());
    for (const [button, format] of [[ui.downloadMarkdown, "markdown"], [ui.downloadJSON, "json"]]) {
      button.addEventListener("click", () => busy(button, () => this.download(format)));
    }
    ui.dialog.addEventListener("close", () => this.closed());
    ui.passwordForm.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(ui.change, () => this.changePassword());
    });
    for (const input of [ui.current, ui.next, ui.confirm, ui.passwordCodeInput]) {
      input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
    }
    ui.everywhere.addEventListener("click", () => busy(ui.everywhere, () => this.signOutEverywhere()));
    ui.deleteOpen.addEventListener("click", () => this.openDelete());
    ui.deleteForm.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(ui.deleteConfirm, () => this.deleteAccount());
    });
    ui.deleteCancel.addEventListener("click", () => ui.deleteDialog.close());
    ui.deleteDialog.addEventListener("close", () => {
      ui.deleteForm.reset();
      for (const input of [ui.password, ui.deleteCodeInput]) input.removeAttribute("aria-invalid");
      ui.deleteError.textContent = "";
      ui.exported.textContent = "";
      ui.deleteOpen.focus();
    });
    for (const input of [ui.password, ui.deleteCodeInput]) input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
    this.wireTwoFactor();
    ui.importForm.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(ui.importStart, () => this.importFile());
    });
    ui.importFile.addEventListener("change", () => ui.importFile.removeAttribute("aria-invalid"));
    ui.exportUnsynced.addEventListener("click", () => {
      this.actions.exportUnsynced().then((said) => (ui.exported.textContent = said),
        (error) => (ui.deleteError.textContent = `Could not export: ${error.message}`));
    });
  }

  get isOpen() {
    return this.ui.dialog.open;
  }

  open(opener = document.activeElement) {
    if (this.ui.dialog.open) return;
    this.opener = opener;
    this.ui.everywhereRemove.checked = true; // ending every sign-in: this browser's copy goes too, unless unticked
    this.ui.dialog.showModal(); // focus goes to its first control, "Close"
    this.loadAccount();
    this.loadDevices();
  }

  /** Closed (Close, Escape): typed passwords and old messages go; focus returns to the opener. */
  closed() {
    const ui = this.ui;
    ui.passwordForm.reset();
    for (const input of [ui.current, ui.next, ui.confirm, ui.passwordCodeInput]) input.removeAttribute("aria-invalid");
    ui.passwordError.textContent = "";
    ui.passwordDone.textContent = "";
    ui.devicesError.textContent = "";
    ui.devicesStatus.textContent = "";
    ui.twoFactorError.textContent = "";
    ui.twoFactorDone.textContent = "";
    ui.importError.textContent = "";
    if (!this.importing) {
      ui.importStatus.textContent = "";
      ui.importSkipped.hidden = true;
      ui.importSkippedList.replaceChildren();
    }
    if (this.opener && this.opener.isConnected) this.opener.focus();
  }

  showDevicesError(message) {
    this.ui.devicesError.textContent = message;
  }

  // --- The password ---------------------------------------------------------------------------

  async changePassword() {
    const ui = this.ui;
    ui.passwordError.textContent = "";
    ui.passwordDone.textContent = "";
    const refuse = (input, message) => {
      input.setAttribute("aria-invalid", "true");
      ui.passwordError.textContent = message;
      input.focus();
      if (input === ui.passwordCodeInput) input.select(); // a wrong code is typed over
    };
    const asked = !ui.passwordCode.hidden; // two-factor sign-in is on
    const code = asked ? ui.passwordCodeInput.value.replace(/\s+/g, "") : "";
    if (!ui.current.value) return refuse(ui.current, "Enter your current password.");
    if (!ui.next.value) return refuse(ui.next, "Enter a new password.");
    if (ui.next.value !== ui.confirm.value) return refuse(ui.confirm, "The new password and its confirmation do not match.");
    if (asked && !code) return refuse(ui.passwordCodeInput, CODE_MISSING);
    try {
      const others = await changePassword(this.auth, ui.current.value, ui.next.value, code);
      ui.passwordForm.reset();
      ui.passwordDone.textContent = `Password changed; ${plural(others, "other device")} signed out.`;
      this.loadDevices({ quiet: true });
    } catch (error) {
      if (error.code === "code_required") this.codeAskedFor();
      const input = {
        invalid_credentials: ui.current, bad_request: ui.next, code_required: ui.passwordCodeInput, invalid_code: ui.passwordCodeInput,
      }[error.code] || null;
      const message = codeRefusal(error, "Password not changed") ?? `Password not changed: ${error.message}`;
      if (input) refuse(input, message);
      else ui.passwordError.textContent = message;
    }
  }

  // --- Two-factor sign-in ---------------------------------------------------------------------
  //
  // Its own dialog, in three steps: the password (to turn it off, a code too); the QR code and
  // key for the authenticator app, and a first code from it; the recovery codes. The key and
  // the codes live in the dialog's elements alone, emptied when it closes: never stored.

  wireTwoFactor() {
    const { ui } = this;
    const tf = ui.tf;
    ui.twoFactorOn.addEventListener("click", () => this.openTwoFactor(true));
    ui.twoFactorOff.addEventListener("click", () => this.openTwoFactor(false));
    tf.passwordForm.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(tf.continue, () => (this.turningOn ? this.setUpTwoFactor() : this.disableTwoFactor()));
    });
    tf.scanForm.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(tf.enable, () => this.enableTwoFactor());
    });
    for (const button of [tf.passwordCancel, tf.scanCancel, tf.finished]) button.addEventListener("click", () => this.closeTwoFactor());
    for (const input of [tf.password, tf.offCodeInput, tf.code]) input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
    tf.secret.addEventListener("focus", () => tf.secret.select());
    tf.download.addEventListener("click", () => this.downloadRecoveryCodes());
    // Escape closes it too; the close event comes a task later, so the buttons tidy up at once
    // (closeTwoFactor) and the event only when nothing has yet.
    tf.dialog.addEventListener("close", () => this.twoFactorClosed());
  }

  /** Closes the dialog and tidies up now, the focus already where it belongs when the click returns. */
  closeTwoFactor() {
    if (this.ui.tf.dialog.open) this.ui.tf.dialog.close();
    this.twoFactorClosed();
  }

  /**
   * Reads the account (one GET /v1/account): what it uses (`showUsage`), and whether two-factor
   * sign-in is on, shown with the button that changes it.
   */
  async loadAccount() {
    const ui = this.ui;
    const token = ++this.reading;
    try {
      const account = await readAccount(this.auth);
      if (token !== this.reading) return;
      this.username = account.username || "";
      this.showUsage(account.usage);
      const { enabled = false, recovery_codes_left: said = 0 } = account.two_factor || {};
      const left = Number(said) || 0;
      ui.twoFactorError.textContent = "";
      ui.twoFactorState.textContent = enabled
        ? `On: signing in asks for a code from your authenticator app after the password. ${plural(left, "recovery code")} left.` +
          (left <= 2 ? " Turning it off and on again makes 10 new ones." : "")
        : "Off: signing in asks for the password alone. Turned on, it also asks for a code from an authenticator app on your phone.";
      ui.twoFactorOn.hidden = enabled;
      ui.twoFactorOff.hidden = !enabled;
      this.askForCodes(Boolean(enabled));
    } catch (error) {
      if (token !== this.reading) return;
      ui.twoFactorState.textContent = "";
      ui.twoFactorOn.hidden = ui.twoFactorOff.hidden = true;
      ui.twoFactorError.textContent = `Could not read whether two-factor sign-in is on: ${error.message}`;
      // Said once, in the alert above; here only that it is not known.
      this.showUsage(null, "Not known: the account could not be read.");
    }
  }

  /**
   * Shows what the account uses (GET /v1/account's `usage`; `unknown`: what to say without one):
   * the sizes and counts, a meter of the storage used against its quota, and, at or over a
   * quota, that edits are refused until something is deleted.
   */
  showUsage(usage, unknown = "Not reported by this server.") {
    const { usageText: text, usageMeter: meter, usageFull: full } = this.ui;
    const summary = usageSummary(usage);
    // Storage, then records: each part wraps as a whole where it can (its own line on a phone).
    const part = (words) => Object.assign(document.createElement("span"), { className: "usage-part", textContent: words });
    if (summary) text.replaceChildren(part(`${summary.storage} ·`), " ", part(summary.records)); // = summary.text
    else text.textContent = unknown;
    text.title = summary ? `Sizes: ${SIZE_UNITS}` : "";
    if (summary && summary.quotaBytes !== null) {
      // Green (optimum) while under three quarters full, amber to 90%, red beyond.
      Object.assign(meter, { min: 0, max: summary.quotaBytes, optimum: 0, low: summary.quotaBytes * 0.75, high: summary.quotaBytes * 0.9 });
      meter.value = Math.min(summary.bytes, summary.quotaBytes);
      meter.setAttribute("aria-valuetext", summary.used);
      meter.textContent = summary.used; // for a browser without <meter>
      meter.hidden = false;
    } else {
      meter.hidden = true;
    }
    full.textContent = summary ? summary.warning : "";
  }

  /**
   * Shows the code fields of the password and delete forms (`on`: two-factor sign-in is on, and
   * the server asks for a code with the password there), or hides them. Not read (offline, say),
   * they stay as they were; a `code_required` answer shows them (`codeAskedFor`).
   */
  askForCodes(on) {
    this.ui.passwordCode.hidden = !on;
    this.ui.deleteCode.hidden = !on;
  }

  /** The server asked for a code the page did not (two-factor sign-in turned on elsewhere, or not read yet). */
  codeAskedFor() {
    this.askForCodes(true);
    this.loadAccount();
  }

  /** Opens the dialog at its first step: turning on (`on`) or off. */
  openTwoFactor(on) {
    const tf = this.ui.tf;
    this.turningOn = on;
    this.twoFactorChanged = false;
    this.ui.twoFactorDone.textContent = "";
    tf.intro.textContent = on
      ? "Signing in will also ask for a six-digit code from an authenticator app on your phone. Enter your password to start."
      : "Signing in will ask for the password alone. Enter your password, and a code from your authenticator app or one of your recovery codes.";
    tf.offCode.hidden = on;
    tf.continue.textContent = on ? "Continue" : "Turn off";
    tf.continue.className = on ? "primary" : "danger";
    this.twoFactorStep("password", on ? "Turn on two-factor sign-in" : "Turn off two-factor sign-in");
    tf.dialog.showModal();
    this.twoFactorShown = true;
    tf.password.focus();
  }

  /** Shows one step of the dialog (`password`, `scan` or `codes`) under its title. */
  twoFactorStep(step, title) {
    const tf = this.ui.tf;
    tf.title.textContent = title;
    tf.passwordForm.hidden = step !== "password";
    tf.scanForm.hidden = step !== "scan";
    tf.codes.hidden = step !== "codes";
  }

  /** Closed (any step, Escape too): the key, the codes and what was typed go; the section reads the state again. */
  twoFactorClosed() {
    if (!this.twoFactorShown) return; // tidied up already
    this.twoFactorShown = false;
    const { ui } = this;
    const tf = ui.tf;
    tf.passwordForm.reset();
    tf.scanForm.reset();
    this.forgetKey();
    tf.codesList.replaceChildren();
    for (const element of [tf.passwordError, tf.scanError, tf.downloaded]) element.textContent = "";
    for (const input of [tf.password, tf.offCodeInput, tf.code]) input.removeAttribute("aria-invalid");
    this.loadAccount();
    // Turned on or off: the section's heading, its state read next (the button that opened the
    // dialog is gone); cancelled: that button again.
    if (this.twoFactorChanged) ui.twoFactorTitle.focus();
    else (this.turningOn ? ui.twoFactorOn : ui.twoFactorOff).focus();
  }

  /** Takes the key off the page: its QR code, its text, the link with its URI. */
  forgetKey() {
    const tf = this.ui.tf;
    tf.qr.replaceChildren();
    tf.grouped.textContent = "";
    tf.secret.value = "";
    tf.uri.removeAttribute("href");
  }

  /** Marks `input` wrong, says `message` in `where` (an alert) and puts the focus there to retype. */
  refuseTwoFactor(input, where, message) {
    where.textContent = message;
    if (!input) return;
    input.setAttribute("aria-invalid", "true");
    input.focus();
    input.select();
  }

  /** Step 1 of turning on: the password; the server answers the key, shown as a QR code and as text. */
  async setUpTwoFactor() {
    const tf = this.ui.tf;
    tf.passwordError.textContent = "";
    if (!tf.password.value) return this.refuseTwoFactor(tf.password, tf.passwordError, "Enter your password.");
    let setup;
    try {
      setup = await setUpTwoFactor(this.auth, tf.password.value);
    } catch (error) {
      const input = error.code === "invalid_credentials" ? tf.password : null;
      this.refuseTwoFactor(input, tf.passwordError, `Not turned on: ${error.message}`);
      if (error.code === "two_factor_enabled") this.loadAccount();
      return;
    }
    if (!tf.dialog.open) return; // closed meanwhile: the key is not shown
    tf.password.value = "";
    tf.qr.replaceChildren(qrSVG(qrMatrix(setup.uri), { label: "QR code for your authenticator app" }));
    tf.grouped.textContent = (setup.secret.match(/.{1,4}/g) || []).join(" "); // groups of four, easier to read and type
    tf.secret.value = setup.secret;
    tf.uri.href = setup.uri;
    this.twoFactorStep("scan", "Add Noted to your authenticator app");
    tf.title.focus(); // read from the top: the steps, then the code field
  }

  /** Step 2: the app's first code turns it on; the recovery codes are shown, this once. */
  async enableTwoFactor() {
    const tf = this.ui.tf;
    tf.scanError.textContent = "";
    const code = tf.code.value.replace(/\s+/g, "");
    if (!code) return this.refuseTwoFactor(tf.code, tf.scanError, "Enter the code your authenticator app shows.");
    let codes;
    try {
      codes = await enableTwoFactor(this.auth, code);
    } catch (error) {
      const wrong = error.code === "invalid_code";
      const check = wrong ? " (check that it is the code for Noted, and that your phone’s clock is right)" : "";
      this.refuseTwoFactor(wrong ? tf.code : null, tf.scanError, `Not turned on: ${error.message}${check}`);
      return;
    }
    this.forgetKey(); // not needed any more: off the page now, not only when the dialog closes
    tf.codesList.replaceChildren(...codes.map((c) => Object.assign(document.createElement("li"), { textContent: c })));
    this.twoFactorStep("codes", "Save your recovery codes");
    this.twoFactorChanged = true;
    this.ui.twoFactorDone.textContent = "Two-factor sign-in is on.";
    this.loadAccount();
    if (tf.dialog.open) tf.title.focus();
  }

  /** The recovery codes as a text file. */
  downloadRecoveryCodes() {
    const tf = this.ui.tf;
    const codes = [...tf.codesList.children].map((li) => li.textContent);
    const text = `Noted recovery codes${this.username ? ` for ${this.username}` : ""} (${location.host})\n` +
      `Made ${new Date().toISOString().slice(0, 10)}. Each code signs in once, in place of a code from your authenticator app.\n\n` +
      `${codes.join("\n")}\n`;
    const name = "noted-recovery-codes.txt";
    saveFile(new Blob([text], { type: "text/plain" }), name);
    tf.downloaded.textContent = `Downloaded ${name}.`;
  }

  /** Turning off: the password and a code (from the app, or a recovery code). */
  async disableTwoFactor() {
    const tf = this.ui.tf;
    tf.passwordError.textContent = "";
    const code = tf.offCodeInput.value.replace(/\s+/g, "");
    if (!tf.password.value) return this.refuseTwoFactor(tf.password, tf.passwordError, "Enter your password.");
    if (!code) return this.refuseTwoFactor(tf.offCodeInput, tf.passwordError, "Enter a code from your authenticator app or a recovery code.");
    try {
      await disableTwoFactor(this.auth, tf.password.value, code);
    } catch (error) {
      const input = { invalid_credentials: tf.password, invalid_code: tf.offCodeInput }[error.code] || null;
      this.refuseTwoFactor(input, tf.passwordError, `Not turned off: ${error.message}`);
      return;
    }
    this.twoFactorChanged = true;
    this.ui.twoFactorDone.textContent = "Two-factor sign-in is off.";
    this.closeTwoFactor();
  }

  // --- Devices ----------------------------------------------------------------------------------

  /** Reads the list again (`quiet`: the status line keeps what it says). */
  async loadDevices({ quiet = false } = {}) {
    const ui = this.ui;
    const token = ++this.loading;
    if (!quiet) ui.devicesStatus.textContent = "Loading…";
    ui.devices.setAttribute("aria-busy", "true");
    try {
      const devices = await listDevices(this.auth);
      if (token !== this.loading) return;
      this.renderDevices(devices);
      if (!quiet) ui.devicesStatus.textContent = "";
    } catch (error) {
      if (token !== this.loading) return;
      ui.devicesStatus.textContent = "";
      ui.devicesError.textContent = `Could not list the devices: ${error.message}`;
    } finally {
      if (token === this.loading) ui.devices.removeAttribute("aria-busy");
    }
  }

  /** This device first, then the others oldest sign-in first (as the server lists them). */
  renderDevices(devices) {
    const sorted = [...devices].sort((a, b) => Number(Boolean(b.current)) - Number(Boolean(a.current)));
    this.ui.devices.replaceChildren(...sorted.map((device) => this.deviceRow(device)));
  }

  deviceRow(device) {
    const li = document.createElement("li");
    li.className = "device";
    li.dataset.id = device.id;
    const client = String(device.client || "unknown client");
    // Devices are named by the id their client made up (a UUID): its first characters tell them apart.
    const name = device.device ? `device ${String(device.device).slice(0, 8)}` : "unknown device";
    const seen = when(device.last_seen);
    const head = document.createElement("div");
    head.className = "device-name";
    const clientSpan = Object.assign(document.createElement("span"), { className: "device-client", textContent: client });
    const nameSpan = Object.assign(document.createElement("span"), { className: "device-id", textContent: name });
    if (device.device) nameSpan.title = String(device.device);
    head.append(clientSpan, " · ", nameSpan);
    if (device.current) {
      head.append(" ", Object.assign(document.createElement("span"), { className: "this-device", textContent: "This device" }));
    }
    const meta = document.createElement("div");
    meta.className = "device-meta";
    meta.append("Last seen ", time(device.last_seen, seen), " · signed in ", time(device.signed_in_at, when(device.signed_in_at)));
    const text = document.createElement("div");
    text.className = "device-text";
    text.append(head, meta);
    li.append(text);
    if (!device.current) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "quiet";
      button.textContent = "Sign out";
      button.setAttribute("aria-label", `Sign out ${client} (${name}), last seen ${seen}`);
      button.addEventListener("click", () => busy(button, () => this.signOutDevice(device, `${client} (${name})`, button)));
      li.append(button);
    }
    return li;
  }

  async signOutDevice(device, label, button) {
    const ui = this.ui;
    ui.devicesError.textContent = "";
    try {
      const ended = await signOutDevice(this.auth, device.id);
      ui.devicesStatus.textContent = ended ? `Signed out ${label}.` : `${label} was signed out already.`;
    } catch (error) {
      ui.devicesError.textContent = `Could not sign out ${label}: ${error.message}`;
    }
    await this.loadDevices({ quiet: true });
    // Its row, and the button that had focus, are gone (unless the list could not be read).
    if (!button.isConnected) ui.devicesTitle.focus();
  }

  async signOutEverywhere() {
    this.ui.devicesError.textContent = "";
    try {
      // The page reloads signed out (or a dialog asks first).
      await this.actions.signOutEverywhere({ remove: this.ui.everywhereRemove.checked });
    } catch (error) {
      this.showDevicesError(`Could not sign out everywhere: ${error.message}`);
    }
  }

  // --- Downloading every note ------------------------------------------------------------------

  async download(format) {
    const ui = this.ui;
    ui.downloadError.textContent = "";
    ui.downloadDone.textContent = "";
    try {
      // What was typed here goes to the server first (the server makes the zip).
      const unsynced = this.actions.settleUnsynced ? await this.actions.settleUnsynced() : 0;
      const name = await downloadAll(this.auth, format);
      ui.downloadDone.textContent = unsynced
        ? `Downloaded ${name}. It holds what the server has: ${plural(unsynced, "note")} not yet synced from here ${unsynced === 1 ? "is" : "are"} not in it.`
        : `Downloaded ${name}, with every note.`;
    } catch (error) {
      ui.downloadError.textContent = `Could not download the notes: ${error.message}`;
    }
  }

  // --- Importing notes ---------------------------------------------------------------------------

  /** Uploads the chosen file: its progress, then "Importing…" while the server reads it, then what it made of it. */
  async importFile() {
    const ui = this.ui;
    const file = ui.importFile.files[0];
    ui.importError.textContent = "";
    ui.importStatus.textContent = "";
    ui.importSkipped.hidden = true;
    ui.importSkippedList.replaceChildren();
    if (!file) {
      ui.importFile.setAttribute("aria-invalid", "true");
      ui.importError.textContent = "Choose the export file to import.";
      ui.importFile.focus();
      return;
    }
    if (!navigator.onLine) {
      ui.importError.textContent = "Importing needs a connection to the server: this browser is offline.";
      return;
    }
    const progress = ui.importProgress;
    progress.value = 0;
    progress.hidden = false;
    this.importing = true;
    ui.importStatus.textContent = `Uploading ${file.name}…`;
    let result;
    try {
      result = await importNotes(this.auth, file, ui.importFormat.value, {
        onProgress: (sent, total) => (progress.value = total ? Math.round((100 * sent) / total) : 0),
        onSent: () => {
          progress.removeAttribute("value"); // indeterminate: the server is reading the file
          ui.importStatus.textContent = "Importing…";
        },
      }, ui.importReplace.checked);
    } catch (error) {
      ui.importStatus.textContent = "";
      // What the server says of a malformed file starts with the file's name; otherwise it is named here.
      ui.importError.textContent = error.message.startsWith(file.name)
        ? `Nothing imported: ${error.message}` : `Nothing imported from ${file.name}: ${error.message}`;
      return;
    } finally {
      this.importing = false;
      progress.hidden = true;
    }
    this.loadAccount(); // what the account uses, with the imported notes
    const { imported, updated, unchanged, copied, skipped } = result;
    ui.importStatus.textContent = `Imported ${plural(imported, "note")}, updated ${updated}, ${unchanged} unchanged` +
      (copied ? `, ${copied} added beside notes you have with other content` : "") + (skipped.length ? `; ${skipped.length} skipped (listed below).` : ".");
    if (skipped.length) {
      ui.importSkippedTitle.textContent = `Skipped (${skipped.length})`;
      ui.importSkippedList.replaceChildren(...skipped.map((s) => {
        const li = document.createElement("li");
        li.append(Object.assign(document.createElement("span"), { className: "skipped-source", textContent: String(s.source || "unnamed") }),
          `: ${s.reason || "no reason given"}`);
        return li;
      }));
      ui.importSkipped.hidden = false;
    }
  }

  // --- Deleting the account ----------------------------------------------------------------------

  async openDelete() {
    const ui = this.ui;
    let unsynced = 0;
    try {
      unsynced = await this.actions.unsynced();
    } catch {
      // Counted as none: the dialog still says that this browser's copy goes too.
    }
    const one = unsynced === 1;
    ui.unsynced.hidden = unsynced === 0;
    ui.unsyncedText.textContent = unsynced === 0 ? "" : `${plural(unsynced, "note")} in this browser ${one ? "is" : "are"} not synced ` +
      `and ${one ? "is" : "are"} deleted with the account; export ${one ? "it" : "them"} to keep a copy.`;
    ui.deleteDialog.showModal(); // focus goes to the password field
  }

  async deleteAccount() {
    const ui = this.ui;
    ui.deleteError.textContent = "";
    /** Says `message` and puts the focus in `input` to retype (marked wrong if `wrong`). */
    const refuse = (input, message, wrong = true) => {
      ui.deleteError.textContent = message;
      if (wrong) input.setAttribute("aria-invalid", "true");
      input.focus();
      input.select();
    };
    const asked = !ui.deleteCode.hidden; // two-factor sign-in is on
    const code = asked ? ui.deleteCodeInput.value.replace(/\s+/g, "") : "";
    if (!ui.password.value) return refuse(ui.password, "Enter your password to delete the account.");
    if (asked && !code) return refuse(ui.deleteCodeInput, CODE_MISSING);
    try {
      await this.actions.deleteAccount(ui.password.value, {
        code,
        onBlocked: () => (ui.deleteError.textContent = "Close Noted's other tabs to finish deleting this browser's copy."),
      });
    } catch (error) {
      if (error.code === "code_required") this.codeAskedFor();
      const aboutCode = error.code === "code_required" || error.code === "invalid_code";
      const message = codeRefusal(error, "Account not deleted") ?? `Account not deleted: ${error.message}`;
      refuse(aboutCode ? ui.deleteCodeInput : ui.password, message, aboutCode || error.code === "invalid_credentials");
    }
  }
}

function time(ms, text) {
  const el = document.createElement("time");
  const date = new Date(Number(ms));
  if (Number.isFinite(date.getTime())) el.dateTime = date.toISOString();
  el.textContent = text;
  return el;
}
