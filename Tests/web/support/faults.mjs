// A transport that loses and repeats messages, for the seeded simulation of
// Tests/web/engine-live.test.mjs (docs/reliability.md, "The engine outside the page"): the node
// WebSocket transport of live.mjs (which can be taken offline), each connection wrapped so that
// a step can
// - drop the connection with what is on its way lost (`dropConnection()`: frames from the server
//   not yet read are never handed to the engine, nothing more is sent, and the engine hears a
//   close 1006 at once), or arm it for the next push (`loseNextPush()`: that push is not sent
//   and the connection dies with it);
// - silently drop the next answer the server sends (`dropNextAnswer()`: the next `ack`,
//   `reject` or `changes`; the connection stays open, and the engine must give the request up by
//   its timeout and reconnect);
// - send the client's last `push` frame again, unchanged (`duplicateLastPush()`: a resend; the
//   server must answer `duplicate` for every change it already applied).
// `log(line)` (optional) hears what each fault did.

import { SwitchTransport } from "./live.mjs";

const CLOSED = 3;

export class FaultTransport extends SwitchTransport {
  constructor(base, { log = () => {} } = {}) {
    super(base);
    this.log = log;
    this.current = null; // the newest connection
    this.lastPush = null; // the text of the last push frame sent, on any connection
    this.dropAnswers = 0; // answers still to drop
    this.losePush = false;
    this.counts = { dropped: 0, answersDropped: 0, duplicated: 0, pushesLost: 0, duplicateAcks: 0 };
  }

  connect() {
    const ws = super.connect();
    const connection = new FaultConnection(ws, this);
    this.current = connection;
    return connection;
  }

  /** Whether the newest connection is open (the engine may have been welcomed on it). */
  get open() {
    return Boolean(this.current && this.current.readyState === 1);
  }

  dropConnection() {
    if (!this.current || this.current.dead) return false;
    this.current.kill();
    this.counts.dropped++;
    return true;
  }

  loseNextPush() {
    this.losePush = true;
  }

  dropNextAnswer() {
    this.dropAnswers++;
  }

  duplicateLastPush() {
    if (!this.lastPush || !this.open) return false;
    this.current.ws.send(this.lastPush);
    this.counts.duplicated++;
    this.log(`duplicated ${describe(this.lastPush)}`);
    return true;
  }

  /** Every armed fault disarmed (the heal). */
  calm() {
    this.dropAnswers = 0;
    this.losePush = false;
  }
}

class FaultConnection {
  constructor(ws, transport) {
    this.ws = ws;
    this.transport = transport;
    this.dead = false;
    this.onopen = null;
    this.onmessage = null;
    this.onclose = null;
    this.onerror = null;
    ws.addEventListener("open", () => { if (!this.dead) this.onopen?.(); });
    ws.addEventListener("message", (event) => {
      if (this.dead) return;
      const t = this.transport;
      if (t.dropAnswers > 0 && isAnswer(event.data)) {
        t.dropAnswers--;
        t.counts.answersDropped++;
        t.log(`dropped answer ${describe(event.data)}`);
        return;
      }
      if (/"status":"duplicate"/.test(String(event.data))) t.counts.duplicateAcks++;
      this.onmessage?.({ data: event.data });
    });
    ws.addEventListener("close", (event) => {
      if (this.dead) return;
      this.dead = true;
      this.onclose?.({ code: event.code });
    });
    ws.addEventListener("error", () => { if (!this.dead) this.onerror?.(); });
  }

  get readyState() {
    return this.dead ? CLOSED : this.ws.readyState;
  }

  send(text) {
    if (this.dead) return;
    const t = this.transport;
    if (isPush(text)) {
      if (t.losePush) {
        t.losePush = false;
        t.counts.pushesLost++;
        t.log(`lost push ${describe(text)} and the connection`);
        this.kill();
        return;
      }
      t.lastPush = text;
    }
    this.ws.send(text);
  }

  close(code, reason) {
    try {
      this.ws.close(code, reason);
    } catch {}
  }

  /** Gone at once: nothing more is read or sent; the engine hears a close 1006. */
  kill() {
    if (this.dead) return;
    this.dead = true;
    try {
      this.ws.close(4000, "fault");
    } catch {}
    setTimeout(() => this.onclose?.({ code: 1006 }), 0);
  }
}

function parse(text) {
  try {
    return JSON.parse(String(text));
  } catch {
    return null;
  }
}

function isAnswer(text) {
  const m = parse(text);
  return Boolean(m && ["ack", "reject", "changes"].includes(m.type));
}

function isPush(text) {
  const m = parse(text);
  return Boolean(m && m.type === "push");
}

/** A frame in a few words, for traces. */
export function describe(text) {
  const m = parse(text);
  if (!m) return "?";
  const short = (id) => String(id || "").slice(0, 8);
  if (m.type === "push") return `push rid ${m.rid} [${(m.changes || []).map((c) => `${short(c.id)} ${c.op} base ${c.baseRev}`).join(", ")}]`;
  if (m.type === "ack") return `ack ${short(m.id)} rev ${m.rev} ${m.status}`;
  if (m.type === "reject") return `reject ${short(m.id)} ${m.code}`;
  if (m.type === "changes") return `changes rid ${m.rid} (${(m.records || []).length} records, cursor ${m.cursor})`;
  return m.type;
}
