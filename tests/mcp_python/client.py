"""An MCP session with `agentfile mcp`, driven by the official MCP Python SDK.

Run by tests/mcp_python.rs, which starts a fake model and a workspace first:

    python client.py --binary target/debug/agentfile --workspace DIR --key-var NAME --key VALUE

1. `ClientSession` over `stdio_client` (the `initialize` handshake): list the
   tools, call `run` on `hello.agent` with a progress callback.
2. `mcp.Client` in its default `auto` mode: it probes `server/discover` first
   and must fall back to `initialize`; then `validate` some source text.

Prints one JSON object summarising what happened; the Rust test asserts on it.
"""

import argparse
import asyncio
import json
import sys

import mcp
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


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


async def auto_mode(params: StdioServerParameters) -> dict:
    async with mcp.Client(params) as client:
        version = client.session.protocol_version
        result = await client.call_tool("validate", {"source": 'NAME x\nGOAL g "do it"\nRUN m USING g\n'})
        return {
            "protocol_version": version,
            "validate_ok": (result.structured_content or {}).get("ok"),
        }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--key-var", required=True)
    ap.add_argument("--key", required=True)
    a = ap.parse_args()
    params = StdioServerParameters(
        command=a.binary,
        args=["mcp", "--workspace", a.workspace, "--heartbeat-ms", "300"],
        env={a.key_var: a.key},
        cwd=a.workspace,
    )
    summary = {
        "sdk_version": getattr(mcp, "__version__", None) or _version(),
        "session": await session_run(params),
        "auto": await auto_mode(params),
    }
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")


def _version() -> str:
    from importlib.metadata import version

    return version("mcp")


if __name__ == "__main__":
    asyncio.run(main())
