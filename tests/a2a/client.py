"""An A2A client of `agentfile a2a`, driven by the official A2A Python SDK
(`a2a-sdk` 1.x): its card resolver, its `ClientFactory` and the JSON-RPC
transport it picks from the card.

Run by tests/e2e/a2a.rs, which starts the server, a fake model and a
workspace first:

    python client.py --url http://127.0.0.1:PORT/a2a [--token T] SCENARIO [ARGS]

Scenarios (each prints one JSON object; the Rust test asserts on it):

- `card`: resolve the agent card from the base URL, as a client does.
- `run SKILL INPUTS`: send a message (not streaming) and wait for the task.
- `stream SKILL INPUTS`: send a streaming message; every update until the end.
- `approve SKILL INPUTS`: send; the task asks for approval (input-required);
  answer it with a message on the same task holding `{approve: true}`.
- `start SKILL INPUTS`: send with `returnImmediately`; the task id at once.
- `cancel ID`, `get ID`, `wait ID`: cancel a task; get it; get it until it
  ends.
- `refused SKILL INPUTS`: a send that must fail (no token, a wrong one).

A failing call prints `{"error": "...", "type": "..."}` instead of exiting
non-zero, so the test can assert on refusals.
"""

import argparse
import asyncio
import importlib.metadata
import json
import sys
import time
import uuid

import httpx
from google.protobuf import json_format

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    TaskState,
)

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
}


def message(skill, inputs, task_id=None):
    body = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": inputs}],
        "metadata": {"skill": skill},
    }
    if task_id:
        body["taskId"] = task_id
    return json_format.ParseDict(body, Message())


def as_dict(m):
    return json_format.MessageToDict(m)


def task_summary(task):
    d = as_dict(task)
    return {
        "id": task.id,
        "context_id": task.context_id,
        "state": TaskState.Name(task.status.state),
        "status_text": [p.get("text") for p in d.get("status", {}).get("message", {}).get("parts", []) if "text" in p],
        "status_data": [p.get("data") for p in d.get("status", {}).get("message", {}).get("parts", []) if "data" in p],
        "artifacts": d.get("artifacts", []),
        "metadata": d.get("metadata", {}),
    }


class Session:
    def __init__(self, url, token):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(headers=headers, timeout=120)
        self.base = url.rsplit("/a2a", 1)[0]
        self.url = url

    async def client(self, streaming=False, polling=False):
        card = await A2ACardResolver(self.http, self.url).get_agent_card()
        config = ClientConfig(streaming=streaming, polling=polling, httpx_client=self.http)
        return ClientFactory(config).create(card), card

    async def send(self, skill, inputs, task_id=None, polling=False):
        client, _ = await self.client(polling=polling)
        last = None
        async for item in client.send_message(
            SendMessageRequest(message=message(skill, inputs, task_id))
        ):
            last = item
        return last.task


async def scenario(args, s):
    kind = args.scenario
    if kind == "card":
        resolved = await A2ACardResolver(s.http, s.base).get_agent_card()
        under = await A2ACardResolver(s.http, s.url).get_agent_card()
        d = as_dict(resolved)
        return {
            "name": resolved.name,
            "skills": [as_dict(k) for k in resolved.skills],
            "streaming": resolved.capabilities.streaming,
            "interfaces": d.get("supportedInterfaces", []),
            "security_schemes": d.get("securitySchemes", {}),
            "extensions": d.get("capabilities", {}).get("extensions", []),
            "same_under_a2a": as_dict(under) == d,
        }
    if kind in ("run", "refused"):
        started = time.monotonic()
        task = await s.send(args.skill, json.loads(args.inputs))
        out = task_summary(task)
        out["seconds"] = time.monotonic() - started
        return out
    if kind == "start":
        task = await s.send(args.skill, json.loads(args.inputs), polling=True)
        return task_summary(task)
    if kind == "stream":
        client, _ = await s.client(streaming=True)
        updates = []
        async for item in client.send_message(
            SendMessageRequest(message=message(args.skill, json.loads(args.inputs)))
        ):
            which = item.WhichOneof("payload")
            d = as_dict(item)
            if which == "task":
                updates.append({"kind": "task", "state": TaskState.Name(item.task.status.state), "id": item.task.id})
            elif which == "status_update":
                text = [p.get("text") for p in d["statusUpdate"]["status"].get("message", {}).get("parts", []) if "text" in p]
                updates.append({"kind": "status", "state": TaskState.Name(item.status_update.status.state), "text": text})
            elif which == "artifact_update":
                updates.append({"kind": "artifact", "name": item.artifact_update.artifact.name, "artifact": d["artifactUpdate"]["artifact"]})
            else:
                updates.append({"kind": which})
        return {"updates": updates}
    if kind == "approve":
        first = await s.send(args.skill, json.loads(args.inputs))
        asked = task_summary(first)
        answer = json.loads(args.answer) if args.answer else {"approve": True, "note": "fine by the Python client"}
        second = await s.send(args.skill, answer, task_id=first.id)
        return {"asked": asked, "answered": task_summary(second)}
    client, _ = await s.client()
    if kind == "get":
        return task_summary(await client.get_task(GetTaskRequest(id=args.skill)))
    if kind == "cancel":
        return task_summary(await client.cancel_task(CancelTaskRequest(id=args.skill)))
    if kind == "wait":
        deadline = time.monotonic() + 90
        seen = []
        while True:
            task = await client.get_task(GetTaskRequest(id=args.skill))
            state = TaskState.Name(task.status.state)
            if not seen or seen[-1] != state:
                seen.append(state)
            if task.status.state in TERMINAL or time.monotonic() > deadline:
                out = task_summary(task)
                out["seen"] = seen
                return out
            await asyncio.sleep(0.2)
    raise SystemExit(f"unknown scenario {kind}")


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token")
    p.add_argument("scenario")
    p.add_argument("skill", nargs="?")
    p.add_argument("inputs", nargs="?", default="{}")
    p.add_argument("--answer")
    args = p.parse_args()
    s = Session(args.url, args.token)
    try:
        out = await scenario(args, s)
    except Exception as e:  # the test asserts on refusals too
        out = {"error": str(e), "type": type(e).__name__}
    out["sdk_version"] = importlib.metadata.version("a2a-sdk")
    print(json.dumps(out))
    await s.http.aclose()


if __name__ == "__main__":
    asyncio.run(main())
