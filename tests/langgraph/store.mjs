// LangGraph's JS SDK store client (client.store: putItem, getItem,
// searchItems, listNamespaces, deleteItem) against Stackbone's /v1/store
// routes, with the API key as the SDK sends it (x-api-key). Prints one JSON
// document {"results":[{name, ok, error, ...}]} and exits 1 when a case
// failed.
//
//   node store.mjs http://127.0.0.1:PORT API_KEY
import { Client } from '@langchain/langgraph-sdk';

const [base, apiKey] = process.argv.slice(2);
if (!base || !apiKey) {
  console.error('usage: node store.mjs BASE_URL API_KEY');
  process.exit(2);
}
const client = new Client({ apiUrl: `${base}/v1`, apiKey });
const expect = (cond, msg) => { if (!cond) throw new Error(msg); };

const cases = {
  async putGet() {
    await client.store.putItem(['users', 'u1'], 'tea', { fact: 'likes genmaicha tea', kind: 'pref' });
    await client.store.putItem(['users', 'u1', 'notes'], 'n1', { fact: 'call the plumber', kind: 'todo' }, { ttl: 60, index: false });
    const it = await client.store.getItem(['users', 'u1'], 'tea');
    expect(it && it.value.fact === 'likes genmaicha tea', `getItem ${JSON.stringify(it)}`);
    expect(it.key === 'tea' && it.namespace.join('/') === 'users/u1', `item ${JSON.stringify(it)}`);
    expect(!Number.isNaN(Date.parse(it.createdAt)) && !Number.isNaN(Date.parse(it.updatedAt)), `times ${it.createdAt} ${it.updatedAt}`);
    const withTtl = await client.store.getItem(['users', 'u1', 'notes'], 'n1', { refreshTtl: true });
    expect(withTtl.expires_at, `expires_at ${JSON.stringify(withTtl)}`);
    return { createdAt: it.createdAt };
  },
  async search() {
    const sem = await client.store.searchItems(['users'], { query: 'which tea does the user like', limit: 1 });
    expect(sem.items.length === 1 && sem.items[0].key === 'tea' && typeof sem.items[0].score === 'number', `semantic ${JSON.stringify(sem)}`);
    const todos = await client.store.searchItems(['users', 'u1'], { filter: { kind: 'todo' } });
    expect(todos.items.length === 1 && todos.items[0].key === 'n1', `filter ${JSON.stringify(todos)}`);
    return { score: sem.items[0].score };
  },
  async namespaces() {
    const all = await client.store.listNamespaces();
    expect(JSON.stringify(all.namespaces) === JSON.stringify([['users', 'u1'], ['users', 'u1', 'notes']]), `all ${JSON.stringify(all)}`);
    const top = await client.store.listNamespaces({ prefix: ['users'], maxDepth: 2 });
    expect(JSON.stringify(top.namespaces) === JSON.stringify([['users', 'u1']]), `maxDepth ${JSON.stringify(top)}`);
    return { namespaces: all.namespaces };
  },
  async badRequest() {
    let status;
    try {
      await client.store.putItem(['users', 'u1'], '', { fact: 'no key' });
    } catch (e) {
      status = e.status ?? e.response?.status;
    }
    expect(status === 400, `empty key: status ${status}`);
    return { status };
  },
  async deleteItem() {
    await client.store.deleteItem(['users', 'u1', 'notes'], 'n1');
    let status;
    try {
      await client.store.getItem(['users', 'u1', 'notes'], 'n1');
    } catch (e) {
      status = e.status ?? e.response?.status;
    }
    expect(status === 404, `get after delete: status ${status}`);
    return { status };
  },
};

const results = [];
for (const [name, fn] of Object.entries(cases)) {
  try {
    results.push({ name, ok: true, ...(await fn()) });
  } catch (e) {
    results.push({ name, ok: false, error: String(e?.stack || e) });
  }
}
console.log(JSON.stringify({ results }));
process.exit(results.every((r) => r.ok) ? 0 : 1);
