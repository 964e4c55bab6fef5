/**
 * Issue 3, items 1–3: the incident reproduced (legacy path), the fix (the Harness publishes the
 * handoff to the ledger), and the file tool's restrictions, which the fix leaves exactly as they were.
 */
import { access, mkdir, readFile, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import { HANDOFF_CONTEXT_HEADER, SUBMIT_HANDOFF } from '../../src/index.js';
import {
  answer,
  CONTEXT_WINDOW,
  createWorld,
  FileTool,
  FileToolError,
  LegacyCompactionError,
  readFileCall,
  reply,
  replyFromHandoff,
  request,
  restart,
  sampleSummary,
  scriptedModel,
  SESSION,
  snapshotTree,
  startSession,
  submitHandoff,
  writeFileCall,
  writeThenReply,
  type World,
} from '../support/harness/index.js';

let world: World;
beforeEach(async () => {
  world = await createWorld();
});
afterEach(async () => {
  await world.cleanup();
});

const exists = (p: string) =>
  access(p).then(
    () => true,
    () => false,
  );

/** Turn 1 writes a file in the project; turns 2–5 are plain. Turn 5 crosses 0.7 × 1000 tokens. */
function longSessionScript() {
  return [
    ...writeThenReply('notes/plan.md', '# plan\n- add retry\n', answer(1)),
    ...[2, 3, 4, 5].map((n) => reply(answer(n))),
  ];
}

async function runLongSession(harness: Awaited<ReturnType<typeof startSession>>['harness']) {
  const results = [];
  for (let n = 1; n <= 5; n++) results.push(await harness.send(request(n)));
  return results;
}

describe('legacy compaction (the incident)', () => {
  it('is denied outside_allowed_roots and fails with "Compaction did not create" on /compact, leaving transcript and project unchanged', async () => {
    const model = scriptedModel(longSessionScript().slice(0, 5));
    const { harness, transcript } = await startSession(world, { model, ledger: false });
    for (let n = 1; n <= 4; n++) await harness.send(request(n));
    const path = harness.legacyHandoffPath();
    const transcriptBefore = await transcript.bytes();
    const projectBefore = await snapshotTree(world.project);
    const callsBefore = harness.fileTool.calls.length;

    model.push(writeFileCall(path, '# Handoff\nTask: add retry\n'));
    const failure = await harness.command('/compact').catch((err: unknown) => err);

    expect(model.requests.at(-1)?.messages.at(-1)?.content).toContain(`to ${path} using write_file`);
    expect(failure).toBeInstanceOf(LegacyCompactionError);
    expect((failure as Error).message).toBe(`Compaction did not create ${path}`);
    expect(harness.fileTool.calls.slice(callsBefore)).toEqual([
      { op: 'write', path, ok: false, code: 'outside_allowed_roots' },
    ]);
    expect(await exists(path)).toBe(false);
    expect(await transcript.bytes()).toEqual(transcriptBefore);
    expect(await snapshotTree(world.project)).toEqual(projectBefore);
  });

  it('fails the same way when the 0.7 threshold triggers it, and the turn and transcript stand as they were', async () => {
    const model = scriptedModel(longSessionScript());
    const { harness, transcript } = await startSession(world, { model, ledger: false });
    for (let n = 1; n <= 4; n++) await harness.send(request(n));
    const projectBefore = await snapshotTree(world.project);
    const path = harness.legacyHandoffPath();
    model.push(writeFileCall(path, '# Handoff\n'));

    const fifth = await harness.send(request(5));

    expect(fifth.answer).toBe(answer(5));
    expect(fifth.compactionError).toBeInstanceOf(LegacyCompactionError);
    expect((fifth.compactionError as Error).message).toBe(`Compaction did not create ${path}`);
    expect(harness.fileTool.calls.at(-1)).toEqual({ op: 'write', path, ok: false, code: 'outside_allowed_roots' });
    // The transcript holds the five turns and nothing of the failed compaction.
    expect(transcript.messages().at(-1)).toEqual({ role: 'assistant', content: answer(5) });
    expect(transcript.length).toBe(12);
    expect(await snapshotTree(world.project)).toEqual(projectBefore);
    expect(harness.handoff).toBeUndefined();
  });

  it('cannot resume either: reading the handoff back is denied too', async () => {
    const model = scriptedModel([]);
    const { harness } = await startSession(world, { model, ledger: false });
    model.push(readFileCall(harness.legacyHandoffPath()));
    const results = await harness.legacyResume();
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ ok: false, code: 'outside_allowed_roots' });
  });
});

