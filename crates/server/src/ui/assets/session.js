// session.js — one session's page (/ui/sessions/<id>): header and status, the actions
// (approve / reject / signal / cancel / resume), graph, timeline, outputs, usage and the event log.
//
// Data flow: one snapshot (GET /ui/api/sessions/<id>) fills everything; while the session is not
// settled the page follows its stream — event rows are appended at once, and the snapshot is
// refetched at most once a second (and on every status change) to update the rest. Form fields are
// built once and only shown or hidden, so a refetch never wipes what someone is typing.
//
// What it never does: show server text as anything but text, or send an action without the CSRF
// header (api.js adds it).

import { h, fill, markRendered } from "./dom.js";
import { getSession, act } from "./api.js";
import { renderGraph } from "./graph.js";
import { renderTimeline } from "./timeline.js";
import { EventLog } from "./events.js";
import { follow, throttled } from "./live.js";
import * as fmt from "./format.js";

/** Statuses after which nothing more happens unless someone acts (resume), so no stream is kept. */
const SETTLED = new Set(["completed", "failed", "cancelled", "interrupted"]);
const CANCELLABLE = new Set(["queued", "running", "waiting_approval", "suspended"]);
const RESUMABLE = new Set(["interrupted", "failed", "waiting_approval", "suspended"]);
const STATUSES = new Set(["queued", "running", "waiting_approval", "suspended", "completed", "failed", "cancelled", "interrupted"]);
const REFRESH_MS = 1000;

/** Renders the page of session `id` into `root`. Resolves once the first snapshot is on screen. */
export async function showSession(root, id) {
  const first = await getSession(id);
  const page = new SessionPage(root, id);
  page.apply(first);
  markRendered();
  page.followIfLive();
}

class SessionPage {
  constructor(root, id) {
    this.id = id;
    this.status = null;
    this.stream = null;
    this.graphKey = null;
    this.timelineKey = null;
    this.refresh = throttled(() => this.refetch(), REFRESH_MS);
    this.build(root);
    this.log = new EventLog(this.el.events, id);
  }

  build(root) {
    const el = (this.el = {});
    el.title = h("h1", { id: "title" });
    el.status = h("span", { id: "status", class: "badge" });
    el.live = h("span", { id: "live", class: "live", hidden: true, title: "Following this session as it runs" }, "live");
    el.meta = h("dl", { class: "meta" });
    el.message = h("p", { id: "message", class: "message", role: "status" });
    el.pending = h("div", { id: "pending", class: "pending", hidden: true });

    el.note = h("textarea", { id: "note", rows: 2, placeholder: "Note (optional)", "aria-label": "Approval note" });
    el.approve = h("button", { id: "approve", type: "button", class: "primary" }, "Approve");
    el.reject = h("button", { id: "reject", type: "button", class: "danger" }, "Reject");
    el.approval = h("div", { class: "approval", hidden: true }, el.note, h("div", { class: "buttons" }, el.approve, el.reject));

    el.signalEvent = h("input", { id: "signal-event", type: "text", list: "signal-events", placeholder: "event name", "aria-label": "Signal event name", spellcheck: false });
    el.signalEvents = h("datalist", { id: "signal-events" });
    el.signalPayload = h("textarea", { id: "signal-payload", rows: 3, class: "mono", placeholder: "payload as JSON (empty = null)", "aria-label": "Signal payload", spellcheck: false });
    el.signal = h("button", { id: "signal", type: "button" }, "Send signal");
    el.signalBox = h("details", { class: "signal" }, h("summary", null, "Send a signal"),
      h("div", { class: "signal-form" }, el.signalEvent, el.signalEvents, el.signalPayload, h("div", { class: "buttons" }, el.signal)));

    el.forkAt = h("select", { id: "fork-at", "aria-label": "Node to fork from" });
    el.fork = h("button", { id: "fork", type: "button" }, "Fork from here");
    el.forkBox = h("details", { class: "fork", hidden: true }, h("summary", null, "Fork from a node"),
      h("p", { class: "muted" }, "A new session takes over every node finished before this one and runs it and all after it again."),
      h("div", { class: "fork-form" }, el.forkAt, h("div", { class: "buttons" }, el.fork)));

    el.cancel = h("button", { id: "cancel", type: "button", class: "danger", hidden: true }, "Cancel");
    el.resume = h("button", { id: "resume", type: "button", hidden: true }, "Resume");

    el.graph = h("div", { class: "graph-slot" });
    el.timeline = h("div", { id: "timeline", class: "timeline" });
    el.outputs = h("div", { id: "outputs", class: "outputs" });
    el.usage = h("dl", { id: "usage", class: "usage" });
    el.error = h("pre", { id: "error", class: "error-box mono", hidden: true });
    el.eventCount = h("span", { class: "muted count" });
    el.events = h("div", { id: "events", class: "events", "aria-label": "Events" });

    fill(root,
      h("a", { id: "back", href: "/ui/", class: "back" }, "← All sessions"),
      h("div", { class: "session-head" },
        el.title, el.status, el.live,
        h("code", { id: "session-id", class: "mono" }, this.id)),
      el.meta,
      el.message,
      el.error,
      (el.actions = h("section", { class: "panel actions", "aria-label": "Actions" },
        el.pending, el.approval,
        h("div", { class: "buttons" }, el.cancel, el.resume),
        el.signalBox, el.forkBox)),
      section("Graph", el.graph),
      section("Timeline", el.timeline),
      h("div", { class: "columns" }, section("Outputs", el.outputs), section("Usage", el.usage)),
      section(["Events ", el.eventCount], el.events));

    el.approve.addEventListener("click", () => this.run("approve", { approve: true, note: this.noteValue() }));
    el.reject.addEventListener("click", () => this.run("reject", { approve: false, note: this.noteValue() }, "approve"));
    el.cancel.addEventListener("click", () => this.run("cancel", {}));
    el.resume.addEventListener("click", () => this.run("resume", {}));
    el.signal.addEventListener("click", () => this.sendSignal());
    el.fork.addEventListener("click", () => this.fork());
    // A click on a node of the graph picks it as the node to fork from.
    el.graph.addEventListener("click", (ev) => {
      const node = ev.target instanceof Element ? ev.target.closest("g.node") : null;
      const path = node?.dataset?.path;
      if (path && !el.forkBox.hidden && [...el.forkAt.options].some((o) => o.value === path)) {
        el.forkAt.value = path;
        el.forkBox.open = true;
      }
    });
  }

