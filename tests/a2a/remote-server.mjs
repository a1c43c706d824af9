// A small non-Stackbone A2A 1.0 agent built on the official @a2a-js/sdk
// server (DefaultRequestHandler + JsonRpcTransportHandler on node:http), for
// the Go test of Stackbone's A2A client (internal/server/a2a_delegate_e2e_test.go):
// a Stackbone agent delegates to it through `task` with a2aAgents.
//
//   node remote-server.mjs
//
// Environment: A2A_CALLS_FILE (a line per side effect: a wire that ran),
// A2A_REQUIRE_KEY (requests without "Authorization: Bearer KEY" get 401).
// Prints {"port": N} on its first line once it listens on 127.0.0.1.
//
// The agent ("payments"): a message asking to "wire" money puts the task in
// TASK_STATE_INPUT_REQUIRED with a plain text question; the next message on
// the task answers it (a text or data part saying approve or reject).
// Approve runs the wire (one line in A2A_CALLS_FILE) and completes with
// "Wired 100 EUR."; reject completes with "Not wired: <message>". Any other
// message is answered "payments turn N of context C" (N counts the turns of
// the context, so a client can see a conversation continue), streamed as two
// artifact chunks.
import http from 'node:http';
import fs from 'node:fs';
import crypto from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler, ServerCallContext } from '@a2a-js/sdk/server';

const callsFile = process.env.A2A_CALLS_FILE || '';
const requireKey = process.env.A2A_REQUIRE_KEY || '';

const text = (t) => ({ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const agentMessage = (ctx, task, t) => ({
  messageId: crypto.randomUUID(), contextId: ctx, taskId: task, role: Role.ROLE_AGENT, parts: [text(t)],
  metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });

const turns = new Map(); // contextId -> turns so far

const executor = {
  async execute(rc, bus) {
    const { taskId, contextId } = rc;
    const user = rc.userMessage;
    const said = user.parts.map((p) => (p.content?.$case === 'text' ? p.content.value
      : p.content?.$case === 'data' ? JSON.stringify(p.content.value) : '')).join(' ');
    const update = (state, msg) => bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(state, msg), metadata: undefined }));
    const artifact = (chunk, append, last) => bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append, lastChunk: last, metadata: undefined,
      artifact: { artifactId: 'answer', name: 'answer', description: '', parts: [text(chunk)], metadata: undefined, extensions: [] },
    }));
    if (rc.task) {
      // The answer to the question of an INPUT_REQUIRED task.
      bus.publish(AgentEvent.task({ ...rc.task, status: status(TaskState.TASK_STATE_WORKING, undefined) }));
      if (/reject/i.test(said)) {
        const why = said.replace(/^.*reject:?\s*/i, '').replace(/["}]+$/, '');
        artifact(`Not wired: ${why}`, false, true);
      } else if (/approve/i.test(said)) {
        if (callsFile) fs.appendFileSync(callsFile, JSON.stringify({ tool: 'wire', contextId }) + '\n');
        artifact('Wired 100 EUR.', false, true);
      } else {
        update(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(contextId, taskId, 'Please answer approve or reject.'));
        bus.finished();
        return;
      }
      update(TaskState.TASK_STATE_COMPLETED, undefined);
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED, undefined), artifacts: [], history: [user], metadata: undefined }));
    update(TaskState.TASK_STATE_WORKING, undefined);
    if (/wire/i.test(said)) {
      update(TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(contextId, taskId, 'Wire 100 EUR to ACME? Answer approve or reject.'));
      bus.finished();
      return;
    }
    const n = (turns.get(contextId) || 0) + 1;
    turns.set(contextId, n);
    artifact('payments turn ', false, false);
    artifact(`${n} of context ${contextId}`, true, true);
    update(TaskState.TASK_STATE_COMPLETED, undefined);
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.finished();
  },
};

let port = 0;
const card = () => ({
  name: 'payments',
  description: 'Moves money between accounts.',
  version: '1.0.0',
  supportedInterfaces: [{ url: `http://127.0.0.1:${port}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
  capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'wire', name: 'Wire transfers', description: 'Sends money after a human approves.', tags: ['payments'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
});

let handler;
const server = http.createServer(async (req, res) => {
  if (requireKey && req.headers.authorization !== `Bearer ${requireKey}`) {
    res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
    return;
  }
  if (req.method === 'GET' && req.url === '/.well-known/agent-card.json') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(card()));
    return;
  }
  if (req.method !== 'POST' || req.url !== '/a2a/jsonrpc') {
    res.writeHead(404).end();
    return;
  }
  let body = '';
  for await (const chunk of req) body += chunk;
  const context = new ServerCallContext({ requestedVersion: req.headers['a2a-version'] || undefined });
  const out = await handler.handle(body, context);
  if (out && typeof out[Symbol.asyncIterator] === 'function') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for await (const ev of out) res.write(`data: ${JSON.stringify(ev)}\n\n`);
    res.end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
});

server.listen(0, '127.0.0.1', () => {
  port = server.address().port;
  handler = new JsonRpcTransportHandler(new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor));
  console.log(JSON.stringify({ port }));
});
