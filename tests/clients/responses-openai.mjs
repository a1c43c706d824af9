// Drives a Stackbone server's POST /v1/responses with the official openai
// Node SDK, both majors pinned in package.json ("openai6" is openai@6 under
// an npm alias, "openai" is openai@7), as an application would: create
// (plain and streamed), the responses.stream helper, retrieve, a chain with
// previous_response_id (and a branch of it: an older response continued), a background response resumed with starting_after,
// and a local function tool answered with function_call_output.
//
//   node responses-openai.mjs http://127.0.0.1:PORT [agent] [package...]
//
// The packages default to "openai6 openai". Each case's name is prefixed
// with the major ("v6:", "v7:"). Prints one JSON document
// {"results":[{name, ok, error, ...}], "sent": {v6: [...], v7: [...]}}
// (sent: what each SDK POSTed) and exits 1 when a case failed. The texts
// the cases send and expect follow the script in
// internal/server/responses_client_test.go.
import { args, recorder, checkSequence, textOf, expect, runCases, print } from './responses-lib.mjs';

const { base, agent, rest } = args('responses-openai.mjs');
const packages = rest.length > 0 ? rest : ['openai6', 'openai'];

const lookupOrder = {
  type: 'function',
  name: 'lookup_order',
  description: 'Look up an order by id',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
  strict: true,
};

