// Stackbone Studio: approvals inbox, threads, agents. Plain DOM, no build.
// Every value from the server goes into the page as text (never as HTML).
import { validate, describe } from './schema.js';
import { fmtInt, fmtTokens, fmtUSD, costText, fmtMs, niceMax, runChain, waterfall, days, dayKey } from './charts.js';
import { forks } from './branches.js';
import { chatView } from './chat.js';

const $ = (sel, root = document) => root.querySelector(sel);
const main = $('#main');

const app = {
  session: null, // {mode, signedIn, tenant, csrf, cookie}
  agents: null, // [AgentInfo]
  view: null, // {name, refresh(change), close()}
  live: null, // EventSource of /studio/api/live
  liveOpen: false,
  poller: null,
  pendingCount: 0,
};

// ---------- DOM helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

function pretty(v) {
  if (typeof v === 'string') {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// ago says how long ago a time was ("3 min ago"), or, for a time still to
// come (a schedule's next run), how soon it is ("in 18 h").
function ago(iso) {
  const t = new Date(iso).getTime();
  if (!Number.isFinite(t)) return '';
  const d = Math.round((Date.now() - t) / 1000);
  const s = Math.abs(d);
  if (s < 5) return 'just now';
  let span;
  if (s < 60) span = `${s}s`;
  else if (s < 3600) span = `${Math.floor(s / 60)} min`;
  else if (s < 48 * 3600) span = `${Math.floor(s / 3600)} h`;
  else span = `${Math.floor(s / 86400)} days`;
  return d < 0 ? `in ${span}` : `${span} ago`;
}

// quorumText says how many of the approvals a quorum needs were given, and
// by whom ("1 of 2 approvals: alice").
function quorumText(it) {
  const by = (it.approvals || []).map((a) => a.by);
  return `${by.length} of ${it.approvalsNeeded} approvals` + (by.length ? `: ${by.join(', ')}` : '');
}

// until says when a pending decision expires ("expires in 5 min"), or
// that it has.
function until(iso) {
  const t = new Date(iso).getTime();
  if (!Number.isFinite(t)) return '';
  const s = Math.round((t - Date.now()) / 1000);
  if (s <= 0) return 'expired';
  if (s < 60) return `expires in ${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `expires in ${m} min`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `expires in ${hr} h`;
  return `expires in ${Math.floor(hr / 24)} days`;
}

function timeEl(iso) {
  const d = new Date(iso);
  return h('time', { datetime: iso, title: d.toLocaleString(), 'data-ago': iso }, ago(iso));
}

setInterval(() => {
  for (const el of document.querySelectorAll('time[data-ago]')) el.textContent = ago(el.dataset.ago);
  for (const el of document.querySelectorAll('[data-until]')) el.textContent = until(el.dataset.until);
}, 15000);

let toastTimer = null;
function announce(text) {
  const el = $('#status');
  el.textContent = text;
  el.classList.add('show');
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => el.classList.remove('show'), 4000);
}

function threadHref(id) {
  return '#/threads/' + encodeURIComponent(id);
}

const statusLabels = {
  running: 'running',
  waiting: 'waiting for approval',
  queued: 'resuming',
  idle: 'idle',
  failed: 'failed',
};

function statusBadge(st) {
  return h('span', { class: `badge status-${st}` }, statusLabels[st] || st);
}

// ---------- API ----------

class APIError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `The server answered ${status}.`);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body) {
  const headers = { 'x-stackbone-client': 'studio' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && app.session?.csrf) headers['x-csrf-token'] = app.session.csrf;
  let res;
  try {
    res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new APIError(0, { error: { message: 'Could not reach the Stackbone server.' } });
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const err = new APIError(res.status, data);
    if (res.status === 401 && !path.startsWith('/studio/api/login')) signedOut();
    throw err;
  }
  return data;
}

async function loadAgents(force) {
  if (!app.agents || force) {
    const page = await api('GET', '/studio/api/agents');
    app.agents = page.data;
  }
  return app.agents;
}

async function toolSchema(agentName, toolName) {
  for (const force of [false, true]) {
    const agents = await loadAgents(force);
    const tool = agents.find((a) => a.name === agentName)?.tools.find((t) => t.name === toolName);
    if (tool) return tool.parameters || null;
  }
  return null;
}

// ---------- Session ----------

function signedOut() {
  if (app.session) app.session = { ...app.session, signedIn: false, csrf: '', cookie: false };
  stopLive();
  renderChrome();
  route();
}

function renderChrome() {
  const s = app.session || {};
  $('#nav').hidden = !s.signedIn;
  const tenant = $('#tenant');
  tenant.hidden = !s.signedIn;
  tenant.textContent = s.signedIn ? (s.user ? `${s.user} · tenant ${s.tenant}` : `tenant ${s.tenant}`) : '';
  $('#logout').hidden = !(s.signedIn && s.cookie);
  $('#live').hidden = !s.signedIn;
}

$('#logout').addEventListener('click', async () => {
  try {
    app.session = await api('POST', '/studio/api/logout');
  } catch {
    app.session = { mode: app.session?.mode, signedIn: false };
  }
  app.agents = null;
  stopLive();
  renderChrome();
  announce('Signed out.');
  route();
  if (app.session.signedIn) startLive();
});

function signInView() {
  const err = h('p', { class: 'error', id: 'signin-error', role: 'alert', hidden: true });
  const input = h('input', { id: 'apikey', name: 'apikey', type: 'password', autocomplete: 'current-password', required: true,
    spellcheck: 'false', 'aria-describedby': 'apikey-help signin-error' });
  const button = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'signin-form', id: 'signin-form', novalidate: true },
    h('label', { for: 'apikey' }, 'API key'),
    input,
    h('p', { class: 'help', id: 'apikey-help' }, 'One of the keys in STACKBONE_API_KEYS. The key itself is not stored in the browser: the server sets a signed session cookie.'),
    err,
    button);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.hidden = true;
    if (!input.value.trim()) {
      err.textContent = 'Enter an API key.';
      err.hidden = false;
      input.focus();
      return;
    }
    button.disabled = true;
    try {
      app.session = await api('POST', '/studio/api/login', { apiKey: input.value });
      input.value = '';
      renderChrome();
      startLive();
      announce(`Signed in as tenant ${app.session.tenant}.`);
      if (!location.hash || location.hash === '#/signin') location.hash = '#/inbox';
      else route();
    } catch (e) {
      err.textContent = e.status === 401 ? 'That API key is not valid.' : e.message;
      err.hidden = false;
      input.select();
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  const oidc = app.session?.oidc;
  const keys = app.session?.keys !== false;
  // An OpenID sign-in is a full-page navigation to the provider and back.
  const provider = oidc ? h('p', { class: 'signin-oidc' },
    h('a', { class: 'button primary', id: 'oidc-signin', href: oidc.url }, `Sign in with ${oidc.name}`)) : null;
  form.hidden = !keys;
  const view = h('section', { class: 'signin', 'aria-labelledby': 'signin-h' },
    h('h1', { id: 'signin-h', tabindex: '-1' }, 'Sign in to Stackbone Studio'),
    h('p', {}, oidc
      ? `This server runs in production mode: sign in with ${oidc.name}${keys ? ' or an API key' : ''} to see your approvals and threads.`
      : 'This server runs in production mode: sign in with an API key to see your tenant\'s approvals and threads.'),
    ...(provider ? [provider] : []),
    form);
  main.replaceChildren(view);
  if (keys) input.focus();
  else view.querySelector('#oidc-signin')?.focus();
  return { name: 'signin', refresh() {}, close() {} };
}

// ---------- Live updates ----------

let refreshTimer = null;
function scheduleRefresh(change) {
  clearTimeout(refreshTimer);
  const pendingChange = change;
  refreshTimer = setTimeout(() => {
    refreshCount();
    app.view?.refresh(pendingChange);
  }, 120);
}

function setLive(open) {
  app.liveOpen = open;
  const el = $('#live');
  el.textContent = open ? 'Live' : 'Reconnecting…';
  el.className = open ? 'live on' : 'live off';
  el.title = open ? 'Updates arrive as they happen.' : 'The live feed is down; checking every 2 seconds.';
  schedulePoll();
}

function startLive() {
  stopLive();
  if (!app.session?.signedIn) return;
  const es = new EventSource('/studio/api/live');
  app.live = es;
  es.addEventListener('hello', () => { setLive(true); scheduleRefresh({ kind: 'hello' }); });
  es.addEventListener('change', (ev) => {
    let change = {};
    try { change = JSON.parse(ev.data); } catch { /* ignore */ }
    scheduleRefresh(change);
  });
  es.onerror = async () => {
    setLive(false);
    if (es.readyState === EventSource.CLOSED) {
      // A refused stream (e.g. the session expired) does not reconnect itself.
      app.live = null;
      try {
        const s = await api('GET', '/studio/api/session');
        app.session = s;
        if (s.signedIn) setTimeout(startLive, 2000); else signedOut();
      } catch { setTimeout(startLive, 2000); }
    }
  };
  schedulePoll();
}

function stopLive() {
  if (app.live) app.live.close();
  app.live = null;
  app.liveOpen = false;
  clearInterval(app.poller);
  app.poller = null;
}

// A safety net: decisions made in another process are not always pushed, so
// poll slowly while the feed is up and every 2 seconds while it is down.
function schedulePoll() {
  clearInterval(app.poller);
  if (!app.session?.signedIn) return;
  app.poller = setInterval(() => scheduleRefresh({ kind: 'poll' }), app.liveOpen ? 10000 : 2000);
}

// refreshCount reads the pending count for the nav's badge. Reads can
// overlap (the live feed, the poll, the chat's own runs): only the latest
// one's answer is shown, so a read that started before a decision and came
// back after it cannot put the decided call back on the badge.
let countSeq = 0;
async function refreshCount() {
  if (!app.session?.signedIn) return;
  const mine = ++countSeq;
  try {
    const page = await api('GET', '/v1/hitl?status=pending&limit=1000');
    if (mine === countSeq) setCount(page.data.length);
  } catch { /* shown by the views */ }
}

// pendingChanged is the chat's word that its decisions were accepted
// (decided calls, taken off the badge at once) or that a run of it ended;
// the count is then read again.
function pendingChanged(decided = 0) {
  if (decided > 0) {
    countSeq++; // a read already under way predates the decisions
    setCount(Math.max(0, app.pendingCount - decided));
  }
  refreshCount();
}

function setCount(n) {
  app.pendingCount = n;
  const el = $('#inbox-count');
  el.hidden = n === 0;
  el.replaceChildren(String(n), h('span', { class: 'sr-only' }, ' pending'));
  document.title = (n ? `(${n}) ` : '') + 'Stackbone Studio';
}

// ---------- Decisions ----------

// decisionCard renders one pending decision with its actions. onDecided is
// called after the server accepted a decision.
function decisionCard(it, { showThread = true, onDecided } = {}) {
  const allowed = new Set(it.allowedDecisions || []);
  // An in-doubt call started before the server stopped and left no result:
  // it may already have run. Retry runs it again; skip tells the agent the
  // outcome is unknown (or what the reviewer writes).
  const inDoubt = it.reason === 'in_doubt';
  // A question a running tool asks (an MCP server's elicitation): the call
  // waits for the answer, a JSON object checked against the question's
  // schema; rejecting declines to answer.
  const asks = it.reason === 'elicitation';
  const idp = `d-${it.id}`;
  const error = h('div', { class: 'error', role: 'alert', hidden: true });
  const showError = (lines) => {
    error.replaceChildren(...[].concat(lines).map((l) => h('p', {}, l)));
    error.hidden = false;
  };
  const clearError = () => { error.hidden = true; error.replaceChildren(); };
  const buttons = [];

  const decide = async (kind, body, submitter) => {
    clearError();
    for (const b of card.querySelectorAll('button')) b.disabled = true;
    card.setAttribute('aria-busy', 'true');
    try {
      const route = { reject: 'reject', retry: 'retry', skip: 'skip' }[kind] || 'approve';
      const after = await api('POST', `/v1/hitl/${encodeURIComponent(it.id)}/${route}`, body);
      if (after?.status === 'pending') {
        // One approval toward a quorum: the call still waits on others.
        const q = card.querySelector('.meta .approvals');
        if (q) q.textContent = quorumText(after);
        for (const b of card.querySelectorAll('button')) b.disabled = false;
        announce(`Approved: ${quorumText(after)} for ${it.tool} on thread ${it.threadId}.`);
        return;
      }
      card.classList.add('decided');
      const verb = asks ? { reject: 'Declined', edit: 'Answered' }[kind] || 'Answered'
        : { reject: 'Rejected', edit: 'Approved with edits', retry: 'Retrying', skip: 'Skipped' }[kind] || 'Approved';
      announce(`${verb}: ${it.tool} on thread ${it.threadId}.`);
      // Keep keyboard focus in the list: the next decision, else the heading.
      const next = card.nextElementSibling?.querySelector('button') || card.previousElementSibling?.querySelector('button');
      onDecided?.(it, kind);
      const target = next?.isConnected ? next : document.querySelector('main h1, main h2');
      if (target) {
        if (!/^BUTTON|^A$/.test(target.tagName) && !target.hasAttribute('tabindex')) target.setAttribute('tabindex', '-1');
        target.focus();
      }
    } catch (e) {
      const mine = e.body?.error?.code === 'already_approved_by_you';
      showError(e.status === 409 && !mine ? 'This call was already decided elsewhere.' : problemLines(e));
      for (const b of card.querySelectorAll('button')) b.disabled = false;
      submitter?.focus();
      if (e.status === 409 || e.status === 404) scheduleRefresh({ kind: 'decision' });
    } finally {
      card.removeAttribute('aria-busy');
    }
  };

  // Reject, with an optional message.
  // (For an in-doubt call the same form skips it: the message becomes the
  // call's result.)
  const message = h('textarea', { id: `${idp}-msg`, name: 'message', rows: '2', maxlength: '4000',
    placeholder: inDoubt ? 'What you know of its outcome (optional)' : 'Tell the agent why (optional)' });
  const rejectForm = h('form', { class: 'panel reject-form', hidden: true, 'aria-label': `${inDoubt ? 'Skip' : 'Reject'} ${it.tool}` },
    h('label', { for: `${idp}-msg` }, inDoubt ? 'Result for the agent (optional; default: the outcome is unknown)' : 'Message to the agent (optional)'),
    message,
    h('div', { class: 'row' },
      inDoubt
        ? h('button', { type: 'submit', class: 'danger', 'data-action': 'confirm-skip' }, 'Skip call')
        : h('button', { type: 'submit', class: 'danger', 'data-action': 'confirm-reject' }, 'Reject call'),
      h('button', { type: 'button', class: 'ghost', onclick: () => closePanels(true) }, 'Cancel')));
  rejectForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const msg = message.value.trim();
    decide(inDoubt ? 'skip' : 'reject', msg ? { message: msg } : {}, ev.submitter);
  });

  // Edit: a JSON textarea checked against the tool's schema before sending
  // (for a question: the answer, checked against the question's schema).
  const argsText = pretty(it.args ?? {});
  const editText = asks ? pretty({}) : argsText;
  const editArea = h('textarea', { id: `${idp}-edit`, name: 'editedArgs', class: 'code', spellcheck: 'false',
    rows: String(Math.min(16, argsText.split('\n').length + 1)), 'aria-describedby': `${idp}-edit-help` });
  editArea.value = editText;
  const editForm = h('form', { class: 'panel edit-form', hidden: true, 'aria-label': asks ? `Answer ${it.tool}` : `Edit the arguments of ${it.tool}` },
    h('label', { for: `${idp}-edit` }, asks ? 'Answer (JSON)' : 'Edited arguments (JSON)'),
    editArea,
    h('p', { class: 'help', id: `${idp}-edit-help` }, asks ? 'Checked against the question\'s schema before it is sent.' : 'Checked against the tool\'s parameter schema before it is sent.'),
    h('div', { class: 'row' },
      h('button', { type: 'submit', class: 'primary', 'data-action': 'confirm-edit' }, asks ? 'Send answer' : 'Approve with edits'),
      h('button', { type: 'button', class: 'ghost', onclick: () => { editArea.value = editText; closePanels(true); } }, 'Cancel')));
  editForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearError();
    let value;
    try {
      value = JSON.parse(editArea.value);
    } catch (e) {
      showError(`The arguments are not valid JSON: ${e.message}`);
      editArea.setAttribute('aria-invalid', 'true');
      editArea.focus();
      return;
    }
    let schema = null;
    if (asks) schema = it.responseSchema?.properties?.editedArgs ?? null;
    else try { schema = await toolSchema(it.agent, it.tool); } catch { schema = null; }
    const problems = schema ? validate(schema, value) : [];
    if (problems.length) {
      showError(describe(problems));
      editArea.setAttribute('aria-invalid', 'true');
      editArea.focus();
      return;
    }
    editArea.removeAttribute('aria-invalid');
    decide('edit', { editedArgs: value }, ev.submitter);
  });

  const closePanels = (focusBack) => {
    rejectForm.hidden = true;
    editForm.hidden = true;
    clearError();
    for (const b of buttons) b.setAttribute('aria-expanded', 'false');
    if (focusBack) buttons[0]?.focus();
  };
  const toggle = (panel, btn, focusEl) => {
    const open = panel.hidden;
    closePanels(false);
    panel.hidden = !open;
    btn.setAttribute('aria-expanded', String(open));
    if (open) focusEl.focus();
  };

  if (allowed.has('retry')) {
    buttons.push(h('button', { type: 'button', class: 'primary', 'data-action': 'retry',
      onclick: (ev) => { closePanels(false); decide('retry', {}, ev.currentTarget); } }, 'Retry'));
  }
  if (allowed.has('skip')) {
    const b = h('button', { type: 'button', class: 'danger-outline', 'data-action': 'skip', 'aria-expanded': 'false',
      'aria-controls': `${idp}-reject` }, 'Skip…');
    b.addEventListener('click', () => toggle(rejectForm, b, message));
    buttons.push(b);
  }
  if (allowed.has('approve') && !asks) {
    buttons.push(h('button', { type: 'button', class: 'primary', 'data-action': 'approve',
      onclick: (ev) => { closePanels(false); decide('approve', {}, ev.currentTarget); } }, 'Approve'));
  }
  if (allowed.has('reject')) {
    const b = h('button', { type: 'button', class: 'danger-outline', 'data-action': 'reject', 'aria-expanded': 'false',
      'aria-controls': `${idp}-reject` }, 'Reject…');
    b.addEventListener('click', () => toggle(rejectForm, b, message));
    buttons.push(b);
  }
  if (allowed.has('edit')) {
    const b = h('button', { type: 'button', class: asks ? 'primary' : '', 'data-action': 'edit', 'aria-expanded': 'false', 'aria-controls': `${idp}-editf` }, asks ? 'Answer…' : 'Edit…');
    b.addEventListener('click', () => toggle(editForm, b, editArea));
    buttons.push(b);
  }
  rejectForm.id = `${idp}-reject`;
  editForm.id = `${idp}-editf`;

  const meta = h('p', { class: 'meta' },
    h('span', { class: 'badge agent' }, it.agent),
    it.subagent ? h('span', { class: 'badge' }, `subagent ${it.subagent}`) : null,
    inDoubt ? h('span', { class: 'badge reason-in-doubt', 'data-reason': 'in_doubt' }, 'in doubt: may already have run') : null,
    asks ? h('span', { class: 'badge reason-elicitation', 'data-reason': 'elicitation' }, 'question: the call waits for your answer') : null,
    showThread ? h('span', {}, 'thread ', h('a', { href: threadHref(it.threadId), class: 'thread-link' }, it.threadId)) : null,
    h('span', {}, 'asked ', timeEl(it.createdAt)),
    it.expiresAt ? h('span', { class: 'expires', 'data-until': it.expiresAt, title: new Date(it.expiresAt).toLocaleString() }, until(it.expiresAt)) : null,
    (it.approvalsNeeded || 1) > 1 ? h('span', { class: 'approvals' }, quorumText(it)) : null);

  const card = h('article', { class: 'decision', 'data-id': it.id, 'data-tool': it.tool, 'aria-labelledby': `${idp}-title` },
    h('header', {},
      h('h3', { id: `${idp}-title` }, h('span', { class: 'muted' }, 'Call '), h('code', {}, it.tool)),
      meta),
    it.description
      ? h('p', { class: 'desc' }, it.description)
      : h('p', { class: 'desc muted' }, 'No description.'),
    h('div', { class: 'args' },
      h('h4', {}, 'Arguments'),
      h('pre', { class: 'json', tabindex: '0', 'aria-label': `Arguments of ${it.tool}` }, argsText)),
    h('div', { class: 'actions row' }, app.session?.role === 'caller'
      ? h('p', { class: 'muted', 'data-role': 'caller' }, 'Your key has role caller: it cannot decide. An approver or admin key can.')
      : buttons),
    rejectForm,
    editForm,
    error);
  return card;
}

function problemLines(e) {
  const lines = [e.message];
  const details = e.body?.error?.details;
  if (Array.isArray(details)) {
    for (const d of details) lines.push(typeof d === 'string' ? d : (d.path ? `${d.path}: ${d.message}` : JSON.stringify(d)));
  }
  return lines;
}

const byNewest = (a, b) => new Date(b.createdAt) - new Date(a.createdAt);

// syncCards makes container hold one card per decision, in order, keeping
// the cards that stay (and what the user typed in them).
function syncCards(container, items, makeCard) {
  const keep = new Map();
  for (const el of container.querySelectorAll(':scope > article.decision')) keep.set(el.dataset.id, el);
  const want = items.map((it) => {
    const el = keep.get(it.id);
    const q = el?.querySelector('.meta .approvals');
    if (q) q.textContent = quorumText(it); // approvals given since it was drawn
    return el || makeCard(it);
  });
  const wantSet = new Set(want);
  for (const el of keep.values()) if (!wantSet.has(el)) el.remove();
  want.forEach((el, i) => {
    if (container.children[i] !== el) container.insertBefore(el, container.children[i] || null);
  });
}

// ---------- Inbox ----------

// HISTORY is how many decided calls the inbox lists under the pending ones.
const HISTORY = 50;

const byDecided = (a, b) => new Date(b.decision?.decidedAt || b.createdAt) - new Date(a.decision?.decidedAt || a.createdAt);

// historyItem renders one decided call of the audit: what was decided, the
// channel the server proved (decidedVia), what the client claimed, who.
// A call of a stateless turn has no thread: no human decided it, the
// server's stateless-approval policy did.
function historyItem(it) {
  const d = it.decision || {};
  const stateless = d.decidedVia === 'stateless';
  // A call closed by cancelling its waiting turn: nobody rejected it.
  const verdict = d.decidedVia === 'cancel' ? 'cancelled' : d.decision === 'retry' ? 'retried' : d.decision === 'skip' ? 'skipped'
    : it.status === 'approved' ? (stateless ? 'ran' : 'approved') : (stateless ? 'refused' : 'rejected');
  return h('li', { class: `history-item${stateless ? ' stateless' : ''}`, 'data-id': it.id, 'data-via': d.decidedVia || '' },
    h('p', {},
      h('code', {}, it.tool), ' ',
      h('span', { class: `badge status-${it.status}` }, verdict), ' ',
      h('span', { class: 'badge agent' }, it.agent), ' ',
      it.threadId
        ? h('span', {}, 'thread ', h('a', { href: threadHref(it.threadId), class: 'thread-link' }, it.threadId))
        : h('span', { class: 'no-thread' }, 'no session: a stateless turn, so no one was asked')),
    it.description ? h('p', { class: 'desc' }, it.description) : null,
    h('p', { class: 'meta' },
      h('span', { class: 'via' }, `via ${d.decidedVia || 'unknown'}`,
        d.claimedVia ? ` (client says ${d.claimedVia})` : ''),
      d.decidedBy ? h('span', {}, ` · by ${d.decidedBy}`) : null,
      d.message ? h('span', {}, ` · “${d.message}”`) : null,
      ' · ', timeEl(d.decidedAt || it.createdAt)));
}

function inboxView() {
  const history = h('ol', { class: 'history-list', id: 'history-list' });
  const historyEmpty = h('p', { class: 'empty', id: 'history-empty', hidden: true }, 'No decided calls yet.');
  const list = h('div', { class: 'cards', id: 'inbox-list' });
  const empty = h('p', { class: 'empty', id: 'inbox-empty', hidden: true }, 'No pending decisions. New ones appear here as agents ask.');
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const summary = h('p', { class: 'sub', id: 'inbox-summary', 'aria-live': 'polite' }, '');
  main.replaceChildren(h('section', { 'aria-labelledby': 'inbox-h' },
    h('div', { class: 'titlebar' },
      h('h1', { id: 'inbox-h', tabindex: '-1' }, 'Approvals'),
      summary),
    error, empty, list,
    h('section', { class: 'history', 'aria-labelledby': 'history-h' },
      h('h2', { id: 'history-h' }, 'Recent decisions'),
      historyEmpty, history)));

  const onDecided = () => { refresh(); };
  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    try {
      const [page, approved, rejected] = await Promise.all([
        api('GET', '/v1/hitl?status=pending&limit=1000'),
        api('GET', `/v1/hitl?status=approved&limit=${HISTORY}`),
        api('GET', `/v1/hitl?status=rejected&limit=${HISTORY}`)]);
      if (mine !== seq) return;
      const items = page.data.slice().sort(byNewest);
      error.hidden = true;
      syncCards(list, items, (it) => decisionCard(it, { onDecided }));
      empty.hidden = items.length > 0;
      summary.textContent = items.length === 1 ? '1 call waits for a decision, newest first.' : `${items.length} calls wait for a decision, newest first.`;
      setCount(items.length);
      const done = approved.data.concat(rejected.data).sort(byDecided).slice(0, HISTORY);
      history.replaceChildren(...done.map(historyItem));
      historyEmpty.hidden = done.length > 0;
    } catch (e) {
      if (e.status === 401) return;
      error.textContent = `Could not load the pending decisions: ${e.message}`;
      error.hidden = false;
    }
  }
  refresh();
  return { name: 'inbox', refresh, close() {} };
}

// ---------- Threads ----------

function threadsView(params) {
  const agentSel = h('select', { id: 'f-agent', name: 'agent' }, h('option', { value: '' }, 'All agents'));
  const statusSel = h('select', { id: 'f-status', name: 'status' },
    h('option', { value: '' }, 'Any status'),
    ...['running', 'waiting', 'idle', 'failed', 'queued'].map((s) => h('option', { value: s }, statusLabels[s])));
  statusSel.value = params.get('status') || '';
  const filters = { agent: params.get('agent') || '', status: statusSel.value };
  const tbody = h('tbody', {});
  const empty = h('p', { class: 'empty', hidden: true }, 'No threads match. A thread starts when a client sends a turn with the x-stackbone-session header or an AG-UI threadId.');
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const onFilter = () => {
    filters.agent = agentSel.value;
    filters.status = statusSel.value;
    const q = new URLSearchParams();
    if (filters.agent) q.set('agent', filters.agent);
    if (filters.status) q.set('status', filters.status);
    const qs = q.toString();
    history.replaceState(null, '', '#/threads' + (qs ? '?' + qs : ''));
    refresh();
  };
  agentSel.addEventListener('change', onFilter);
  statusSel.addEventListener('change', onFilter);

  main.replaceChildren(h('section', { 'aria-labelledby': 'threads-h' },
    h('div', { class: 'titlebar' }, h('h1', { id: 'threads-h', tabindex: '-1' }, 'Threads')),
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter threads', onsubmit: (e) => e.preventDefault() },
      h('label', { for: 'f-agent' }, 'Agent'), agentSel,
      h('label', { for: 'f-status' }, 'Status'), statusSel),
    error,
    h('table', { class: 'threads' },
      h('caption', { class: 'sr-only' }, 'Threads of this tenant, most recent activity first'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Thread'), h('th', { scope: 'col' }, 'Agent'),
        h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Last activity'))),
      tbody),
    empty));

  loadAgents().then((agents) => {
    for (const a of agents) agentSel.append(h('option', { value: a.name }, a.name));
    if (filters.agent && !agents.some((a) => a.name === filters.agent)) agentSel.append(h('option', { value: filters.agent }, filters.agent));
    agentSel.value = filters.agent;
  }).catch(() => {});

  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    const q = new URLSearchParams();
    if (filters.agent) q.set('agent', filters.agent);
    if (filters.status) q.set('status', filters.status);
    try {
      const page = await api('GET', '/v1/threads' + (q.toString() ? '?' + q : ''));
      if (mine !== seq) return;
      const items = page.data.slice().sort((a, b) => new Date(b.updatedAt) - new Date(a.updatedAt));
      error.hidden = true;
      tbody.replaceChildren(...items.map((t) => h('tr', { 'data-thread': t.id },
        h('th', { scope: 'row' }, h('a', { href: threadHref(t.id) }, t.id)),
        h('td', {}, t.agent),
        h('td', {}, statusBadge(t.status)),
        h('td', {}, timeEl(t.updatedAt)))));
      empty.hidden = items.length > 0;
    } catch (e) {
      if (e.status === 401) return;
      error.textContent = `Could not load the threads: ${e.message}`;
      error.hidden = false;
    }
  }
  refresh();
  return { name: 'threads', refresh, close() {} };
}

// jsonTree renders a value as nested <details> (objects and arrays) and
// leaves, so large state stays readable and keyboard-navigable.
function jsonTree(value, key, depth = 0) {
  const label = key === undefined ? null : h('span', { class: 'key' }, key);
  if (value !== null && typeof value === 'object') {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const kind = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    const d = h('details', { open: depth < 2 },
      h('summary', {}, label, label ? ': ' : '', h('span', { class: 'muted' }, kind)),
      entries.length
        ? h('ul', {}, entries.map(([k, v]) => h('li', {}, jsonTree(v, k, depth + 1))))
        : h('p', { class: 'muted leaf' }, Array.isArray(value) ? 'empty list' : 'empty object'));
    return d;
  }
  const cls = value === null ? 'null' : typeof value;
  return h('span', { class: 'leaf' }, label, label ? ': ' : '', h('span', { class: `v-${cls}` }, JSON.stringify(value)));
}

// roleName is how the page names a message's role.
function roleName(m) {
  return { user: 'User', assistant: 'Assistant', tool: 'Tool result', system: 'System' }[m.role] || m.role;
}

function messageEl(m) {
  const who = roleName(m);
  const children = [];
  if (m.content) {
    children.push(m.role === 'tool'
      ? h('pre', { class: 'json' }, pretty(m.content))
      : h('div', { class: 'text' }, m.content));
  }
  if (m.parts?.length) children.push(h('p', { class: 'muted' }, `${m.parts.length} attachment(s)`));
  for (const c of m.toolCalls || []) {
    children.push(h('div', { class: 'toolcall', 'data-call': c.id },
      h('p', {}, c.client ? 'Client tool call ' : 'Calls ', h('code', {}, c.name)),
      h('pre', { class: 'json' }, pretty(c.arguments || '{}'))));
  }
  return h('li', { class: `msg role-${m.role}${m.isError ? ' is-error' : ''}`, 'data-id': m.id },
    h('p', { class: 'who' }, who,
      m.role === 'tool' && m.toolName ? h('span', {}, ' · ', h('code', {}, m.toolName)) : null,
      m.isError ? h('span', { class: 'badge status-failed' }, 'error') : null,
      m.subagent ? h('span', { class: 'badge' }, `subagent ${m.subagent}`) : null),
    children);
}

function eventSummary(e) {
  const cut = (s, n = 90) => (s && s.length > n ? s.slice(0, n) + '…' : s || '');
  switch (e.type) {
    case 'run_started': return e.runId ? `run …${e.runId.slice(-6)}` : '';
    case 'run_finished': {
      const o = e.outcome || {};
      if (o.type === 'interrupt') return `paused for approval: ${(o.interrupts || []).map((i) => i.tool).join(', ')}`;
      return `finished (${o.type || 'success'}${o.stop ? ', ' + o.stop : ''})`;
    }
    case 'run_error': return `${e.code || 'error'}: ${cut(e.message)}`;
    case 'text_end': return cut(e.content);
    case 'tool_call_end': return `${e.toolName || 'tool'}(${cut(e.arguments, 70)})`;
    case 'tool_result': return `${e.toolName || 'tool'} → ${cut(e.content, 70)}`;
    case 'state_delta': {
      let ops = [];
      try { ops = typeof e.patch === 'string' ? JSON.parse(e.patch) : e.patch || []; } catch { ops = []; }
      return ops.map((op) => `${op.op} ${op.path}`).join(', ');
    }
    case 'subagent_started': return `${e.subagent || ''} started`;
    case 'subagent_finished': return `${e.subagent || ''} finished`;
    case 'step_started': case 'step_finished': return e.stepName || '';
    case 'question_asked': return `${e.toolName || 'tool'} asks: ${cut(e.question?.description)}`;
    default: return '';
  }
}

// threadQuery replaces some of the thread page's query parameters (branch,
// run) in the URL without routing again; null removes one.
function threadQuery(threadId, changes) {
  const q = new URLSearchParams(location.hash.split('?')[1] || '');
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined) q.delete(k); else q.set(k, String(v));
  }
  const qs = q.toString();
  history.replaceState(null, '', threadHref(threadId) + (qs ? '?' + qs : ''));
}

// branchParam reads ?branch=N: a branch id, or null for the head.
function branchParam(params) {
  const v = params.get('branch');
  return v !== null && /^\d+$/.test(v) ? Number(v) : null;
}

// canTurn says whether the signed-in key may start turns (fork and rewind
// need that, as a chat request does); an approver key cannot.
function canTurn() {
  return app.session?.role !== 'approver';
}

// branchSwitch is the "‹ 2 / 3 ›" switcher of a fork: the lines that part
// after one message, the one shown, and whether the head lies that way.
function branchSwitch(fork, where, go) {
  const n = fork.alts.length;
  const i = fork.current;
  const alt = (j) => `${j + 1} of ${n}${fork.alts[j].head ? ', towards the head' : ''}`;
  const cur = fork.alts[i];
  return h('span', { class: 'branch-switch', role: 'group', 'aria-label': `Branches ${where}`, 'data-fork': fork.seq,
    'data-branch': cur.branch },
  h('button', { type: 'button', class: 'ghost', 'data-action': 'prev-branch', disabled: i === 0,
    'aria-label': i > 0 ? `Previous branch (${alt(i - 1)})` : 'Previous branch (none)', onclick: () => go(fork, i - 1, 'prev-branch') }, '‹'),
  h('span', { class: 'branch-pos' }, `${i + 1} / ${n}`, h('span', { class: 'sr-only' }, `: branch ${alt(i)} shown`)),
  h('button', { type: 'button', class: 'ghost', 'data-action': 'next-branch', disabled: i === n - 1,
    'aria-label': i < n - 1 ? `Next branch (${alt(i + 1)})` : 'Next branch (none)', onclick: () => go(fork, i + 1, 'next-branch') }, '›'),
  cur.head ? h('span', { class: 'badge head-mark', title: 'The head lies this way: new turns go on along this line.' }, 'head') : null);
}

// forkLabel names a branch's fork point by its place in the conversation
// shown ("3"), or by its sequence number when it is not shown ("#7").
function forkLabel(visible, seq) {
  const i = visible.findIndex((m) => m.seq === seq);
  return i >= 0 ? String(i + 1) : `#${seq}`;
}

function threadView(id, params = new URLSearchParams()) {
  const title = h('h1', { id: 'thread-h', tabindex: '-1' }, 'Thread ', h('code', {}, id));
  const meta = h('p', { class: 'meta', id: 'thread-meta' });
  // Stop: shown while the thread runs a turn, to keys that may start turns.
  const stopButton = h('button', { type: 'button', class: 'danger small', 'data-action': 'stop',
    'aria-label': `Stop the running turn of thread ${id}` }, 'Stop');
  const stopError = h('p', { class: 'error', id: 'thread-stop-error', role: 'alert', hidden: true });
  const stopRow = h('div', { class: 'row stop-row', id: 'thread-stop', hidden: true }, stopButton,
    h('span', { class: 'muted' }, 'The turn is running. Stop ends it at once; calls it started wait for a decision.'));
  // Queued follow-ups (multitask enqueue): what will run after the running
  // turn, in order, each removable before it starts.
  const queueList = h('ol', { class: 'queue', id: 'queue-list' });
  const queueError = h('p', { class: 'error', id: 'queue-error', role: 'alert', hidden: true });
  const queueSec = h('section', { class: 'queued', id: 'thread-queue', hidden: true, 'aria-labelledby': 'queue-h' },
    h('h2', { id: 'queue-h' }, 'Queued messages'),
    h('p', { class: 'muted' }, 'Follow-ups sent while the agent worked. Each runs after the turn before it, in this order.'),
    queueError, queueList);
  const pendingList = h('div', { class: 'cards' });
  const pendingSec = h('section', { class: 'pending', id: 'thread-pending', hidden: true, 'aria-labelledby': 'pending-h' },
    h('h2', { id: 'pending-h' }, 'Waiting for your decision'), pendingList);
  const branchBar = h('div', { class: 'branch-bar', id: 'branch-bar', hidden: true });
  const messages = h('ol', { class: 'messages', id: 'messages' });
  const streaming = h('div', { class: 'streaming', id: 'streaming', 'aria-live': 'polite' });
  const stateNote = h('div', { class: 'state-note', id: 'state-note', hidden: true });
  const stateBox = h('div', { class: 'state', id: 'state' });
  const timeline = h('ol', { class: 'timeline', id: 'timeline' });
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const liveNote = h('span', { class: 'muted', id: 'events-status' }, 'connecting…');
  const runs = runsSection(id, params.get('run'));
  const path = '/v1/threads/' + encodeURIComponent(id);

  main.replaceChildren(h('section', { 'aria-labelledby': 'thread-h' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/threads' }, 'Threads'), ' / ', id),
    h('div', { class: 'titlebar' }, title, h('span', { id: 'thread-chat' })), meta, stopRow, stopError, error, pendingSec, queueSec,
    h('div', { class: 'thread-grid' },
      h('section', { class: 'conversation', 'aria-labelledby': 'conv-h' }, h('h2', { id: 'conv-h' }, 'Conversation'), branchBar, messages, streaming),
      h('aside', { class: 'side' },
        h('section', { 'aria-labelledby': 'state-h', id: 'state-section' }, h('h2', { id: 'state-h' }, 'State'), stateNote, stateBox),
        h('section', { 'aria-labelledby': 'tl-h' }, h('h2', { id: 'tl-h' }, 'Timeline ', liveNote), timeline))),
    runs.el));

  // What the page shows: a branch (null: the head), and the state after
  // one message ({at, label, res}) instead of the current state.
  let viewBranch = branchParam(params);
  let past = null;
  let seq = 0;
  let drawnKey = null;
  let stateKey = null;
  let openRewind = null; // the message whose rewind asks to be confirmed
  let last = null; // {t, branches, head, shown}

  // show switches the page to branch b (null: the head) and loads it.
  function show(b, focus) {
    viewBranch = b;
    past = null;
    openRewind = null;
    threadQuery(id, { branch: b });
    refresh().then(() => focus?.());
  }

  function goAlt(fork, j, action) {
    const alt = fork.alts[j];
    show(alt.show === last?.head ? null : alt.show, () => {
      const sw = messages.querySelector(`.branch-switch[data-fork="${fork.seq}"]`);
      const b = sw?.querySelector(`button[data-action="${action}"]:not([disabled])`) || sw?.querySelector('button:not([disabled])');
      b?.focus();
    });
    announce(`Showing branch ${j + 1} of ${fork.alts.length}${alt.head ? ' (towards the head)' : ''}.`);
  }

  async function makeHead(branch, button, err) {
    button.disabled = true;
    err.hidden = true;
    try {
      const t = await api('POST', path + '/head', { branch });
      announce(`Branch ${t.headBranch ?? branch} is now the head of thread ${id}.`);
      show(null, () => $('#branch-bar .branch-name', main)?.focus());
    } catch (e) {
      if (e.status === 401) return;
      err.textContent = `Could not make branch ${branch} the head: ${e.message}`;
      err.hidden = false;
      button.disabled = false;
      button.focus();
    }
  }

  // stop cancels the thread's running turn (POST /v1/threads/{id}/cancel,
  // which answers once the turn has stopped).
  async function stop() {
    stopButton.disabled = true;
    stopButton.textContent = 'Stopping…';
    stopError.hidden = true;
    try {
      const r = await api('POST', path + '/cancel');
      announce(r.cancelled ? `Stopped the running turn of thread ${id}.` : `Thread ${id} was not running any more.`);
    } catch (e) {
      if (e.status === 401) return;
      stopError.textContent = `Could not stop the turn: ${e.message}`;
      stopError.hidden = false;
    } finally {
      stopButton.disabled = false;
      stopButton.textContent = 'Stop';
    }
    await refresh();
    if (!stopError.hidden) stopButton.focus();
  }
  stopButton.addEventListener('click', stop);

  // refreshQueue shows the thread's queue (GET /v1/threads/{id}/queue).
  let queueKey = null;
  async function refreshQueue() {
    let list;
    try {
      list = (await api('GET', path + '/queue')).data;
    } catch (e) {
      if (e.status === 401 || e.status === 404) return;
      queueError.textContent = `Could not load the queue: ${e.message}`;
      queueError.hidden = false;
      queueSec.hidden = false;
      return;
    }
    queueError.hidden = true;
    const key = JSON.stringify([list.map((q) => q.id), canTurn()]);
    queueSec.hidden = list.length === 0;
    if (key === queueKey) return;
    queueKey = key;
    queueList.replaceChildren(...list.map(queuedItem));
  }

  function queuedItem(q) {
    const text = (q.messages || []).filter((m) => m.role === 'user').map((m) => m.content).join('\n') || '(no text)';
    const err = h('span', { class: 'error-inline', role: 'alert', hidden: true });
    const remove = canTurn() ? h('button', { type: 'button', class: 'danger small', 'data-action': 'unqueue',
      'aria-label': `Remove queued message ${q.position} from the queue` }, 'Remove') : null;
    remove?.addEventListener('click', async () => {
      remove.disabled = true;
      err.hidden = true;
      try {
        await api('DELETE', path + '/queue/' + encodeURIComponent(q.id));
        announce(`Removed queued message ${q.position} of thread ${id}.`);
      } catch (e) {
        if (e.status === 401) return;
        err.textContent = e.status === 404 ? ' It has already started (Stop ends it).' : ` Could not remove it: ${e.message}`;
        err.hidden = false;
        remove.disabled = false;
      }
      queueKey = null;
      await refreshQueue();
    });
    return h('li', { class: 'queued-msg', 'data-id': q.id },
      h('span', { class: 'badge' }, `#${q.position}`), ' ',
      h('span', { class: 'text' }, text.length > 200 ? text.slice(0, 200) + '…' : text), ' ',
      h('span', { class: 'muted' }, 'queued ', timeEl(q.createdAt)), ' ', remove, err);
  }
  // A queued follow-up writes no thread event: poll while the page is open.
  const queueTimer = setInterval(refreshQueue, 2000);

  async function forkAt(m, button, err) {
    button.disabled = true;
    err.hidden = true;
    try {
      const t = await api('POST', path + '/fork', { at: m.id });
      announce(`Forked thread ${id} into a new thread, ${t.id}.`);
      location.hash = threadHref(t.id);
    } catch (e) {
      if (e.status === 401) return;
      err.textContent = `Could not fork from this message: ${e.message}`;
      err.hidden = false;
      button.disabled = false;
      button.focus();
    }
  }

  async function rewindTo(m, label, button, err) {
    button.disabled = true;
    err.hidden = true;
    try {
      const t = await api('POST', path + '/head', { at: m.id });
      announce(`Rewound thread ${id} to message ${label}: branch ${t.headBranch} is the head.`);
      show(null, () => $('#branch-bar .branch-name', main)?.focus());
    } catch (e) {
      if (e.status === 401) return;
      err.textContent = `Could not rewind to this message: ${e.message}`;
      err.hidden = false;
      button.disabled = false;
      button.focus();
    }
  }

  async function stateAfter(m, label) {
    if (past?.at === m.id) {
      past = null;
    } else {
      try {
        const res = await api('GET', path + '/state?at=' + encodeURIComponent(m.id));
        past = { at: m.id, label, res };
      } catch (e) {
        if (e.status === 401) return;
        past = { at: m.id, label, error: e.message };
      }
    }
    for (const b of messages.querySelectorAll('button[data-action="state"]')) {
      b.setAttribute('aria-pressed', String(past?.at === b.closest('li.msg')?.dataset.id));
    }
    await renderState();
    if (past) $('#state-note', main)?.focus();
  }

  // renderState fills the state panel: the state after a chosen message
  // (past), the state at the end of a branch that is not the head, or the
  // thread's current state.
  async function renderState() {
    if (!last) return;
    const { t, shown, head } = last;
    let value;
    let note = null;
    let kind = 'current';
    if (past) {
      kind = 'past';
      value = past.res?.state ?? {};
      note = [h('span', { class: 'badge past-mark' }, 'past'), ' ',
        h('span', {}, `The state as it was right after message ${past.label}`,
          past.res && past.res.branch !== undefined ? `, on branch ${past.res.branch}` : '', '; not the current state.'),
        past.error ? h('span', { class: 'error-inline' }, ` Could not load it: ${past.error}`) : null,
        ' ', h('button', { type: 'button', class: 'linklike', 'data-action': 'current-state', onclick: () => {
          past = null;
          for (const b of messages.querySelectorAll('button[data-action="state"][aria-pressed="true"]')) b.setAttribute('aria-pressed', 'false');
          renderState();
        } }, 'Show the current state')];
    } else if (shown !== head) {
      kind = 'branch';
      const tip = t.messages[t.messages.length - 1];
      value = {};
      let why = '';
      if (tip) {
        try {
          value = (await api('GET', path + '/state?at=' + encodeURIComponent(tip.id))).state ?? {};
        } catch (e) {
          if (e.status === 401) return;
          why = ` Could not load it: ${e.message}`;
        }
      }
      if (last?.t !== t || past) return; // a newer refresh or a choice came first
      note = [h('span', { class: 'badge' }, `branch ${shown}`), ' ',
        h('span', {}, 'The state at the end of this branch, which is not the head.'),
        why ? h('span', { class: 'error-inline' }, why) : null];
    } else {
      value = t.state ?? {};
    }
    const key = kind + '|' + (past?.at || '') + '|' + JSON.stringify(value) + '|' + (past?.error || '');
    if (key === stateKey) return;
    stateKey = key;
    stateNote.replaceChildren(...(note || []).filter((c) => c !== null));
    stateNote.hidden = !note;
    stateNote.tabIndex = -1;
    $('#state-section', main).classList.toggle('past', kind === 'past');
    stateBox.dataset.kind = kind;
    stateBox.replaceChildren(jsonTree(value, 'state'));
  }

  // messageItem is one message of the conversation with its fork
  // switcher and its actions.
  function messageItem(m, n, fork, isTip) {
    const li = messageEl(m);
    const label = `${n} (${roleName(m)})`;
    if (fork) li.querySelector('.who').append(branchSwitch(fork, `after message ${n - 1}`, goAlt));
    const err = h('p', { class: 'error', role: 'alert', hidden: true });
    const buttons = [h('button', { type: 'button', class: 'ghost small', 'data-action': 'state', 'aria-pressed': String(past?.at === m.id),
      'aria-label': `State after this: message ${label}`, onclick: () => stateAfter(m, label) }, 'State after this')];
    let confirm = null;
    if (canTurn()) {
      const forkButton = h('button', { type: 'button', class: 'ghost small', 'data-action': 'fork',
        'aria-label': `Fork from here: a new thread from message ${label}` }, 'Fork from here');
      forkButton.addEventListener('click', () => forkAt(m, forkButton, err));
      buttons.push(forkButton);
      if (!isTip) {
        const yes = h('button', { type: 'button', class: 'danger small', 'data-action': 'confirm-rewind' }, 'Rewind');
        const no = h('button', { type: 'button', class: 'small', 'data-action': 'cancel-rewind' }, 'Cancel');
        const open = h('button', { type: 'button', class: 'ghost small', 'data-action': 'rewind', 'aria-expanded': 'false',
          'aria-label': `Rewind to here: message ${label}` }, 'Rewind to here');
        const cid = `rewind-${n}`;
        confirm = h('div', { class: 'panel rewind-confirm', id: cid, role: 'group', 'aria-label': `Confirm the rewind to message ${label}`, hidden: true },
          h('p', {}, `Rewind the thread to message ${n}? New turns go on from here; the later messages stay on their branch, and the state goes back to what it was after this message.`),
          h('div', { class: 'row' }, yes, no));
        open.setAttribute('aria-controls', cid);
        const toggle = (on) => {
          confirm.hidden = !on;
          open.setAttribute('aria-expanded', String(on));
          openRewind = on ? m.id : null;
          (on ? yes : open).focus();
        };
        open.addEventListener('click', () => toggle(confirm.hidden));
        no.addEventListener('click', () => toggle(false));
        yes.addEventListener('click', () => rewindTo(m, label, yes, err));
        if (openRewind === m.id) { confirm.hidden = false; open.setAttribute('aria-expanded', 'true'); }
        buttons.push(open);
      }
    }
    li.append(h('div', { class: 'msg-actions', role: 'group', 'aria-label': `Message ${label}` }, buttons), ...(confirm ? [confirm] : []), err);
    li.dataset.seq = m.seq ?? '';
    return li;
  }

  function renderBranchBar(visible, branches, shown, head) {
    if (branches.length < 2 && shown === head) {
      branchBar.hidden = true;
      branchBar.replaceChildren();
      return;
    }
    const b = branches.find((x) => x.id === shown);
    const err = h('p', { class: 'error', role: 'alert', hidden: true });
    const parts = [h('strong', { class: 'branch-name', tabindex: '-1' }, `Branch ${shown}`),
      shown === head
        ? h('span', { class: 'badge head-mark', title: 'New turns go on from this branch.' }, 'head')
        : h('span', { class: 'badge not-head' }, 'not the head'),
      h('span', { class: 'muted' }, b && b.id !== 0 ? `forks after message ${forkLabel(visible, b.forkSeq)}` : 'the first line',
        ` · ${branches.length} branch${branches.length === 1 ? '' : 'es'}`)];
    if (shown !== head) {
      const make = h('button', { type: 'button', class: 'primary small', 'data-action': 'make-head',
        'aria-label': `Make this the head: branch ${shown}` }, 'Make this the head');
      make.addEventListener('click', () => makeHead(shown, make, err));
      parts.push(h('span', { class: 'row' }, canTurn() ? make : null,
        h('button', { type: 'button', class: 'small', 'data-action': 'show-head', onclick: () => show(null) }, `Show the head (branch ${head})`)));
    }
    branchBar.replaceChildren(h('div', { class: 'branch-line' }, parts), err);
    branchBar.dataset.shown = shown;
    branchBar.dataset.head = head;
    branchBar.classList.toggle('off-head', shown !== head);
    branchBar.hidden = false;
  }

  async function refresh() {
    const mine = ++seq;
    runs.refresh();
    refreshQueue();
    try {
      const q = viewBranch === null ? '' : '?branch=' + viewBranch;
      const [t, list] = await Promise.all([
        api('GET', path + q),
        // An older server has no branches route: no branches to show.
        api('GET', path + '/branches').catch((e) => (e.status === 401 ? Promise.reject(e) : null)),
      ]);
      if (mine !== seq) return;
      error.hidden = true;
      $('#thread-chat', main)?.replaceChildren(chatLink(t.agent, id));
      meta.replaceChildren(h('span', { class: 'badge agent' }, t.agent), statusBadge(t.status),
        h('span', {}, 'last activity ', timeEl(t.updatedAt)),
        ...(t.lastError ? [h('span', { class: 'error-inline' }, t.lastError)] : []));
      stopRow.hidden = t.status !== 'running' || !canTurn();
      const head = list?.head ?? t.headBranch ?? 0;
      const shown = t.branch ?? viewBranch ?? head;
      const branches = list?.data?.length ? list.data : [{ id: 0, parent: 0, forkSeq: 0 }];
      last = { t, branches, head, shown };
      const visible = t.messages.filter((m) => m.role !== 'system');
      const key = JSON.stringify([shown, head, t.messages.map((m) => m.id), branches.map((b) => [b.id, b.tipSeq, b.messages]), canTurn()]);
      if (key !== drawnKey) {
        drawnKey = key;
        const haveSeqs = t.messages.every((m) => typeof m.seq === 'number');
        const fks = haveSeqs && branches.length > 1 ? forks(branches, shown, head, t.messages.map((m) => m.seq)) : [];
        const at = new Map(); // visible message index → its fork
        const ends = [];
        for (const f of fks) {
          const i = visible.findIndex((m) => m.seq > f.seq);
          if (i >= 0) at.set(i, f); else ends.push(f);
        }
        const items = visible.map((m, i) => messageItem(m, i + 1, at.get(i), shown === head && i === visible.length - 1));
        for (const f of ends) {
          items.push(h('li', { class: 'branch-end', 'data-fork': f.seq },
            h('p', { class: 'muted' }, shown === head
              ? 'The head ends here: the next turn goes on from the message above.'
              : 'This branch ends here.'),
            branchSwitch(f, 'after the last message', goAlt)));
        }
        messages.replaceChildren(...items);
        renderBranchBar(visible, branches, shown, head);
      }
      streaming.hidden = shown !== head;
      for (const el of [...streaming.children]) {
        if (t.messages.some((m) => m.id === el.dataset.id)) el.remove();
      }
      await renderState();
      const pend = t.pending.slice().sort(byNewest);
      syncCards(pendingList, pend, (it) => decisionCard(it, { showThread: false, onDecided: () => refresh() }));
      pendingSec.hidden = pend.length === 0;
    } catch (e) {
      if (e.status === 401 || mine !== seq) return;
      if (e.status === 404 && viewBranch !== null && e.body?.error?.param === 'branch') {
        announce(`Thread ${id} has no branch ${viewBranch}: showing the head.`);
        show(null);
        return;
      }
      error.textContent = e.status === 404 ? `No thread ${id} in this tenant.` : `Could not load the thread: ${e.message}`;
      error.hidden = false;
    }
  }

  let refreshTimerT = null;
  const soon = () => { clearTimeout(refreshTimerT); refreshTimerT = setTimeout(refresh, 100); };
  const seen = new Set();
  const es = new EventSource('/v1/threads/' + encodeURIComponent(id) + '/events');
  es.onopen = () => { liveNote.textContent = 'live'; };
  es.onerror = () => { liveNote.textContent = es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting…'; };
  es.onmessage = (ev) => {
    let e;
    try { e = JSON.parse(ev.data); } catch { return; }
    if (!e.seq) {
      // Live-only events: tokens as they stream.
      if (e.type === 'text_start' || e.type === 'text_delta') {
        let b = streaming.querySelector(`[data-id="${CSS.escape(e.messageId || '')}"]`);
        if (!b) {
          b = h('div', { class: 'msg role-assistant streaming-msg', 'data-id': e.messageId || '' },
            h('p', { class: 'who' }, 'Assistant ', h('span', { class: 'muted' }, 'typing…')), h('div', { class: 'text' }));
          streaming.append(b);
        }
        if (e.delta) b.querySelector('.text').append(e.delta);
      }
      return;
    }
    if (seen.has(e.seq)) return;
    seen.add(e.seq);
    const t = e.time ? new Date(e.time) : null;
    const atEnd = timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 24;
    timeline.append(h('li', { class: `ev ev-${e.type}${e.outcome?.type === 'interrupt' ? ' ev-paused' : ''}`, 'data-seq': e.seq },
      h('span', { class: 'seq' }, `#${e.seq}`),
      t ? h('time', { datetime: t.toISOString(), title: t.toLocaleString() }, t.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false })) : null,
      h('span', { class: 'type' }, e.type.replace(/_/g, ' ')),
      h('span', { class: 'detail' }, eventSummary(e))));
    while (timeline.children.length > 400) timeline.firstElementChild.remove();
    if (atEnd) timeline.scrollTop = timeline.scrollHeight;
    if (e.type === 'run_finished' || e.type === 'run_error') streaming.replaceChildren();
    soon();
  };

  refresh();
  return {
    name: 'thread',
    refresh(change) {
      if (!change || change.kind !== 'run' || change.threadId === id) soon();
    },
    close() { es.close(); clearTimeout(refreshTimerT); clearInterval(queueTimer); runs.close(); },
  };
}

// ---------- Runs ----------

const SVGNS = 'http://www.w3.org/2000/svg';

// svg is h for SVG elements (attributes only, never HTML).
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.setAttribute('class', v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// place positions an element on a track (percentages; the page's CSP
// allows styles set from script, not style attributes).
function place(el, left, width) {
  el.style.left = `${left}%`;
  if (width !== undefined) el.style.width = `${width}%`;
  return el;
}

const runStatusLabels = { running: 'running', idle: 'finished', waiting: 'paused', failed: 'failed', released: 'released' };
const outcomeLabels = { error: 'error', rejected: 'rejected', in_doubt: 'in doubt', timed_out: 'timed out', cancelled: 'cancelled', paused: 'paused' };
const decisionVerbs = { approved: 'approved', rejected: 'rejected', expired: 'expired', pending: 'pending' };

function shortRun(id) {
  return id && id.length > 12 ? `…${id.slice(-8)}` : id || '';
}

function runBadge(st) {
  const cls = { idle: 'idle', waiting: 'waiting', running: 'running', failed: 'failed' }[st] || 'idle';
  return h('span', { class: `badge status-${cls}`, 'data-status': st }, runStatusLabels[st] || st);
}

// stepCost is a model step's cost as its label says it: "cost unknown"
// when its model has no price, never $0.
function stepCost(s) {
  return s.costUsd === null || s.costUsd === undefined ? 'cost unknown' : fmtUSD(s.costUsd);
}

function runCost(r) {
  const c = costText(r.costUsd, r.costComplete);
  return c === 'unknown' ? 'cost unknown' : c;
}

// runsSection is a thread page's "Runs": the thread's runs, and the chosen
// one drawn as a waterfall with the runs it paused before or resumed.
function runsSection(threadId, chosen) {
  const tbody = h('tbody', {});
  const empty = h('p', { class: 'empty', hidden: true }, 'No runs recorded for this thread yet.');
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const picture = h('div', { class: 'wf-holder', id: 'run-waterfall', 'aria-live': 'polite' });
  const el = h('section', { class: 'runs', id: 'thread-runs', 'aria-labelledby': 'runs-h' },
    h('h2', { id: 'runs-h' }, 'Runs'),
    error,
    h('table', { class: 'threads runs-list', id: 'runs-list' },
      h('caption', { class: 'sr-only' }, 'Runs of this thread, oldest first. Choose one to see its waterfall.'),
      h('thead', {}, h('tr', {},
        ...['Run', 'Started', 'Duration', 'Status', 'Calls', 'Tokens', 'Cost', ''].map((c) => h('th', { scope: 'col' }, c)))),
      tbody),
    empty, picture);

  let runs = [];
  let selected = chosen || null;
  const details = new Map(); // run id → {sig, run}
  let drawn = '';
  let busy = false;
  let again = false;
  let closed = false;

  const sig = (r) => [r.status, r.endedAt, r.modelCalls, r.toolCalls, r.usage?.totalTokens, r.costUsd].join('|');

  function select(id) {
    selected = id;
    threadQuery(threadId, { run: id });
    renderList();
    draw().then(() => picture.querySelector('.wf-title')?.focus());
  }

  function renderList() {
    tbody.replaceChildren(...runs.map((r) => {
      const cur = r.id === selected;
      return h('tr', { 'data-run': r.id, class: cur ? 'current' : null, 'aria-current': cur ? 'true' : null },
        h('th', { scope: 'row' }, h('button', { type: 'button', class: 'linklike', 'data-run': r.id, title: r.id,
          'aria-pressed': String(cur), onclick: () => select(r.id) }, h('code', {}, shortRun(r.id)))),
        h('td', {}, r.startedAt ? timeEl(r.startedAt) : ''),
        h('td', {}, r.durationMs != null ? fmtMs(r.durationMs) : 'running'),
        h('td', {}, runBadge(r.status)),
        h('td', {}, `${r.modelCalls || 0} model · ${r.toolCalls || 0} tool`),
        h('td', { class: 'num' }, fmtInt(r.usage?.totalTokens)),
        h('td', { class: 'num' }, costText(r.costUsd, r.costComplete)),
        h('td', { class: 'muted' }, r.resumedFrom ? `resumes ${shortRun(r.resumedFrom)}` : '', r.error ? h('span', { class: 'error-inline' }, ` ${r.error}`) : null));
    }));
    empty.hidden = runs.length > 0;
  }

  async function detail(r) {
    const have = details.get(r.id);
    if (have && have.sig === sig(r)) return have.run;
    const run = await api('GET', '/v1/runs/' + encodeURIComponent(r.id));
    details.set(r.id, { sig: sig(r), run });
    return run;
  }

  async function draw() {
    if (!selected || !runs.some((r) => r.id === selected)) {
      picture.replaceChildren();
      drawn = '';
      return;
    }
    const byId = new Map(runs.map((r) => [r.id, r]));
    const chain = runChain(runs, selected).map((id) => byId.get(id));
    const full = await Promise.all(chain.map(detail));
    if (closed) return;
    const key = selected + '#' + full.map((r) => sig(r)).join(',');
    if (key === drawn) return;
    drawn = key;
    picture.replaceChildren(waterfallEl(full, selected));
  }

  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const page = await api('GET', '/v1/threads/' + encodeURIComponent(threadId) + '/runs');
      if (closed) return;
      runs = page.data || [];
      if (!selected && runs.length) selected = runs[runs.length - 1].id;
      error.hidden = true;
      renderList();
      await draw();
    } catch (e) {
      if (e.status === 401 || closed) return;
      if (e.status === 404) {
        runs = [];
        renderList();
        return;
      }
      error.textContent = `Could not load the runs: ${e.message}`;
      error.hidden = false;
    } finally {
      busy = false;
      if (again && !closed) { again = false; refresh(); }
    }
  }

  return { el, refresh, close() { closed = true; } };
}

// gapText says what a pause waited on: each decision, its outcome and who
// made it ("refund approved by alice").
function gapLines(g) {
  if (!g.decisions.length) return ['paused'];
  return g.decisions.map((d) => {
    const what = d.kind === 'elicitation' ? 'answer' : d.kind === 'in_doubt' ? 'in-doubt call' : d.tool || 'call';
    if (d.decidedVia === 'cancel') return `${what} cancelled with the turn${d.decidedBy ? ` by ${d.decidedBy}` : ''}`;
    const verb = decisionVerbs[d.status] || d.status || 'decided';
    return `${what} ${verb}${d.decidedBy ? ` by ${d.decidedBy}` : ''}${d.decidedVia ? ` (${d.decidedVia})` : ''}`;
  });
}

// stepContent splits a model step's recorded content into what was sent
// and what came back: {request, response}, or the engine's {system,
// messages, tools, settings, output}. null when the step has none.
function stepContent(s) {
  let c = s?.content;
  if (typeof c === 'string') { try { c = JSON.parse(c); } catch { return { request: c, response: null }; } }
  if (!c || typeof c !== 'object') return null;
  if ('request' in c || 'response' in c) return { request: c.request, response: c.response };
  const { output, ...request } = c;
  return { request, response: output ?? null };
}

// gapBox is the label of a pause on the waterfall's axis: at least as wide
// as the gap, wider when its text needs it.
function gapBox(g) {
  const box = place(h('div', { class: 'wf-gap', role: 'note' },
    h('strong', {}, `waited ${fmtMs(g.waitedMs)}`),
    gapLines(g).map((l) => h('span', { class: 'wf-decision' }, l))), g.left);
  box.style.minWidth = `${g.width}%`;
  return box;
}

// waterfallEl draws runs (oldest first, each resuming the one before) as a
// waterfall: a bar per run, model call and tool call on one time axis, the
// approval waits between runs as gaps naming who decided.
function waterfallEl(runs, selectedId) {
  const wf = waterfall(runs);
  const head = runs.find((r) => r.id === selectedId) || runs[0];
  const facts = h('ul', { class: 'wf-runs' }, runs.map((r, i) => h('li', { 'data-run': r.id, class: r.id === selectedId ? 'current' : null },
    h('strong', {}, runs.length > 1 ? `Run ${i + 1} ` : 'Run '), h('code', { title: r.id }, r.id), ' ', runBadge(r.status),
    h('span', { class: 'badge agent' }, r.agent),
    r.key ? h('span', { class: 'muted' }, ` key ${r.key}`) : null,
    h('span', {}, ` · ${r.durationMs != null ? fmtMs(r.durationMs) : 'running'} · `),
    h('span', { class: 'wf-tokens', 'data-total-tokens': r.usage?.totalTokens ?? 0,
      title: `input ${fmtInt(r.usage?.inputTokens)} (cached ${fmtInt(r.usage?.cachedInputTokens)}), output ${fmtInt(r.usage?.outputTokens)} (reasoning ${fmtInt(r.usage?.reasoningTokens)})` },
    `${fmtInt(r.usage?.totalTokens)} tokens`),
    h('span', {}, ` · `), h('span', { class: 'wf-cost' }, runCost(r)),
    h('span', { class: 'wf-trace' }, ' · trace ', r.traceId
      ? (r.traceUrl ? h('a', { href: r.traceUrl, target: '_blank', rel: 'noopener noreferrer', class: 'trace-link' }, h('code', {}, r.traceId))
        : h('code', {}, r.traceId))
      : h('span', { class: 'muted' }, 'none')),
    r.error ? h('div', { class: 'error-inline' }, r.error) : null)));

  const axis = h('div', { class: 'wf-track wf-axis-track', 'aria-hidden': 'true' });
  for (const t of wf.ticks) axis.append(place(h('span', { class: 'wf-tick' }, t.label), t.left));
  for (const g of wf.gaps) axis.append(place(h('span', { class: 'wf-tick wf-tick-gap' }, '⋯'), g.left + g.width / 2));

  const body = h('div', { class: 'wf-body' });
  const bands = h('div', { class: 'wf-bands' });
  for (const t of wf.ticks) bands.append(place(h('span', { class: 'wf-grid', 'aria-hidden': 'true' }), t.left));
  for (const g of wf.gaps) bands.append(place(h('span', { class: 'wf-gap-band', 'aria-hidden': 'true' }), g.left, g.width));
  body.append(bands);

  const gapAt = new Map(wf.gaps.map((g) => [g.to.id, g]));
  for (const r of wf.rows) {
    const g = r.kind === 'run' ? gapAt.get(r.run.id) : null;
    if (g) {
      // The wait between a paused run and the one that resumed it.
      body.append(h('div', { class: 'wf-row wf-row-gap', 'data-kind': 'gap', 'data-from': g.from.id, 'data-to': g.to.id },
        h('div', { class: 'wf-label' }, h('span', { class: 'wf-kind wf-kind-gap' }, 'pause'), ' waiting for a decision'),
        h('div', { class: 'wf-track' }, gapBox(g))));
    }
    const s = r.step;
    // A paused call (it waits on a question) is not an error; every other
    // outcome but ok is.
    const paused = s?.outcome === 'paused';
    const bad = s ? !!s.outcome && s.outcome !== 'ok' && !paused : r.run.status === 'failed';
    const retried = s && (s.attempts || 1) > 1;
    const label = h('div', { class: 'wf-label' });
    label.style.paddingLeft = `${r.depth * 14 + 4}px`;
    let meta;
    let title;
    if (!s) {
      label.append(h('strong', {}, 'run '), h('code', {}, shortRun(r.run.id)), ' ', runBadge(r.run.status));
      meta = `${fmtMs(r.durationMs)} · ${fmtInt(r.run.usage?.totalTokens)} tok · ${runCost(r.run)}`;
      title = `run ${r.run.id}: ${meta}`;
    } else {
      label.append(...[
        r.depth > 1 ? h('span', { class: 'wf-nest', 'aria-hidden': 'true' }, '↳ ') : null,
        h('span', { class: `wf-kind wf-kind-${s.kind}` }, s.kind === 'model' ? 'model' : 'tool'), ' ',
        h('span', { class: 'wf-name' }, s.name || s.model || ''),
        bad ? h('span', { class: 'badge status-failed wf-outcome' }, outcomeLabels[s.outcome] || s.outcome) : null,
        paused ? h('span', { class: 'badge status-waiting wf-outcome' }, 'paused') : null,
        retried ? h('span', { class: 'badge wf-retry', title: `${s.attempts} attempts` }, `${s.attempts} attempts`) : null,
        s.subagent ? h('span', { class: 'badge wf-sub', title: `subagent ${s.subagent}` }, s.subagent) : null].filter(Boolean));
      if (s.kind === 'model') {
        meta = `${fmtMs(s.durationMs)} · ${fmtInt(s.usage?.totalTokens)} tok · ${stepCost(s)}`;
        title = `${s.provider ? s.provider + '/' : ''}${s.name}${s.responseModel && s.responseModel !== s.name ? ` (answered by ${s.responseModel})` : ''}: ` +
          `${meta}; input ${fmtInt(s.usage?.inputTokens)}, output ${fmtInt(s.usage?.outputTokens)}` +
          `${s.firstChunkMs != null ? `; first chunk after ${fmtMs(s.firstChunkMs)}` : ''}${s.finishReason ? `; finished: ${s.finishReason}` : ''}`;
      } else {
        meta = fmtMs(s.durationMs);
        title = `${s.name}${s.toolCallId ? ` (${s.toolCallId})` : ''}: ${meta}`;
      }
      if (bad && s.error) meta += ` · ${s.error.length > 80 ? s.error.slice(0, 79) + '…' : s.error}`;
      if (s.error) title += `; ${s.error}`;
    }
    const bar = place(h('div', { class: `wf-bar wf-bar-${r.kind}${bad ? ' wf-bad' : ''}${paused ? ' wf-paused' : ''}${retried ? ' wf-retried' : ''}`, title }), r.left, r.width);
    const metaEl = h('span', { class: 'wf-meta' }, meta);
    // The label goes on the side of the bar with more room, or on the bar
    // when it spans nearly the whole axis.
    const roomLeft = r.left;
    const roomRight = 100 - r.left - r.width;
    if (Math.max(roomLeft, roomRight) < 28) {
      metaEl.classList.add('wf-meta-on');
      metaEl.style.right = `calc(${Math.max(roomRight, 0)}% + 6px)`;
    } else if (roomRight >= roomLeft || roomRight >= 38) metaEl.style.left = `calc(${r.left + r.width}% + 6px)`;
    else metaEl.style.right = `calc(${100 - r.left}% + 6px)`;
    const row = h('div', { class: `wf-row wf-row-${r.kind}${r.run.id === selectedId && !s ? ' current' : ''}`,
      'data-kind': r.kind, 'data-run': r.run.id, 'data-step': s?.id, 'data-name': s ? s.name : null,
      'data-depth': r.depth, 'data-outcome': s?.outcome, 'data-attempts': s?.attempts,
      'data-tokens': s ? (s.kind === 'model' ? s.usage?.totalTokens ?? 0 : null) : r.run.usage?.totalTokens ?? 0,
      'data-cost': s ? (s.kind === 'model' ? (s.costUsd ?? 'unknown') : null) : (r.run.costUsd ?? 'unknown'),
      'data-parent': s?.parentToolCallId || null },
    label, h('div', { class: 'wf-track' }, bar, metaEl));
    body.append(row);
    // The server keeps a model call's request and response only in dev
    // mode or with STACKBONE_TRACE_CONTENT=true; a step that carries them
    // ("content": {"request": …, "response": …}) opens to show them. Steps
    // without content show nothing more.
    const content = stepContent(s);
    if (content) {
      body.append(h('details', { class: 'wf-content', 'data-step': s.id },
        h('summary', {}, `Request and response of ${s.name}`),
        h('div', { class: 'wf-content-grid' },
          h('div', {}, h('h4', {}, 'Request'), h('pre', { class: 'json' }, pretty(content.request ?? null))),
          h('div', {}, h('h4', {}, 'Response'), h('pre', { class: 'json' }, pretty(content.response ?? null))))));
    }
  }

  const models = wf.rows.filter((r) => r.kind === 'model').length;
  const tools = wf.rows.filter((r) => r.kind === 'tool').length;
  const tokens = runs.reduce((a, r) => a + (r.usage?.totalTokens || 0), 0);
  const note = app.session?.content ? null
    : h('p', { class: 'help' }, 'Model requests and responses are not recorded: they are in dev mode or with STACKBONE_TRACE_CONTENT=true.');
  return h('div', { class: 'wf', 'data-run': selectedId },
    h('h3', { class: 'wf-title', tabindex: '-1' }, `Waterfall of run ${shortRun(head.id)}`,
      runs.length > 1 ? h('span', { class: 'muted' }, ` with ${runs.length - 1} linked by approval pauses`) : null),
    facts,
    h('p', { class: 'sr-only' }, `${models} model calls and ${tools} tool calls, ${fmtInt(tokens)} tokens in all.`),
    h('div', { class: 'waterfall', role: 'group', 'aria-label': `Waterfall of run ${head.id}` },
      h('div', { class: 'wf-row wf-axis' }, h('div', { class: 'wf-label muted' }, 'time from run start'), axis),
      body),
    h('p', { class: 'wf-legend muted' },
      h('span', { class: 'sw sw-run' }), ' run ', h('span', { class: 'sw sw-model' }), ' model call ',
      h('span', { class: 'sw sw-tool' }), ' tool call ', h('span', { class: 'sw sw-bad' }), ' error ',
      h('span', { class: 'sw sw-gap' }), ' waiting for a decision'),
    note);
}

// ---------- Agents ----------

function agentsView() {
  const list = h('div', { class: 'agents' });
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  main.replaceChildren(h('section', { 'aria-labelledby': 'agents-h' },
    h('div', { class: 'titlebar' }, h('h1', { id: 'agents-h', tabindex: '-1' }, 'Agents')), error, list));

  async function refresh(change) {
    if (change && change.kind !== 'hello') return;
    try {
      const agents = await loadAgents(true);
      error.hidden = true;
      list.replaceChildren(...agents.map(agentCard));
      if (!agents.length) list.append(h('p', { class: 'empty' }, 'No agents are loaded. Put agent files in agents/.'));
    } catch (e) {
      if (e.status === 401) return;
      error.textContent = `Could not load the agents: ${e.message}`;
      error.hidden = false;
    }
  }
  refresh();
  return { name: 'agents', refresh, close() {} };
}

// chatLink opens the chat playground with an agent (on a thread).
function chatLink(agent, thread) {
  return h('a', { class: 'button small chat-link', 'data-action': 'chat', href: `#/chat/${encodeURIComponent(agent)}` + (thread ? `?thread=${encodeURIComponent(thread)}` : ''),
    'aria-label': thread ? `Chat on thread ${thread}` : `Chat with ${agent}` }, 'Chat');
}

function agentCard(a) {
  const idp = `a-${a.name}`;
  const approval = (t) => {
    if (!t.approval) return h('span', { class: 'muted' }, 'runs without approval');
    return h('span', {}, h('span', { class: 'badge needs' }, 'needs approval'), ' ',
      t.approval.allowedDecisions.join(' · '),
      t.approval.conditional ? h('span', { class: 'muted' }, ' (some calls only)') : null);
  };
  const keys = Object.keys(a.editableState || {}).sort();
  return h('article', { class: 'agent-card', 'data-agent': a.name, 'aria-labelledby': `${idp}-h` },
    h('div', { class: 'titlebar' }, h('h2', { id: `${idp}-h` }, a.name), chatLink(a.name)),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Model'), h('dd', {}, h('code', {}, a.model)),
      h('dt', {}, 'Step limit'), h('dd', {}, String(a.maxSteps)),
      a.source ? [h('dt', {}, 'Source'), h('dd', {}, h('code', {}, a.source))] : null),
    h('h3', {}, 'Instructions'),
    a.instructions ? h('div', { class: 'text instructions' }, a.instructions) : h('p', { class: 'muted' }, 'None.'),
    h('h3', {}, 'Tools'),
    a.tools.length
      ? h('table', { class: 'tools' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Tool'), h('th', { scope: 'col' }, 'Description'), h('th', { scope: 'col' }, 'Approval'))),
        h('tbody', {}, a.tools.map((t) => h('tr', { 'data-tool': t.name },
          h('th', { scope: 'row' }, h('code', {}, t.name), t.builtin ? h('span', { class: 'badge' }, 'built-in') : null),
          h('td', {}, t.description || '',
            t.parameters ? h('details', {}, h('summary', {}, 'Parameters'), h('pre', { class: 'json' }, pretty(t.parameters))) : null),
          h('td', {}, approval(t))))))
      : h('p', { class: 'muted' }, 'No tools.'),
    (a.mcpServers || []).length
      ? [h('h3', {}, 'MCP servers'),
        h('ul', { class: 'mcp-servers' }, a.mcpServers.map((s) => h('li', { 'data-mcp': s.name },
          h('code', {}, s.name), ' ', h('span', { class: `badge mcp-${s.status}` }, s.status),
          h('span', { class: 'muted' }, ` ${s.transport}; ${s.tools.length} tool${s.tools.length === 1 ? '' : 's'}`),
          s.error ? h('div', { class: 'muted' }, s.error) : null)))]
      : null,
    (a.a2aAgents || []).length
      ? [h('h3', {}, 'A2A agents'),
        h('ul', { class: 'a2a-agents' }, a.a2aAgents.map((r) => h('li', { 'data-a2a': r.name },
          h('strong', {}, r.name), ' ', h('code', {}, r.url),
          r.description ? ` — ${r.description}` : '',
          r.headers.length ? h('span', { class: 'muted' }, ` (headers: ${r.headers.join(', ')}; values hidden)`) : null)))]
      : null,
    h('h3', {}, 'Subagents'),
    a.subagents.length
      ? h('ul', { class: 'subagents' }, a.subagents.map((s) => h('li', {},
        h('strong', {}, s.name), s.description ? ` — ${s.description}` : '',
        h('span', { class: 'muted' }, ` (model ${s.model}; tools: ${s.tools.length ? s.tools.join(', ') : 'none'})`))))
      : h('p', { class: 'muted' }, 'None.'),
    h('h3', {}, 'Editable state keys'),
    keys.length
      ? h('ul', { class: 'statekeys' }, keys.map((k) => h('li', {}, h('code', {}, k), ' ',
        h('span', { class: 'muted' }, JSON.stringify(a.editableState[k])))))
      : h('p', { class: 'muted' }, 'None: clients cannot write this agent\'s state.'));
}

// ---------- Webhooks ----------

const deliveryLabels = { pending: 'retrying', delivered: 'delivered', failed: 'failed' };

function webhooksView() {
  const tbody = h('tbody', {});
  const endpoints = h('p', { class: 'muted', id: 'wh-endpoints' });
  const empty = h('p', { class: 'empty', hidden: true }, 'No deliveries yet. A delivery is made when a decision is asked, made or expires, and when a run ends.');
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  main.replaceChildren(h('section', { 'aria-labelledby': 'webhooks-h' },
    h('div', { class: 'titlebar' }, h('h1', { id: 'webhooks-h', tabindex: '-1' }, 'Webhooks')),
    endpoints, error,
    h('table', { class: 'threads deliveries' },
      h('caption', { class: 'sr-only' }, 'Recent webhook deliveries, newest first'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Event'), h('th', { scope: 'col' }, 'Thread'), h('th', { scope: 'col' }, 'Endpoint'),
        h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Attempts'), h('th', { scope: 'col' }, 'Created'))),
      tbody),
    empty));

  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    try {
      const page = await api('GET', '/v1/webhooks/deliveries?limit=200');
      if (mine !== seq) return;
      error.hidden = true;
      endpoints.textContent = page.endpoints.length
        ? `Delivering to ${page.endpoints.join(', ')}, signed per Standard Webhooks.`
        : 'Webhooks are off: set STACKBONE_WEBHOOK_URL and STACKBONE_WEBHOOK_SECRET to be told of decisions and runs.';
      tbody.replaceChildren(...page.data.map((d) => {
        const thread = d.data && d.data.threadId;
        let status = deliveryLabels[d.status] || d.status;
        if (d.status !== 'delivered' && (d.lastStatus || d.lastError)) status += ` (${d.lastError || d.lastStatus})`;
        return h('tr', { 'data-delivery': d.id, 'data-status': d.status },
          h('th', { scope: 'row' }, h('code', {}, d.type)),
          h('td', {}, thread ? h('a', { href: threadHref(thread) }, thread) : ''),
          h('td', {}, h('code', {}, d.endpoint)),
          h('td', { class: 'delivery-status' }, status),
          h('td', {}, String(d.attempts)),
          h('td', {}, timeEl(d.createdAt)));
      }));
      empty.hidden = page.data.length > 0;
    } catch (e) {
      if (e.status === 401) return;
      error.textContent = `Could not load the deliveries: ${e.message}`;
      error.hidden = false;
    }
  }
  refresh();
  // Deliveries change without a thread event (retries, the endpoint's
  // answers): look again every few seconds while the page is open.
  const timer = setInterval(refresh, 3000);
  return { name: 'webhooks', refresh, close() { clearInterval(timer); } };
}

// ---------- Schedules ----------

const firingLabels = { claimed: 'claimed', started: 'running', completed: 'completed', waiting: 'waiting on a decision', failed: 'failed' };

function schedulesView() {
  const tbody = h('tbody', {});
  const empty = h('p', { class: 'empty', hidden: true },
    'No schedules. Declare them in an agent file (schedules: [{ name, cron, input }]) or create them with POST /v1/schedules or stackbone schedules add.');
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const admin = (app.session?.role || 'admin') === 'admin';
  main.replaceChildren(h('section', { 'aria-labelledby': 'schedules-h' },
    h('div', { class: 'titlebar' }, h('h1', { id: 'schedules-h', tabindex: '-1' }, 'Schedules')),
    error,
    h('table', { class: 'threads schedules', id: 'schedules' },
      h('caption', { class: 'sr-only' }, 'Schedules with their next and last runs'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Schedule'), h('th', { scope: 'col' }, 'Agent'), h('th', { scope: 'col' }, 'When'),
        h('th', { scope: 'col' }, 'Next run'), h('th', { scope: 'col' }, 'Last run'), h('th', { scope: 'col' }, 'Outcome'),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')))),
      tbody),
    empty));

  async function runNow(sc, btn) {
    btn.disabled = true;
    try {
      await api('POST', `/v1/schedules/${encodeURIComponent(sc.id)}/run`);
      error.hidden = true;
    } catch (e) {
      error.textContent = `Could not run ${sc.name}: ${e.message}`;
      error.hidden = false;
    }
    btn.disabled = false;
    refresh();
  }

  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    try {
      const page = await api('GET', '/v1/schedules');
      if (mine !== seq) return;
      error.hidden = true;
      tbody.replaceChildren(...page.data.map((sc) => {
        const when = sc.cron + (sc.timezone ? ` (${sc.timezone})` : '') + (sc.source === 'file' ? ' · agent file' : '');
        let outcome = sc.lastStatus ? (firingLabels[sc.lastStatus] || sc.lastStatus) : '';
        if (sc.lastError) outcome += `: ${sc.lastError}`;
        const btn = h('button', { type: 'button', class: 'secondary', 'data-run': sc.id }, 'Run now');
        btn.addEventListener('click', () => runNow(sc, btn));
        return h('tr', { 'data-schedule': sc.id, 'data-status': sc.lastStatus || '' },
          h('th', { scope: 'row' }, sc.name),
          h('td', {}, sc.agent),
          h('td', {}, h('code', {}, when)),
          h('td', { class: 'next' }, sc.nextAt ? timeEl(sc.nextAt) : (sc.enabled ? '' : 'disabled')),
          h('td', { class: 'last' }, sc.lastDueAt ? timeEl(sc.lastDueAt) : 'never'),
          h('td', { class: 'outcome' }, sc.lastThreadId
            ? h('a', { href: threadHref(sc.lastThreadId) }, outcome || 'claimed') : outcome),
          h('td', {}, admin ? btn : ''));
      }));
      empty.hidden = page.data.length > 0;
    } catch (e) {
      if (e.status === 401) return;
      error.textContent = `Could not load the schedules: ${e.message}`;
      error.hidden = false;
    }
  }
  refresh();
  // Runs start on the server's own time: look again every few seconds.
  const timer = setInterval(refresh, 3000);
  return { name: 'schedules', refresh, close() { clearInterval(timer); } };
}

// ---------- Memory ----------

// memoryView browses the long-term memory store: its namespaces, and the
// items under the one chosen (params ns: its labels joined with '.'),
// latest first or by a search; keys that may write it can delete an item.
function memoryView(params) {
  const ns = params.get('ns') ? params.get('ns').split('.') : [];
  const nsList = h('ul', { class: 'namespaces', id: 'memory-namespaces' });
  const tbody = h('tbody', {});
  const empty = h('p', { class: 'empty', hidden: true });
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const query = h('input', { type: 'search', id: 'memory-query', placeholder: 'Search the values', 'aria-label': 'Search the values' });
  const form = h('form', { class: 'filters', id: 'memory-search' }, query, h('button', { type: 'submit', class: 'secondary' }, 'Search'));
  const canWrite = (app.session?.role || 'admin') !== 'approver';
  const title = ns.length ? `Memory: ${ns.join(' / ')}` : 'Memory';
  main.replaceChildren(h('section', { 'aria-labelledby': 'memory-h' },
    h('div', { class: 'titlebar' }, h('h1', { id: 'memory-h', tabindex: '-1' }, title)),
    error,
    h('nav', { 'aria-label': 'Namespaces' }, h('h2', {}, 'Namespaces'), nsList),
    form,
    h('table', { class: 'threads memory', id: 'memory-items' },
      h('caption', { class: 'sr-only' }, 'Items of the memory store'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Key'), h('th', { scope: 'col' }, 'Namespace'), h('th', { scope: 'col' }, 'Value'),
        h('th', { scope: 'col' }, 'Updated'), h('th', { scope: 'col' }, 'Expires'),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Actions')))),
      tbody),
    empty));

  const fail = (what, e) => {
    if (e.status === 401) return;
    error.textContent = `Could not ${what}: ${e.message}`;
    error.hidden = false;
  };

  async function remove(it, btn) {
    if (!window.confirm(`Delete ${it.key} from ${it.namespace.join(' / ')}?`)) return;
    btn.disabled = true;
    try {
      await api('DELETE', '/v1/store/items', { namespace: it.namespace, key: it.key });
      error.hidden = true;
    } catch (e) {
      fail(`delete ${it.key}`, e);
    }
    refresh();
  }

  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    try {
      const [nsPage, itemPage] = await Promise.all([
        api('POST', '/v1/store/namespaces', { limit: 1000 }),
        api('POST', '/v1/store/items/search', { namespace_prefix: ns, query: query.value || null, limit: 100 }),
      ]);
      if (mine !== seq) return;
      error.hidden = true;
      nsList.replaceChildren(
        h('li', {}, h('a', { href: '#/memory', 'aria-current': ns.length ? null : 'true' }, 'All')),
        ...nsPage.namespaces.map((n) => {
          const joined = n.join('.');
          return h('li', { 'data-namespace': joined },
            h('a', { href: `#/memory?ns=${encodeURIComponent(joined)}`, 'aria-current': joined === ns.join('.') ? 'true' : null }, n.join(' / ')));
        }));
      tbody.replaceChildren(...itemPage.items.map((it) => {
        const btn = h('button', { type: 'button', class: 'secondary danger', 'data-delete': it.key }, 'Delete');
        btn.addEventListener('click', () => remove(it, btn));
        return h('tr', { 'data-item': `${it.namespace.join('.')}/${it.key}` },
          h('th', { scope: 'row' }, it.key),
          h('td', { class: 'namespace' }, it.namespace.join(' / ')),
          h('td', { class: 'value' }, h('pre', {}, JSON.stringify(it.value, null, 2))),
          h('td', {}, timeEl(it.updated_at)),
          h('td', { class: 'expires' }, it.expires_at ? timeEl(it.expires_at) : 'never'),
          h('td', {}, canWrite ? btn : ''));
      }));
      empty.textContent = query.value ? 'No item matches the search.'
        : 'No items. Tools write them with ctx.store.put, agents with memory: true through remember, clients with PUT /v1/store/items.';
      empty.hidden = itemPage.items.length > 0;
    } catch (e) {
      fail('load the memory store', e);
    }
  }
  form.addEventListener('submit', (ev) => { ev.preventDefault(); refresh(); });
  refresh();
  return { name: 'memory', refresh, close() {} };
}

// ---------- Usage ----------

// resetsIn says when a budget's period starts again ("resets in 5 h").
function resetsIn(iso) {
  const t = new Date(iso).getTime();
  if (!Number.isFinite(t)) return '';
  const s = Math.round((t - Date.now()) / 1000);
  if (s <= 0) return 'resets now';
  if (s < 3600) return `resets in ${Math.max(1, Math.round(s / 60))} min`;
  if (s < 48 * 3600) return `resets in ${Math.round(s / 3600)} h`;
  return `resets in ${Math.round(s / 86400)} days`;
}

const dayLabel = (d) => new Date(d + 'T00:00:00Z').toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });

