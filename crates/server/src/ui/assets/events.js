// events.js — the event log of one session: one `div.event[data-seq][data-type]` row per stored
// event, in seq order, and a `pre.payload` with the full event under a row when it is clicked.
//
// Large logs: the first FIRST_BATCH rows go into the DOM at once; the rest follow in chunks, one per
// animation frame, so a 10,000-event session paints quickly and every row still exists soon after.
// Rows arriving live are queued behind the chunks, so order holds and nothing is shown twice
// (a row whose seq is not above the highest known seq is dropped).
//
// What it never does: show event text any other way than as text (the full event is
// JSON.stringify'd into a <pre> through textContent), or fetch a payload more than once.

import { h } from "./dom.js";
import { getEvent } from "./api.js";
import * as fmt from "./format.js";

const FIRST_BATCH = 500;
const CHUNK = 1000;

export class EventLog {
  /** `container` is #events; `sessionId` is used to fetch full payloads. */
  constructor(container, sessionId) {
    this.container = container;
    this.sessionId = sessionId;
    this.queue = []; // rows accepted but not yet in the DOM
    this.highest = 0; // highest seq accepted (in the DOM or queued)
    this.scheduled = false;
    this.payloads = new Map(); // seq → Promise of the full event
    container.addEventListener("click", (ev) => this.handleClick(ev));
    container.addEventListener("keydown", (ev) => {
      if ((ev.key === "Enter" || ev.key === " ") && ev.target.classList?.contains("summary")) {
        ev.preventDefault();
        this.toggle(ev.target.parentElement);
      }
    });
  }

  /** Accepts rows (any order from the server is sorted); renders a first batch synchronously. */
  add(rows) {
    const fresh = rows
      .filter((r) => r && Number.isSafeInteger(r.seq) && r.seq > this.highest)
      .sort((a, b) => a.seq - b.seq);
    if (fresh.length === 0) return;
    this.highest = fresh[fresh.length - 1].seq;
    const follow = this.atBottom();
    this.queue.push(...fresh);
    if (!this.scheduled) {
      // Nothing pending: show up to a first batch right now, the rest later.
      this.flush(this.container.childElementCount === 0 ? FIRST_BATCH : CHUNK);
    }
    if (this.queue.length > 0) this.schedule();
    if (follow) this.container.scrollTop = this.container.scrollHeight;
  }

  /** Number of event rows currently in the DOM. */
  get shown() {
    return this.container.childElementCount;
  }

  atBottom() {
    const c = this.container;
    return c.childElementCount > 0 && c.scrollHeight - c.scrollTop - c.clientHeight < 24;
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      const follow = this.atBottom();
      this.flush(CHUNK);
      if (follow) this.container.scrollTop = this.container.scrollHeight;
      if (this.queue.length > 0) this.schedule();
    });
  }

  /** Moves up to `n` queued rows into the DOM. */
  flush(n) {
    if (this.queue.length === 0) return;
    const frag = document.createDocumentFragment();
    for (const row of this.queue.splice(0, n)) frag.append(eventRow(row));
    this.container.append(frag);
  }

  /** Scrolls to the row `seq` and opens its payload (rendering queued rows up to it first). */
  reveal(seq) {
    let row = this.find(seq);
    if (!row && this.queue.some((r) => r.seq <= seq)) {
      while (this.queue.length > 0 && this.queue[0].seq <= seq) this.flush(CHUNK);
      row = this.find(seq);
    }
    if (!row) return;
    if (!row.querySelector("pre.payload")) this.toggle(row);
    row.scrollIntoView({ block: "center", behavior: "smooth" });
    row.classList.add("flash");
    setTimeout(() => row.classList.remove("flash"), 1200);
  }

  find(seq) {
    return this.container.querySelector(`div.event[data-seq="${Number(seq)}"]`);
  }

  handleClick(ev) {
    const row = ev.target.closest?.("div.event");
    if (!row || !this.container.contains(row) || ev.target.closest("pre.payload")) return;
    // Let people select text in a row without it opening and closing under them.
    const sel = window.getSelection();
    if (sel && !sel.isCollapsed && row.contains(sel.anchorNode)) return;
    this.toggle(row);
  }

  /** Opens or closes the payload under one row; the first open fetches the full event. */
  toggle(row) {
    const open = row.querySelector("pre.payload");
    const summary = row.querySelector(".summary");
    if (open) {
      open.remove();
      summary?.setAttribute("aria-expanded", "false");
      row.classList.remove("open");
      return;
    }
    const seq = Number(row.dataset.seq);
    const pre = h("pre", { class: "payload mono" }, "Loading…");
    row.append(pre);
    row.classList.add("open");
    summary?.setAttribute("aria-expanded", "true");
    if (!this.payloads.has(seq)) {
      const p = getEvent(this.sessionId, seq);
      this.payloads.set(seq, p);
      p.catch(() => this.payloads.delete(seq)); // allow a retry on the next open
    }
    this.payloads.get(seq).then(
      (event) => { pre.textContent = JSON.stringify(event, null, 2); },
      (err) => { pre.textContent = `Could not load event ${seq}: ${err.message}`; pre.classList.add("error"); });
  }
}

function cell(cls, text, title) {
  return h("span", { class: cls, title: title || null }, text);
}

/** One collapsed row. Every field is shown as text; the full line stays available as a tooltip. */
function eventRow(row) {
  const type = String(row.type ?? "");
  const line = String(row.line ?? "");
  return h("div", { class: `event type-${type.replace(/[^A-Za-z0-9_-]/g, "")}`, dataset: { seq: row.seq, type } },
    h("div", { class: "summary", role: "button", tabIndex: 0, "aria-expanded": "false" },
      cell("seq mono", String(row.seq)),
      cell("time mono", fmt.clock(row.ts), String(row.ts ?? "")),
      cell("type", type),
      cell("node mono", row.node == null ? "" : String(row.node)),
      cell("agent", row.agent == null ? "" : String(row.agent)),
      cell("line", line, line.length > 80 ? line.slice(0, 2000) : null)));
}
