// The Playwright tests' agent (tests/studio/studio.mjs): its model is
// `openai/test-model`, the mock OpenAI upstream the Go test starts
// (OPENAI_BASE_URL), which answers from mock-script.json. Its refund pays
// through EFFECTS_URL, the test's counter of side effects, so the test sees
// how often the approved call really ran.
import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'shop',
  model: 'openai/test-model',
  instructions: 'You are the shop assistant of the Studio tests.',
  env: ['EFFECTS_URL'],
  tools: {
    get_weather: tool({
      description: 'Current weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
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
      async execute(args: { orderId: string; amount: number }, ctx) {
        const res = await ctx.fetch(ctx.env.EFFECTS_URL + '/refund', {
          method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': ctx.idempotencyKey },
          body: JSON.stringify({ ...args, threadId: ctx.threadId }),
        });
        return await res.json();
      },
    }),
    set_draft: tool({
      description: 'Save the draft in the shared state',
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      async execute({ text }: { text: string }, ctx) {
        ctx.state.draft = text;
        return { ok: true };
      },
    }),
  },
  editableState: { draft: { type: 'string' } },
});
