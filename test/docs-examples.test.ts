/**
 * The README's TypeScript examples are run, not only compiled (docs-imports.test.ts and test/package/ compile and
 * resolve them): each ```ts block is written out as a module as it stands, its `handoff-ledger…` imports pointed at
 * the source, and given only what it leaves to the reader (a ledger, a scope, a transcript, a model, a client). The
 * model SDKs (openai, @anthropic-ai/sdk, @google/genai, ai) are the real ones, built as the README builds them (from
 * the environment: `new OpenAI()`, `new Anthropic()`) and sent to a fake provider on 127.0.0.1, never a real API.
 * What a block's comments say it returns is checked against what it returns.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, sourceOf } from './support/entry-source.js';
import OpenAI from 'openai';
import { openLedger } from '../src/ledger/open.js';
import type { Ledger } from '../src/ledger/ledger.js';
import { compact } from '../src/compaction/compact.js';
import { summarySchemaFor } from '../src/summary/schema-forms.js';
import {
  compactionRequest,
  extractSummary,
  NOT_RUN_RESULT,
  normalizeStrictSummary,
  summaryJsonSchema,
  type ModelAdapter,
} from '../src/index.js';
import { openaiAdapter } from '../src/adapters/openai.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { completion, functionCall, response } from './adapters/openai-replies.js';

/** The README's ```ts blocks, each with its first line (how it is named here). */
function readmeBlocks(readme = readFileSync(join(ROOT, 'README.md'), 'utf8')) {
  return [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => ({ code: m[1]!, first: m[1]!.split('\n')[0]! }));
}

/** The names a `// name: { a, b, c }` comment of a block says an object holds. */
function saidKeys(code: string, pattern: RegExp): string[] {
  const said = pattern.exec(code);
  expect(said, `the block no longer says ${String(pattern)}`).not.toBeNull();
  return said![1]!.split(',').map((k) => k.trim());
}

// A summary as a strict-mode model writes it (every optional field present, null when absent), and as the others do.
const summary = { task: 'Add retries to the uploader', state: 'Backoff written', nextSteps: ['Write the tests'] };
const strict = { ...summary, decisions: null, openQuestions: null, files: null, notes: null, incomplete: null };

/** The providers' APIs, each answering with a finished summary in its own shape; every request is recorded. */
function reply(path: string): unknown {
  if (path.endsWith('/responses')) return response([functionCall(JSON.stringify(strict))]).body;
  if (path.endsWith('/chat/completions'))
    return completion({ role: 'assistant', content: JSON.stringify(strict), refusal: null }, 'stop');
  if (path.endsWith('/messages'))
    return {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-test',
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'submit_handoff', input: summary }],
      stop_reason: 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 20 },
    };
  if (path.includes(':generateContent'))
    return {
      candidates: [{ content: { role: 'model', parts: [{ text: JSON.stringify(summary) }] }, finishReason: 'STOP' }],
    };
  return undefined;
}

/** What the endpoint of "Writing an adapter" (the paths under /custom/) answers next: a status and a body. */
let custom: { status: number; body: unknown } = { status: 500, body: { error: 'nothing scripted' } };

let server: Server;
const requests: Array<{ path: string; body: Record<string, unknown> }> = [];
const work = join(ROOT, '.tmp'); // in the checkout (ignored by git), so a block's imports of the SDKs resolve
let dir: string;
const savedEnv = { ...process.env };

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString('utf8')));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      requests.push({ path, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) });
      if (path.startsWith('/custom/')) {
        res.statusCode = custom.status;
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify(custom.body));
        return;
      }
      const body = reply(path);
      res.statusCode = body === undefined ? 404 : 200;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(body ?? { error: { message: `no such path ${path}` } }));
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // What the SDKs read when the README builds them with no options: their keys and base URLs.
  Object.assign(process.env, {
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: `${url}/v1`,
    ANTHROPIC_API_KEY: 'test-key',
    ANTHROPIC_BASE_URL: url,
    GOOGLE_GEMINI_BASE_URL: url,
  });
  mkdirSync(work, { recursive: true });
  dir = mkdtempSync(join(work, 'readme-examples-'));
});

afterAll(async () => {
  process.env = savedEnv;
  rmSync(dir, { recursive: true, force: true });
  await new Promise((done) => server.close(done));
});

let made = 0;
/**
 * Runs a block as a module: `given` are the names it leaves to the reader (taken from `values`), `exported` the
 * names it declares that the test looks at; `edit` fills in what a comment leaves to the reader.
 */
