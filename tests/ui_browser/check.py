#!/usr/bin/env python3
"""Browser check of the agentfile web view: drives the system Chromium through Playwright.

    check.py --url http://127.0.0.1:PORT --chromium /usr/lib/chromium/chromium \
             --scenario scenario.json --out DIR [--token-url URL --token TOKEN] [--skip live,approve,token]

Steps (in order): list, session, map, live, approve, hostile, screenshots, token. On the first
failure: `FAIL <step>: <detail>` on stderr, DIR/fail-<step>.png, exit 1. On success: one JSON line
on stdout (versions, timings), exit 0. Any console error or uncaught page error (a CSP or Trusted
Types violation shows up there) fails the step it happened in.

The scenario (written by the Rust test harness, or by mock_server.py --scenario-out) names the
sessions to look at; see the keys used below.
"""
import argparse, json, os, subprocess, sys, threading, time
from importlib.metadata import version as pkg_version
from pathlib import Path

from playwright.sync_api import sync_playwright

STEPS = ["list", "session", "map", "live", "approve", "fork", "hostile", "screenshots", "token"]
RENDERED = "() => performance.getEntriesByName('rendered').length > 0"
RENDERED_MS = "() => performance.getEntriesByName('rendered')[0].startTime"


class Fail(Exception):
    pass


def check(cond, detail):
    if not cond:
        raise Fail(detail)


class Watch:
    """Collects console errors and page errors of every page of a context."""

    def __init__(self, ignore_http_errors=False):
        self.errors = []
        self.ignore_http_errors = ignore_http_errors

    def attach(self, page):
        def on_console(msg):
            if msg.type != "error":
                return
            # A deliberate 401/403 (token step) is logged by Chromium as a failed resource load.
            if self.ignore_http_errors and "Failed to load resource" in msg.text:
                return
            self.errors.append(f"console: {msg.text}")
        page.on("console", on_console)
        page.on("pageerror", lambda err: self.errors.append(f"pageerror: {err}"))
        return page

    def assert_clean(self):
        if self.errors:
            raise Fail("; ".join(self.errors[:5]))


