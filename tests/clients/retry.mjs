// Drives a Stackbone server with the Vercel AI SDK in its default retrying
// mode (generateText with the default maxRetries) through the OpenAI wire
// (`createOpenAI({ baseURL }).chat(agent)`), for a turn whose upstream fails
// after a server tool ran. Prints one JSON document: what the SDK reported.
//
//   node retry.mjs http://127.0.0.1:PORT [SESSION]
//
// With SESSION the turn is a durable one (the x-stackbone-session header).
import { generateText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

const base = process.argv[2];
if (!base) {
  console.error('usage: node retry.mjs BASE_URL');
  process.exit(2);
}
// The SDK waits 2 s, then 4 s, between attempts unless the response asks for
// less: the fetch below adds `retry-after-ms: 1` to every response so the
// test does not sleep. The attempts and what the server sees are unchanged.
const fetchNow = async (input, init) => {
  const res = await fetch(input, init);
  const headers = new Headers(res.headers);
  headers.set('retry-after-ms', '1');
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
};
const session = process.argv[3];
const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', fetch: fetchNow,
  headers: session ? { 'x-stackbone-session': session } : undefined });
const out = { ok: false };
try {
  const r = await generateText({ model: openai.chat('assistant'), prompt: 'What is the weather in Paris?' });
  out.ok = true;
  out.text = r.text;
} catch (err) {
  out.error = err?.name ?? String(err);
  out.reason = err?.reason;
  out.attempts = Array.isArray(err?.errors) ? err.errors.length : 1;
  out.statuses = (Array.isArray(err?.errors) ? err.errors : [err]).map((e) => e?.statusCode ?? null);
}
process.stdout.write(JSON.stringify(out) + '\n');
