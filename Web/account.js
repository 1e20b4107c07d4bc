// The Account panel (docs/protocol.md, "The signed-in account"): change the password, see the
// signed-in devices and sign one or all of them out, delete the account. The requests are made
// here; what ending this browser's own sign-in means (the sign-out path, its unsynced-notes
// dialog, removing the account's database) is the app's, through the callbacks it gives.

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
  let answer;
  try {
    answer = await auth.request(method, path, body);
  } catch (error) {
    if (error instanceof TypeError) throw new AccountError("the server could not be reached; check the connection", { code: "offline" });
    throw error;
  }
  if (answer.ok) return answer;
  const said = answer.body || {};
  throw new AccountError(said.message || said.error || `the server answered ${answer.status}`, { code: said.error || null, status: answer.status });
}

/** Changes the password: the number of other sign-ins it ended. */
export async function changePassword(auth, current, next) {
  const answer = await call(auth, "POST", "/v1/account/password", { current_password: current, new_password: next });
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

/** Deletes the account on the server (everything kept for it), if `password` is right. */
export async function deleteAccount(auth, password) {
  await call(auth, "DELETE", "/v1/account", { password });
}

/**
 * Downloads every note of the account from the server as a zip (`format`: "markdown" or
 * "json"), saved by the browser: the file's name. The server makes the zip from what it holds,
 * so notes not yet synced from this browser are not in it.
 */
export async function downloadAll(auth, format) {
  let response;
  try {
    response = await auth.download(`/v1/export?format=${encodeURIComponent(format)}`);
  } catch (error) {
    if (error instanceof TypeError) throw new AccountError("the server could not be reached; check the connection", { code: "offline" });
    throw error;
  }
  if (!response.ok) {
    const said = await response.json().catch(() => ({}));
    throw new AccountError(said.message || said.error || `the server answered ${response.status}`, { code: said.error || null, status: response.status });
  }
  const name = (/filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "") || [])[1] || "noted-export.zip";
  const blob = await response.blob();
  const link = Object.assign(document.createElement("a"), { href: URL.createObjectURL(blob), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  return name;
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
 * - `signOutEverywhere()`: the app's sign-out, every sign-in ended first (it may ask about
 *   unsynced notes); rejects if it could not.
 * - `deleteAccount(password, { onBlocked })`: deletes the account and this browser's copy, then
 *   shows the signed-out page; rejects (an AccountError) if the server refused.
 * - `unsynced()`: how many notes this browser has not synced; `exportUnsynced()`: downloads
 *   them, resolving to a sentence saying so.
 */
export class AccountPanel {
  constructor(auth, actions) {
    this.auth = auth;
    this.actions = actions;
    this.loading = 0;
    this.opener = null;
    this.ui = {
      dialog: $("account-dialog"), close: $("account-close"),
      passwordForm: $("password-form"), current: $("current-password"), next: $("new-password"), confirm: $("confirm-password"),
      passwordError: $("password-error"), passwordDone: $("password-done"), change: $("change-password"),
      devicesTitle: $("devices-title"), devices: $("devices"), devicesStatus: $("devices-status"), devicesError: $("devices-error"),
      everywhere: $("sign-out-everywhere"), deleteOpen: $("delete-account-open"),
      deleteDialog: $("delete-account-dialog"), deleteForm: $("delete-account-form"), password: $("delete-password"),
      deleteError: $("delete-account-error"), deleteConfirm: $("delete-account-confirm"), deleteCancel: $("delete-account-cancel"),
      unsynced: $("delete-account-unsynced"), unsyncedText: $("delete-account-unsynced-text"),
      exportUnsynced: $("delete-account-export"), exported: $("delete-account-exported"),
      downloadMarkdown: $("download-markdown"), downloadJSON: $("download-json"),
      downloadError: $("download-error"), downloadDone: $("download-done"),
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
    for (const input of [ui.current, ui.next, ui.confirm]) input.addEventListener("input", () => input.removeAttribute("aria-invalid"));
    ui.everywhere.addEventListener("click", () => busy(ui.everywhere, () => this.signOutEverywhere()));
    ui.deleteOpen.addEventListener("click", () => this.openDelete());
    ui.deleteForm.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(ui.deleteConfirm, () => this.deleteAccount());
    });
    ui.deleteCancel.addEventListener("click", () => ui.deleteDialog.close());
    ui.deleteDialog.addEventListener("close", () => {
      ui.deleteForm.reset();
      ui.password.removeAttribute("aria-invalid");
      ui.deleteError.textContent = "";
      ui.exported.textContent = "";
      ui.deleteOpen.focus();
    });
    ui.password.addEventListener("input", () => ui.password.removeAttribute("aria-invalid"));
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
    this.ui.dialog.showModal(); // focus goes to its first control, "Close"
    this.loadDevices();
  }

  /** Closed (Close, Escape): typed passwords and old messages go; focus returns to the opener. */
  closed() {
    const ui = this.ui;
    ui.passwordForm.reset();
    for (const input of [ui.current, ui.next, ui.confirm]) input.removeAttribute("aria-invalid");
    ui.passwordError.textContent = "";
    ui.passwordDone.textContent = "";
    ui.devicesError.textContent = "";
    ui.devicesStatus.textContent = "";
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
    };
    if (!ui.current.value) return refuse(ui.current, "Enter your current password.");
    if (!ui.next.value) return refuse(ui.next, "Enter a new password.");
    if (ui.next.value !== ui.confirm.value) return refuse(ui.confirm, "The new password and its confirmation do not match.");
    try {
      const others = await changePassword(this.auth, ui.current.value, ui.next.value);
      ui.passwordForm.reset();
      ui.passwordDone.textContent = `Password changed; ${plural(others, "other device")} signed out.`;
      this.loadDevices({ quiet: true });
    } catch (error) {
      const input = error.code === "invalid_credentials" ? ui.current : error.code === "bad_request" ? ui.next : null;
      const message = `Password not changed: ${error.message}`;
      if (input) refuse(input, message);
      else ui.passwordError.textContent = message;
    }
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
      await this.actions.signOutEverywhere(); // the page reloads signed out (or a dialog asks first)
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
      const name = await downloadAll(this.auth, format);
      ui.downloadDone.textContent = `Downloaded ${name}. It holds what the server has: notes not yet synced from here are not in it.`;
    } catch (error) {
      ui.downloadError.textContent = `Could not download the notes: ${error.message}`;
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
    if (!ui.password.value) {
      ui.password.setAttribute("aria-invalid", "true");
      ui.deleteError.textContent = "Enter your password to delete the account.";
      ui.password.focus();
      return;
    }
    try {
      await this.actions.deleteAccount(ui.password.value, {
        onBlocked: () => (ui.deleteError.textContent = "Close Noted's other tabs to finish deleting this browser's copy."),
      });
    } catch (error) {
      ui.deleteError.textContent = `Account not deleted: ${error.message}`;
      if (error.code === "invalid_credentials") ui.password.setAttribute("aria-invalid", "true");
      ui.password.focus();
      ui.password.select();
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
