// Drives a Stackbone server with the OpenAI Agents SDK (@openai/agents,
// pinned in package.json) in its default model settings: the Responses API
// through an OpenAI client pointed at the server (setDefaultOpenAIClient),
// an Agent whose model is the Stackbone agent's name, run() without and
// with streaming, and a local tool() the SDK runs itself and answers with
// function_call_output. Tracing is off: its exporter would call OpenAI.
//
//   node responses-agents.mjs http://127.0.0.1:PORT [agent]
//
// Prints one JSON document {"results":[{name, ok, error, ...}], "sent":
// [...]} (sent: what the SDK POSTed to /v1/responses) and exits 1 when a
// case failed. The texts follow the script in
// internal/server/responses_client_test.go.
import OpenAI from 'openai';
import { Agent, run, tool, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { args, recorder, expect, runCases, print } from './responses-lib.mjs';

const { base, agent } = args('responses-agents.mjs');
const rec = recorder();
setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', maxRetries: 0, fetch: rec.fetch }));

const lookupOrder = tool({
  name: 'lookup_order',
  description: 'Look up an order by id',
  parameters: z.object({ id: z.string() }),
  execute: async ({ id }) => JSON.stringify({ id, status: 'shipped-agents' }),
});
const plain = new Agent({ name: agent, model: agent, instructions: 'Answer briefly.' });
const withTool = new Agent({ name: agent, model: agent, instructions: 'Use lookup_order for orders.', tools: [lookupOrder] });

const cases = {
  async run() {
    const r = await run(plain, 'agents hello there');
    expect(r.finalOutput === 'echo: agents hello there', `finalOutput ${JSON.stringify(r.finalOutput)}`);
    return { lastResponseId: r.lastResponseId, text: r.finalOutput };
  },
  async runStream() {
    const s = await run(plain, 'agents stream this please', { stream: true });
    const raw = [];
    let text = '';
    for await (const ev of s) {
      if (ev.type === 'raw_model_stream_event') {
        raw.push(ev.data.type === 'model' ? ev.data.event?.type : ev.data.type);
        if (ev.data.type === 'output_text_delta') text += ev.data.delta;
      }
    }
    await s.completed;
    expect(!s.error, `stream error ${s.error}`);
    expect(s.finalOutput === 'echo: agents stream this please', `finalOutput ${JSON.stringify(s.finalOutput)}`);
    expect(text === s.finalOutput, `deltas ${JSON.stringify(text)}`);
    for (const t of ['response_started', 'output_text_delta', 'response_done']) expect(raw.includes(t), `no ${t} in ${raw.join(',')}`);
    return { lastResponseId: s.lastResponseId, raw: [...new Set(raw)] };
  },
  // The model calls lookup_order; the SDK runs it and sends the output in
  // its next request, then returns the model's final text.
  async localTool() {
    const r = await run(withTool, 'agents look up order 42');
    const want = 'Order said: {"id":"42","status":"shipped-agents"}';
    expect(r.finalOutput === want, `finalOutput ${JSON.stringify(r.finalOutput)}, want ${JSON.stringify(want)}`);
    const kinds = r.newItems.map((it) => it.type);
    expect(kinds.includes('tool_call_item') && kinds.includes('tool_call_output_item'), `items ${kinds.join(',')}`);
    return { items: kinds };
  },
  async localToolStream() {
    const s = await run(withTool, 'agents stream order 42', { stream: true });
    for await (const _ of s) { /* drain */ }
    await s.completed;
    const want = 'Order said: {"id":"42","status":"shipped-agents"}';
    expect(s.finalOutput === want, `finalOutput ${JSON.stringify(s.finalOutput)}`);
    return {};
  },
};

print(await runCases(cases), { sent: rec.sent });
