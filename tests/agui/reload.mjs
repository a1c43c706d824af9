#!/usr/bin/env node
// Reload-safe chat with the official AG-UI clients: a page starts a run on a
// turn the Go test holds at the model ("tell me a long story"), then reloads
// (the run is aborted, as closing the page drops its stream: the turn goes
// on, abandoned). The reloaded page creates its agent with the same
// threadId and no messages and runs it: Stackbone streams the running turn
// from its first event (with STATE_SNAPSHOT and MESSAGES_SNAPSHOT) and
// follows it live to its end, so the page shows the question and the whole
// answer. Once the reloaded page's run started, the script creates the file
// READY_FILE: the Go test then lets the model answer.
//
//   node tests/agui/reload.mjs http://127.0.0.1:PORT THREAD_ID CASE READY_FILE
//
// CASE is one of:
//   - httpagent: @ag-ui/client 1.0 HttpAgent; the reloaded page calls
//     runAgent() with no new message.
//   - copilotkit: headless @copilotkit/core 1.75 (with the @ag-ui/client
//     0.0.59 it pins). Its chat calls connectAgent() when it mounts, and
//     HttpAgent's connect() does nothing by default, so the page's agent
//     connects by running the thread with what it holds (nothing, after a
//     reload): class ReattachingAgent extends HttpAgent { connect(input)
//     { return this.run(input); } }.
//
// Prints one JSON document {"answer", "messages": [[role, content]…],
// "events": [types of the reloaded page's run], "warnings", "error"}.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";
import { HttpAgent as HttpAgent0059 } from "agui-client-0059";
import { CopilotKitCore } from "@copilotkit/core";

const [base, threadId, which, ready] = process.argv.slice(2);
if (!base || !threadId || !which || !ready) {
  process.stderr.write("usage: node reload.mjs BASE_URL THREAD_ID httpagent|copilotkit READY_FILE\n");
  process.exit(64);
}
const url = `${base}/v1/agents/assistant/agui`;
const out = { answer: "", messages: [], events: [], warnings: [], error: "" };
console.warn = (...a) => out.warnings.push(a.map(String).join(" "));
console.error = (...a) => out.warnings.push("console.error: " + a.map(String).join(" "));

// ReattachingAgent is the CopilotKit recipe's agent: connecting runs the
// thread with the messages the page holds.
class ReattachingAgent extends HttpAgent0059 {
  connect(input) {
    return this.run(input);
  }
}

// The reloaded page's subscriber: records its events, and says when its run
// started.
const watch = {
  onEvent: ({ event }) => void out.events.push(event.type),
  onRunStartedEvent: () => writeFileSync(ready, "attached\n"),
};

// firstPage sends the question and hangs up once its run started.
async function firstPage(agent, run) {
  agent.addMessage({ id: randomUUID(), role: "user", content: "tell me a long story" });
  const sub = agent.subscribe({ onRunStartedEvent: () => agent.abortRun() });
  try {
    await run();
  } catch {
    // an aborted run may end with an error on the client's side
  }
  sub.unsubscribe();
}

const cases = {
  async httpagent() {
    const first = new HttpAgent({ url, threadId });
    await firstPage(first, () => first.runAgent({ runId: randomUUID() }));
    // The reload: a new agent, same threadId, no messages.
    const page = new HttpAgent({ url, threadId });
    await page.runAgent({ runId: randomUUID() }, watch);
    return page;
  },

  async copilotkit() {
    const first = new ReattachingAgent({ url, threadId });
    const core = new CopilotKitCore({ agents__unsafe_dev_only: { assistant: first }, deferInitialConnection: true });
    await firstPage(first, () => core.runAgent({ agent: first }));
    // The reload: CopilotKit connects the page's agent, as its chat does
    // when it mounts.
    const page = new ReattachingAgent({ url, threadId });
    page.subscribe(watch);
    const reloaded = new CopilotKitCore({ agents__unsafe_dev_only: { assistant: page }, deferInitialConnection: true });
    await reloaded.connectAgent({ agent: page });
    return page;
  },
};

try {
  if (!cases[which]) throw new Error(`no case ${which}`);
  report(await cases[which]());
} catch (e) {
  out.error = String(e && e.message ? e.message : e);
}
process.stdout.write(JSON.stringify(out) + "\n");

function report(page) {
  out.messages = page.messages.map((m) => [m.role, typeof m.content === "string" ? m.content : ""]);
  const last = page.messages.at(-1);
  out.answer = last && last.role === "assistant" ? String(last.content) : "";
}