async function run(
  code: string,
  given: Record<string, unknown>,
  exported: string[],
  edit: (code: string) => string = (c) => c,
): Promise<Record<string, unknown>> {
  const body = edit(code).replace(
    /from '(handoff-ledger[^']*)'/g,
    (_, specifier: string) => `from ${JSON.stringify(sourceOf(specifier))}`,
  );
  const file = join(dir, `block-${made++}.ts`);
  (globalThis as { __readmeGiven?: unknown }).__readmeGiven = given;
  const names = Object.keys(given);
  writeFileSync(
    file,
    `// @ts-nocheck\n` +
      (names.length ? `const { ${names.join(', ')} } = (globalThis as any).__readmeGiven;\n` : '') +
      `${body}\nexport { ${exported.join(', ')} };\n`,
  );
  return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
}

function block(first: string) {
  const found = readmeBlocks().filter((b) => b.first === first);
  expect(found, `one README block begins ${first}`).toHaveLength(1);
  return found[0]!.code;
}

const LIBRARY = "import { openLedger, summaryJsonSchema } from 'handoff-ledger';";
const HARNESS = "import { shouldCompact, compact, resumeContext } from 'handoff-ledger';";
const SDKS = "import OpenAI from 'openai';";
const CHAT = 'const completion = await client.chat.completions.create({';
const ADAPTER = "import { compact } from 'handoff-ledger';";
const TRANSPARENCY =
  'const { note, checkpoint } = await ledger.checkpoint();       // signed note; { origin, size, root, extensions }';
// Needs a PostgreSQL server; docs-imports.test.ts checks the trust value it builds with an embedded store.
const POSTGRES = "import { readFileSync } from 'node:fs';";

