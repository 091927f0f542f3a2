"""Figures of `agentfile a2a` on loopback (scripts/bench-a2a.sh starts it):

- message → first streamed update: a `SendStreamingMessage` POSTed, until
  the first SSE `data:` line (the task) and until the first status update
  after it (the run started);
- `GetTask` latency of a finished task over one kept-alive connection.

Raw HTTP with httpx, so the figures are the server's and the loopback's,
not the SDK's parsing. Prints a Markdown table.

    python bench.py --url http://127.0.0.1:PORT/a2a [--runs 30] [--gets 500]
"""

import argparse
import json
import statistics
import time
import uuid

import httpx


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def row(name, ms):
    return f"| {name} | {len(ms)} | {pct(ms, 50):.2f} | {pct(ms, 95):.2f} | {max(ms):.2f} |"


def message(skill, inputs):
    return {
        "jsonrpc": "2.0",
        "id": str(uuid.uuid4()),
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"data": inputs}],
                "metadata": {"skill": skill},
            }
        },
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--skill", default="hello")
    p.add_argument("--inputs", default='{"topic": "tides"}')
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--gets", type=int, default=500)
    a = p.parse_args()
    inputs = json.loads(a.inputs)
    headers = {"A2A-Version": "1.0", "Accept": "text/event-stream"}
    first, started, task_id = [], [], None
    with httpx.Client(timeout=60) as http:
        for _ in range(a.runs):
            body = message(a.skill, inputs)
            t0 = time.perf_counter()
            with http.stream("POST", a.url, json=body, headers=headers) as r:
                seen = 0
                for line in r.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    now = (time.perf_counter() - t0) * 1000
                    seen += 1
                    result = json.loads(line[5:])["result"]
                    if seen == 1:
                        first.append(now)
                        task_id = result["task"]["id"]
                    elif seen == 2:
                        started.append(now)
            # the stream ends with the task
        gets = []
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        for _ in range(20):  # warm the connection and the caches
            http.post(a.url, json=body, headers={"A2A-Version": "1.0"})
        for _ in range(a.gets):
            t0 = time.perf_counter()
            r = http.post(a.url, json=body, headers={"A2A-Version": "1.0"})
            gets.append((time.perf_counter() - t0) * 1000)
            assert r.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED", r.text
    print("| figure (ms) | n | p50 | p95 | max |")
    print("|---|---|---|---|---|")
    print(row("message → first streamed update (the task)", first))
    print(row("message → first status update (run started)", started))
    print(row("GetTask of a finished task", gets))
    print(f"\nmean GetTask {statistics.mean(gets):.2f} ms")


if __name__ == "__main__":
    main()
