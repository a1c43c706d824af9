// A real OpenID provider (oidc-provider, the certified Node implementation)
// for the Go tests of end users' tokens. It serves two issuers on two ports
// that sign with the same keys (so a token of the second has a valid
// signature and only its issuer is wrong), issues JWT access tokens with the
// client_credentials grant and a resource indicator (RFC 8707: the audience
// is the resource asked for), and adds each client's end-user claims
// (tenant, role, email, name) to its tokens.
//
// Usage: node provider.mjs CLIENTS_JSON [USERS_JSON]
//   CLIENTS_JSON: [{"client_id": "alice", "client_secret": "…", "tenant": "acme",
//                   "role": "caller", "email": "alice@example.com", "alg": "ES256"}, …]
//   USERS_JSON: {"alice": {"tenant": "acme", "role": "approver", "email": …}, …}:
//               the people who sign in on the built-in login page
//               (devInteractions: any password), their claims in ID tokens
//               (tenant and role with the openid scope, email, name) and in the
//               access tokens of the authorization code grant.
// It prints one line of JSON, {"issuer": …, "otherIssuer": …}, once both
// listen. POST {issuer}/_test/rotate?alg=ES256 adds a new key of that
// algorithm in front of the others (the provider then signs with it) and
// answers {"kid": …}. POST {issuer}/_test/apps with a JSON list of
// {"client_id", "client_secret" (none: a public client), "redirect_uris"}
// adds authorization code clients (PKCE) and answers {}. The process ends
// when its standard input closes.
import * as crypto from 'node:crypto';
import * as http from 'node:http';

import Provider from 'oidc-provider';

const clients = JSON.parse(process.argv[2] || '[]');
const users = JSON.parse(process.argv[3] || '{}');
let apps = [];

let seq = 0;
function newKey(alg) {
  let pair;
  switch (alg) {
    case 'RS256':
      pair = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
      break;
    case 'ES256':
      pair = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
      break;
    case 'EdDSA':
      pair = crypto.generateKeyPairSync('ed25519');
      break;
    default:
      throw new Error(`unknown alg ${alg}`);
  }
  seq += 1;
  return { ...pair.privateKey.export({ format: 'jwk' }), kid: `${alg.toLowerCase()}-${seq}`, use: 'sig', alg };
}

let keys = [newKey('RS256'), newKey('ES256'), newKey('EdDSA')];

function configuration() {
  return {
    clients: [...clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      tenant: c.tenant,
      role: c.role,
      email: c.email,
      name: c.name,
      token_alg: c.alg || 'ES256',
      token_ttl: c.ttl || 300,
    })), ...apps.map((a) => ({
      client_id: a.client_id,
      ...(a.client_secret ? { client_secret: a.client_secret } : {}),
      grant_types: ['authorization_code'],
      redirect_uris: a.redirect_uris,
      response_types: ['code'],
      token_endpoint_auth_method: a.client_secret ? 'client_secret_basic' : 'none',
      token_alg: 'ES256',
      token_ttl: 300,
    }))],
    findAccount: (ctx, id) => ({
      accountId: id,
      claims: () => ({ sub: id, ...(users[id] || {}) }),
    }),
    claims: { openid: ['sub', 'tenant', 'role'], email: ['email'], profile: ['name'] },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    extraClientMetadata: { properties: ['tenant', 'role', 'email', 'name', 'token_alg', 'token_ttl'] },
    jwks: { keys },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => ({
          scope: 'mcp',
          audience: resource,
          accessTokenTTL: client.token_ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: client.token_alg } },
        }),
      },
    },
    extraTokenClaims: (ctx, token) => {
      if (token.accountId) {
        const u = users[token.accountId] || {};
        const out = {};
        for (const k of ['tenant', 'role', 'email', 'name']) if (u[k] !== undefined) out[k] = u[k];
        return out;
      }
      const c = clients.find((x) => x.client_id === token.clientId);
      if (!c) return undefined;
      const out = {};
      for (const k of ['tenant', 'role', 'email', 'name']) if (c[k] !== undefined) out[k] = c[k];
      return out;
    },
  };
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

const main = http.createServer();
const other = http.createServer();
const mainPort = await listen(main);
const otherPort = await listen(other);
const issuer = `http://127.0.0.1:${mainPort}`;
const otherIssuer = `http://127.0.0.1:${otherPort}`;

let mainProvider = new Provider(issuer, configuration());
const otherProvider = new Provider(otherIssuer, configuration());
for (const p of [mainProvider, otherProvider]) p.on('server_error', (ctx, err) => console.error(err));

main.on('request', (req, res) => {
  const url = new URL(req.url, issuer);
  if (req.method === 'POST' && url.pathname === '/_test/rotate') {
    const key = newKey(url.searchParams.get('alg') || 'ES256');
    keys = [key, ...keys];
    mainProvider = new Provider(issuer, configuration());
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ kid: key.kid }));
    return;
  }
  if (req.method === 'POST' && url.pathname === '/_test/apps') {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      apps = [...apps, ...JSON.parse(body)];
      mainProvider = new Provider(issuer, configuration());
      mainProvider.on('server_error', (ctx, err) => console.error(err));
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
    return;
  }
  mainProvider.callback()(req, res);
});
other.on('request', (req, res) => otherProvider.callback()(req, res));

process.stdout.write(`${JSON.stringify({ issuer, otherIssuer })}\n`);
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
