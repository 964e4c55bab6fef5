/**
 * Token accounting for the fixture: about four characters per token plus a small per-message
 * overhead, deterministic so tests know exactly when the 0.7 threshold is crossed.
 */
import type { ModelMessage } from '../../../src/index.js';

export const MESSAGE_OVERHEAD_TOKENS = 4;

export function countTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export function messageTokens(message: ModelMessage): number {
  const calls = message.toolCalls ? countTokens(JSON.stringify(message.toolCalls)) : 0;
  return MESSAGE_OVERHEAD_TOKENS + countTokens(message.content) + calls;
}

export function contextTokens(messages: readonly ModelMessage[]): number {
  return messages.reduce((sum, m) => sum + messageTokens(m), 0);
}