describe("the README's TypeScript examples, run", () => {
  it('are each run here (a new block is named in this file, or this fails)', () => {
    expect(readmeBlocks().map((b) => b.first)).toEqual([LIBRARY, HARNESS, SDKS, CHAT, ADAPTER, TRANSPARENCY, POSTGRES]);
  });

  it('Library: publishes and resumes, each returning the fields its comment names', async () => {
    const code = block(LIBRARY);
    process.env.HANDOFF_LEDGER_ROOT = tempDir(); // "root from the environment"
    const { receipt, resumed } = (await run(code, {}, ['receipt', 'resumed'])) as {
      receipt: Record<string, unknown>;
      resumed: { summary: unknown; seq: number; id: string };
    };
    expect(Object.keys(receipt).sort()).toEqual(saidKeys(code, /\/\/ receipt: \{ ([^}]*) \}/).sort());
    expect(Object.keys(resumed).sort()).toEqual(saidKeys(code, /\/\/ resumed: \{ ([^}]*) \}/).sort());
    expect(resumed).toMatchObject({ id: receipt.id, seq: receipt.seq });
    expect(resumed.summary).toMatchObject({ task: 'Refactor billing', nextSteps: ['Move tax rules'] });
  });

  describe('with a ledger', () => {
    let ledger: Ledger;
    const scope = { principal: 'alice', session: 'sess-42', run: 'run-7' };
    const transcript = [
      { role: 'system' as const, content: 'You are a coding assistant.' },
      { role: 'user' as const, content: 'Add retries to the uploader.' },
      { role: 'assistant' as const, content: 'Backoff written.' },
    ];
    beforeAll(async () => {
      ledger = await openLedger({ root: tempDir(), host: 'harness-eu-1', onNotice: () => {} });
    });
    afterAll(async () => ledger.close());
    const head = async () => (await ledger.resume(scope))?.id ?? null;

    it('In a Harness: resumes, compacts onto the head, and keeps the system message first', async () => {
      const before = await ledger.publish(scope, sampleSummary('before'));
      const model = openaiAdapter({ client: new OpenAI({ maxRetries: 0 }), model: 'gpt-5-mini' });
      const given = { ledger, scope, model, usedTokens: 150_000, contextWindow: 200_000, signal: undefined };
      const turn = [
        { role: 'user', content: 'Now the tests.' },
        { role: 'assistant', content: 'Written.' },
      ];
      const ran = (await run(block(HARNESS), { ...given, turn }, ['messages', 'head', 'resumed'], (code) =>
        // "after each turn (its messages appended)": the reader's turn
        code.replace('// after each turn (its messages appended):\n', '$&messages.push(...turn);\n'),
      )) as { messages: Array<{ role: string; content: string }>; head: string; resumed: { id: string } };
      expect(ran.resumed.id).toBe(before.id);
      expect(ran.head).toBe(await head());
      expect(ran.head).not.toBe(before.id);
      expect(ran.messages).toHaveLength(2); // [system, the handoff]
      expect(ran.messages[0]).toEqual({ role: 'system', content: 'You are a coding assistant.' });
    });

    it('Use it with your model API: each SDK adapter as the README builds it compacts through its API', async () => {
      requests.length = 0;
      const given = { compact, ledger, scope, transcript, head: await head(), apiKey: 'test-key' };
      const built = await run(block(SDKS), given, ['model', 'claude', 'gemini', 'viaAi']);
      expect(requests.map((r) => [r.path, r.body.model])).toEqual([['/v1/responses', 'gpt-5-mini']]);
      for (const [name, path] of [
        ['claude', '/v1/messages'],
        ['gemini', '/v1beta/models/gemini-2.5-flash:generateContent'],
        ['viaAi', '/v1/responses'],
      ] as const) {
        const expectedPrev = await head();
        const { receipt } = await compact({ ledger, scope, model: built[name] as never, transcript, expectedPrev });
        expect(requests.at(-1)!.path, name).toBe(path);
        expect((await ledger.resume(scope))?.id, name).toBe(receipt.id);
      }
    });

    it('A Harness that calls the SDK itself: Chat Completions with the strict schema, normalized and published', async () => {
      requests.length = 0;
      const prev = await head();
      const given = {
        client: new OpenAI({ maxRetries: 0 }),
        messages: transcript,
        ledger,
        scope,
        head: prev,
        summarySchemaFor,
        normalizeStrictSummary,
      };
      await run(block(CHAT), given, ['completion']);
      expect(requests.map((r) => r.path)).toEqual(['/v1/chat/completions']);
      const resumed = await ledger.resume(scope);
      expect(resumed?.manifest.prev).not.toBeNull();
      expect(resumed?.id).not.toBe(prev);
      expect(resumed?.summary).toEqual(summary);
    });

    it('Writing an adapter: the fetch adapter compacts in both modes, and maps a refusal, a cut-off answer and an HTTP error as said', async () => {
      const code = block(ADAPTER);
      const endpoint = "'https://llm.example.com/v1/chat/completions'";
      expect(code, 'the block names its endpoint').toContain(`const endpoint = ${endpoint};`);
      const url = `${process.env.OPENAI_BASE_URL!.replace(/\/v1$/, '')}/custom/v1/chat/completions`;
      const answer = (message: Record<string, unknown>, finish: string) => ({
        status: 200,
        body: completion({ role: 'assistant', content: null, refusal: null, ...message }, finish),
      });
      const called = (input: string) => ({
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'submit_handoff', arguments: input } }],
      });
      // mode tool (the default): the forced submit_handoff tool; the transcript ends with a call left open
      requests.length = 0;
      custom = answer(called(JSON.stringify(summary)), 'tool_calls');
      const open = [
        ...transcript,
        {
          role: 'assistant' as const,
          content: '',
          toolCalls: [{ id: 'call_9', name: 'read_file', input: { path: 'src/upload.ts' } }],
        },
      ];
      const prev = await head();
      const ran = (await run(
        code,
        { ledger, scope, transcript: open, head: prev, apiKey: 'test-key' },
        ['model', 'receipt'],
        (c) => c.replace(endpoint, JSON.stringify(url)),
      )) as { model: ModelAdapter; receipt: { id: string } };
      expect((await ledger.resume(scope))?.id).toBe(ran.receipt.id);
      expect((await ledger.resume(scope))?.summary).toEqual(summary);
      expect(requests).toHaveLength(1);
      const sent = requests[0]!.body as {
        messages: Array<Record<string, unknown>>;
        tools: Array<{ function: { name: string; parameters: unknown } }>;
        tool_choice: unknown;
        response_format?: unknown;
      };
      expect(requests[0]!.path).toBe('/custom/v1/chat/completions');
      expect(sent.tools.map((t) => t.function.name)).toEqual(['submit_handoff']);
      expect(sent.tools[0]!.function.parameters).toEqual(summaryJsonSchema);
      expect(sent.tool_choice).toEqual({ type: 'function', function: { name: 'submit_handoff' } });
      expect(sent).not.toHaveProperty('response_format');
      // the open call and the answer the request gave it, under its id; then the instruction, a user message
      expect(sent.messages.slice(-3)).toEqual([
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { id: 'call_9', type: 'function', function: { name: 'read_file', arguments: '{"path":"src/upload.ts"}' } },
          ],
        },
        { role: 'tool', content: NOT_RUN_RESULT, tool_call_id: 'call_9' },
        expect.objectContaining({ role: 'user' }),
      ]);
      // mode structured: the response format, no tools; the answer's text is the summary
      requests.length = 0;
      custom = answer({ content: JSON.stringify(summary) }, 'stop');
      const structured = await compact({
        ledger,
        scope,
        model: ran.model,
        transcript,
        expectedPrev: await head(),
        mode: 'structured',
        maxOutputTokens: 2000,
      });
      expect((await ledger.resume(scope))?.id).toBe(structured.receipt.id);
      expect(requests[0]!.body).toMatchObject({
        response_format: { type: 'json_schema', json_schema: { name: 'handoff_summary', schema: summaryJsonSchema } },
        max_tokens: 2000,
      });
      expect(requests[0]!.body).not.toHaveProperty('tools');
      expect(requests[0]!.body).not.toHaveProperty('tool_choice');
      // what the README says each maps to; nothing published
      const refused = async (reply: typeof custom) => {
        custom = reply;
        const before = await head();
        const err = await compact({ ledger, scope, model: ran.model, transcript, expectedPrev: before }).then(
          () => undefined,
          (e: unknown) => e as { code: string; message: string; cause?: unknown },
        );
        expect(await head()).toBe(before);
        return err;
      };
      expect(await refused(answer({ refusal: 'I cannot help with that.' }, 'stop'))).toMatchObject({
        code: 'MODEL_REFUSED',
        message: expect.stringContaining('I cannot help with that.'),
      });
      expect(await refused(answer(called(JSON.stringify(summary).slice(0, 40)), 'length'))).toMatchObject({
        code: 'SUMMARY_INCOMPLETE',
      });
      expect(await refused(answer(called(JSON.stringify(summary)), 'content_filter'))).toMatchObject({
        code: 'SUMMARY_INCOMPLETE',
      });
      expect(await refused({ status: 200, body: { choices: [] } })).toMatchObject({ code: 'SUMMARY_INCOMPLETE' });
      const failed = await refused({ status: 503, body: { error: 'overloaded' } });
      expect(failed).toMatchObject({ code: 'MODEL_FAILED' });
      expect(String((failed!.cause as Error).message)).toMatch(/^HTTP 503: /);
      // the signal passed on to fetch: a request already aborted is never sent; compactionRequest builds what compact
      // sends, and extractSummary reads the answer as compact does
      requests.length = 0;
      const request = compactionRequest({ messages: transcript });
      await expect(ran.model({ ...request, signal: AbortSignal.abort() })).rejects.toMatchObject({
        name: 'AbortError',
      });
      expect(requests).toEqual([]);
      custom = answer(called(JSON.stringify(summary)), 'tool_calls');
      expect(extractSummary(await ran.model(request))).toEqual(summary);
    });

    it('Transparency: the checkpoint has the fields named, and the inclusion proof verifies as its comment says', async () => {
      const code = block(TRANSPARENCY);
      const receipt = await ledger.publish(scope, sampleSummary('proved'));
      const said = /^(verifyInclusion\(.*\));\s*\/\/ (\{ .* \})$/m.exec(code);
      expect(said, 'the block ends with verifyInclusion(…); // its result').not.toBeNull();
      const saidConsistent = /^(verifyConsistency\(.*\));\s*\/\/ (\{ .* \})$/m.exec(code);
      expect(saidConsistent, 'the block ends with verifyConsistency(…); // its result').not.toBeNull();
      // One more leaf: the consistency proof from size 1 is not the trivial one of equal sizes.
      await ledger.publish(scope, sampleSummary('proved again'));
      const ran = await run(
        code,
        { ledger, receipt, oldSize: 1 },
        ['note', 'checkpoint', 'c', '__verified', '__consistent'],
        (c) =>
          c
            .replace(said![0], `const __verified = ${said![1]};`)
            .replace(saidConsistent![0], `const __consistent = ${saidConsistent![1]};`),
      );
      expect(typeof ran.note).toBe('string');
      expect(Object.keys(ran.checkpoint as object).sort()).toEqual(saidKeys(code, /signed note; \{ ([^}]*) \}/).sort());
      expect(ran.c).toMatchObject({ oldSize: 1 });
      expect((ran.c as { treeSize: number }).treeSize).toBeGreaterThan(1);
      expect(ran.__verified).toEqual(new Function(`return (${said![2]});`)());
      expect(ran.__consistent).toEqual(new Function(`return (${saidConsistent![2]});`)());
    });
  });
});