// dayChart draws tokens per day as stacked bars (input, output) and the
// cost per day as a line on its own axis. A day whose cost is unknown (a
// model without a price) is marked "?" instead of a point, never drawn as
// $0; a day whose cost is partly unknown gets a hollow point.
function dayChart(u) {
  const byDay = new Map((u.data || []).map((g) => [dayKey(g.group), g]));
  let list = days(u.from, u.to || new Date().toISOString());
  if (!list.length) list = [...byDay.keys()].sort();
  const rows = list.map((d) => byDay.get(d) || { group: d, inputTokens: 0, outputTokens: 0, totalTokens: 0, costUsd: 0, costComplete: true, runs: 0, modelCalls: 0 });
  const W = 960;
  const H = 260;
  const m = { l: 60, r: 70, t: 28, b: 34 };
  const iw = W - m.l - m.r;
  const ih = H - m.t - m.b;
  const tok = niceMax(Math.max(0, ...rows.map((r) => r.totalTokens || 0)));
  const usd = niceMax(Math.max(0, ...rows.map((r) => r.costUsd || 0)));
  const n = Math.max(rows.length, 1);
  const bw = iw / n;
  const y = (v) => m.t + ih - (v / tok.max) * ih;
  const yc = (v) => m.t + ih - (v / usd.max) * ih;
  const g = svg('g', {});
  // Axes and grid.
  for (let v = 0; v <= tok.max + 1e-9; v += tok.step) {
    g.append(svg('line', { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v), class: 'grid' }),
      svg('text', { x: m.l - 8, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, fmtTokens(v)));
  }
  for (let v = 0; v <= usd.max + 1e-12; v += usd.step) {
    g.append(svg('text', { x: W - m.r + 8, y: yc(v) + 4, class: 'axis axis-cost' }, fmtUSD(v)));
  }
  g.append(svg('text', { x: m.l - 8, y: m.t - 16, 'text-anchor': 'end', class: 'axis' }, 'tokens'),
    svg('text', { x: W - m.r + 8, y: m.t - 16, class: 'axis axis-cost' }, 'cost'));
  const every = Math.ceil(n / 10);
  const pts = [];
  rows.forEach((r, i) => {
    const d = dayKey(r.group);
    const x = m.l + i * bw;
    const pad = Math.min(bw * 0.18, 6);
    const inTok = r.inputTokens || 0;
    const total = r.totalTokens || 0;
    const outTok = Math.max(0, total - inTok);
    const cost = r.costUsd === null || r.costUsd === undefined ? null : r.costUsd;
    const bar = svg('g', { class: 'day', dataset: { day: d, tokens: String(total), cost: cost === null ? 'unknown' : String(cost) } },
      svg('title', {}, `${d}: ${fmtInt(total)} tokens (${fmtInt(inTok)} input, ${fmtInt(outTok)} output) · cost ${costText(cost, r.costComplete)} · ${fmtInt(r.runs)} runs`),
      svg('rect', { x: x + pad, width: Math.max(bw - 2 * pad, 1), y: y(inTok), height: Math.max(0, y(0) - y(inTok)), class: 'bar-in' }),
      svg('rect', { x: x + pad, width: Math.max(bw - 2 * pad, 1), y: y(total), height: Math.max(0, y(inTok) - y(total)), class: 'bar-out' }));
    g.append(bar);
    if (i % every === 0) g.append(svg('text', { x: x + bw / 2, y: H - m.b + 18, 'text-anchor': 'middle', class: 'axis' }, dayLabel(d)));
    pts.push({ x: x + bw / 2, top: y(total), cost, partial: r.costComplete === false, used: total > 0 });
  });
  // The cost line, broken where the cost is unknown.
  let path = '';
  let pen = false;
  for (const p of pts) {
    if (p.cost === null) { pen = false; continue; }
    path += `${pen ? 'L' : 'M'}${p.x.toFixed(1)},${yc(p.cost).toFixed(1)}`;
    pen = true;
  }
  if (path) g.append(svg('path', { d: path, class: 'cost-line' }));
  for (const p of pts) {
    if (p.cost === null) {
      if (p.used) g.append(svg('text', { x: p.x, y: p.top - 6, 'text-anchor': 'middle', class: 'cost-unknown' }, svg('title', {}, 'cost unknown'), '?'));
    } else if (p.used) {
      g.append(svg('circle', { cx: p.x, cy: yc(p.cost), r: 4, class: p.partial ? 'cost-point partial' : 'cost-point' }));
    }
  }
  g.append(svg('line', { x1: m.l, x2: W - m.r, y1: y(0), y2: y(0), class: 'baseline' }));
  const total = u.total || {};
  return svg('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', id: 'usage-chart', role: 'img',
    'aria-label': `Tokens and cost by day, ${list[0] || ''} to ${list[list.length - 1] || ''}: ${fmtInt(total.totalTokens)} tokens, cost ${costText(total.costUsd, total.costComplete)}.` }, g);
}

