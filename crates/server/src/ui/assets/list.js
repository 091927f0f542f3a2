// list.js — the session list page (/ui/): filters, the table of sessions, and paging.
//
// Filters (status, workflow, free text) live in the URL query (`?status=&workflow=&q=`), are read
// from it on load and written back with history.replaceState, so a filtered list can be linked.
// While a page of rows is loading, table#sessions carries aria-busy="true".
//
// What it never does: turn a value from the server into a link unless it is a valid session id, or
// show server text any other way than as text.

import { h, fill, sessionHref, markRendered } from "./dom.js";
import { listSessions, listWorkflows } from "./api.js";
import * as fmt from "./format.js";

const STATUSES = ["queued", "running", "waiting_approval", "suspended", "completed", "failed", "cancelled", "interrupted"];
const SEARCH_DEBOUNCE_MS = 250;

function readFilters() {
  const q = new URLSearchParams(location.search);
  return { status: q.get("status") || "", workflow: q.get("workflow") || "", q: q.get("q") || "" };
}

function writeFilters(filters) {
  const q = new URLSearchParams();
  for (const key of ["status", "workflow", "q"]) if (filters[key]) q.set(key, filters[key]);
  const qs = q.toString();
  history.replaceState(null, "", `/ui/${qs ? `?${qs}` : ""}`);
}

function triggerText(trigger) {
  if (!trigger) return "manual";
  return [trigger.kind, trigger.id].filter((x) => typeof x === "string" && x).join(" · ") || "manual";
}

function durationText(row) {
  if (typeof row.duration_ms === "number") return fmt.duration(row.duration_ms);
  return row.ended_at ? fmt.NONE : "…";
}

function sessionRow(row) {
  const href = sessionHref(row.id);
  const workflow = String(row.workflow ?? "");
  const status = String(row.status ?? "");
  return h("tr", { class: "session", dataset: { sessionId: row.id, status } },
    h("td", { class: "workflow" }, href ? h("a", { href }, workflow || "(unnamed)") : workflow),
    h("td", { class: "id mono", title: String(row.id) }, String(row.id)),
    h("td", { class: "status" }, h("span", { class: `badge status-${status}` }, status)),
    h("td", { class: "trigger" }, triggerText(row.trigger)),
    h("td", { class: "started mono", title: String(row.created_at ?? "") }, fmt.dateTime(row.created_at)),
    h("td", { class: "duration num" }, durationText(row)),
    h("td", { class: "tokens num", title: "input / output tokens" }, fmt.tokens(row.usage)),
    h("td", { class: "cost num" }, fmt.cost(row.usage?.cost_usd)));
}

/** Renders the list page into `root`. Resolves once the first rows are on screen. */
export async function showList(root) {
  document.title = "Sessions — agentfile";
  const filters = readFilters();

  const statusSelect = h("select", { id: "status-filter", "aria-label": "Status" },
    h("option", { value: "" }, "All statuses"),
    STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s.replace("_", " "))));
  const workflowSelect = h("select", { id: "workflow-filter", "aria-label": "Workflow" },
    h("option", { value: "" }, "All workflows"),
    // Keep a workflow named in the URL selectable before the full list arrives.
    filters.workflow ? h("option", { value: filters.workflow, selected: true }, filters.workflow) : null);
  const search = h("input", { id: "search", type: "search", placeholder: "Search id, workflow, inputs…",
    value: filters.q, "aria-label": "Search", spellcheck: false });
  const tbody = h("tbody");
  const table = h("table", { id: "sessions", class: "sessions" },
    h("thead", null, h("tr", null,
      ["Workflow", "Session", "Status", "Trigger", "Started", "Duration", "Tokens in / out", "Cost"]
        .map((t, i) => h("th", { class: i >= 5 ? "num" : null }, t)))),
    tbody);
  const empty = h("p", { id: "empty", class: "muted", hidden: true }, "No sessions match.");
  const message = h("p", { id: "message", class: "message", role: "status" });
  const more = h("button", { id: "more", type: "button", hidden: true }, "Older sessions");

  fill(root,
    h("div", { class: "toolbar" },
      h("h1", null, "Sessions"),
      h("div", { class: "filters" }, statusSelect, workflowSelect, search)),
    message,
    h("div", { class: "table-wrap" }, table),
    empty,
    h("div", { class: "more-wrap" }, more));

  let next = null;
  let generation = 0;

  /** Loads the first page (replace) or the next page (append) for the current filters. */
  async function load(append) {
    const mine = append ? generation : ++generation;
    table.setAttribute("aria-busy", "true");
    more.disabled = true;
    try {
      const page = await listSessions({ ...filters, before: append ? next : null });
      if (mine !== generation) return; // a newer filter won
      const rows = Array.isArray(page?.sessions) ? page.sessions : [];
      const frag = document.createDocumentFragment();
      for (const row of rows) if (row && typeof row.id === "string") frag.append(sessionRow(row));
      if (append) tbody.append(frag);
      else tbody.replaceChildren(frag);
      next = typeof page?.next === "string" ? page.next : null;
      more.hidden = next === null;
      empty.hidden = tbody.rows.length > 0;
      message.textContent = "";
      message.classList.remove("error");
    } catch (err) {
      if (mine !== generation) return;
      message.textContent = err.message;
      message.classList.add("error");
    } finally {
      if (mine === generation) {
        table.setAttribute("aria-busy", "false");
        more.disabled = false;
      }
    }
  }

  function apply() {
    writeFilters(filters);
    load(false);
  }

  let debounce = 0;
  statusSelect.addEventListener("change", () => { filters.status = statusSelect.value; apply(); });
  workflowSelect.addEventListener("change", () => { filters.workflow = workflowSelect.value; apply(); });
  search.addEventListener("input", () => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { filters.q = search.value.trim(); apply(); }, SEARCH_DEBOUNCE_MS);
  });
  search.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    clearTimeout(debounce);
    filters.q = search.value.trim();
    apply();
  });
  more.addEventListener("click", () => load(true));

  await load(false);
  markRendered();

  // The workflow names come after the rows, so they never delay the first paint.
  try {
    const { workflows } = await listWorkflows();
    const names = Array.isArray(workflows) ? workflows.filter((w) => typeof w === "string") : [];
    if (filters.workflow && !names.includes(filters.workflow)) names.push(filters.workflow);
    fill(workflowSelect, h("option", { value: "" }, "All workflows"),
      names.map((w) => h("option", { value: w, selected: w === filters.workflow }, w)));
  } catch (err) {
    if (err.status !== 401) message.textContent = `Could not load the workflow names: ${err.message}`;
  }
}
