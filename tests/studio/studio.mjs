// Playwright cases for Studio's chat playground, run by internal/studio's
// TestPlaywright against a real `stackbone dev` (and `stackbone start` with
// keys for the caller's session). Argument: a JSON object
//   {dev, start, effects, chromium, callerKey, tenant, screenshots, docs, artifacts, cases}
// `effects` is the test's server: GET /refunds lists the refunds the shop
// agent really paid (its side effects), GET /model what the mock model was
// sent. Prints {browser, results: [{name, ok, error, ms}]} and exits 1 when a
// case failed. The cases run one after the other: they share the mock
// model, whose last request each case reads.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const cfg = JSON.parse(process.argv[2]);
const only = (cfg.cases || '').split(',').map((s) => s.trim()).filter(Boolean);
const WAIT = 60_000; // generous: the machine is shared

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function getJSON(url) {
  const r = await fetch(url);
  check(r.ok, `GET ${url}: ${r.status}`);
  return r.json();
}
const refunds = () => getJSON(cfg.effects + '/refunds');
const modelRequests = () => getJSON(cfg.effects + '/model');
async function lastModelRequest() {
  const reqs = await modelRequests();
  check(reqs.length > 0, 'the model was never called');
  return reqs[reqs.length - 1];
}

// waitFor polls fn (in Node) until it returns a truthy value.
async function waitFor(what, fn, timeout = WAIT) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// The page helpers: the same moves a person makes.
async function openChat(page, base, agent, thread) {
  await page.goto(`${base}/studio/#/chat/${agent}?thread=${thread}`);
  await page.waitForSelector('#main[data-chat-ready="true"]', { timeout: WAIT });
}

async function say(page, text) {
  await page.waitForFunction(() => !document.querySelector('#chat-send').disabled && document.querySelector('#chat-stop').hidden,
    null, { timeout: WAIT });
  await page.locator('#chat-input').fill(text);
  await page.locator('#chat-input').press('Enter');
}

async function idle(page) {
  await page.waitForFunction(() => document.querySelector('#chat-log').getAttribute('aria-busy') === 'false', null, { timeout: WAIT });
}

function answer(page, text) {
  return page.locator('#chat-log .chat-msg[data-role="assistant"] .md', { hasText: text });
}

async function waitAnswer(page, text) {
  await answer(page, text).first().waitFor({ timeout: WAIT });
  await idle(page);
}

async function pauseRefund(page) {
  await say(page, 'please refund my order');
  const open = page.locator('#chat-log article.chat-decision[data-tool="refund"]:not(.decided)');
  await open.waitFor({ timeout: WAIT });
  await idle(page);
  // The card by its decision's id: it stays the same card once decided.
  const id = await open.getAttribute('data-id');
  return page.locator(`#chat-log article.chat-decision[data-id="${id}"]`);
}

const text = (loc) => loc.first().textContent({ timeout: WAIT });

async function shot(page, name) {
  if (!cfg.screenshots) return;
  await page.evaluate(() => document.querySelector('#status')?.classList.remove('show'));
  await page.screenshot({ path: join(cfg.docs, name) });
}

const cases = [];
const test = (name, fn) => cases.push({ name, fn });