function casesFor(client, v) {
  return {
    // A plain create: the SDK adds output_text from the output items.
    async create() {
      const r = await client.responses.create({ model: agent, input: `${v} hello there` });
      expect(r.object === 'response', `object ${r.object}`);
      expect(typeof r.id === 'string' && r.id.startsWith('resp_'), `id ${r.id}`);
      expect(r.status === 'completed', `status ${r.status}`);
      expect(r.output_text === `echo: ${v} hello there`, `output_text ${JSON.stringify(r.output_text)}`);
      expect(typeof r.usage?.total_tokens === 'number', `usage ${JSON.stringify(r.usage)}`);
      return { id: r.id, text: r.output_text };
    },
    // create({stream: true}): every event has a strictly increasing
    // sequence_number; the deltas add up to the completed response's text.
    async createStream() {
      const stream = await client.responses.create({ model: agent, input: `${v} stream this please`, stream: true });
      const events = [];
      for await (const ev of stream) events.push(ev);
      const types = checkSequence(events);
      for (const t of ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
        'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']) {
        expect(types.includes(t), `no ${t} in ${types.join(',')}`);
      }
      expect(types[0] === 'response.created', `first event ${types[0]}`);
      expect(types.at(-1) === 'response.completed', `last event ${types.at(-1)}`);
      const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
      const done = events.at(-1).response;
      expect(deltas === `echo: ${v} stream this please`, `deltas ${JSON.stringify(deltas)}`);
      expect(textOf(done) === deltas, `completed response text ${JSON.stringify(textOf(done))}`);
      expect(done.status === 'completed', `completed status ${done.status}`);
      return { id: done.id, types: [...new Set(types)], firstSeq: events[0].sequence_number };
    },
    // The responses.stream helper rebuilds the response from the events
    // (openai@7 checks item ids, output indexes and content indexes).
    async streamHelper() {
      const stream = client.responses.stream({ model: agent, input: `${v} helper stream` });
      let deltas = '';
      stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
      const final = await stream.finalResponse();
      expect(final.output_text === `echo: ${v} helper stream`, `output_text ${JSON.stringify(final.output_text)}`);
      expect(deltas === final.output_text, `deltas ${JSON.stringify(deltas)}`);
      return { id: final.id, text: final.output_text };
    },
    // retrieve returns the stored response as create returned it.
    async retrieve() {
      const r = await client.responses.create({ model: agent, input: `${v} keep this one` });
      const got = await client.responses.retrieve(r.id);
      expect(got.id === r.id, `retrieved id ${got.id}`);
      expect(got.status === 'completed', `status ${got.status}`);
      expect(textOf(got) === `echo: ${v} keep this one`, `text ${JSON.stringify(textOf(got))}`);
      return { id: r.id };
    },
    // previous_response_id continues the chain: the Go test checks that the
    // model saw the first turn with the second.
    async previousResponseId() {
      const first = await client.responses.create({ model: agent, input: `${v} remember: the code word is kiwi` });
      const second = await client.responses.create({ model: agent, input: `${v} recall the code word`, previous_response_id: first.id });
      expect(second.output_text === `echo: ${v} recall the code word`, `second ${JSON.stringify(second.output_text)}`);
      expect(second.previous_response_id === first.id, `previous_response_id ${second.previous_response_id}, want ${first.id}`);
      return { first: first.id, second: second.id };
    },
    // Regenerate, as a chat app does: a second answer to the first
    // question, continuing the first response again after the chain went
    // on. The Go test checks that the model saw the first turn and the new
    // input only, not the discarded second turn.
    async previousResponseIdOlder() {
      const first = await client.responses.create({ model: agent, input: `${v} branch root question` });
      const second = await client.responses.create({ model: agent, input: `${v} branch discarded turn`, previous_response_id: first.id });
      const again = await client.responses.create({ model: agent, input: `${v} branch other turn`, previous_response_id: first.id });
      expect(again.id !== second.id, `continuing the first response again answered the second response ${second.id}`);
      expect(again.output_text === `echo: ${v} branch other turn`, `again ${JSON.stringify(again.output_text)}`);
      expect(again.previous_response_id === first.id, `previous_response_id ${again.previous_response_id}, want ${first.id}`);
      // Each response reads as it was answered; the chain goes on from the
      // new branch.
      const kept = await client.responses.retrieve(second.id);
      expect(textOf(kept) === `echo: ${v} branch discarded turn`, `second read back ${JSON.stringify(textOf(kept))}`);
      const on = await client.responses.create({ model: agent, input: `${v} branch goes on`, previous_response_id: again.id });
      expect(on.output_text === `echo: ${v} branch goes on`, `on ${JSON.stringify(on.output_text)}`);
      return { first: first.id, second: second.id, again: again.id, on: on.id };
    },
    // background: true answers at once, queued or in progress; the full
    // event log replays with retrieve({stream: true}); the final retrieve
    // is completed.
    async background() {
      const r = await client.responses.create({ model: agent, input: `${v} slow background answer`, background: true });
      expect(r.background === true, `background ${r.background}`);
      expect(r.status === 'queued' || r.status === 'in_progress', `status ${r.status}`);
      const replay = await client.responses.retrieve(r.id, { stream: true });
      const events = [];
      for await (const ev of replay) events.push(ev);
      const types = checkSequence(events);
      expect(types[0] === 'response.created', `replay starts with ${types[0]}`);
      expect(types.at(-1) === 'response.completed', `replay ends with ${types.at(-1)}`);
      const final = await client.responses.retrieve(r.id);
      expect(final.status === 'completed', `final status ${final.status}`);
      expect(textOf(final) === 'one two three four five six seven eight nine ten eleven twelve', `final text ${JSON.stringify(textOf(final))}`);
      return { id: r.id, initialStatus: r.status, replayed: events.length };
    },
    // A client that loses a background stream resumes it with
    // retrieve(id, {stream: true, starting_after: N}): the events go on from
    // N+1, and the text before plus after the cut is the whole answer.
    async backgroundResume() {
      const stream = await client.responses.create({ model: agent, input: `${v} slow resumable answer`, background: true, stream: true });
      const before = [];
      for await (const ev of stream) {
        before.push(ev);
        if (ev.type === 'response.output_text.delta') break; // drops the connection
      }
      checkSequence(before);
      const id = before[0]?.response?.id;
      expect(typeof id === 'string', `no response id in ${before[0]?.type}`);
      const cut = before.at(-1).sequence_number;
      const resumed = await client.responses.retrieve(id, { stream: true, starting_after: cut });
      const after = [];
      for await (const ev of resumed) after.push(ev);
      const types = checkSequence(after, cut);
      // Sequence numbers increase but are not contiguous: a text delta takes one
      // number per byte, so the stream can be resumed mid-text from the store.
      expect(after[0]?.sequence_number > cut, `resumed at ${after[0]?.sequence_number}, after ${cut}`);
      expect(types.at(-1) === 'response.completed', `resumed stream ends with ${types.at(-1)}`);
      const text = [...before, ...after].filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
      expect(text === 'one two three four five six seven eight nine ten eleven twelve', `text across the cut ${JSON.stringify(text)}`);
      // The helper replays the whole log and filters locally.
      const helper = client.responses.stream({ response_id: id, starting_after: cut });
      const seen = [];
      helper.on('event', (e) => seen.push(e.sequence_number));
      const final = await helper.finalResponse();
      expect(textOf(final) === text, `helper final text ${JSON.stringify(textOf(final))}`);
      expect(seen.length > 0 && seen.every((s) => s > cut), `helper emitted ${seen.join(',')} after ${cut}`);
      return { id, cut, resumedTypes: [...new Set(types)] };
    },
    // A local function tool: the response ends with a function_call item;
    // its output goes back with previous_response_id.
    async clientTool() {
      const first = await client.responses.create({ model: agent, input: `${v} look up order 42`, tools: [lookupOrder] });
      const call = first.output.find((it) => it.type === 'function_call');
      expect(call, `no function_call in ${JSON.stringify(first.output).slice(0, 300)}`);
      expect(call.name === 'lookup_order' && JSON.parse(call.arguments).id === '42', `call ${JSON.stringify(call)}`);
      expect(typeof call.call_id === 'string' && call.call_id !== '', `call_id ${call.call_id}`);
      expect(first.status === 'completed', `status ${first.status}`);
      const second = await client.responses.create({
        model: agent, previous_response_id: first.id, tools: [lookupOrder],
        input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ id: '42', status: `shipped-${v}` }) }],
      });
      const want = `Order said: {"id":"42","status":"shipped-${v}"}`;
      expect(second.output_text === want, `second ${JSON.stringify(second.output_text)}, want ${JSON.stringify(want)}`);
      return { callId: call.call_id };
    },
  };
}

const results = [];
const sent = {};
for (const pkg of packages) {
  const { default: OpenAI } = await import(pkg);
  const v = pkg === 'openai6' ? 'v6' : pkg === 'openai' ? 'v7' : pkg;
  const rec = recorder();
  // maxRetries 0: a failure shows at once.
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', maxRetries: 0, fetch: rec.fetch });
  results.push(...await runCases(casesFor(client, v), `${v}:`));
  sent[v] = rec.sent;
}
print(results, { sent });
