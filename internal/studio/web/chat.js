// Stackbone Studio's chat playground (#/chat/{agent}?thread=ID): talk to an
// agent over AG-UI with the protocol's own client (@ag-ui/client's
// HttpAgent, vendored as one module), against this server's
// /v1/agents/{agent}/agui, same origin, with the Studio session's cookie and
// CSRF header. The client applies the events (messages, tool calls, state
// snapshots and RFC 6902 deltas); this module draws agent.messages and
// agent.state, keeps what the stream says beyond them (durations, subagent
// runs, errors, pauses), and answers pauses with the AG-UI resume array.
//
// Every value from the server or the model goes into the page as text or
// through the sanitising Markdown renderer, never as HTML.
import { HttpAgent, randomUUID } from './vendor/agui-client.js';
import { validate, describe } from './schema.js';
import { render as markdown } from './markdown.js';

// The playground's frontend tool kit, declared in every run's
// RunAgentInput.tools: the model may call them, the page runs them and
// sends the result back as a tool message on the next run.
export const FRONTEND_TOOLS = [
  {
    name: 'get_time',
    description: 'The current date and time in the user\'s browser (ISO 8601, with the time zone).',
    parameters: { type: 'object', properties: { timeZone: { type: 'string', description: 'An IANA time zone; default the browser\'s.' } } },
  },
  {
    name: 'confirm',
    description: 'Ask the user a yes/no question in a dialog and get the answer.',
    parameters: { type: 'object', properties: { question: { type: 'string' } }, required: ['question'] },
  },
];

const enc = encodeURIComponent;

function newThreadId() {
  return 'chat-' + randomUUID().slice(0, 13).replace(/-/g, '');
}

function parseJSON(s, fallback) {
  if (typeof s !== 'string') return s ?? fallback;
  try { return JSON.parse(s); } catch { return fallback; }
}

function pretty(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

function fmtDuration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

// fromThread turns a thread's stored messages (GET /v1/threads/{id}) into
// AG-UI messages for the client: the agent's own conversation, without
// system prompts and subagents' inner messages. An answer's stored
// reasoning becomes "reasoning" messages as AG-UI 1.0's MESSAGES_SNAPSHOT
// carries them (the same ids as the live REASONING_* events: MESSAGE-
// reasoning-N), ahead of the answer, or after it when it followed a call.
export function fromThread(messages) {
  const out = [];
  for (const m of messages || []) {
    if (m.taskCallId || m.role === 'system') continue;
    if (m.role === 'user') out.push({ id: m.id, role: 'user', content: m.content || '' });
    else if (m.role === 'assistant') {
      const msg = { id: m.id, role: 'assistant', content: m.content || '' };
      if (m.toolCalls?.length) {
        msg.toolCalls = m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments || '{}' } }));
      }
      const after = [];
      let n = 0;
      for (const r of m.reasoning || []) {
        if (!r.text || (r.type !== 'thinking' && r.type !== 'text')) continue; // a redacted block shows nothing
        const rm = { id: `${m.id}-reasoning-${++n}`, role: 'reasoning', content: r.text };
        if (r.afterCalls > 0) after.push(rm);
        else out.push(rm);
      }
      out.push(msg, ...after);
    } else if (m.role === 'tool') {
      out.push({ id: m.id, role: 'tool', toolCallId: m.toolCallId, content: m.content || '', ...(m.isError ? { error: m.content || 'error' } : {}) });
    }
  }
  return out;
}

// pendingFrom normalises a pause from either source (an AG-UI interrupt, or
// a stored decision of GET /v1/threads/{id}) to what the card shows.
function pendingFromInterrupt(it, argsOf) {
  const sb = it.metadata?.stackbone || {};
  return {
    id: it.id,
    tool: sb.tool || '',
    toolCallId: it.toolCallId || '',
    reason: sb.reason || (it.reason === 'tool_call' ? 'approval' : it.reason),
    description: sb.description || it.message || '',
    allowedDecisions: sb.allowedDecisions || it.allowedDecisions || [],
    responseSchema: it.responseSchema || null,
    expiresAt: it.expiresAt || null,
    subagent: sb.subagent || '',
    args: argsOf(it.toolCallId),
  };
}

function pendingFromStore(it) {
  return {
    id: it.id, tool: it.tool, toolCallId: it.toolCallId || '', reason: it.reason || 'approval',
    description: it.description || '', allowedDecisions: it.allowedDecisions || [],
    responseSchema: it.responseSchema || null, expiresAt: it.expiresAt || null, subagent: it.subagent || '',
    args: it.args ?? {},
  };
}

// changedPaths lists the JSON pointers where b differs from a (the deepest
// differing nodes), for highlighting.
export function changedPaths(a, b, path = '', out = []) {
  const isObj = (v) => v !== null && typeof v === 'object';
  if (isObj(a) && isObj(b) && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) changedPaths(a[k], b[k], `${path}/${String(k).replace(/~/g, '~0').replace(/\//g, '~1')}`, out);
    return out;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) out.push(path || '/');
  return out;
}

