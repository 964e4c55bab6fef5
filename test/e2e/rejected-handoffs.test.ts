/**
 * Issue 3, item 4: a model answer that is empty, invalid, oversized or truncated publishes nothing.
 * The transcript stays append-only, the Harness keeps its context, and the previous compaction is
 * still the one resume returns — also after a restart.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LedgerError } from '../../src/errors.js';
import type { ModelResponse } from '../../src/index.js';
import {
  answer,
  compactionAnswer,
  createWorld,
  reply,
  replyFromHandoff,
  request,
  restart,
  sampleSummary,
  scriptedModel,
  SESSION,
  startSession,
  submitHandoff,
  type RunningSession,
  type World,
} from '../support/harness/index.js';

const MAX_SUMMARY_BYTES = 2048;
const scope = { principal: 'alice', session: SESSION };

let world: World;
let session: RunningSession;
beforeEach(async () => {
  world = await createWorld();
  // A first compaction, so there is a previous one that must survive every rejected answer.
  const model = scriptedModel([reply(answer(1)), submitHandoff(sampleSummary())]);
  session = await startSession(world, { model, ledgerOptions: { maxSummaryBytes: MAX_SUMMARY_BYTES } });
  await session.harness.send(request(1));
  await session.harness.command('/compact');
  model.push(reply(answer(2)));
  await session.harness.send(request(2));
});
afterEach(async () => {
  await session.ledger?.close();
  await world.cleanup();
});

const toolInput = (input: unknown, finishReason: ModelResponse['finishReason'] = 'tool_calls'): ModelResponse => ({
  finishReason,
  toolCalls: [{ id: 'call_bad', name: 'submit_handoff', input }],
});

const cases: Array<[string, ModelResponse, LedgerError['code']]> = [
  ['an empty answer', { finishReason: 'stop', text: '' }, 'SUMMARY_EMPTY'],
  ['an answer with no text and no tool call', { finishReason: 'stop' }, 'SUMMARY_EMPTY'],
  ['a summary with blank task and state', toolInput({ task: ' ', state: '', nextSteps: [] }), 'SUMMARY_EMPTY'],
  ['prose instead of JSON', { finishReason: 'stop', text: 'Sure! We were adding retries.' }, 'SUMMARY_INVALID'],
  ['a summary missing its state', toolInput({ task: 'Add retry', nextSteps: [] }), 'SUMMARY_INVALID'],
  ['a summary with an unknown field', toolInput({ ...sampleSummary(), mood: 'great' }), 'SUMMARY_INVALID'],
  ['a tool input that is not JSON', toolInput('{"task": "Add retry", '), 'SUMMARY_INVALID'],
  [
    'a file write instead of submit_handoff',
    {
      finishReason: 'tool_calls',
      toolCalls: [{ id: 'c', name: 'write_file', input: { path: 'HANDOFF.md', content: '#' } }],
    },
    'SUMMARY_INVALID',
  ],
  ['an oversized summary', toolInput(sampleSummary({ notes: 'x'.repeat(MAX_SUMMARY_BYTES) })), 'SUMMARY_TOO_LARGE'],
  [
    'a truncated answer (finish reason length)',
    { finishReason: 'length', text: '{"task":"Add retry with backoff","state":"Retry loop wri' },
    'SUMMARY_INCOMPLETE',
  ],
  ['a truncated tool call that still parses', toolInput(sampleSummary(), 'length'), 'SUMMARY_INCOMPLETE'],
  ['a summary flagged incomplete', toolInput(sampleSummary({ incomplete: true })), 'SUMMARY_INCOMPLETE'],
];

describe('rejected compaction answers', () => {
  it.each(cases)('publish nothing for %s', async (_name, response, code) => {
    const { harness, ledger, transcript, model } = session;
    const before = await ledger!.resume(scope);
    const historyBefore = await ledger!.history(scope);
    const transcriptBefore = await transcript.bytes();
    const contextBefore = harness.context();
    const callsBefore = harness.fileTool.calls.length;

    model.push(compactionAnswer(response));
    const err = await harness.command('/compact').catch((e: unknown) => e);

    expect(err).toBeInstanceOf(LedgerError);
    expect((err as LedgerError).code).toBe(code);
    expect(await ledger!.history(scope)).toEqual(historyBefore);
    const after = await ledger!.resume(scope);
    expect(after?.id).toBe(before?.id);
    expect(after?.summary).toEqual(sampleSummary());
    expect(harness.context()).toEqual(contextBefore);
    expect(harness.fileTool.calls.length).toBe(callsBefore);
    expect((await transcript.bytes()).equals(transcriptBefore)).toBe(true);

    // The session goes on: the transcript only grows, and the old handoff is still in context.
    model.push(replyFromHandoff((seen) => `Still on: ${seen.task}`));
    expect((await harness.send('Go on')).answer).toBe(`Still on: ${sampleSummary().task}`);
    const grown = await transcript.bytes();
    expect(grown.length).toBeGreaterThan(transcriptBefore.length);
    expect(grown.subarray(0, transcriptBefore.length).equals(transcriptBefore)).toBe(true);

    // And after a restart the previous compaction is still what resume returns.
    const model2 = scriptedModel([replyFromHandoff((seen) => `Next: ${seen.nextSteps[0]}`)]);
    session = await restart(world, session, { model: model2, ledgerOptions: { maxSummaryBytes: MAX_SUMMARY_BYTES } });
    const resumed = await session.harness.resume();
    expect(resumed?.id).toBe(before?.id);
    expect(resumed?.seq).toBe(0);
    expect((await session.harness.send('Next?')).answer).toBe(`Next: ${sampleSummary().nextSteps[0]}`);
  });

  it('keep the turn and the context when an automatic compaction is truncated, and publish on the next good answer', async () => {
    const { harness, ledger, transcript, model } = session;
    for (let n = 3; n <= 5; n++) model.push(reply(answer(n)));
    for (let n = 3; n <= 4; n++) expect((await harness.send(request(n))).compacted).toBeUndefined();
    expect(harness.usedTokens()).toBeLessThan(700);
    const transcriptBefore = await transcript.bytes();
    model.push(compactionAnswer(toolInput(sampleSummary(), 'length')));

    const turn = await harness.send(request(5));

    expect(turn.answer).toBe(answer(5));
    expect((turn.compactionError as LedgerError).code).toBe('SUMMARY_INCOMPLETE');
    expect((await ledger!.history(scope)).length).toBe(1);
    const grown = await transcript.bytes();
    expect(grown.subarray(0, transcriptBefore.length).equals(transcriptBefore)).toBe(true);
    expect(harness.usedTokens()).toBeGreaterThanOrEqual(700);

    const fresh = sampleSummary({ state: 'Jitter added' });
    model.push(reply(answer(6)), submitHandoff(fresh));
    expect((await harness.send(request(6))).compacted).toEqual({ trigger: 'auto', seq: 1 });
    expect((await ledger!.resume(scope))?.summary).toEqual(fresh);
  });

  it('publish nothing when the compaction is cancelled while the model is answering', async () => {
    const { harness, ledger, model } = session;
    const controller = new AbortController();
    model.push({
      expect: 'compaction',
      respond: () => {
        controller.abort(new Error('user pressed Esc'));
        return {
          finishReason: 'tool_calls',
          toolCalls: [{ id: 'c', name: 'submit_handoff', input: sampleSummary({ state: 'never' }) }],
        };
      },
    });
    const err = await harness.compactNow('manual', controller.signal).catch((e: unknown) => e);
    expect((err as LedgerError).code).toBe('CANCELLED');
    expect((await ledger!.history(scope)).length).toBe(1);
    expect((await ledger!.resume(scope))?.summary).toEqual(sampleSummary());
  });
});
