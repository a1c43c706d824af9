import { defineDeepAgent, tool } from 'stackbone';
import { z } from 'zod';

const Refund = z.object({
  orderId: z.string().min(1).describe('Order id, e.g. o1'),
  amount: z.number().positive().max(10000),
  reason: z.enum(['damaged', 'late', 'other']).optional(),
});

export default defineDeepAgent({
  name: 'orders',
  model: 'openai/gpt-4o-mini',
  instructions: 'You handle orders.',
  editableState: {
    draft: z.string().max(200),
    note: { type: 'string' },
  },
  tools: {
    refund: tool({
      description: 'Refund an order',
      parameters: Refund,
      needsApproval: {
        when: ({ amount }) => amount > 100,
        description: ({ orderId, amount }) => `Refund order ${orderId} for ${amount.toFixed(2)}`,
      },
      async execute({ orderId, amount, reason }, ctx) {
        return { refunded: amount, orderId, reason: reason ?? null, callId: ctx.toolCallId };
      },
    }),
  },
});