// chatView is the page. ctx is what app.js lends it: {main, h, api,
// announce, session(), loadAgents(force), signedOut(), pendingChanged()}.
// pendingChanged(decided) updates the nav's count of pending decisions:
// the page calls it with the number of calls a resume decided as soon as
// the server accepted the resume (its run started), with 1 for a question
// answered, and with none after each of its runs (a run may pause), so
// the badge does not lag behind the conversation on the live feed.
export function chatView(ctx, agentName, params) {
  const { h, api, announce, main } = ctx;
  const session = ctx.session() || {};
  const canChat = session.role !== 'approver';
  const canDecide = session.role !== 'caller';
  let threadId = params.get('thread') || newThreadId();
  const threadPath = '/v1/threads/' + enc(threadId);
  history.replaceState(null, '', `#/chat/${enc(agentName)}?thread=${enc(threadId)}`);

  const agent = new HttpAgent({
    url: `/v1/agents/${enc(agentName)}/agui`,
    threadId,
    headers: { 'x-stackbone-client': 'studio', ...(session.csrf ? { 'x-csrf-token': session.csrf } : {}) },
  });

  // ---------- what the stream tells beyond agent.messages ----------
  const tools = new Map(); // toolCallId → {t0, t1, owner, runId}
  const owners = new Map(); // messageId → subagentRunId
  const subagents = new Map(); // subagentRunId → {name, parentToolCallId, status, steps, error}
  const runOf = new Map(); // messageId → runId (the run inspector link)
  const notes = []; // {key, after, kind: 'error'|'cancelled', text, code}
  const pending = new Map(); // interrupt id → normalised pause
  const decided = new Map(); // interrupt id → {verdict, by}
  const answers = new Map(); // interrupt id → resume entry, until all pending are answered
  const lastMsgId = () => agent.messages[agent.messages.length - 1]?.id || '';

  let running = false;
  let runs = 0; // runs the page started: a thread read from before one is stale
  let runId = null;
  let stopping = null; // the cancel request of a Stop, awaited before the next send
  let stopped = false; // the running turn was stopped from this page
  let closed = false;
  let spec = null; // the agent's definition (GET /studio/api/agents)

  // ---------- the page ----------
  const log = h('ol', { class: 'chat-log', id: 'chat-log', role: 'log', 'aria-live': 'polite', 'aria-relevant': 'additions text',
    'aria-label': `Conversation with ${agentName}` });
  const empty = h('p', { class: 'empty chat-empty', id: 'chat-empty' }, `Say hello to ${agentName}. Enter sends, Shift+Enter starts a new line, Esc stops a running answer.`);
  const errorBox = h('p', { class: 'error', id: 'chat-error', role: 'alert', hidden: true });
  const srStatus = h('p', { class: 'sr-only', id: 'chat-sr', 'aria-live': 'polite' });
  const input = h('textarea', { id: 'chat-input', name: 'message', rows: '2', placeholder: canChat ? `Message ${agentName}…` : '',
    'aria-describedby': 'chat-help', disabled: !canChat });
  const sendBtn = h('button', { type: 'submit', class: 'primary', id: 'chat-send', 'data-action': 'send', disabled: !canChat }, 'Send');
  const stopBtn = h('button', { type: 'button', class: 'danger', id: 'chat-stop', 'data-action': 'stop', hidden: true }, 'Stop');
  const runState = h('span', { class: 'muted', id: 'chat-run-state' }, '');
  const help = h('p', { class: 'help', id: 'chat-help' }, canChat
    ? 'Enter sends · Shift+Enter new line · Esc stops'
    : 'Your key has role approver: it decides paused calls here but cannot start turns. A caller or admin key can chat.');
  const form = h('form', { class: 'composer', id: 'chat-form', 'aria-label': `Message ${agentName}` },
    h('label', { for: 'chat-input', class: 'sr-only' }, `Message to ${agentName}`),
    input,
    h('div', { class: 'row composer-actions' }, sendBtn, stopBtn, runState),
    help);

  const stateTree = h('div', { class: 'state chat-state', id: 'chat-state' });
  const stateChanges = h('p', { class: 'muted state-changes', id: 'chat-state-changes', 'aria-live': 'polite' });
  const todosBox = h('div', { id: 'chat-todos', hidden: true });
  const filesBox = h('div', { id: 'chat-files', hidden: true });
  const editBox = h('div', { id: 'chat-editable' });
  const defBox = h('div', { id: 'chat-agent-def' });
  const threadLink = h('a', { href: '#/threads/' + enc(threadId), class: 'thread-link', id: 'chat-thread-link', 'aria-label': `Thread ${threadId} on its page` }, 'thread page');
  const branchNote = h('span', { class: 'muted', id: 'chat-branches', hidden: true });
  // Pick the thread: a new one, or one of the agent's recent threads.
  const picker = h('select', { id: 'chat-thread-pick', 'aria-label': 'Thread' }, h('option', { value: threadId }, threadId));
  picker.addEventListener('change', () => {
    const v = picker.value === '' ? newThreadId() : picker.value;
    if (v !== threadId) location.hash = `#/chat/${enc(agentName)}?thread=${enc(v)}`;
  });
  async function fillPicker() {
    let list = [];
    try { list = (await api('GET', `/v1/threads?agent=${enc(agentName)}&limit=20`)).data || []; } catch { return; }
    const ids = [threadId, ...list.map((t) => t.id).filter((x) => x !== threadId)];
    picker.replaceChildren(...ids.map((x) => h('option', { value: x }, x)), h('option', { value: '' }, 'New thread'));
    picker.value = threadId;
  }
  // Pick the model of the next runs (dev only: the agent's models, sent as
  // forwardedProps.model; the server refuses any other). Empty: the agent's
  // own, with its fallbacks.
  let pickedModel = '';
  const modelPick = h('select', { id: 'chat-model', 'aria-label': 'Model of the next runs' });
  const modelRow = h('span', { class: 'model-pick', id: 'chat-model-row', hidden: true },
    h('label', { for: 'chat-model', class: 'inline' }, 'Model'), modelPick);
  modelPick.addEventListener('change', () => {
    pickedModel = modelPick.value;
    announce(pickedModel ? `The next runs use ${pickedModel}.` : 'The next runs use the agent\'s own model.');
  });
  function fillModels() {
    const models = spec?.pickModels || [];
    modelRow.hidden = models.length < 2;
    if (modelRow.hidden) { pickedModel = ''; return; }
    const rest = models.slice(1);
    modelPick.title = 'The model that answers your next messages';
    modelPick.replaceChildren(
      h('option', { value: '', title: `${models[0]}${rest.length ? `, then ${rest.join(', ')}` : ''}` }, 'Agent\'s own, with fallbacks'),
      ...models.map((m) => h('option', { value: m }, `${m} only`)));
    if (!models.includes(pickedModel)) pickedModel = '';
    modelPick.value = pickedModel;
  }
  const newBtn = h('button', { type: 'button', class: 'ghost small', 'data-action': 'new-thread',
    onclick: () => { location.hash = `#/chat/${enc(agentName)}?thread=${enc(newThreadId())}`; } }, 'New thread');

  main.replaceChildren(h('section', { class: 'chat-page', 'aria-labelledby': 'chat-h' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/agents' }, 'Agents'), ' / ', agentName, ' / Chat'),
    h('div', { class: 'titlebar' },
      h('h1', { id: 'chat-h', tabindex: '-1' }, 'Chat with ', h('code', {}, agentName)),
      h('p', { class: 'meta' }, h('label', { for: 'chat-thread-pick', class: 'inline' }, 'Thread'), picker, threadLink, branchNote, ' ', newBtn, ' ', modelRow)),
    h('div', { class: 'chat-grid' },
      h('section', { class: 'chat-main', 'aria-labelledby': 'chat-conv-h' },
        h('h2', { id: 'chat-conv-h', class: 'sr-only' }, 'Conversation'),
        empty, log, errorBox, srStatus, form),
      h('aside', { class: 'side chat-side', 'aria-label': 'State and agent' },
        h('section', { 'aria-labelledby': 'chat-state-h' }, h('h2', { id: 'chat-state-h' }, 'State'), stateChanges, stateTree),
        h('section', { 'aria-labelledby': 'chat-todos-h', id: 'chat-todos-sec', hidden: true }, h('h2', { id: 'chat-todos-h' }, 'Todos'), todosBox),
        h('section', { 'aria-labelledby': 'chat-files-h', id: 'chat-files-sec', hidden: true }, h('h2', { id: 'chat-files-h' }, 'Files'), filesBox),
        h('section', { 'aria-labelledby': 'chat-edit-h', id: 'chat-edit-sec', hidden: true }, h('h2', { id: 'chat-edit-h' }, 'Editable state'), editBox),
        h('section', { 'aria-labelledby': 'chat-def-h' }, h('h2', { id: 'chat-def-h' }, 'Agent'), defBox)))));

  const showError = (text) => { errorBox.textContent = text; errorBox.hidden = !text; };

  // ---------- drawing the conversation ----------
  const els = new Map(); // item key → element
  let drawQueued = false;
  function draw() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(() => { drawQueued = false; if (!closed) drawNow(); });
  }

  function argsOf(toolCallId) {
    for (const m of agent.messages) {
      const c = m.toolCalls?.find((x) => x.id === toolCallId);
      if (c) return parseJSON(c.function.arguments, c.function.arguments);
    }
    return {};
  }

  function cached(key, make) {
    let el = els.get(key);
    if (!el) { el = make(); el.dataset.key = key; els.set(key, el); }
    return el;
  }

  // sync makes parent hold exactly want, in order, moving only what moved
  // (so focus and open <details> survive).
  function sync(parent, want) {
    const set = new Set(want);
    for (const c of [...parent.children]) if (!set.has(c)) c.remove();
    want.forEach((el, i) => { if (parent.children[i] !== el) parent.insertBefore(el, parent.children[i] || null); });
  }

  function messageItem(m) {
    const el = cached('m:' + m.id, () => h('li', { class: `chat-msg role-${m.role}`, 'data-id': m.id, 'data-role': m.role },
      h('p', { class: 'who' }, m.role === 'user' ? 'You' : m.role === 'reasoning' ? 'Reasoning' : agentName,
        h('span', { class: 'links' })),
      m.role === 'reasoning' ? h('details', { class: 'reasoning' }, h('summary', {}, 'Thinking'), h('div', { class: 'text md' }))
        : h('div', { class: 'text md' })));
    const text = typeof m.content === 'string' ? m.content : (m.content || []).map((p) => p.text || '').join('\n');
    if (el._text !== text) {
      el._text = text;
      el.querySelector('.md').replaceChildren(markdown(text));
    }
    const run = runOf.get(m.id);
    const links = el.querySelector('.links');
    if (run && links.dataset.run !== run && m.role === 'assistant') {
      links.dataset.run = run;
      links.replaceChildren(h('a', { href: `#/threads/${enc(threadId)}?run=${enc(run)}`, class: 'trace-link', 'data-action': 'trace',
        'aria-label': `Trace of this answer: run ${run}` }, 'Trace'));
    }
    el.classList.toggle('streaming', running && m.id === lastMsgId() && m.role === 'assistant');
    if ((m.role === 'user' || m.role === 'assistant') && !owners.has(m.id)) msgActions(m, el);
    return el;
  }

  // msgActions are Edit on a message of yours and Regenerate on an answer:
  // both send the conversation as it was before it (AG-UI messages carry
  // ids), so the server goes on from there on a new branch.
  function msgActions(m, el) {
    let box = el.querySelector(':scope > .chat-actions');
    if (!box) {
      box = h('div', { class: 'chat-actions msg-actions', role: 'group', 'aria-label': m.role === 'user' ? 'Your message' : `Answer of ${agentName}` },
        m.role === 'user'
          ? h('button', { type: 'button', class: 'ghost small', 'data-action': 'edit-message', onclick: () => editMessage(m.id, el) }, 'Edit')
          : h('button', { type: 'button', class: 'ghost small', 'data-action': 'regenerate', onclick: () => regenerate(m.id) }, 'Regenerate'),
        h('button', { type: 'button', class: 'ghost small', 'data-action': 'fork', 'aria-label': 'Fork into a new thread from this message',
          onclick: (ev) => forkAt(m.id, ev.currentTarget) }, 'Fork'));
      el.append(box);
    }
    box.hidden = !(canChat && !running && pending.size === 0) || !!el.querySelector('.edit-message');
  }

  // forkAt copies the conversation up to a message into a new thread
  // (POST /v1/threads/{id}/fork) and goes on there.
  async function forkAt(id, button) {
    button.disabled = true;
    try {
      const t = await api('POST', threadPath + '/fork', { at: id });
      announce(`Forked into a new thread, ${t.id}.`);
      location.hash = `#/chat/${enc(agentName)}?thread=${enc(t.id)}`;
    } catch (e) {
      button.disabled = false;
      if (e.status !== 401) showError(`Could not fork from this message: ${e.message}`);
    }
  }

  function regenerate(id) {
    const msgs = agent.messages;
    let u = msgs.findIndex((x) => x.id === id);
    while (u >= 0 && msgs[u].role !== 'user') u--;
    if (u < 0 || running) return;
    agent.setMessages(msgs.slice(0, u + 1));
    announce('Regenerating the answer, on a new branch.');
    runTurn({});
  }

  function editMessage(id, el) {
    const i = agent.messages.findIndex((x) => x.id === id);
    if (i < 0 || running) return;
    const m = agent.messages[i];
    const ta = h('textarea', { id: `edit-${id}`, name: 'edit', rows: '3' });
    ta.value = typeof m.content === 'string' ? m.content : '';
    const md = el.querySelector('.md');
    const cancel = () => { f.remove(); md.hidden = false; draw(); el.querySelector('[data-action="edit-message"]')?.focus(); };
    const f = h('form', { class: 'edit-message', 'aria-label': 'Edit your message' },
      h('label', { for: `edit-${id}`, class: 'sr-only' }, 'Edited message'), ta,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary small', 'data-action': 'send-edit' }, 'Send'),
        h('button', { type: 'button', class: 'ghost small', onclick: cancel }, 'Cancel'),
        h('span', { class: 'muted' }, 'The conversation goes on from here on a new branch; the old one stays on the thread.')));
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const text = ta.value.trim();
      if (!text) return;
      // A run under way (the page reattaching, say) ends first; the edit
      // goes on from the conversation as it then stands.
      if (running) await queue;
      if (closed || running || !f.isConnected) return;
      const at = agent.messages.findIndex((x) => x.id === id);
      f.remove();
      md.hidden = false;
      // The same id with new content: the server sees the edit of a stored
      // question (a message left out would read as a new one on the head).
      agent.setMessages([...agent.messages.slice(0, at < 0 ? i : at), { id, role: 'user', content: text }]);
      runTurn({});
    });
    ta.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') { ev.preventDefault(); ev.stopPropagation(); cancel(); }
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); f.requestSubmit(); }
    });
    md.hidden = true;
    md.after(f);
    draw();
    ta.focus();
  }

  function toolItem(call, result) {
    const el = cached('t:' + call.id, () => {
      const sum = h('summary', {}, h('span', { class: 'badge tool-kind' }, 'tool'), ' ', h('code', { class: 'tool-name' }, call.function.name), ' ',
        h('span', { class: 'tool-status' }), ' ', h('span', { class: 'tool-dur muted' }));
      return h('li', { class: 'chat-tool', 'data-call': call.id, 'data-tool': call.function.name },
        h('details', { class: 'tool-card' }, sum,
          h('div', { class: 'tool-body' },
            h('h4', {}, 'Arguments'), h('pre', { class: 'json tool-args', tabindex: '0' }),
            h('div', { class: 'tool-result-wrap', hidden: true }, h('h4', {}, 'Result'), h('pre', { class: 'json tool-result', tabindex: '0' })))));
    });
    const meta = tools.get(call.id) || {};
    const isClient = FRONTEND_TOOLS.some((t) => t.name === call.function.name) && !spec?.tools?.some((t) => t.name === call.function.name);
    let status = 'running…';
    let st = 'running';
    if (result) {
      st = result.error ? 'error' : 'done';
      status = result.error ? 'failed' : (isClient ? 'answered by the page' : 'done');
    } else if ([...pending.values()].some((p) => p.toolCallId === call.id)) {
      st = 'waiting'; status = 'waiting for a decision';
    } else if (!running && meta.t0 === undefined) {
      st = 'done'; status = '';
    } else if (!running) {
      st = 'idle'; status = isClient ? 'waiting for the page' : 'no result';
    }
    el.dataset.status = st;
    el.querySelector('.tool-status').textContent = status;
    const dur = meta.t0 !== undefined && meta.t1 !== undefined ? fmtDuration(meta.t1 - meta.t0) : '';
    el.querySelector('.tool-dur').textContent = dur;
    el.querySelector('.tool-args').textContent = pretty(call.function.arguments || '{}');
    const wrap = el.querySelector('.tool-result-wrap');
    wrap.hidden = !result;
    if (result) el.querySelector('.tool-result').textContent = pretty(result.content ?? result.error ?? '');
    return el;
  }

  function subagentItem(id) {
    const s = subagents.get(id) || { name: 'subagent', steps: [] };
    const el = cached('s:' + id, () => h('li', { class: 'chat-subagent', 'data-subagent': id },
      h('details', { open: true }, h('summary', {}, h('span', { class: 'badge' }, 'subagent'), ' ', h('strong', { class: 'sub-name' }), ' ', h('span', { class: 'sub-status muted' })),
        h('ol', { class: 'sub-log' }))));
    el.querySelector('.sub-name').textContent = s.name;
    el.querySelector('.sub-status').textContent = [s.status || 'working…', s.steps?.length ? `${s.steps.length} step${s.steps.length === 1 ? '' : 's'}` : '', s.error || ''].filter(Boolean).join(' · ');
    return el;
  }

  function noteItem(n) {
    return cached('n:' + n.key, () => h('li', { class: `chat-note note-${n.kind}`, 'data-kind': n.kind, role: n.kind === 'error' ? 'alert' : null },
      n.kind === 'error' ? h('strong', {}, 'Run error') : h('strong', {}, 'Stopped'), ' ',
      n.code ? h('code', {}, n.code) : null, ' ', h('span', { class: 'note-text' }, n.text)));
  }

  // waitingGate says the thread waits on an approval (not a call in doubt,
  // which a Stop just left, nor a question a running tool asks): Stop then
  // cancels the waiting turn.
  const waitingGate = () => !running && [...pending.values()].some((p) => p.reason !== 'elicitation' && p.reason !== 'in_doubt');

  function drawNow() {
    stopBtn.hidden = !canChat || !(running || waitingGate());
    stopBtn.title = running ? 'Stop the answer (Esc)' : 'Cancel the turn: the paused calls do not run';
    const doc = document.documentElement;
    const atEnd = window.innerHeight + window.scrollY >= doc.scrollHeight - 80;
    const results = new Map();
    for (const m of agent.messages) if (m.role === 'tool') results.set(m.toolCallId, m);
    const top = [];
    const groups = new Map(); // subagentRunId → [elements]
    const place = (owner, el) => {
      if (owner && subagents.has(owner)) {
        if (!groups.has(owner)) groups.set(owner, []);
        groups.get(owner).push(el);
      } else top.push(el);
    };
    const placedPauses = new Set();
    const placedSubs = new Set();
    const notesAfter = new Map();
    for (const n of notes) {
      if (!notesAfter.has(n.after)) notesAfter.set(n.after, []);
      notesAfter.get(n.after).push(n);
    }
    for (const n of notesAfter.get('') || []) top.push(noteItem(n));
    for (const m of agent.messages) {
      if (m.role === 'tool' || m.role === 'system' || m.role === 'developer' || m.role === 'activity') continue;
      const owner = owners.get(m.id);
      const hasText = typeof m.content === 'string' ? m.content.trim() !== '' : Array.isArray(m.content) && m.content.length > 0;
      if (hasText || (m.role !== 'assistant')) place(owner, messageItem(m));
      else if (m.role === 'assistant' && !m.toolCalls?.length && running) place(owner, messageItem(m));
      for (const c of m.toolCalls || []) {
        place(tools.get(c.id)?.owner || owner, toolItem(c, results.get(c.id)));
        for (const p of pending.values()) {
          if (p.toolCallId === c.id) { place(tools.get(c.id)?.owner || owner, pauseCard(p)); placedPauses.add(p.id); }
        }
        for (const [id, d] of decided) {
          const el = els.get('p:' + id);
          if (el && d.toolCallId === c.id && !placedPauses.has(id)) { place(tools.get(c.id)?.owner || owner, el); placedPauses.add(id); }
        }
        for (const [sid, s] of subagents) {
          if (s.parentToolCallId === c.id && !placedSubs.has(sid)) { top.push(subagentItem(sid)); placedSubs.add(sid); }
        }
      }
      for (const n of notesAfter.get(m.id) || []) top.push(noteItem(n));
    }
    for (const sid of subagents.keys()) if (!placedSubs.has(sid) && groups.has(sid)) top.push(subagentItem(sid));
    for (const p of pending.values()) if (!placedPauses.has(p.id)) top.push(pauseCard(p));
    for (const [id, d] of decided) {
      const el = els.get('p:' + id);
      if (el && !placedPauses.has(id)) top.push(el);
      if (el) markDecided(el, d);
    }
    for (const [sid, list] of groups) sync(subagentItem(sid).querySelector('.sub-log'), list);
    sync(log, top);
    empty.hidden = top.length > 0;
    // Follow the conversation while the reader is at its end.
    if (atEnd && top.length) window.scrollTo(0, doc.scrollHeight);
  }

  // ---------- pauses: approvals, in-doubt calls ----------
  function pauseCard(p) {
    return cached('p:' + p.id, () => makePauseCard(p));
  }

  function markDecided(el, d) {
    if (el.classList.contains('decided') && el.dataset.verdict === d.verdict) return;
    el.classList.add('decided');
    el.dataset.verdict = d.verdict;
    for (const f of el.querySelectorAll('form, .actions')) f.remove();
    let v = el.querySelector('.verdict');
    if (!v) { v = h('p', { class: 'verdict', role: 'status' }); el.append(v); }
    v.textContent = d.text;
  }

  // makeQuestionCard is a question a running tool asks (an MCP server's
  // elicitation, reason "elicitation", from the stream's CUSTOM
  // stackbone.question event): a form from its responseSchema's
  // editedArgs. The run waits for the answer while it streams, so the answer
  // goes to the decision route (POST /v1/hitl/{id}/approve|reject) and the
  // open stream goes on with it.
  function makeQuestionCard(p) {
    const idp = `cq-${p.id}`;
    const err = h('div', { class: 'error', role: 'alert', hidden: true });
    const schema = p.responseSchema?.properties?.editedArgs || { type: 'object' };
    const card = h('article', { class: 'decision chat-decision chat-question', 'data-id': p.id, 'data-tool': p.tool, 'data-reason': 'elicitation', 'aria-labelledby': `${idp}-h` },
      h('header', {}, h('h3', { id: `${idp}-h` }, h('span', { class: 'muted' }, 'Question from '), h('code', {}, p.tool)),
        h('p', { class: 'meta' }, h('span', { class: 'badge reason-elicitation' }, 'the call waits for your answer'))),
      h('p', { class: 'desc' }, p.description || 'The tool asks for an answer.'));
    if (!canDecide) {
      card.append(h('p', { class: 'muted actions', 'data-role': 'caller' }, 'Your key has role caller: it cannot answer. An approver or admin key can.'));
      return card;
    }
    const send = async (route, body, verdict, text) => {
      err.hidden = true;
      for (const b of card.querySelectorAll('button')) b.disabled = true;
      try {
        await api('POST', `/v1/hitl/${enc(p.id)}/${route}`, body);
        pending.delete(p.id);
        decided.set(p.id, { verdict, text, toolCallId: p.toolCallId });
        markDecided(card, { verdict, text });
        announce(`${text}: ${p.tool}.`);
        ctx.pendingChanged?.(1);
        draw();
      } catch (e) {
        err.replaceChildren(h('p', {}, e.status === 409 ? 'This question was already answered elsewhere.' : e.message));
        err.hidden = false;
        for (const b of card.querySelectorAll('button')) b.disabled = false;
      }
    };
    const fields = schemaForm(h, schema, {}, `${idp}-f`);
    const form = h('form', { class: 'panel answer-form', 'aria-label': `Answer ${p.tool}` }, fields.el,
      h('div', { class: 'row actions' }, h('button', { type: 'submit', class: 'primary', 'data-action': 'answer' }, 'Send answer'),
        h('button', { type: 'button', class: 'danger-outline', 'data-action': 'decline', onclick: () => send('reject', {}, 'declined', 'Declined') }, 'Decline')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      let value;
      try { value = fields.read(); } catch (e) { err.textContent = e.message; err.hidden = false; return; }
      const problems = validate(schema, value);
      if (problems.length) {
        err.replaceChildren(...describe(problems).map((l) => h('p', {}, l)));
        err.hidden = false;
        form.querySelector(`[data-field="${CSS.escape(problems[0].path.slice(1).split('/')[0] || '')}"]`)?.focus();
        return;
      }
      send('approve', { editedArgs: value }, 'answered', 'Answered');
    });
    card.append(form, err);
    return card;
  }

  function makePauseCard(p) {
    if (p.reason === 'elicitation') return makeQuestionCard(p);
    const idp = `cp-${p.id}`;
    const allowed = new Set(p.allowedDecisions);
    const inDoubt = p.reason === 'in_doubt';
    const err = h('div', { class: 'error', role: 'alert', hidden: true });
    const buttons = [];
    const card = h('article', { class: 'decision chat-decision', 'data-id': p.id, 'data-tool': p.tool, 'aria-labelledby': `${idp}-h` },
      h('header', {}, h('h3', { id: `${idp}-h` }, h('span', { class: 'muted' }, inDoubt ? 'In doubt: ' : 'Approval needed: '), h('code', {}, p.tool)),
        h('p', { class: 'meta' }, p.subagent ? h('span', { class: 'badge' }, `subagent ${p.subagent}`) : null,
          inDoubt ? h('span', { class: 'badge reason-in-doubt' }, 'may already have run') : null)),
      p.description ? h('p', { class: 'desc' }, p.description) : h('p', { class: 'desc muted' }, 'No description.'),
      h('div', { class: 'args' }, h('h4', {}, 'Arguments'), h('pre', { class: 'json', tabindex: '0' }, pretty(p.args ?? {}))));

    const decide = (verdict, payload, text) => {
      err.hidden = true;
      for (const b of card.querySelectorAll('button')) b.disabled = true;
      answers.set(p.id, { interruptId: p.id, status: 'resolved', payload });
      decided.set(p.id, { verdict, text, toolCallId: p.toolCallId });
      markDecided(card, { verdict, text });
      announce(`${text}: ${p.tool}.`);
      const waiting = [...pending.values()].filter((x) => x.reason !== 'elicitation' && !answers.has(x.id));
      // Keep the keyboard in the conversation: the next paused call, else
      // the composer, else the verdict.
      const next = waiting.map((x) => els.get('p:' + x.id)?.querySelector('.actions button')).find(Boolean);
      const verdictEl = card.querySelector('.verdict');
      verdictEl.tabIndex = -1;
      (next || (canChat ? input : verdictEl)).focus();
      if (waiting.length) {
        card.querySelector('.verdict').textContent = `${text}; sent once the other ${waiting.length} paused call${waiting.length === 1 ? ' is' : 's are'} decided.`;
        return;
      }
      const resume = [...answers.values()];
      answers.clear();
      runTurn({ resume });
    };

    if (!canDecide) {
      card.append(h('p', { class: 'muted actions', 'data-role': 'caller' }, 'Your key has role caller: it cannot decide. An approver or admin key can.'));
      return card;
    }
    // Reject (or skip, for a call in doubt) with a message to the agent.
    const msg = h('textarea', { id: `${idp}-msg`, name: 'message', rows: '2', maxlength: '4000', placeholder: 'Tell the agent why (optional)' });
    const rejectForm = h('form', { class: 'panel reject-form', id: `${idp}-reject`, hidden: true },
      h('label', { for: `${idp}-msg` }, inDoubt ? 'Result for the agent (optional)' : 'Message to the agent (optional)'), msg,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'danger', 'data-action': inDoubt ? 'confirm-skip' : 'confirm-reject' }, inDoubt ? 'Skip call' : 'Reject call'),
        h('button', { type: 'button', class: 'ghost', onclick: () => close(true) }, 'Cancel')));
    rejectForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const m = msg.value.trim();
      if (inDoubt) decide('skip', { decision: 'skip', ...(m ? { message: m } : {}) }, 'Skipped');
      else decide('rejected', { approved: false, ...(m ? { message: m } : {}) }, m ? `Rejected: “${m}”` : 'Rejected');
    });
    // Edit: a form rendered from the responseSchema's editedArgs.
    const editSchema = p.responseSchema?.properties?.editedArgs || spec?.tools?.find((t) => t.name === p.tool)?.parameters || { type: 'object' };
    const fields = schemaForm(h, editSchema, typeof p.args === 'object' && p.args ? p.args : {}, `${idp}-f`);
    const editForm = h('form', { class: 'panel edit-form', id: `${idp}-edit`, hidden: true, 'aria-label': `Edit the arguments of ${p.tool}` },
      fields.el,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary', 'data-action': 'confirm-edit' }, 'Approve with edits'),
        h('button', { type: 'button', class: 'ghost', onclick: () => close(true) }, 'Cancel')));
    editForm.addEventListener('submit', (ev) => {
      ev.preventDefault();
      let value;
      try { value = fields.read(); } catch (e) { err.textContent = e.message; err.hidden = false; return; }
      const problems = validate(editSchema, value);
      if (problems.length) {
        err.replaceChildren(...describe(problems).map((l) => h('p', {}, l)));
        err.hidden = false;
        editForm.querySelector(`[data-field="${CSS.escape(problems[0].path.slice(1).split('/')[0] || '')}"]`)?.focus();
        return;
      }
      decide('edited', { approved: true, editedArgs: value }, 'Approved with edits');
    });
    const close = (focus) => {
      rejectForm.hidden = true;
      editForm.hidden = true;
      for (const b of buttons) b.setAttribute('aria-expanded', 'false');
      if (focus) buttons[0]?.focus();
    };
    const toggle = (panel, btn, first) => {
      const open = panel.hidden;
      close(false);
      panel.hidden = !open;
      btn.setAttribute('aria-expanded', String(open));
      if (!open) return;
      first()?.focus();
      // The whole form, its buttons too, clear of the sticky composer.
      panel.scrollIntoView({ block: 'nearest' });
    };
    if (allowed.has('retry')) buttons.push(h('button', { type: 'button', class: 'primary', 'data-action': 'retry', onclick: () => decide('retry', { decision: 'retry' }, 'Retrying') }, 'Retry'));
    if (allowed.has('skip')) {
      const b = h('button', { type: 'button', class: 'danger-outline', 'data-action': 'skip', 'aria-expanded': 'false', 'aria-controls': `${idp}-reject` }, 'Skip…');
      b.addEventListener('click', () => toggle(rejectForm, b, () => msg));
      buttons.push(b);
    }
    if (allowed.has('approve')) buttons.push(h('button', { type: 'button', class: 'primary', 'data-action': 'approve', onclick: () => decide('approved', { approved: true }, 'Approved') }, 'Approve'));
    if (allowed.has('reject')) {
      const b = h('button', { type: 'button', class: 'danger-outline', 'data-action': 'reject', 'aria-expanded': 'false', 'aria-controls': `${idp}-reject` }, 'Reject…');
      b.addEventListener('click', () => toggle(rejectForm, b, () => msg));
      buttons.push(b);
    }
    if (allowed.has('edit')) {
      const b = h('button', { type: 'button', 'data-action': 'edit', 'aria-expanded': 'false', 'aria-controls': `${idp}-edit` }, 'Edit…');
      b.addEventListener('click', () => toggle(editForm, b, () => editForm.querySelector('input, textarea, select')));
      buttons.push(b);
    }
    card.append(h('div', { class: 'actions row' }, buttons), rejectForm, editForm, err);
    return card;
  }

  // ---------- state ----------
  let shownState = {};
  let editDrafts = {}; // editable key → value written in the form, sent with the next run
  function drawState(ops) {
    const st = agent.state ?? {};
    const changed = changedPaths(shownState, st);
    shownState = structuredClone(st);
    stateTree.replaceChildren(stateNode(st, '', changed));
    if (ops?.length) stateChanges.textContent = 'Last change: ' + ops.map((o) => `${o.op} ${o.path}`).join(', ');
    else if (changed.length && changed.length < 8) stateChanges.textContent = 'Changed: ' + changed.join(', ');
    // Todos and files, the built-in tools' keys.
    const todos = Array.isArray(st.todos) ? st.todos : null;
    $('#chat-todos-sec').hidden = !todos;
    if (todos) {
      todosBox.replaceChildren(h('ul', { class: 'todos' }, todos.map((t, i) => h('li', { class: `todo todo-${t.status || (t.done ? 'completed' : 'pending')}` },
        h('input', { type: 'checkbox', id: `todo-${i}`, disabled: true, checked: !!(t.done || t.status === 'completed') }), ' ',
        h('label', { for: `todo-${i}` }, t.content || t.title || JSON.stringify(t)), ' ',
        t.status === 'in_progress' ? h('span', { class: 'badge' }, 'in progress') : null))));
    }
    const files = st.files && typeof st.files === 'object' ? st.files : null;
    $('#chat-files-sec').hidden = !files;
    if (files) {
      filesBox.replaceChildren(h('ul', { class: 'files' }, Object.entries(files).map(([name, f]) => {
        const text = typeof f === 'string' ? f : typeof f?.content === 'string' ? f.content : Array.isArray(f?.content) ? f.content.join('\n') : pretty(f);
        return h('li', { 'data-file': name }, h('details', {}, h('summary', {}, h('code', {}, name), h('span', { class: 'muted' }, ` ${text.length} chars`)),
          h('pre', { class: 'file-view', tabindex: '0' }, text)));
      })));
    }
    drawEditable();
  }

  const $ = (sel) => main.querySelector(sel);

  function stateNode(v, path, changed) {
    const hit = changed.some((c) => c === path || (path && c.startsWith(path + '/')));
    const own = changed.includes(path);
    if (v !== null && typeof v === 'object') {
      const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v);
      if (!entries.length) return h('span', { class: `v${own ? ' changed' : ''}`, 'data-path': path || '/' }, Array.isArray(v) ? '[]' : '{}');
      return h('ul', { class: `tree${hit ? ' has-changed' : ''}` }, entries.map(([k, x]) => {
        const p = `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
        const isObj = x !== null && typeof x === 'object' && Object.keys(x).length;
        const mark = changed.includes(p) ? ' changed' : '';
        return h('li', { 'data-path': p, class: mark.trim() || null },
          isObj ? h('details', { open: p.split('/').length < 4 }, h('summary', {}, h('span', { class: 'key' }, k)), stateNode(x, p, changed))
            : [h('span', { class: 'key' }, k), ': ', stateNode(x, p, changed)]);
      }));
    }
    return h('span', { class: `v v-${v === null ? 'null' : typeof v}${own ? ' changed' : ''}` }, JSON.stringify(v));
  }

  let editKeyShown = null;
  function drawEditable() {
    const keys = Object.keys(spec?.editableState || {}).sort();
    $('#chat-edit-sec').hidden = !keys.length;
    const sig = JSON.stringify([keys, keys.map((k) => agent.state?.[k]), canChat]);
    if (sig === editKeyShown || editBox.contains(document.activeElement)) return;
    editKeyShown = sig;
    editBox.replaceChildren(h('p', { class: 'help' }, 'The keys this agent lets a client write. A change is sent as state with your next message.'),
      ...keys.map((k) => editableForm(k, spec.editableState[k])));
  }

  function editableForm(k, schema) {
    const id = `es-${k}`;
    const cur = editDrafts[k] !== undefined ? editDrafts[k] : agent.state?.[k];
    const kind = schema?.type;
    let field;
    if (kind === 'string') field = h('input', { id, type: 'text', value: cur ?? '' });
    else if (kind === 'number' || kind === 'integer') field = h('input', { id, type: 'number', step: kind === 'integer' ? '1' : 'any', value: cur ?? '' });
    else if (kind === 'boolean') field = h('input', { id, type: 'checkbox', checked: !!cur });
    else { field = h('textarea', { id, class: 'code', rows: '3' }); field.value = cur === undefined ? '' : pretty(cur); }
    const err = h('p', { class: 'error-inline', role: 'alert', hidden: true });
    const note = h('span', { class: 'muted saved' }, editDrafts[k] !== undefined ? 'sent with your next message' : '');
    const f = h('form', { class: 'editable-key', 'data-key': k },
      h('label', { for: id }, h('code', {}, k)), field,
      h('div', { class: 'row' }, h('button', { type: 'submit', class: 'small', disabled: !canChat, 'data-action': 'set-state' }, 'Set'), note), err);
    f.addEventListener('submit', (ev) => {
      ev.preventDefault();
      let v;
      if (kind === 'string') v = field.value;
      else if (kind === 'number' || kind === 'integer') v = field.value === '' ? undefined : Number(field.value);
      else if (kind === 'boolean') v = field.checked;
      else {
        try { v = field.value.trim() ? JSON.parse(field.value) : undefined; } catch (e) { err.textContent = `Not valid JSON: ${e.message}`; err.hidden = false; return; }
      }
      const problems = v === undefined ? [] : validate(schema || {}, v);
      if (problems.length) { err.textContent = describe(problems).join('; ').replace(/^arguments/, k); err.hidden = false; field.focus(); return; }
      err.hidden = true;
      editDrafts[k] = v;
      agent.setState({ ...(agent.state || {}), [k]: v });
      note.textContent = 'sent with your next message';
      announce(`State key ${k} is sent with your next message.`);
    });
    return f;
  }

  // commaList is nodes with ", " between them.
  const commaList = (nodes) => nodes.flatMap((n, i) => (i ? [', ', n] : [n]));

  // mcpLine is one MCP server as its live client state says: connected
  // with its tool count, connecting, or failed with the error.
  function mcpLine(s) {
    const n = s.tools?.length || 0;
    const tools = `${n} tool${n === 1 ? '' : 's'}`;
    const label = s.status === 'connected' ? `connected · ${tools}` : s.status === 'connecting' ? 'connecting…' : `failed${n ? ` · ${tools}` : ''}`;
    return h('li', { 'data-mcp': s.name, 'data-status': s.status },
      h('code', {}, s.name), ' ', h('span', { class: `badge mcp-${s.status}` }, label),
      h('span', { class: 'muted' }, ` ${s.transport}`),
      s.status !== 'connected' && s.error ? h('p', { class: 'mcp-error error-inline' }, s.error) : null,
      s.status === 'connected' && n ? h('ul', { class: 'def-tools mcp-tools' }, s.tools.map((name) => toolLine(toolsByName.get(name) || { name }))) : null);
  }
  let toolsByName = new Map();

  function toolLine(t) {
    return h('li', { 'data-tool': t.name },
      h('details', {}, h('summary', { title: t.description || '' }, h('code', {}, t.name),
        t.approval ? h('span', { class: 'badge needs' }, 'needs approval') : null),
      t.description ? h('p', { class: 'muted' }, t.description) : null,
      h('pre', { class: 'json tool-schema' }, pretty(t.parameters || { type: 'object' }))));
  }

  function drawDefinition() {
    if (!spec) { defBox.replaceChildren(h('p', { class: 'error-inline' }, `No agent is named ${agentName}.`)); return; }
    fillModels();
    const mcp = spec.mcpServers || [];
    // An MCP server's tools are listed under their server.
    const fromMCP = new Set(mcp.flatMap((s) => s.tools || []));
    toolsByName = new Map(spec.tools.map((t) => [t.name, t]));
    const own = spec.tools.filter((t) => !t.builtin && !fromMCP.has(t.name));
    const builtin = spec.tools.filter((t) => t.builtin);
    const keys = Object.keys(spec.editableState || {}).sort();
    const models = spec.models || [spec.model];
    const open = new Set([...defBox.querySelectorAll('details[open]')].map((d) => d.closest('[data-tool]')?.dataset.tool || d.dataset.part));
    defBox.replaceChildren(h('dl', { class: 'facts' },
      h('dt', {}, 'Model'), h('dd', { id: 'chat-def-model' }, h('code', {}, models[0]),
        models.length > 1 ? h('span', { class: 'muted' }, ' then ', commaList(models.slice(1).map((m) => h('code', {}, m)))) : null),
      h('dt', {}, 'Tools'), h('dd', {}, own.length ? h('ul', { class: 'def-tools' }, own.map(toolLine)) : 'none'),
      builtin.length ? [h('dt', {}, 'Built-in'), h('dd', { class: 'muted' }, builtin.map((t) => t.name).join(', '))] : null,
      mcp.length ? [h('dt', {}, 'MCP servers'), h('dd', {}, h('ul', { class: 'mcp-servers', id: 'chat-mcp' }, mcp.map(mcpLine)))] : null,
      h('dt', {}, 'Page tools'), h('dd', {}, commaList(FRONTEND_TOOLS.map((t) => h('code', { class: 'def-ftool' }, t.name)))),
      spec.subagents?.length ? [h('dt', {}, 'Subagents'), h('dd', {}, h('ul', { class: 'def-subagents' }, spec.subagents.map((s) => h('li', {},
        h('strong', {}, s.name), s.description ? ` — ${s.description}` : '',
        h('span', { class: 'muted' }, ` (model ${s.model}; tools: ${s.tools.length ? s.tools.join(', ') : 'none'})`)))))] : null,
      h('dt', {}, 'Editable state'), h('dd', { id: 'chat-def-editable' }, keys.length ? commaList(keys.map((k) => h('code', {}, k))) : h('span', { class: 'muted' }, 'none'))),
    spec.instructions ? h('details', { 'data-part': 'instructions' }, h('summary', {}, 'Instructions'), h('div', { class: 'text instructions' }, spec.instructions)) : null,
    h('p', {}, h('a', { href: '#/agents' }, 'Full definition on the Agents page')));
    for (const d of defBox.querySelectorAll('details')) if (open.has(d.closest('[data-tool]')?.dataset.tool || d.dataset.part)) d.open = true;
    watchMCP();
  }

  // While an MCP server is not connected, its state is read again (every
  // 2 s while one connects, every 10 s while one is down and retried), so
  // the panel follows the server's live client.
  let mcpTimer = null;
  function watchMCP() {
    clearTimeout(mcpTimer);
    const servers = spec?.mcpServers || [];
    if (closed || servers.every((s) => s.status === 'connected')) return;
    mcpTimer = setTimeout(async () => {
      try {
        const agents = await ctx.loadAgents(true);
        const next = agents.find((a) => a.name === agentName);
        if (next && !closed) { spec = next; drawDefinition(); return; }
      } catch { /* the next try reads it again */ }
      watchMCP();
    }, servers.some((s) => s.status === 'connecting') ? 2000 : 10000);
  }

  // ---------- running ----------
  function setRunning(on) {
    if (on) runs++;
    running = on;
    log.setAttribute('aria-busy', String(on));
    stopBtn.hidden = !on || !canChat;
    sendBtn.disabled = !canChat;
    runState.textContent = on ? 'answering…' : '';
    draw();
  }

  const subscriber = {
    onEvent({ event: e }) {
      const owner = e.subagentRunId;
      switch (e.type) {
        case 'RUN_STARTED':
          runId = e.runId;
          ensureEvents();
          break;
        case 'TEXT_MESSAGE_START':
        case 'REASONING_MESSAGE_START':
          if (owner) owners.set(e.messageId, owner);
          if (runId) runOf.set(e.messageId, runId);
          break;
        case 'TEXT_MESSAGE_END': {
          const m = agent.messages.find((x) => x.id === e.messageId);
          if (m && !owner && typeof m.content === 'string') srStatus.textContent = `${agentName}: ${m.content.slice(0, 300)}`;
          break;
        }
        case 'TOOL_CALL_START':
          tools.set(e.toolCallId, { t0: e.timestamp || Date.now(), owner, runId });
          if (e.parentMessageId && runId) runOf.set(e.parentMessageId, runId);
          break;
        case 'TOOL_CALL_RESULT': {
          const t = tools.get(e.toolCallId) || {};
          t.t1 = e.timestamp || Date.now();
          tools.set(e.toolCallId, t);
          break;
        }
        case 'SUBAGENT_STARTED':
          subagents.set(e.subagentRunId, { name: e.name, parentToolCallId: e.parentToolCallId, status: 'working…', steps: [] });
          break;
        case 'SUBAGENT_FINISHED': {
          const s = subagents.get(e.subagentRunId);
          if (s) s.status = e.outcome?.type === 'suspended' ? 'paused' : 'finished';
          break;
        }
        case 'SUBAGENT_ERROR': {
          const s = subagents.get(e.subagentRunId);
          if (s) { s.status = 'failed'; s.error = e.message; }
          break;
        }
        case 'STEP_STARTED':
          if (owner && subagents.has(owner)) subagents.get(owner).steps.push(e.stepName);
          break;
        case 'STATE_DELTA':
          // Drawn once the client applied it (onStateChanged).
          lastOps = e.delta;
          break;
        case 'CUSTOM':
          if (e.name === 'stackbone.question' && e.value?.id && !decided.has(e.value.id)) {
            pending.set(e.value.id, { ...pendingFromInterrupt(e.value, argsOf), reason: 'elicitation' });
            announce(`${agentName}'s tool asks a question.`);
          }
          break;
        case 'RUN_ERROR':
          // The client reports its own abort (Stop) as a RUN_ERROR: the
          // Stop note says it already.
          if (e.code === 'abort' && stopped) break;
          notes.push({ key: `${notes.length}`, after: lastMsgId(), kind: 'error', text: e.message, code: e.code });
          announce(`Run error: ${e.message}`);
          break;
        case 'RUN_FINISHED': {
          const o = e.outcome;
          if (o?.type === 'interrupt') {
            for (const it of o.interrupts) if (!decided.has(it.id)) pending.set(it.id, pendingFromInterrupt(it, argsOf));
            announce(`${agentName} waits for a decision: ${o.interrupts.length} paused call${o.interrupts.length === 1 ? '' : 's'}.`);
          } else if (o?.type === 'cancelled') {
            notes.push({ key: `${notes.length}`, after: lastMsgId(), kind: 'cancelled', text: 'The turn was stopped; what had streamed is kept.' });
          }
          break;
        }
        default:
      }
      draw();
    },
    onStateChanged() {
      drawState(lastOps);
      lastOps = null;
    },
  };
  let lastOps = null; // the RFC 6902 operations of the delta being applied

  let queue = Promise.resolve();
  // runTurn runs the agent once (a message, a resume, or nothing: a
  // reattach or a regenerate), then answers the frontend tool calls it left
  // and runs again. Runs go one after the other.
  function runTurn(opts = {}) {
    queue = queue.then(() => runOnce(opts)).catch(() => {});
    return queue;
  }

  // MAX_TOOL_ROUNDS bounds how often in a row the page answers frontend
  // tool calls and runs again on its own.
  const MAX_TOOL_ROUNDS = 8;

  async function runOnce({ message, resume, rounds = 0 }) {
    if (closed) return;
    if (stopping) await stopping;
    showError('');
    if (message !== undefined) agent.addMessage({ id: randomUUID(), role: 'user', content: message });
    if (resume) {
      // The answered pauses leave the client's list (it checks that a
      // resume covers every pending one) and the page's.
      for (const r of resume) pending.delete(r.interruptId);
    }
    stopped = false;
    setRunning(true);
    let leftCalls = [];
    try {
      await agent.runAgent({
        runId: randomUUID(),
        tools: FRONTEND_TOOLS,
        context: [],
        forwardedProps: pickedModel ? { model: pickedModel } : {},
        ...(resume ? { resume } : {}),
      }, {
        ...subscriber,
        onRunStartedEvent() {
          // The resume's decisions are recorded before its run starts.
          if (resume?.length) ctx.pendingChanged?.(resume.length);
        },
        onRunFinishedEvent(p) {
          if (p.outcome === 'success') leftCalls = p.pendingToolCallIds || [];
        },
      });
      editDrafts = {};
      editKeyShown = null;
    } catch (e) {
      const text = e?.message || String(e);
      notes.push({ key: `${notes.length}`, after: lastMsgId(), kind: 'error', text, code: e?.status ? `HTTP ${e.status}` : '' });
      if (e?.status === 401) ctx.signedOut?.();
    } finally {
      setRunning(false);
      drawState();
      branchCount();
      ctx.pendingChanged?.();
    }
    if (closed || !leftCalls.length) return;
    const mine = leftCalls.filter((id) => FRONTEND_TOOLS.some((t) => t.name === toolName(id)));
    if (!mine.length) return;
    if (rounds >= MAX_TOOL_ROUNDS) {
      showError(`The agent called the page's tools ${rounds} times in a row; send a message to go on.`);
      return;
    }
    for (const id of mine) {
      const result = await runFrontendTool(toolName(id), argsOf(id));
      agent.addMessage({ id: randomUUID(), role: 'tool', toolCallId: id, content: JSON.stringify(result) });
      const t = tools.get(id) || {};
      t.t1 = Date.now();
      tools.set(id, t);
      draw();
    }
    if (!closed) await runOnce({ rounds: rounds + 1 });
  }

  function toolName(id) {
    for (const m of agent.messages) {
      const c = m.toolCalls?.find((x) => x.id === id);
      if (c) return c.function.name;
    }
    return '';
  }

  async function runFrontendTool(name, args) {
    if (name === 'get_time') {
      const tz = typeof args?.timeZone === 'string' && args.timeZone ? args.timeZone : Intl.DateTimeFormat().resolvedOptions().timeZone;
      let local;
      try { local = new Date().toLocaleString('en-US', { timeZone: tz }); } catch { local = new Date().toLocaleString(); }
      return { now: new Date().toISOString(), timeZone: tz, local };
    }
    if (name === 'confirm') return { confirmed: await confirmDialog(String(args?.question ?? 'Continue?')) };
    return { error: `The page has no tool ${name}.` };
  }

  function confirmDialog(question) {
    return new Promise((resolve) => {
      const before = document.activeElement;
      const yes = h('button', { type: 'submit', class: 'primary', value: 'yes', 'data-action': 'confirm-yes' }, 'Yes');
      const no = h('button', { type: 'submit', value: 'no', 'data-action': 'confirm-no' }, 'No');
      const dlg = h('dialog', { class: 'chat-dialog', id: 'chat-confirm', 'aria-labelledby': 'chat-confirm-h', 'aria-describedby': 'chat-confirm-q' },
        h('form', { method: 'dialog' },
          h('h2', { id: 'chat-confirm-h' }, `${agentName} asks`),
          h('p', { id: 'chat-confirm-q' }, question),
          h('p', { class: 'muted' }, 'The answer goes back to the agent as the result of its confirm call.'),
          h('div', { class: 'row' }, yes, no)));
      // Yes has the focus, so the Enter that sent the message (still down,
      // or its key events still queued, when a fast answer opens the
      // dialog) would answer it unread: a click from the keyboard counts
      // only after a key went down inside the open dialog.
      let keyInside = false;
      dlg.addEventListener('keydown', () => { keyInside = true; });
      for (const b of [yes, no]) {
        b.addEventListener('click', (ev) => { if (ev.detail === 0 && !keyInside) ev.preventDefault(); });
      }
      dlg.addEventListener('close', () => {
        dlg.remove();
        resolve(dlg.returnValue === 'yes');
        if (before?.isConnected) before.focus();
      });
      document.body.append(dlg);
      dlg.showModal();
      yes.focus();
    });
  }

  // stop aborts the stream and cancels the thread's turn on the server;
  // the next send waits for the cancel to be answered.
  async function stop() {
    if (!running) {
      if (waitingGate()) await cancelWaiting();
      return;
    }
    const from = document.activeElement;
    stopBtn.disabled = true;
    stopped = true;
    agent.abortRun();
    stopping = api('POST', threadPath + '/cancel').then(() => null, (e) => {
      if (e.status !== 404 && e.status !== 401) showError(`Could not stop the turn: ${e.message}`);
    }).finally(() => { stopping = null; stopBtn.disabled = false; });
    notes.push({ key: `${notes.length}`, after: lastMsgId(), kind: 'cancelled', text: 'You stopped the answer; what had streamed is kept.' });
    announce('Stopped.');
    draw();
    await stopping;
    // A call the stopped turn had under way is now a decision in doubt
    // (it may have run): the stored thread shows it.
    await queue;
    await loadThread(false);
    // Back to the composer, unless the user has moved on meanwhile (into
    // the in-doubt card the stop left, say): their typing stays where it is.
    const now = document.activeElement;
    if (!now || now === from || now === document.body || !now.isConnected) input.focus();
  }
  // cancelWaiting cancels the turn that waits on the paused calls
  // (POST /v1/threads/{id}/cancel): their decisions close, they do not run,
  // and their cards leave the chat.
  async function cancelWaiting() {
    stopBtn.disabled = true;
    let done = false;
    try {
      done = (await api('POST', threadPath + '/cancel'))?.cancelled === true;
    } catch (e) {
      if (e.status !== 404 && e.status !== 401) showError(`Could not cancel the turn: ${e.message}`);
    } finally {
      stopBtn.disabled = false;
    }
    if (done) {
      let closedN = 0;
      for (const id of [...pending.keys()]) if (pending.get(id).reason !== 'elicitation') { pending.delete(id); closedN++; }
      ctx.pendingChanged?.(closedN); // their decisions are closed: off the badge at once
      for (const id of answers.keys()) decided.delete(id);
      answers.clear();
      agent.pendingInterrupts = [];
      notes.push({ key: `${notes.length}`, after: lastMsgId(), kind: 'cancelled', text: 'You cancelled the turn: the paused calls did not run.' });
      announce('Turn cancelled.');
    }
    await loadThread(false);
    draw();
    input.focus();
  }
  stopBtn.addEventListener('click', stop);

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text || !canChat) return;
    if (running) { announce('The agent is still answering: Stop first (Esc).'); return; }
    if ([...pending.values()].some((p) => p.reason !== 'elicitation')) { showError('Decide the paused call above first: the thread waits for it.'); return; }
    input.value = '';
    runTurn({ message: text });
  });
  input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      form.requestSubmit();
    }
  });
  const onKey = (ev) => { if (ev.key === 'Escape' && running && !document.querySelector('dialog[open]')) { ev.preventDefault(); stop(); } };
  document.addEventListener('keydown', onKey);

  // branchCount says, beside the thread, how many branches it has (edit
  // and regenerate make them), with a switcher: choosing a branch makes it
  // the thread's head (POST /v1/threads/{id}/head), where the chat goes on.
  async function branchCount() {
    let list;
    try { list = await api('GET', threadPath + '/branches'); } catch { return; /* a new thread, or an older server */ }
    const bs = list?.data || [];
    branchNote.hidden = bs.length < 2;
    if (bs.length < 2) return;
    const sel = h('select', { id: 'chat-branch', 'aria-label': 'Branch (the head is where the chat goes on)', disabled: running || !canChat },
      bs.map((b) => h('option', { value: String(b.id) }, `branch ${b.id}${b.id === list.head ? ' (head)' : ''}`)));
    sel.value = String(list.head);
    sel.addEventListener('change', async () => {
      sel.disabled = true;
      try {
        await api('POST', threadPath + '/head', { branch: Number(sel.value) });
        announce(`Branch ${sel.value} is the head: the chat goes on from it.`);
        await loadThread(false);
      } catch (e) {
        if (e.status !== 401) showError(`Could not switch to branch ${sel.value}: ${e.message}`);
      }
      await branchCount();
      main.querySelector('#chat-branch')?.focus();
    });
    branchNote.replaceChildren(h('a', { href: '#/threads/' + enc(threadId) }, `${bs.length} branches`), ' ', sel);
  }

  // ---------- the thread as stored, and what happens elsewhere ----------
  let es = null;
  function ensureEvents() {
    if (es || closed) return;
    es = new EventSource(threadPath + '/events');
    es.onmessage = (ev) => {
      let e;
      try { e = JSON.parse(ev.data); } catch { return; }
      if (!e.seq || running) return;
      soon();
    };
    es.onerror = () => {
      if (es?.readyState === EventSource.CLOSED) es = null;
    };
  }

  let syncTimer = null;
  const soon = () => { clearTimeout(syncTimer); syncTimer = setTimeout(() => { if (!running) loadThread(false); }, 150); };

  // loadThread reads the stored thread: its messages and state when the page
  // is not running a turn, the pauses decided elsewhere, and reattaches to a
  // turn that runs.
  async function loadThread(first) {
    const at = runs;
    let t;
    try {
      t = await api('GET', threadPath);
    } catch (e) {
      if (e.status === 404) return; // a new thread: it starts with the first message
      if (e.status !== 401) showError(`Could not load thread ${threadId}: ${e.message}`);
      return;
    }
    // A run the page started (and may have finished) since the read began
    // makes the read stale: its status could still say running, and a
    // reattach would take the composer away for nothing.
    if (closed || running || runs !== at) return;
    if (t.agent && t.agent !== agentName) {
      showError(`Thread ${threadId} belongs to agent ${t.agent}, not ${agentName}.`);
      input.disabled = sendBtn.disabled = true;
      return;
    }
    ensureEvents();
    const stored = new Map((t.pending || []).map((it) => [it.id, it]));
    // Pauses decided elsewhere (the inbox, the CLI, the API).
    for (const id of [...pending.keys()]) {
      if (stored.has(id)) continue;
      const was = pending.get(id);
      pending.delete(id);
      answers.delete(id);
      let text = 'Decided elsewhere';
      try {
        const it = await api('GET', '/v1/hitl/' + enc(id));
        const d = it.decision || {};
        const verb = it.status === 'approved' ? (d.editedArgs ? 'Approved with edits' : 'Approved') : it.status === 'rejected' ? 'Rejected' : it.status;
        text = d.decidedVia === 'cancel' ? `Cancelled with the turn${d.decidedBy ? ` by ${d.decidedBy}` : ''}`
          : `${verb} elsewhere${d.decidedBy ? ` by ${d.decidedBy}` : ''}${d.decidedVia ? ` (via ${d.decidedVia})` : ''}`;
      } catch { /* keep the generic text */ }
      decided.set(id, { verdict: 'elsewhere', text, toolCallId: was?.toolCallId || '' });
      announce(`${text}.`);
    }
    for (const it of stored.values()) if (!pending.has(it.id) && !decided.has(it.id)) pending.set(it.id, pendingFromStore(it));
    agent.pendingInterrupts = [...pending.values()].filter((p) => p.reason !== 'elicitation').map((p) => ({ id: p.id, reason: p.reason === 'approval' ? 'tool_call' : p.reason,
      ...(p.toolCallId ? { toolCallId: p.toolCallId } : {}), ...(p.expiresAt ? { expiresAt: p.expiresAt } : {}) }));
    if (t.status === 'running') {
      runTurn({}); // a run with no new message reattaches to the running turn
      return;
    }
    agent.setMessages(fromThread(t.messages));
    if (t.state && typeof t.state === 'object') agent.setState({ ...t.state, ...editDrafts });
    drawState();
    draw();
    if (first) branchCount();
    if (first && t.messages?.length) announce(`Loaded thread ${threadId}: ${t.messages.length} messages.`);
  }

  // ---------- boot ----------
  (async () => {
    try {
      const agents = await ctx.loadAgents(true);
      spec = agents.find((a) => a.name === agentName) || null;
    } catch { spec = null; }
    if (closed) return;
    drawDefinition();
    if (!spec) {
      showError(`No agent is named ${agentName}.`);
      input.disabled = sendBtn.disabled = true;
    }
    drawState();
    fillPicker();
    await loadThread(true);
    main.dataset.chatReady = 'true';
    if (canChat) input.focus();
  })();

  return {
    name: 'chat',
    refresh(change) {
      if (change?.threadId === threadId && !running) soon();
    },
    close() {
      closed = true;
      delete main.dataset.chatReady;
      document.removeEventListener('keydown', onKey);
      clearTimeout(syncTimer);
      clearTimeout(mcpTimer);
      es?.close();
      if (running) agent.abortRun();
      document.querySelector('#chat-confirm')?.remove();
    },
  };
}

