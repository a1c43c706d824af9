// The same kind of agent on a real model. Needs OPENAI_API_KEY (and
// optionally OPENAI_BASE_URL for any OpenAI-compatible endpoint).
import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'gpt',
  model: 'openai/gpt-4o-mini',
  instructions: 'You are a concise assistant. Use tools when they help.',
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
  },
});