// The README's quick start, as a newcomer does it on the quickstart's
// offline `assistant`: open Studio, chat from the Agents page's Chat button,
// see a tool call, approve the refund inline, follow the Trace link to the
// run's waterfall with the exact model request and response of a step.
test('QuickstartChatApproveTrace', async (page) => {
  await page.setViewportSize({ width: 1280, height: 1100 });
  await page.goto(`${cfg.dev}/studio/`);
  await page.locator('a[href="#/agents"]').first().click();
  await page.locator('.agent-card[data-agent="assistant"] a[data-action="chat"]').click();
  await page.waitForSelector('#main[data-chat-ready="true"]', { timeout: WAIT });
  const thread = new URLSearchParams(new URL(page.url()).hash.split('?')[1]).get('thread');
  check(thread?.startsWith('chat-'), `the playground opened thread ${thread}`);
  await say(page, 'hello');
  await waitAnswer(page, 'You said: hello');
  await say(page, 'what is the weather in Paris?');
  await waitAnswer(page, 'It is');
  await page.locator('#chat-log .chat-tool[data-tool="get_weather"][data-status="done"]').waitFor({ timeout: WAIT });
  const card = await pauseRefund(page);
  check((await text(card.locator('.desc'))).includes('Refund order ord_42 for 19.99'), 'the card has no description');
  await card.locator('button[data-action="approve"]').click();
  await waitAnswer(page, 'Done:');
  check((await text(page.locator('#chat-log article.chat-decision[data-tool="refund"] .verdict'))).includes('Approved'), 'no verdict');
  await shot(page, 'studio-quickstart.png');
  // The trace of the refund's turn.
  await page.locator('#chat-log a.trace-link').last().click();
  await page.waitForFunction(() => location.hash.startsWith('#/threads/') && location.hash.includes('run='), null, { timeout: WAIT });
  await page.locator('#run-waterfall .wf-row[data-kind="tool"]', { hasText: 'refund' }).first().waitFor({ timeout: WAIT })
    .catch(async () => { await page.locator('#run-waterfall .wf-row', { hasText: 'refund' }).first().waitFor({ timeout: WAIT }); });
  const content = page.locator('#run-waterfall details.wf-content').first();
  await content.waitFor({ timeout: WAIT });
  await content.locator('summary').click();
  const req = await text(content.locator('pre.json').first());
  check(req.includes('You are a helpful assistant for a small web shop.'), `the step's request does not show the instructions: ${req.slice(0, 300)}`);
  await shot(page, 'studio-quickstart-trace.png');
});

// A message goes with Enter and the answer streams: part of it is on the
// page while the turn still runs, then all of it.
test('StreamsAnswer', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-stream');
  await say(page, 'tell me a long story');
  await answer(page, 'Once upon').first().waitFor({ timeout: WAIT });
  const early = await page.evaluate(() => ({
    busy: document.querySelector('#chat-log').getAttribute('aria-busy'),
    text: [...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"] .md')].map((e) => e.textContent).join(' '),
  }));
  check(early.busy === 'true' && !early.text.includes('the end came'), `the answer did not stream: ${JSON.stringify(early)}`);
  await waitAnswer(page, 'the end came');
  check((await text(page.locator('#chat-log .chat-msg[data-role="user"] .md'))).includes('tell me a long story'), 'the question is not shown');
});

// A server tool shows as a card with its arguments, result and duration.
test('ServerToolCard', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-tool');
  await say(page, 'what is the weather in Paris?');
  await waitAnswer(page, 'Tool said:');
  const card = page.locator('#chat-log .chat-tool[data-tool="get_weather"]');
  await page.locator('#chat-log .chat-tool[data-tool="get_weather"][data-status="done"]').waitFor({ timeout: WAIT });
  await card.locator('summary').first().click();
  check((await text(card.locator('.tool-args'))).includes('"city": "Paris"'), 'the card shows no arguments');
  check((await text(card.locator('.tool-result'))).includes('"temp_c": 21'), 'the card shows no result');
  check(/(ms| s)$/.test((await text(card.locator('.tool-dur'))).trim()), 'the card shows no duration');
});

// Approved inline: the refund really runs, once, and the answer comes.
test('ApprovalApprovedInline', async (page) => {
  const before = (await refunds()).length;
  await openChat(page, cfg.dev, 'shop', 'pw-approve');
  const card = await pauseRefund(page);
  check((await text(card.locator('.desc'))).includes('Refund order ord_42 for 19.99'), 'the card has no description');
  check((await refunds()).length === before, 'the refund ran before it was approved');
  await card.locator('button[data-action="approve"]').click();
  await waitAnswer(page, 'Refund result:');
  const after = await refunds();
  check(after.length === before + 1, `the refund ran ${after.length - before} times, want once`);
  check(after[after.length - 1].threadId === 'pw-approve' && after[after.length - 1].orderId === 'ord_42', `paid ${JSON.stringify(after[after.length - 1])}`);
  // A reload shows the decided card and runs nothing again.
  await page.reload();
  await page.waitForSelector('#main[data-chat-ready="true"]', { timeout: WAIT });
  await answer(page, 'Refund result:').first().waitFor({ timeout: WAIT });
  check((await refunds()).length === before + 1, 'the reload ran the refund again');
});