// hbars draws groups as horizontal bars of their tokens, each labelled with
// its tokens, cost and runs.
function hbars(groups, what) {
  const rows = (groups || []).slice().sort((a, b) => (b.totalTokens || 0) - (a.totalTokens || 0));
  if (!rows.length) return h('p', { class: 'muted' }, `No usage by ${what} in this period.`);
  const max = Math.max(1, ...rows.map((r) => r.totalTokens || 0));
  return h('ul', { class: 'hbars' }, rows.map((r) => {
    const fill = h('span', { class: 'hbar-fill' });
    fill.style.width = `${((r.totalTokens || 0) / max) * 100}%`;
    return h('li', { class: 'hbar', 'data-group': r.group, 'data-tokens': r.totalTokens || 0, 'data-cost': r.costUsd ?? 'unknown' },
      h('span', { class: 'hbar-label', title: r.group }, r.group || (what === 'key' ? '(no key)' : '(none)')),
      h('span', { class: 'hbar-track' }, fill),
      h('span', { class: 'hbar-value' }, `${fmtInt(r.totalTokens)} tokens · `,
        h('span', { class: 'hbar-cost' }, costText(r.costUsd, r.costComplete)), ` · ${fmtInt(r.runs)} run${r.runs === 1 ? '' : 's'}`));
  }));
}