/** The code of a source file's first JSDoc `@example`, its ` * ` prefixes removed. */
function jsdocExample(file: string): string {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const found = /@example\n((?: \*(?: .*)?\n)+?) \*\//.exec(text);
  expect(found, `${file} has an @example`).not.toBeNull();
  return found![1]!.replace(/^ \* ?/gm, '');
}

describe('JSDoc examples of the public API, run', () => {
  // It gave memoryBundleReader the manifests alone: under a store's trust file, which lists its checkpoint keys,
  // an intact bundle verified so was never ok (CHECKPOINT_MISSING).
  it("handoff-ledger/audit's: an intact bundle exported from a store verifies ok under that store's trust file", async () => {
    const code = jsdocExample('manifests/audit/index.ts');
    const ledger = await openLedger({ root: tempDir(), host: 'harness-eu-1', onNotice: () => {} });
    await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary());
    const { exportBundle } = await import('../src/index.js');
    const out = join(tempDir(), 'bundle');
    await exportBundle(ledger, { out });
    const json = JSON.stringify(await ledger.storeTrust()); // what keys export writes
    await ledger.close();
    const read = (name: string) => readFileSync(join(out, name), 'utf8');
    const { report } = (await run(
      `import { verifyBundle, memoryBundleReader, parseTrustStore } from 'handoff-ledger/audit';\n${code}`,
      { text: read('manifests.jsonl'), json, checkpointText: read('checkpoint.note') },
      ['report'],
    )) as { report: { ok: boolean; findings: unknown[] } };
    expect(report.findings).toEqual([]);
    expect(report.ok).toBe(true);
  });

  it("shouldCompact's: returns what its comment says", async () => {
    const code = jsdocExample('src/compaction/should-compact.ts');
    const said = /^(shouldCompact\(.*\));\s*\/\/ (.*)$/m.exec(code);
    expect(said).not.toBeNull();
    const { shouldCompact } = await import('../src/index.js');
    expect(new Function('shouldCompact', `return ${said![1]};`)(shouldCompact)).toBe(JSON.parse(said![2]!));
  });
});