// schemaForm renders a JSON Schema object as form fields (string, number,
// integer, boolean, enum; other values as JSON), filled with value. read()
// returns the object the fields hold (throws on JSON it cannot parse).
export function schemaForm(h, schema, value, idp) {
  const props = schema?.type === 'object' || schema?.properties ? schema.properties || {} : null;
  if (!props || !Object.keys(props).length) {
    const ta = h('textarea', { id: `${idp}-json`, class: 'code', rows: '6', 'data-field': '' });
    ta.value = pretty(value ?? {});
    return {
      el: h('div', { class: 'schema-form' }, h('label', { for: `${idp}-json` }, 'Arguments (JSON)'), ta),
      read() { try { return JSON.parse(ta.value); } catch (e) { throw new Error(`The arguments are not valid JSON: ${e.message}`); } },
    };
  }
  const required = new Set(schema.required || []);
  const readers = [];
  const rows = Object.entries(props).map(([name, ps]) => {
    const id = `${idp}-${name}`;
    const cur = value?.[name];
    const t = Array.isArray(ps?.type) ? ps.type.find((x) => x !== 'null') : ps?.type;
    let field;
    let read;
    if (Array.isArray(ps?.enum)) {
      field = h('select', { id, name, 'data-field': name }, ps.enum.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
      if (cur !== undefined) field.value = JSON.stringify(cur);
      read = () => JSON.parse(field.value);
    } else if (t === 'string') {
      field = h('input', { id, name, type: 'text', 'data-field': name, value: cur ?? '' });
      read = () => (field.value === '' && !required.has(name) ? undefined : field.value);
    } else if (t === 'number' || t === 'integer') {
      field = h('input', { id, name, type: 'number', step: t === 'integer' ? '1' : 'any', 'data-field': name, value: cur ?? '' });
      read = () => (field.value === '' ? undefined : Number(field.value));
    } else if (t === 'boolean') {
      field = h('input', { id, name, type: 'checkbox', 'data-field': name, checked: !!cur });
      read = () => field.checked;
    } else {
      field = h('textarea', { id, name, class: 'code', rows: '3', 'data-field': name });
      field.value = cur === undefined ? '' : pretty(cur);
      read = () => {
        if (!field.value.trim()) return undefined;
        try { return JSON.parse(field.value); } catch (e) { throw new Error(`${name} is not valid JSON: ${e.message}`); }
      };
    }
    readers.push([name, read]);
    return h('div', { class: 'field' },
      h('label', { for: id }, name, required.has(name) ? h('span', { class: 'muted' }, ' (required)') : null,
        ps?.description ? h('span', { class: 'muted' }, ` — ${ps.description}`) : null),
      field);
  });
  return {
    el: h('div', { class: 'schema-form' }, rows),
    read() {
      const out = {};
      for (const [name, read] of readers) {
        const v = read();
        if (v !== undefined) out[name] = v;
      }
      return out;
    },
  };
}
