// dom.js — the one place where the web view builds elements.
//
// `h(tag, attrs, ...children)` makes an HTML element, `svg(tag, attrs, ...children)` an SVG one.
// String and number children always become text nodes, so text from the model, a tool or a workflow
// file is shown as text and never parsed as markup. Attributes pass through a short allow-list:
// anything else (event handlers, style, src, arbitrary href) throws, so a mistake shows up at once
// instead of becoming a hole.
//
// What it never does: parse markup from strings, set the `style` attribute, attach handlers through
// attributes, or put anything but a checked `/ui/...` path into an `href` or a form `action`.

const SVG_NS = "http://www.w3.org/2000/svg";

/** Session ids the server hands out; anything else is never turned into a link. */
const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Internal paths allowed in `href` / `action`: the list, a session page, login and logout. */
const INTERNAL_PATH = /^\/ui\/(?:sessions\/[A-Za-z0-9_-]{1,128}|login|logout)?$/;

/** Attributes set as DOM properties (values are plain strings, never interpreted). */
const HTML_PROPS = {
  id: "id", title: "title", type: "type", value: "value", name: "name",
  placeholder: "placeholder", for: "htmlFor", rows: "rows", method: "method",
  autocomplete: "autocomplete", role: "role", tabIndex: "tabIndex",
};

/** Boolean HTML properties. */
const HTML_FLAGS = new Set(["hidden", "disabled", "open", "selected", "required", "checked", "spellcheck"]);

/** Attributes passed through as-is: references to other element ids and accessibility text. */
const HTML_PLAIN = new Set(["list", "aria-label", "aria-expanded", "aria-busy", "aria-live", "aria-controls", "aria-hidden"]);

/** SVG presentation/geometry attributes. Values are numbers, or strings built here from numbers. */
const SVG_ATTRS = new Set([
  "id", "viewBox", "width", "height", "x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "rx", "ry",
  "dx", "dy", "points", "d", "refX", "refY", "markerWidth", "markerHeight", "orient",
  "marker-end", "text-anchor", "dominant-baseline", "preserveAspectRatio", "role", "aria-label",
]);

/** True when `id` looks like a session id (safe to put into a `/ui/sessions/...` link). */
export function isSessionId(id) {
  return typeof id === "string" && SESSION_ID.test(id);
}

/** The page path of one session, or null when the id is not a valid session id. */
export function sessionHref(id) {
  return isSessionId(id) ? `/ui/sessions/${encodeURIComponent(id)}` : null;
}

function setCommon(el, key, value) {
  if (key === "class") {
    el.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : String(value));
  } else if (key === "dataset") {
    for (const [k, v] of Object.entries(value)) {
      if (v !== null && v !== undefined) el.dataset[k] = String(v);
    }
  } else {
    return false;
  }
  return true;
}

function setHtmlAttr(el, key, value) {
  if (setCommon(el, key, value)) return;
  if (key === "href" || key === "action") {
    const path = String(value);
    if (!INTERNAL_PATH.test(path)) throw new Error(`dom: refusing ${key} ${JSON.stringify(path)}`);
    el.setAttribute(key, path);
  } else if (key in HTML_PROPS) {
    el[HTML_PROPS[key]] = typeof value === "number" ? value : String(value);
  } else if (HTML_FLAGS.has(key)) {
    el[key] = Boolean(value);
  } else if (HTML_PLAIN.has(key)) {
    el.setAttribute(key, String(value));
  } else {
    throw new Error(`dom: attribute ${JSON.stringify(key)} is not allowed`);
  }
}

function setSvgAttr(el, key, value) {
  if (setCommon(el, key, value)) return;
  if (!SVG_ATTRS.has(key)) throw new Error(`dom: svg attribute ${JSON.stringify(key)} is not allowed`);
  el.setAttribute(key, typeof value === "number" ? String(Number.isFinite(value) ? value : 0) : String(value));
}

function appendChildren(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendChildren(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/** Build an HTML element. `attrs` may be null; children are nodes, strings (as text) or arrays. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    setHtmlAttr(el, key, value);
  }
  appendChildren(el, children);
  return el;
}

/** Build an SVG element (namespaced). Same rules as `h`, with SVG geometry attributes. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    setSvgAttr(el, key, value);
  }
  appendChildren(el, children);
  return el;
}

/** Replace every child of `el` with `children` (same child rules as `h`). */
export function fill(el, ...children) {
  el.replaceChildren();
  appendChildren(el, children);
  return el;
}

/**
 * Marks `rendered` (for the benchmarks) once what is in the DOM now has been painted: the first
 * animation frame runs before that frame's paint, the second after it.
 */
export function markRendered() {
  requestAnimationFrame(() => requestAnimationFrame(() => performance.mark("rendered")));
}