// The nav's Approvals badge counts the paused call, and no longer does when
// the answer of the call approved inline shows (the quick start's
// screenshot had "Approvals 1" beside it): in dev on the quickstart's
// assistant and the shop, and in start mode in an admin's session (on
// PostgreSQL).
test('ApprovalBadgeClearsInline', async (page) => {
  const count = () => page.evaluate(() => { const b = document.querySelector('#inbox-count'); return b.hidden ? 0 : parseInt(b.textContent, 10); });
  for (const [base, agent, key] of [[cfg.dev, 'assistant'], [cfg.dev, 'shop'], [cfg.start, 'shop', cfg.adminKey]]) {
    if (key) {
      await page.goto(`${base}/studio/`);
      await page.locator('#apikey').fill(key);
      await page.locator('#signin-form button[type="submit"]').click();
      await page.locator('#tenant', { hasText: cfg.tenant }).waitFor({ timeout: WAIT });
    }
    await openChat(page, base, agent, `pw-badge-${agent}-${key ? 'start' : 'dev'}`);
    const before = await count();
    const card = await pauseRefund(page);
    await waitFor(`the badge to count the ${agent} call`, async () => (await count()) === before + 1);
    const done = agent === 'shop' ? 'Refund result:' : 'Done:';
    // What the badge says the moment the approved call's answer shows.
    await page.evaluate((done) => {
      new MutationObserver((_, o) => {
        if (![...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"] .md')].some((e) => e.textContent.includes(done))) return;
        const b = document.querySelector('#inbox-count');
        window.badgeAtAnswer = b.hidden ? 0 : parseInt(b.textContent, 10);
        o.disconnect();
      }).observe(document.querySelector('#chat-log'), { subtree: true, childList: true, characterData: true });
    }, done);
    await card.locator('button[data-action="approve"]').click();
    await waitAnswer(page, done);
    const atAnswer = await page.evaluate(() => window.badgeAtAnswer);
    check(atAnswer === before, `the badge said ${atAnswer} when the approved ${agent} call's answer showed, want ${before}`);
    await waitFor(`the badge to stay at ${before}`, async () => (await count()) === before, 15_000);
  }
});

// In dev the chat's Model picker lists the agent's models (its primary and
// fallback); the fallback picked answers the next run, and the run's trace
// names it. A start server offers no picker (it refuses forwardedProps.model).
test('PickFallbackModel', async (page) => {
  await openChat(page, cfg.dev, 'picker', 'pw-pick');
  await page.locator('#chat-model-row').waitFor({ timeout: WAIT });
  const options = await page.locator('#chat-model option').allTextContents();
  check(options.length === 3 && options[0] === 'Agent\'s own, with fallbacks' && options[1] === 'scripted/picker-primary only' && options[2] === 'scripted/picker-backup only',
    `the picker offers ${JSON.stringify(options)}`);
  await say(page, 'hello');
  await waitAnswer(page, 'primary says: hello');
  await page.locator('#chat-model').selectOption('scripted/picker-backup');
  await say(page, 'hello again');
  await waitAnswer(page, 'backup says: hello again');
  check(await answer(page, 'primary says: hello again').count() === 0, 'the primary answered the run on the picked fallback');
  await page.locator('#chat-log a.trace-link').last().click();
  await page.locator('#run-waterfall .wf-row', { hasText: 'picker-backup' }).first().waitFor({ timeout: WAIT });

  await page.goto(`${cfg.start}/studio/`);
  await page.locator('#apikey').fill(cfg.adminKey);
  await page.locator('#signin-form button[type="submit"]').click();
  await page.locator('#tenant', { hasText: cfg.tenant }).waitFor({ timeout: WAIT });
  await openChat(page, cfg.start, 'picker', 'pw-pick-start');
  await page.locator('#chat-def-model', { hasText: 'scripted/picker-backup' }).waitFor({ timeout: WAIT });
  check(await page.locator('#chat-model-row').isHidden(), 'a start server\'s chat offers a model picker');
});

// Rejected with a message: nothing is paid, and the model reads the message.
test('ApprovalRejectedWithMessage', async (page) => {
  const before = (await refunds()).length;
  await openChat(page, cfg.dev, 'shop', 'pw-reject');
  const card = await pauseRefund(page);
  await card.locator('button[data-action="reject"]').click();
  await card.locator('textarea[name=message]').fill('wrong order, do not refund');
  await card.locator('button[data-action="confirm-reject"]').click();
  await waitAnswer(page, 'Refund result:');
  check((await refunds()).length === before, 'a rejected refund was paid');
  const last = (await lastModelRequest()).messages.at(-1);
  check(last.role === 'tool' && last.content.includes('wrong order, do not refund'), `the model read ${JSON.stringify(last)}`);
});

// Edited through the form the responseSchema renders: a value the schema
// refuses is caught in the page; the refund runs once, with the edits.
test('ApprovalEditedThroughForm', async (page) => {
  const before = (await refunds()).length;
  await openChat(page, cfg.dev, 'shop', 'pw-edit');
  const card = await pauseRefund(page);
  await card.locator('button[data-action="edit"]').click();
  check(await card.locator('input[data-field="orderId"]').inputValue() === 'ord_42', 'the form does not hold the arguments');
  await card.locator('input[data-field="amount"]').fill('');
  await card.locator('button[data-action="confirm-edit"]').click();
  await card.locator('.error', { hasText: 'amount: is required' }).waitFor({ timeout: WAIT });
  await card.locator('input[data-field="orderId"]').fill('ord_43');
  await card.locator('input[data-field="amount"]').fill('5');
  await card.locator('button[data-action="confirm-edit"]').click();
  await waitAnswer(page, 'Refund result:');
  const after = await refunds();
  check(after.length === before + 1, `the refund ran ${after.length - before} times, want once`);
  const paid = after[after.length - 1];
  check(paid.orderId === 'ord_43' && paid.amount === 5, `paid ${JSON.stringify(paid)}, want the edited arguments`);
  await card.locator('.verdict', { hasText: 'Approved with edits' }).waitFor({ timeout: WAIT });
});

// The page's tools: get_time is answered by the page, confirm opens a
// dialog; both are offered to the model and their results reach it.
test('FrontendTools', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-front');
  await say(page, 'what time is it?');
  await waitAnswer(page, 'Time said:');
  await page.locator('#chat-log .chat-tool[data-tool="get_time"] .tool-status', { hasText: 'answered by the page' }).waitFor({ timeout: WAIT });
  const reqs = await modelRequests();
  const offered = reqs[reqs.length - 2].tools;
  check(offered.includes('get_time') && offered.includes('confirm'), `the model was offered ${offered}`);
  const last = reqs[reqs.length - 1].messages.at(-1);
  check(last.role === 'tool' && last.content.includes('"now"'), `the model read ${JSON.stringify(last)} for get_time`);
  await say(page, 'are you sure?');
  await page.locator('dialog#chat-confirm[open]').waitFor({ timeout: WAIT });
  check((await text(page.locator('#chat-confirm-q'))).includes('Really go ahead?'), 'the dialog does not ask the question');
  await page.locator('#chat-confirm button[data-action="confirm-yes"]').click();
  await waitAnswer(page, 'Confirm said: {"confirmed":true}');
});

// The state beside the chat follows the tool's state delta; an editable key
// written in the panel goes with the next message and the thread holds it.
test('StateDeltaAndEditableKey', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-state');
  await say(page, 'save a draft');
  await waitAnswer(page, 'Draft saved.');
  await page.locator('#chat-state li[data-path="/draft"]', { hasText: '"v1"' }).waitFor({ timeout: WAIT });
  await page.locator('#chat-state-changes', { hasText: '/draft' }).waitFor({ timeout: WAIT });
  await page.waitForFunction(() => document.querySelector('#es-draft')?.value === 'v1', null, { timeout: WAIT });
  await page.locator('#es-draft').fill('written in the chat');
  await page.locator('#chat-editable form[data-key="draft"] button[data-action="set-state"]').click();
  await page.locator('#chat-editable form[data-key="draft"] .saved', { hasText: 'sent with your next message' }).waitFor({ timeout: WAIT });
  await say(page, 'hello');
  await waitAnswer(page, 'echo: hello');
  const th = await getJSON(`${cfg.dev}/v1/threads/pw-state`);
  check(th.state?.draft === 'written in the chat', `the thread's state is ${JSON.stringify(th.state)}`);
  await page.locator('#chat-state li[data-path="/draft"]', { hasText: '"written in the chat"' }).waitFor({ timeout: WAIT });
});

