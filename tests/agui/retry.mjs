#!/usr/bin/env node
// A retry of an AG-UI run whose first attempt failed after its answer was
// stored, with the official @ag-ui/client HttpAgent:
//
//   node tests/agui/retry.mjs http://127.0.0.1:PORT THREAD_ID
//
// The app sends "hello" once (the server fails that run), then retries it as
// apps do: runAgent again with the same messages and nothing new. Prints one
// JSON document: {"firstError", "firstEvents" and "events" (the event types
// of the first run and of the retry), "retryError", "messages" (the agent's
// messages after the retry)}.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const [base, threadId] = process.argv.slice(2);
const agent = new HttpAgent({ url: `${base}/v1/agents/assistant/agui`, threadId });
agent.addMessage({ id: randomUUID(), role: "user", content: "hello" });

const out = { firstError: "", firstEvents: [], events: [], messages: [] };
try {
  await agent.runAgent({ runId: randomUUID() }, { onEvent: ({ event }) => out.firstEvents.push(event.type) });
} catch (e) {
  out.firstError = String(e && e.message ? e.message : e);
}
try {
  await agent.runAgent({ runId: randomUUID() }, { onEvent: ({ event }) => out.events.push(event.type) });
} catch (e) {
  out.retryError = String(e && e.message ? e.message : e);
}
out.messages = agent.messages.map((m) => ({ role: m.role, content: m.content }));
process.stdout.write(JSON.stringify(out) + "\n");