describe('compaction through the ledger (the fix)', () => {
  it('compacts automatically at 0.7 for the restricted account, and resumes after a restart without any file-tool call', async () => {
    const permissionsBefore = structuredClone(world.account.allowedRoots);
    const model = scriptedModel([...longSessionScript(), submitHandoff(sampleSummary())]);
    const first = await startSession(world, { model });

    const results = await runLongSession(first.harness);

    // Below the threshold nothing compacts; the turn that crosses it compacts, once.
    expect(results.slice(0, 4).map((r) => r.compacted)).toEqual([undefined, undefined, undefined, undefined]);
    expect(results[4]?.compacted).toEqual({ trigger: 'auto', seq: 0 });
    expect(first.harness.compactions[0]?.usedTokens).toBeGreaterThanOrEqual(0.7 * CONTEXT_WINDOW);
    expect(model.pending()).toBe(0);
    // The compaction request offers only submit_handoff: no file tool to reach for.
    const compactionRequest = model.requests.at(-1);
    expect(compactionRequest?.purpose).toBe('compaction');
    expect(compactionRequest?.tools?.map((t) => t.name)).toEqual([SUBMIT_HANDOFF]);
    // The only file-tool call of the whole session is the model's own project write in turn 1.
    expect(first.harness.fileTool.calls).toEqual([{ op: 'write', path: 'notes/plan.md', ok: true }]);
    expect(await readFile(join(world.project, 'notes/plan.md'), 'utf8')).toBe('# plan\n- add retry\n');
    const compactedContext = first.harness.context();
    expect(compactedContext).toHaveLength(1);
    const published = await first.ledger!.resume({ principal: 'alice', session: SESSION });

    const model2 = scriptedModel([replyFromHandoff((seen) => `Continuing with: ${seen.nextSteps[0]}`)]);
    const second = await restart(world, first, { model: model2 });
    const resumed = await second.harness.resume();

    expect(resumed?.summary).toEqual(sampleSummary());
    expect(resumed?.id).toBe(published?.id);
    expect(resumed?.manifest.covers).toEqual({
      transcriptThrough: 12,
      transcriptDigest: await second.transcript.digest(),
    });
    expect(second.harness.context()).toEqual(compactedContext);
    const next = await second.harness.send('What should we do next?');
    expect(next.answer).toBe('Continuing with: Add full jitter to the backoff delay');
    expect(model2.requests[0]?.messages[0]?.content.startsWith(HANDOFF_CONTEXT_HEADER)).toBe(true);
    expect(second.harness.fileTool.calls).toEqual([]);
    expect(world.account.allowedRoots).toEqual(permissionsBefore);
    await second.ledger!.close();
  });

  it('compacts on a manual /compact below the threshold, and resumes after a restart without any file-tool call', async () => {
    const permissionsBefore = structuredClone(world.account.allowedRoots);
    const summary = sampleSummary({
      task: 'Rename the config loader',
      nextSteps: ['Update the imports in src/cli/main.ts'],
    });
    const model = scriptedModel([reply(answer(1)), reply(answer(2)), submitHandoff(summary)]);
    const first = await startSession(world, { model });
    await first.harness.send(request(1));
    await first.harness.send(request(2));
    expect(first.harness.usedTokens()).toBeLessThan(0.7 * CONTEXT_WINDOW);

    expect(await first.harness.command('/compact')).toEqual({ seq: 0 });
    expect(first.harness.compactions.map((c) => c.trigger)).toEqual(['manual']);

    const model2 = scriptedModel([replyFromHandoff((seen) => `Next: ${seen.nextSteps[0]} (task: ${seen.task})`)]);
    const second = await restart(world, first, { model: model2 });
    const resumed = await second.harness.resume();
    expect(resumed?.summary).toEqual(summary);
    expect(resumed?.seq).toBe(0);
    const next = await second.harness.send('Where were we?');
    expect(next.answer).toBe('Next: Update the imports in src/cli/main.ts (task: Rename the config loader)');
    expect(second.harness.fileTool.calls).toEqual([]);
    expect(world.account.allowedRoots).toEqual(permissionsBefore);
    await second.ledger!.close();
  });

  it('chains a manual compaction after an automatic one, both signed into the session, with structured output', async () => {
    const later = sampleSummary({
      state: 'Jitter added; docs pending',
      nextSteps: ['Document the retry options in README.md'],
    });
    const model = scriptedModel([...longSessionScript(), submitHandoff(sampleSummary())]);
    const first = await startSession(world, { model });
    await runLongSession(first.harness);

    const model2 = scriptedModel([
      reply(answer(6)),
      { expect: 'compaction', respond: { finishReason: 'stop', text: JSON.stringify(later) } },
    ]);
    const second = await restart(world, first, { model: model2, mode: 'structured' });
    await second.harness.resume();
    await second.harness.send(request(6));
    expect(await second.harness.command('/compact')).toEqual({ seq: 1 });
    expect(model2.requests.at(-1)?.responseFormat?.schema).toBeDefined();
    // What the manual compaction summarized started with the first handoff.
    expect(model2.requests.at(-1)?.messages[0]?.content.startsWith(HANDOFF_CONTEXT_HEADER)).toBe(true);

    const model3 = scriptedModel([replyFromHandoff((seen) => `Continuing with: ${seen.nextSteps[0]}`)]);
    const third = await restart(world, second, { model: model3 });
    const resumed = await third.harness.resume();
    expect(resumed?.summary).toEqual(later);
    const history = await third.ledger!.history({ principal: 'alice', session: SESSION });
    expect(history.map((h) => [h.manifest.seq, h.manifest.run, h.manifest.principal])).toEqual([
      [0, 'run-1', 'alice'],
      [1, 'run-2', 'alice'],
    ]);
    expect(history[1]?.manifest.prev).toBe(history[0]?.id);
    expect((await third.harness.send('Next?')).answer).toBe('Continuing with: Document the retry options in README.md');
    expect(
      [first, second, third].flatMap((s) => s.harness.fileTool.calls.filter((c) => c.path !== 'notes/plan.md')),
    ).toEqual([]);
    await third.ledger!.close();
  });
});

