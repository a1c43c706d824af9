// Drives a Stackbone session (the x-stackbone-session header) through the
// OpenAI Chat Completions wire with two clients as chat apps use them, each
// sending its whole conversation on every request and naming each user
// action with an Idempotency-Key (so the SDKs' own retries of a request stay
// retries, and a regenerate, which sends the same conversation again, is a
// new turn): the official openai Node SDK and the Vercel AI SDK's
// `openai.chat()`. For each: a turn, a second turn, a regenerate of the
// second answer (the conversation up to the second question again), an
// edit of the second question, and a turn going on from the edit. Prints
// one JSON document {"results":[{name, ok, error, ...}]} and exits 1 when a
// case failed; the Go test (internal/server/branches_client_test.go) checks
// what the model saw.
//
//   node chat-branches.mjs http://127.0.0.1:PORT AGENT SESSION_PREFIX
import OpenAI from 'openai';
import { generateText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { expect, runCases, print } from './responses-lib.mjs';

const [base, agent, prefix] = process.argv.slice(2);
if (!base || !agent || !prefix) {
  console.error('usage: node chat-branches.mjs BASE_URL AGENT SESSION_PREFIX');
  process.exit(2);
}

const u = (content) => ({ role: 'user', content });
const a = (content) => ({ role: 'assistant', content });

let action = 0;
const key = () => `${prefix}-action-${++action}`;

// openai-node: chat.completions.create with the whole conversation.
const sdk = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', defaultHeaders: { 'x-stackbone-session': `${prefix}-openai` } });
async function sdkSay(messages) {
  const r = await sdk.chat.completions.create({ model: agent, messages }, { headers: { 'Idempotency-Key': key() } });
  return r.choices[0].message.content;
}

// The AI SDK: generateText with the whole conversation.
const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', headers: { 'x-stackbone-session': `${prefix}-aisdk` } });
async function aiSay(messages) {
  const r = await generateText({ model: provider.chat(agent), messages, headers: { 'Idempotency-Key': key() } });
  return r.text;
}

function casesFor(say, tag) {
  const q1 = `${tag} branch first question`;
  const q2 = `${tag} branch second question`;
  const q2e = `${tag} branch second question, edited`;
  const q3 = `${tag} branch after the edit`;
  let a1, a2;
  return {
    async turns() {
      a1 = await say([u(q1)]);
      expect(a1 === `echo: ${q1}`, `first answer ${JSON.stringify(a1)}`);
      a2 = await say([u(q1), a(a1), u(q2)]);
      expect(a2 === `echo: ${q2}`, `second answer ${JSON.stringify(a2)}`);
      return { a1, a2 };
    },
    // Regenerate: the conversation up to the second question again.
    async regenerate() {
      const again = await say([u(q1), a(a1), u(q2)]);
      expect(again === `echo: ${q2}`, `regenerated answer ${JSON.stringify(again)}`);
      return { again };
    },
    // Edit the second question: the conversation up to the first answer,
    // then the edited question.
    async edit() {
      const edited = await say([u(q1), a(a1), u(q2e)]);
      expect(edited === `echo: ${q2e}`, `answer to the edit ${JSON.stringify(edited)}`);
      const on = await say([u(q1), a(a1), u(q2e), a(edited), u(q3)]);
      expect(on === `echo: ${q3}`, `answer after the edit ${JSON.stringify(on)}`);
      return { edited, on };
    },
  };
}

const results = [
  ...(await runCases(casesFor(sdkSay, 'sdk'), 'openai: ')),
  ...(await runCases(casesFor(aiSay, 'aisdk'), 'aisdk: ')),
];
print(results);
