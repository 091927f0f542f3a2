// graph.js — draws the workflow graph the server laid out, as an <svg id="graph"> with real text.
//
// Order: groups (parallel / map / loop / branch boxes with a label), then edges (polylines with an
// arrowhead and an optional label at their middle), then nodes: `<g class="node state-<state>"
// data-path data-state>` holding the shape, one <tspan> per label line, and a small state text so
// the state never rests on colour alone. A legend (HTML) explains the colours.
//
// What it never does: lay anything out itself (coordinates come from the server, coerced to numbers),
// or show labels as anything but SVG text.

import { h, svg } from "./dom.js";

const STATES = ["pending", "running", "waiting", "done", "failed", "skipped"];
const SHAPES = new Set(["box", "round", "diamond", "circle"]);
const LINE_HEIGHT = 14;

const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
const text = (v) => (v === null || v === undefined ? "" : String(v));
const cls = (v) => text(v).replace(/[^A-Za-z0-9_-]/g, "");

/** Returns the element to show for a snapshot's `graph` field: the svg plus legend, or a notice. */
export function renderGraph(graph) {
  if (!graph || typeof graph !== "object" || "unavailable" in graph || !Array.isArray(graph.nodes)) {
    const why = graph && typeof graph.unavailable === "string" ? graph.unavailable : "No graph for this session.";
    return h("p", { id: "graph-unavailable", class: "muted" }, why);
  }
  const width = Math.max(1, num(graph.width));
  const height = Math.max(1, num(graph.height));
  const root = svg("svg", {
    id: "graph", viewBox: `0 0 ${width} ${height}`, width, height,
    role: "img", "aria-label": "Workflow graph",
  },
  svg("defs", null,
    svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))),
  (graph.groups || []).map(groupEl),
  (graph.edges || []).map(edgeEl),
  graph.nodes.map(nodeEl));
  const note = typeof graph.note === "string" ? h("p", { id: "graph-note", class: "muted" }, graph.note) : null;
  return h("div", { class: "graph-block" }, note, h("div", { class: "graph-wrap" }, root), legend());
}

function groupEl(g) {
  const x = num(g.x), y = num(g.y);
  return svg("g", { class: `group kind-${cls(g.kind)}` },
    svg("rect", { x, y, width: Math.max(0, num(g.w)), height: Math.max(0, num(g.h)), rx: 6 }),
    svg("text", { x: x + 8, y: y + 14, class: "group-label" }, text(g.label)));
}

function edgeEl(e) {
  const pts = (Array.isArray(e.points) ? e.points : [])
    .filter((p) => Array.isArray(p) && p.length >= 2)
    .map((p) => [num(p[0]), num(p[1])]);
  const label = text(e.label);
  const mid = midpoint(pts);
  return svg("g", { class: e.dashed ? "edge dashed" : "edge" },
    svg("polyline", { points: pts.map((p) => p.join(",")).join(" "), "marker-end": "url(#arrow)" }),
    label && mid ? svg("text", { x: mid[0] + 4, y: mid[1] - 4, class: "edge-label" }, label) : null);
}

/** The point halfway along a polyline. */
function midpoint(pts) {
  if (pts.length === 0) return null;
  const seg = (i) => Math.hypot(pts[i + 1][0] - pts[i][0], pts[i + 1][1] - pts[i][1]);
  let total = 0;
  for (let i = 0; i + 1 < pts.length; i++) total += seg(i);
  let left = total / 2;
  for (let i = 0; i + 1 < pts.length; i++) {
    const len = seg(i);
    if (len > 0 && left <= len) {
      const t = left / len;
      return [pts[i][0] + (pts[i + 1][0] - pts[i][0]) * t, pts[i][1] + (pts[i + 1][1] - pts[i][1]) * t];
    }
    left -= len;
  }
  return pts[0];
}

function shapeEl(shape, x, y, w, hgt) {
  switch (shape) {
    case "round":
      return svg("rect", { x, y, width: w, height: hgt, rx: Math.min(hgt / 2, 16), class: "shape" });
    case "diamond":
      return svg("polygon", {
        points: `${x + w / 2},${y} ${x + w},${y + hgt / 2} ${x + w / 2},${y + hgt} ${x},${y + hgt / 2}`, class: "shape",
      });
    case "circle":
      return svg("ellipse", { cx: x + w / 2, cy: y + hgt / 2, rx: w / 2, ry: hgt / 2, class: "shape" });
    default:
      return svg("rect", { x, y, width: w, height: hgt, rx: 3, class: "shape" });
  }
}

function nodeEl(n) {
  const x = num(n.x), y = num(n.y), w = Math.max(0, num(n.w)), hgt = Math.max(0, num(n.h));
  const state = STATES.includes(n.state) ? n.state : "pending";
  const shape = SHAPES.has(n.shape) ? n.shape : "box";
  const lines = (Array.isArray(n.lines) ? n.lines : [text(n.id)]).map(text);
  const cx = x + w / 2;
  const firstY = y + hgt / 2 - ((lines.length - 1) * LINE_HEIGHT) / 2;
  const badge = text(n.badge);
  const path = n.path == null ? null : text(n.path);
  return svg("g", { class: `node state-${state} shape-${shape}`, dataset: { path, state, id: text(n.id) } },
    svg("title", null, [path || text(n.id), state, badge].filter(Boolean).join(" · ")),
    shapeEl(shape, x, y, w, hgt),
    svg("text", { x: cx, y: firstY, class: "node-label", "text-anchor": "middle", "dominant-baseline": "middle" },
      lines.map((line, i) => svg("tspan", { x: cx, dy: i === 0 ? 0 : LINE_HEIGHT }, line))),
    // The state goes above the top-right corner, or beside a small node (where edges arrive on top).
    w >= 70
      ? svg("text", { x: x + w, y: y - 3, class: "node-state", "text-anchor": "end" }, badge ? `${state} · ${badge}` : state)
      : svg("text", { x: x + w + 4, y: y + hgt / 2, class: "node-state", "dominant-baseline": "middle" }, badge ? `${state} · ${badge}` : state));
}

function legend() {
  return h("ul", { class: "legend", "aria-label": "Node states" },
    STATES.map((s) => h("li", null, h("span", { class: `swatch state-${s}`, "aria-hidden": "true" }), s)));
}
