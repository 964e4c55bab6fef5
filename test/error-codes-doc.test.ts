/**
 * The README's error table is the contract's documentation: every code of every layer's closed union is in it,
 * with the class that carries it, and the table names no code that no class can throw.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { memoryBundleReader, mergeTrust, parseTrustStore, verifyBundle } from '../manifests/audit/index.js';
import { main } from '../src/cli/main.js';
import { extractSummary } from '../src/compaction/tool.js';
import { openLedger } from '../src/ledger/open.js';
import { openBundleDir } from '../src/ops/bundle-dir.js';
import { exportBundle } from '../src/ops/export.js';
import { captureIo } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';
import { treeFileDirs } from './support/tree-file-dirs.js';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const codesOf = (path: string, type: string): string[] => {
  // Comments aside: a code's comment may hold a semicolon (AuditErrorCode's "already exists; exports never overwrite").
  const source = read(path).replace(/\/\*[\s\S]*?\*\//g, '');
  const union = new RegExp(`export type ${type} =([^;]+);`).exec(source)?.[1] ?? '';
  return [...union.matchAll(/'([A-Z_]+)'/g)].map((m) => m[1]!);
};

const LAYERS = [
  { cls: 'StoreError', codes: codesOf('store/errors.ts', 'StoreErrorCode') },
  { cls: 'ManifestError', codes: codesOf('manifests/errors.ts', 'ManifestErrorCode') },
  { cls: 'LedgerError', codes: codesOf('src/errors.ts', 'LedgerErrorCode') },
  // The command line's own codes (src/cli/io.ts), which no library class carries.
  { cls: 'CLI', codes: codesOf('src/cli/io.ts', 'CliErrorCode') },
];

/** README rows: `| \`A\` / \`B\` | LedgerError / StoreError | meaning |` → code → classes. */
function readmeTable(): Map<string, Set<string>> {
  const section = read('README.md').split('## Error codes')[1]!.split('\n## ')[0]!;
  const table = new Map<string, Set<string>>();
  for (const row of section.split('\n').filter((l) => l.startsWith('| `'))) {
    const [codes, classes] = row.split('|').slice(1, 3);
    for (const [, code] of codes!.matchAll(/`([A-Z_]+)`/g)) {
      table.set(code!, new Set(classes!.split('/').map((c) => c.trim())));
    }
  }
  return table;
}

describe('README error codes', () => {
  const table = readmeTable();

  it.each(LAYERS)('lists every $cls code with its class', ({ cls, codes }) => {
    expect(codes.length).toBeGreaterThan(cls === 'CLI' ? 1 : 3);
    expect(codes.filter((code) => !table.get(code)?.has(cls))).toEqual([]);
  });

  it('lists no code that no class declares', () => {
    const declared = new Set(LAYERS.flatMap((l) => l.codes));
    expect([...table.keys()].filter((code) => !declared.has(code))).toEqual([]);
  });
});

