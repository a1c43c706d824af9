// The official TypeScript SDK's MCP client signing a person in to
// Stackbone's /mcp with OAuth's authorization code grant and PKCE (what
// Claude Code, Cursor and the Inspector do), against a real OpenID
// provider: on the 401 it reads the challenge, the protected resource
// metadata (RFC 9728) and the authorization server's metadata, sends the
// person to the authorization endpoint with an S256 code challenge and the
// /mcp resource (RFC 8707); this script plays the person's browser on the
// provider's own login and consent pages (any password); the SDK then
// exchanges the code with its verifier (finishAuth) and calls again.
//
// Usage: node oauth-code.mjs <base URL> <client id> <login> <session>
// The client is a public client registered with the provider, redirect URI
// http://127.0.0.1:9/callback (never visited: the code is read from the
// provider's redirect). Prints one JSON document; the Go test asserts on it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [base, clientId, login, session] = process.argv.slice(2);
const redirectUrl = 'http://127.0.0.1:9/callback';
const out = { seen: [] };

// browse follows the provider's redirects by hand, with its cookies, up to
// the redirect to redirectUrl, and fills the login and consent forms.
const cookies = new Map();
async function visit(url, init = {}) {
  const headers = { ...(init.headers || {}) };
  if (cookies.size) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  const res = await fetch(url, { ...init, headers, redirect: 'manual' });
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const i = pair.indexOf('=');
    cookies.set(pair.slice(0, i), pair.slice(i + 1));
  }
  return res;
}
async function browse(start) {
  let url = String(start);
  let forms = [{ prompt: 'login', login, password: 'any password' }, { prompt: 'consent' }];
  for (let hops = 0; hops < 20; hops++) {
    if (url.startsWith(redirectUrl)) return new URL(url);
    out.authorize = out.authorize || url;
    const res = await visit(url);
    if (res.status >= 300 && res.status < 400) {
      url = new URL(res.headers.get('location'), url).href;
      continue;
    }
    const html = await res.text();
    const m = /<form[^>]*action="([^"]+)"/.exec(html);
    if (!m || !forms.length) throw new Error(`no way on from ${url}: ${res.status} ${html.slice(0, 300)}`);
    const post = await visit(new URL(m[1], url).href, {
      method: 'POST', body: new URLSearchParams(forms.shift()),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    url = new URL(post.headers.get('location'), url).href;
  }
  throw new Error('too many redirects');
}

let code;
const state = {};
const authProvider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadata() {
    return { redirect_uris: [redirectUrl], grant_types: ['authorization_code'], response_types: ['code'],
      token_endpoint_auth_method: 'none', client_name: 'ts-oauth-code', scope: 'openid mcp' };
  },
  clientInformation() { return { client_id: clientId }; },
  tokens() { return state.tokens; },
  saveTokens(t) { state.tokens = t; },
  saveCodeVerifier(v) { state.verifier = v; },
  codeVerifier() { return state.verifier; },
  async redirectToAuthorization(url) {
    const back = await browse(url);
    if (back.searchParams.get('error')) throw new Error(`the provider refused: ${back.searchParams.get('error')}: ${back.searchParams.get('error_description')}`);
    code = back.searchParams.get('code');
  },
};
const fetchLogged = async (url, init) => {
  const res = await fetch(url, init);
  out.seen.push({ url: String(url), status: res.status, challenge: res.headers.get('www-authenticate') || undefined });
  return res;
};
try {
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider, fetch: fetchLogged });
  const client = new Client({ name: 'ts-oauth-code', version: '1.0.0' });
  try {
    await client.connect(transport);
    throw new Error('connected without signing in');
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  if (!code) throw new Error('no code from the provider');
  await transport.finishAuth(code);
  const again = new Client({ name: 'ts-oauth-code', version: '1.0.0' });
  await again.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider, fetch: fetchLogged }));
  const { tools } = await again.listTools();
  out.names = tools.map((t) => t.name).sort();
  const r = await again.callTool({ name: 'other', arguments: { message: 'hello with a code', session } });
  out.text = r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  out.accessToken = state.tokens && state.tokens.access_token;
  out.pkce = Boolean(state.verifier);
  await again.close();
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
}
process.stdout.write(JSON.stringify(out));
