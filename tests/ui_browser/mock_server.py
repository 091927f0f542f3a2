#!/usr/bin/env python3
"""A stand-in for the agentfile web view server, for front-end work without the Rust build.

Serves the real assets (crates/server/src/ui/assets) with the real CSP header and canned data for every
route of notes/ui-api.md: a 3-agent parallel run, a 6-item map run, a session waiting for approval
(approving it runs to completion over SSE), a suspended one, a failed one, one full of hostile text,
a 10,000-event session, and filler rows so the list pages. POST /mock/start-live starts a new session
that emits events for a few seconds (the scenario's `live.argv` calls it).

    python3 tests/ui_browser/mock_server.py --port 8800 --scenario-out /tmp/scenario.json

Stdlib only. It is a fixture, not a model of the server: no persistence, one fixed CSRF token.
"""
import argparse, json, re, sys, threading, time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

ASSETS = Path(__file__).resolve().parents[2] / "crates/server/src/ui/assets"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; require-trusted-types-for 'script'; trusted-types 'none'")
TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".svg": "image/svg+xml", ".png": "image/png"}
CSRF = "c0ffee1234"
HOSTILE = ["<img src=x onerror=alert(1)>", "javascript:alert(1)", "</pre><script>alert(2)</script>"]
T0 = datetime(2026, 11, 27, 10, 0, 0, tzinfo=timezone.utc)
lock = threading.Condition()
SESSIONS = {}  # id -> dict(row, events(list of full events), graph, timeline, pending, outputs, error)
AUTH = "loopback"
TOKEN = None  # with --token: a login cookie (or bearer) is needed, as with AGENTFILE_MCP_TOKEN


def iso(t):
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def node(i, path, x, y, lines, shape="box", state="done", badge=None, w=120, h=40):
    return {"id": f"n{i}", "path": path, "x": x, "y": y, "w": w, "h": h, "lines": lines, "shape": shape, "state": state, "badge": badge}


def edge(a, b, label=None, dashed=False):  # from bottom-centre of a to top-centre of b
    return {"points": [[a["x"] + a["w"] / 2, a["y"] + a["h"]], [b["x"] + b["w"] / 2, b["y"]]], "label": label, "dashed": dashed}


def fan_graph(names, kind, label, badge=None, state="done", hostile=False):
    w = max(440, 150 * len(names) + 40)
    start = node(0, None, w / 2 - 60, 10, ["start"], "round")
    items = [node(i + 1, f"fan/{n}", 20 + 150 * i, 110, [f"agent {n}", HOSTILE[0] if hostile else "goal"], state=state, badge=badge, h=48)
             for i, n in enumerate(names)]
    end = node(99, None, w / 2 - 20, 230, ["end"], "circle", state="done" if state == "done" else "pending", w=40)
    return {"width": w, "height": 290, "groups": [{"x": 10, "y": 80, "w": w - 20, "h": 95, "label": label, "kind": kind}],
            "nodes": [start, *items, end],
            "edges": [edge(start, n, "each" if i == 0 else None) for i, n in enumerate(items)] + [edge(n, end, dashed=True) for n in items]}


def lanes_for(keys, per_lane_ms=4000, hostile=False):
    lanes = []
    for i, k in enumerate(keys):
        s = 200 * i
        lanes.append({"key": k, "label": HOSTILE[0] if hostile and i == 0 else k, "bars": [
            {"kind": "node", "label": k, "start_ms": s, "end_ms": s + per_lane_ms, "seq": 3 + i, "status": "done", "running": False},
            {"kind": "agent", "label": f"agent {k}", "start_ms": s + 50, "end_ms": s + per_lane_ms - 50, "seq": 3 + i, "status": "done", "running": False},
            {"kind": "turn", "label": "turn 1", "start_ms": s + 100, "end_ms": s + 1800, "seq": 4 + i, "tokens_in": 812, "tokens_out": 120, "cost_usd": 0.0031, "status": "done", "running": False},
            {"kind": "tool", "label": HOSTILE[1] if hostile else "read_file", "start_ms": s + 1800, "end_ms": s + 1900, "seq": 5 + i, "status": "done", "running": False},
            {"kind": "turn", "label": "turn 2", "start_ms": s + 1900, "end_ms": s + per_lane_ms - 100, "seq": 6 + i, "tokens_in": 990, "tokens_out": 300, "cost_usd": 0.004, "status": "done", "running": False}]})
    return {"t0": iso(T0), "t1": iso(T0 + timedelta(milliseconds=per_lane_ms + 200 * len(keys))), "span_ms": per_lane_ms + 200 * len(keys), "lanes": lanes}