describe("README's pointer to the auditor's codes", () => {
  // The table holds the library's codes; the auditor's are left to docs/AUDIT.md by a sentence naming them. That
  // sentence named USAGE, BUNDLE_* and WORKER_FAILED, not TRUST_INVALID, which the CLI's trust files (--trust,
  // HANDOFF_LEDGER_TRUST) are refused with as an AuditError (exit 2), and the table gave TRUST_INVALID to
  // ManifestError alone.
  it('covers every AuditError code: in the table as AuditError, or among the codes it says docs/AUDIT.md lists', () => {
    const codes = codesOf('manifests/audit/errors.ts', 'AuditErrorCode');
    expect(codes.length).toBeGreaterThan(4);
    const section = read('README.md').split('## Error codes')[1]!.split('\n## ')[0]!;
    const named = [...(/The auditor's own codes \(([^)]*)\)/.exec(section)?.[1] ?? '').matchAll(/`([A-Z_]+\*?)`/g)];
    const said = (code: string) =>
      named.some(([, n]) => (n!.endsWith('*') ? code.startsWith(n!.slice(0, -1)) : code === n)) ||
      readmeTable().get(code)?.has('AuditError') === true;
    expect(codes.filter((code) => !said(code))).toEqual([]);
  });
});

describe("README's rows of the summary codes name compact's refusals", () => {
  // The rows said only what publish refuses (a summary marked incomplete; schema faults), not what compact and
  // extractSummary refuse with the same codes: an answer the model did not finish, not JSON, another tool, two calls.
  it('SUMMARY_INCOMPLETE and SUMMARY_INVALID as extractSummary throws them', () => {
    const code = (response: unknown) => {
      try {
        extractSummary(response as never);
        return 'none';
      } catch (err) {
        return (err as { code?: string }).code;
      }
    };
    const input = { task: 't', state: 's', nextSteps: [] };
    const call = (name: string, id = 'c1') => ({ id, name, input });
    expect(code({ finishReason: 'length', toolCalls: [call('submit_handoff')] })).toBe('SUMMARY_INCOMPLETE');
    expect(code({ finishReason: 'content_filter', text: JSON.stringify(input) })).toBe('SUMMARY_INCOMPLETE');
    expect(code({ finishReason: 'stop', text: 'Here it is.' })).toBe('SUMMARY_INVALID');
    expect(code({ finishReason: 'tool_calls', toolCalls: [call('write_file')] })).toBe('SUMMARY_INVALID');
    const twice = [call('submit_handoff'), call('submit_handoff', 'c2')];
    expect(code({ finishReason: 'tool_calls', toolCalls: twice })).toBe('SUMMARY_INVALID');
    // A response that throws as it is read escaped extractSummary as that TypeError (compact alone made it MODEL_FAILED).
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    expect(code(revoked.proxy)).toBe('MODEL_FAILED');
    expect(code({ finishReason: 'tool_calls', toolCalls: [revoked.proxy] })).toBe('MODEL_FAILED');

    const section = read('README.md').split('## Error codes')[1]!.split('\n## ')[0]!;
    const row = (c: string) => section.split('\n').find((l) => l.startsWith(`| \`${c}\``)) ?? '';
    expect(row('SUMMARY_INCOMPLETE')).toContain('the model did not finish its answer');
    expect(row('SUMMARY_INCOMPLETE')).toContain('content filter');
    expect(row('SUMMARY_INVALID')).toContain('an answer that is not JSON');
    expect(row('SUMMARY_INVALID')).toContain(`another tool than \`submit_handoff\` called, or it called twice`);
    expect(row('MODEL_FAILED')).toContain('a response whose fields throw as they are read');
  });
});

describe("docs/AUDIT.md's audit errors", () => {
  const section = read('docs/AUDIT.md').split('## Audit errors')[1]!.split('\n## ')[0]!;
  const rows = section.split('\n').filter((l) => /^\| \(?`/.test(l));

  // test/audit/docs.test.ts finds each code in some table of AUDIT.md; this holds the section to the union both ways.
  it('list every AuditError code (manifests/audit/errors.ts), and no other', () => {
    const code = codesOf('manifests/audit/errors.ts', 'AuditErrorCode');
    expect(code.length).toBeGreaterThan(4);
    const said = new Set(rows.flatMap((r) => [...r.split('|')[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!)));
    expect([...said].sort()).toEqual([...code].sort());
  });

  // The USAGE rows named the CLI's bad arguments and a few library calls, not an earlier checkpoint that does not
  // verify (`verify --since`: USAGE, exit 2), verifyBundle's trust or witnesses built by hand that are none, nor the
  // refusals of memoryBundleReader's input and openBundleDir's arguments; nor TRUST_INVALID two --trust files that
  // give one key id two public keys.
  it('name the refusals the auditor makes so', async () => {
    const code = async (run: () => unknown) => {
      try {
        await run();
        return 'none';
      } catch (err) {
        return (err as { code?: string }).code;
      }
    };
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'h1', onNotice: () => {} });
    const out = `${tempDir()}/bundle`;
    await exportBundle(ledger, { out });
    const trust = await ledger.trustStore();
    await ledger.close();
    const bundle = () => openBundleDir(out);
    expect(await code(async () => verifyBundle(await bundle(), { trust, since: 'no note' }))).toBe('USAGE');
    expect(await code(async () => verifyBundle(await bundle(), { trust: { version: 1, keys: 'h1' } as never }))).toBe(
      'USAGE',
    );
    // An object that is no reader failed as a TypeError ("reader.header is not a function") after the options' checks.
    expect(await code(() => verifyBundle({} as never, { trust }))).toBe('USAGE');
    expect(await code(() => verifyBundle({ header: async () => undefined } as never, { trust }))).toBe('USAGE');
    const { manifests, header } = await bundle();
    expect(await code(() => verifyBundle({ header, manifests, readBlob: 'x' } as never, { trust }))).toBe('USAGE');
    expect(await code(() => verifyBundle({ header, manifests } as never, { trust }))).toBe('none');
    expect(await code(() => memoryBundleReader({ manifests: '', header: {} as never }))).toBe('USAGE');
    expect(await code(() => memoryBundleReader({ manifests: '', blobs: {} as never }))).toBe('USAGE');
    expect(await code(() => openBundleDir(''))).toBe('USAGE');
    expect(await code(() => openBundleDir(out, { maxManifestsBytes: -1 }))).toBe('USAGE');
    const key = (publicKey: string) =>
      parseTrustStore(JSON.stringify({ version: 1, keys: [{ ...trust.keys[0]!, publicKey }] }));
    expect(await code(() => mergeTrust(key(trust.keys[0]!.publicKey), key('A'.repeat(43) + '=')))).toBe(
      'TRUST_INVALID',
    );

    const said = (c: string) =>
      rows
        .filter((r) => r.startsWith(`| \`${c}\``) || r.startsWith(`| (\`${c}\`)`))
        .join(' ')
        .replace(/\s+/g, ' ');
    expect(said('USAGE')).toContain('`--since` (`since`) a note that does not verify under the pinned checkpoint keys');
    expect(said('USAGE')).toContain('`verifyBundle` given a `trust` that is no trust store');
    expect(said('USAGE')).toContain("an object without a reader's `header` and `manifests` methods");
    expect(said('USAGE')).toContain('`memoryBundleReader` an input without the text or bytes of `manifests`');
    expect(said('USAGE')).toContain('`openBundleDir` a path that is no non-empty string or a `maxManifestsBytes`');
    expect(said('TRUST_INVALID')).toContain('two `--trust` files list one key id with two public keys');
  });

  // The rows said any tree file that is not a regular file is BUNDLE_INVALID; verify judges one when it reads it, and a
  // full bundle reads neither proofs.jsonl nor heads.jsonl.
  it('say which tree files verify judges for what bundle, as it reads them', async () => {
    const { full, filtered, verify } = await treeFileDirs();
    expect((await verify(full)).code).toBe(0);
    const refused = await verify(filtered, '--session', 's');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/BUNDLE_INVALID: ".*heads\.jsonl" is not a regular file/);
    const said = rows.find((r) => r.startsWith('| `BUNDLE_INVALID`'))!.replace(/\s+/g, ' ');
    expect(said).toContain('`proofs.jsonl` and `heads.jsonl` only for a filtered bundle');
  });

  // The section said the CLI prints `CODE: message`; every refusal of the CLI starts with `handoff-ledger: `.
  it('quote a refusal of verify as the CLI prints it on stderr, and the exit code', async () => {
    const c = captureIo();
    const code = await main(['verify', `${tempDir()}/no-bundle`, '--trust', `${tempDir()}/keys.json`], c.io);
    const quoted = /the CLI\s+prints `([^`]+)` and exits (\d)/.exec(section);
    expect(quoted).not.toBeNull();
    const [, form, exit] = quoted!;
    const pattern = new RegExp(`^${form!.replace('CODE', '[A-Z_]+').replace('message', '.+')}\n$`);
    expect(c.stderr()).toMatch(pattern);
    expect(String(code)).toBe(exit);
  });
});

describe("Ledger's public methods' @throws", () => {
  // A Harness developer reads a method's @throws for what to catch. Every public call goes through `tracked`, which
  // refuses it once the ledger is closed (CLOSED); the writes to grants and keys go through `assertSound`, which refuses
  // them after a rollback or fork was seen (ROLLBACK, FORK). Several said neither, or had no @throws at all.
  const source = read('src/ledger/ledger.ts');
  const body = source.slice(source.indexOf('export class Ledger '));
  const methods = new Map<string, { doc: string; code: string }>();
  const head = /\n {2}\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\n {2}(?:async )?([a-z]\w*)(?:<[^>]*>)?\(/g;
  for (const m of body.matchAll(head)) {
    const start = m.index + m[0].length;
    const end = body.indexOf('\n  }\n', start);
    // `@internal` ones (maintenance: fsck, gc and export's) are no API of a Harness.
    if (!m[1]!.includes('@internal'))
      methods.set(m[2]!, { doc: m[1]!.replace(/\n\s*\*\s?/g, ' '), code: body.slice(start, end) });
  }
  /** A method's @throws text, following `@throws as \`other\``. */
  const throwsOf = (name: string, seen = new Set<string>()): string => {
    const doc = methods.get(name)?.doc ?? '';
    const text = doc.split('@throws').slice(1).join(' ');
    const as = /^\s*as `(\w+)`/.exec(text)?.[1];
    return as && !seen.has(as) ? `${text} ${throwsOf(as, seen.add(name))}` : text;
  };
  const tracked = [...methods].filter(([, m]) => m.code.includes('this.tracked('));
  const sound = [...methods].filter(([, m]) => /this\.(assertSound|setGrant)\(/.test(m.code));

  it('finds the methods', () => {
    expect(tracked.map(([n]) => n)).toEqual(expect.arrayContaining(['publish', 'resume', 'grant', 'rotateKey']));
    expect(sound.map(([n]) => n)).toEqual(expect.arrayContaining(['grant', 'revoke', 'rotateKey', 'revokeKey']));
  });

  it.each(tracked.map(([n]) => n))('%s names CLOSED', (name) => {
    expect(throwsOf(name)).toContain('`CLOSED`');
  });

  it.each(sound.map(([n]) => n))('%s names ROLLBACK and FORK', (name) => {
    expect(throwsOf(name)).toContain('`ROLLBACK`');
    expect(throwsOf(name)).toContain('`FORK`');
  });
});

