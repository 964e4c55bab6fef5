import type { ModelAdapter } from '../../src/index.js';
import { sampleSummary } from './tmp.js';

/**
 * A model that would answer with a valid summary, counting the requests it is sent: a test of a check made before the
 * model (compact's checkPublish) holds `asked` to 0.
 */
export function countingModel(): ModelAdapter & { asked: number } {
  const model = Object.assign(
    async () => {
      model.asked++;
      return {
        finishReason: 'tool_calls' as const,
        toolCalls: [{ id: 'c1', name: 'submit_handoff', input: sampleSummary('from the model') }],
      };
    },
    { asked: 0 },
  );
  return model;
}
