import { defineDeepAgent, tool } from 'stackbone';
import * as z from 'zod/mini';

const Lookup = z.object({
  sku: z.string().check(z.minLength(3)),
  qty: z.optional(z.number()),
});

export default defineDeepAgent({
  name: 'mini',
  model: 'anthropic/claude-sonnet-4-5',
  tools: {
    lookup: tool({
      description: 'Look up stock',
      parameters: Lookup,
      jsonSchema: z.toJSONSchema(Lookup),
      execute: ({ sku, qty }) => `${sku} x${qty ?? 1}`,
    }),
  },
});
