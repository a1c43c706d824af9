// Drives a running Stackbone server with the Vercel AI SDK (ai@7 +
// @ai-sdk/openai, pinned in package.json) as an application would:
// createOpenAI({baseURL}).chat(agent) with generateText / streamText and
// Output.object. Prints one JSON document {"results":[{name, ok, error,
// output}]} and exits 1 when a case failed.
//
//   node tests/clients/aisdk.mjs http://127.0.0.1:PORT [agent]
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, Output } from 'ai';
import { z } from 'zod';

const base = process.argv[2];
const agent = process.argv[3] ?? 'assistant';
if (!base) {
  console.error('usage: node aisdk.mjs http://127.0.0.1:PORT [agent]');
  process.exit(2);
}
const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
const weather = z.object({ city: z.string(), temp_c: z.number() });
const prompt = 'weather in Paris as JSON';

function checkWeather(out) {
  if (out?.city !== 'Paris' || out?.temp_c !== 21) throw new Error(`unexpected output ${JSON.stringify(out)}`);
}

const cases = {
  // maxRetries 0: a failure shows at once instead of after retries.
  async generateTextOutputObject() {
    const r = await generateText({ model: provider.chat(agent), output: Output.object({ schema: weather }), prompt, maxRetries: 0 });
    checkWeather(r.output);
    return r.output;
  },
  async streamTextOutputObject() {
    const r = streamText({ model: provider.chat(agent), output: Output.object({ schema: weather }), prompt, maxRetries: 0,
      onError: () => {} });
    const out = await r.output;
    checkWeather(out);
    return out;
  },
  async generateTextOutputJSON() {
    const r = await generateText({ model: provider.chat(agent), output: Output.json(), prompt, maxRetries: 0 });
    checkWeather(r.output);
    return r.output;
  },
};

const results = [];
for (const [name, run] of Object.entries(cases)) {
  try {
    results.push({ name, ok: true, output: await run() });
  } catch (err) {
    results.push({ name, ok: false, error: `${err?.name}: ${err?.message}` });
  }
}
process.stdout.write(JSON.stringify({ results }) + '\n');
process.exitCode = results.every((r) => r.ok) ? 0 : 1;
