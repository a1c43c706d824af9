#!/usr/bin/env node
// Double-texting with the official AG-UI clients: while a run streams, the
// app sends a second message on the same thread with
// forwardedProps.multitask (enqueue, interrupt, rollback, reject).
//
//   node tests/agui/multitask.mjs BASE_A BASE_B CONTROL_URL THREAD_PREFIX
//
// The first run goes to BASE_A, the second to BASE_B (two replicas of one
// PostgreSQL database, or one server twice). CONTROL_URL holds or cuts
// BASE_A's model call after the first turn's get_weather step, as for
// tests/clients/multitask.mjs (POST /hold, /release, /break ?marker=M).
//
// Clients: v1 (@ag-ui/client 1.0 HttpAgent), v0059 (0.0.59, what
// CopilotKit pins) and copilotkit (headless @copilotkit/core 1.75 running
// a 0.0.59 HttpAgent: core.runAgent({agent, forwardedProps})). The first
// run is the agent's; the second message goes through agent.clone() (the
// messages the client holds then, the new message added), so the first
// run's stream stays open, as another tab's would: CopilotKit's own
// runAgent on the same agent detaches the running one first (its stream
// closes; the server takes that for a Stop). Per strategy:
//   - enqueue: the second run waits in GET /v1/threads/{id}/queue and gets
//     no event before the first run's RUN_FINISHED (success); then it
//     finishes with its answer, and its MESSAGES_SNAPSHOT holds the first
//     question once and its whole answer;
//   - interrupt: the first run ends cancelled (1.0: RUN_FINISHED outcome
//     cancelled; 0.0.59: RUN_ERROR code cancelled) with the partial text;
//     the second finishes, its MESSAGES_SNAPSHOT holds the partial answer;
//   - rollback: as interrupt, the app sending the new message alone; the
//     second run's MESSAGES_SNAPSHOT and GET /v1/threads/{id} hold none of
//     the first turn;
//   - reject: the second run gets RUN_ERROR run_in_progress; POST
//     /v1/threads/{id}/cancel then ends the first.
// Prints one JSON document {"results":[{name, ok, error?, ...}]} and exits
// 1 when a case failed; the Go test (internal/server/multitask_client_test.go)
// checks what the model saw and counts model calls and tool runs.
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { HttpAgent as HttpAgentV1 } from "@ag-ui/client";
import { HttpAgent as HttpAgent0059 } from "agui-client-0059";
import { CopilotKitCore } from "@copilotkit/core";

const [baseA, baseB, control, prefix] = process.argv.slice(2);
if (!baseA || !baseB || !control || !prefix) {
  process.stderr.write("usage: node multitask.mjs BASE_A BASE_B CONTROL_URL THREAD_PREFIX\n");
  process.exit(64);
}
const url = (base) => `${base}/v1/agents/assistant/agui`;

let captured = [];
console.warn = (...a) => captured.push(a.map(String).join(" "));
console.error = (...a) => captured.push("console.error: " + a.map(String).join(" "));

const ctl = async (op, marker) => {
  const r = await fetch(`${control}/${op}?marker=${encodeURIComponent(marker)}`, { method: "POST" });
  assert.ok(r.ok, `control ${op}: ${r.status}`);
};
const until = async (what, cond, ms = 20000) => {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};
const getJSON = async (u) => {
  const r = await fetch(u);
  const body = await r.json();
  assert.ok(r.ok, `GET ${u}: ${r.status} ${JSON.stringify(body)}`);
  return body;
};

// A run being followed: its events (with when each came), its text, how
// it ended.
function follow(start) {
  const s = { events: [], text: "", endedAt: 0, error: null };
  const sub = {
    onEvent: ({ event }) => {
      s.events.push({ ...event, at: performance.now() });
      if (event.type === "TEXT_MESSAGE_CONTENT") s.text += event.delta;
    },
  };
  s.done = (async () => {
    try {
      await start(sub);
    } catch (e) {
      s.error = String(e?.message ?? e);
    }
    s.endedAt = performance.now();
    return s;
  })();
  s.first = (type) => s.events.find((e) => e.type === type);
  s.last = (type) => s.events.findLast((e) => e.type === type);
  return s;
}

