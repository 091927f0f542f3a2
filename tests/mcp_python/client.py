"""An MCP session with `agentfile mcp`, driven by the official MCP Python SDK.

Run by tests/e2e/mcp_python.rs, which starts a fake model and a workspace first:

    python client.py --binary target/debug/agentfile --workspace DIR --key-var NAME --key VALUE

1. `ClientSession` over `stdio_client` (the `initialize` handshake): list the
   tools, call `run` on `hello.agent` with a progress callback.
2. `mcp.Client` in its default `auto` mode: it probes `server/discover`,
   which is answered, and speaks 2026-07-28 (stateless, `_meta` per request);
   then `validate` some source text. The same in `legacy` mode (the
   `initialize` handshake, as clients before 2026 connect).

With `--scenario workflow-md` instead: the workspace holds
`.workflows/ship-notes/WORKFLOW.md`; call its typed tool `run_ship-notes`
with progress, answer its approval step through elicitation, then resume
its suspend step with the `signal` tool and follow the run with `event`.

With `--scenario tasks`: the workspace holds `gated.agent` (a supervised
goal); run it as a task of the 2026-07-28 tasks extension (the `Tasks`
extension below: `tasks/get` until `input_required`, the approval answered
through `tasks/update`, then `completed`) and as a blocking call, over stdio
and over `agentfile mcp --http`.

With `--scenario cancel` / `kill`: the workspace holds `two.agent` (two
goals, the second answered slowly); a task of it is cancelled through
`tasks/cancel`, or its server SIGKILLed and started again (then a new client
follows the same task id with `tasks/get`), once the Rust test says the
second goal is being asked (a `WAIT <text>` line on stderr, answered `go` on
stdin) — over stdio and over `agentfile mcp --http`.

Prints one JSON object summarising what happened; the Rust test asserts on it.
"""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any, Literal

from pydantic import ConfigDict, Field

import mcp
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import stdio_client
from mcp_types import RequestParams, Result
from mcp_types._types import Request

TASKS = "io.modelcontextprotocol/tasks"