// Stop while the turn waits on an approval: the turn is cancelled, the
// card leaves the chat, nothing is paid, and the next message is answered.
test('StopWaitingTurn', async (page) => {
  const before = (await refunds()).length;
  await openChat(page, cfg.dev, 'shop', 'pw-stop-wait');
  await pauseRefund(page);
  await page.locator('#chat-stop').click();
  await page.locator('#chat-log .chat-note[data-kind="cancelled"]').waitFor({ timeout: WAIT });
  await page.waitForFunction(() => document.querySelectorAll('#chat-log article.chat-decision').length === 0, null, { timeout: WAIT });
  const th = await getJSON(`${cfg.dev}/v1/threads/pw-stop-wait`);
  check(th.status === 'idle' && (th.pending || []).length === 0, `the thread is ${th.status} with ${(th.pending || []).length} pending`);
  check((await refunds()).length === before, 'a cancelled refund was paid');
  await say(page, 'hello after the cancel');
  await waitAnswer(page, 'echo: hello after the cancel');
  check(await page.locator('#chat-log article.chat-decision').count() === 0, 'the cancelled card came back');
  // The inbox's audit says the call was cancelled with its turn, not rejected.
  const closed = (await getJSON(`${cfg.dev}/v1/hitl?status=rejected&limit=100`)).data.find((it) => it.threadId === 'pw-stop-wait');
  check(closed?.decision?.decidedVia === 'cancel', `the closed decision is ${JSON.stringify(closed)}`);
  await page.goto(`${cfg.dev}/studio/#/inbox`);
  await page.locator(`.history-item[data-id="${closed.id}"][data-via="cancel"] .badge.status-rejected`, { hasText: 'cancelled' }).waitFor({ timeout: WAIT });
});

