#!/usr/bin/env node
// AG-UI conformance of a Stackbone server, checked with the official
// @ag-ui/client HttpAgent (its schema enforcement, ordering verifier and
// reducer all run on every stream): version 1.0.0, or 0.0.59 (the version
// CopilotKit 1.x pins) with AGUI_CLIENT=0.0.59.
//
//   [AGUI_CLIENT=0.0.59] node tests/agui/conformance.mjs http://127.0.0.1:PORT [fixtures.json]
//
// fixtures.json, when given, maps names to recorded SSE bodies (streams the
// server's encoder wrote for event sequences the runtime does not produce
// yet); each is replayed through the client, which must accept it silently.
//
// The server must serve the stacktest default agents with DefaultScript plus
// a rule making "two refunds" call refund twice. Prints one JSON document:
// {"results":[{"name","ok","error"?,"warnings"}], "refundRuns": N} where
// refundRuns is how often the refund tool must have run in total. Exits 1 when
// a case failed. A case fails on any thrown error (schema, ordering, HTTP), on
// a failed check, and on any console warning or error, except, with the 1.0
// client only, the two it prints per interrupt when it strips the top-level
// description and allowedDecisions the Stackbone docs promise (the 0.0.59
// client strips them silently; both keep them under metadata.stackbone).
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

const CLIENT = process.env.AGUI_CLIENT || "1.0.0";
if (CLIENT !== "1.0.0" && CLIENT !== "0.0.59") {
  process.stderr.write(`AGUI_CLIENT must be 1.0.0 or 0.0.59, not ${CLIENT}\n`);
  process.exit(64);
}
const V1 = CLIENT === "1.0.0";
const { HttpAgent } = V1 ? await import("@ag-ui/client") : await import("agui-client-0059");

const base = process.argv[2];
if (!base) {
  process.stderr.write("usage: node conformance.mjs <baseURL>\n");
  process.exit(64);
}
const url = `${base}/v1/agents/assistant/agui`;
const fixturesPath = process.argv[3];

// Console capture: the client reports deviations with console.warn and
// pipeline failures with console.error.
let captured = [];
console.warn = (...a) => captured.push(a.map(String).join(" "));
console.error = (...a) => captured.push("console.error: " + a.map((x) => (x instanceof Error ? x.message : String(x))).join(" "));
const ALLOWED = V1 ? /^\[ag-ui\]\[enforce\] Removed unrecognised material at '\/outcome\/interrupts\/\d+\/(description|allowedDecisions)' on RUN_FINISHED\./ : /(?!)/;

let refundRuns = 0;
const DESCRIPTION = "Refund order ord_42 for 19.99";
const APPROVAL_MESSAGE = "This conversation is waiting on a human decision. Resolve it before sending a new message.";

// Probe wraps an HttpAgent, recording what the client saw (after
// enforcement and verification) and the raw frames on the wire.
class Probe {
  constructor({ threadId = "agui-" + randomUUID(), state = {}, messages = [] } = {}) {
    this.raw = [];
    this.requests = [];
    this.agent = new HttpAgent({
      url,
      threadId,
      initialState: state,
      initialMessages: messages,
      fetch: (u, init) => this.fetch(u, init),
    });
  }

  get threadId() {
    return this.agent.threadId;
  }

  async fetch(u, init) {
    this.requests.push(JSON.parse(init.body));
    const res = await fetch(u, init);
    if (!res.body) return res;
    const [mine, theirs] = res.body.tee();
    this.rawDone = (async () => {
      const text = await new Response(mine).text();
      for (const frame of text.split("\n\n")) {
        for (const line of frame.split("\n")) {
          if (line.startsWith("data: ")) this.raw.push(JSON.parse(line.slice(6)));
        }
      }
    })();
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  }

  // run sends one request; text, when given, is appended as a user message.
  async run(text, params = {}) {
    if (text !== undefined) this.agent.addMessage({ id: randomUUID(), role: "user", content: text });
    this.events = [];
    this.raw = [];
    this.finished = undefined;
    const result = await this.agent.runAgent(params, {
      onEvent: ({ event }) => {
        this.events.push(event);
      },
      onRunFinishedEvent: (p) => {
        this.finished = p;
      },
    });
    await this.rawDone;
    return result;
  }

