import { defineDeepAgent } from 'stackbone';
import { z } from 'zod';

export default defineDeepAgent({
  name: 'report.v1',
  model: 'openai/gpt-4o-mini',
  output: z.object({
    summary: z.string().min(1),
    score: z.number().int().max(10),
  }),
});
