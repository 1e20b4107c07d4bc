// The notes list: a listbox that draws only the rows on screen plus a margin, so that 100,000
// notes cost what 50 do. Rows have one fixed height (measured once from the first drawn row);
// the list's padding stands in for the rows not drawn (the list scrolls inside `scroller`).
// Each drawn row is an `li` with role option, aria-posinset and aria-setsize; the arrow keys,
// Page Up/Down, Home and End move between rows (the focused row is the list's one tab stop),
// Enter or a click opens one.

const MARGIN = 8; // rows drawn above and below the visible ones

export class NoteList {
  /**
   * `render(li, entry)` fills a row and returns a key that changes when its content does;
   * `onOpen(id)` opens a note.
   */
  constructor(ul, scroller, { render, onOpen }) {
    this.ul = ul;
    this.scroller = scroller;
    this.render = render;
    this.onOpen = onOpen;
    this.items = [];
    this.position = null; // id -> index in items, made on demand
    this.selectedId = null;
    this.activeId = null; // the row keyboard focus is on (or would return to)
    this.revealPending = null; // a selected note not listed yet: shown when it is
    this.rowHeight = 0;
    this.rows = new Map(); // id -> drawn li
    this.frame = 0;
    scroller.addEventListener("scroll", () => this.drawSoon(), { passive: true });
    ul.addEventListener("click", (event) => {
      const li = event.target.closest("li[data-id]");
      if (!li) return;
      this.activeId = li.dataset.id;
      this.onOpen(li.dataset.id);
    });
    ul.addEventListener("focusin", (event) => {
      const li = event.target.closest("li[data-id]");
      if (li && li.dataset.id !== this.activeId) {
        this.activeId = li.dataset.id;
        this.updateTabStop();
      }
    });
    ul.addEventListener("keydown", (event) => this.onKey(event));
    if (typeof ResizeObserver === "function") {
      new ResizeObserver(() => {
        this.rowHeight = 0; // the font or the width may have changed: measure again
        this.drawSoon();
      }).observe(scroller);
    }
  }

  indexOf(id) {
    if (id === null || id === undefined) return -1;
    if (!this.position) {
      this.position = new Map();
      this.items.forEach((entry, i) => this.position.set(entry.id, i));
    }
    const i = this.position.get(id);
    return i === undefined ? -1 : i;
  }

  /** New rows (a new order, filter or search result). Keeps the selected row in view if it was. */
  setItems(items) {
    const keep = this.selectedId !== null && this.inView(this.selectedId);
    this.items = items;
    this.position = null;
    this.draw();
    if (this.revealPending !== null && this.indexOf(this.revealPending) >= 0) {
      this.reveal(this.revealPending);
      this.revealPending = null;
    } else if (keep) {
      this.reveal(this.selectedId);
    }
  }

  setSelected(id, { reveal = true } = {}) {
    const previous = this.selectedId;
    this.selectedId = id;
    if (id !== null) this.activeId = id;
    for (const key of [previous, id]) {
      const li = this.rows.get(key);
      if (li) li.setAttribute("aria-selected", String(key === id));
    }
    this.updateTabStop();
    this.revealPending = null;
    if (reveal && id !== null) {
      if (this.indexOf(id) >= 0) this.reveal(id);
      else this.revealPending = id;
    }
  }

  /** Redraws one row's content (typing in its note) without touching the others. */
  refreshRow(id) {
    const li = this.rows.get(id);
    const i = this.indexOf(id);
    if (li && i >= 0) this.fill(li, this.items[i]);
  }

  /** Redraws the content of every drawn row (times shown relative to now, a changed note). */
  refresh() {
    for (const [id, li] of this.rows) {
      const i = this.indexOf(id);
      if (i >= 0) this.fill(li, this.items[i]);
    }
  }

  fill(li, entry) {
    const key = this.render(li, entry, li.dataset.key);
    if (key !== undefined) li.dataset.key = key;
  }

  inView(id) {
    const i = this.indexOf(id);
    if (i < 0) return false;
    const h = this.rowHeight || 1;
    return i * h >= this.scroller.scrollTop - 1 && (i + 1) * h <= this.scroller.scrollTop + this.scroller.clientHeight + 1;
  }

