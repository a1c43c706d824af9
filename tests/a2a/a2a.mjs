// Drives a Stackbone server's A2A 1.0 endpoint with the official
// @a2a-js/sdk client (ClientFactory → JSON-RPC transport): card discovery,
// send, stream, get, list, cancel, subscribe after a dropped stream, an
// approval answered over A2A (a caller key refused first) and one answered
// out of band with POST /v1/hitl/{id}/reject, CancelTask of a task waiting
// on a decision (INPUT_REQUIRED → CANCELED), tenant isolation, and the
// contextId as a thread on GET /v1/threads/{id}. The Go test
// (internal/server/a2a_client_test.go) starts the stack, and a control
// server (CTL) that holds and releases model calls and counts tool runs.
// Prints one JSON document {"results":[{name, ok, error, ...}]} and exits 1
// when a case failed.
//
//   node a2a.mjs http://127.0.0.1:PORT CTL_URL PREFIX ADMIN_KEY CALLER_KEY APPROVER_KEY OTHER_TENANT_KEY BINDING
//
// BINDING is the transport the client prefers among the card's interfaces:
// JSONRPC or HTTP+JSON.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory, DefaultAgentCardResolver } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [base, ctl, prefix, ...keyArgs] = process.argv.slice(2);
if (!base || !ctl || !prefix || keyArgs.length !== 5) {
  console.error('usage: node a2a.mjs BASE_URL CTL_URL PREFIX ADMIN_KEY CALLER_KEY APPROVER_KEY OTHER_TENANT_KEY JSONRPC|HTTP+JSON');
  process.exit(2);
}
const [adminKey, callerKey, approverKey, otherKey, binding] = keyArgs;
const keys = { admin: adminKey, caller: callerKey, approver: approverKey, other: otherKey };

function expect(cond, what) {
  if (!cond) throw new Error(`expected ${what}`);
}

