// Shared by the responses-*.mjs scripts: argument parsing, a fetch that
// records what a client sends to POST /v1/responses, and the case runner
// that prints one JSON document {"results":[{name, ok, error, ...}]}.

// args returns the server's base URL (no /v1) and the agent name, or exits
// with a usage line.
export function args(script) {
  const base = process.argv[2];
  const agent = process.argv[3] ?? 'assistant';
  if (!base) {
    console.error(`usage: node ${script} http://127.0.0.1:PORT [agent] [...]`);
    process.exit(2);
  }
  return { base, agent, rest: process.argv.slice(4) };
}

// recorder returns a fetch that passes every request through and keeps a
// summary of each JSON body POSTed to /v1/responses: what the client sends
// by default (store, previous_response_id, background, stream, the input
// item types, the tools' names).
export function recorder() {
  const sent = [];
  const fetchRec = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const method = init?.method ?? (typeof input === 'object' && 'method' in input ? input.method : 'GET');
    if (method === 'POST' && /\/v1\/responses$/.test(new URL(url).pathname) && typeof init?.body === 'string') {
      try {
        sent.push(summarize(JSON.parse(init.body)));
      } catch {
        sent.push({ unparsed: true });
      }
    } else if (method === 'GET' && /\/v1\/responses\//.test(new URL(url).pathname)) {
      const u = new URL(url);
      sent.push({ get: u.pathname, query: Object.fromEntries(u.searchParams) });
    }
    return fetch(input, init);
  };
  return { sent, fetch: fetchRec };
}

function summarize(b) {
  const input = typeof b.input === 'string' ? 'string'
    : Array.isArray(b.input) ? b.input.map((it) => it.type ?? (it.role ? `message(${it.role})` : '?')) : b.input;
  const keys = Object.keys(b).filter((k) => b[k] !== undefined).sort();
  return {
    keys,
    model: b.model,
    store: b.store,
    stream: b.stream,
    background: b.background,
    previous_response_id: b.previous_response_id,
    conversation: b.conversation,
    instructions: typeof b.instructions === 'string' ? b.instructions.slice(0, 80) : b.instructions,
    input,
    inputIds: Array.isArray(b.input) ? b.input.map((it) => it.id ?? null) : undefined,
    tools: Array.isArray(b.tools) ? b.tools.map((t) => `${t.type}:${t.name ?? ''}${t.strict === undefined ? '' : `:strict=${t.strict}`}`) : undefined,
    include: b.include,
  };
}

// checkSequence fails unless every event has a numeric sequence_number and
// they strictly increase; it returns the event types in order.
export function checkSequence(events, after = -Infinity) {
  let last = after;
  for (const ev of events) {
    if (typeof ev.sequence_number !== 'number') throw new Error(`event ${ev.type} has no numeric sequence_number: ${JSON.stringify(ev).slice(0, 200)}`);
    if (ev.sequence_number <= last) throw new Error(`sequence_number ${ev.sequence_number} of ${ev.type} does not follow ${last}`);
    last = ev.sequence_number;
  }
  return events.map((e) => e.type);
}

// textOf returns a response's text: output_text when the SDK added it, else
// the output_text parts of its message items.
export function textOf(resp) {
  if (typeof resp?.output_text === 'string' && resp.output_text !== '') return resp.output_text;
  return (resp?.output ?? []).filter((it) => it.type === 'message')
    .flatMap((it) => it.content ?? []).filter((c) => c.type === 'output_text').map((c) => c.text).join('');
}

// expect throws unless cond holds.
export function expect(cond, what) {
  if (!cond) throw new Error(what);
}

// runCases runs each case in order and prints the results; the process
// exits 1 when a case failed.
export async function runCases(cases, prefix = '') {
  const results = [];
  for (const [name, run] of Object.entries(cases)) {
    try {
      results.push({ name: prefix + name, ok: true, ...(await run()) });
    } catch (err) {
      results.push({ name: prefix + name, ok: false, error: `${err?.name}: ${err?.message}`, status: err?.status ?? err?.statusCode });
    }
  }
  return results;
}

// print writes the one JSON document and sets the exit code.
export function print(results, extra = {}) {
  process.stdout.write(JSON.stringify({ results, ...extra }) + '\n');
  process.exitCode = results.length > 0 && results.every((r) => r.ok) ? 0 : 1;
}