/** Every attempt must be refused with outside_allowed_roots and create nothing. */
async function expectDenials(tool: FileTool, w: World): Promise<void> {
  await mkdir(join(w.ledgerRoot, 'blobs-v1'), { recursive: true, mode: 0o700 }).catch(() => {});
  await symlink(w.ledgerRoot, join(w.project, 'ledger-link')).catch(() => {});
  await symlink(w.internalDir, join(w.project, 'internal-link')).catch(() => {});
  await symlink(join(w.foreignProject, 'secret.txt'), join(w.project, 'secret-link.txt')).catch(() => {});
  await symlink(join(w.foreignProject, 'not-yet'), join(w.project, 'dangling')).catch(() => {});
  const writes = [
    join(w.foreignProject, 'x.txt'),
    '../bob/x.txt',
    `${w.project}/../bob/x.txt`,
    join(w.ledgerRoot, 'x'),
    join(w.ledgerRoot, 'blobs-v1', 'x'),
    join(w.internalDir, SESSION, 'HANDOFF.md'),
    join(w.stateDir, 'x.jsonl'),
    'ledger-link/x',
    'internal-link/sess-42/HANDOFF.md',
    'secret-link.txt',
    'dangling/x.txt',
    'dangling',
  ];
  for (const path of writes) {
    const err = await tool.write(path, 'nope').catch((e: unknown) => e);
    expect(err, path).toBeInstanceOf(FileToolError);
    expect((err as FileToolError).code, path).toBe('outside_allowed_roots');
  }
  for (const path of [join(w.foreignProject, 'secret.txt'), 'secret-link.txt', 'ledger-link/x']) {
    const err = await tool.read(path).catch((e: unknown) => e);
    expect((err as FileToolError).code, path).toBe('outside_allowed_roots');
  }
  expect(await readFile(join(w.foreignProject, 'secret.txt'), 'utf8')).toBe('bob only\n');
  for (const p of [
    join(w.foreignProject, 'x.txt'),
    join(w.foreignProject, 'not-yet'),
    join(w.ledgerRoot, 'x'),
    join(w.internalDir, SESSION),
  ]) {
    expect(await exists(p), p).toBe(false);
  }
  // The control: the account's own project stays writable.
  await tool.write('src/ok.txt', 'fine');
  expect(await tool.read('src/ok.txt')).toBe('fine');
}

describe('file tool restrictions', () => {
  it('deny foreign projects, the ledger directory and internal directories before and after the fix', async () => {
    await expectDenials(await world.fileTool(), world);

    const model = scriptedModel([...longSessionScript(), submitHandoff(sampleSummary())]);
    const first = await startSession(world, { model });
    await runLongSession(first.harness);
    expect(first.harness.compactions).toHaveLength(1);
    await expectDenials(first.harness.fileTool, world);
    const second = await restart(world, first, { model: scriptedModel([]) });
    await second.harness.resume();
    await expectDenials(second.harness.fileTool, world);
    await second.ledger!.close();
  });

  it('deny the ledger directory even when the store lies inside the project', async () => {
    const root = join(world.project, '.handoff-ledger');
    const ledger = await openLedger({ root, host: 'e2e-host', onNotice: () => {} });
    try {
      const tool = await FileTool.create(world.account, { denied: [root] });
      for (const path of ['.handoff-ledger/x', '.handoff-ledger/blobs-v1/x', `${root}/../.handoff-ledger/keys`]) {
        const err = await tool.write(path, 'nope').catch((e: unknown) => e);
        expect((err as FileToolError).code, path).toBe('outside_allowed_roots');
      }
      await tool.write('ok.txt', 'fine');
    } finally {
      await ledger.close();
    }
  });
});