function meter(used, limit, fmt, what) {
  const pct = limit > 0 ? Math.min(100, (used / limit) * 100) : 100;
  const over = used >= limit;
  const fill = h('span', { class: 'meter-fill' });
  fill.style.width = `${pct}%`;
  return h('div', { class: `meter-row${over ? ' over' : ''}` },
    h('span', { class: 'meter-what' }, what),
    h('span', { class: 'meter', role: 'progressbar', 'aria-label': `${what} used`, 'aria-valuemin': '0',
      'aria-valuemax': String(limit), 'aria-valuenow': String(Math.min(used, limit)), 'aria-valuetext': `${fmt(used)} of ${fmt(limit)}` }, fill),
    h('span', { class: 'meter-text' }, `${fmt(used)} / ${fmt(limit)}`, h('span', { class: 'muted' }, ` (${Math.round(limit > 0 ? (used / limit) * 100 : 100)}%)`)));
}

function budgetCard(b) {
  const scope = b.scope === 'tenant' ? 'whole tenant' : `${b.scope} ${b.match || ''}`.trim();
  return h('article', { class: `budget${b.exceeded ? ' exceeded' : ''}`, 'data-budget': b.name, 'data-exceeded': String(!!b.exceeded) },
    h('header', {}, h('h3', {}, b.name),
      h('span', { class: 'badge' }, scope), h('span', { class: 'badge' }, b.period === 'month' ? 'per month' : 'per day'),
      b.exceeded ? h('span', { class: 'badge status-failed budget-exceeded' }, 'exceeded: turns are refused') : null,
      h('span', { class: 'muted', title: b.resetsAt ? new Date(b.resetsAt).toLocaleString() : '' }, resetsIn(b.resetsAt))),
    b.limitTokens != null ? meter(b.usedTokens || 0, b.limitTokens, fmtInt, 'tokens') : null,
    b.limitUsd != null ? meter(b.usedUsd || 0, b.limitUsd, fmtUSD, 'spend') : null);
}

