// Drives a Stackbone server's Conversations API with openai-node
// (client.conversations.*, pinned in package.json) and the OpenAI Agents
// SDK's OpenAIConversationsSession, which uses a conversation as its item
// store (addItems, getItems, popItem, clearSession) while its model calls
// send the whole history to /v1/responses.
//
//   node conversations.mjs http://127.0.0.1:PORT [agent]
//
// Prints one JSON document {"results":[{name, ok, error, ...}]} and exits
// 1 when a case failed. The model echoes the last user message ("echo:
// <text>"); internal/server/conversations_client_test.go checks the
// stored threads.
import OpenAI from 'openai';
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled, OpenAIConversationsSession } from '@openai/agents';
import { args, expect, runCases, print, textOf } from './responses-lib.mjs';

const { base, agent } = args('conversations.mjs');
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-local', maxRetries: 0 });
setTracingDisabled(true);
setDefaultOpenAIClient(client);

const texts = (items) => items.map((it) => `${it.role ?? it.type}:${(it.content ?? []).map((c) => c.text ?? '').join('')}`);
const listAll = async (id, query = { order: 'asc' }) => {
  const out = [];
  for await (const it of client.conversations.items.list(id, query)) out.push(it);
  return out;
};
const status = async (p) => {
  try {
    await p;
    return 200;
  } catch (err) {
    return err?.status ?? String(err);
  }
};

