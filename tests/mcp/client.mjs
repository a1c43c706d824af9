// The official TypeScript SDK's MCP client against Stackbone's /mcp: list the
// agents, run a text turn, and a turn that pauses for approval, once with
// elicitation (the form is approved) and once without (the call waits; the
// decision is made over the HTTP API; the next call reports the outcome).
//
// Usage: node client.mjs <base URL> <API key>
// Prints one JSON document with what each case saw; the Go test asserts on it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [base, key] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${key}` };

async function connect(elicit) {
  const client = new Client({ name: 'ts-test', version: '1.0.0' },
    { capabilities: elicit ? { elicitation: { form: {} } } : {} });
  if (elicit) client.setRequestHandler(ElicitRequestSchema, elicit);
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers } });
  await client.connect(transport);
  return client;
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const out = {};
let failed = false;

async function run(name, fn) {
  try {
    out[name] = await fn();
  } catch (e) {
    failed = true;
    out[name] = { error: String(e && e.stack ? e.stack : e) };
  }
}

await run('list', async () => {
  const c = await connect();
  const { tools } = await c.listTools();
  await c.close();
  return { names: tools.map((t) => t.name).sort(), assistant: tools.find((t) => t.name === 'assistant') };
});

await run('text', async () => {
  const c = await connect();
  const r = await c.callTool({ name: 'other', arguments: { message: 'hello from ts' } });
  await c.close();
  return { text: text(r), isError: !!r.isError };
});

await run('elicitAccepted', async () => {
  const forms = [];
  const c = await connect(async (req) => {
    forms.push(req.params);
    return { action: 'accept', content: { decision: 'approve' } };
  });
  const r = await c.callTool({ name: 'assistant', arguments: { message: 'refund my order', session: 'ts-accept' } });
  await c.close();
  return { text: text(r), isError: !!r.isError, forms };
});

await run('noElicitation', async () => {
  const c = await connect();
  const first = await c.callTool({ name: 'assistant', arguments: { message: 'refund my order', session: 'ts-wait' } });
  const id = first.structuredContent?.decisions?.[0]?.id;
  const resp = await fetch(`${base}/v1/hitl/${id}/approve`, { method: 'POST', headers });
  const next = await c.callTool({ name: 'assistant', arguments: { message: 'thanks', session: 'ts-wait' } });
  await c.close();
  return { first: text(first), id, approveStatus: resp.status, next: text(next), nextContent: next.content.length };
});

process.stdout.write(JSON.stringify(out));
process.exit(failed ? 1 : 0);
