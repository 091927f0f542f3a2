#!/usr/bin/env python3
"""Whole-process figures of the agentfile web view in a real browser (Playwright + Chromium).

    bench.py --url http://127.0.0.1:PORT --fill target/tmp/bench-ui/fill.json \
             --agentfile target/release/agentfile --fake-provider target/release/fake-provider \
             --chromium /usr/lib/chromium/chromium [--runs 20] [--turns 38] [--live-runs 3] \
             [--breakdown 5] [--pause 1] [--skip list,session,live] [--out target/bench-ui.md]

`--url` serves the benchmark workspace (100,001 sessions, one of 10,000 events; built by
`cargo bench --bench ui`, described by fill.json). scripts/bench-ui.sh builds everything and runs this.

Figures:
  (a) first render of /ui/ over the 100k store: `performance.mark("rendered")`'s startTime (from
      navigation start), `--runs` fresh loads, each in a new browser context after `--pause` seconds
      of quiet, after one uncounted warm-up; also the first paint after that mark;
  (b) the same for the 10,000-event session's page, with where the time goes: the snapshot request's
      server time (request start to first byte), transfer and size, what came before the request and
      after the response, and when all 10,000 rows exist; then an in-page breakdown of the part after
      the response (the page's own modules, imported and timed step by step on a loaded page);
  (c) event -> screen latency of the live view: `--live-runs` runs against the fake provider
      (`--turns` tool-calling turns, 50 ms each; a goal has at most 40 model turns) watched by a page
      opened as soon as the run's session id is known. For each event written after the page's stream
      opened and not in its first snapshot: the time its row entered the DOM (a MutationObserver) and
      the next animation frame after it (about when it is painted), minus the event's `ts`; also when
      the stream delivered it (EventSource message).

Prints a Markdown table (with the machine) and writes it to --out. Page code is always a function
(the page's CSP refuses eval of bare expressions).
"""
import argparse, json, os, platform, shutil, subprocess, tempfile, threading, time
from datetime import datetime
from importlib.metadata import version as pkg_version
from pathlib import Path

from playwright.sync_api import sync_playwright

RENDERED = "() => performance.getEntriesByName('rendered').length > 0"
RENDERED_MS = "() => performance.getEntriesByName('rendered')[0].startTime"

# Marks 'painted' once the frame after the page's 'rendered' mark has been painted (a task queued
# from that frame's animation callback runs after its paint): first render including style, layout
# and paint.
PAINT = r"""
(() => {
  const mark = performance.mark.bind(performance);
  performance.mark = (name, ...rest) => {
    const entry = mark(name, ...rest);
    if (name === 'rendered') requestAnimationFrame(() => setTimeout(() => mark('painted'), 0));
    return entry;
  };
})();
"""
PAINTED = "() => performance.getEntriesByName('painted').length > 0"
PAINTED_MS = "() => performance.getEntriesByName('painted')[0].startTime"

# Records, from before the page's own scripts run: when each event row enters the DOM (and the
# animation frame after), the last seq of the page's first snapshot (rows after it came live), and when
# the stream delivered each event.
WATCH = r"""
(() => {
  window.__seen = {};
  window.__frame = {};
  window.__arrived = {};
  window.__snapshotLast = null;
  window.__open = null;
  const originalFetch = window.fetch;
  window.fetch = async (...args) => {
    const response = await originalFetch(...args);
    try {
      const url = new URL(String(args[0]?.url ?? args[0]), location.href);
      if (window.__snapshotLast === null && /^\/ui\/api\/sessions\/[^/]+$/.test(url.pathname) && response.ok) {
        window.__snapshotLast = (await response.clone().json()).last_seq;
      }
    } catch {}
    return response;
  };
  const Original = window.EventSource;
  window.EventSource = class extends Original {
    constructor(...args) {
      super(...args);
      this.addEventListener('event', (m) => { window.__arrived[m.lastEventId] = Date.now(); });
      this.addEventListener('open', () => { window.__open ??= Date.now(); });
    }
  };
  const observer = new MutationObserver((records) => {
    const now = Date.now();
    const fresh = [];
    for (const r of records) {
      for (const n of r.addedNodes) {
        if (n.nodeType !== 1) continue;
        const rows = n.matches('div.event[data-seq]') ? [n] : n.querySelectorAll('div.event[data-seq]');
        for (const row of rows) {
          const seq = row.dataset.seq;
          if (!(seq in window.__seen)) {
            window.__seen[seq] = now;
            fresh.push(seq);
          }
        }
      }
    }
    if (fresh.length) {
      requestAnimationFrame(() => {
        const t = Date.now();
        for (const seq of fresh) window.__frame[seq] = t;
      });
    }
  });
  observer.observe(document, { childList: true, subtree: true });
})();
"""