class TaskCreated(Result):
    """The tasks extension's answer to a `tools/call`: the task, not the result."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")


class TaskState(Result):
    model_config = ConfigDict(extra="allow")


class TaskRequest(Request[TaskParams, str]):
    """`tasks/get`, `tasks/update`, `tasks/cancel`: the SDK has no task client."""

    name_param = "taskId"


class Tasks(ClientExtension):
    """A small client of the tasks extension: claims `resultType: "task"`,
    polls `tasks/get`, answers each input request (an approval form) through
    `tasks/update`, and returns the finished task's `CallToolResult`. What it
    saw goes to `log`."""

    identifier = TASKS

    def __init__(self, log: dict, hold: Any = None) -> None:
        self.log = log
        # `hold(task_id, send)`, awaited once the task is created: it may
        # cancel the task, or kill the server and return True (then the
        # call returns at once, with no result).
        self.hold = hold

    def claims(self):
        return (ResultClaim(result_type="task", model=TaskCreated, resolve=self.resolve),)

    async def send(self, ctx: ClaimContext, method: str, **params: Any) -> dict:
        r = await ctx.session.send_request(TaskRequest(method=method, params=TaskParams(**params)), TaskState)
        return r.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def resolve(self, created: TaskCreated, ctx: ClaimContext) -> types.CallToolResult:
        self.log["created"] = {"task_id": created.task_id, "status": created.status}
        if self.hold is not None:

            async def send(method: str, **params: Any) -> dict:
                return await self.send(ctx, method, **params)

            if await self.hold(created.task_id, send):
                return types.CallToolResult(content=[])
        statuses: list[str] = []
        for _ in range(600):
            state = await self.send(ctx, "tasks/get", taskId=created.task_id)
            status = state.get("status")
            if not statuses or statuses[-1] != status:
                statuses.append(status)
            if status == "input_required":
                answers = {}
                for key, req in state.get("inputRequests", {}).items():
                    self.log.setdefault("input_requests", []).append(
                        {"key": key, "method": req.get("method"), "message": req.get("params", {}).get("message")}
                    )
                    answers[key] = {"action": "accept", "content": {"approve": True}}
                await self.send(ctx, "tasks/update", taskId=created.task_id, inputResponses=answers)
            elif status in ("completed", "failed", "cancelled"):
                self.log["statuses"] = statuses
                if state.get("result") is None:
                    # A cancelled (or failed) task has no result: the call ends in error.
                    text = state.get("statusMessage") or f"task {status}"
                    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
                return types.CallToolResult.model_validate(state["result"])
            await asyncio.sleep(0.1)
        raise TimeoutError(f"task {created.task_id} did not settle: {statuses}")


async def session_run(params: StdioServerParameters) -> dict:
    progress: list[dict] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append({"progress": value, "message": message})

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool(
                "run",
                {"path": "hello.agent", "inputs": {"topic": "tides"}},
                progress_callback=on_progress,
            )
            text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            return {
                "protocol_version": init.protocol_version,
                "server_name": init.server_info.name,
                "tools": sorted(t.name for t in tools.tools),
                "schemas_are_objects": all(t.input_schema.get("type") == "object" for t in tools.tools),
                "is_error": result.is_error,
                "structured": result.structured_content,
                "text": text,
                "progress": progress,
            }


async def auto_mode(params: StdioServerParameters, mode: str = "auto") -> dict:
    async with mcp.Client(params, mode=mode) as client:
        version = client.session.protocol_version
        result = await client.call_tool("validate", {"source": 'NAME x\nGOAL g "do it"\nRUN m USING g\n'})
        return {
            "protocol_version": version,
            "validate_ok": (result.structured_content or {}).get("ok"),
        }


async def workflow_md(params: StdioServerParameters) -> dict:
    progress: list[dict] = []
    elicitations: list[dict] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append({"progress": value, "message": message})

    async def on_elicit(context, p: types.ElicitRequestParams) -> types.ElicitResult:
        elicitations.append({"message": p.message})
        return types.ElicitResult(action="accept", content={"approve": True, "note": "ship it"})

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            tool = tools["run_ship-notes"]
            first = await session.call_tool(
                "run_ship-notes", {"version": "1.2.0"}, progress_callback=on_progress
            )
            sid = first.structured_content["session_id"]
            # A signal for an event the run does not wait for is refused.
            wrong = await session.call_tool(
                "signal", {"session_id": sid, "event": "release.cancelled"}
            )
            signalled = await session.call_tool(
                "signal",
                {"session_id": sid, "event": "release.tagged", "payload": {"channel": "#releases"}},
            )
            events: list[dict] = []
            after = 0
            while True:
                page = await session.call_tool(
                    "event", {"session_id": sid, "after_seq": after, "wait_ms": 20000}
                )
                body = page.structured_content
                events.extend(body["events"])
                after = body["last_seq"]
                if body["done"]:
                    break
            return {
                "tool": {
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                    "output_schema": tool.output_schema,
                },
                "first": {
                    "is_error": first.is_error,
                    "structured": first.structured_content,
                    "text": "\n".join(c.text for c in first.content if getattr(c, "type", "") == "text"),
                },
                "wrong": {
                    "is_error": wrong.is_error,
                    "text": "\n".join(c.text for c in wrong.content if getattr(c, "type", "") == "text"),
                },
                "signalled": {"is_error": signalled.is_error, "structured": signalled.structured_content},
                "elicitations": elicitations,
                "progress": progress,
                "events": [e["type"] for e in events],
                "last": events[-1] if events else None,
            }


async def workflow_yaml(params: StdioServerParameters) -> dict:
    elicitations: list[dict] = []

    async def on_elicit(context, p: types.ElicitRequestParams) -> types.ElicitResult:
        elicitations.append({"message": p.message})
        return types.ElicitResult(action="accept", content={"approve": True, "note": "ok"})

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=on_elicit) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            tool = tools["run_release-notes"]
            result = await session.call_tool("run_release-notes", {"CHANGES": "dark mode"})
            prompts = [p.name for p in (await session.list_prompts()).prompts]
            prompt = await session.get_prompt("create", {"task": "digest meeting notes"})
            created = await session.call_tool(
                "create", {"description": "Summarise meeting notes into a digest", "name": "notes-digest"}
            )
            run_dir = (created.structured_content or {}).get("artifacts", "")
            promoted = await session.call_tool("promote", {"run": run_dir})
            return {
                "create_prompt": prompt.messages[0].content.text,
                "created": {"is_error": created.is_error, "structured": created.structured_content},
                "promoted": {"is_error": promoted.is_error, "structured": promoted.structured_content},
                "tool": {"description": tool.description, "input_schema": tool.input_schema},
                "result": {"is_error": result.is_error, "structured": result.structured_content},
                "elicitations": elicitations,
                "prompts": prompts,
            }


async def agent_md(params: StdioServerParameters) -> dict:
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = (await session.list_prompts()).prompts
            prompts = {
                p.name: {
                    "description": p.description,
                    "arguments": [
                        {"name": a.name, "required": bool(a.required)} for a in (p.arguments or [])
                    ],
                }
                for p in listed
            }
            got = await session.get_prompt(
                "policy.buildPolicyIndex", {"root-path": "policies/", "index-path": "INDEX.md"}
            )
            try:
                await session.get_prompt("policy.buildPolicyIndex", {"root-path": "policies/"})
                missing = None
            except Exception as e:  # the SDK raises McpError for an error response
                missing = str(e)
            return {
                "prompts": prompts,
                "text": got.messages[0].content.text,
                "missing": missing,
            }


async def task_run(server: Any) -> dict:
    """A gated run as a task (2026-07-28, tasks extension declared), then the
    same run as a blocking call (its approval through MRTR elicitation)."""
    log: dict = {}
    elicitations: list[str] = []

    async def on_elicit(context, p: types.ElicitRequestParams) -> types.ElicitResult:
        elicitations.append(p.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async with mcp.Client(server, mode="2026-07-28", extensions=[Tasks(log)]) as client:
        tasked = await client.call_tool("run", {"path": "gated.agent"})
    async with mcp.Client(server, mode="2026-07-28", elicitation_callback=on_elicit) as client:
        blocking = await client.call_tool("run", {"path": "gated.agent"})
    return {
        **log,
        "task": {"is_error": tasked.is_error, "structured": tasked.structured_content},
        "blocking": {"is_error": blocking.is_error, "structured": blocking.structured_content},
        "blocking_elicitations": elicitations,
    }


async def tasks(params: StdioServerParameters) -> dict:
    stdio = await task_run(params)
    # The same over Streamable HTTP: `agentfile mcp --http` on a free port.
    server = subprocess.Popen(
        [params.command, *params.args, "--http", "127.0.0.1:0"],
        env={**__import__("os").environ, **(params.env or {})},
        cwd=params.cwd,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        for line in server.stderr:
            if line.startswith("agentfile mcp: listening on "):
                url = line.split("listening on ", 1)[1].strip()
                break
        if url is None:
            raise RuntimeError("agentfile mcp --http did not say where it listens")
        http = await task_run(url)
    finally:
        server.terminate()
        server.wait(10)
    return {"stdio": stdio, "http": http}


def wait_for_model(marker: str) -> None:
    """Ask the Rust test to say when the fake model has been asked a request
    holding `marker` (the run is then mid-way), and wait for its answer."""
    sys.stderr.write(f"WAIT {marker}\n")
    sys.stderr.flush()
    if sys.stdin.readline().strip() != "go":
        raise RuntimeError(f"no go for {marker!r}")


async def poll(send: Any, task_id: str) -> dict:
    """`tasks/get` until the task ends; its statuses and last state."""
    statuses: list[str] = []
    for _ in range(600):
        state = await send("tasks/get", taskId=task_id)
        if not statuses or statuses[-1] != state.get("status"):
            statuses.append(state.get("status"))
        if state.get("status") in ("completed", "failed", "cancelled"):
            return {"statuses": statuses, "result": state.get("result")}
        await asyncio.sleep(0.1)
    raise TimeoutError(f"task {task_id} did not settle: {statuses}")


def client_send(client: Any) -> Any:
    """A task request sender on a connected `mcp.Client`."""

    async def send(method: str, **params: Any) -> dict:
        r = await client.session.send_request(TaskRequest(method=method, params=TaskParams(**params)), TaskState)
        return r.model_dump(by_alias=True, mode="json", exclude_none=True)

    return send


async def cancel_run(server: Any, who: str) -> dict:
    """`two.agent` as a task, cancelled through `tasks/cancel` while its
    second goal is being asked."""
    log: dict = {}

    async def hold(task_id: str, send: Any) -> bool:
        await asyncio.to_thread(wait_for_model, f"second part for {who}")
        log["cancel"] = await send("tasks/cancel", taskId=task_id)
        return False

    async with mcp.Client(server, mode="2026-07-28", extensions=[Tasks(log, hold)]) as client:
        result = await client.call_tool("run", {"path": "two.agent", "inputs": {"who": who}})
    return {**log, "is_error": result.is_error}


async def kill_run(server: Any, who: str, kill: Any, restart: Any) -> dict:
    """`two.agent` as a task; the server SIGKILLed while the second goal is
    being asked; a new client of a server started again follows the same
    task id with `tasks/get` to its end."""
    log: dict = {}

    async def hold(task_id: str, send: Any) -> bool:
        await asyncio.to_thread(wait_for_model, f"second part for {who}")
        kill()
        return True

    try:
        async with mcp.Client(server, mode="2026-07-28", extensions=[Tasks(log, hold)]) as client:
            await client.call_tool("run", {"path": "two.agent", "inputs": {"who": who}})
    except BaseException as e:  # the transport of a killed server may complain on close
        log["closed_with"] = type(e).__name__
    task_id = log["created"]["task_id"]
    server = restart()
    async with mcp.Client(server, mode="2026-07-28", extensions=[Tasks({})]) as client:
        send = client_send(client)
        first = await send("tasks/get", taskId=task_id)
        end = await poll(send, task_id)
    return {**log, "after_restart": first.get("status"), **end}


class HttpServer:
    """`agentfile mcp --http` on a free loopback port."""

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params
        self.proc: subprocess.Popen | None = None

    def start(self) -> str:
        p = self.params
        self.proc = subprocess.Popen(
            [p.command, *p.args, "--http", "127.0.0.1:0"],
            env={**os.environ, **(p.env or {})},
            cwd=p.cwd,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in self.proc.stderr:
            if line.startswith("agentfile mcp: listening on "):
                return line.split("listening on ", 1)[1].strip()
        raise RuntimeError("agentfile mcp --http did not say where it listens")

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def pid_wrapped(params: StdioServerParameters, pidfile: str) -> StdioServerParameters:
    """The same server through `sh`, which writes its pid and `exec`s it (the
    SDK's stdio transport spawns it; the test kills it by that pid)."""
    return StdioServerParameters(
        command="sh",
        args=["-c", 'echo $$ > "$0"; exec "$@"', pidfile, params.command, *params.args],
        env=params.env,
        cwd=params.cwd,
    )


async def cancels(params: StdioServerParameters) -> dict:
    stdio = await cancel_run(params, "stdio")
    http = HttpServer(params)
    try:
        out = await cancel_run(http.start(), "http")
    finally:
        http.stop()
    return {"stdio": stdio, "http": out}


async def kills(params: StdioServerParameters) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        pidfile = os.path.join(tmp, "server.pid")

        def kill_stdio() -> None:
            with open(pidfile) as f:
                os.kill(int(f.read().strip()), signal.SIGKILL)

        stdio = await kill_run(pid_wrapped(params, pidfile), "stdio", kill_stdio, lambda: params)
    http = HttpServer(params)
    try:
        out = await kill_run(http.start(), "http", http.kill, http.start)
    finally:
        http.stop()
    return {"stdio": stdio, "http": out}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--key-var", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--scenario", choices=["dsl", "workflow-md", "workflow-yaml", "agent-md", "tasks", "cancel", "kill"], default="dsl")
    a = ap.parse_args()
    params = StdioServerParameters(
        command=a.binary,
        args=["mcp", "--workspace", a.workspace, "--heartbeat-ms", "300"],
        env={a.key_var: a.key},
        cwd=a.workspace,
    )
    if a.scenario in ("cancel", "kill"):
        summary = {
            "sdk_version": getattr(mcp, "__version__", None) or _version(),
            a.scenario: await (cancels if a.scenario == "cancel" else kills)(params),
        }
    elif a.scenario == "tasks":
        summary = {
            "sdk_version": getattr(mcp, "__version__", None) or _version(),
            "tasks": await tasks(params),
        }
    elif a.scenario == "agent-md":
        summary = {
            "sdk_version": getattr(mcp, "__version__", None) or _version(),
            "agent_md": await agent_md(params),
        }
    elif a.scenario == "workflow-yaml":
        summary = {
            "sdk_version": getattr(mcp, "__version__", None) or _version(),
            "workflow_yaml": await workflow_yaml(params),
        }
    elif a.scenario == "workflow-md":
        summary = {
            "sdk_version": getattr(mcp, "__version__", None) or _version(),
            "workflow_md": await workflow_md(params),
        }
    else:
        summary = {
            "sdk_version": getattr(mcp, "__version__", None) or _version(),
            "session": await session_run(params),
            "auto": await auto_mode(params),
            "legacy": await auto_mode(params, "legacy"),
        }
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")


def _version() -> str:
    from importlib.metadata import version

    return version("mcp")


if __name__ == "__main__":
    asyncio.run(main())
