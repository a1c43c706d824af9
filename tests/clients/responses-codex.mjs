// Drives a Stackbone server's POST /v1/responses the way Codex CLI does
// (wire_api = "responses"), with plain fetch: store: false, stream: true,
// instructions, one function tool, and the whole conversation replayed as
// input on every request, the previous turn's function_call and the
// client's function_call_output included. The SSE is read as Codex reads
// it: an `event:` line naming the type, a data line with the JSON event and
// its sequence_number, and no [DONE].
//
//   node responses-codex.mjs http://127.0.0.1:PORT [agent]
//
// Prints one JSON document {"results":[{name, ok, error, ...}]} and exits 1
// when a case failed. The texts follow the script in
// internal/server/responses_client_test.go.
import { args, checkSequence, expect, runCases, print } from './responses-lib.mjs';

const { base, agent } = args('responses-codex.mjs');

const tools = [{
  type: 'function',
  name: 'lookup_order',
  description: 'Look up an order by id',
  strict: false,
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
}];

// post sends one Codex-style request and returns the parsed SSE events.
async function post(input) {
  const res = await fetch(`${base}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: 'Bearer sk-local' },
    body: JSON.stringify({
      model: agent,
      instructions: 'You are a coding agent.',
      input,
      tools,
      tool_choice: 'auto',
      parallel_tool_calls: false,
      reasoning: null,
      store: false,
      stream: true,
      include: [],
      prompt_cache_key: 'codex-session-1',
    }),
  });
  if (!res.ok) throw new Error(`POST /v1/responses: ${res.status} ${(await res.text()).slice(0, 300)}`);
  expect((res.headers.get('content-type') ?? '').startsWith('text/event-stream'), `content-type ${res.headers.get('content-type')}`);
  return parseSSE(await res.text());
}

// parseSSE splits a body into events; each must have an event: line equal
// to its data's type.
function parseSSE(body) {
  const events = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    if (block.trim() === '' || block.split(/\r?\n/).every((l) => l.startsWith(':'))) continue;
    let name = null;
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('event:')) name = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    const text = data.join('\n');
    expect(text !== '[DONE]', 'the stream sent [DONE]');
    const ev = JSON.parse(text);
    expect(name === ev.type, `event: line ${name} for data type ${ev.type}`);
    events.push(ev);
  }
  checkSequence(events);
  expect(events.at(-1)?.type === 'response.completed', `last event ${events.at(-1)?.type}`);
  return events;
}

// itemsDone returns the items of the response.output_item.done events, as
// Codex records them in its history (without their ids: store is false).
function itemsDone(events) {
  return events.filter((e) => e.type === 'response.output_item.done').map((e) => {
    const { id: _id, ...item } = e.item;
    return item;
  });
}

const user = (text) => ({ type: 'message', role: 'user', content: [{ type: 'input_text', text }] });
let history = [];

const cases = {
  // Turn 1: the model calls lookup_order; the response completes with the
  // call.
  async turnWithCall() {
    history = [user('codex look up order 42')];
    const events = await post(history);
    const items = itemsDone(events);
    const call = items.find((it) => it.type === 'function_call');
    expect(call?.name === 'lookup_order', `items ${JSON.stringify(items).slice(0, 300)}`);
    expect(typeof call.call_id === 'string' && call.call_id !== '', `call_id ${call?.call_id}`);
    const completed = events.at(-1).response;
    expect(completed.status === 'completed', `status ${completed.status}`);
    history.push(...items, { type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ id: '42', status: 'shipped-codex' }) });
    return { types: [...new Set(events.map((e) => e.type))], callId: call.call_id };
  },
  // Turn 2: the same conversation replayed with the tool's output.
  async replayWithOutput() {
    const events = await post(history);
    const items = itemsDone(events);
    const text = items.filter((it) => it.type === 'message').flatMap((it) => it.content).map((c) => c.text).join('');
    const want = 'Order said: {"id":"42","status":"shipped-codex"}';
    expect(text === want, `text ${JSON.stringify(text)}, want ${JSON.stringify(want)}`);
    const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    expect(deltas === want, `deltas ${JSON.stringify(deltas)}`);
    history.push(...items);
    return {};
  },
  // Turn 3: a new user message after the whole history.
  async nextUserTurn() {
    history.push(user('codex thanks, next'));
    const events = await post(history);
    const text = itemsDone(events).filter((it) => it.type === 'message').flatMap((it) => it.content).map((c) => c.text).join('');
    expect(text === 'echo: codex thanks, next', `text ${JSON.stringify(text)}`);
    return { inputItems: history.length };
  },
};

print(await runCases(cases));
