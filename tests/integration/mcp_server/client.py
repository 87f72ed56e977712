"""A Python `mcp` client for toolhost's MCP server tests.

Usage: client.py (stdio TOOLHOST ROOT | http URL [token=TOKEN]) [--elicit] STEP...
Steps: list, progress, call|NAME|JSON, cancel, reload.
Each step prints one JSON line on stdout; `reload` prints {"event": "reload-now"} and waits
(up to 20 s) for notifications/tools/list_changed while the test changes the tools.
"""
import json
import os
import sys

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def say(**fields):
    print(json.dumps(fields), flush=True)


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def run_steps(session, changed, steps):
    await session.initialize()
    for step in steps:
        if step == "list":
            tools = await session.list_tools()
            dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools]
            say(event="tools", tools=dumped)
        elif step == "progress":
            seen = []

            async def on_progress(progress, total, message):
                seen.append({"progress": progress, "message": message})

            result = await session.call_tool(
                "echo:progress", {"text": "half way"}, progress_callback=on_progress
            )
            say(event="progress", text=text_of(result), is_error=result.is_error, seen=seen)
        elif step.startswith("call|"):
            _, name, args = step.split("|", 2)
            result = await session.call_tool(name, json.loads(args))
            say(event="call", name=name, text=text_of(result), is_error=result.is_error)
        elif step == "cancel":
            started = anyio.current_time()
            with anyio.move_on_after(1.0):
                await session.call_tool("governed:spin", {"city": "Paris"})
            # The server is still there and answers at once.
            result = await session.call_tool("echo", {"after": "cancel"})
            say(event="cancelled", then=text_of(result), seconds=anyio.current_time() - started)
        elif step == "reload":
            say(event="reload-now")
            with anyio.fail_after(20):
                await changed.wait()
            say(event="list-changed")
        else:
            raise SystemExit(f"unknown step {step}")


async def main():
    mode = sys.argv[1]
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, Exception):
            return
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            changed.set()

    async def on_elicit(context, params):
        say(event="elicited", message=params.message)
        return types.ElicitResult(action="accept", content={"decision": "once"})

    callbacks = {"message_handler": on_message, "read_timeout_seconds": 30}
    if "--elicit" in sys.argv:
        callbacks["elicitation_callback"] = on_elicit
    if mode == "stdio":
        exe, root, steps = sys.argv[2], sys.argv[3], sys.argv[4:]
        params = StdioServerParameters(command=exe, args=["--root", root, "serve-mcp"], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                await run_steps(session, changed, [s for s in steps if s != "--elicit"])
    else:
        url, steps = sys.argv[2], sys.argv[3:]
        headers = {}
        if steps and steps[0].startswith("token="):
            headers["Authorization"] = "Bearer " + steps[0][len("token="):]
            steps = steps[1:]
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            async with streamable_http_client(url, http_client=client) as (read, write, *_):
                async with ClientSession(read, write, **callbacks) as session:
                    await run_steps(session, changed, [s for s in steps if s != "--elicit"])


anyio.run(main)