let conv; // the openai-node case's conversation
let firstItem; // its first item, added at create
const cases = {
  async create() {
    conv = await client.conversations.create({
      items: [{ type: 'message', role: 'user', content: 'remember the word kiwi' }],
      metadata: { topic: 'demo' },
    });
    expect(conv.object === 'conversation' && /^conv_/.test(conv.id), `created ${JSON.stringify(conv)}`);
    expect(conv.metadata?.topic === 'demo' && typeof conv.created_at === 'number', `metadata ${JSON.stringify(conv)}`);
    return { conversation: conv.id };
  },
  async retrieveUpdate() {
    const got = await client.conversations.retrieve(conv.id);
    expect(got.id === conv.id && got.metadata.topic === 'demo', `retrieve ${JSON.stringify(got)}`);
    const upd = await client.conversations.update(conv.id, { metadata: { topic: 'changed' } });
    expect(upd.metadata.topic === 'changed' && upd.created_at === conv.created_at, `update ${JSON.stringify(upd)}`);
    const again = await client.conversations.retrieve(conv.id);
    expect(again.metadata.topic === 'changed', `after update ${JSON.stringify(again)}`);
    return {};
  },
  async items() {
    const added = await client.conversations.items.create(conv.id, {
      items: [
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a note to drop' }] },
        { type: 'message', role: 'user', content: 'and one to keep' },
      ],
    });
    expect(added.data.length === 2 && added.data.every((it) => /^msg_/.test(it.id)), `items.create ${JSON.stringify(added)}`);
    let all = await listAll(conv.id);
    firstItem = all[0];
    expect(JSON.stringify(texts(all)) === JSON.stringify(['user:remember the word kiwi', 'user:a note to drop', 'user:and one to keep']),
      `items.list ${JSON.stringify(texts(all))}`);
    const got = await client.conversations.items.retrieve(added.data[0].id, { conversation_id: conv.id });
    expect(got.id === added.data[0].id && got.content[0].text === 'a note to drop', `items.retrieve ${JSON.stringify(got)}`);
    const after = await client.conversations.items.delete(added.data[0].id, { conversation_id: conv.id });
    expect(after.id === conv.id && after.object === 'conversation', `items.delete ${JSON.stringify(after)}`);
    all = await listAll(conv.id);
    expect(JSON.stringify(texts(all)) === JSON.stringify(['user:remember the word kiwi', 'user:and one to keep']), `after delete ${JSON.stringify(texts(all))}`);
    const gone = await status(client.conversations.items.retrieve(added.data[0].id, { conversation_id: conv.id }));
    expect(gone === 404, `deleted item: ${gone}`);
    return {};
  },
  // A response naming the conversation: its items are the turn's history
  // and the turn joins the conversation's items.
  async responses() {
    const r = await client.responses.create({ model: agent, conversation: conv.id, input: 'hello conversation' });
    expect(textOf(r) === 'echo: hello conversation', `text ${JSON.stringify(textOf(r))}`);
    expect(r.conversation?.id === conv.id, `conversation ${JSON.stringify(r.conversation)}`);
    const r2 = await client.responses.create({ model: agent, conversation: { id: conv.id }, input: 'second turn' });
    expect(textOf(r2) === 'echo: second turn', `text ${JSON.stringify(textOf(r2))}`);
    const all = await listAll(conv.id);
    const want = ['user:remember the word kiwi', 'user:and one to keep', 'user:hello conversation', 'assistant:echo: hello conversation',
      'user:second turn', 'assistant:echo: second turn'];
    expect(JSON.stringify(texts(all)) === JSON.stringify(want), `items.list ${JSON.stringify(texts(all))}`);
    expect(all[0].id === firstItem.id, `the created item became the thread's message: ${all[0].id} vs ${firstItem.id}`);
    expect(all[3].id === r.output[0].id, `the output item ${r.output[0].id} is listed as ${all[3].id}`);
    // Paging newest first, two at a time (the SDK follows last_id).
    const page = await client.conversations.items.list(conv.id, { limit: 2 });
    expect(page.data.length === 2 && page.has_more && page.data[0].id === all[5].id, `page ${JSON.stringify(page.data.map((d) => d.id))}`);
    const desc = await listAll(conv.id, { limit: 2 });
    expect(JSON.stringify(desc.map((d) => d.id)) === JSON.stringify(all.map((d) => d.id).reverse()), `desc ${desc.length}`);
    const item = await client.conversations.items.retrieve(all[3].id, { conversation_id: conv.id });
    expect(item.role === 'assistant' && item.content[0].type === 'output_text', `retrieve turn item ${JSON.stringify(item)}`);
    const refused = await status(client.conversations.items.delete(all[3].id, { conversation_id: conv.id }));
    expect(refused === 400, `deleting a turn's item: ${refused}`);
    // A user item added now is the next turn's history.
    await client.conversations.items.create(conv.id, { items: [{ role: 'user', content: 'a late note' }] });
    const noAssistant = await status(client.conversations.items.create(conv.id, { items: [{ role: 'assistant', content: 'made up' }] }));
    expect(noAssistant === 400, `an assistant item after turns: ${noAssistant}`);
    const r3 = await client.responses.create({ model: agent, conversation: conv.id, input: 'third turn' });
    expect(textOf(r3) === 'echo: third turn', `text ${JSON.stringify(textOf(r3))}`);
    const last = (await listAll(conv.id)).slice(-3);
    expect(JSON.stringify(texts(last)) === JSON.stringify(['user:a late note', 'user:third turn', 'assistant:echo: third turn']),
      `after a late note ${JSON.stringify(texts(last))}`);
    return {};
  },
  async delete() {
    const d = await client.conversations.delete(conv.id);
    expect(d.deleted === true && d.id === conv.id && d.object === 'conversation.deleted', `delete ${JSON.stringify(d)}`);
    for (const [what, p] of [
      ['retrieve', () => client.conversations.retrieve(conv.id)],
      ['items.list', () => client.conversations.items.list(conv.id)],
      ['update', () => client.conversations.update(conv.id, { metadata: {} })],
      ['responses.create', () => client.responses.create({ model: agent, conversation: conv.id, input: 'after delete' })],
    ]) {
      const s = await status(p());
      expect(s === 404, `${what} after delete: ${s}`);
    }
    const unknown = await status(client.conversations.retrieve('conv_unknown'));
    expect(unknown === 404, `unknown conversation: ${unknown}`);
    return {};
  },
  // The Agents SDK's session: the conversation as an item store.
  async agentsSession() {
    const session = new OpenAIConversationsSession();
    await session.addItems([
      { type: 'message', role: 'user', content: 'session hello' },
      { type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'session reply' }] },
    ]);
    const id = await session.getSessionId();
    expect(/^conv_/.test(id), `session id ${id}`);
    let items = await session.getItems();
    expect(items.length === 2 && items[0].role === 'user' && items[1].role === 'assistant', `getItems ${JSON.stringify(items)}`);
    const last = await session.getItems(1);
    expect(last.length === 1 && last[0].role === 'assistant', `getItems(1) ${JSON.stringify(last)}`);
    const popped = await session.popItem();
    expect(popped?.role === 'assistant', `popItem ${JSON.stringify(popped)}`);
    items = await session.getItems();
    expect(items.length === 1 && items[0].role === 'user', `after popItem ${JSON.stringify(items)}`);
    // A run with the session: the SDK sends the history to the model and
    // stores the turn's items in the conversation.
    const r = await run(new Agent({ name: agent, model: agent, instructions: 'Answer briefly.' }), 'session question', { session });
    expect(r.finalOutput === 'echo: session question', `finalOutput ${JSON.stringify(r.finalOutput)}`);
    items = await session.getItems();
    const roles = items.map((it) => `${it.role ?? it.type}`);
    expect(JSON.stringify(roles) === JSON.stringify(['user', 'user', 'assistant']), `after run ${JSON.stringify(items)}`);
    await session.clearSession();
    const s = await status(client.conversations.retrieve(id));
    expect(s === 404, `after clearSession: ${s}`);
    return { session: id };
  },
};

print(await runCases(cases));