  types() {
    return this.events.map((e) => e.type);
  }

  first(type) {
    return this.events.find((e) => e.type === type);
  }

  all(type) {
    return this.events.filter((e) => e.type === type);
  }

  text() {
    return this.all("TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
  }

  runError() {
    const errs = this.all("RUN_ERROR");
    assert.equal(errs.length, 1, `want one RUN_ERROR, got ${JSON.stringify(this.types())}`);
    assert.equal(this.events.length, 1, `RUN_ERROR must be the only event: ${JSON.stringify(this.types())}`);
    return errs[0];
  }
}

async function getJSON(path) {
  const res = await fetch(base + path);
  return { status: res.status, body: await res.json() };
}

async function thread(id) {
  const r = await getJSON(`/v1/threads/${encodeURIComponent(id)}`);
  assert.equal(r.status, 200, `GET thread ${id}: ${JSON.stringify(r.body)}`);
  return r.body;
}

async function decision(id) {
  const r = await getJSON(`/v1/hitl/${encodeURIComponent(id)}`);
  assert.equal(r.status, 200, `GET decision ${id}: ${JSON.stringify(r.body)}`);
  return r.body;
}

function assertSuccess(p) {
  assert.equal(p.finished?.outcome, "success", `outcome: ${JSON.stringify(p.finished?.event?.outcome)} events ${JSON.stringify(p.types())}`);
  assert.deepEqual(p.agent.pendingInterrupts, []);
}

// pauseRefund drives a fresh thread into the refund approval pause.
async function pauseRefund(text = "please refund my order") {
  const p = new Probe();
  await p.run(text);
  assert.equal(p.finished?.outcome, "interrupt", `want an interrupt, got ${JSON.stringify(p.types())}`);
  const call = p.first("TOOL_CALL_START");
  assert.equal(call?.toolCallName, "refund");
  assert.equal(p.agent.pendingInterrupts.length, 1);
  const it = p.agent.pendingInterrupts[0];
  assert.equal(it.toolCallId, call.toolCallId);
  return { p, it, callId: call.toolCallId };
}

const approve = (id, payload = { approved: true }) => ({ resume: [{ interruptId: id, status: "resolved", payload }] });

// unansweredCalls lists the tool calls in messages that no tool message
// answers (what a frontend still has to run).
const unansweredCalls = (messages) => {
  const answered = new Set(messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return messages.flatMap((m) => (m.toolCalls ?? []).map((c) => c.id)).filter((id) => !answered.has(id));
};

const toolMessagesFor = (th, callId) => th.messages.filter((m) => m.role === "tool" && m.toolCallId === callId);

const cases = {
  async text() {
    const p = new Probe();
    const res = await p.run("hello agui");
    assertSuccess(p);
    assert.equal(p.types()[0], "RUN_STARTED");
    assert.equal(p.raw[0].protocolVersion, "1.0");
    assert.equal(p.raw[0].threadId, p.threadId);
    assert.equal(p.raw[0].runId, p.requests[0].runId, "RUN_STARTED echoes the request's runId");
    assert.equal(p.text(), "echo: hello agui");
    assert.equal(p.agent.messages.length, 2);
    const last = p.agent.messages[1];
    assert.equal(last.role, "assistant");
    assert.equal(last.content, "echo: hello agui");
    assert.equal(res.newMessages.length, 1);
    const th = await thread(p.threadId);
    assert.deepEqual(th.messages.map((m) => m.id), p.agent.messages.map((m) => m.id), "client and server agree on message ids");
  },

  async serverTool() {
    const p = new Probe();
    await p.run("what is the weather in Paris?");
    assertSuccess(p);
    const start = p.first("TOOL_CALL_START");
    const result = p.first("TOOL_CALL_RESULT");
    assert.equal(start.toolCallName, "get_weather");
    assert.equal(result.toolCallId, start.toolCallId);
    assert.equal(result.role, "tool");
    assert.match(result.content, /"city":"Paris"/);
    if (V1) assert.deepEqual(p.finished.pendingToolCallIds, [], "a server tool leaves nothing pending");
    assert.deepEqual(unansweredCalls(p.agent.messages), []);
    const asst = p.agent.messages.find((m) => m.role === "assistant" && m.toolCalls?.length);
    assert.equal(asst.toolCalls[0].id, start.toolCallId);
    assert.equal(asst.toolCalls[0].function.arguments, '{"city":"Paris"}');
    const tool = p.agent.messages.find((m) => m.role === "tool");
    assert.equal(tool.toolCallId, start.toolCallId);
    assert.equal(tool.id, result.messageId);
    assert.match(p.text(), /^Checking\.Tool said: /);
  },

  async interrupt() {
    const { p, it, callId } = await pauseRefund();
    const raw = p.raw.at(-1);
    assert.equal(raw.type, "RUN_FINISHED");
    const wire = raw.outcome.interrupts[0];
    assert.equal(wire.description, DESCRIPTION);
    assert.deepEqual(wire.allowedDecisions, ["approve", "reject", "edit"]);
    // What the client keeps after stripping the top-level extensions:
    // metadata.stackbone carries them for both client versions.
    assert.equal("description" in it, false);
    assert.equal("allowedDecisions" in it, false);
    assert.equal(it.reason, "tool_call");
    assert.equal(it.message, DESCRIPTION);
    assert.equal(it.toolCallId, callId);
    assert.equal(it.responseSchema.type, "object");
    assert.ok(it.responseSchema.properties.approved && it.responseSchema.properties.editedArgs);
    assert.deepEqual(it.metadata, { stackbone: { tool: "refund", description: DESCRIPTION, allowedDecisions: ["approve", "reject", "edit"] } });
    assert.equal(p.finished.interrupts[0].id, it.id);
    const stripped = captured.filter((w) => ALLOWED.test(w));
    assert.equal(stripped.length, V1 ? 2 : 0, "only the 1.0 client warns when it strips description and allowedDecisions");
    const d = await decision(it.id);
    assert.equal(d.status, "pending");
    // A pause without a description omits it (and message).
    const q = new Probe();
    await q.run("delete the temp file");
    assert.equal(q.finished?.outcome, "interrupt");
    const del = q.raw.at(-1).outcome.interrupts[0];
    assert.equal("description" in del, false);
    assert.equal("message" in del, false);
    assert.deepEqual(del.allowedDecisions, ["approve", "reject"]);
    assert.deepEqual(q.agent.pendingInterrupts[0].metadata, { stackbone: { tool: "delete_file", allowedDecisions: ["approve", "reject"] } });
  },

  async resumeApprove() {
    const { p, it, callId } = await pauseRefund();
    await p.run(undefined, approve(it.id));
    refundRuns++;
    assertSuccess(p);
    assert.equal(p.requests.at(-1).resume[0].interruptId, it.id);
    assert.equal(p.raw[0].runId, p.requests.at(-1).runId, "the resumed run echoes the request's runId");
    assert.equal(p.all("TOOL_CALL_START").length, 0, "the approved call does not start again");
    const results = p.all("TOOL_CALL_RESULT");
    assert.equal(results.length, 1);
    assert.equal(results[0].toolCallId, callId);
    assert.match(results[0].content, new RegExp(`"refunded":19.99,"toolCallId":"${callId}"`));
    assert.match(p.text(), /^Refund result: /);
    const msgs = p.agent.messages;
    const ai = msgs.findIndex((m) => m.toolCalls?.some((c) => c.id === callId));
    assert.equal(msgs[ai + 1].role, "tool", "the result follows the call's assistant message");
    assert.equal(msgs[ai + 1].toolCallId, callId);
    const th = await thread(p.threadId);
    assert.equal(toolMessagesFor(th, callId).length, 1, "the tool ran once");
    assert.equal(th.status, "idle");
    const d = await decision(it.id);
    assert.equal(d.status, "approved");
    assert.equal(d.decision.decidedVia, "agui");
    assert.equal(d.decision.decidedBy, "dev");
  },

  async resumeEditedArgs() {
    const { p, it, callId } = await pauseRefund();
    await p.run(undefined, approve(it.id, { editedArgs: { orderId: "ord_42", amount: 5 } }));
    refundRuns++;
    assertSuccess(p);
    const res = p.first("TOOL_CALL_RESULT");
    assert.equal(res.toolCallId, callId);
    assert.match(res.content, /"refunded":5,/);
    const d = await decision(it.id);
    assert.equal(d.status, "approved");
    assert.deepEqual(d.decision.editedArgs, { orderId: "ord_42", amount: 5 });
  },

  async rejectViaCancelled() {
    const { p, it, callId } = await pauseRefund();
    await p.run(undefined, { resume: [{ interruptId: it.id, status: "cancelled" }] });
    assertSuccess(p);
    const res = p.first("TOOL_CALL_RESULT");
    assert.equal(res.toolCallId, callId);
    assert.match(res.content, /rejected/);
    assert.doesNotMatch(res.content, /refunded/);
    const d = await decision(it.id);
    assert.equal(d.status, "rejected");
    const th = await thread(p.threadId);
    const tool = toolMessagesFor(th, callId);
    assert.equal(tool.length, 1);
    assert.equal(tool[0].isError, true);
  },

  async badResumesDecideNothing() {
    const { p, it } = await pauseRefund();
    // A payload that does not match the responseSchema.
    await p.run(undefined, approve(it.id, { approved: "yes" }));
    assert.equal(p.runError().code, "invalid_resume_payload");
    // An unknown interrupt next to a valid answer: all or nothing.
    await p.run(undefined, { resume: [...approve(it.id).resume, { interruptId: "int_unknown", status: "resolved", payload: { approved: true } }] });
    assert.equal(p.runError().code, "unknown_interrupt");
    // A resolved entry without a payload.
    await p.run(undefined, { resume: [{ interruptId: it.id, status: "resolved" }] });
    assert.equal(p.runError().code, "invalid_resume_payload");
    assert.equal((await decision(it.id)).status, "pending");
    assert.equal((await thread(p.threadId)).status, "waiting");

    // A partial resume of a two-interrupt pause.
    const two = new Probe();
    await two.run("two refunds please");
    assert.equal(two.finished?.outcome, "interrupt");
    const ids = two.agent.pendingInterrupts.map((i) => i.id);
    assert.equal(ids.length, 2);
    // The official client refuses to send a partial resume itself, so a
    // second client on the same thread sends it.
    const other = new Probe({ threadId: two.threadId });
    await other.run(undefined, approve(ids[0]));
    const err = other.runError();
    assert.equal(err.code, "partial_resume");
    assert.match(err.message, new RegExp(ids[1]));
    for (const id of ids) assert.equal((await decision(id)).status, "pending");
    // The complete resume then works.
    await two.run(undefined, { resume: ids.map((id) => ({ interruptId: id, status: "resolved", payload: { approved: true } })) });
    refundRuns += 2;
    assertSuccess(two);
    assert.equal(two.all("TOOL_CALL_RESULT").length, 2);
    for (const id of ids) assert.equal((await decision(id)).status, "approved");
  },

  async replayResumeIdempotent() {
    const { p, it, callId } = await pauseRefund();
    const resume = approve(it.id);
    await p.run(undefined, resume);
    refundRuns++;
    assertSuccess(p);
    const before = await thread(p.threadId);
    // The same resume again: nothing is decided or run, the run succeeds.
    await p.run(undefined, resume);
    assertSuccess(p);
    assert.equal(p.all("TOOL_CALL_RESULT").length, 0);
    assert.equal(p.all("TOOL_CALL_START").length, 0);
    const after = await thread(p.threadId);
    assert.equal(after.messages.length, before.messages.length);
    assert.equal(toolMessagesFor(after, callId).length, 1);
    // A conflicting replay is refused.
    await p.run(undefined, { resume: [{ interruptId: it.id, status: "cancelled" }] });
    assert.equal(p.runError().code, "already_decided");
    assert.equal((await decision(it.id)).status, "approved");
  },

  async freshInputWhileInterrupted() {
    const { p, it } = await pauseRefund();
    // The official client refuses fresh input itself while it knows of the
    // interrupt; a second client on the same thread does not know.
    const other = new Probe({ threadId: p.threadId });
    await other.run("hello, anyone?");
    const err = other.runError();
    assert.equal(err.code, "approval_pending");
    assert.equal(err.message, APPROVAL_MESSAGE);
    assert.equal((await decision(it.id)).status, "pending");
    const th = await thread(p.threadId);
    assert.equal(th.messages.some((m) => m.content === "hello, anyone?"), false, "the refused input is not stored");
  },

  async frontendTool() {
    const tools = [{ name: "open_modal", description: "Open a modal in the page", parameters: { type: "object", properties: { title: { type: "string" } } } }];
    const p = new Probe();
    await p.run("open the modal", { tools });
    assert.equal(p.finished?.outcome, "success");
    const start = p.first("TOOL_CALL_START");
    assert.equal(start.toolCallName, "open_modal");
    // 1.0 reads the pending calls from the outcome; 0.0.59 validates the
    // outcome strictly (no pendingToolCallIds) and the app derives them from
    // the calls without a result, as 1.0 does when the list is absent.
    assert.deepEqual(p.raw.at(-1).outcome, V1 ? { type: "success", pendingToolCallIds: [start.toolCallId] } : { type: "success" });
    if (V1) assert.deepEqual(p.finished.pendingToolCallIds, [start.toolCallId]);
    assert.deepEqual(unansweredCalls(p.agent.messages), [start.toolCallId]);
    assert.equal(p.all("TOOL_CALL_RESULT").length, 0);
    // The frontend runs the tool and sends its result as a tool message.
    p.agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: start.toolCallId, content: '{"opened":true}' });
    await p.run(undefined, { tools });
    assertSuccess(p);
    if (V1) assert.deepEqual(p.finished.pendingToolCallIds, []);
    assert.deepEqual(unansweredCalls(p.agent.messages), []);
    assert.equal(p.text(), 'Modal said: {"opened":true}');
    const th = await thread(p.threadId);
    assert.deepEqual(th.messages.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  },

  async sharedState() {
    const p = new Probe();
    await p.run("save a draft please");
    assertSuccess(p);
    assert.ok(p.first("STATE_SNAPSHOT"), "a run opens with STATE_SNAPSHOT");
    assert.ok(p.first("STATE_DELTA"), "a changed state streams a STATE_DELTA");
    const th = await thread(p.threadId);
    assert.deepEqual(th.state, { draft: "v1" });
    assert.deepEqual(p.agent.state, th.state);
    // The next run starts from the same state.
    await p.run("thanks");
    assertSuccess(p);
    assert.deepEqual(p.first("STATE_SNAPSHOT").snapshot, { draft: "v1" });
    assert.deepEqual(p.agent.state, { draft: "v1" });
  },

  // Deep-agent built-ins over AG-UI: todos and file edits stream as
  // STATE_DELTA patches the official client applies; its final state equals
  // the stored one (paths with "/" in keys are escaped as ~1).
  async todosAndFiles() {
    const p = new Probe();
    await p.run("plan and take notes");
    assertSuccess(p);
    assert.ok(p.all("STATE_DELTA").length >= 2, "each state change streams a STATE_DELTA");
    assert.equal(p.events.filter((e) => e.type.startsWith("STATE_")).at(-1).type, "STATE_DELTA", "the run's last state event is a delta");
    const th = await thread(p.threadId);
    assert.deepEqual(p.agent.state, th.state);
    assert.equal(th.state.todos[0].done, true);
    assert.equal(th.state.todos[1].done, false);
    assert.equal(th.state.files["/notes/plan.md"].content, "step one done\nstep two");
    const paths = p.all("STATE_DELTA").flatMap((e) => e.delta.map((op) => op.path));
    assert.ok(paths.some((path) => path.includes("~1notes~1plan.md")), `file keys are escaped: ${JSON.stringify(paths)}`);
  },

  async seedState() {
    const p = new Probe({ state: { draft: "seeded", secret: "not editable" } });
    await p.run("hello with state");
    assertSuccess(p);
    assert.deepEqual(p.requests[0].state, { draft: "seeded", secret: "not editable" });
    assert.deepEqual(p.first("STATE_SNAPSHOT").snapshot, { draft: "seeded" });
    const th = await thread(p.threadId);
    assert.deepEqual(th.state, { draft: "seeded" });
    assert.deepEqual(p.agent.state, th.state);
  },

  async invalidState() {
    const p = new Probe({ state: { draft: 42 } });
    await p.run("hello");
    const err = p.runError();
    assert.equal(err.code, "invalid_state");
    assert.match(err.message, /draft/);
    const r = await getJSON(`/v1/threads/${p.threadId}`);
    assert.equal(r.status, 404, "a refused request creates no thread");
  },

  async reopenThread() {
    const session = "agui-reopen-" + randomUUID();
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-stackbone-session": session },
      body: JSON.stringify({ model: "assistant", messages: [{ role: "user", content: "first turn over chat completions" }] }),
    });
    assert.equal(res.status, 200);
    const comp = await res.json();
    assert.equal(comp.choices[0].message.content, "echo: first turn over chat completions");
    const p = new Probe({ threadId: session });
    await p.run("second turn over the agui wire");
    assertSuccess(p);
    // The restored history first (the reducer drops the client's new
    // message, which it leaves out), then the whole conversation (which
    // appends the new message after it).
    const snaps = p.all("MESSAGES_SNAPSHOT");
    assert.deepEqual(snaps.map((e) => e.messages.length), [2, 3], "reopening a thread sends the history, then the conversation");
    const snap = snaps.at(-1);
    assert.deepEqual(snap.messages.map((m) => [m.role, m.content]), [
      ["user", "first turn over chat completions"],
      ["assistant", "echo: first turn over chat completions"],
      ["user", "second turn over the agui wire"],
    ]);
    // The client's reducer keeps the messages it holds in place and appends
    // the snapshot's others: the restored history must still end up above
    // the client's new message, and the answer last.
    const want = [
      ["user", "first turn over chat completions"],
      ["assistant", "echo: first turn over chat completions"],
      ["user", "second turn over the agui wire"],
      ["assistant", "echo: second turn over the agui wire"],
    ];
    assert.deepEqual(p.agent.messages.map((m) => [m.role, m.content]), want, "the client's messages, in order");
    const th = await thread(session);
    assert.deepEqual(th.messages.map((m) => [m.role, m.content]), want);
    assert.deepEqual(p.agent.messages.map((m) => m.id), th.messages.map((m) => m.id), "client and server agree on ids and order");
    // A third turn from the same client keeps the order too.
    await p.run("third turn");
    assertSuccess(p);
    assert.deepEqual(p.agent.messages.map((m) => m.content).slice(-2), ["third turn", "echo: third turn"]);
    assert.deepEqual(p.agent.messages.map((m) => m.id), (await thread(session)).messages.map((m) => m.id));
  },

  async subagent() {
    const p = new Probe();
    // A first turn, so the parent's task call and the subagent's first call
    // (both the first call of a conversation) get different scripted ids.
    await p.run("hello first");
    await p.run("research Paris for me");
    assertSuccess(p);
    const task = p.all("TOOL_CALL_START").find((e) => e.toolCallName === "task");
    assert.ok(task, `no task call: ${JSON.stringify(p.types())}`);
    const subId = "sub_" + task.toolCallId;
    const started = p.first("SUBAGENT_STARTED");
    assert.equal(started.subagentRunId, subId);
    assert.equal(started.name, "general-purpose");
    assert.equal(started.parentToolCallId, task.toolCallId);
    assert.deepEqual(p.first("SUBAGENT_FINISHED").outcome, { type: "success" });
    assert.deepEqual(p.all("STEP_STARTED").map((e) => e.stepName), ["general-purpose"]);
    const inner = p.all("TOOL_CALL_RESULT").find((e) => e.subagentRunId === subId);
    assert.match(inner?.content ?? "", /"city":"Paris"/);
    assert.match(p.text(), /Summary: Tool said:/);
    // Reopening: the snapshot holds the subagent's conversation, attributed.
    await p.run("thanks a lot");
    assertSuccess(p);
    const snap = p.all("MESSAGES_SNAPSHOT").at(-1);
    const attributed = snap.messages.filter((m) => m.subagentRunId === subId);
    assert.ok(attributed.length >= 3, JSON.stringify(snap.messages));
    assert.equal(attributed[0].role, "user");
    assert.equal(attributed[0].content, "dig up facts about Paris");
    const th = await thread(p.threadId);
    assert.deepEqual(p.agent.messages.map((m) => m.id), th.messages.map((m) => m.id), "client and server agree on the order");
  },

  async subagentApproval() {
    const p = new Probe();
    await p.run("hello first");
    await p.run("delegate the refund please");
    assert.equal(p.finished?.outcome, "interrupt", JSON.stringify(p.types()));
    const task = p.all("TOOL_CALL_START").find((e) => e.toolCallName === "task");
    const subId = "sub_" + task.toolCallId;
    const refund = p.all("TOOL_CALL_START").find((e) => e.toolCallName === "refund");
    assert.equal(refund.subagentRunId, subId);
    assert.deepEqual(p.first("SUBAGENT_FINISHED"), { ...p.first("SUBAGENT_FINISHED"), subagentRunId: subId, outcome: { type: "suspended" } });
    const it = p.agent.pendingInterrupts[0];
    assert.equal(it.toolCallId, refund.toolCallId);
    assert.deepEqual(it.metadata, { stackbone: { tool: "refund", subagent: "general-purpose", description: DESCRIPTION, allowedDecisions: ["approve", "reject", "edit"] } });
    await p.run(undefined, approve(it.id));
    refundRuns++;
    assertSuccess(p);
    assert.equal(p.first("SUBAGENT_STARTED")?.subagentRunId, subId, "the same subagent continues");
    assert.equal(p.all("TOOL_CALL_START").some((e) => e.toolCallId === refund.toolCallId), false);
    const res = p.all("TOOL_CALL_RESULT").find((e) => e.toolCallId === refund.toolCallId);
    assert.equal(res?.subagentRunId, subId);
    assert.match(res.content, /"refunded":19.99/);
    assert.deepEqual(p.first("SUBAGENT_FINISHED").outcome, { type: "success" });
    assert.match(p.text(), /Summary: Refund result:/);
  },

  async statelessRun() {
    const p = new Probe();
    p.agent.threadId = "";
    await p.run("open the modal", { tools: [{ name: "open_modal", description: "Open a modal", parameters: { type: "object" } }] });
    const err = p.runError();
    assert.equal(err.code, "thread_required");
    assert.match(err.message, /threadId/);
    // Without frontend tools a stateless run works and stores nothing.
    const q = new Probe();
    q.agent.threadId = "";
    await q.run("stateless hello");
    assertSuccess(q);
    assert.equal(q.text(), "echo: stateless hello");
    assert.equal(q.first("STATE_SNAPSHOT"), undefined);
  },
};