const clients = {
  v1: { make: (base, threadId) => new HttpAgentV1({ url: url(base), threadId }), run: (agent, sub, forwardedProps) => agent.runAgent({ runId: randomUUID(), forwardedProps }, sub), cancelled: "outcome" },
  v0059: { make: (base, threadId) => new HttpAgent0059({ url: url(base), threadId }), run: (agent, sub, forwardedProps) => agent.runAgent({ runId: randomUUID(), forwardedProps }, sub), cancelled: "error" },
  copilotkit: {
    make: (base, threadId) => new HttpAgent0059({ url: url(base), threadId }),
    run: (agent, sub, forwardedProps) => {
      const core = new CopilotKitCore({ agents__unsafe_dev_only: { assistant: agent }, deferInitialConnection: true });
      const un = agent.subscribe(sub);
      return core.runAgent({ agent, forwardedProps }).finally(() => un.unsubscribe());
    },
    cancelled: "error",
  },
};

// snapshotText is the second run's last MESSAGES_SNAPSHOT as [role, text].
const snapshot = (s) => (s.last("MESSAGES_SNAPSHOT")?.messages ?? []).map((m) => [m.role, typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "")]);

async function run(name, c, strategy) {
  const threadId = `${prefix}-${name}`;
  const first = `${name}: weather report`, second = `${name}: and a joke`;
  const full = 'Tool said: {"city":"Paris","temp_c":21}, sunny all morning, clouds after noon, a light wind from the west.';
  await ctl(strategy === "enqueue" ? "hold" : "break", first);
  const agent = c.make(baseA, threadId);
  agent.addMessage({ id: randomUUID(), role: "user", content: first });
  const s1 = follow((sub) => c.run(agent, sub));
  const out = { session: threadId, firstMarker: first, secondMarker: second };
  const props = { multitask: strategy };

  // The follow-up: the messages the client holds now, and the new one.
  const followUp = (alone) => {
    const b = c.make(baseB, threadId);
    b.setMessages(alone ? [] : agent.messages);
    b.addMessage({ id: randomUUID(), role: "user", content: second });
    return b;
  };

  if (strategy === "enqueue") {
    await until("the first run to stream", () => s1.text.includes("Checking.") || s1.endedAt);
    assert.ok(!s1.endedAt, `the first run ended early: ${JSON.stringify(s1.events.map((e) => e.type))} ${s1.error}`);
    const s2 = follow((sub) => c.run(followUp(false), sub, props));
    let queue;
    await until("the second message in the queue", async () => {
      queue = await getJSON(`${baseB}/v1/threads/${encodeURIComponent(threadId)}/queue`);
      return queue.data.length === 1 || s2.endedAt;
    });
    assert.equal(queue.data.length, 1, `queue ${JSON.stringify(queue)}; second run ${JSON.stringify(s2.events.map((e) => e.type))} ${s2.error}`);
    assert.equal(s2.events.length, 0, `the queued run got events before its turn: ${JSON.stringify(s2.events.map((e) => e.type))}`);
    await ctl("release", first);
    await Promise.all([s1.done, s2.done]);
    assert.ok(!s1.error && !s2.error, `errors: ${s1.error} / ${s2.error}`);
    const f1 = s1.last("RUN_FINISHED"), st2 = s2.first("RUN_STARTED"), f2 = s2.last("RUN_FINISHED");
    assert.ok(f1 && (f1.outcome === undefined || f1.outcome === "success" || f1.outcome?.type === "success"), `the first run's end: ${JSON.stringify(f1)}`);
    // That the queued run began after the first ended is checked on the
    // server's run records (the Go test): the two streams travel on two
    // connections.
    assert.ok(st2, "the queued run never started");
    assert.ok(f2, `the queued run did not finish: ${JSON.stringify(s2.events.map((e) => e.type))}`);
    assert.ok(s1.text.endsWith(full), `the first answer ${JSON.stringify(s1.text)}`);
    assert.equal(s2.text, `echo: ${second}`);
    const snap = snapshot(s2);
    assert.equal(snap.filter(([r, t]) => r === "user" && t === first).length, 1, `the queued run's MESSAGES_SNAPSHOT: ${JSON.stringify(snap)}`);
    assert.ok(snap.some(([r, t]) => r === "assistant" && t === full), `the queued run's MESSAGES_SNAPSHOT lacks the first answer: ${JSON.stringify(snap)}`);
    return { ...out, queuedFor: Math.round(st2.at - f1.at) };
  }

  await until("the first answer to stream after the tool", () => /Tool/.test(s1.text) || s1.endedAt);
  assert.ok(!s1.endedAt, `the first run ended early: ${JSON.stringify(s1.events.map((e) => e.type))} ${s1.error}`);
  const partial = s1.text;

  if (strategy === "reject") {
    const s2 = follow((sub) => c.run(followUp(false), sub, props));
    await s2.done;
    const err = s2.last("RUN_ERROR");
    assert.ok(err && err.code === "run_in_progress", `the rejected run: ${JSON.stringify(s2.events.map((e) => [e.type, e.code]))} ${s2.error}`);
    assert.ok(!s1.endedAt, "the rejected message ended the running turn");
    const r = await fetch(`${baseA}/v1/threads/${encodeURIComponent(threadId)}/cancel`, { method: "POST" });
    assert.ok(r.ok, `cancel: ${r.status}`);
    await s1.done;
    captured = captured.filter((w) => !/run_in_progress|cancelled/.test(w)); // the clients log a run's error
    return { ...out, partial, rejected: err.code };
  }

  const s2 = follow((sub) => c.run(followUp(strategy === "rollback"), sub, props));
  await Promise.all([s1.done, s2.done]);
  if (c.cancelled === "outcome") {
    const f1 = s1.last("RUN_FINISHED");
    assert.ok(f1 && (f1.outcome === "cancelled" || f1.outcome?.type === "cancelled"), `the interrupted run's end: ${JSON.stringify(s1.events.slice(-2))} ${s1.error}`);
  } else {
    const e1 = s1.last("RUN_ERROR");
    assert.ok(e1 && e1.code === "cancelled", `the interrupted run's end: ${JSON.stringify(s1.events.slice(-2))} ${s1.error}`);
    captured = captured.filter((w) => !/cancelled/.test(w));
  }
  assert.equal(s1.text, partial, "the interrupted run streamed more after the cut");
  assert.ok(!s2.error && s2.last("RUN_FINISHED"), `the second run: ${JSON.stringify(s2.events.map((e) => e.type))} ${s2.error}`);
  assert.equal(s2.text, `echo: ${second}`);
  const snap = snapshot(s2);
  const th = await getJSON(`${baseB}/v1/threads/${encodeURIComponent(threadId)}`);
  const stored = th.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)));
  if (strategy === "rollback") {
    const left = (t) => t.includes(first) || t.includes("Checking.") || t.includes("Tool");
    assert.ok(!snap.some(([, t]) => left(t)), `the rolled-back turn is in the MESSAGES_SNAPSHOT: ${JSON.stringify(snap)}`);
    assert.deepEqual(stored, [second, `echo: ${second}`], "the thread after the rollback");
  } else {
    assert.equal(snap.filter(([r, t]) => r === "user" && t === first).length, 1, `the MESSAGES_SNAPSHOT: ${JSON.stringify(snap)}`);
    const cut = partial.slice(partial.indexOf("Tool"));
    assert.ok(snap.some(([r, t]) => r === "assistant" && t === cut), `the MESSAGES_SNAPSHOT lacks the partial answer ${JSON.stringify(cut)}: ${JSON.stringify(snap)}`);
    assert.equal(stored.filter((t) => t === first).length, 1, `the thread: ${JSON.stringify(stored)}`);
  }
  return { ...out, partial };
}

const results = [];
for (const [tag, c] of Object.entries(clients)) {
  for (const strategy of ["enqueue", "interrupt", "rollback", "reject"]) {
    const name = `${tag} ${strategy}`;
    captured = [];
    let error, extra = {};
    try {
      extra = await run(name, c, strategy);
    } catch (e) {
      error = e?.stack ?? String(e);
    }
    if (!error && captured.length) error = `unexpected console output: ${JSON.stringify(captured)}`;
    results.push({ name, ok: !error, ...extra, ...(error ? { error } : {}) });
  }
}
process.stdout.write(JSON.stringify({ results }) + "\n");
process.exit(results.every((r) => r.ok) ? 0 : 1);
