// The Playwright tests' agent with a fallback model (tests/studio/studio.mjs,
// PickFallbackModel): two scripted models that answer alike but say which
// one they are, so a run on the model picked in the playground shows it.
import { defineDeepAgent } from 'stackbone';

export default defineDeepAgent({
  name: 'picker',
  model: ['scripted/picker-primary', 'scripted/picker-backup'],
  instructions: 'You answer from the model the playground picked.',
});
