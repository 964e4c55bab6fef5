/** Chat Completions and Responses replies in the shape the OpenAI API returns them, for the fake provider. */
import type { Reply } from '../support/fake-provider.js';

export function completion(message: Record<string, unknown>, finish: string) {
  return {
    id: 'chatcmpl_1',
    object: 'chat.completion',
    created: 1764547200,
    model: 'gpt-test',
    choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
    usage: { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 },
  };
}

export function chat(mode: 'tool' | 'structured', text: string, finish: string): Reply {
  return {
    body: completion(
      mode === 'tool'
        ? {
            role: 'assistant',
            content: null,
            refusal: null,
            tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'submit_handoff', arguments: text } }],
          }
        : { role: 'assistant', content: text, refusal: null },
      finish,
    ),
  };
}

/** A Responses API reply with `output` (its status, and the reason when incomplete). */
export function response(output: unknown[], status = 'completed', reason?: string): Reply {
  return {
    body: {
      id: 'resp_1',
      object: 'response',
      created_at: 1764547200,
      model: 'gpt-test',
      status,
      incomplete_details: reason ? { reason } : null,
      output,
      usage: { input_tokens: 10, output_tokens: 20, total_tokens: 30 },
    },
  };
}

/** A Responses output item: one call of `submit_handoff` with `args` (its JSON text). */
export const functionCall = (args: string) => ({
  type: 'function_call',
  id: 'fc_1',
  call_id: 'call_1',
  name: 'submit_handoff',
  arguments: args,
  status: 'completed',
});
