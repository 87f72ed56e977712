"""The Python `mcp` client speaking MCP 2026-07-28 to toolhost's MCP server.

Usage: client_modern.py (stdio TOOLHOST ROOT | http URL)
Prints one JSON line per step on stdout: discovered, tools, call, approved, tampered,
reload-now (the test then rebuilds a plugin), listened.
"""
import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError


def say(**fields):
    print(json.dumps(fields), flush=True)


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main():
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "once"})

    if sys.argv[1] == "stdio":
        exe, root = sys.argv[2], sys.argv[3]
        server = StdioServerParameters(command=exe, args=["--root", root, "serve-mcp"], env=dict(os.environ))
    else:
        server = sys.argv[2]
    async with Client(server, mode="auto", elicitation_callback=on_elicit, read_timeout_seconds=30) as client:
        info = client.server_info
        say(event="discovered", version=client.protocol_version, server=info.name if info else None)

        listed = await client.list_tools()
        say(
            event="tools",
            names=[t.name for t in listed.tools],
            ttl_ms=listed.ttl_ms,
            cache_scope=listed.cache_scope,
            result_type=getattr(listed, "result_type", None),
        )

        result = await client.call_tool("echo", {"text": "modern"})
        say(event="call", text=text_of(result), is_error=result.is_error)

        result = await client.call_tool("noop", {"city": "Paris"})
        say(event="approved", text=text_of(result), is_error=result.is_error, asked=asked)

        first = await client.session.call_tool("noop", {"city": "Rome"}, allow_input_required=True)
        state = first.request_state
        middle = len(state) // 2
        tampered = state[:middle] + ("B" if state[middle] == "A" else "A") + state[middle + 1 :]
        answers = {"approval": types.ElicitResult(action="accept", content={"decision": "once"})}
        try:
            await client.session.call_tool(
                "noop", {"city": "Rome"}, input_responses=answers, request_state=tampered, allow_input_required=True
            )
            say(event="tampered", refused=False)
        except MCPError as e:
            say(event="tampered", refused=True, code=e.code, message=e.message, asked=sorted(first.input_requests))

        async with client.listen(tools_list_changed=True) as subscription:
            say(event="reload-now")
            with anyio.fail_after(30):
                async for change in subscription:
                    if isinstance(change, ToolsListChanged):
                        break
            say(event="listened")


anyio.run(main)