def make(sid, workflow, status, minutes_ago, lines, graph=None, timeline=None, pending=None, outputs=None, error=None, inputs=None, trigger=None):
    created = T0 - timedelta(minutes=minutes_ago)
    events = []
    for i, (typ, nd, agent, line) in enumerate(lines):
        events.append({"seq": i + 1, "ts": iso(created + timedelta(milliseconds=137 * i)), "type": typ, "node": nd, "agent": agent,
                       "line": line, "data": {"summary": line, "detail": {"index": i, "text": line * 2}}})
    settled = status in ("completed", "failed", "cancelled")
    dur = 137 * len(lines) if settled else None
    row = {"id": sid, "workflow": workflow, "status": status, "created_at": iso(created), "updated_at": iso(created),
           "last_seq": len(events), "inputs": inputs or {"topic": "tests"}, "trigger": trigger,
           "ended_at": iso(created + timedelta(milliseconds=dur)) if dur else None, "duration_ms": dur,
           "usage": {"input_tokens": 1200 * len(lines), "output_tokens": 300 * len(lines), "cost_usd": 0.0004 * len(lines), "turns": len(lines) // 3, "tool_calls": len(lines) // 4}}
    SESSIONS[sid] = {"row": row, "events": events, "graph": graph or {"unavailable": "This run has no graph."},
                     "timeline": timeline or lanes_for(["main"]), "pending": pending, "outputs": outputs, "error": error}
    return sid


def agent_lines(names, hostile=False):
    out = [("session_started", None, None, "session started")]
    for n in names:
        out += [("node_started", f"fan/{n}", n, f"agent {n} starts"), ("turn", f"fan/{n}", n, f"{n} thinks about it"),
                ("tool_call", f"fan/{n}", n, f"read_file {{\"path\": \"{n}.txt\"}}"), ("tool_result", f"fan/{n}", n, "ok, 12 lines"),
                ("node_finished", f"fan/{n}", n, f"agent {n} done")]
    if hostile:
        out += [("tool_result", "fan/a", "a", f"result: {t}") for t in HOSTILE] + [("turn", "fan/a", "a", " ".join(HOSTILE))]
    return out + [("session_completed", None, None, "session completed")]


def seed():
    ids = {}
    ids["parallel"] = make("20261127-095900-par", "fanout", "completed", 1, agent_lines("abc"), fan_graph("abc", "parallel", "parallel"),
                           lanes_for(["fan/a", "fan/b", "fan/c"]), outputs={"summary": "three agents agreed", "scores": [1, 2, 3]})
    items = [str(i) for i in range(6)]
    ids["map"] = make("20261127-095800-map", "mapper", "completed", 2, agent_lines(items), fan_graph(["items"], "map", "map each item", "6/6"),
                      lanes_for([f"map/{i}" for i in items], 3000))
    ids["approval"] = make("20261127-095700-apr", "gate", "waiting_approval", 3, agent_lines("a")[:-1] + [("approval_requested", "gate", None, "needs a human")],
                           fan_graph("a", "branch", "review", state="waiting"), lanes_for(["gate"]),
                           pending={"kind": "approval", "reason": "Deploy to production?", "node": "gate", "seq": 7})
    ids["hostile"] = make("20261127-095600-hos", "hostile", "completed", 4, agent_lines("a", hostile=True), fan_graph("a", "parallel", HOSTILE[2], hostile=True),
                          lanes_for(["fan/a"], hostile=True), outputs={"evil": HOSTILE[0], HOSTILE[1]: HOSTILE[2]}, inputs={"q": HOSTILE[0]})
    ids["failed"] = make("20261127-095500-fai", "flaky", "failed", 5, agent_lines("x")[:-1] + [("session_failed", None, None, "tool crashed")],
                         error="tool `build` exited with status 2\nsee event 6")
    ids["suspended"] = make("20261127-095400-sus", "waiter", "suspended", 6, agent_lines("w")[:-1],
                            pending={"kind": "suspend", "events": ["ci_done", "abort"], "node": "wait", "seq": 6})
    big = [("turn" if i % 3 else "tool_call", f"bulk/{i % 7}", f"agent{i % 7}", f"step {i}: working through item {i} of the backlog")
           for i in range(10_000)]
    ids["big"] = make("20261127-095300-big", "bulk", "completed", 7, big)
    for i in range(53):
        make(f"20261126-{i:06d}-nig", "nightly", "completed" if i % 5 else "cancelled", 60 * 24 + 30 * i, agent_lines("n"),
             trigger={"id": "nightly#0", "kind": "schedule"})
    return ids


def append(sid, typ, line, status=None):
    with lock:
        s = SESSIONS[sid]
        seq = len(s["events"]) + 1
        s["events"].append({"seq": seq, "ts": iso(datetime.now(timezone.utc)), "type": typ, "node": "fan/a", "agent": "a", "line": line, "data": {"summary": line}})
        s["row"]["last_seq"] = seq
        if status:
            s["row"]["status"] = status
            s["pending"] = None
            if status in ("completed", "failed", "cancelled"):
                s["row"]["duration_ms"] = 4321
                s["row"]["ended_at"] = iso(datetime.now(timezone.utc))
        lock.notify_all()


def run_later(sid, n, gap, final="completed"):
    def go():
        for i in range(n):
            time.sleep(gap)
            append(sid, "turn", f"working, step {i + 1} of {n}")
        time.sleep(gap)
        append(sid, "session_completed" if final == "completed" else "session_failed", f"session {final}", final)
    threading.Thread(target=go, daemon=True).start()


def view(sid):
    s = SESSIONS[sid]
    light = [{k: e[k] for k in ("seq", "ts", "type", "node", "agent", "line")} for e in s["events"]]
    return {"session": s["row"], "outputs": s["outputs"], "error": s["error"], "pending": s["pending"], "graph": s["graph"],
            "timeline": s["timeline"], "events": light, "last_seq": len(light)}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype="application/json", extra=()):
        data = body if isinstance(body, bytes) else (json.dumps(body) if ctype == "application/json" else body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Cache-Control", "no-store")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def authed(self):
        return TOKEN is None or "af_ui=ok" in self.headers.get("Cookie", "") or self.headers.get("Authorization") == f"Bearer {TOKEN}"

    def do_GET(self):
        url = urlparse(self.path)
        p, q = url.path, {k: v[0] for k, v in parse_qs(url.query).items()}
        if not self.authed() and p != "/ui/login" and not p.startswith("/ui/assets/"):
            if p.startswith("/ui/api/"):
                return self.send(401, {"error": "sign in first"})
            return self.send(303, b"", "text/plain", [("Location", "/ui/login")])
        if p in ("/ui", "/ui/") or re.fullmatch(r"/ui/sessions/[^/]+/?", p):
            return self.send(200, (ASSETS / "app.html").read_bytes(), TYPES[".html"])
        if p == "/ui/login":
            return self.send(200, (ASSETS / "login.html").read_text().replace("{{csrf}}", CSRF), TYPES[".html"])
        m = re.fullmatch(r"/ui/assets/([A-Za-z0-9_.-]+)", p)
        if m and (ASSETS / m[1]).is_file():
            return self.send(200, (ASSETS / m[1]).read_bytes(), TYPES.get(Path(m[1]).suffix, "application/octet-stream"))
        if p == "/ui/api/me":
            return self.send(200, {"auth": AUTH, "csrf": CSRF})
        if p == "/ui/api/workflows":
            return self.send(200, {"workflows": sorted({s["row"]["workflow"] for s in SESSIONS.values()})})
        if p == "/ui/api/sessions":
            return self.send(200, self.list(q))
        m = re.fullmatch(r"/ui/api/sessions/([^/]+)(/stream|/events/(\d+))?", p)
        if m and m[1] in SESSIONS:
            if m[2] == "/stream":
                return self.stream(m[1])
            if m[3]:
                ev = next((e for e in SESSIONS[m[1]]["events"] if e["seq"] == int(m[3])), None)
                return self.send(200, ev) if ev else self.send(404, {"error": "no such event"})
            return self.send(200, view(m[1]))
        self.send(404, {"error": f"not found: {p}"})

    def list(self, q):
        rows = sorted((s["row"] for s in SESSIONS.values()), key=lambda r: r["created_at"], reverse=True)
        text = q.get("q", "").lower()
        rows = [r for r in rows if (not q.get("status") or r["status"] == q["status"]) and (not q.get("workflow") or r["workflow"] == q["workflow"])
                and (not text or text in (r["id"] + r["workflow"] + json.dumps(r["inputs"])).lower())]
        start, limit = int(q.get("before") or 0), int(q.get("limit") or 50)
        nxt = str(start + limit) if start + limit < len(rows) else None
        return {"sessions": rows[start:start + limit], "next": nxt}

    def stream(self, sid):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", CSP)
        self.end_headers()
        s = SESSIONS[sid]
        last = int(self.headers.get("Last-Event-ID") or len(s["events"]))
        status, deadline = None, time.time() + 120
        try:
            while time.time() < deadline:
                with lock:
                    lock.wait_for(lambda: len(s["events"]) > last or s["row"]["status"] != status, timeout=5)
                    new, cur = s["events"][last:], s["row"]["status"]
                out = "".join(f"event: event\nid: {e['seq']}\ndata: {json.dumps({k: e[k] for k in ('seq', 'ts', 'type', 'node', 'agent', 'line')})}\n\n" for e in new)
                if cur != status:
                    out += f"event: status\ndata: {json.dumps({'status': cur})}\n\n"
                self.wfile.write((out or ": keep-alive\n\n").encode())
                self.wfile.flush()
                last, status = last + len(new), cur
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def do_POST(self):
        p = urlparse(self.path).path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if p == "/mock/start-live":
            sid = make(f"20261127-{int(time.time() * 1000) % 10**9:09d}-liv", "fanout", "running", 0, agent_lines("a")[:3],
                       fan_graph("a", "parallel", "live", state="running"), lanes_for(["fan/a"]))
            run_later(sid, 12, 0.5)
            return self.send(200, {"session_id": sid})
        if p == "/ui/login":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            if form.get("csrf") == CSRF and (TOKEN is None or form.get("token") == TOKEN):
                return self.send(303, b"", "text/plain", [("Location", "/ui/"), ("Set-Cookie", "af_ui=ok; Path=/ui; HttpOnly; SameSite=Strict")])
            return self.send(303, b"", "text/plain", [("Location", "/ui/login?failed=1")])
        if p == "/ui/logout":
            return self.send(303, b"", "text/plain", [("Location", "/ui/login"), ("Set-Cookie", "af_ui=; Path=/ui; Max-Age=0")])
        if not self.authed():
            return self.send(401, {"error": "sign in first"})
        if self.headers.get("X-Agentfile-CSRF") != CSRF:
            return self.send(403, {"error": "missing or wrong CSRF token"})
        m = re.fullmatch(r"/ui/api/sessions/([^/]+)/(approve|signal|cancel|resume)", p)
        if not m or m[1] not in SESSIONS:
            return self.send(404, {"error": "no such session"})
        sid, action, s = m[1], m[2], SESSIONS[m[1]]
        args = json.loads(body or b"{}")
        st = s["row"]["status"]
        if action == "approve" and st == "waiting_approval":
            append(sid, "approval_given", f"approved={args.get('approve')} note={args.get('note')}", "running")
            run_later(sid, 4, 0.3, "completed" if args.get("approve") else "failed")
        elif action == "signal" and st == "suspended":
            append(sid, "signal", f"signal {args.get('event')}", "running")
            run_later(sid, 3, 0.3)
        elif action == "cancel" and st in ("queued", "running", "waiting_approval", "suspended"):
            append(sid, "session_cancelled", "cancelled from the web view", "cancelled")
        elif action == "resume" and st in ("interrupted", "failed", "waiting_approval", "suspended"):
            append(sid, "session_resumed", "resumed", "running")
            run_later(sid, 3, 0.3)
        else:
            return self.send(409, {"error": f"cannot {action} a session that is {st}"})
        self.send(200, {"status": s["row"]["status"]})


LIVE_CLIENT = """import json, sys, time, urllib.request
base = sys.argv[1]
sid = json.load(urllib.request.urlopen(urllib.request.Request(base + '/mock/start-live', data=b'{}')))['session_id']
print(json.dumps({'type': 'session_started', 'session_id': sid}), flush=True)
while json.load(urllib.request.urlopen(base + '/ui/api/sessions/' + sid))['session']['status'] == 'running':
    print(json.dumps({'type': 'tick'}), flush=True); time.sleep(0.5)
"""


def main():
    global AUTH, TOKEN
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--auth", choices=["loopback", "token"], default="loopback", help="what /ui/api/me reports")
    ap.add_argument("--token", help="require this token (login form / bearer); implies --auth token")
    ap.add_argument("--scenario-out", help="write a scenario.json for check.py here")
    a = ap.parse_args()
    AUTH, TOKEN = ("token" if a.token else a.auth), a.token
    ids = seed()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    if a.scenario_out:
        names = {k: SESSIONS[v]["row"]["workflow"] for k, v in ids.items()}
        keys = ["parallel", "map", "approval", "hostile", "failed"]
        Path(a.scenario_out).write_text(json.dumps({
            "sessions": {k: ids[k] for k in keys}, "workflows": {k: names[k] for k in keys}, "total": len(SESSIONS),
            "hostile_texts": HOSTILE, "big": ids["big"],
            "live": {"argv": [sys.executable, "-c", LIVE_CLIENT, base], "cwd": str(Path.cwd()), "env": {"MOCK": "1"}}}, indent=1))
    print(f"listening {base}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
