#!/usr/bin/env node
// Stored reasoning with the official AG-UI clients: a page asks a question
// the model answers after reasoning (the mock OpenAI upstream's
// reasoning_content deltas); the page is then reloaded (a new agent, same
// threadId, no messages) and asks again, so the run's MESSAGES_SNAPSHOT
// restores the thread. Run once per client:
//
//   node tests/agui/reasoning.mjs http://127.0.0.1:PORT THREAD_ID v1|v0059
//
//   - v1: @ag-ui/client 1.0 HttpAgent: the reasoning streams as a
//     "reasoning" message, and the snapshot brings it back after the reload
//     (once: it has the live message's id).
//   - v0059: @ag-ui/client 0.0.59 (CopilotKit 1.x pins it): its schema
//     knows no "reasoning" role, so neither its stream nor its snapshot
//     carries one, and its runs do not fail.
//
// Prints one JSON document {"first": [[role, content]…], "reloaded": […],
// "warnings", "error"}.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { HttpAgent as HttpAgent0059 } from "agui-client-0059";

const [base, threadId, which] = process.argv.slice(2);
if (!base || !threadId || !which) {
  process.stderr.write("usage: node reasoning.mjs BASE_URL THREAD_ID v1|v0059\n");
  process.exit(64);
}
const url = `${base}/v1/agents/assistant/agui`;
const out = { first: [], reloaded: [], warnings: [], error: "" };
console.warn = (...a) => out.warnings.push(a.map(String).join(" "));
console.error = (...a) => out.warnings.push("console.error: " + a.map(String).join(" "));

const Agent = { v1: HttpAgent, v0059: HttpAgent0059 }[which];
const shown = (agent) => agent.messages.map((m) => [m.role, typeof m.content === "string" ? m.content : ""]);

async function ask(agent, text) {
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
  await agent.runAgent({ runId: randomUUID() });
}

try {
  if (!Agent) throw new Error(`no client ${which}`);
  const page = new Agent({ url, threadId });
  await ask(page, "think it over");
  out.first = shown(page);
  const reloaded = new Agent({ url, threadId });
  await ask(reloaded, "thanks");
  out.reloaded = shown(reloaded);
} catch (e) {
  out.error = String(e && e.message ? e.message : e);
}
process.stdout.write(JSON.stringify(out) + "\n");
