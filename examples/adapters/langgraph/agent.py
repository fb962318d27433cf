"""A LangGraph agent run by Keel (docs/adapters.md).

Ordinary LangGraph code: ChatOpenAI reads OPENAI_BASE_URL and OPENAI_API_KEY, which Keel sets
to the run's model endpoint, and langchain-mcp-adapters loads the run's tools from its tools
endpoint (KEEL_TOOLS_URL). Every model round and tool call goes through Keel.
"""

import asyncio
import json
import os
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent


async def main():
    run = json.load(sys.stdin)
    model = ChatOpenAI(model=os.environ["KEEL_MODEL"])
    client = MultiServerMCPClient(
        {"keel": {"url": os.environ["KEEL_TOOLS_URL"], "transport": "streamable_http"}}
    )
    tools = await client.get_tools()
    agent = create_react_agent(model, tools, prompt=run["instructions"] or None)
    earlier = [
        {"role": m["role"], "content": m["content"]}
        for m in run["history"]
        if m["role"] in ("user", "assistant") and m["content"]
    ]
    print(json.dumps({"type": "progress", "message": f"{len(tools)} tool(s) loaded"}), flush=True)
    result = await agent.ainvoke({"messages": earlier + [{"role": "user", "content": run["input"]}]})
    print(json.dumps({"type": "final", "output": result["messages"][-1].content}))


asyncio.run(main())
