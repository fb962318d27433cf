"""An OpenAI Agents SDK agent run by Keel (docs/adapters.md).

Ordinary Agents SDK code: the SDK's OpenAI client reads OPENAI_BASE_URL and OPENAI_API_KEY,
which Keel sets to the run's model endpoint, and the SDK's MCP client connects to the run's
tools endpoint (KEEL_TOOLS_URL). Every model round and tool call goes through Keel.
"""

import asyncio
import json
import os
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI


async def main():
    run = json.load(sys.stdin)
    set_tracing_disabled(True)  # Keel records the run
    model = OpenAIChatCompletionsModel(model=os.environ["KEEL_MODEL"], openai_client=AsyncOpenAI())
    async with MCPServerStreamableHttp(params={"url": os.environ["KEEL_TOOLS_URL"]}) as keel:
        agent = Agent(
            name=run["agent"],
            instructions=run["instructions"],
            model=model,
            mcp_servers=[keel],
        )
        print(json.dumps({"type": "progress", "message": "agent ready"}), flush=True)
        result = await Runner.run(agent, run["input"])
    print(json.dumps({"type": "final", "output": result.final_output}))


asyncio.run(main())