describe("docs/AUDIT.md's library use, run", () => {
  // docs/AUDIT.md named createWorkerLineVerifier and what it does, not how it is used: which option of verifyBundle
  // takes it, that it resolves once its threads have started, and that its threads keep the process alive until
  // close(): a script that verified through it never exited.
  it("docs/AUDIT.md's worker pool: passed as the option it names, closed as it says, verifies a bundle", async () => {
    const audit = readFileSync(join(ROOT, 'docs', 'AUDIT.md'), 'utf8').replace(/\s+/g, ' ');
    const said =
      /await createWorkerLineVerifier\(\{ trust, threads, mainShare\? \}\)(?:(?!\. [A-Z]).)*?`verifyBundle`'s \(or `verifyChain`'s\) `(\w+)` option(?:(?!\. [A-Z]).)*?`close\(\)`/.exec(
        audit,
      );
    expect(said, 'docs/AUDIT.md says how a worker pool is passed to verifyBundle and ended').not.toBeNull();
    const { createWorkerLineVerifier, exportBundle } = await import('../src/index.js');
    const { verifyBundle, verifyChain, parseTrustStore } = await import('../manifests/audit/index.js');
    const { openBundleDir } = await import('../src/ops/bundle-dir.js');
    const ledger = await openLedger({ root: tempDir(), host: 'harness-eu-1', onNotice: () => {} });
    await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary());
    const out = join(tempDir(), 'bundle');
    await exportBundle(ledger, { out });
    const trust = parseTrustStore(JSON.stringify(await ledger.storeTrust()));
    await ledger.close();
    const pool = await createWorkerLineVerifier({ trust, threads: 2 });
    try {
      const report = await verifyBundle(await openBundleDir(out), { trust, [said![1]!]: pool });
      expect(report.findings).toEqual([]);
      const lines = readFileSync(join(out, 'manifests.jsonl'), 'utf8').split('\n').filter(Boolean);
      expect((await verifyChain(lines, { trust, [said![1]!]: pool })).ok).toBe(true);
    } finally {
      await pool.close();
    }
  });
});