// CopilotKit 1.75 (headless @copilotkit/core, which pins @ag-ui/client
// 0.0.59) runs a frontend tool's handler and the follow-up run, and a page
// that reopens the thread shows the history above its new message.
if (!V1) {
  cases.copilotkit = async () => {
    const { CopilotKitCore } = await import("@copilotkit/core");
    const threadId = "agui-ck-" + randomUUID();
    const calls = [];
    // A Standard Schema with a JSON Schema, as CopilotKit wants parameters.
    const parameters = {
      "~standard": { version: 1, vendor: "stackbone-test", validate: (value) => ({ value }) },
      toJSONSchema: () => ({ type: "object", properties: { title: { type: "string" } } }),
    };
    const page = () => {
      const agent = new HttpAgent({ url, threadId });
      const core = new CopilotKitCore({ agents__unsafe_dev_only: { assistant: agent }, deferInitialConnection: true });
      core.addTool({
        name: "open_modal",
        description: "Open a modal in the page",
        parameters,
        handler: async (args) => {
          calls.push(args);
          return { opened: true };
        },
      });
      return { agent, core };
    };
    const first = page();
    first.agent.addMessage({ id: randomUUID(), role: "user", content: "open the modal" });
    await first.core.runAgent({ agent: first.agent });
    assert.deepEqual(calls, [{ title: "Hello" }], "CopilotKit ran the frontend tool's handler once");
    const rows = (a) => a.messages.map((m) => [m.role, m.content ?? m.toolCalls?.map((c) => c.function.name)]);
    const history = [
      ["user", "open the modal"],
      ["assistant", ["open_modal"]],
      ["tool", '{"opened":true}'],
      ["assistant", 'Modal said: {"opened":true}'],
    ];
    assert.deepEqual(rows(first.agent), history);
    assert.deepEqual(first.agent.messages.map((m) => m.id), (await thread(threadId)).messages.map((m) => m.id));

    const second = page();
    second.agent.addMessage({ id: randomUUID(), role: "user", content: "hello again" });
    await second.core.runAgent({ agent: second.agent });
    assert.deepEqual(rows(second.agent), [...history, ["user", "hello again"], ["assistant", "echo: hello again"]]);
    assert.deepEqual(second.agent.messages.map((m) => m.id), (await thread(threadId)).messages.map((m) => m.id));
    assert.equal(calls.length, 1);
  };
}

