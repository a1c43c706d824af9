// Your first agent. It runs offline: the model `scripted/assistant` answers
// from assistant.script.json next to this file, so no API key is needed.
// Try "what's the weather in Paris?" (a tool that runs inside the turn) and
// "please refund order ord_42" (a tool that waits for a human decision).
import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'assistant',
  model: 'scripted/assistant',
  // A real model is one line away (set OPENAI_API_KEY, see .env.example):
  // model: 'openai/gpt-4o-mini',
  instructions: 'You are a helpful assistant for a small web shop.',
  tools: {
    get_weather: tool({
      description: 'Current weather for a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
      },
      async execute({ city }: { city: string }) {
        return { city, temp_c: 21, sky: 'sunny' };
      },
    }),
    refund: tool({
      description: 'Refund an order',
      parameters: {
        type: 'object',
        properties: { orderId: { type: 'string' }, amount: { type: 'number' } },
        required: ['orderId', 'amount'],
      },
      // In a conversation (x-stackbone-session, an AG-UI thread) the call waits
      // for a human: `stackbone hitl list`, then `stackbone hitl approve ID --yes`.
      needsApproval: {
        description: ({ orderId, amount }: { orderId: string; amount: number }) => `Refund order ${orderId} for ${amount}`,
        allowedDecisions: ['approve', 'reject', 'edit'],
      },
      async execute({ orderId, amount }: { orderId: string; amount: number }, ctx) {
        // ctx.idempotencyKey is the same for every attempt of this call: send it
        // to a payment API so a retry after a crash cannot refund twice.
        return { refunded: amount, orderId, idempotencyKey: ctx.idempotencyKey };
      },
    }),
  },
  // The only state keys a client (an AG-UI frontend, Studio) may write.
  editableState: { draft: { type: 'string' } },
});
