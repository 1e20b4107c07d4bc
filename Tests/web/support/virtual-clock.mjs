// A clock for Web/sync.js's `clock` option whose time moves only when a test says so: the
// engine's debounce, watchdog and reconnect back-off run in `advance(ms)`, in the order they
// are due, with no real waiting (and no race against a slow machine).
//
// Between two timers, and around them, `advance` lets the work they started settle: the
// engine's awaits on a MemoryStore are promise jobs only, which run out within one turn of
// the event loop. Real I/O (a live server) is not waited for: tests with one keep real time.

/** One turn of the event loop: every promise job queued before it (and by those) has run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

export class VirtualClock {
  constructor(start = 0) {
    this.time = start;
    this.timers = new Map(); // id -> { at, every, run }; every: null for a timeout
    this.lastId = 0;
  }

  now() {
    return this.time;
  }

  setTimeout(run, ms = 0) {
    return this.add(run, ms, null);
  }

  // An interval of 0 would be due again at once, for ever: at least 1 ms, as browsers clamp it.
  setInterval(run, ms = 0) {
    return this.add(run, ms, Math.max(1, ms));
  }

  clearTimeout(id) {
    this.timers.delete(id);
  }

  clearInterval(id) {
    this.timers.delete(id);
  }

  /** A promise resolved once the clock has moved `ms` on (a fake delay of a test's own). */
  wait(ms) {
    return new Promise((resolve) => this.setTimeout(resolve, ms));
  }

  /**
   * Moves time `ms` on: each timer due by then runs at its time, the earliest first (ties in
   * the order they were set), its work settled before the next; timers they set that fall due
   * within `ms` run too.
   */
  async advance(ms) {
    const end = this.time + ms;
    await settle();
    for (let id = this.nextDue(end); id !== undefined; id = this.nextDue(end)) {
      const timer = this.timers.get(id);
      this.time = timer.at;
      if (timer.every === null) this.timers.delete(id);
      else timer.at += timer.every;
      timer.run();
      await settle();
    }
    this.time = end;
  }

  add(run, ms, every) {
    const id = ++this.lastId;
    this.timers.set(id, { at: this.time + Math.max(0, Number(ms) || 0), every, run });
    return id;
  }

  /** The id of the timer due first, not after `end` (set first among equals), or undefined. */
  nextDue(end) {
    let due;
    for (const [id, timer] of this.timers) {
      if (timer.at <= end && (due === undefined || timer.at < this.timers.get(due).at)) due = id;
    }
    return due;
  }
}
