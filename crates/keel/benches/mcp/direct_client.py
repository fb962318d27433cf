"""The baseline of the `mcp_calls` benchmark: this script starts `echo_server.py` over stdio,
warms up, then makes N sequential `tools/call echo` calls and prints one JSON line with each
call's latency in nanoseconds (`time.perf_counter_ns`) and the CPU time this client process
spent on the timed calls (`time.process_time_ns`; the server is another process).

    python direct_client.py SERVER_SCRIPT --client sdk|raw --calls N --warmup W

`sdk`: the official client, `ClientSession` over `stdio_client` (what a Python program would
use; its own per-call cost is in the figure). `raw`: newline-delimited JSON-RPC written and
read by hand on the server's pipes, with blocking I/O: about the least a client can add, so
its latency is close to the server's own round trip."""

import argparse
import asyncio
import json
import subprocess
import sys
import time

ARGUMENTS = {"text": "hello from the benchmark"}


async def sdk(server: str, calls: int, warmup: int) -> tuple[list[int], int, int]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[server])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for _ in range(warmup):
                await session.call_tool("echo", ARGUMENTS)
            latencies = []
            cpu = time.process_time_ns()
            started = time.perf_counter_ns()
            for _ in range(calls):
                before = time.perf_counter_ns()
                result = await session.call_tool("echo", ARGUMENTS)
                latencies.append(time.perf_counter_ns() - before)
                if result.is_error or result.content[0].text != ARGUMENTS["text"]:
                    raise SystemExit(f"unexpected result: {result}")
            wall = time.perf_counter_ns() - started
            return latencies, wall, time.process_time_ns() - cpu


def raw(server: str, calls: int, warmup: int) -> tuple[list[int], int, int]:
    process = subprocess.Popen(
        [sys.executable, server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
    )
    requests, responses = process.stdin, process.stdout
    next_id = 0

    def request(method: str, params: dict) -> dict:
        nonlocal next_id
        next_id += 1
        line = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
        requests.write(json.dumps(line).encode() + b"\n")
        while True:
            answer = json.loads(responses.readline())
            if answer.get("id") == next_id:
                return answer

    try:
        request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench-raw", "version": "1"},
            },
        )
        requests.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        request("tools/list", {})
        call = {"name": "echo", "arguments": ARGUMENTS}
        for _ in range(warmup):
            request("tools/call", call)
        latencies = []
        cpu = time.process_time_ns()
        started = time.perf_counter_ns()
        for _ in range(calls):
            before = time.perf_counter_ns()
            answer = request("tools/call", call)
            latencies.append(time.perf_counter_ns() - before)
            if answer["result"]["content"][0]["text"] != ARGUMENTS["text"]:
                raise SystemExit(f"unexpected answer: {answer}")
        wall = time.perf_counter_ns() - started
        return latencies, wall, time.process_time_ns() - cpu
    finally:
        requests.close()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("server")
    parser.add_argument("--client", choices=["sdk", "raw"], default="sdk")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    if args.client == "sdk":
        latencies, wall, cpu = asyncio.run(sdk(args.server, args.calls, args.warmup))
    else:
        latencies, wall, cpu = raw(args.server, args.calls, args.warmup)
    report = {"client": args.client, "wall_ns": wall, "cpu_ns": cpu, "latencies_ns": latencies}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