function usageView(params) {
  const from = h('input', { type: 'date', id: 'u-from', name: 'from', value: params.get('from') || '' });
  const to = h('input', { type: 'date', id: 'u-to', name: 'to', value: params.get('to') || '' });
  const range = { from: params.get('from') || '', to: params.get('to') || '' };
  const period = h('p', { class: 'sub', id: 'usage-period' });
  const error = h('p', { class: 'error', role: 'alert', hidden: true });
  const tiles = h('dl', { class: 'tiles', id: 'usage-total' });
  const chart = h('div', { class: 'chart-holder', id: 'usage-days' });
  const legend = h('p', { class: 'wf-legend muted' },
    h('span', { class: 'sw sw-in' }), ' input tokens ', h('span', { class: 'sw sw-out' }), ' output tokens ',
    h('span', { class: 'sw sw-cost' }), ' cost ', h('span', { class: 'sw-q' }, '?'), ' cost unknown (a model without a price)');
  const dayTable = h('tbody', {});
  const agents = h('div', { id: 'usage-agents' });
  const models = h('div', { id: 'usage-models' });
  const threads = h('tbody', {});
  const threadsEmpty = h('p', { class: 'muted', hidden: true }, 'No thread used tokens in this period.');
  const budgets = h('div', { class: 'budgets', id: 'usage-budgets' });
  const form = h('form', { class: 'filters', 'aria-label': 'Period' },
    h('label', { for: 'u-from' }, 'From'), from, h('label', { for: 'u-to' }, 'To'), to,
    h('button', { type: 'submit' }, 'Show'),
    h('button', { type: 'button', class: 'ghost', onclick: () => { from.value = ''; to.value = ''; apply(); } }, 'Last 30 days'));
  const apply = () => {
    range.from = from.value;
    range.to = to.value;
    const q = new URLSearchParams();
    if (range.from) q.set('from', range.from);
    if (range.to) q.set('to', range.to);
    history.replaceState(null, '', '#/usage' + (q.toString() ? '?' + q : ''));
    refresh();
  };
  form.addEventListener('submit', (ev) => { ev.preventDefault(); apply(); });

  main.replaceChildren(h('section', { 'aria-labelledby': 'usage-h' },
    h('div', { class: 'titlebar' }, h('h1', { id: 'usage-h', tabindex: '-1' }, 'Usage'), period),
    form, error, tiles,
    h('section', { class: 'panel-box', 'aria-labelledby': 'u-days-h' }, h('h2', { id: 'u-days-h' }, 'Tokens and cost by day'), chart, legend,
      h('details', {}, h('summary', {}, 'As a table'),
        h('table', { class: 'threads', id: 'usage-day-table' },
          h('thead', {}, h('tr', {}, ...['Day', 'Input', 'Output', 'Total', 'Cost', 'Runs'].map((c) => h('th', { scope: 'col' }, c)))), dayTable))),
    h('div', { class: 'usage-grid' },
      h('section', { class: 'panel-box', 'aria-labelledby': 'u-agents-h' }, h('h2', { id: 'u-agents-h' }, 'By agent'), agents),
      h('section', { class: 'panel-box', 'aria-labelledby': 'u-models-h' }, h('h2', { id: 'u-models-h' }, 'By model'), models)),
    h('section', { class: 'panel-box', 'aria-labelledby': 'u-threads-h' }, h('h2', { id: 'u-threads-h' }, 'Top threads by cost'),
      h('table', { class: 'threads', id: 'usage-threads' },
        h('thead', {}, h('tr', {}, ...['Thread', 'Agent', 'Tokens', 'Cost'].map((c) => h('th', { scope: 'col' }, c)))), threads),
      threadsEmpty),
    h('section', { class: 'panel-box', 'aria-labelledby': 'u-budgets-h' }, h('h2', { id: 'u-budgets-h' }, 'Budgets'), budgets)));

  let seq = 0;
  async function refresh(change) {
    if (change && change.kind === 'run' && change.type !== 'run_finished' && change.type !== 'run_error') return;
    const mine = ++seq;
    const q = (g) => {
      const p = new URLSearchParams({ group_by: g });
      if (range.from) p.set('from', range.from);
      if (range.to) p.set('to', range.to);
      return '/v1/usage?' + p;
    };
    try {
      const [byDay, byAgent, byModel] = await Promise.all([api('GET', q('day')), api('GET', q('agent')), api('GET', q('model'))]);
      if (mine !== seq) return;
      error.hidden = true;
      const t = byDay.total || {};
      const fmtDate = (iso) => (iso ? new Date(iso).toLocaleDateString('en-US', { year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' }) : '');
      // A day bound is exclusive on the server (the day after the last).
      const last = byDay.to ? new Date(new Date(byDay.to).getTime() - 1).toISOString() : null;
      period.textContent = `${fmtDate(byDay.from)} – ${last ? fmtDate(last) : 'now'} (UTC)`;
      const tile = (k, v, name) => [h('div', { class: 'tile', 'data-tile': name }, h('dt', {}, k), h('dd', {}, v))];
      tiles.replaceChildren(
        ...tile('Tokens', fmtInt(t.totalTokens), 'tokens'),
        ...tile('Cost', costText(t.costUsd, t.costComplete), 'cost'),
        ...tile('Runs', fmtInt(t.runs), 'runs'),
        ...tile('Model calls', fmtInt(t.modelCalls), 'modelCalls'),
        ...tile('Input / output', `${fmtTokens(t.inputTokens)} / ${fmtTokens(t.outputTokens)}`, 'io'));
      chart.replaceChildren(dayChart(byDay));
      dayTable.replaceChildren(...(byDay.data || []).slice().sort((a, b) => dayKey(a.group).localeCompare(dayKey(b.group))).map((g) => h('tr', { 'data-day': dayKey(g.group) },
        h('th', { scope: 'row' }, dayKey(g.group)), h('td', {}, fmtInt(g.inputTokens)), h('td', {}, fmtInt(g.outputTokens)),
        h('td', {}, fmtInt(g.totalTokens)), h('td', {}, costText(g.costUsd, g.costComplete)), h('td', {}, fmtInt(g.runs)))));
      agents.replaceChildren(hbars(byAgent.data, 'agent'));
      models.replaceChildren(hbars(byModel.data, 'model'));
      const top = byDay.topThreads || [];
      threads.replaceChildren(...top.map((x) => h('tr', { 'data-thread': x.threadId },
        h('th', { scope: 'row' }, h('a', { href: threadHref(x.threadId), class: 'thread-link' }, x.threadId)),
        h('td', {}, x.agent), h('td', {}, fmtInt(x.totalTokens)), h('td', { class: 'thread-cost' }, costText(x.costUsd, x.costComplete)))));
      threadsEmpty.hidden = top.length > 0;
      const bs = byDay.budgets || [];
      budgets.replaceChildren(...(bs.length ? bs.map(budgetCard)
        : [h('p', { class: 'muted', id: 'no-budgets' }, 'No budgets. Add "budgets" to stackbone.json to cap tokens or spend per day or month.')]));
    } catch (e) {
      if (e.status === 401) return;
      error.textContent = `Could not load the usage: ${e.message}`;
      error.hidden = false;
    }
  }
  refresh();
  return { name: 'usage', refresh, close() {} };
}

// ---------- Router ----------

function route() {
  app.view?.close();
  app.view = null;
  const hash = location.hash.replace(/^#/, '') || '/inbox';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  if (!app.session?.signedIn) {
    app.view = signInView();
    return;
  }
  let name;
  if (path.startsWith('/chat/')) {
    name = 'agents';
    app.view = chatView({ main, h, api, announce, session: () => app.session, loadAgents, signedOut, pendingChanged },
      decodeURIComponent(path.slice('/chat/'.length)), params);
  } else if (path.startsWith('/threads/')) {
    name = 'threads';
    app.view = threadView(decodeURIComponent(path.slice('/threads/'.length)), params);
  } else if (path === '/threads') {
    name = 'threads';
    app.view = threadsView(params);
  } else if (path === '/agents') {
    name = 'agents';
    app.view = agentsView();
  } else if (path === '/usage') {
    name = 'usage';
    app.view = usageView(params);
  } else if (path === '/schedules') {
    name = 'schedules';
    app.view = schedulesView();
  } else if (path === '/memory') {
    name = 'memory';
    app.view = memoryView(params);
  } else if (path === '/webhooks') {
    name = 'webhooks';
    app.view = webhooksView();
  } else {
    name = 'inbox';
    app.view = inboxView();
  }
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.nav === name) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (routedOnce) $('h1', main)?.focus();
  routedOnce = true;
}
let routedOnce = false;

window.addEventListener('hashchange', route);

async function boot() {
  try {
    app.session = await api('GET', '/studio/api/session');
  } catch (e) {
    main.replaceChildren(h('p', { class: 'error', role: 'alert' }, `Could not reach the server: ${e.message}`));
    return;
  }
  renderChrome();
  if (app.session.signedIn) {
    startLive();
    refreshCount();
  }
  route();
  document.documentElement.dataset.ready = 'true';
}

boot();
