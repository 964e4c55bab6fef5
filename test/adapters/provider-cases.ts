/**
 * The cases every model adapter must pass, run against a real SDK and the fake provider: a good answer
 * publishes; a truncated, refused, empty, schema-violating or failed answer gives its code and
 * publishes nothing; the request carries the dialect's schema and no other tool.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import type { Ledger } from '../../src/ledger/ledger.js';
import { compact } from '../../src/compaction/compact.js';
import type { ModelAdapter } from '../../src/compaction/model.js';
import type { CompactionMode } from '../../src/compaction/tool.js';
import type { JsonSchemaObject } from '../../src/summary/summary.js';
import { startFakeProvider, type FakeProvider, type RecordedRequest, type Reply } from '../support/fake-provider.js';

export const summary = {
  task: 'Add retries to the uploader',
  state: 'Backoff written; tests pending',
  nextSteps: ['Write the retry tests', 'Update the changelog'],
  files: [{ path: 'src/upload/retry.ts', note: 'new backoff' }, { path: 'src/upload/index.ts' }],
};

/** The same summary as a strict-mode model writes it: every optional field present, null when absent. */
export const strictSummary = {
  ...summary,
  decisions: null,
  openQuestions: null,
  files: [
    { path: 'src/upload/retry.ts', note: 'new backoff' },
    { path: 'src/upload/index.ts', note: null },
  ],
  notes: null,
  incomplete: null,
};

export interface ProviderDialect {
  /** Builds the adapter with the real SDK pointed at the fake provider. */
  adapter(url: string): ModelAdapter;
  mode: CompactionMode;
  /** The summary as this dialect's model writes it. */
  answer: Record<string, unknown>;
  good(answer: unknown): Reply;
  /** The answer cut off at the output-token limit (with the provider's own finish reason). */
  truncated(answer: unknown): Reply;
  /**
   * The answer, whole and valid, stopped or withheld by the provider's content filter (with its own finish reason);
   * absent for an API that has no such reason (Anthropic's only one, `refusal`, is the model declining).
   */
  filtered?(answer: unknown): Reply;
  refusal(): Reply;
  /** The code a refusal gets: MODEL_REFUSED unless the SDK reports it as something else (the ai SDK: a content filter). */
  refusalCode?: 'MODEL_REFUSED' | 'SUMMARY_INCOMPLETE';
  empty(): Reply;
  httpError(): Reply;
  /** The summary schema the request carried, and the names of the tools it offered. */
  sentSchema(request: RecordedRequest): unknown;
  sentTools(request: RecordedRequest): string[];
  expectedSchema: JsonSchemaObject;
  /** The tools the request offers; by default `submit_handoff` in tool mode and none in structured mode. */
  expectedTools?: string[];
}