  /** Forks the session at the chosen node and opens the new session. */
  async fork() {
    const at = this.el.forkAt.value;
    if (!at) return this.say("Choose the node to fork from.", true);
    this.el.fork.disabled = true;
    this.say(`fork at ${at}…`, false);
    try {
      const res = await act(this.id, "fork", { at });
      if (typeof res?.session_id === "string" && res.session_id !== this.id) {
        window.location.assign(`/ui/sessions/${encodeURIComponent(res.session_id)}`);
        return;
      }
      this.say("fork: done", false);
    } catch (err) {
      this.say(`fork failed: ${err.message}`, true);
    } finally {
      this.el.fork.disabled = false;
    }
  }

  /** The nodes a settled session can be forked from: the graph's, in order. */
  showForkNodes(graph) {
    const paths = [];
    for (const n of Array.isArray(graph?.nodes) ? graph.nodes : []) {
      if (typeof n?.path === "string" && n.path && !paths.includes(n.path)) paths.push(n.path);
    }
    const known = [...this.el.forkAt.options].map((o) => o.value).join("\n");
    if (known !== paths.join("\n")) fill(this.el.forkAt, paths.map((p) => h("option", { value: p }, p)));
    this.forkable = paths.length > 0;
    this.el.forkBox.hidden = !(this.forkable && SETTLED.has(this.status));
    this.showActionsPanel();
  }

  noteValue() {
    const note = this.el.note.value.trim();
    return note === "" ? null : note;
  }

  sendSignal() {
    const event = this.el.signalEvent.value.trim();
    if (!event) return this.say("Name the event to send.", true);
    const raw = this.el.signalPayload.value.trim();
    let payload = null;
    if (raw !== "") {
      try {
        payload = JSON.parse(raw);
      } catch (err) {
        return this.say(`The payload is not valid JSON: ${err.message}`, true);
      }
    }
    return this.run("signal", { event, payload });
  }

