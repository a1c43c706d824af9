// Double-texting with the official clients: on a session thread, a slow
// turn streams while a second message is sent with each multitask strategy
// (enqueue, interrupt, rollback, reject), as a chat UI whose user types
// again before the answer ends.
//
//   node multitask.mjs BASE_A BASE_B CONTROL_URL SESSION_PREFIX
//
// The first request goes to BASE_A, the second to BASE_B (two replicas of
// one PostgreSQL database, or one server twice). CONTROL_URL is the Go
// test's control of BASE_A's model upstream: POST /hold?marker=M holds the
// model call after the first turn's tool step (released by POST
// /release?marker=M), POST /break?marker=M lets that call stream one piece
// of its answer and then stall until the server stops it.
//
// Clients (each on its own session, x-stackbone-session): the openai Node
// SDK on Chat Completions (strategy in x-stackbone-multitask) and on
// Responses (metadata.multitask), @anthropic-ai/sdk on Messages (header),
// the AI SDK's openai() (Responses, providerOptions.openai.metadata) and
// openai.chat() (header); and the openai SDK on the agent "queued", whose
// agent file says multitask: enqueue, with no choice in the request.
//
// Every case's first message asks for the weather: the model calls the
// get_weather server tool ("Checking."), then its answer "Tool said: …" is
// held (enqueue) or cut after one piece (the others). Per strategy:
//   - enqueue: the second request waits in GET /v1/threads/{id}/queue with
//     nothing streamed; after the release the first ends, then the second's
//     stream starts and answers;
//   - interrupt: the first stream ends cancelled, with the partial answer
//     it had streamed; the second is answered;
//   - rollback: as interrupt, and GET /v1/threads/{id} holds none of the
//     first turn's messages;
//   - reject: the SDK's own 409 error (maxRetries 0: the SDKs retry a 409
//     after retry-after by themselves), code run_in_progress; then POST
//     /v1/threads/{id}/cancel ends the first.
// The Go test (internal/server/multitask_client_test.go) checks what the
// model saw and counts model calls and tool runs. Prints one JSON document
// {"results":[{name, ok, error, first, second, ...}]} and exits 1 when a
// case failed.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { expect, runCases, print } from './responses-lib.mjs';

const [baseA, baseB, control, prefix] = process.argv.slice(2);
if (!baseA || !baseB || !control || !prefix) {
  console.error('usage: node multitask.mjs BASE_A BASE_B CONTROL_URL SESSION_PREFIX');
  process.exit(2);
}

const ctl = async (op, marker) => {
  const r = await fetch(`${control}/${op}?marker=${encodeURIComponent(marker)}`, { method: 'POST' });
  expect(r.ok, `control ${op}: ${r.status}`);
};

