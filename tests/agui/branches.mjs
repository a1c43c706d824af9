#!/usr/bin/env node
// Regenerate and edit on an AG-UI thread, as apps drive the official
// clients: each run sends the whole conversation the client holds, with the
// ids the client got from the earlier runs' events and snapshots.
//
//   node tests/agui/branches.mjs http://127.0.0.1:PORT THREAD_PREFIX
//
// Cases, each on its own thread (THREAD_PREFIX-<case>):
//
//   - v1 (@ag-ui/client 1.0 HttpAgent), v0059 (0.0.59, the version
//     CopilotKit pins) and copilotkit (headless @copilotkit/core 1.75, which
//     has no regenerate or edit of its own: the app sets the agent's
//     messages and runs it, as CopilotKit's React chat does): a first run, a
//     second, a REGENERATE (the messages up to the second question, its
//     answer left out), an EDIT of the second question (same id, new text,
//     the later messages left out) and a run going on from the edit.
//   - state (1.0): the state is {draft:"v0"}; the second run's tool sets it
//     to "v1"; an edit of the second question branches from before that
//     change, and the branching run's STATE_SNAPSHOT is {draft:"v0"} again,
//     although the client sends the state it holds ({draft:"v1"}).
//
// Every branching run's MESSAGES_SNAPSHOT must hold exactly the branch: the
// messages up to the branch point (with the ids the client holds) and
// none of the discarded ones. Prints one JSON document
// {"results":[{name, ok, error?}]} and exits 1 when a case failed; the Go
// test (internal/server/agui_branches_client_test.go) checks what the model
// saw and what the store holds.
import { randomUUID } from "node:crypto";
import assert from "node:assert/strict";
import { HttpAgent as HttpAgentV1 } from "@ag-ui/client";
import { HttpAgent as HttpAgent0059 } from "agui-client-0059";
import { CopilotKitCore } from "@copilotkit/core";

const [base, prefix] = process.argv.slice(2);
if (!base || !prefix) {
  process.stderr.write("usage: node branches.mjs BASE_URL THREAD_PREFIX\n");
  process.exit(64);
}
const url = `${base}/v1/agents/assistant/agui`;

// Console capture: the clients report deviations with console.warn and
// pipeline failures with console.error; either fails the case.
let captured = [];
console.warn = (...a) => captured.push(a.map(String).join(" "));
console.error = (...a) => captured.push("console.error: " + a.map(String).join(" "));

// Session wraps an agent and the way the app runs it, and records the
// events of each run.
class Session {
  constructor(agent, run) {
    this.agent = agent;
    this.runIt = run;
    this.events = [];
    agent.subscribe({ onEvent: ({ event }) => void this.events.push(event) });
  }

  // run runs the agent once with the messages it holds; text, when given,
  // is appended as a new user message first.
  async run(text) {
    if (text !== undefined) this.agent.addMessage({ id: randomUUID(), role: "user", content: text });
    this.events = [];
    await this.runIt(this.agent);
    const types = this.events.map((e) => e.type);
    const fin = this.events.find((e) => e.type === "RUN_FINISHED");
    assert.ok(fin && types.at(-1) === "RUN_FINISHED", `the run did not finish: ${JSON.stringify(types)}`);
    assert.ok(fin.outcome === undefined || fin.outcome === "success" || fin.outcome?.type === "success", `outcome ${JSON.stringify(fin.outcome)}`);
  }

  all(type) {
    return this.events.filter((e) => e.type === type);
  }

  // answer is the text of the agent's last message, which must be an
  // answer.
  answer() {
    const m = this.agent.messages.at(-1);
    assert.equal(m?.role, "assistant", `the last message is ${JSON.stringify(m)}`);
    return m.content;
  }

  ids() {
    return this.agent.messages.map((m) => m.id);
  }

  // wantBranch checks the run's MESSAGES_SNAPSHOTs: the first holds
  // exactly prefix (ids), and none holds a discarded id; then the client
  // holds prefix followed by the run's new messages only.
  wantBranch(prefix, discarded, what) {
    const snaps = this.all("MESSAGES_SNAPSHOT");
    assert.ok(snaps.length > 0, `${what}: no MESSAGES_SNAPSHOT`);
    assert.deepEqual(snaps[0].messages.map((m) => m.id), prefix, `${what}: the first MESSAGES_SNAPSHOT`);
    for (const s of snaps) {
      const ids = s.messages.map((m) => m.id);
      for (const id of discarded) assert.ok(!ids.includes(id), `${what}: a MESSAGES_SNAPSHOT holds the discarded ${id}: ${JSON.stringify(ids)}`);
      assert.deepEqual(ids.slice(0, prefix.length), prefix, `${what}: a MESSAGES_SNAPSHOT`);
    }
    const held = this.ids();
    assert.deepEqual(held.slice(0, prefix.length), prefix, `${what}: the client's messages`);
    for (const id of discarded) assert.ok(!held.includes(id), `${what}: the client holds the discarded ${id}`);
    assert.deepEqual(held, snaps.at(-1).messages.map((m) => m.id).concat(held.slice(snaps.at(-1).messages.length)), `${what}: the client's messages follow the snapshot`);
  }
}

// thread reads a stored thread (its head) from the server.
async function thread(id) {
  const res = await fetch(`${base}/v1/threads/${encodeURIComponent(id)}`);
  const body = await res.json();
  assert.equal(res.status, 200, `GET thread ${id}: ${JSON.stringify(body)}`);
  return body;
}

