// A2A push notifications with the official @a2a-js/sdk client: the
// client registers push configs (inline in SendMessage's configuration,
// and with createTaskPushNotificationConfig), gets, lists and deletes
// them, and a webhook receiver in this script checks each notification as
// a client must (POST, application/a2a+json, the config's token in
// X-A2A-Notification-Token, its authentication as Authorization, the
// Standard Webhooks signature with the server's secret) and records the
// states (CANCELED after CancelTask of a task waiting on a decision);
// every notification must be of a task this client created. Another tenant's client gets
// TaskNotFoundError. The Go test (internal/server/a2a_client_test.go,
// TestA2AOfficialClientPush) starts the stack with its dispatcher and
// STACKBONE_A2A_PUSH_ALLOW_PRIVATE (the receiver listens on 127.0.0.1).
// Prints {"results":[{name, ok, error}]} and exits 1 when a case failed.
//
//   node push.mjs BASE_URL PREFIX CALLER_KEY APPROVER_KEY OTHER_TENANT_KEY WEBHOOK_SECRET JSONRPC|HTTP+JSON
import http from 'node:http';
import crypto from 'node:crypto';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [base, prefix, callerKey, approverKey, otherKey, secret, binding] = process.argv.slice(2);
if (!binding) {
  console.error('usage: node push.mjs BASE_URL PREFIX CALLER_KEY APPROVER_KEY OTHER_TENANT_KEY WEBHOOK_SECRET JSONRPC|HTTP+JSON');
  process.exit(2);
}

function expect(cond, what) {
  if (!cond) throw new Error(`expected ${what}`);
}

