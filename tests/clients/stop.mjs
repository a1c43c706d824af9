// Stop, then a new message at once, as a chat UI does, with each client in
// its default mode: the official openai Node SDK (a streamed
// chat.completions.create whose controller is aborted once the response
// started; a Responses stream, continued with previous_response_id), the
// Vercel AI SDK (streamText with an AbortSignal, aborted at its first part,
// on openai.chat() and on its default Responses model) and
// @anthropic-ai/sdk (a streamed messages.create whose controller is aborted
// once the response started). The turn to stop asks for "a
// long story", which the Go test holds at the model. Prints one JSON
// document {"results":[{name, ok, error, stopToAnswerMs, answer}]} and
// exits 1 when a case failed.
//
//   node stop.mjs http://127.0.0.1:PORT AGENT SESSION_PREFIX
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { streamText, generateText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { expect, runCases, print } from './responses-lib.mjs';

const [base, agent, prefix] = process.argv.slice(2);
if (!base || !agent || !prefix) {
  console.error('usage: node stop.mjs BASE_URL AGENT SESSION_PREFIX');
  process.exit(2);
}

const story = (tag) => ({ role: 'user', content: `${tag}: tell me a long story` });
const next = (tag) => ({ role: 'user', content: `${tag}: never mind, hi` });

const cases = {
  async openai() {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', defaultHeaders: { 'x-stackbone-session': `${prefix}-openai` } });
    const stream = await client.chat.completions.create({ model: agent, stream: true, messages: [story('sdk')] });
    const t0 = performance.now();
    stream.controller.abort();
    const r = await client.chat.completions.create({ model: agent, messages: [story('sdk'), { role: 'assistant', content: '' }, next('sdk')] });
    const ms = performance.now() - t0;
    const answer = r.choices[0].message.content;
    expect(answer === 'echo: sdk: never mind, hi', `answer ${JSON.stringify(answer)}`);
    return { stopToAnswerMs: Math.round(ms), answer };
  },
  async aisdk() {
    const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', headers: { 'x-stackbone-session': `${prefix}-aisdk` } });
    const stop = new AbortController();
    const result = streamText({ model: provider.chat(agent), messages: [story('aisdk')], abortSignal: stop.signal, onError: () => {} });
    let t0;
    try {
      for await (const part of result.fullStream) {
        t0 = performance.now();
        stop.abort();
        break;
      }
    } catch {}
    t0 ??= performance.now();
    const r = await generateText({ model: provider.chat(agent), messages: [story('aisdk'), { role: 'assistant', content: '' }, next('aisdk')] });
    const ms = performance.now() - t0;
    expect(r.text === 'echo: aisdk: never mind, hi', `answer ${JSON.stringify(r.text)}`);
    return { stopToAnswerMs: Math.round(ms), answer: r.text };
  },
  // @anthropic-ai/sdk on Messages: a streamed message aborted once the
  // response started, then the conversation with the next question.
  async anthropic() {
    const client = new Anthropic({ baseURL: base, apiKey: 'sk-ant-local', defaultHeaders: { 'x-stackbone-session': `${prefix}-anthropic` } });
    const stream = await client.messages.create({ model: agent, max_tokens: 256, stream: true, messages: [story('anth')] });
    const t0 = performance.now();
    stream.controller.abort();
    const r = await client.messages.create({ model: agent, max_tokens: 256, messages: [story('anth'), { role: 'assistant', content: '…' }, next('anth')] });
    const ms = performance.now() - t0;
    const answer = r.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
    expect(answer === 'echo: anth: never mind, hi', `answer ${JSON.stringify(answer)}`);
    return { stopToAnswerMs: Math.round(ms), answer };
  },
  // The openai SDK on Responses: a streamed response stopped once it
  // started, then the next message continues it (previous_response_id),
  // as a chat UI on Responses does.
  async responses() {
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
    const stream = await client.responses.create({ model: agent, stream: true, input: 'responses: tell me a long story' });
    let id;
    for await (const ev of stream) {
      if (ev.type === 'response.created') { id = ev.response.id; break; }
    }
    const t0 = performance.now();
    stream.controller.abort();
    expect(typeof id === 'string', 'no response.created before the stop');
    const r = await client.responses.create({ model: agent, previous_response_id: id, input: 'responses: never mind, hi' });
    const ms = performance.now() - t0;
    const answer = r.output_text;
    expect(answer === 'echo: responses: never mind, hi', `answer ${JSON.stringify(answer)}`);
    return { stopToAnswerMs: Math.round(ms), answer };
  },
  // The AI SDK's default provider model, openai(agent), which speaks
  // Responses, on a session: streamText aborted at its first part, then
  // generateText with the conversation.
  async aisdkResponses() {
    const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', headers: { 'x-stackbone-session': `${prefix}-aisdk-responses` } });
    const stop = new AbortController();
    const result = streamText({ model: provider(agent), messages: [story('air')], abortSignal: stop.signal, onError: () => {} });
    let t0;
    try {
      for await (const part of result.fullStream) {
        t0 = performance.now();
        stop.abort();
        break;
      }
    } catch {}
    t0 ??= performance.now();
    const r = await generateText({ model: provider(agent), messages: [story('air'), next('air')] });
    const ms = performance.now() - t0;
    expect(r.text === 'echo: air: never mind, hi', `answer ${JSON.stringify(r.text)}`);
    return { stopToAnswerMs: Math.round(ms), answer: r.text };
  },
};

print(await runCases(cases));
