#!/usr/bin/env node
// Stop, then a new message at once, with the official @ag-ui/client
// HttpAgent, as a chat UI's Stop button does: abortRun() once the run
// started, then addMessage and runAgent again. The turn to stop asks for "a
// long story", which the Go test holds at the model.
//
//   node tests/agui/stop.mjs http://127.0.0.1:PORT THREAD_ID
//
// Prints one JSON document: {"stopToAnswerMs", "answer", "error",
// "secondEvents" (the event types of the run after the stop)}.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const [base, threadId] = process.argv.slice(2);
const agent = new HttpAgent({ url: `${base}/v1/agents/assistant/agui`, threadId });
agent.addMessage({ id: randomUUID(), role: "user", content: "agui: tell me a long story" });

const out = { stopToAnswerMs: -1, answer: "", error: "", secondEvents: [] };
let t0;
try {
  await agent.runAgent({ runId: randomUUID() }, {
    onRunStartedEvent: () => { t0 = performance.now(); agent.abortRun(); },
  });
} catch {
  // an aborted run may end with an error on the client's side
}
t0 ??= performance.now();
agent.addMessage({ id: randomUUID(), role: "user", content: "agui: never mind, hi" });
try {
  await agent.runAgent({ runId: randomUUID() }, { onEvent: ({ event }) => out.secondEvents.push(event.type) });
  out.stopToAnswerMs = Math.round(performance.now() - t0);
  const last = agent.messages.at(-1);
  out.answer = last && last.role === "assistant" ? String(last.content) : "";
} catch (e) {
  out.error = String(e && e.message ? e.message : e);
}
process.stdout.write(JSON.stringify(out) + "\n");
