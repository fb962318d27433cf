"""A DeepAgents agent run by Keel (docs/adapters.md).

Ordinary DeepAgents code: the model is ChatOpenAI on the run's model endpoint (OPENAI_BASE_URL
and OPENAI_API_KEY, set by Keel), and the run's tools come from its tools endpoint
(KEEL_TOOLS_URL) through langchain-mcp-adapters. DeepAgents' own planning and virtual-file
tools stay inside the program; the workspace's tools go through Keel.
"""

import asyncio
import json
import os
import sys

from deepagents import create_deep_agent
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI


async def main():
    run = json.load(sys.stdin)
    client = MultiServerMCPClient(
        {"keel": {"url": os.environ["KEEL_TOOLS_URL"], "transport": "streamable_http"}}
    )
    agent = create_deep_agent(
        model=ChatOpenAI(model=os.environ["KEEL_MODEL"]),
        tools=await client.get_tools(),
        system_prompt=run["instructions"] or None,
    )
    print(json.dumps({"type": "progress", "message": "agent ready"}), flush=True)
    result = await agent.ainvoke({"messages": [{"role": "user", "content": run["input"]}]})
    print(json.dumps({"type": "final", "output": result["messages"][-1].content}))


asyncio.run(main())
