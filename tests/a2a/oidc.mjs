// Drives a Stackbone server's A2A 1.0 endpoint with the official
// @a2a-js/sdk client and end users' access tokens from a real OpenID
// provider (oidc-provider; the Go test, TestA2AOfficialClientOIDC in
// internal/server/a2a_client_test.go, starts both and passes the tokens).
// The token goes in through the SDK's AuthenticationHandler
// (createAuthenticatingFetchWithRetry). Cases:
//   - card: the agent card the SDK resolves names the provider in an
//     openIdConnectSecurityScheme (its discovery document is the issuer's)
//     beside the bearer scheme, and a security requirement for each;
//   - send: alice's token sends a message;
//   - perUser: bob (same tenant) gets TaskNotFoundError for alice's task
//     and does not list it; alice does;
//   - refused: each bad token (wrong audience, wrong issuer, tampered, or
//     expired in PHASE expired) gets HTTP 401 with a Bearer challenge and
//     the binding's own A2A error (a JSON-RPC error object, or a REST
//     error status), and the token is not taken.
// Prints one JSON document {"results":[{name, ok, error}]} and exits 1 when
// a case failed.
//
//   node oidc.mjs BASE_URL BINDING PHASE TOKENS_JSON
//
// BINDING is JSONRPC or HTTP+JSON; PHASE is live (every case, with the
// tokens alice, bob and the bad ones in TOKENS_JSON) or expired (refused,
// for the bad token "expired"). TOKENS_JSON also names the issuer.
import {
  ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, DefaultAgentCardResolver,
  createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [base, binding, phase, tokensArg] = process.argv.slice(2);
if (!base || !binding || !phase || !tokensArg) {
  console.error('usage: node oidc.mjs BASE_URL JSONRPC|HTTP+JSON live|expired TOKENS_JSON');
  process.exit(2);
}
const { issuer, tokens, bad } = JSON.parse(tokensArg);

function expect(cond, what) {
  if (!cond) throw new Error(`expected ${what}`);
}

// client is the SDK's client for the assistant agent with token, and the
// last HTTP response its fetch saw (status and challenge).
async function client(token) {
  const seen = { status: 0, challenge: '' };
  const fetchImpl = createAuthenticatingFetchWithRetry(async (url, init) => {
    const r = await fetch(url, init);
    seen.status = r.status;
    seen.challenge = r.headers.get('www-authenticate') ?? '';
    return r;
  }, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    // The card is public: resolved without a token, as a client that has
    // not signed in yet reads it.
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetch }),
    preferredTransports: [binding],
  }));
  return { c: await factory.createFromUrl(`${base}/a2a/assistant/`), seen };
}

let n = 0;
const msg = (t) => ({
  messageId: `oidc-${binding}-${phase}-m${++n}`, role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: t } }],
  contextId: '', taskId: '', extensions: [], referenceTaskIds: [],
});
const shared = {};

// refusedWith checks that token is refused with 401 in the binding's A2A
// error format.
async function refusedWith(what, token) {
  const { c, seen } = await client(token);
  try {
    await c.sendMessage({ tenant: '', message: msg(`hello with ${what}`) });
  } catch (err) {
    expect(seen.status === 401, `${what}: HTTP 401, got ${seen.status} (${err.name}: ${err.message})`);
    expect(seen.challenge.startsWith('Bearer ') && seen.challenge.includes('invalid_token'),
      `${what}: a Bearer invalid_token challenge, got ${JSON.stringify(seen.challenge)}`);
    if (binding === 'JSONRPC') {
      // The SDK parsed a JSON-RPC error object (not a bare HTTP error).
      expect(err.transport === 'jsonrpc' && err.envelopeCode === -32000 && err.errorResponse?.jsonrpc === '2.0',
        `${what}: a JSON-RPC error object, got ${err.name} ${err.envelopeCode} ${err.message}`);
    } else {
      expect(err.transport === 'rest' && err.statusCode === 401 && !err.message.startsWith('HTTP error'),
        `${what}: a REST error status, got ${err.name} ${err.statusCode} ${err.message}`);
    }
    return;
  }
  throw new Error(`${what}: the token was taken`);
}

const live = {
  async card() {
    const card = await new DefaultAgentCardResolver({ fetchImpl: fetch }).resolve(`${base}/a2a/assistant/`);
    const oidc = card.securitySchemes?.oidc?.scheme;
    expect(oidc?.$case === 'openIdConnectSecurityScheme', `an openIdConnectSecurityScheme, got ${JSON.stringify(card.securitySchemes)}`);
    expect(oidc.value.openIdConnectUrl === `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`,
      `the issuer's discovery URL, got ${oidc.value.openIdConnectUrl}`);
    expect(card.securitySchemes?.bearer?.scheme?.$case === 'httpAuthSecurityScheme', 'the bearer scheme beside it');
    const named = card.securityRequirements.map((r) => Object.keys(r.schemes).join('+')).sort();
    expect(JSON.stringify(named) === '["bearer","oidc"]', `one requirement each (either will do), got ${JSON.stringify(named)}`);
    const disc = await (await fetch(oidc.value.openIdConnectUrl)).json();
    expect(disc.issuer === issuer && typeof disc.jwks_uri === 'string', `the provider's discovery document, got ${JSON.stringify(disc)}`);
    return {};
  },
  async send() {
    const { c } = await client(tokens.alice);
    expect(c.transport.protocolName === binding, `transport ${c.transport.protocolName}, want ${binding}`);
    const task = await c.sendMessage({ tenant: '', message: msg('hello from alice') });
    expect(TaskState[task.status?.state] === 'TASK_STATE_COMPLETED', `completed, got ${JSON.stringify(task.status)}`);
    const answer = (task.artifacts ?? []).flatMap((a) => a.parts).map((p) => p.content?.value ?? '').join('');
    expect(answer === 'echo: hello from alice', `the answer, got ${answer}`);
    shared.task = task;
    return {};
  },
  async perUser() {
    expect(shared.task, 'the send case to have made a task');
    const { c: bob } = await client(tokens.bob);
    try {
      await bob.getTask({ tenant: '', id: shared.task.id });
      throw new Error("bob read alice's task");
    } catch (err) {
      expect(err.name === 'TaskNotFoundError', `bob GetTask: TaskNotFoundError, got ${err.name} ${err.message}`);
    }
    for (const params of [{}, { contextId: shared.task.contextId }]) {
      const l = await bob.listTasks({ tenant: '', ...params });
      expect(!l.tasks.some((t) => t.id === shared.task.id), `bob's ListTasks ${JSON.stringify(params)} holds no task of alice's`);
    }
    const { c: alice } = await client(tokens.alice);
    const t = await alice.getTask({ tenant: '', id: shared.task.id });
    expect(t.id === shared.task.id, 'alice reads her task');
    const l = await alice.listTasks({ tenant: '', contextId: shared.task.contextId });
    expect(l.tasks.some((x) => x.id === shared.task.id), 'alice lists her task');
    return {};
  },
  async refused() {
    for (const [what, token] of Object.entries(bad)) await refusedWith(what, token);
    return {};
  },
};

const expired = {
  async refused() {
    await refusedWith('expired', bad.expired);
    return {};
  },
};

const results = [];
for (const [name, run] of Object.entries(phase === 'expired' ? expired : live)) {
  try {
    results.push({ name, ok: true, ...(await run()) });
  } catch (err) {
    results.push({ name, ok: false, error: `${err?.name}: ${err?.message}` });
  }
}
process.stdout.write(JSON.stringify({ results }) + '\n');
process.exitCode = results.length > 0 && results.every((r) => r.ok) ? 0 : 1;
