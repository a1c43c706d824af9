// Drives a Stackbone server with the Vercel AI SDK's default OpenAI model,
// `createOpenAI({baseURL})(agent)`, which speaks POST /v1/responses in
// @ai-sdk/openai 4.x (pinned in package.json): generateText, streamText,
// and a tool with execute that the SDK runs and answers in its next step
// (stopWhen: stepCountIs(3)).
//
//   node responses-aisdk.mjs http://127.0.0.1:PORT [agent]
//
// Prints one JSON document {"results":[{name, ok, error, ...}], "sent":
// [...]} (sent: what the SDK POSTed) and exits 1 when a case failed. The
// texts follow the script in internal/server/responses_client_test.go.
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { z } from 'zod';
import { args, recorder, expect, runCases, print } from './responses-lib.mjs';

const { base, agent } = args('responses-aisdk.mjs');
const rec = recorder();
const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', fetch: rec.fetch });

const tools = {
  lookup_order: tool({
    description: 'Look up an order by id',
    inputSchema: z.object({ id: z.string() }),
    execute: async ({ id }) => ({ id, status: 'shipped-aisdk' }),
  }),
};

const cases = {
  // maxRetries 0: a failure shows at once instead of after retries.
  async generateText() {
    const r = await generateText({ model: openai(agent), prompt: 'aisdk hello there', maxRetries: 0 });
    expect(r.text === 'echo: aisdk hello there', `text ${JSON.stringify(r.text)}`);
    expect(r.finishReason === 'stop', `finishReason ${r.finishReason}`);
    expect(r.usage.totalTokens > 0, `usage ${JSON.stringify(r.usage)}`);
    return { text: r.text, responseId: r.response?.id };
  },
  async streamText() {
    let failure;
    const r = streamText({ model: openai(agent), prompt: 'aisdk stream this please', maxRetries: 0, onError: ({ error }) => { failure = error; } });
    const parts = [];
    for await (const p of r.fullStream) parts.push(p.type);
    if (failure) throw failure;
    const text = await r.text;
    expect(text === 'echo: aisdk stream this please', `text ${JSON.stringify(text)}`);
    expect(parts.includes('text-delta'), `parts ${parts.join(',')}`);
    expect(await r.finishReason === 'stop', `finishReason ${await r.finishReason}`);
    return { parts: [...new Set(parts)] };
  },
  // Step 1: the model says "Looking it up." and calls lookup_order; the SDK
  // runs it and sends step 2 with the call and its output (and, as store
  // defaults to true, an item_reference to step 1's message item).
  async clientTool() {
    const r = await generateText({ model: openai(agent), prompt: 'aisdk look up order 42', tools, stopWhen: stepCountIs(3), maxRetries: 0 });
    const want = 'Order said: {"id":"42","status":"shipped-aisdk"}';
    expect(r.text === want, `text ${JSON.stringify(r.text)}, want ${JSON.stringify(want)}`);
    expect(r.steps.length === 2, `steps ${r.steps.length}`);
    return { steps: r.steps.length };
  },
  async clientToolStream() {
    let failure;
    const r = streamText({ model: openai(agent), prompt: 'aisdk stream order 42', tools, stopWhen: stepCountIs(3), maxRetries: 0,
      onError: ({ error }) => { failure = error; } });
    const text = await r.text;
    if (failure) throw failure;
    const want = 'Order said: {"id":"42","status":"shipped-aisdk"}';
    expect(text.endsWith(want), `text ${JSON.stringify(text)}, want it to end with ${JSON.stringify(want)}`);
    return { steps: (await r.steps).length };
  },
};

print(await runCases(cases), { sent: rec.sent });