// Stop in the middle of the stream, and a message sent at once is answered.
test('StopThenSendAtOnce', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-stop');
  await say(page, 'tell me a long story');
  await answer(page, 'Once upon').first().waitFor({ timeout: WAIT });
  await page.locator('#chat-stop').click();
  await page.locator('#chat-log .chat-note[data-kind="cancelled"]').waitFor({ timeout: WAIT });
  await say(page, 'hello again');
  await waitAnswer(page, 'echo: hello again');
  const all = await page.evaluate(() => [...document.querySelectorAll('#chat-log .chat-msg[data-role="assistant"] .md')].map((e) => e.textContent).join(' '));
  check(!all.includes('the end came'), 'the whole story streamed: nothing was stopped');
  check(await page.locator('#chat-log .chat-note[data-kind="error"]').count() === 0, 'the chat shows a run error');
  check(await page.locator('#chat-error').isHidden(), 'the chat shows an error');
  const th = await getJSON(`${cfg.dev}/v1/threads/pw-stop`);
  check(th.status !== 'running', `the thread is ${th.status}`);
});

// Regenerate an answer and edit a question: each goes on from there on a
// new branch, and the model is sent the conversation up to that point only.
test('EditAndRegenerate', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-branch');
  await say(page, 'first question');
  await waitAnswer(page, 'echo: first question');
  await say(page, 'second question');
  await waitAnswer(page, 'echo: second question');
  const calls = (await modelRequests()).length;
  const second = page.locator('#chat-log .chat-msg[data-role="assistant"]', { hasText: 'echo: second question' });
  await second.hover();
  await second.locator('button[data-action="regenerate"]').click();
  await waitFor('the regenerated answer\'s model call', async () => (await modelRequests()).length === calls + 1);
  await idle(page);
  let req = await lastModelRequest();
  const users = (r) => r.messages.filter((m) => m.role === 'user').map((m) => m.content).join('|');
  check(users(req) === 'first question|second question', `the regenerate sent ${users(req)}`);
  check(!req.messages.some((m) => m.role === 'assistant' && m.content.includes('second question')), 'the regenerate showed the model its old answer');
  await page.locator('#chat-branches', { hasText: '2 branches' }).waitFor({ timeout: WAIT });

  const first = page.locator('#chat-log .chat-msg[data-role="user"]').first();
  await first.hover();
  await first.locator('button[data-action="edit-message"]').click();
  await first.locator('textarea[name="edit"]').fill('an edited question');
  await first.locator('button[data-action="send-edit"]').click();
  await waitAnswer(page, 'echo: an edited question');
  req = await lastModelRequest();
  check(users(req) === 'an edited question', `the edit sent ${users(req)}`);
  check(await page.locator('#chat-log .chat-msg').count() === 2, 'the chat does not show the edited line alone');
  await page.locator('#chat-branches', { hasText: '3 branches' }).waitFor({ timeout: WAIT });
});