// A fetch that sends the key of a role.
const authed = (key) => (url, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set('Authorization', `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};

// client is the SDK's client for the assistant agent, found from its card
// (the agent's base URL ends with a slash so the card path resolves under it).
async function client(key) {
  const fetchImpl = authed(key);
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    preferredTransports: [binding],
  }));
  return factory.createFromUrl(`${base}/a2a/assistant/`);
}

const text = (t) => ({ content: { $case: 'text', value: t } });
const data = (d) => ({ content: { $case: 'data', value: d } });
let n = 0;
const msg = (parts, extra = {}) => ({
  messageId: `${prefix}-m${++n}`, role: Role.ROLE_USER, parts, contextId: '', taskId: '', extensions: [], referenceTaskIds: [], ...extra,
});
const send = (c, parts, extra = {}, configuration) => c.sendMessage({ tenant: '', message: msg(parts, extra), configuration });

const artifactText = (task) => (task.artifacts ?? []).flatMap((a) => a.parts).map((p) => p.content?.value ?? '').join('');
const stateName = (s) => TaskState[s];

async function control(path, method = 'POST') {
  const r = await fetch(`${ctl}${path}`, { method });
  expect(r.ok, `control ${path}: ${r.status}`);
  return r.json();
}

async function api(path, key, method = 'GET') {
  const r = await fetch(`${base}${path}`, { method, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' } });
  return { status: r.status, body: await r.json() };
}

// collect reads a stream's events: their kinds, the states of its status
// updates, the artifact text, and the task id.
async function collect(stream, onEvent) {
  const out = { kinds: [], states: [], text: '', taskId: '', contextId: '', last: undefined };
  for await (const ev of stream) {
    const { $case, value } = ev.payload;
    out.kinds.push($case);
    if ($case === 'task') {
      out.taskId ||= value.id;
      out.contextId ||= value.contextId;
      out.states.push(stateName(value.status.state));
    } else if ($case === 'statusUpdate') {
      out.states.push(stateName(value.status.state));
      out.last = value.status;
    } else if ($case === 'artifactUpdate') {
      out.text += value.artifact.parts.map((p) => p.content?.value ?? '').join('');
    }
    if (onEvent && (await onEvent(ev, out)) === false) break;
  }
  return out;
}

async function pollTask(c, id, until) {
  for (let i = 0; i < 400; i++) {
    const t = await c.getTask({ tenant: '', id });
    if (until(t)) return t;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`task ${id} never reached the expected state`);
}

const admin = await client(keys.admin);
const shared = {};

const cases = {
  async card() {
    const card = admin.agentCard;
    expect(admin.transport.protocolName === binding, `transport ${admin.transport.protocolName}, want ${binding}`);
    expect(card.name === 'assistant', `card name ${card.name}`);
    expect(card.capabilities.streaming === true && card.capabilities.pushNotifications === true, 'streaming and push');
    expect(card.supportedInterfaces[0].protocolVersion === '1.0', 'protocol 1.0');
    expect(card.skills.some((s) => s.name === 'refund' && s.tags.includes('approval')), 'the refund tool as a skill');
    expect(card.securitySchemes.bearer !== undefined, 'a bearer scheme');
    const ext = await admin.getAgentCard();
    expect(ext.name === 'assistant', 'the extended card');
    return { skills: card.skills.length };
  },
  async send() {
    const task = await send(admin, [text('hello a2a')]);
    expect(stateName(task.status.state) === 'TASK_STATE_COMPLETED', `state ${stateName(task.status.state)}`);
    expect(artifactText(task) === 'echo: hello a2a', `answer ${artifactText(task)}`);
    const again = await send(admin, [text('and again'), data({ n: 2 })], { contextId: task.contextId });
    expect(again.contextId === task.contextId && again.id !== task.id, 'a second task in the same context');
    expect(artifactText(again).startsWith('echo: and again'), `second answer ${artifactText(again)}`);
    const th = await api(`/v1/threads/${task.contextId}`, keys.admin);
    expect(th.status === 200 && th.body.agent === 'assistant', `thread ${th.status}`);
    const texts = th.body.messages.map((m) => m.content);
    expect(texts.includes('hello a2a') && texts.includes('echo: hello a2a'), `thread messages ${JSON.stringify(texts)}`);
    shared.context = task.contextId;
    shared.tasks = [task.id, again.id];
    return { contextId: task.contextId };
  },
  async stream() {
    const s = await collect(admin.sendMessageStream({ tenant: '', message: msg([text('stream me')]) }));
    expect(s.kinds[0] === 'task', `first event ${s.kinds[0]}`);
    expect(s.states.at(-1) === 'TASK_STATE_COMPLETED' && s.states.includes('TASK_STATE_WORKING'), `states ${s.states}`);
    expect(s.text === 'echo: stream me', `streamed text ${s.text}`);
    return { events: s.kinds.length };
  },
  async get() {
    const t = await admin.getTask({ tenant: '', id: shared.tasks[0], historyLength: 1 });
    expect(t.id === shared.tasks[0] && stateName(t.status.state) === 'TASK_STATE_COMPLETED', 'the first task, completed');
    expect(t.history.length === 1 && t.history[0].role === Role.ROLE_AGENT, `history ${JSON.stringify(t.history)}`);
    expect(artifactText(t) === 'echo: hello a2a', 'its artifact');
    return {};
  },
  async list() {
    const p1 = await admin.listTasks({ tenant: '', contextId: shared.context, pageSize: 1, includeArtifacts: true });
    expect(p1.tasks.length === 1 && p1.tasks[0].id === shared.tasks[1] && p1.totalSize === 2 && p1.nextPageToken !== '',
      `page 1 ${JSON.stringify(p1)}`);
    const p2 = await admin.listTasks({ tenant: '', contextId: shared.context, pageSize: 1, pageToken: p1.nextPageToken });
    expect(p2.tasks.length === 1 && p2.tasks[0].id === shared.tasks[0] && p2.nextPageToken === '', `page 2 ${JSON.stringify(p2)}`);
    expect((p2.tasks[0].artifacts ?? []).length === 0, 'no artifacts unless asked');
    return {};
  },
  async cancel() {
    await control('/hold?user=slow%20story');
    const before = (await control('/model', 'GET')).count;
    let canceled;
    const s = await collect(admin.sendMessageStream({ tenant: '', message: msg([text('tell me a slow story')]) }), async (ev, out) => {
      if (ev.payload.$case === 'statusUpdate' && stateName(ev.payload.value.status.state) === 'TASK_STATE_WORKING' && !canceled) {
        await control('/held', 'GET'); // the model call is under way
        canceled = await admin.cancelTask({ tenant: '', id: out.taskId });
      }
    });
    await control('/release');
    expect(canceled && stateName(canceled.status.state) === 'TASK_STATE_CANCELED', `cancel answer ${canceled && stateName(canceled.status.state)}`);
    expect(s.states.at(-1) === 'TASK_STATE_CANCELED', `stream states ${s.states}`);
    const t = await admin.getTask({ tenant: '', id: s.taskId });
    expect(stateName(t.status.state) === 'TASK_STATE_CANCELED', 'GetTask says canceled');
    try {
      await admin.cancelTask({ tenant: '', id: s.taskId });
      throw new Error('a second cancel was accepted');
    } catch (err) {
      expect(err.name === 'TaskNotCancelableError', `second cancel: ${err.name} ${err.message}`);
    }
    const after = (await control('/model', 'GET')).count;
    expect(after - before === 1, `model calls of the canceled task: ${after - before}`);
    return {};
  },
  async subscribe() {
    await control('/hold?user=slow%20poem');
    const drop = new AbortController();
    let id = '';
    try {
      await collect(admin.sendMessageStream({ tenant: '', message: msg([text('a slow poem please')]) }, { signal: drop.signal }), (ev, out) => {
        if (out.taskId && ev.payload.$case === 'statusUpdate') {
          id = out.taskId;
          drop.abort();
          return false;
        }
      });
    } catch (err) {
      if (err.name !== 'AbortError') throw err;
    }
    expect(id !== '', 'a task id before the drop');
    await control('/held', 'GET');
    const s = await collect(admin.resubscribeTask({ tenant: '', id }), async (ev) => {
      if (ev.payload.$case === 'task') {
        expect(stateName(ev.payload.value.status.state) === 'TASK_STATE_WORKING', 'the task first, working');
        await control('/release');
      }
    });
    expect(s.kinds[0] === 'task' && s.states.at(-1) === 'TASK_STATE_COMPLETED', `resubscribed states ${s.states}`);
    expect(s.text === 'echo: a slow poem please', `text after the resubscribe ${JSON.stringify(s.text)}`);
    return {};
  },
  async approvalOverA2A() {
    const caller = await client(keys.caller);
    const approver = await client(keys.approver);
    const before = (await control('/calls?tool=refund', 'GET')).count;
    const task = await send(caller, [text('please refund my order')]);
    expect(stateName(task.status.state) === 'TASK_STATE_INPUT_REQUIRED', `state ${stateName(task.status.state)}`);
    const parts = task.status.message.parts;
    const d = parts.find((p) => p.content?.$case === 'data')?.content.value;
    expect(d && d.tool === 'refund' && d.arguments.orderId === 'ord_42' && d.allowedDecisions.includes('approve') && d.responseSchema && d.id,
      `interrupt data part ${JSON.stringify(parts)}`);
    try {
      await send(caller, [data({ decision: 'approve' })], { taskId: task.id, contextId: task.contextId });
      throw new Error('a caller key answered an approval');
    } catch (err) {
      expect(/approve|decide|role/i.test(err.message), `caller refused: ${err.name} ${err.message}`);
    }
    const done = await send(approver, [data({ decision: 'approve', id: d.id, message: 'ok by me' })], { taskId: task.id });
    expect(done.id === task.id && stateName(done.status.state) === 'TASK_STATE_COMPLETED', `after approve: ${stateName(done.status.state)}`);
    expect(artifactText(done).includes('Refund result:'), `answer ${artifactText(done)}`);
    const after = (await control('/calls?tool=refund', 'GET')).count;
    expect(after - before === 1, `refund ran ${after - before} times`);
    const hitl = await api(`/v1/hitl/${d.id}`, keys.admin);
    expect(hitl.body.status === 'approved' && hitl.body.decision.decidedVia === 'a2a', `decision ${JSON.stringify(hitl.body.decision)}`);
    return {};
  },
  async approvalOutOfBand() {
    const before = (await control('/calls?tool=refund', 'GET')).count;
    const s = await collect(admin.sendMessageStream({ tenant: '', message: msg([text('refund order two please')]) }));
    expect(s.states.at(-1) === 'TASK_STATE_INPUT_REQUIRED', `stream ends waiting: ${s.states}`);
    const d = s.last.message.parts.find((p) => p.content?.$case === 'data').content.value;
    const t = await admin.getTask({ tenant: '', id: s.taskId });
    expect(stateName(t.status.state) === 'TASK_STATE_INPUT_REQUIRED', 'GetTask says input required');
    const r = await api(`/v1/hitl/${d.id}/reject`, keys.approver, 'POST');
    expect(r.status === 200, `reject ${r.status} ${JSON.stringify(r.body)}`);
    const done = await pollTask(admin, s.taskId, (x) => stateName(x.status.state) === 'TASK_STATE_COMPLETED');
    expect(artifactText(done).includes('Refund result:'), `answer after the rejection ${artifactText(done)}`);
    const after = (await control('/calls?tool=refund', 'GET')).count;
    expect(after === before, 'a rejected refund did not run');
    return {};
  },
  async approvalStreamed() {
    const s = await collect(admin.sendMessageStream({ tenant: '', message: msg([text('refund it, streamed')]) }));
    expect(s.states.at(-1) === 'TASK_STATE_INPUT_REQUIRED', `first stream ${s.states}`);
    const r = await collect(admin.sendMessageStream({ tenant: '', message: msg([data({ decision: 'approve', arguments: { orderId: 'ord_42', amount: 5 } })], { taskId: s.taskId }) }));
    expect(r.kinds[0] === 'task' && r.taskId === s.taskId, 'the same task first');
    expect(r.states.at(-1) === 'TASK_STATE_COMPLETED' && r.states.includes('TASK_STATE_WORKING'), `second stream ${r.states}`);
    expect(r.text.includes('"refunded":5'), `edited arguments ran: ${r.text}`);
    return {};
  },
  async cancelInputRequired() {
    // CancelTask ends a task that waits on a decision: CANCELED, its
    // decision closed as cancelled, the refund never run.
    const caller = await client(keys.caller);
    const approver = await client(keys.approver);
    const before = (await control('/calls?tool=refund', 'GET')).count;
    const models = (await control('/model', 'GET')).count;
    const s = await collect(caller.sendMessageStream({ tenant: '', message: msg([text('refund the third order')]) }));
    expect(s.states.at(-1) === 'TASK_STATE_INPUT_REQUIRED', `stream ends waiting: ${s.states}`);
    const d = s.last.message.parts.find((p) => p.content?.$case === 'data').content.value;
    try {
      await approver.cancelTask({ tenant: '', id: s.taskId });
      throw new Error('an approver key canceled the task');
    } catch (err) {
      expect(/role|turn|cancel/i.test(err.message) && err.message !== 'an approver key canceled the task', `approver refused: ${err.name} ${err.message}`);
    }
    const canceled = await caller.cancelTask({ tenant: '', id: s.taskId });
    expect(canceled.id === s.taskId && stateName(canceled.status.state) === 'TASK_STATE_CANCELED', `cancel answer ${stateName(canceled.status.state)}`);
    const t = await caller.getTask({ tenant: '', id: s.taskId });
    expect(stateName(t.status.state) === 'TASK_STATE_CANCELED', `GetTask says ${stateName(t.status.state)}`);
    const hitl = await api(`/v1/hitl/${d.id}`, keys.admin);
    expect(hitl.body.status === 'rejected' && hitl.body.decision.decidedVia === 'cancel' && hitl.body.decision.decidedBy === 'app',
      `the decision after the cancel ${JSON.stringify(hitl.body)}`);
    const late = await api(`/v1/hitl/${d.id}/approve`, keys.approver, 'POST');
    expect(late.status === 409, `approve after the cancel: ${late.status} ${JSON.stringify(late.body)}`);
    try {
      await caller.cancelTask({ tenant: '', id: s.taskId });
      throw new Error('a second cancel was accepted');
    } catch (err) {
      expect(err.name === 'TaskNotCancelableError', `second cancel: ${err.name} ${err.message}`);
    }
    const after = (await control('/calls?tool=refund', 'GET')).count;
    expect(after === before, `refund ran ${after - before} times`);
    const calls = (await control('/model', 'GET')).count - models;
    expect(calls === 1, `model calls of the canceled task: ${calls}`);
    // The context takes the next task.
    const next = await send(caller, [text('after the cancel')], { contextId: s.contextId });
    expect(stateName(next.status.state) === 'TASK_STATE_COMPLETED' && artifactText(next) === 'echo: after the cancel', `next task ${artifactText(next)}`);
    return {};
  },
  async tenantIsolation() {
    const other = await client(keys.other);
    try {
      await other.getTask({ tenant: '', id: shared.tasks[0] });
      throw new Error("another tenant read the task");
    } catch (err) {
      expect(err.name === 'TaskNotFoundError', `other tenant: ${err.name} ${err.message}`);
    }
    try {
      await other.cancelTask({ tenant: '', id: shared.tasks[0] });
      throw new Error("another tenant canceled the task");
    } catch (err) {
      expect(err.name === 'TaskNotFoundError', `other tenant cancel: ${err.name}`);
    }
    const l = await other.listTasks({ tenant: '', contextId: shared.context });
    expect(l.tasks.length === 0 && l.totalSize === 0, 'no tasks of another tenant listed');
    return {};
  },
};

const results = [];
const only = process.env.A2A_CASES?.split(',');
for (const [name, run] of Object.entries(cases)) {
  if (only && !only.includes(name)) continue;
  try {
    results.push({ name, ok: true, ...(await run()) });
  } catch (err) {
    results.push({ name, ok: false, error: `${err?.name}: ${err?.message}` });
  }
}
process.stdout.write(JSON.stringify({ results }) + '\n');
process.exitCode = results.length > 0 && results.every((r) => r.ok) ? 0 : 1;
