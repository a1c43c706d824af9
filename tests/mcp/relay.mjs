// The official TypeScript SDK's MCP client, with elicitation, calls an agent
// whose MCP server asks a question during a tool call (server.mjs's
// elicit_confirm): the question must reach this client as a form.
//
// Usage: node relay.mjs <base URL>
// Prints one JSON document: per case, the forms asked and the answer text.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [base] = process.argv.slice(2);
const out = {};
for (const [name, session, action] of [['session', 'relay-1', 'accept'], ['stateless', undefined, 'accept'], ['declined', 'relay-2', 'decline']]) {
  const forms = [];
  const client = new Client({ name: 'ts-relay', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    forms.push(req.params);
    return action === 'accept' ? { action, content: { confirm: true } } : { action };
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
  try {
    const r = await client.callTool({ name: 'assistant', arguments: { message: 'call elicit', ...(session ? { session } : {}) } },
      undefined, { timeout: 20000 });
    out[name] = { forms, text: r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n') };
  } catch (e) {
    out[name] = { forms, error: String(e) };
  }
  await client.close();
}
console.log(JSON.stringify(out));
