// An OpenAI Agents SDK (JavaScript) agent run by Keel (docs/adapters.md).
//
// Ordinary Agents SDK code: the OpenAI client reads OPENAI_BASE_URL and OPENAI_API_KEY, which
// Keel sets to the run's model endpoint, and the SDK's MCP client connects to the run's tools
// endpoint (KEEL_TOOLS_URL). Every model round and tool call goes through Keel.
import { readFileSync } from 'node:fs';

import {
  Agent,
  MCPServerStreamableHttp,
  OpenAIChatCompletionsModel,
  run,
  setTracingDisabled,
} from '@openai/agents';
import OpenAI from 'openai';

const keelRun = JSON.parse(readFileSync(0, 'utf8'));
setTracingDisabled(true); // Keel records the run
const keel = new MCPServerStreamableHttp({ url: process.env.KEEL_TOOLS_URL, name: 'keel' });
await keel.connect();
try {
  const agent = new Agent({
    name: keelRun.agent,
    instructions: keelRun.instructions,
    model: new OpenAIChatCompletionsModel(new OpenAI(), process.env.KEEL_MODEL),
    mcpServers: [keel],
  });
  console.log(JSON.stringify({ type: 'progress', message: 'agent ready' }));
  const result = await run(agent, keelRun.input);
  console.log(JSON.stringify({ type: 'final', output: result.finalOutput }));
} finally {
  await keel.close();
}