if (fixturesPath) {
  cases.fixtures = async () => {
    const fixtures = JSON.parse(await readFile(fixturesPath, "utf8"));
    assert.ok(Object.keys(fixtures).length > 0);
    for (const [name, sse] of Object.entries(fixtures)) {
      const agent = new HttpAgent({
        url: "http://fixture.invalid/agui",
        threadId: "t-fixture",
        initialMessages: [{ id: randomUUID(), role: "user", content: "hi" }],
        fetch: async () => new Response(sse, { status: 200, headers: { "content-type": "text/event-stream" } }),
      });
      const events = [];
      try {
        await agent.runAgent({}, { onEvent: ({ event }) => events.push(event) });
      } catch (e) {
        throw new Error(`fixture ${name}: ${e.message}`);
      }
      const last = events.at(-1)?.type;
      assert.ok(last === "RUN_FINISHED" || last === "RUN_ERROR", `fixture ${name} ends with ${last}`);
      assert.equal(events.filter((e) => e.type === "RUN_FINISHED" || e.type === "RUN_ERROR").length, 1, `fixture ${name}`);
      if (name === "subagentSteps") {
        assert.deepEqual(agent.state, { todos: [{ done: true }] });
        const tool = agent.messages.find((m) => m.role === "tool");
        assert.equal(tool?.toolCallId, "c1");
        assert.ok(events.some((e) => e.type === "SUBAGENT_STARTED" && e.name === "researcher"));
      }
      if (name === "finishWithWorkOpen") {
        assert.deepEqual(events.at(-1).outcome, V1 ? { type: "success", pendingToolCallIds: ["c1"] } : { type: "success" });
      }
    }
  };
}

const only = process.env.AGUI_CASES ? new Set(process.env.AGUI_CASES.split(",")) : null;
const results = [];
for (const [name, fn] of Object.entries(cases)) {
  if (only && !only.has(name)) continue;
  captured = [];
  let error;
  try {
    await fn();
  } catch (e) {
    error = e?.stack ?? String(e);
  }
  const unexpected = captured.filter((w) => !ALLOWED.test(w));
  if (!error && unexpected.length) error = `unexpected console output: ${JSON.stringify(unexpected)}`;
  results.push({ name, ok: !error, ...(error ? { error } : {}), warnings: captured });
}
process.stdout.write(JSON.stringify({ results, refundRuns }) + "\n");
process.exit(results.every((r) => r.ok) ? 0 : 1);