class Check:
    def __init__(self, args, browser):
        self.args = args
        self.browser = browser
        self.base = args.url.rstrip("/")
        self.sc = json.loads(Path(args.scenario).read_text())
        self.out = Path(args.out)
        self.page = None  # the page to screenshot on failure
        self.summary = {}

    # --- helpers (page predicates are always functions: a bare expression is evaluated with eval,
    # which the page's CSP rightly refuses) -------------------------------------------------------------------------------

    def new_page(self, watch, **ctx):
        context = self.browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light", **ctx)
        self.page = watch.attach(context.new_page())
        return self.page

    def open(self, page, path):
        resp = page.goto(self.base + path)
        check(resp is not None and resp.ok, f"GET {path} -> {resp.status if resp else 'no response'}")
        try:
            page.wait_for_function(RENDERED, timeout=20_000)
        except Exception:
            raise Fail(f"{path} never marked 'rendered'; #app says {page.text_content('#app')!r:.300}")
        return resp

    def rows(self, page):
        return page.eval_on_selector_all("tr.session", "rs => rs.map(r => [r.dataset.sessionId, r.dataset.status, r.querySelector('td.workflow').textContent])")

    def wait_list(self, page, url_has, predicate_js, what):
        """Waits until the URL query has `url_has`, the table is not busy and `predicate_js` holds."""
        try:
            page.wait_for_function(
                f"""() => location.search.includes({json.dumps(url_has)})
                       && document.querySelector('table#sessions')?.getAttribute('aria-busy') === 'false'
                       && ({predicate_js})""", timeout=10_000)
        except Exception as e:
            raise Fail(f"{what}: rows now {self.rows(page)[:8]}, url {page.url} ({e.__class__.__name__})")

    def load_all_rows(self, page):
        for _ in range(100):
            more = page.locator("button#more")
            if not more.is_visible():
                return
            n = page.locator("tr.session").count()
            more.click()
            page.wait_for_function(f"() => document.querySelectorAll('tr.session').length > {n}", timeout=10_000)
        raise Fail("button#more never went away")

    def api(self, page, path):
        resp = page.request.get(self.base + path)
        check(resp.ok, f"GET {path} -> {resp.status}")
        return resp.json()

    def lanes_with_bars(self, page):
        return page.eval_on_selector_all("#timeline .lane", "ls => ls.filter(l => l.querySelector('.bar')).length")

    def wait_events(self, page, n, timeout=20_000):
        try:
            page.wait_for_function(f"() => document.querySelectorAll('#events div.event').length === {n}", timeout=timeout)
        except Exception:
            raise Fail(f"expected {n} div.event rows, have {page.locator('#events div.event').count()}")

    # --- steps ---------------------------------------------------------------------------------

    def step_list(self):
        watch = Watch()
        page = self.new_page(watch)
        self.open(page, "/ui/")
        self.load_all_rows(page)
        rows = self.rows(page)
        check(len(rows) == self.sc["total"], f"{len(rows)} rows, expected {self.sc['total']}")
        ids = {r[0] for r in rows}
        for key, sid in self.sc["sessions"].items():
            check(sid in ids, f"session {key} ({sid}) is not in the list")
        self.summary["list_rendered_ms"] = round(page.evaluate(RENDERED_MS), 1)

        failed = self.sc["sessions"]["failed"]
        page.select_option("#status-filter", "failed")
        self.wait_list(page, "status=failed",
                       f"[...document.querySelectorAll('tr.session')].every(r => r.dataset.status === 'failed')"
                       f" && !!document.querySelector('tr.session[data-session-id=\"{failed}\"]')", "status filter")
        page.select_option("#status-filter", "")
        self.wait_list(page, "", "!location.search.includes('status=') && [...document.querySelectorAll('tr.session')].some(r => r.dataset.status !== 'failed')", "status reset")

        wf, map_id = self.sc["workflows"]["map"], self.sc["sessions"]["map"]
        page.wait_for_selector(f"#workflow-filter option[value={json.dumps(wf)}]", state="attached", timeout=10_000)
        page.select_option("#workflow-filter", wf)
        self.wait_list(page, "workflow=",
                       f"[...document.querySelectorAll('tr.session td.workflow')].every(td => td.textContent === {json.dumps(wf)})"
                       f" && !!document.querySelector('tr.session[data-session-id=\"{map_id}\"]')", "workflow filter")
        page.select_option("#workflow-filter", "")
        self.wait_list(page, "", "!location.search.includes('workflow=')", "workflow reset")

        prefix = map_id[: max(8, len(map_id) * 3 // 4)]
        page.fill("#search", prefix)
        self.wait_list(page, "q=", f"!!document.querySelector('tr.session[data-session-id=\"{map_id}\"]')", "search")
        check(page.locator("tr.session").count() <= len(rows), "search did not narrow the list")
        watch.assert_clean()
        page.context.close()

    def step_session(self):
        watch = Watch()
        page = self.new_page(watch)
        sid = self.sc["sessions"]["parallel"]
        self.open(page, f"/ui/sessions/{sid}")
        check(page.locator("svg#graph").count() == 1, "no svg#graph")
        check(page.locator("svg#graph g.node").count() >= 1, "no g.node in the graph")
        check(page.locator("svg#graph text").count() >= 1, "no <text> in the graph")
        lanes = self.lanes_with_bars(page)
        self.summary["parallel_lanes"] = page.eval_on_selector_all("#timeline .lane", "ls => ls.map(l => l.dataset.key)")
        check(lanes >= 3, f"{lanes} timeline lanes with bars, expected >= 3")
        last_seq = self.api(page, f"/ui/api/sessions/{sid}")["last_seq"]
        self.wait_events(page, last_seq)
        row = page.locator("#events div.event").nth(min(2, last_seq - 1))
        typ = row.get_attribute("data-type")
        row.click()
        pre = row.locator("pre.payload")
        pre.wait_for(timeout=10_000)
        page.wait_for_function("el => !el.textContent.startsWith('Loading')", arg=pre.element_handle(), timeout=10_000)
        check(typ in pre.text_content(), f"pre.payload does not mention the type {typ!r}")
        watch.assert_clean()
        page.context.close()

    def step_map(self):
        watch = Watch()
        page = self.new_page(watch)
        self.open(page, f"/ui/sessions/{self.sc['sessions']['map']}")
        lanes = self.lanes_with_bars(page)
        check(lanes >= 6, f"{lanes} timeline lanes with bars, expected >= 6")
        watch.assert_clean()
        page.context.close()

    def step_live(self):
        live = self.sc["live"]
        env = {**os.environ, **live.get("env", {})}
        log = open(self.out / "live-stderr.log", "wb")
        proc = subprocess.Popen(live["argv"], cwd=live.get("cwd"), env=env, stdout=subprocess.PIPE, stderr=log)
        found, lines = [], []
        got = threading.Event()

        def drain():  # keep reading so the run never blocks on a full pipe
            for raw in proc.stdout:
                lines.append(raw)
                if not got.is_set():
                    try:
                        obj = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(obj, dict) and isinstance(obj.get("session_id"), str):
                        found.append(obj["session_id"])
                        got.set()
        threading.Thread(target=drain, daemon=True).start()
        try:
            check(got.wait(30), f"no session_id on stdout within 30 s (rc={proc.poll()}, {len(lines)} lines)")
            sid = found[0]
            watch = Watch()
            page = self.new_page(watch)
            self.open(page, f"/ui/sessions/{sid}")
            page.evaluate("() => { window.__marker = 1; }")
            n = page.locator("#events div.event").count()
            try:
                page.wait_for_function(f"() => document.querySelectorAll('#events div.event').length > {n}", timeout=30_000)
            except Exception:
                raise Fail(f"event rows stayed at {n} for 30 s (process rc={proc.poll()})")
            check(page.evaluate("() => window.__marker") == 1, "the page reloaded while following")
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                raise Fail("the run did not end within 120 s")
            try:
                page.wait_for_function("() => document.querySelector('#status')?.textContent === 'completed'", timeout=30_000)
            except Exception:
                raise Fail(f"#status is {page.text_content('#status')!r}, not completed (rc={proc.returncode})")
            check(page.evaluate("() => window.__marker") == 1, "the page reloaded while following")
            self.summary["live_events"] = page.locator("#events div.event").count()
            watch.assert_clean()
            page.context.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()

    def step_approve(self):
        watch = Watch()
        page = self.new_page(watch)
        sid = self.sc["sessions"]["approval"]
        self.open(page, f"/ui/sessions/{sid}")
        page.fill("textarea#note", "ok from the browser")
        page.click("button#approve")
        try:
            page.wait_for_function("() => document.querySelector('#status')?.textContent === 'completed'", timeout=60_000)
        except Exception:
            raise Fail(f"#status is {page.text_content('#status')!r} after 60 s; #message {page.text_content('#message')!r}")
        status = self.api(page, f"/ui/api/sessions/{sid}")["session"]["status"]
        check(status == "completed", f"the API says {status!r}")
        watch.assert_clean()
        page.context.close()

    def step_fork(self):
        """"Fork from here" on a node of a settled session opens the new session, which completes."""
        watch = Watch()
        page = self.new_page(watch)
        sid = self.sc["sessions"]["parallel"]
        self.open(page, f"/ui/sessions/{sid}")
        box = page.locator("details.fork")
        box.wait_for(state="visible", timeout=10_000)
        options = page.eval_on_selector_all("#fork-at option", "os => os.map(o => o.value)")
        check(len(options) >= 1, "no node to fork from in #fork-at")
        # A click on the node in the graph picks it.
        at = options[-1]
        page.locator(f'svg#graph g.node[data-path="{at}"]').first.click()
        check(page.eval_on_selector("#fork-at", "s => s.value") == at, f"clicking node {at!r} did not pick it")
        page.click("button#fork")
        try:
            page.wait_for_url(lambda url: "/ui/sessions/" in url and sid not in url, timeout=30_000)
        except Exception:
            raise Fail(f"no new session opened; #message {page.text_content('#message')!r}")
        new = page.url.rsplit("/", 1)[-1]
        try:
            page.wait_for_function("() => document.querySelector('#status')?.textContent === 'completed'", timeout=60_000)
        except Exception:
            raise Fail(f"the fork's #status is {page.text_content('#status')!r}; #message {page.text_content('#message')!r}")
        snap = self.api(page, f"/ui/api/sessions/{new}")
        check(snap["session"]["status"] == "completed", f"the API says {snap['session']['status']!r}")
        self.summary["forked"] = {"from": sid, "at": at, "session": new}
        watch.assert_clean()
        page.context.close()

    def step_hostile(self):
        watch = Watch()
        context = self.browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
        page = self.page = watch.attach(context.new_page())
        dialogs, requests = [], []

        def on_dialog(d):
            dialogs.append(f"{d.type}: {d.message}")
            d.dismiss()
        page.on("dialog", on_dialog)
        page.on("request", lambda r: requests.append(r.url))
        sid = self.sc["sessions"]["hostile"]
        resp = self.open(page, f"/ui/sessions/{sid}")
        csp = resp.headers.get("content-security-policy", "")
        check("trusted-types" in csp, f"CSP header lacks trusted-types: {csp!r}")
        last_seq = self.api(page, f"/ui/api/sessions/{sid}")["last_seq"]
        self.wait_events(page, last_seq)
        texts = self.sc["hostile_texts"]
        rows = page.locator("#events div.event")
        expanded = 0
        for i in range(rows.count()):
            row = rows.nth(i)
            line = row.locator(".summary").text_content() or ""
            if last_seq < 50 or any(t in line for t in texts):
                row.locator(".summary").click()
                row.locator("pre.payload").wait_for(timeout=10_000)
                expanded += 1
        page.wait_for_function("() => [...document.querySelectorAll('#events pre.payload')].every(p => !p.textContent.startsWith('Loading'))", timeout=10_000)
        page.wait_for_timeout(300)  # give a planted handler a moment to fire
        check(not dialogs, f"dialogs fired: {dialogs}")
        outside = [u for u in requests if not u.startswith(self.base + "/ui/")]
        check(not outside, f"requests outside /ui/: {outside[:5]}")
        check(page.locator("#events img").count() == 0, "an <img> appeared in #events")
        check(page.locator("img").count() == 0, "an <img> appeared on the page")
        check(page.locator('a[href^="javascript:"]').count() == 0, "a javascript: link appeared")
        shown = page.eval_on_selector("#events", "e => e.textContent")
        for t in texts:
            check(t in shown, f"hostile text {t!r} is not shown literally in #events")
        self.summary["hostile_rows_expanded"] = expanded
        watch.assert_clean()
        context.close()

    def step_screenshots(self):
        watch = Watch()
        page = self.new_page(watch)
        self.open(page, "/ui/")
        page.screenshot(path=str(self.out / "list.png"), full_page=False)
        self.open(page, f"/ui/sessions/{self.sc['sessions']['parallel']}")
        self.summary["session_rendered_ms"] = round(page.evaluate(RENDERED_MS), 1)
        page.screenshot(path=str(self.out / "session.png"), full_page=False)
        big = self.sc.get("big")
        if big:  # optional: a 10,000+ event session to time the first render
            self.open(page, f"/ui/sessions/{big}")
            self.summary["big_rendered_ms"] = round(page.evaluate(RENDERED_MS), 1)
            n = self.api(page, f"/ui/api/sessions/{big}")["last_seq"]
            self.wait_events(page, n, 60_000)
        watch.assert_clean()
        page.context.close()

    def step_token(self):
        base = self.args.token_url.rstrip("/")
        watch = Watch(ignore_http_errors=True)
        page = self.new_page(watch)
        page.goto(base + "/ui/")
        page.wait_for_url("**/ui/login*", timeout=15_000)
        page.fill("input[name=token]", self.args.token + "-wrong")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        check("/ui/login" in page.url, f"a wrong token left the login page: {page.url}")
        page.locator("#login-failed").wait_for(state="visible", timeout=10_000)
        check("That token is not accepted." in page.text_content("#login-failed"), "no failure text")
        page.fill("input[name=token]", self.args.token)
        page.click("button[type=submit]")
        page.wait_for_url(lambda u: "/ui/login" not in u, timeout=15_000)
        page.wait_for_function(RENDERED, timeout=20_000)
        check(page.locator("tr.session").count() > 0 or page.locator("#empty").is_visible(), "the list did not show after login")
        sid = next(iter(self.sc["sessions"].values()))
        resp = page.request.post(f"{base}/ui/api/sessions/{sid}/cancel", data="{}", headers={"content-type": "application/json"})
        check(resp.status == 403, f"POST cancel without CSRF -> {resp.status}, expected 403")
        watch.assert_clean()
        page.context.close()


def main():
    ap = argparse.ArgumentParser(description="Browser check of the agentfile web view")
    ap.add_argument("--url", required=True)
    ap.add_argument("--chromium", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--token-url")
    ap.add_argument("--token")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: " + ",".join(STEPS))
    args = ap.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    unknown = skip - set(STEPS)
    if unknown:
        ap.error(f"unknown steps to skip: {sorted(unknown)}")
    if not args.token_url:
        skip.add("token")
    Path(args.out).mkdir(parents=True, exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--disable-dev-shm-usage"])
        c = Check(args, browser)
        timings = {}
        for name in STEPS:
            if name in skip:
                continue
            c.page = None
            t = time.monotonic()
            try:
                getattr(c, f"step_{name}")()
            except Exception as e:  # Fail, Playwright timeouts, anything: report the step
                detail = str(e) if isinstance(e, Fail) else f"{e.__class__.__name__}: {e}"
                print(f"FAIL {name}: {detail.strip().splitlines()[0] if detail.strip() else detail}", file=sys.stderr)
                if len(detail.splitlines()) > 1:
                    print(detail, file=sys.stderr)
                if c.page is not None and not c.page.is_closed():
                    try:
                        c.page.screenshot(path=str(Path(args.out) / f"fail-{name}.png"))
                    except Exception as shot:
                        print(f"(no screenshot: {shot})", file=sys.stderr)
                browser.close()
                sys.exit(1)
            timings[name] = round(time.monotonic() - t, 2)
        summary = {"ok": True, "playwright": pkg_version("playwright"), "browser": browser.version,
                   "steps": timings, "skipped": sorted(skip), **c.summary}
        browser.close()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