def pct(values, p):
    """The p-th percentile (nearest rank)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def ts_ms(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000


def machine():
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release()}


class Bench:
    def __init__(self, args, browser):
        self.args = args
        self.browser = browser
        self.base = args.url.rstrip("/")
        self.rows = []  # (figure, target, n, p50, p90, p99, max, note)
        self.notes = []

    def fresh(self, init=None):
        ctx = self.browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
        if init:
            ctx.add_init_script(init)
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        return ctx, page, errors

    def first_render(self, path, extra=None):
        """One uncounted warm-up load, then --runs fresh loads; the 'rendered' times and `extra(page)`."""
        times, extras = [], []
        for i in range(self.args.runs + 1):
            time.sleep(self.args.pause)  # let the last load's teardown finish: a quiet machine for each
            ctx, page, errors = self.fresh(PAINT)
            resp = page.goto(self.base + path)
            if resp is None or not resp.ok:
                raise SystemExit(f"GET {path} -> {resp.status if resp else 'nothing'}")
            page.wait_for_function(RENDERED, timeout=60_000)
            t = page.evaluate(RENDERED_MS)
            page.wait_for_function(PAINTED, timeout=60_000)
            painted = page.evaluate(PAINTED_MS)
            x = extra(page) if extra else None
            if errors:
                raise SystemExit(f"{path}: page errors: {errors[:3]}")
            ctx.close()
            if i == 0:
                self.notes.append(f"{path}: warm-up (uncounted) load rendered at {t:.0f} ms")
                continue
            times.append(t)
            extras.append({**(x or {}), "painted": painted})
        return times, extras

    def add(self, figure, target, values, note=""):
        self.rows.append((figure, target, len(values), pct(values, 50), pct(values, 90), pct(values, 99), max(values), note))

    # (a)
    def list_page(self):
        def extra(page):
            n = page.locator("tr.session").count()
            api = page.evaluate("""() => performance.getEntriesByType('resource')
                .filter(e => e.name.includes('/ui/api/sessions'))
                .map(e => ({ttfb: e.responseStart - e.requestStart, end: e.responseEnd, size: e.decodedBodySize}))[0] || null""")
            return {"rows": n, **(api or {})}
        times, extras = self.first_render("/ui/", extra)
        rows = {e["rows"] for e in extras}
        ttfb = [e["ttfb"] for e in extras if "ttfb" in e]
        size = extras[-1].get("size", 0)
        self.add("First render of `/ui/` (100,001 sessions)", "≤ 1000 ms", times,
                 f"{'/'.join(map(str, sorted(rows)))} rows; `/ui/api/sessions` server time p50 {pct(ttfb, 50):.0f} ms, {size / 1024:.0f} KiB")
        self.add("↳ the same, to the first paint after it", "", [e["painted"] for e in extras])

    # (b)
    def session_page(self, sid, n_events):
        def extra(page):
            api = page.evaluate(f"""() => performance.getEntriesByType('resource')
                .filter(e => e.name.endsWith('/ui/api/sessions/{sid}'))
                .map(e => ({{start: e.requestStart, ttfb: e.responseStart - e.requestStart,
                            transfer: e.responseEnd - e.responseStart, end: e.responseEnd,
                            size: e.decodedBodySize}}))[0] || null""")
            page.wait_for_function(f"() => document.querySelectorAll('#events div.event').length === {n_events}",
                                   timeout=120_000)
            all_rows = page.evaluate("() => performance.now()")
            return {**(api or {}), "all_rows": all_rows}
        times, extras = self.first_render(f"/ui/sessions/{sid}", extra)
        self.add("First render of a 10,000-event session", "≤ 1000 ms", times)
        self.add("↳ the same, to the first paint after it", "", [e["painted"] for e in extras])
        ok = [e for e in extras if "ttfb" in e]
        if ok:
            size = ok[-1]["size"]
            self.add("↳ snapshot request: server time (request → first byte)", "", [e["ttfb"] for e in ok],
                     f"JSON {size / 1e6:.2f} MB")
            self.add("↳ snapshot request: transfer (first → last byte)", "", [e["transfer"] for e in ok])
            self.add("↳ before the request (HTML, scripts, /api/me)", "", [e["start"] for e in ok])
            self.add("↳ after the response (JSON parse, graph, timeline, first 500 rows)", "",
                     [t - e["end"] for t, e in zip(times, extras) if "end" in e])
        self.add(f"All {n_events:,} event rows in the DOM", "", [e["all_rows"] for e in extras])

    # (b'), where the time after the response goes: the page's own modules, timed step by step on a
    # loaded page (same origin, so the CSP allows the imports), median of --breakdown runs.
    def session_breakdown(self, sid):
        ctx, page, errors = self.fresh()
        page.goto(self.base + "/ui/")
        page.wait_for_function(RENDERED, timeout=60_000)
        runs = []
        for _ in range(self.args.breakdown):
            time.sleep(self.args.pause)
            runs.append(page.evaluate("""async (sid) => {
              const [{ renderTimeline }, { renderGraph }, { EventLog }] = await Promise.all([
                import('/ui/assets/timeline.js'), import('/ui/assets/graph.js'), import('/ui/assets/events.js')]);
              const t = [performance.now()];
              const r = await fetch(`/ui/api/sessions/${sid}`, { cache: 'no-store', headers: { Accept: 'application/json' } });
              t.push(performance.now());
              const body = await r.text();
              t.push(performance.now());
              const snap = JSON.parse(body);
              t.push(performance.now());
              const host = document.createElement('div');
              document.body.append(host);
              host.append(renderGraph(snap.graph));
              t.push(performance.now());
              const timeline = document.createElement('div');
              timeline.className = 'timeline';
              host.append(timeline);
              renderTimeline(timeline, snap.timeline, () => {});
              t.push(performance.now());
              const events = document.createElement('div');
              events.className = 'events';
              host.append(events);
              new EventLog(events, sid).add(snap.events);
              t.push(performance.now());
              document.body.getBoundingClientRect();
              t.push(performance.now());
              JSON.stringify(snap.graph); JSON.stringify(snap.timeline);
              t.push(performance.now());
              const counts = { bars: timeline.querySelectorAll('.bar').length, lanes: timeline.querySelectorAll('.lane').length,
                               timelineNodes: timeline.querySelectorAll('*').length, rows: events.childElementCount,
                               rowNodes: events.querySelectorAll('*').length, bytes: body.length,
                               timelineBytes: JSON.stringify(snap.timeline).length, eventsBytes: JSON.stringify(snap.events).length };
              host.remove();
              const d = t.slice(1).map((v, i) => v - t[i]);
              return { ttfb: d[0], body: d[1], parse: d[2], graph: d[3], timeline: d[4], rows: d[5], layout: d[6], keys: d[7], counts };
            }""", sid))
        if errors:
            raise SystemExit(f"breakdown: page errors: {errors[:3]}")
        ctx.close()
        c = runs[-1]["counts"]
        med = lambda k: [r[k] for r in runs]
        self.add("↳ in-page: fetch to headers (server)", "", med("ttfb"),
                 f"same page, {len(runs)} runs, machine quiet: the snapshot is {c['bytes'] / 1e6:.2f} MB "
                 f"(events {c['eventsBytes'] / 1e6:.2f} MB, timeline {c['timelineBytes'] / 1e6:.2f} MB)")
        self.add("↳ in-page: body read", "", med("body"))
        self.add("↳ in-page: JSON.parse", "", med("parse"))
        self.add("↳ in-page: renderGraph", "", med("graph"))
        self.add("↳ in-page: renderTimeline", "", med("timeline"),
                 f"{c['lanes']} lanes, {c['bars']:,} bars, {c['timelineNodes']:,} elements")
        self.add("↳ in-page: EventLog.add (first 500 rows, the rest queued)", "", med("rows"),
                 f"{c['rows']} rows, {c['rowNodes']:,} elements")
        self.add("↳ in-page: style and layout", "", med("layout"))
        self.add("↳ in-page: JSON.stringify of graph and timeline (the page's change keys)", "", med("keys"))

    # (c)
    def live(self):
        """--live-runs runs, one after another, on one fake provider and one `agentfile ui`; the figures
        over all of them."""
        a = self.args
        work = Path(tempfile.mkdtemp(prefix="agentfile-bench-ui-live-"))
        procs = []
        try:
            turn = {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}], "latency_ms": 50}
            # Replies in order, run after run.
            script = ([turn] * a.turns + [{"text": "crawled", "latency_ms": 50}]) * a.live_runs
            (work / "script.json").write_text(json.dumps(script))
            fake = subprocess.Popen([a.fake_provider, str(work / "script.json")], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            procs.append(fake)
            base_url = fake.stdout.readline().strip()
            if not base_url.startswith("http"):
                raise SystemExit(f"fake-provider printed {base_url!r}")
            (work / "agent.toml").write_text(
                f'[llm]\nprovider = "openai"\nmodel = "gpt-4o"\nbase_url = {json.dumps(base_url)}\napi_key_env = "X"\n')
            (work / "live.agent").write_text(
                'NAME live\nGOAL crawl "Crawl slowly: list the folder once a turn."\nRUN main USING crawl\n')
            for i in range(5):
                (work / f"f{i}.txt").write_text(f"file {i}\n")
            env = {k: v for k, v in os.environ.items()
                   if k not in ("AGENTFILE_MCP_TOKEN", "AGENTFILE_PROVIDER", "AGENTFILE_MODEL")}
            env["X"] = "bench-key-0123456789"
            ui = subprocess.Popen([a.agentfile, "ui", "--listen", "127.0.0.1:0", "--workspace", str(work)],
                                  cwd=work, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
            procs.append(ui)
            url = None
            for line in ui.stderr:
                if "serving http://" in line:
                    url = line.split("serving ", 1)[1].strip().rstrip("/")
                    break
            if not url:
                raise SystemExit("the live `agentfile ui` did not start")
            threading.Thread(target=lambda: [None for _ in ui.stderr], daemon=True).start()
            base = url[: -len("/ui")] if url.endswith("/ui") else url
            dom, painted, stream, early, total = [], [], [], 0, 0
            for _ in range(a.live_runs):
                d, p, s, e, t = self.live_run(base, work, env)
                dom += d
                painted += p
                stream += s
                early += e
                total += t
            note = (f"{len(dom)} events over {a.live_runs} runs of {a.turns} tool turns (50 ms each), those "
                    f"written after the page was following; {early} earlier ones of {total} left out")
            self.add("Live view: event → row in the DOM", "≤ 200 ms", dom, note)
            self.add("Live view: event → next frame after the row (≈ on screen)", "≤ 200 ms", painted)
            self.add("↳ event → delivered by the stream (EventSource message)", "", stream)
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
        if not os.environ.get("BENCH_UI_KEEP"):
            shutil.rmtree(work, ignore_errors=True)

    def live_run(self, base, work, env):
        """One run watched from its start; latencies of the events written once the page followed."""
        a = self.args
        # The page is ready to navigate before the run starts.
        ctx, page, errors = self.fresh(WATCH)
        page.goto(base + "/ui/")
        page.wait_for_function(RENDERED, timeout=30_000)
        run = subprocess.Popen([a.agentfile, "run", "live.agent", "--output", "stream-json"], cwd=work,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            found, got = [], threading.Event()

            def drain():
                for raw in run.stdout:
                    if got.is_set():
                        continue
                    try:
                        obj = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(obj, dict) and isinstance(obj.get("session_id"), str):
                        found.append(obj["session_id"])
                        got.set()
            threading.Thread(target=drain, daemon=True).start()
            if not got.wait(30):
                raise SystemExit("the live run printed no session_id within 30 s")
            sid = found[0]
            page.goto(f"{base}/ui/sessions/{sid}")
            page.wait_for_function(RENDERED, timeout=30_000)
            run.wait(timeout=180)
            page.wait_for_function("() => ['completed', 'failed', 'cancelled']"
                                   ".includes(document.querySelector('#status')?.textContent)", timeout=30_000)
            status = page.text_content("#status")
            if status != "completed":
                self.notes.append(f"a live run ended {status} (rc {run.returncode})")
            page.wait_for_timeout(300)
            got_js = page.evaluate("""() => ({seen: window.__seen, frame: window.__frame, arrived: window.__arrived,
                                              first: window.__snapshotLast, open: window.__open})""")
            snap = page.request.get(f"{base}/ui/api/sessions/{sid}").json()
            if errors:
                raise SystemExit(f"live page errors: {errors[:3]}")
        finally:
            ctx.close()
            if run.poll() is None:
                run.kill()
                run.wait()
        seen, frame, arrived, first, opened = (got_js[k] for k in ("seen", "frame", "arrived", "first", "open"))
        if first is None or opened is None:
            raise SystemExit(f"the page's first snapshot ({first}) or its stream ({opened}) was not seen "
                             f"({len(seen)} rows, {len(arrived)} from the stream)")
        ts = {str(e["seq"]): ts_ms(e["ts"]) for e in snap["events"]}
        # Rows that came live (after the first snapshot), of events written once the stream was open.
        after = [s for s in seen if int(s) > first and s in ts]
        live = [s for s in after if ts[s] >= opened]
        if not live:
            raise SystemExit(f"no event was written after the page followed ({len(seen)} rows seen)")
        return ([seen[s] - ts[s] for s in live], [frame[s] - ts[s] for s in live if s in frame],
                [arrived[s] - ts[s] for s in live if s in arrived], len(ts) - len(live), len(ts))

    def table(self, browser_version):
        m = machine()
        out = [
            "# agentfile web view: whole-process figures",
            "",
            f"Machine: {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']}; Chromium {browser_version} "
            f"(headless), Playwright {pkg_version('playwright')}; {self.args.runs} fresh loads per page figure.",
            "",
            "| Figure | Target | n | p50 ms | p90 ms | p99 ms | max ms | Note |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for fig, target, n, p50, p90, p99, mx, note in self.rows:
            out.append(f"| {fig} | {target} | {n} | {p50:.0f} | {p90:.0f} | {p99:.0f} | {mx:.0f} | {note} |")
        if self.notes:
            out += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description="Whole-process figures of the agentfile web view")
    ap.add_argument("--url", required=True, help="`agentfile ui` over the benchmark workspace")
    ap.add_argument("--fill", required=True, help="fill.json that `cargo bench --bench ui` wrote")
    ap.add_argument("--agentfile", required=True)
    ap.add_argument("--fake-provider", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--turns", type=int, default=38,
                    help="tool-calling turns of the live run (a goal has at most 40 model turns, the answer included)")
    ap.add_argument("--live-runs", type=int, default=3)
    ap.add_argument("--breakdown", type=int, default=5, help="runs of the in-page breakdown of (b)")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds of quiet before each page load")
    ap.add_argument("--out")
    ap.add_argument("--skip", default="", help="comma-separated: list,session,live")
    args = ap.parse_args()
    args.agentfile = str(Path(args.agentfile).resolve())
    args.fake_provider = str(Path(args.fake_provider).resolve())
    skip = {s for s in args.skip.split(",") if s}
    fill = json.loads(Path(args.fill).read_text())

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--disable-dev-shm-usage"])
        b = Bench(args, browser)
        if "list" not in skip:
            b.list_page()
        if "session" not in skip:
            b.session_page(fill["big"], fill["big_events"])
            b.session_breakdown(fill["big"])
        if "live" not in skip:
            b.live()
        text = b.table(browser.version)
        browser.close()
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
