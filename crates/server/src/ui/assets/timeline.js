// timeline.js — the session timeline as HTML: a time axis, then one `div.lane[data-key]` per lane
// (label cell + track). Bars are `div.bar.kind-<kind>.status-<status>[data-seq]` placed with
// CSSOM percentages of span_ms; details go into the bar's title.
//
// Within a lane, kinds get their own sub-rows (node/wait, agent, turn/tool) and bars of one kind
// that overlap in time are packed onto further sub-rows, so nothing hides anything else.
// Clicking a bar calls `onPick(seq)` (the session page opens that event row).
//
// What it never does: compute times from events (the server sends offsets in ms), or show labels as
// anything but text.

import { h } from "./dom.js";
import * as fmt from "./format.js";

const ROW_OF_KIND = { node: 0, wait: 0, agent: 1, turn: 2, tool: 2 };
const KINDS = new Set(Object.keys(ROW_OF_KIND));
const STATUSES = new Set(["done", "running", "failed", "waiting"]);

const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
const pct = (v) => `${Math.round(v * 10000) / 10000}%`;

/** Fills `container` (#timeline) from a snapshot's `timeline`. */
export function renderTimeline(container, timeline, onPick) {
  const lanes = Array.isArray(timeline?.lanes) ? timeline.lanes : [];
  const span = Math.max(1, num(timeline?.span_ms) ?? 1);
  if (lanes.length === 0) {
    container.replaceChildren(h("p", { class: "muted" }, "Nothing has run yet."));
    return;
  }
  const frag = document.createDocumentFragment();
  frag.append(axis(span));
  for (const lane of lanes) frag.append(laneEl(lane, span));
  container.replaceChildren(frag);
  if (!container.dataset.wired) {
    container.dataset.wired = "1";
    container.addEventListener("click", (ev) => {
      const bar = ev.target.closest?.(".bar");
      if (bar && bar.dataset.seq) onPick(Number(bar.dataset.seq));
    });
  }
}

/** Tick spacing of 1/2/5 × 10^k ms giving about six ticks. */
function tickStep(span) {
  const rough = span / 6;
  const pow = 10 ** Math.floor(Math.log10(rough));
  for (const m of [1, 2, 5, 10]) if (m * pow >= rough) return m * pow;
  return 10 * pow;
}

function axis(span) {
  const step = tickStep(span);
  const ticks = [];
  for (let t = 0; t <= span + 1e-9; t += step) {
    const tick = h("span", { class: "tick" }, fmt.offset(Math.round(t)));
    tick.style.left = pct((t / span) * 100);
    ticks.push(tick);
  }
  return h("div", { class: "axis", "aria-hidden": "true" },
    h("div", { class: "lane-label" }, fmt.duration(span)),
    h("div", { class: "track" }, ticks));
}

function laneEl(lane, span) {
  const bars = (Array.isArray(lane.bars) ? lane.bars : []).filter((b) => b && typeof b === "object");
  // Sub-rows: group by kind row, then pack overlapping bars greedily.
  const groups = [[], [], []];
  for (const b of bars) groups[ROW_OF_KIND[b.kind] ?? 2].push(b);
  const rows = [];
  for (const group of groups) {
    const packed = []; // each: { end, bars }
    group.sort((a, b) => (num(a.start_ms) ?? 0) - (num(b.start_ms) ?? 0));
    for (const b of group) {
      const start = num(b.start_ms) ?? 0;
      const end = num(b.end_ms) ?? span;
      const row = packed.find((r) => r.end <= start);
      if (row) {
        row.end = end;
        row.bars.push(b);
      } else {
        packed.push({ end, bars: [b] });
      }
    }
    rows.push(...packed);
  }
  const label = String(lane.label ?? lane.key ?? "");
  return h("div", { class: "lane", dataset: { key: String(lane.key ?? "") } },
    h("div", { class: "lane-label mono", title: label }, label),
    h("div", { class: "track" },
      rows.map((r) => h("div", { class: "subrow" }, r.bars.map((b) => barEl(b, span))))));
}

function barTitle(b, start, end) {
  const parts = [String(b.label ?? ""), `${b.kind} · ${b.status}${b.running ? " (running)" : ""}`,
    `${fmt.offset(Math.round(start))} → ${fmt.offset(Math.round(end))} (${fmt.duration(end - start)})`];
  if (num(b.tokens_in) !== null || num(b.tokens_out) !== null) {
    parts.push(`tokens in ${fmt.count(b.tokens_in)} / out ${fmt.count(b.tokens_out)}`);
  }
  if (num(b.cost_usd) !== null) parts.push(`cost ${fmt.cost(b.cost_usd)}`);
  if (Number.isSafeInteger(b.seq)) parts.push(`event #${b.seq}`);
  return parts.join("\n");
}

function barEl(b, span) {
  const kind = KINDS.has(b.kind) ? b.kind : "node";
  const status = STATUSES.has(b.status) ? b.status : "done";
  const start = Math.min(Math.max(0, num(b.start_ms) ?? 0), span);
  const end = Math.min(Math.max(start, num(b.end_ms) ?? span), span);
  const el = h("div", {
    class: ["bar", `kind-${kind}`, `status-${status}`, b.running ? "running" : null],
    dataset: { seq: Number.isSafeInteger(b.seq) ? b.seq : null },
    title: barTitle(b, start, end),
  }, h("span", { class: "bar-label" }, String(b.label ?? "")));
  el.style.left = pct((start / span) * 100);
  el.style.width = pct(((end - start) / span) * 100);
  return el;
}
