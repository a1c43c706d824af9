// An offline demo agent: its model is `scripted/assistant`, which answers from
// assistant.script.json next to this file, so it runs with no API key.
// Try: "what's the weather in Paris?" (a server tool inside the turn) and
// "please refund order ord_42" (a tool that waits for a human decision).
import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'assistant',
  model: 'scripted/assistant',
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
      needsApproval: {
        description: ({ orderId, amount }: { orderId: string; amount: number }) => `Refund order ${orderId} for ${amount}`,
        allowedDecisions: ['approve', 'reject', 'edit'],
      },
      async execute({ orderId, amount }: { orderId: string; amount: number }, ctx) {
        // The thread and call ids make a natural idempotency key for a payment
        // API: a resumed run never repeats a call whose result is stored, and
        // the key makes a retry after a crash harmless too.
        return { refunded: amount, orderId, idempotencyKey: `${ctx.threadId}:${ctx.toolCallId}` };
      },
    }),
  },
  editableState: { draft: { type: 'string' } },
});