describe('every @throws of the library', () => {
  // A Harness catches by class and code: `compact`'s @throws listed TREE_DAMAGED and KEY_REVOKED under LedgerError,
  // which never carries them (they are ManifestError's), and STORAGE_FAILED, which no LedgerError carries either.
  const CLASSES: Record<string, Set<string>> = {
    StoreError: new Set(codesOf('store/errors.ts', 'StoreErrorCode')),
    ManifestError: new Set(codesOf('manifests/errors.ts', 'ManifestErrorCode')),
    LedgerError: new Set(codesOf('src/errors.ts', 'LedgerErrorCode')),
    AuditError: new Set(codesOf('manifests/audit/errors.ts', 'AuditErrorCode')),
  };
  const sources = (dir: string): string[] =>
    readdirSync(new URL(`../${dir}`, import.meta.url), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? sources(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
    );

  it('names under a class only codes of that class', () => {
    const wrong: string[] = [];
    const names = Object.keys(CLASSES).join('|');
    const classRun = new RegExp(`(?:${names})(?:\\s*/\\s*(?:${names}))*`, 'g');
    for (const path of ['src', 'store', 'manifests'].flatMap(sources)) {
      const text = read(path);
      for (const doc of text.matchAll(/\/\*\*([\s\S]*?)\*\//g)) {
        const throwsText = doc[1]!
          .replace(/\n\s*\*\s?/g, ' ')
          .split('@throws')
          .slice(1)
          .map((t) => t.split(/@(?:returns|example|param)\b/)[0]!);
        for (const t of throwsText) {
          // Each run of class names (`StoreError / ManifestError`) governs the codes up to the next run.
          const runs = [...t.matchAll(classRun)];
          runs.forEach((run, i) => {
            const classes = run[0].split('/').map((c) => c.trim());
            const said = t.slice(run.index + run[0].length, runs[i + 1]?.index ?? t.length);
            for (const [, code] of said.matchAll(/`([A-Z][A-Z_]*[A-Z])`/g)) {
              // An errno named as what a cause holds (`ENOENT`) is no code of the library.
              if (/^E[A-Z]+$/.test(code!)) continue;
              if (!classes.some((c) => CLASSES[c]!.has(code!)))
                wrong.push(`${path}:${text.slice(0, doc.index).split('\n').length + 1} ${run[0]} ${code}`);
            }
          });
        }
      }
    }
    expect(wrong).toEqual([]);
  });
});
