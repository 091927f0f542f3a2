#!/usr/bin/env python3
"""Small deterministic stand-ins for the tools AIP-15's EXAMPLES.md names.

Bound in agent.toml as `command = ["python3", "tools/fake_tools.py", "<id>"]`:
the step's inputs arrive as JSON on stdin, the output is JSON on stdout.
Side effects the tests check are appended to `tool-log.jsonl`.
"""
import json
import os
import sys
import time

tool = sys.argv[1]
args = json.load(sys.stdin)


def log(**entry):
    with open("tool-log.jsonl", "a") as f:
        f.write(json.dumps({"tool": tool, **entry}) + "\n")


def out(value):
    log(args=args)
    json.dump(value, sys.stdout)
    sys.exit(0)


if tool == "pricing-snapshot":
    out({"tiers": [{"name": "free", "usd": 0}, {"name": "pro", "usd": 20}]})
if tool == "text-summarise":
    out({"markdown": "%d tiers" % len(args["content"])})
if tool == "append-to-notes":
    out({"path": "notes/" + args["filename"]})
if tool == "clearbit-enrich":
    out({"companySize": 1200 if args["email"].startswith("big") else 12})
if tool == "salesforce-assign-account-exec":
    out({"ownerId": "ae-7"})
if tool == "send-email-brevo":
    out({"messageId": "m-" + args["to"]})
if tool in ("stripe-customer-lookup", "hubspot-contact-lookup", "linear-issues-by-customer"):
    out({"source": tool.split("-")[0], "email": args["email"]})
if tool == "merge-objects":
    out({"summary": args})
if tool == "contract-draft":
    out({"fileId": "draft-1"})
if tool == "contract-revise":
    out({"fileId": "draft-2"})
if tool == "notify-founder":
    out({"notified": True})
if tool == "send-contract-to-customer":
    out({"sentAt": "2026-11-25T10:00:00Z"})
if tool == "provision-workspace":
    out({"workspaceId": "ws-" + args["customerId"]})
if tool == "inventory-reserve":
    out({"reservationId": "res-" + args["orderId"]})
if tool == "inventory-release":
    out({"released": args["reservationId"]})
if tool == "stripe-charge":
    out({"chargeId": "ch-" + args["orderId"]})
if tool == "stripe-refund":
    out({"refunded": args["chargeId"]})
if tool == "ship-package":
    if "fail" in args["orderId"]:
        log(args=args, failed=True)
        print("carrier refused the parcel", file=sys.stderr)
        sys.exit(3)
    out({"trackingId": "trk-1"})
if tool == "copy-generate":
    prev = args.get("previousAttempt") or "draft-0"
    out({"copy": "draft-%d" % (int(prev.split("-")[1]) + 1)})
if tool == "brand-score":
    n = int(args["copy"].split("-")[1])
    out({"score": round(0.3 * n, 2), "feedback": args["copy"]})
if tool == "marketplace-search":
    out({"ads": ["a", "b", "c"]})
if tool == "listings-shortlist":
    items = [{"url": "https://x.test/" + ad} for ad in args["ads"]]
    out({"items": items, "count": len(items)})
if tool == "marketplace-detail":
    # The first item finishes last: the map must still keep input order.
    time.sleep({"a": 0.6, "b": 0.3}.get(args["ref"][-1], 0))
    out({"ref": args["ref"], "rooms": len(args["ref"])})
if tool == "listings-enrich":
    out({"items": [dict(i, detail=d) for i, d in zip(args["items"], args["details"])]})
if tool == "report-render":
    out({"path": "reports/listings.md"})
if tool == "messaging-send":
    out({"id": "msg-1", "to": args["to"]})
if tool == "write-report":
    root = args["_workflowFsRoot"]
    source = ""
    if os.path.exists(os.path.join(root, "source")):
        source = open(os.path.join(root, "source")).read()
    body = "# %s\n\n%s\n" % (args["title"], args.get("content") or source)
    with open(os.path.join(root, "report"), "w") as f:
        f.write(body)
    out({"success": True, "reportPath": os.path.join(root, "report"), "timestamp": "2026-11-25T10:00:00Z"})

print("unknown tool " + tool, file=sys.stderr)
sys.exit(2)
