// The official TypeScript SDK's MCP client calls an agent whose model is
// slower than the client's request timeout, with a progress handler and
// resetTimeoutOnProgress, as MCP hosts do for long tool calls.
//
// Usage: node keepalive.mjs <base URL> <timeout ms>
// Prints one JSON document: the answer text, or the error, and the progress
// notifications it got.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [base, timeout] = process.argv.slice(2);
const client = new Client({ name: 'ts-keepalive', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
const progress = [];
const out = { progress };
try {
  const r = await client.callTool({ name: 'assistant', arguments: { message: 'slow answer please' } }, undefined, {
    timeout: Number(timeout),
    resetTimeoutOnProgress: true,
    onprogress: (p) => progress.push(p.message ?? ''),
  });
  out.text = r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
} catch (e) {
  out.error = String(e);
}
await client.close();
console.log(JSON.stringify(out));
