# Test tool: logs its JSON arguments to published.jsonl and answers the channel.
import json, sys
args = json.load(sys.stdin)
with open("published.jsonl", "a") as f:
    f.write(json.dumps(args) + "\n")
print(json.dumps({"channel": args["channel"], "published": True}))
