/** The Gemini adapter with the real `@google/genai` SDK against the fake provider: JSON output under responseJsonSchema. */
import { GoogleGenAI } from '@google/genai';
import { describe, expect, it } from 'vitest';
import { geminiAdapter } from '../../src/adapters/gemini.js';
import { summarySchemaFor } from '../../src/summary/schema-forms.js';
import type { ModelMessage } from '../../src/compaction/model.js';
import type { Reply } from '../support/fake-provider.js';
import { providerCases, summary } from './provider-cases.js';

function generated(text: string | undefined, finishReason: string): Reply {
  return {
    body: {
      candidates: [
        {
          content: { role: 'model', parts: text === undefined ? [] : [{ text }] },
          finishReason,
          index: 0,
        },
      ],
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 20, totalTokenCount: 30 },
      modelVersion: 'gemini-test',
    },
  };
}

for (const mode of ['structured', 'tool'] as const) {
  providerCases(`geminiAdapter (${mode} mode: responseJsonSchema)`, {
    adapter: (url) =>
      geminiAdapter({
        client: new GoogleGenAI({ apiKey: 'test-key', httpOptions: { baseUrl: url, retryOptions: { attempts: 1 } } }),
        model: 'gemini-test',
      }),
    mode,
    answer: summary,
    good: (a) => generated(JSON.stringify(a), 'STOP'),
    truncated: (a) => generated(JSON.stringify(a).slice(0, 40), 'MAX_TOKENS'),
    refusal: () => ({ body: { promptFeedback: { blockReason: 'PROHIBITED_CONTENT' }, modelVersion: 'gemini-test' } }),
    empty: () => generated(undefined, 'STOP'),
    httpError: () => ({ status: 404, body: { error: { code: 404, message: 'no such model', status: 'NOT_FOUND' } } }),
    sentSchema: (r) => {
      expect(r.path).toBe('/v1beta/models/gemini-test:generateContent');
      expect(r.body.systemInstruction).toMatchObject({ parts: [{ text: 'You are a coding assistant.' }] });
      const config = r.body.generationConfig as Record<string, unknown>;
      // Sent as JSON Schema, not converted to the OpenAPI Schema that drops additionalProperties.
      expect(config).not.toHaveProperty('responseSchema');
      expect(config.responseMimeType).toBe('application/json');
      return config.responseJsonSchema;
    },
    sentTools: (r) => ((r.body.tools as unknown[] | undefined) ?? []).map(() => 'a tool'),
    expectedSchema: summarySchemaFor('gemini'),
    expectedTools: [],
  });
}

describe('geminiAdapter requests', () => {
  type Contents = Array<{ role: string; parts: Array<{ text?: string }> }>;

  /** The `contents` the adapter sends for a structured compaction request of `messages` (to the fake provider). */
  async function sentContents(messages: ModelMessage[]): Promise<Contents> {
    const { startFakeProvider } = await import('../support/fake-provider.js');
    const { compactionRequest } = await import('../../src/compaction/tool.js');
    const provider = await startFakeProvider();
    try {
      provider.script(generated(JSON.stringify(summary), 'STOP'));
      const model = geminiAdapter({
        client: new GoogleGenAI({
          apiKey: 'k',
          httpOptions: { baseUrl: provider.url, retryOptions: { attempts: 1 } },
        }),
        model: 'gemini-test',
      });
      await model(compactionRequest({ messages, mode: 'structured' }));
      return provider.requests[0]!.body.contents as Contents;
    } finally {
      await provider.close();
    }
  }

  it('sends no turn that says nothing (an empty text part is refused by the API)', async () => {
    const contents = await sentContents([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: '' },
      { role: 'user', content: 'go on' },
    ]);
    expect(contents.flatMap((c) => c.parts).some((p) => (p.text ?? '').trim() === '')).toBe(false);
    // The turns left around the empty one, and the instructions, are one user content of three parts.
    expect(contents.map((c) => [c.role, c.parts.length])).toEqual([['user', 3]]);
    expect(contents[0]!.parts.slice(0, 2)).toEqual([{ text: 'hi' }, { text: 'go on' }]);
  });

  it('sends turns that alternate: parallel tool results and the user turn after them in one content', async () => {
    const calls = [
      { id: 'a', name: 'read', input: { path: 'a' } },
      { id: 'b', name: 'read', input: { path: 'b' } },
    ];
    const contents = await sentContents([
      { role: 'user', content: 'read a and b' },
      { role: 'assistant', content: '', toolCalls: calls },
      { role: 'tool', toolCallId: 'a', content: 'A' },
      { role: 'tool', toolCallId: 'b', content: 'B' },
      { role: 'assistant', content: 'Both read.' },
      { role: 'assistant', content: 'Next: c.' },
    ]);
    expect(contents.map((c) => c.role)).toEqual(['user', 'model', 'user', 'model', 'user']);
    expect(contents[2]!.parts).toEqual([{ text: 'Tool result (a): A' }, { text: 'Tool result (b): B' }]);
    expect(contents[3]!.parts).toEqual([{ text: 'Both read.' }, { text: 'Next: c.' }]);
  });
});