// conversation drives the five runs on s (thread threadId) for tag.
async function conversation(s, threadId, tag) {
  const q1 = `${tag} first question`, q2 = `${tag} second question`;
  const q2e = `${tag} second question, edited`, q3 = `${tag} after the edit`;

  await s.run(q1);
  assert.equal(s.answer(), `echo: ${q1}`);
  await s.run(q2);
  assert.equal(s.answer(), `echo: ${q2}`);
  const [u1, a1, u2, a2] = s.ids();
  assert.equal(s.ids().length, 4);

  // REGENERATE: the conversation up to the second question, ids kept.
  s.agent.setMessages(s.agent.messages.slice(0, 3));
  await s.run();
  assert.equal(s.answer(), `echo: ${q2}`, "the regenerated answer");
  s.wantBranch([u1, a1, u2], [a2], "regenerate");
  const a2r = s.ids()[3];
  assert.equal(s.ids().length, 4);
  assert.notEqual(a2r, a2, "the regenerated answer is a new message");

  // EDIT the second question: same id, new text, what followed it left out.
  s.agent.setMessages([...s.agent.messages.slice(0, 2), { id: u2, role: "user", content: q2e }]);
  await s.run();
  assert.equal(s.answer(), `echo: ${q2e}`, "the answer to the edit");
  s.wantBranch([u1, a1, u2], [a2, a2r], "edit");
  const snap = s.all("MESSAGES_SNAPSHOT")[0].messages;
  assert.equal(snap[2].content, q2e, "the edit's MESSAGES_SNAPSHOT holds the edited question");
  const a2e = s.ids()[3];
  assert.equal(s.ids().length, 4);

  // A new message after the edit goes on along the edit's branch.
  await s.run(q3);
  assert.equal(s.answer(), `echo: ${q3}`);
  const u3 = s.ids()[4];
  s.wantBranch([u1, a1, u2, a2e, u3], [a2, a2r], "after the edit");
  const th = await thread(threadId);
  assert.deepEqual(th.messages.map((m) => m.id), s.ids(), "the thread's head is the client's conversation");
  assert.deepEqual(th.messages.map((m) => m.content), [q1, `echo: ${q1}`, q2e, `echo: ${q2e}`, q3, `echo: ${q3}`]);
}

const cases = {
  async v1() {
    const threadId = `${prefix}-v1`;
    const agent = new HttpAgentV1({ url, threadId });
    await conversation(new Session(agent, (a) => a.runAgent({ runId: randomUUID() })), threadId, "v1");
  },

  async v0059() {
    const threadId = `${prefix}-v0059`;
    const agent = new HttpAgent0059({ url, threadId });
    await conversation(new Session(agent, (a) => a.runAgent({ runId: randomUUID() })), threadId, "v0059");
  },

  async copilotkit() {
    const threadId = `${prefix}-copilotkit`;
    const agent = new HttpAgent0059({ url, threadId });
    const core = new CopilotKitCore({ agents__unsafe_dev_only: { assistant: agent }, deferInitialConnection: true });
    await conversation(new Session(agent, (a) => core.runAgent({ agent: a })), threadId, "copilotkit");
  },

  async state() {
    const threadId = `${prefix}-state`;
    const agent = new HttpAgentV1({ url, threadId, initialState: { draft: "v0" } });
    const s = new Session(agent, (a) => a.runAgent({ runId: randomUUID() }));
    const q1 = "state first note", q2e = "state second note, edited";
    await s.run(q1);
    assert.equal(s.answer(), `echo: ${q1}`);
    assert.deepEqual(s.all("STATE_SNAPSHOT").at(-1)?.snapshot, { draft: "v0" });
    await s.run("draft the letter");
    assert.equal(s.answer(), "Draft saved.");
    assert.deepEqual(agent.state, { draft: "v1" }, "the tool's change reached the client");
    const [u1, a1, u2] = s.ids();
    const discarded = s.ids().slice(3);

    // EDIT the second question (before the state change); the client
    // still holds, and sends, the state after it.
    s.agent.setMessages([...s.agent.messages.slice(0, 2), { id: u2, role: "user", content: q2e }]);
    await s.run();
    assert.equal(s.answer(), `echo: ${q2e}`);
    s.wantBranch([u1, a1, u2], discarded, "edit");
    const snaps = s.all("STATE_SNAPSHOT");
    assert.ok(snaps.length > 0, "no STATE_SNAPSHOT");
    assert.deepEqual(snaps[0].snapshot, { draft: "v0" }, "the branching run's STATE_SNAPSHOT is the state at the branch point");
    assert.deepEqual(agent.state, { draft: "v0" }, "the client's state after the branching run");
    assert.deepEqual((await thread(threadId)).state, { draft: "v0" }, "the thread's state");

    // A state the client really changes on a branching run is kept:
    // regenerate the edit's answer with draft "v2".
    s.agent.setState({ draft: "v2" });
    s.agent.setMessages(s.agent.messages.slice(0, 3));
    await s.run();
    assert.equal(s.answer(), `echo: ${q2e}`);
    assert.deepEqual(s.all("STATE_SNAPSHOT")[0]?.snapshot, { draft: "v2" }, "a client's own change on a branching run");
    assert.deepEqual((await thread(threadId)).state, { draft: "v2" });
  },
};

const results = [];
for (const [name, fn] of Object.entries(cases)) {
  captured = [];
  let error;
  try {
    await fn();
  } catch (e) {
    error = e?.stack ?? String(e);
  }
  if (!error && captured.length) error = `unexpected console output: ${JSON.stringify(captured)}`;
  results.push({ name, ok: !error, ...(error ? { error } : {}) });
}
process.stdout.write(JSON.stringify({ results }) + "\n");
process.exit(results.every((r) => r.ok) ? 0 : 1);