export function providerCases(name: string, dialect: ProviderDialect): void {
  describe(name, () => {
    const scope = { principal: 'alice', session: 's1', run: 'r1' };
    let provider: FakeProvider;
    let base: string;
    let ledger: Ledger;
    beforeAll(async () => {
      provider = await startFakeProvider();
    });
    afterAll(async () => {
      await provider.close();
    });
    beforeEach(async () => {
      provider.requests.length = 0;
      base = await mkdtemp(join(tmpdir(), 'handoff-adapter-'));
      ledger = await openLedger({ root: join(base, 'store'), host: 'h1', onNotice: () => {} });
    });
    afterEach(async () => {
      await ledger.close();
      await rm(base, { recursive: true, force: true });
    });

    /** Compacts `transcript` through this dialect's adapter against the fake provider. */
    const compactThrough = (transcript: Parameters<typeof compact>[0]['transcript']) =>
      compact({
        ledger,
        scope,
        model: dialect.adapter(provider.url),
        transcript,
        mode: dialect.mode,
        maxOutputTokens: 2000,
      });
    const run = (reply: Reply) => {
      provider.script(reply);
      return compactThrough([
        { role: 'system', content: 'You are a coding assistant.' },
        { role: 'user', content: 'add retries to the uploader' },
      ]);
    };

    const refusedWith = async (reply: Reply, code: string) => {
      const err = await run(reply).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code });
      expect(await ledger.resume(scope)).toBeUndefined();
      expect(provider.requests).toHaveLength(1);
      return err as Error;
    };

    it('publishes a good answer as the summary, strict nulls removed', async () => {
      const { summary: published, receipt } = await run(dialect.good(dialect.answer));
      expect(published).toEqual(summary);
      const resumed = await ledger.resume(scope);
      expect(resumed?.id).toBe(receipt.id);
      expect(resumed?.summary).toEqual(summary);
    });

    it("sends the dialect's summary schema and no tool but submit_handoff", async () => {
      await run(dialect.good(dialect.answer));
      const [request] = provider.requests;
      expect(dialect.sentSchema(request!)).toEqual(dialect.expectedSchema);
      expect(dialect.sentTools(request!)).toEqual(
        dialect.expectedTools ?? (dialect.mode === 'tool' ? ['submit_handoff'] : []),
      );
      expect(JSON.stringify(request!.body)).not.toMatch(/write_file|"path":"\//);
    });

    it('ends its instruction with the way this request asks: call submit_handoff when it is offered, else JSON', async () => {
      await run(dialect.good(dialect.answer));
      const [request] = provider.requests;
      const asked = dialect.sentTools(request!).includes('submit_handoff') ? 'tool' : 'structured';
      const body = JSON.stringify(request!.body);
      const how = {
        tool: 'Call submit_handoff exactly once with the summary.',
        structured: 'Answer only with the summary as JSON matching the response schema.',
      };
      expect(body, asked).toContain(how[asked]);
      expect(body, asked).not.toContain(how[asked === 'tool' ? 'structured' : 'tool']);
    });

    it('refuses a truncated answer with SUMMARY_INCOMPLETE', async () => {
      await refusedWith(
        dialect.truncated({ task: summary.task, state: summary.state, nextSteps: [] }),
        'SUMMARY_INCOMPLETE',
      );
    });

    const filtered = dialect.filtered;
    if (filtered) {
      it("refuses an answer the provider's content filter stopped with SUMMARY_INCOMPLETE, however whole it looks", async () => {
        await refusedWith(filtered(dialect.answer), 'SUMMARY_INCOMPLETE');
      });
    }

    const refusalCode = dialect.refusalCode ?? 'MODEL_REFUSED';
    it(`refuses a refusal with ${refusalCode}`, async () => {
      await refusedWith(dialect.refusal(), refusalCode);
    });

    it('refuses an empty answer with SUMMARY_EMPTY', async () => {
      await refusedWith(dialect.empty(), 'SUMMARY_EMPTY');
    });

    it('refuses an answer that breaks the schema with SUMMARY_INVALID', async () => {
      const bad = { ...dialect.answer, files: [{ path: '../secret', note: 'x' }] };
      const err = await refusedWith(dialect.good(bad), 'SUMMARY_INVALID');
      expect(err.message).toMatch(/files/);
    });

    it('refuses a summary encoded twice (a JSON string of the summary) with SUMMARY_INVALID', async () => {
      await refusedWith(dialect.good(JSON.stringify(dialect.answer)), 'SUMMARY_INVALID');
    });

    it('compacts a transcript that ends in a tool call not yet answered: the request answers it', async () => {
      provider.script(dialect.good(dialect.answer));
      const { summary: published } = await compact({
        ledger,
        scope,
        model: dialect.adapter(provider.url),
        transcript: [
          { role: 'user', content: 'add retries to the uploader' },
          { role: 'assistant', content: '', toolCalls: [{ id: 'call_9', name: 'read_file', input: { path: 'a.ts' } }] },
        ],
        mode: dialect.mode,
      });
      expect(published).toEqual(summary);
      expect(JSON.stringify(provider.requests[0]!.body)).toContain('Not run: the context was compacted');
    });

    it('refuses an empty transcript with INVALID_ARGUMENT, sending nothing to the provider', async () => {
      // Nothing scripted: the provider is shared by the cases, and a reply left unread would answer the next one.
      const err = await compact({
        ledger,
        scope,
        model: dialect.adapter(provider.url),
        transcript: [],
        mode: dialect.mode,
      }).catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
      expect(provider.requests).toEqual([]);
      expect(await ledger.resume(scope)).toBeUndefined();
    });

    it('refuses a transcript of only system messages with INVALID_ARGUMENT, as an empty one, sending nothing to the provider', async () => {
      // Nothing scripted, as above: a reply left unread would answer the next case.
      const err = await compactThrough([
        { role: 'system', content: 'You are a coding assistant.' },
        { role: 'system', content: 'Tools: read_file only.' },
      ]).catch((e: unknown) => e);
      expect(err).toMatchObject({
        name: 'LedgerError',
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/only system messages: there is nothing to summarize/),
      });
      expect(provider.requests).toEqual([]);
      expect(await ledger.resume(scope)).toBeUndefined();
    });

    it("refuses a request that is not a compaction (a Harness's turn) with INVALID_ARGUMENT, sending nothing", async () => {
      const readFile = {
        name: 'read_file',
        description: 'read a file',
        inputSchema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
      };
      const model = dialect.adapter(provider.url);
      for (const purpose of ['turn', undefined, 'COMPACTION']) {
        const err = await model({
          purpose: purpose as 'turn',
          messages: [{ role: 'user', content: 'read a.ts' }],
          tools: [readFile],
          toolChoice: 'auto',
        }).catch((e: unknown) => e);
        expect(err).toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
        expect((err as Error).message).toMatch(/compaction requests only/);
      }
      expect(provider.requests).toEqual([]);
    });

    it('turns an HTTP error into MODEL_FAILED with the SDK error as cause', async () => {
      const err = await refusedWith(dialect.httpError(), 'MODEL_FAILED');
      expect(err.cause).toBeInstanceOf(Error);
      expect(err.message).toMatch(/no such model/);
    });
  });
}
