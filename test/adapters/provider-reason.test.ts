/**
 * An answer that did not finish is SUMMARY_INCOMPLETE whatever the provider called it; the message names the
 * provider's own reason (`providerReason`) beside the library's, so a Harness developer can tell `pause_turn` from a
 * `MALFORMED_FUNCTION_CALL` or a Responses status `cancelled` (all `other`), each through the real SDK against the
 * fake provider.
 */
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { describe, expect, it } from 'vitest';
import { anthropicAdapter } from '../../src/adapters/anthropic.js';
import { geminiAdapter } from '../../src/adapters/gemini.js';
import { openaiAdapter } from '../../src/adapters/openai.js';
import { aiSdkAdapter } from '../../src/adapters/ai-sdk.js';
import type { ModelAdapter } from '../../src/compaction/model.js';
import { compactionRequest, extractSummary, type CompactionMode } from '../../src/compaction/tool.js';
import { startFakeProvider, type Reply } from '../support/fake-provider.js';
import { chat, functionCall, response } from './openai-replies.js';
import { strictSummary, summary } from './provider-cases.js';

/** The SUMMARY_INCOMPLETE message for `reply` through the adapter `make` builds against the fake provider. */
async function incompleteMessage(make: (url: string) => ModelAdapter, reply: Reply, mode: CompactionMode = 'tool') {
  const provider = await startFakeProvider();
  try {
    provider.script(reply);
    const answer = await make(provider.url)(compactionRequest({ messages: [{ role: 'user', content: 'hi' }], mode }));
    let err: unknown;
    try {
      extractSummary(answer);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
    return (err as Error).message;
  } finally {
    await provider.close();
  }
}

const openai = (api: 'responses' | 'chat') => (url: string) =>
  openaiAdapter({ client: new OpenAI({ apiKey: 'k', baseURL: `${url}/v1`, maxRetries: 0 }), model: 'gpt-test', api });
const anthropic = (url: string) =>
  anthropicAdapter({ client: new Anthropic({ apiKey: 'k', baseURL: url, maxRetries: 0 }), model: 'claude-test' });
const gemini = (url: string) =>
  geminiAdapter({
    client: new GoogleGenAI({ apiKey: 'k', httpOptions: { baseUrl: url, retryOptions: { attempts: 1 } } }),
    model: 'gemini-test',
  });
const aiSdk = (url: string) =>
  aiSdkAdapter({
    model: createOpenAI({ apiKey: 'k', baseURL: `${url}/v1` }).chat('gpt-test'),
    schemaForm: 'openai-strict',
    maxRetries: 0,
  });

const args = JSON.stringify(strictSummary);

describe("SUMMARY_INCOMPLETE names the provider's own reason", () => {
  it('openaiAdapter, Responses: the status, its incomplete_details.reason, or the item not finished', async () => {
    expect(await incompleteMessage(openai('responses'), response([functionCall(args)], 'cancelled'))).toBe(
      `the model did not finish its summary (finish reason other, the provider's "cancelled")`,
    );
    expect(
      await incompleteMessage(openai('responses'), response([functionCall(args)], 'incomplete', 'max_output_tokens')),
    ).toBe(`the model did not finish its summary (finish reason length, the provider's "max_output_tokens")`);
    expect(
      await incompleteMessage(openai('responses'), response([{ ...functionCall(args), status: 'in_progress' }])),
    ).toBe(`the model did not finish its summary (finish reason other, the provider's "function_call in_progress")`);
  });

  it('openaiAdapter, Chat Completions: a finish_reason the table does not list (an OpenAI-compatible server)', async () => {
    expect(await incompleteMessage(openai('chat'), chat('tool', args, 'insufficient_system_resource'))).toBe(
      `the model did not finish its summary (finish reason other, the provider's "insufficient_system_resource")`,
    );
  });

  it('anthropicAdapter: pause_turn', async () => {
    const reply: Reply = {
      body: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'claude-test',
        content: [{ type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: summary }],
        stop_reason: 'pause_turn',
        stop_sequence: null,
        usage: { input_tokens: 10, output_tokens: 20 },
      },
    };
    expect(await incompleteMessage(anthropic, reply)).toBe(
      `the model did not finish its summary (finish reason other, the provider's "pause_turn")`,
    );
  });

  it('geminiAdapter: MALFORMED_FUNCTION_CALL', async () => {
    const reply: Reply = {
      body: {
        candidates: [
          {
            content: { role: 'model', parts: [{ text: JSON.stringify(summary) }] },
            finishReason: 'MALFORMED_FUNCTION_CALL',
            index: 0,
          },
        ],
        modelVersion: 'gemini-test',
      },
    };
    expect(await incompleteMessage(gemini, reply, 'structured')).toBe(
      `the model did not finish its summary (finish reason other, the provider's "MALFORMED_FUNCTION_CALL")`,
    );
  });

  it("aiSdkAdapter: the SDK's rawFinishReason, in both modes", async () => {
    for (const mode of ['tool', 'structured'] as const) {
      expect(await incompleteMessage(aiSdk, chat(mode, args, 'insufficient_system_resource'), mode), mode).toBe(
        `the model did not finish its summary (finish reason other, the provider's "insufficient_system_resource")`,
      );
    }
  });

  it('quotes it as foreign text: escaped and bounded, the outcome unchanged', () => {
    const hostile = `\u001b]0;owned\u0007\u009b2J\u007f\u202e${'w'.repeat(100_000)}`;
    let err: unknown;
    try {
      extractSummary({ finishReason: 'other', providerReason: hostile, text: JSON.stringify(summary) });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
    const message = (err as Error).message;
    expect(message).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202e]/);
    expect(message.length).toBeLessThan(300);
    expect(message).toContain('\\u001b]0;owned');
  });

  it('names nothing more for a finished answer, nor where the provider gave no reason', () => {
    expect(extractSummary({ finishReason: 'stop', providerReason: 'stop', text: JSON.stringify(summary) })).toEqual(
      summary,
    );
    expect(() => extractSummary({ finishReason: 'length' })).toThrow(
      'the model did not finish its summary (finish reason length)',
    );
  });
});