const authed = (key) => (url, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set('Authorization', `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};

async function client(key) {
  const fetchImpl = authed(key);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    preferredTransports: [binding],
  }));
  return factory.createFromUrl(`${base}/a2a/assistant/`);
}

// The receiver: tokens maps each path to the token and Authorization its
// config sent; tasks are the task ids this client created.
const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
const tokens = {};
const tasks = new Set();
const got = []; // {path, taskId, state}
const problems = [];
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const refuse = (why) => { problems.push(`${req.url}: ${why}`); res.writeHead(401).end(); };
    const want = tokens[req.url];
    const id = req.headers['webhook-id'];
    const ts = req.headers['webhook-timestamp'];
    const sig = 'v1,' + crypto.createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest('base64');
    if (req.method !== 'POST') return refuse(`method ${req.method}`);
    if (req.headers['content-type'] !== 'application/a2a+json') return refuse(`content type ${req.headers['content-type']}`);
    if (!want || req.headers['x-a2a-notification-token'] !== want.token) return refuse('token');
    if ((req.headers.authorization ?? '') !== want.auth) return refuse(`authorization ${req.headers.authorization}`);
    if (req.headers['webhook-signature'] !== sig) return refuse('signature');
    let sr;
    try { sr = JSON.parse(body); } catch { return refuse('body'); }
    const up = sr.statusUpdate;
    if (!up || !up.taskId) return refuse(`not a status update: ${body}`);
    // Which task it is for is checked at the end: a notification may come
    // before the request that created the task has its answer.
    got.push({ path: req.url, taskId: up.taskId, state: up.status.state });
    res.writeHead(200).end();
  });
});
await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
const hook = `http://127.0.0.1:${receiver.address().port}`;

const states = (path, taskId) => got.filter((g) => g.path === path && g.taskId === taskId).map((g) => g.state);
async function waitFor(what, cond) {
  for (let i = 0; i < 1200; i++) { // 30 s: a loaded machine
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what} (got ${JSON.stringify(got)}, problems ${JSON.stringify(problems)})`);
}

const text = (t) => ({ content: { $case: 'text', value: t } });
let n = 0;
const msg = (parts, extra = {}) => ({
  messageId: `${prefix}-p${++n}`, role: Role.ROLE_USER, parts, contextId: '', taskId: '', extensions: [], referenceTaskIds: [], ...extra,
});
const stateName = (s) => TaskState[s];

const caller = await client(callerKey);
const other = await client(otherKey);

const cases = {
  async card() {
    expect(caller.agentCard.capabilities.pushNotifications === true, 'capabilities.pushNotifications');
    return {};
  },
  async inline() {
    tokens['/inline'] = { token: 'tok-inline', auth: 'Bearer cred-inline' };
    const configuration = {
      acceptedOutputModes: [], returnImmediately: false,
      taskPushNotificationConfig: { tenant: '', id: '', taskId: '', url: `${hook}/inline`, token: 'tok-inline',
        authentication: { scheme: 'Bearer', credentials: 'cred-inline' } },
    };
    const r = await caller.sendMessage({ tenant: '', message: msg([text('hello push')]), configuration });
    expect(r.id && stateName(r.status.state) === 'TASK_STATE_COMPLETED', `sent: ${JSON.stringify(r.status)}`);
    tasks.add(r.id);
    await waitFor('the inline config\'s COMPLETED', () => states('/inline', r.id).includes('TASK_STATE_COMPLETED'));
    const l = await caller.listTaskPushNotificationConfig({ tenant: '', taskId: r.id, pageSize: 0, pageToken: '' });
    expect(l.configs.length === 1 && l.configs[0].url === `${hook}/inline` && l.configs[0].token === 'tok-inline', `list ${JSON.stringify(l)}`);
    return {};
  },
  async configs() {
    const task = await caller.sendMessage({ tenant: '', message: msg([text('refund my push order')]) });
    expect(stateName(task.status.state) === 'TASK_STATE_INPUT_REQUIRED', `state ${stateName(task.status.state)}`);
    tasks.add(task.id);
    tokens['/created'] = { token: 'tok-created', auth: '' };
    const created = await caller.createTaskPushNotificationConfig({ tenant: '', id: '', taskId: task.id, url: `${hook}/created`, token: 'tok-created' });
    expect(created.id && created.taskId === task.id && created.url === `${hook}/created`, `created ${JSON.stringify(created)}`);
    const one = await caller.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id });
    expect(one.url === created.url && one.token === 'tok-created', `get ${JSON.stringify(one)}`);
    const l = await caller.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    expect(l.configs.length === 1 && l.configs[0].id === created.id, `list ${JSON.stringify(l)}`);
    for (const op of [
      () => other.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id }),
      () => other.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }),
      () => other.createTaskPushNotificationConfig({ tenant: '', id: '', taskId: task.id, url: `${hook}/other`, token: '' }),
      () => other.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id }),
    ]) {
      try {
        await op();
        throw new Error('another tenant reached the config');
      } catch (err) {
        expect(err.name === 'TaskNotFoundError', `another tenant: ${err.name} ${err.message}`);
      }
    }
    // Approved out of band: the task works again, then completes.
    const d = task.status.message.parts.find((p) => p.content?.$case === 'data').content.value;
    const r = await fetch(`${base}/v1/hitl/${d.id}/approve`, { method: 'POST', headers: { Authorization: `Bearer ${approverKey}`, 'Content-Type': 'application/json' }, body: '{}' });
    expect(r.ok, `approve ${r.status} ${await r.text()}`);
    await waitFor('WORKING and COMPLETED', () => {
      const s = states('/created', task.id);
      return s.includes('TASK_STATE_WORKING') && s.includes('TASK_STATE_COMPLETED');
    });
    await caller.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id });
    await caller.deleteTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: created.id });
    const after = await caller.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' });
    expect(after.configs.length === 0, `list after the delete ${JSON.stringify(after)}`);
    expect(problems.length === 0, `the receiver refused: ${JSON.stringify(problems)}`);
    const strangers = got.filter((g) => !tasks.has(g.taskId));
    expect(strangers.length === 0, `notifications of tasks we did not create: ${JSON.stringify(strangers)}`);
    return { notifications: got.length };
  },
  async canceled() {
    // CancelTask of a task waiting on a decision: the config sees CANCELED.
    tokens['/canceled'] = { token: 'tok-canceled', auth: '' };
    const configuration = {
      acceptedOutputModes: [], returnImmediately: false,
      taskPushNotificationConfig: { tenant: '', id: '', taskId: '', url: `${hook}/canceled`, token: 'tok-canceled' },
    };
    const task = await caller.sendMessage({ tenant: '', message: msg([text('refund my canceled push order')]), configuration });
    expect(stateName(task.status.state) === 'TASK_STATE_INPUT_REQUIRED', `state ${stateName(task.status.state)}`);
    tasks.add(task.id);
    const c = await caller.cancelTask({ tenant: '', id: task.id });
    expect(stateName(c.status.state) === 'TASK_STATE_CANCELED', `cancel answer ${stateName(c.status.state)}`);
    await waitFor('CANCELED', () => states('/canceled', task.id).includes('TASK_STATE_CANCELED'));
    expect(problems.length === 0, `the receiver refused: ${JSON.stringify(problems)}`);
    return {};
  },
};

const results = [];
for (const [name, run] of Object.entries(cases)) {
  try {
    results.push({ name, ok: true, ...(await run()) });
  } catch (err) {
    results.push({ name, ok: false, error: `${err?.name}: ${err?.message}` });
  }
}
receiver.close();
process.stdout.write(JSON.stringify({ results }) + '\n');
process.exitCode = results.length > 0 && results.every((r) => r.ok) ? 0 : 1;