const until = async (what, cond, ms = 20000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

const getJSON = async (url) => {
  const r = await fetch(url);
  const body = await r.json();
  expect(r.ok, `GET ${url}: ${r.status} ${JSON.stringify(body)}`);
  return body;
};

// A stream being read: text so far, when its first text came, how it
// ended (error: what the SDK threw or surfaced), when.
function reader(iterate) {
  const s = { text: '', firstTextAt: 0, endedAt: 0, error: null, events: [] };
  s.done = (async () => {
    try {
      await iterate((delta) => {
        if (!delta) return;
        if (!s.firstTextAt) s.firstTextAt = performance.now();
        s.text += delta;
      }, (ev) => s.events.push(ev));
    } catch (e) {
      s.error = describe(e);
    }
    s.endedAt = performance.now();
    return s;
  })();
  return s;
}

// describe is what an SDK error says: its class, status and code.
function describe(e) {
  const body = e?.error ?? (typeof e?.responseBody === 'string' ? safeJSON(e.responseBody) : undefined);
  return {
    name: e?.constructor?.name ?? typeof e,
    status: e?.status ?? e?.statusCode,
    code: e?.code ?? body?.code ?? body?.error?.code,
    type: e?.type ?? body?.type ?? body?.error?.type,
    message: String(e?.message ?? e).slice(0, 300),
  };
}

function safeJSON(s) {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

// Each client: start(base, session, messages, strategy) starts a streamed
// turn and returns its reader. messages are the conversation as that
// client sends it: full history on Chat Completions and Messages; the new
// message only on Responses (the session holds the rest).
const hdr = (session, strategy) => ({ 'x-stackbone-session': session, ...(strategy ? { 'x-stackbone-multitask': strategy } : {}) });

const clients = {
  'sdk-chat': {
    history: true,
    start(base, session, messages, strategy, model = 'assistant') {
      const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
      return reader(async (text, ev) => {
        const stream = await client.chat.completions.create({ model, stream: true, messages }, { headers: hdr(session, strategy) });
        for await (const chunk of stream) {
          ev(chunk.choices?.[0]?.finish_reason ?? 'chunk');
          text(chunk.choices?.[0]?.delta?.content);
        }
      });
    },
  },
  'sdk-resp': {
    history: false,
    start(base, session, messages, strategy) {
      const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
      return reader(async (text, ev) => {
        const input = messages.at(-1).content;
        const stream = await client.responses.create({ model: 'assistant', stream: true, input, ...(strategy ? { metadata: { multitask: strategy } } : {}) },
          { headers: hdr(session) });
        for await (const e of stream) {
          ev(e.type);
          if (e.type === 'response.output_text.delta') text(e.delta);
          if (e.type === 'response.failed') {
            const err = new Error(`response.failed: ${JSON.stringify(e.response?.error)}`);
            err.code = e.response?.error?.code;
            err.type = e.response?.status;
            throw err;
          }
        }
      });
    },
  },
  anth: {
    history: true,
    start(base, session, messages, strategy) {
      const client = new Anthropic({ baseURL: base, apiKey: 'sk-ant-local', maxRetries: 0 });
      return reader(async (text, ev) => {
        const stream = await client.messages.create({ model: 'assistant', max_tokens: 256, stream: true, messages }, { headers: hdr(session, strategy) });
        for await (const e of stream) {
          ev(e.type);
          if (e.type === 'content_block_delta' && e.delta?.type === 'text_delta') text(e.delta.text);
        }
      });
    },
  },
  'aisdk-resp': {
    // On a named conversation, Responses input is new items only (the
    // thread holds the rest), so the app sends the new message alone.
    history: false,
    start(base, session, messages, strategy) {
      const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', headers: hdr(session) });
      return aisdk(provider('assistant'), messages, strategy ? { openai: { metadata: { multitask: strategy } } } : undefined, undefined);
    },
  },
  'aisdk-chat': {
    history: true,
    start(base, session, messages, strategy) {
      const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', headers: hdr(session) });
      return aisdk(provider.chat('assistant'), messages, undefined, strategy ? { 'x-stackbone-multitask': strategy } : undefined);
    },
  },
};

function aisdk(model, messages, providerOptions, headers) {
  return reader(async (text, ev) => {
    const r = streamText({ model, messages, providerOptions, headers, maxRetries: 0, onError: () => {} });
    for await (const part of r.fullStream) {
      ev(part.type === 'finish' ? `finish:${JSON.stringify(part.finishReason)}:${JSON.stringify(part.rawFinishReason)}` : part.type);
      if (part.type === 'text-delta') text(part.text ?? part.textDelta);
      if (part.type === 'error') throw part.error;
      // A Responses stream that ends response.failed (cancelled) is a
      // finish with reason "error" to the AI SDK, without an error part.
      if (part.type === 'finish' && part.finishReason === 'error') {
        const err = new Error('finishReason error');
        err.code = `finish:${part.finishReason}`;
        throw err;
      }
    }
  });
}

const user = (content) => ({ role: 'user', content });

// wantRuns checks the thread's runs (GET /v1/threads/{id}/runs), oldest
// first, by status.
async function wantRuns(session, want) {
  const runs = await getJSON(`${baseA}/v1/threads/${encodeURIComponent(session)}/runs`);
  const got = runs.data.map((r) => ({ status: r.status, started: r.startedAt })).sort((x, y) => (x.started < y.started ? -1 : 1)).map((r) => r.status);
  expect(JSON.stringify(got) === JSON.stringify(want), `runs ${JSON.stringify(got)}; want ${JSON.stringify(want)}`);
}

// run drives one strategy with client c on its own session; model is the
// agent (queued: its agent file chooses enqueue, the request names none).
async function run(name, c, strategy, { model, named = true } = {}) {
  const session = `${prefix}-${name}`;
  const first = `${name}: weather report`, second = `${name}: and a joke`;
  const start = (base, msgs, strat) => (model ? c.start(base, session, msgs, strat, model) : c.start(base, session, msgs, strat));
  const choose = named ? strategy : undefined;
  await ctl(strategy === 'enqueue' ? 'hold' : 'break', first);
  const s1 = start(baseA, [user(first)]);
  const out = { session, firstMarker: first, secondMarker: second };

  if (strategy === 'enqueue') {
    await until('the first turn to stream', () => s1.text.includes('Checking.') || s1.endedAt);
    expect(!s1.endedAt, `the first turn ended early: ${JSON.stringify(s1)}`);
    const s2 = start(baseB, c.history ? [user(first), user(second)] : [user(second)], choose);
    let queue;
    await until('the second message in the queue', async () => {
      queue = await getJSON(`${baseB}/v1/threads/${encodeURIComponent(session)}/queue`);
      return queue.data.length === 1 || s2.endedAt;
    });
    expect(queue.data.length === 1, `queue ${JSON.stringify(queue)}; second ${JSON.stringify(s2)}`);
    expect(!s2.firstTextAt && !s1.endedAt, 'the queued request streamed before the first turn ended');
    await ctl('release', first);
    await Promise.all([s1.done, s2.done]);
    expect(!s1.error, `the first turn: ${JSON.stringify(s1.error)}`);
    expect(!s2.error, `the queued turn: ${JSON.stringify(s2.error)}`);
    expect(s1.text.includes('a light wind from the west.'), `the first answer ${JSON.stringify(s1.text)}`);
    expect(s2.text === `echo: ${second}`, `the queued answer ${JSON.stringify(s2.text)}`);
    await wantRuns(session, ['idle', 'idle']);
    // That the queued turn began after the first ended is checked on the
    // server's run records (the Go test): the two streams travel on two
    // connections, and an SDK's stream pipeline may surface the first's
    // last text after the second's first.
    return { ...out, first: s1.text, second: s2.text, queuedFor: Math.round(s2.firstTextAt - s1.endedAt) };
  }

  await until('the first answer to stream after the tool', () => /Tool/.test(s1.text) || s1.endedAt);
  expect(!s1.endedAt, `the first turn ended early: ${JSON.stringify(s1)}`);
  const partial = s1.text;

  if (strategy === 'reject') {
    const s2 = start(baseB, c.history ? [user(first), user(second)] : [user(second)], choose);
    await s2.done;
    expect(s2.error && s2.error.status === 409, `the second message: ${JSON.stringify(s2)}`);
    expect(JSON.stringify(s2.error).includes('run_in_progress'), `the 409 does not say run_in_progress: ${JSON.stringify(s2.error)}`);
    expect(!s1.endedAt, 'the rejected message ended the running turn');
    const r = await fetch(`${baseA}/v1/threads/${encodeURIComponent(session)}/cancel`, { method: 'POST' });
    expect(r.ok, `cancel: ${r.status}`);
    await s1.done;
    expect(s1.error && /cancel|finish:error/.test(JSON.stringify(s1.error)), `the cancelled first turn's end: ${JSON.stringify(s1)}`);
    await wantRuns(session, ['cancelled']);
    return { ...out, first: s1.text, partial, rejected: s2.error, firstEnd: s1.error };
  }

  // interrupt, rollback: a UI that keeps the unanswered question sends it
  // again (interrupt); one that drops it sends the new message alone.
  const msgs = c.history && strategy === 'interrupt' ? [user(first), user(second)] : [user(second)];
  const s2 = start(baseB, msgs, choose);
  await Promise.all([s1.done, s2.done]);
  expect(s1.error && /cancel|finish:error/.test(JSON.stringify(s1.error)), `the interrupted turn's end: ${JSON.stringify(s1.error)} events ${JSON.stringify(s1.events.slice(-3))}`);
  await wantRuns(session, ['cancelled', 'idle']);
  expect(s1.text === partial, `the interrupted turn streamed more after the cut: ${JSON.stringify(s1.text)}`);
  expect(!s2.error, `the second message: ${JSON.stringify(s2.error)}`);
  expect(s2.text === `echo: ${second}`, `the second answer ${JSON.stringify(s2.text)}`);
  const th = await getJSON(`${baseB}/v1/threads/${encodeURIComponent(session)}`);
  const contents = th.messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
  if (strategy === 'rollback') {
    expect(!contents.some((t) => t.includes(first) || t.includes('Checking.') || t.includes('Tool')),
      `the rolled-back turn is still on the thread: ${JSON.stringify(contents)}`);
    expect(contents.length === 2 && contents[0] === second, `the thread after the rollback: ${JSON.stringify(contents)}`);
  } else {
    expect(contents.filter((t) => t === first).length === 1, `the first question on the thread: ${JSON.stringify(contents)}`);
  }
  return { ...out, first: s1.text, partial, firstEnd: s1.error, second: s2.text, thread: contents };
}

const strategies = ['enqueue', 'interrupt', 'rollback', 'reject'];
const cases = {};
for (const [tag, c] of Object.entries(clients)) {
  for (const st of strategies) cases[`${tag} ${st}`] = () => run(`${tag} ${st}`, c, st);
}
// The agent file's multitask: enqueue, the request naming no strategy.
cases['sdk-chat agent-enqueue'] = () => run('sdk-chat agent-enqueue', clients['sdk-chat'], 'enqueue', { model: 'queued', named: false });

print(await runCases(cases));
process.exit(process.exitCode ?? 0);