// The model reasons before it answers (the mock upstream's reasoning_content
// deltas): the reasoning shows folded above the answer, and is still there,
// folded, once the page is reloaded (read from the stored thread), once.
test('ReasoningAfterReload', async (page) => {
  const thought = 'The user wants a considered answer: weigh it, then reply briefly.';
  const folded = '#chat-log .chat-msg[data-role="reasoning"] details.reasoning';
  await openChat(page, cfg.dev, 'shop', 'pw-reasoning');
  await say(page, 'think it over');
  await waitAnswer(page, 'Considered: yes.');
  await page.locator(folded).first().waitFor({ timeout: WAIT });
  await page.reload();
  await page.waitForSelector('#main[data-chat-ready="true"]', { timeout: WAIT });
  await answer(page, 'Considered: yes.').first().waitFor({ timeout: WAIT });
  const r = page.locator(folded);
  await r.first().waitFor({ timeout: WAIT });
  check(await r.count() === 1, `the reloaded chat shows ${await r.count()} reasonings`);
  check(!(await r.first().evaluate((d) => d.open)), 'the reasoning is not folded after the reload');
  const order = await page.evaluate(() => [...document.querySelectorAll('#chat-log .chat-msg')].map((e) => e.dataset.role).join(','));
  check(order === 'user,reasoning,assistant', `the reloaded chat reads ${order}`);
  await r.first().locator('summary').click();
  check(await r.first().evaluate((d) => d.open), 'the reasoning does not open');
  check((await text(r.locator('.md'))).includes(thought), 'the reasoning text is not shown');
  // The page's next turn (its MESSAGES_SNAPSHOT carries the reasoning by
  // the same id) keeps one copy.
  await say(page, 'hello');
  await waitAnswer(page, 'echo: hello');
  check(await page.locator(folded).count() === 1, 'the next turn duplicated the reasoning');
});

// A page reloaded while the answer streams reattaches and shows the turn
// to its end, without starting another.
test('ReloadMidRun', async (page) => {
  await openChat(page, cfg.dev, 'shop', 'pw-reload');
  const calls = (await modelRequests()).length;
  await say(page, 'tell me a long story');
  await answer(page, 'Once upon').first().waitFor({ timeout: WAIT });
  await page.reload();
  await page.waitForSelector('#main[data-chat-ready="true"]', { timeout: WAIT });
  await page.locator('#chat-log .chat-msg[data-role="user"]', { hasText: 'tell me a long story' }).waitFor({ timeout: WAIT });
  await waitAnswer(page, 'the end came');
  const n = (await modelRequests()).length - calls;
  check(n === 1, `the model was called ${n} times; the reattach must not start another turn`);
  const th = await getJSON(`${cfg.dev}/v1/threads/pw-reload`);
  check(th.status === 'idle', `the thread is ${th.status}`);
});

// `stackbone start` with keys: a caller's signed-in session chats, but the
// paused refund offers it no decision, and nothing is paid.
test('CallerCannotDecide', async (page) => {
  const before = (await refunds()).length;
  await page.goto(`${cfg.start}/studio/`);
  await page.locator('#apikey').fill(cfg.callerKey);
  await page.locator('#signin-form button[type="submit"]').click();
  await page.locator('#tenant', { hasText: cfg.tenant }).waitFor({ timeout: WAIT });
  await openChat(page, cfg.start, 'shop', 'pw-caller');
  await say(page, 'hello');
  await waitAnswer(page, 'echo: hello');
  const card = await pauseRefund(page);
  await card.locator('[data-role="caller"]', { hasText: 'cannot decide' }).waitFor({ timeout: WAIT });
  check(await card.locator('button').count() === 0, 'the caller is offered a decision');
  check((await refunds()).length === before, 'the refund ran without a decision');
  // The composer is still the caller's.
  check(!(await page.locator('#chat-input').isDisabled()), 'the caller cannot write');
});

const results = [];
for (const c of cases) {
  if (only.length && !only.includes(c.name)) continue;
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  const t0 = Date.now();
  try {
    await c.fn(page);
    check(errors.length === 0, `the page threw: ${errors.join(' | ')}`);
    results.push({ name: c.name, ok: true, ms: Date.now() - t0 });
  } catch (e) {
    let where = '';
    try {
      mkdirSync(cfg.artifacts, { recursive: true });
      where = join(cfg.artifacts, `${c.name}.png`);
      await page.screenshot({ path: where, fullPage: true });
    } catch { /* the page may be gone */ }
    results.push({ name: c.name, ok: false, ms: Date.now() - t0, error: `${e.stack || e}${where ? `\nscreenshot: ${where}` : ''}` });
  }
  await ctx.close();
}
const version = browser.version();
await browser.close();
process.stdout.write(JSON.stringify({ browser: `Chromium ${version}`, results }));
process.exit(results.every((r) => r.ok) ? 0 : 1);
