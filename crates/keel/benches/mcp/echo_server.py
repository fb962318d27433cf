"""The minimal MCP server of the `mcp_calls` benchmark: one read-only tool, `echo(text)`,
over stdio, on the official Python SDK (`mcp` 2.x, where `FastMCP` is called `MCPServer`).
Keel and the direct Python client (`direct_client.py`) start this same script."""

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
def echo(text: str) -> str:
    """Returns its argument."""
    return text


if __name__ == "__main__":
    server.run("stdio")
