// The official TypeScript SDK's MCP client signing in to Stackbone's /mcp
// with OAuth: no key, a client_credentials provider (the SDK's own). On the
// 401 it reads the WWW-Authenticate challenge, fetches the protected
// resource metadata (RFC 9728), discovers the authorization server it
// names, gets a token for the /mcp resource (RFC 8707) and calls again.
//
// Usage: node oauth.mjs <base URL> <client id> <client secret> <session> <issuer>
// Prints one JSON document with what it saw; the Go test asserts on it.
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [base, clientId, clientSecret, session, expectedIssuer] = process.argv.slice(2);
const seen = [];
const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope: 'mcp', expectedIssuer });
const fetchLogged = async (url, init) => {
  const res = await fetch(url, init);
  seen.push({ url: String(url), status: res.status, challenge: res.headers.get('www-authenticate') || undefined });
  return res;
};
const out = { seen };
try {
  const client = new Client({ name: 'ts-oauth', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider, fetch: fetchLogged });
  await client.connect(transport);
  const { tools } = await client.listTools();
  out.names = tools.map((t) => t.name).sort();
  const r = await client.callTool({ name: 'other', arguments: { message: 'hello over oauth', session } });
  out.text = r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  out.token = authProvider.tokens() ? 'yes' : 'no';
  await client.close();
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
}
process.stdout.write(JSON.stringify(out));
