// format.js — turns API values (timestamps, durations, token counts, costs) into short display text.
//
// Pure functions from values to strings; they never touch the DOM and never throw on odd input
// (a missing or malformed value becomes "—").

export const NONE = "—";

const pad = (n, w = 2) => String(n).padStart(w, "0");

function toDate(ts) {
  if (typeof ts !== "string" && typeof ts !== "number") return null;
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? null : d;
}

/** Local wall-clock time with milliseconds: `HH:MM:SS.mmm`. */
export function clock(ts) {
  const d = toDate(ts);
  if (!d) return NONE;
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** Local date and time to the second: `YYYY-MM-DD HH:MM:SS`. */
export function dateTime(ts) {
  const d = toDate(ts);
  if (!d) return NONE;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A duration in ms as `850 ms`, `4.2 s`, `3 m 05 s`, `2 h 04 m`. */
export function duration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return NONE;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} m ${pad(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${pad(Math.floor((s % 3600) / 60))} m`;
}

/** A short axis label for an offset in ms (`0`, `250 ms`, `1.5 s`, `2 m`). */
export function offset(ms) {
  if (ms === 0) return "0";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(2)} s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(2)} m`;
  return `${+(ms / 3_600_000).toFixed(2)} h`;
}

/** A count with thousands separators, or "—". */
export function count(n) {
  return typeof n === "number" && Number.isFinite(n) ? n.toLocaleString("en-US") : NONE;
}

/** A cost in USD; small amounts keep four decimals. */
export function cost(usd) {
  if (typeof usd !== "number" || !Number.isFinite(usd)) return NONE;
  return usd >= 1 ? `$${usd.toFixed(2)}` : `$${usd.toFixed(4)}`;
}

/** `in / out` tokens of a usage object, or "—". */
export function tokens(usage) {
  if (!usage) return NONE;
  return `${count(usage.input_tokens)} / ${count(usage.output_tokens)}`;
}
