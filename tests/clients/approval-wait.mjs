// Drives a Stackbone server with agent-loop clients, each in its default
// mode, through a turn that needs a human's approval, sending
// `x-stackbone-approval: wait` so the request waits in-band for the
// decision (the Go test approves it from the API or the CLI meanwhile)
// and ends with the resumed turn's answer:
//   - aisdk:     the AI SDK's generateText with tools + stopWhen through openai.chat()
//   - chat:      the openai SDK on Chat Completions (create, then stream)
//   - responses: the openai SDK on Responses (create, then stream)
//   - agents:    the OpenAI Agents SDK's run() (its default Responses model)
//   - langchain: LangChain's createAgent over ChatOpenAI (its default Chat
//                Completions mode), invoke and stream
//
//   node approval-wait.mjs http://127.0.0.1:PORT [agent] CLIENT
//
// Prints one JSON document {"results":[{name, ok, error, text}]} and exits 1
// when a case failed. The texts follow stacktest.DefaultScript ("refund …"
// calls refund, which needs approval; then "Refund result: …").
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText, stepCountIs, tool as aiTool } from 'ai';
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents';
import { createAgent, tool as lcTool } from 'langchain';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { args, expect, runCases, print, textOf } from './responses-lib.mjs';

const { base, agent, rest } = args('approval-wait.mjs');
const which = rest[0];
const wait = { 'x-stackbone-approval': 'wait' };
let n = 0;
// session names a fresh durable thread for the chat wire.
const session = () => ({ ...wait, 'x-stackbone-session': `wait-${which}-${Date.now()}-${++n}` });

// resumed checks the text is the resumed turn's answer, not the pause's.
function resumed(text) {
  expect(typeof text === 'string' && text.includes('Refund result: ') && text.includes('"refunded":19.99'), `text ${JSON.stringify(text)}`);
  expect(!text.includes('Waiting for approval'), `the waiting note in ${JSON.stringify(text)}`);
}

const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });

const all = {
  aisdk: {
    // A tool the client offers (an agent-loop client always has some); the
    // model calls the server's refund, which the client never sees.
    async generateText() {
      const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
      const r = await generateText({
        model: provider.chat(agent),
        prompt: 'please refund my order',
        headers: session(),
        tools: { lookup: aiTool({ description: 'Look something up', inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q }) },
        stopWhen: stepCountIs(5),
      });
      resumed(r.text);
      expect(r.finishReason === 'stop', `finishReason ${r.finishReason}`);
      expect(r.steps.length === 1, `steps ${r.steps.length}`);
      return { text: r.text };
    },
    async streamText() {
      const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });
      const r = streamText({ model: provider.chat(agent), prompt: 'please refund my order', headers: session(), stopWhen: stepCountIs(5) });
      const text = await r.text;
      resumed(text);
      expect((await r.finishReason) === 'stop', `finishReason ${await r.finishReason}`);
      return { text };
    },
  },
  chat: {
    async create() {
      const r = await openai.chat.completions.create({ model: agent, messages: [{ role: 'user', content: 'please refund my order' }] }, { headers: session() });
      const ch = r.choices[0];
      resumed(ch.message.content);
      expect(ch.finish_reason === 'stop' && !ch.message.tool_calls?.length, `finish ${ch.finish_reason}, tool_calls ${JSON.stringify(ch.message.tool_calls)}`);
      return { text: ch.message.content };
    },
    async stream() {
      const s = await openai.chat.completions.create({ model: agent, stream: true, messages: [{ role: 'user', content: 'please refund my order' }] }, { headers: session() });
      let text = '';
      let finish = null;
      let calls = 0;
      for await (const c of s) {
        const ch = c.choices[0];
        if (!ch) continue;
        text += ch.delta?.content ?? '';
        calls += ch.delta?.tool_calls?.length ?? 0;
        finish = ch.finish_reason ?? finish;
      }
      resumed(text);
      expect(finish === 'stop' && calls === 0, `finish ${finish}, tool calls ${calls}`);
      return { text };
    },
  },
  responses: {
    async create() {
      const r = await openai.responses.create({ model: agent, input: 'please refund my order' }, { headers: wait });
      const text = textOf(r);
      resumed(text);
      expect(r.status === 'completed' && !r.output.some((it) => it.type === 'function_call'), `status ${r.status}, output ${r.output.map((it) => it.type)}`);
      return { text };
    },
    async stream() {
      const s = await openai.responses.create({ model: agent, input: 'please refund my order', stream: true }, { headers: wait });
      let done = null;
      for await (const ev of s) if (ev.type === 'response.completed') done = ev.response;
      expect(done !== null, 'no response.completed');
      const text = textOf(done);
      resumed(text);
      expect(!done.output.some((it) => it.type === 'function_call'), `output ${done.output.map((it) => it.type)}`);
      return { text };
    },
  },
  agents: {
    async run() {
      setTracingDisabled(true);
      setDefaultOpenAIClient(new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', defaultHeaders: wait }));
      const a = new Agent({ name: agent, model: agent, instructions: 'Handle refunds.' });
      const r = await run(a, 'please refund my order');
      resumed(r.finalOutput);
      return { text: r.finalOutput };
    },
    async runStream() {
      const a = new Agent({ name: agent, model: agent, instructions: 'Handle refunds.' });
      const s = await run(a, 'please refund my order', { stream: true });
      for await (const _ of s) { /* drain */ }
      await s.completed;
      expect(!s.error, `stream error ${s.error}`);
      resumed(s.finalOutput);
      return { text: s.finalOutput };
    },
  },
  langchain: {
    async invoke() {
      const a = langchainAgent();
      const r = await a.invoke({ messages: [{ role: 'user', content: 'please refund my order' }] });
      const last = r.messages[r.messages.length - 1];
      const text = typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
      resumed(text);
      expect(!(last.tool_calls?.length), `tool_calls ${JSON.stringify(last.tool_calls)}`);
      return { text };
    },
    async stream() {
      const a = langchainAgent();
      let text = '';
      for await (const [chunk] of await a.stream({ messages: [{ role: 'user', content: 'please refund my order' }] }, { streamMode: 'messages' })) {
        if (typeof chunk.content === 'string') text += chunk.content;
      }
      resumed(text);
      return { text };
    },
  },
};

// langchainAgent is LangChain's createAgent with a client tool, over
// ChatOpenAI on a fresh durable thread with the wait header.
function langchainAgent() {
  const model = new ChatOpenAI({ model: agent, apiKey: 'sk-local', configuration: { baseURL: `${base}/v1`, defaultHeaders: session() } });
  const lookup = lcTool(async ({ q }) => q, { name: 'lookup', description: 'Look something up', schema: z.object({ q: z.string() }) });
  return createAgent({ model, tools: [lookup] });
}

if (!all[which]) {
  console.error(`unknown client ${which} (one of ${Object.keys(all).join(', ')})`);
  process.exit(2);
}
print(await runCases(all[which], `${which}.`));