  /** Sends one action; shows the result or the server's error text in #message. */
  async run(label, body, action = label) {
    const buttons = [this.el.approve, this.el.reject, this.el.cancel, this.el.resume, this.el.signal];
    for (const b of buttons) b.disabled = true;
    this.say(`${label}…`, false);
    try {
      const res = await act(this.id, action, body);
      this.say(`${label}: ${typeof res?.status === "string" ? res.status : "done"}`, false);
      // The reply names the session's new status; taking it at once starts following a resumed run.
      if (STATUSES.has(res?.status)) this.setStatus(res.status);
      if (action === "approve") this.el.note.value = "";
      if (action === "signal") this.el.signalPayload.value = "";
    } catch (err) {
      this.say(`${label} failed: ${err.message}`, true);
    } finally {
      for (const b of buttons) b.disabled = false;
      this.refresh();
    }
  }

  say(text, isError) {
    this.el.message.textContent = text;
    this.el.message.classList.toggle("error", Boolean(isError));
  }

  async refetch() {
    try {
      this.apply(await getSession(this.id, this.log.highest));
    } catch (err) {
      if (err.status !== 401) this.say(`Could not refresh: ${err.message}`, true);
    }
  }

  /** Brings the whole page in line with a snapshot. */
  apply(snap) {
    const row = snap?.session || {};
    const workflow = String(row.workflow ?? "");
    if (this.el.title.textContent !== workflow) {
      this.el.title.textContent = workflow;
      document.title = `${workflow} — agentfile`;
    }
    this.setStatus(String(row.status ?? ""));
    this.showMeta(row, snap?.package);
    this.showPending(snap?.pending || null);
    this.el.error.hidden = !snap?.error;
    this.el.error.textContent = snap?.error ? String(snap.error) : "";

    const graphKey = JSON.stringify(snap?.graph ?? null);
    if (graphKey !== this.graphKey) {
      this.graphKey = graphKey;
      fill(this.el.graph, renderGraph(snap?.graph));
      this.showForkNodes(snap?.graph);
    }
    const timelineKey = JSON.stringify(snap?.timeline ?? null);
    if (timelineKey !== this.timelineKey) {
      this.timelineKey = timelineKey;
      renderTimeline(this.el.timeline, snap?.timeline, (seq) => this.log.reveal(seq));
    }
    this.showOutputs(snap?.outputs);
    this.showUsage(row.usage);
    // A very long session sends its last lines only; say how many are left out.
    if (Number.isSafeInteger(snap?.events_omitted) && snap.events_omitted > 0) {
      this.omitted = (this.omitted || 0) + snap.events_omitted;
    }
    this.addEvents(Array.isArray(snap?.events) ? snap.events : []);
  }

  addEvents(rows) {
    this.log.add(rows);
    const all = this.log.highest;
    const shown = this.omitted ? `, the last ${fmt.count(all - this.omitted)} shown` : "";
    this.el.eventCount.textContent = `(${fmt.count(all)}${shown})`;
  }

  setStatus(status) {
    if (status === this.status) return;
    this.status = status;
    const s = this.el.status;
    s.textContent = status;
    s.className = `badge status-${status.replace(/[^a-z_]/g, "")}`;
    s.dataset.status = status;
    this.el.cancel.hidden = !CANCELLABLE.has(status);
    this.el.resume.hidden = !RESUMABLE.has(status);
    // Signals only make sense while the run can still go on.
    this.el.signalBox.hidden = status === "completed" || status === "cancelled";
    // A fork starts from a session that has settled.
    this.el.forkBox.hidden = !(this.forkable && SETTLED.has(status));
    this.showActionsPanel();
    this.followIfLive();
  }

  showMeta(row, pkg) {
    const items = [
      ["Started", fmt.dateTime(row.created_at)],
      ["Duration", typeof row.duration_ms === "number" ? fmt.duration(row.duration_ms) : row.status === "running" ? "running…" : fmt.NONE],
      ["Trigger", row.trigger ? `${row.trigger.kind ?? ""} ${row.trigger.id ?? ""}`.trim() : "manual"],
    ];
    // A workflow from an OCI package: the digest that ran (an upgrade is another).
    if (pkg && typeof pkg.digest === "string") {
      const ref = String(pkg.ref ?? "");
      const pinned = ref.includes("@") ? ref : `${ref}@${pkg.digest}`;
      items.push(["Package", pkg.signed_by ? `${pinned} (signed, ${pkg.signed_by})` : pinned]);
    }
    const inputs = row.inputs && typeof row.inputs === "object" ? Object.entries(row.inputs) : [];
    fill(this.el.meta, items.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
      inputs.length ? [h("dt", null, "Inputs"), h("dd", { class: "inputs" },
        inputs.map(([k, v]) => h("span", { class: "input" }, h("b", null, k), " = ",
          h("span", { class: "mono" }, typeof v === "string" ? v : JSON.stringify(v)))))] : null);
  }