  /** Scrolls as little as needed for the row of `id` to be on screen, and draws. */
  reveal(id) {
    const i = this.indexOf(id);
    if (i < 0) return;
    this.measure();
    const h = this.rowHeight;
    const top = i * h;
    const view = this.scroller.clientHeight;
    if (top < this.scroller.scrollTop) this.scroller.scrollTop = top;
    else if (top + h > this.scroller.scrollTop + view) this.scroller.scrollTop = top + h - view;
    this.draw();
  }

  /** Focuses the row of `id` (scrolling to it first). */
  focusRow(id) {
    this.activeId = id;
    this.reveal(id);
    const li = this.rows.get(id);
    if (li) li.focus({ preventScroll: true });
  }

  drawSoon() {
    if (!this.frame) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.draw();
      });
    }
  }

  measure() {
    if (this.rowHeight) return;
    const li = this.ul.querySelector("li[data-id]");
    if (li) this.rowHeight = li.getBoundingClientRect().height || 0;
  }

  draw() {
    const n = this.items.length;
    this.measure();
    const h = this.rowHeight || 72;
    const view = this.scroller.clientHeight || 800;
    const scrollTop = Math.min(this.scroller.scrollTop, Math.max(0, n * h - view));
    const first = Math.max(0, Math.floor(scrollTop / h) - MARGIN);
    const last = Math.min(n, Math.ceil((scrollTop + view) / h) + MARGIN);
    const rows = new Map();
    const lis = [];
    for (let i = first; i < last; i++) {
      const entry = this.items[i];
      let li = this.rows.get(entry.id);
      if (!li) {
        li = document.createElement("li");
        li.setAttribute("role", "option");
        li.dataset.id = entry.id;
      }
      this.fill(li, entry);
      li.setAttribute("aria-posinset", String(i + 1));
      li.setAttribute("aria-setsize", String(n));
      li.setAttribute("aria-selected", String(entry.id === this.selectedId));
      rows.set(entry.id, li);
      lis.push(li);
    }
    const focused = this.ul.contains(document.activeElement) ? document.activeElement : null;
    for (const child of [...this.ul.children]) if (!rows.has(child.dataset.id)) child.remove();
    let ref = this.ul.firstElementChild;
    for (const li of lis) {
      if (li === ref) ref = ref.nextElementSibling;
      else this.ul.insertBefore(li, ref);
    }
    this.rows = rows;
    this.ul.style.paddingTop = `${first * h}px`;
    this.ul.style.paddingBottom = `${(n - last) * h}px`;
    this.updateTabStop();
    if (focused && focused !== document.activeElement && focused.isConnected) focused.focus({ preventScroll: true });
    if (!this.rowHeight && lis.length) {
      this.measure();
      if (this.rowHeight && this.rowHeight !== h) this.draw();
    }
  }

  /** One drawn row is the tab stop: the active one, else the selected one, else the first. */
  updateTabStop() {
    const stop = this.rows.get(this.activeId) || this.rows.get(this.selectedId) || this.rows.values().next().value;
    for (const li of this.rows.values()) li.tabIndex = li === stop ? 0 : -1;
  }

  onKey(event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const li = event.target.closest("li[data-id]");
    if (!li || this.items.length === 0) return;
    const i = this.indexOf(li.dataset.id);
    const page = Math.max(1, Math.floor(this.scroller.clientHeight / (this.rowHeight || 72)) - 1);
    let next = null;
    switch (event.key) {
      case "ArrowDown": next = i + 1; break;
      case "ArrowUp": next = i - 1; break;
      case "PageDown": next = i + page; break;
      case "PageUp": next = i - page; break;
      case "Home": next = 0; break;
      case "End": next = this.items.length - 1; break;
      case "Enter":
      case " ":
        event.preventDefault();
        this.onOpen(li.dataset.id);
        return;
      default:
        return;
    }
    event.preventDefault();
    next = Math.max(0, Math.min(this.items.length - 1, next));
    this.focusRow(this.items[next].id);
  }
}
