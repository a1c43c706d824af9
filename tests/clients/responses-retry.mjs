// Drives POST /v1/responses with the official openai SDK (7.x) and its own
// retries (the default maxRetries, 2), through a proxy that loses the answer
// of each case's first attempt (it closes the connection; the SDK retries a
// connection error by itself). Every case asks the billing agent to charge a
// card, which must happen once. The SDK sends no Idempotency-Key by itself
// (its idempotencyHeader is unset); the cases named *-key pass one in
// `headers`, which the SDK sends again on each retry of the request.
// Prints one JSON document {"results":[{name, ok, id, status, text, error}]}.
//
//   node responses-retry.mjs http://PROXY:PORT [agent]
//
// Each request carries x-test-case: NAME so the proxy knows which case's
// first attempt it is losing.
import OpenAI from 'openai';
import { args, textOf } from './responses-lib.mjs';

const { base, agent } = args('responses-retry.mjs');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local' });

const cases = [
  { name: 'json' },
  { name: 'stream', stream: true },
  { name: 'background', background: true },
  { name: 'json-key', key: true },
  { name: 'stream-key', stream: true, key: true },
  { name: 'background-key', background: true, key: true },
];

const terminal = new Set(['response.completed', 'response.failed', 'response.incomplete']);

// last returns the response of a stream's terminal event.
async function last(stream) {
  let resp;
  for await (const ev of stream) {
    if (terminal.has(ev.type)) resp = ev.response;
  }
  return resp;
}

const results = [];
for (const c of cases) {
  const r = { name: c.name, ok: false };
  try {
    const headers = { 'x-test-case': c.name };
    if (c.key) headers['Idempotency-Key'] = `charge-${c.name}-${crypto.randomUUID()}`;
    const body = { model: agent, input: `charge my card (${c.name})` };
    if (c.stream) body.stream = true;
    if (c.background) body.background = true;
    let resp;
    if (c.stream) {
      resp = await last(await client.responses.create(body, { headers }));
    } else {
      resp = await client.responses.create(body, { headers });
      if (c.background) {
        r.createdId = resp.id;
        resp = await last(await client.responses.retrieve(resp.id, { stream: true }));
      }
    }
    r.id = resp?.id;
    r.status = resp?.status;
    r.text = textOf(resp);
    r.ok = r.status === 'completed' && (!c.background || r.createdId === r.id);
    if (!r.ok) r.error = `answer ${JSON.stringify(resp).slice(0, 300)}`;
  } catch (err) {
    r.error = `${err?.name ?? 'Error'}: ${err?.message ?? err}`;
  }
  results.push(r);
}
process.stdout.write(JSON.stringify({ results }) + '\n');
process.exit(results.every((r) => r.ok) ? 0 : 1);