  showPending(pending) {
    const el = this.el;
    const kind = pending?.kind;
    el.approval.hidden = kind !== "approval";
    if (kind === "approval") {
      fill(el.pending, h("strong", null, "Waiting for approval"),
        pending.node ? h("span", { class: "mono" }, ` at ${pending.node}`) : null,
        pending.reason ? h("p", { class: "reason" }, String(pending.reason)) : null);
    } else if (kind === "suspend") {
      const names = (Array.isArray(pending.events) ? pending.events : []).map(String);
      fill(el.pending, h("strong", null, "Suspended, waiting for a signal"),
        pending.node ? h("span", { class: "mono" }, ` at ${pending.node}`) : null,
        names.length ? h("p", null, "Expected events: ", h("span", { class: "mono" }, names.join(", "))) : null);
      const known = [...el.signalEvents.options].map((o) => o.value).join("\n");
      if (known !== names.join("\n")) fill(el.signalEvents, names.map((n) => h("option", { value: n })));
      if (!el.signalEvent.value && names.length) el.signalEvent.value = names[0];
      if (!this.suspendSeen) el.signalBox.open = true; // open it once; later the user decides
      this.suspendSeen = true;
    } else {
      el.pending.replaceChildren();
    }
    el.pending.hidden = kind !== "approval" && kind !== "suspend";
    this.showActionsPanel();
  }

  /** Hides the actions panel when none of its parts apply (a finished session). */
  showActionsPanel() {
    const el = this.el;
    el.actions.hidden = [el.pending, el.approval, el.cancel, el.resume, el.signalBox, el.forkBox].every((x) => x.hidden);
  }

  showOutputs(outputs) {
    const entries = outputs && typeof outputs === "object" ? Object.entries(outputs) : [];
    const key = JSON.stringify(outputs ?? null);
    if (key === this.outputsKey) return;
    this.outputsKey = key;
    if (entries.length === 0) {
      fill(this.el.outputs, h("p", { class: "muted" }, "No outputs yet."));
      return;
    }
    fill(this.el.outputs, h("dl", null, entries.map(([name, value]) => [
      h("dt", { class: "mono" }, name),
      h("dd", null, h("pre", { class: "mono" }, typeof value === "string" ? value : JSON.stringify(value, null, 2))),
    ])));
  }

  showUsage(usage) {
    const u = usage || {};
    const items = [
      ["Input tokens", fmt.count(u.input_tokens)],
      ["Output tokens", fmt.count(u.output_tokens)],
      ["Cost", fmt.cost(u.cost_usd)],
      ["Turns", fmt.count(u.turns)],
      ["Tool calls", fmt.count(u.tool_calls)],
    ];
    fill(this.el.usage, items.map(([k, v]) => [h("dt", null, k), h("dd", { class: "num" }, v)]));
  }

  /** Opens the stream while the session can still change; closes it once it has settled. */
  followIfLive() {
    const live = this.status !== null && !SETTLED.has(this.status);
    if (live && !this.stream) {
      this.stream = follow(this.id, this.log.highest, {
        onEvent: (row) => {
          this.addEvents([row]);
          this.refresh();
        },
        onStatus: (status) => {
          this.setStatus(status);
          this.refresh();
        },
        // Anything written between the first snapshot and the stream opening comes with a refetch.
        onOpen: () => {
          this.el.live.hidden = false;
          this.refresh();
        },
        onDown: (closed) => {
          this.el.live.hidden = true;
          if (closed) {
            this.stream = null;
            this.say("Live updates stopped; reload the page to follow again.", true);
          }
          this.refresh();
        },
      });
    } else if (!live && this.stream) {
      this.stream.close();
      this.stream = null;
      this.el.live.hidden = true;
    }
  }
}

function section(title, body) {
  return h("section", { class: "panel" }, h("h2", null, title), body);
}
