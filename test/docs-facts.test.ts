/**
 * Facts the documentation states, held to their sources: the entry points the README lists are the `exports` of
 * package.json, what it says an entry point holds is what it exports, the size budget it quotes is the one
 * test/package holds the tarball to, and what it says `diagnose` leaves is what an open with it leaves; DESIGN.md's and
 * ARCHITECTURE.md's formats are the code's. Where a document gives a list the code holds (commands, options, fields,
 * environment variables, exit codes, spans, error classes), the list is read from the code and compared whole.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import ts from 'typescript';
import { openLedger } from '../src/ledger/open.js';
import { summarySchema } from '../manifests/format/summary.js';
import { validateSummary } from '../src/summary/summary.js';
import { retryCeiling } from '../src/ledger/witnessing.js';
import { main } from '../src/cli/main.js';
import { captureIo, helpHint } from './support/capture-io.js';
import { tempDir } from './support/tmp.js';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const readme = read('README.md');
const pkg = JSON.parse(read('package.json')) as { name: string; exports: Record<string, unknown> };
/** `handoff-ledger`, `handoff-ledger/store`, …, the adapters as `handoff-ledger/adapters/*`. */
const specifiers = [
  ...new Set(
    Object.keys(pkg.exports)
      .filter((k) => !k.endsWith('.json'))
      .map((k) => (k === '.' ? pkg.name : `${pkg.name}/${k.slice(2)}`.replace(/\/adapters\/.*/, '/adapters/*'))),
  ),
];

describe("the README's entry points", () => {
  it.each([
    ['Install', readme.split('## Install')[1]!.split('\n## ')[0]!],
    ['Where things live', readme.split('## Where things live')[1]!.split('\n## ')[0]!],
  ])('are every code entry point of package.json (%s)', (_, section) => {
    const list = /Entry points[^:]*:([\s\S]*?)(?:\.\s|;)/.exec(section)?.[1] ?? '';
    expect(specifiers.length).toBeGreaterThan(5);
    expect(specifiers.filter((s) => !list.includes(`\`${s}\``))).toEqual([]);
  });

  it('say handoff-ledger/manifests holds the offline verifier only if it exports it', async () => {
    const at = readme.indexOf('`handoff-ledger/manifests` (');
    expect(at).toBeGreaterThan(0);
    let depth = 0;
    let end = readme.indexOf('(', at);
    do depth += readme[end] === '(' ? 1 : readme[end] === ')' ? -1 : 0;
    while (depth > 0 && ++end < readme.length);
    const said = readme.slice(at, end);
    const manifests = (await import('../manifests/index.js')) as Record<string, unknown>;
    if (!('verifyBundle' in manifests)) expect(said).not.toMatch(/verifier/);
  });
});

describe("the README's adapters entry", () => {
  it('names every handoff-ledger/adapters/* subpath of package.json, in its order', () => {
    const subpaths = Object.keys(pkg.exports)
      .filter((k) => k.startsWith('./adapters/'))
      .map((k) => k.slice('./adapters/'.length));
    expect(subpaths.length).toBeGreaterThan(3);
    const said = /`handoff-ledger\/adapters\/\*` \(([^)]*)\)/.exec(readme)?.[1] ?? '';
    expect(said.split(',').map((s) => s.trim())).toEqual(subpaths);
  });
});

describe("the README's lower layers", () => {
  // It said handoff-ledger/store holds digests, BlobStore and "the filesystem store": the entry exports the PostgreSQL
  // store (PgBlobStore, which the README's pool example opens) and the BLAKE3 backends (loadHashBackend) too.
  it('say what handoff-ledger/store exports of its backends: the filesystem and PostgreSQL stores, BLAKE3', async () => {
    const store = (await import('../store/index.js')) as Record<string, unknown>;
    for (const name of ['FsBlobStore', 'PgBlobStore', 'loadHashBackend'])
      expect(store[name], name).toBeTypeOf('function');
    const said = /`handoff-ledger\/store` \(([\s\S]*?)\) and\s+`handoff-ledger\/manifests`/.exec(readme)?.[1] ?? '';
    expect(said.replace(/\s+/g, ' ')).toMatch(
      /^digests and the BLAKE3 backends, .* its filesystem and PostgreSQL stores$/,
    );
  });

  // BlobStore.put's contract says a buffer given whole must not change until put resolves (it is not copied); the
  // README said only that put is done with a chunk of a stream when it pulls the next, which a caller could read as
  // leave to reuse a buffer as soon as put is called.
  it("say when put is done with a buffer given whole, as BlobStore.put's contract does", () => {
    const contract =
      /export interface BlobStore \{\s*\/\*\*([\s\S]*?)\*\//.exec(read('store/blob-store.ts'))?.[1] ?? '';
    expect(contract.replace(/\s*\*\s*/g, ' ')).toContain(
      'A `Uint8Array` given whole must not change until `put` resolves: it is written and hashed as it is, not copied',
    );
    const said = /`handoff-ledger\/store` \(([\s\S]*?)\) and\s+`handoff-ledger\/manifests`/.exec(readme)?.[1] ?? '';
    expect(said.replace(/\s+/g, ' ')).toContain(
      'is done with a chunk when it pulls the next (with a buffer given whole, only once it resolves: it is written and hashed as it is, not copied)',
    );
  });
});

describe("the README's size budget of the package", () => {
  it('is the one test/package holds the tarball to', () => {
    const source = read('test/package/package.test.ts');
    const kib = (name: string) => Number(new RegExp(`const ${name} = (\\d+) \\* 1024;`).exec(source)?.[1]);
    const said = /hold the tarball to (\d+) KiB for the library plus (\d+) KiB\s+for the page/.exec(readme);
    expect(said).not.toBeNull();
    expect([Number(said![1]), Number(said![2])]).toEqual([kib('MAX_PACKED_BYTES'), kib('MAX_PAGE_PACKED_BYTES')]);
  });
});

describe('docs/DESIGN.md against the code', () => {
  const design = read('docs/DESIGN.md');
  const fieldsOf = (type: string) =>
    [
      ...(new RegExp(`export interface ${type} \\{([^}]*)\\}`).exec(read('src/ledger/ledger.ts'))?.[1] ?? '').matchAll(
        /^\s+(\w+):/gm,
      ),
    ].map((m) => m[1]);

  it('says where it departs from the original design, the PostgreSQL chain key as the schema makes it', () => {
    const key = /UNIQUE \(([^)]+)\)\);/.exec(read('manifests/log/pg/schema.ts'))?.[1];
    expect(key).toBe('session, seq');
    const departures = design.split('## Departures from the original design')[1] ?? '';
    expect(departures).toContain(`\`(${key})\``);
    expect(design.split('## Scale-out')[1]).toContain(`unique \`(${key})\` key`);
  });

  it("gives the receipt's and resume's fields as the Ledger returns them", () => {
    expect(design).toContain(`return a receipt \`{ ${fieldsOf('Receipt').join(', ')} }\``);
    expect(design).toContain(`return \`{ ${fieldsOf('Resumed').join(', ')} }\``);
  });
});

describe('docs/ARCHITECTURE.md against the code', () => {
  it('gives the trust store as its schema has it, every field and which are optional', async () => {
    const { trustStoreSchema, trustedKeySchema, trustedCheckpointKeySchema } =
      await import('../manifests/format/trust.js');
    const form = (shape: Record<string, { safeParse: (v: unknown) => { success: boolean } }>) =>
      Object.entries(shape)
        .map(([k, v]) => (v.safeParse(undefined).success ? `${k}?` : k))
        .join(', ');
    const said = read('docs/ARCHITECTURE.md').replace(/\s+/g, ' ');
    const store = form(trustStoreSchema.shape)
      .replace('keys', `keys: [{ ${form(trustedKeySchema.shape)} }]`)
      .replace('checkpointKeys?', `checkpointKeys?: [{ ${form(trustedCheckpointKeySchema.shape)} }]`)
      .replace('version', 'version: 1');
    expect(/Trust stores are `([^`]*)`/.exec(said)?.[1]).toBe(`{ ${store} }`);
  });
});

describe("the README's diagnose option", () => {
  it('lists among what a diagnosing open still writes no clearing of tmp/, for it leaves a staging file there', async () => {
    const root = tempDir();
    await (await openLedger({ root, host: 'h1', onNotice: () => {} })).close();
    const staging = join(root, 'tmp', `${'ab'.repeat(16)}.tmp`);
    writeFileSync(staging, 'half written', { mode: 0o600 });
    const hourAgo = new Date(Date.now() - 3_600_000);
    utimesSync(staging, hourAgo, hourAgo);
    await (await openLedger({ root, host: 'h1', diagnose: true, onNotice: () => {} })).close();
    const row = readme.split('\n').find((l) => l.startsWith('| `diagnose` |')) ?? '';
    const stillWrites = /What it still writes:([^|]*?)(?:; fsck|\|)/.exec(row)?.[1] ?? '';
    expect(stillWrites).toContain('manifests-v1/');
    expect(existsSync(staging)).toBe(true);
    expect(stillWrites).not.toContain('tmp/');
  });
});

describe('docs/AUDIT.md against the code', () => {
  it("gives the report's top-level fields as BundleAuditReport has them", () => {
    const fields = (file: string, type: string) =>
      [
        ...(new RegExp(`export interface ${type}[^{]*\\{([\\s\\S]*?)\\n\\}`).exec(read(file))?.[1] ?? '').matchAll(
          /^ {2}(\w+\??):/gm,
        ),
      ].map((m) => m[1]!);
    const code = [
      ...fields('manifests/audit/findings.ts', 'AuditReport'),
      ...fields('manifests/audit/verify-chain.ts', 'BundleAuditReport'),
    ];
    const section = read('docs/AUDIT.md').split('## The report')[1]!.replace(/\s+/g, ' ');
    const said = /^ `\{ (.*?) \}`\./.exec(section)?.[1] ?? '';
    const top = said.replace(/\{[^{}]*\}/g, '').replace(/\[[^[\]]*\]/g, '');
    expect(top.split(',').map((f) => f.replace(/:.*/, '').trim())).toEqual(code);
  });
});

describe("docs/AUDIT.md's finding codes against its steps", () => {
  // The finding table gave MANIFEST_INVALID step 5 alone, "a correctly signed payload": step 3 gives it too, before any
  // signature is checked, to a payload that is no JSON object or whose host, keyId or createdAt is not of its form.
  it('gives each code the steps the table of what verify checks lists it under', () => {
    const audit = read('docs/AUDIT.md');
    const listed = new Map<string, string[]>();
    const steps = audit.split('## What `verify` checks, in order')[1]!.split('\n\n')[1]!;
    for (const [, step, codes] of steps.matchAll(/^\| (\w+) \|.*\| ([^|]*) \|$/gm))
      for (const [, code] of codes!.matchAll(/`([A-Z_]+)`/g)) listed.set(code!, [...(listed.get(code!) ?? []), step!]);
    const table = audit.split('## Finding codes')[1]!.split('\n\n')[2]!;
    const given = [...table.matchAll(/^\| `([A-Z_]+)` \| ([\w, ]+) \|/gm)].map(([, code, step]) => [code, step]);
    expect(given.length).toBeGreaterThan(40);
    expect(given.filter(([code, step]) => listed.get(code!)?.join(', ') !== step)).toEqual([]);
  });

  it('step 3 refuses a payload of a malformed host MANIFEST_INVALID before its signature is looked at', async () => {
    const { verifyChain } = await import('../manifests/audit/index.js');
    const { encodeBase64 } = await import('../manifests/encoding/base64.js');
    const { MANIFEST_PAYLOAD_TYPE } = await import('../manifests/format/manifest-core.js');
    const payload = new TextEncoder().encode('{"host":"not an id","keyId":"k","createdAt":"2026-01-01T00:00:00.000Z"}');
    const line = JSON.stringify({
      payloadType: MANIFEST_PAYLOAD_TYPE,
      payload: encodeBase64(payload),
      signatures: [{ keyid: 'k', sig: encodeBase64(new Uint8Array(64)) }],
    });
    const report = await verifyChain([line], { trust: { version: 1, keys: [] } });
    expect(report.findings.map((f) => f.code)).toEqual(['MANIFEST_INVALID']);
  });
});

describe("the README's compatibility contract", () => {
  it('names the on-disk paths DESIGN.md calls part of the semver contract', () => {
    const contract = readme.split('## Compatibility')[1]!.split('\n## ')[0]!;
    const layout = /\*\*The on-disk layout\*\* of the embedded store \(([^)]*)\)/.exec(contract)?.[1] ?? '';
    const design = read('docs/DESIGN.md');
    const inContract = [...design.matchAll(/\(on-disk layout, part of the semver contract\)\. `<root>\/(\w+)\//g)];
    expect(inContract.length).toBeGreaterThan(0);
    for (const [, dir] of inContract) expect(layout).toContain(`\`${dir}/\``);
  });
});

describe("the README's on-disk layout", () => {
  it('says of tmp/ and gc-aside/ what an open of a root other processes write leaves there, and for how long', () => {
    const minutes = Number(/const STAGING_LEFTOVER_MS = (\d+) \* 60_000;/.exec(read('src/ledger/open.ts'))?.[1]);
    expect(minutes).toBeGreaterThan(0);
    const layout = readme.split('## On-disk layout (embedded store)')[1]!.split('```')[1]!;
    for (const dir of ['tmp/', 'gc-aside/']) {
      const lines = layout.split('\n');
      const at = lines.findIndex((l) => l.startsWith(`  ${dir}`));
      const entry = [lines[at], lines[at + 1]].join(' ').replace(/\s+/g, ' ');
      expect(entry, dir).toMatch(new RegExp(`a root other processes write too: only .*over ${minutes} minutes`));
    }
  });
});

describe("docs/AUDIT.md's auditor, who has the package and no checkout", () => {
  const audit = read('docs/AUDIT.md');
  const files = (JSON.parse(read('package.json')) as { files: string[] }).files;
  it('says how to get the verify command, from the tarball, with no store and no build', () => {
    const setup = audit.split('\n## ')[0]!;
    expect(setup).toContain('npm install ./handoff-ledger-<version>.tgz');
    expect(setup).toContain('npx handoff-ledger verify ./audit-2026-11 --trust ./host-keys.json');
  });
  it("says where the built page is in an installed package (npm run build:web is the checkout's), which it ships", () => {
    expect(files).toContain('dist/web/index.html');
    expect(audit).toContain('node_modules/handoff-ledger/dist/web/index.html');
    expect(readme).toContain('node_modules/handoff-ledger/dist/web/index.html');
  });
});

describe("docs/AUDIT.md's library notes", () => {
  it('names the summary check the CLI gives verifyBundle, and where it lives', async () => {
    const cli = read('src/cli/verify.ts');
    const passed = /checkSummary: (\w+)/.exec(cli)?.[1];
    const from = new RegExp(`import \\{[^}]*\\b${passed}\\b[^}]*\\} from '\\.\\./\\.\\./([^']+)\\.js'`).exec(cli)?.[1];
    expect(from).toBeDefined();
    const audit = (await import('../manifests/audit/index.js')) as Record<string, unknown>;
    expect(audit[passed!]).toBeTypeOf('function');
    const said = read('docs/AUDIT.md').replace(/\s+/g, ' ');
    const sentence = /[^.]*summary-schema check[^.]*\.[^.]*\./.exec(said)?.[0] ?? '';
    expect(sentence).toContain(`\`checkSummary\``);
    expect(sentence).toContain(`\`${passed}\``);
    expect(sentence).toContain(`${from}.ts`);
  });
});

describe("the README's proofs and checkpoints", () => {
  const fieldsOf = (file: string, type: string) =>
    [
      ...(new RegExp(`export interface ${type} \\{([^}]*)\\}`).exec(read(file))?.[1] ?? '').matchAll(
        /^ {2}(\w+)\??:/gm,
      ),
    ].map((m) => m[1]!);

  it('give the fields of checkpoint() and of the proofs as the code returns them', () => {
    expect(readme).toContain(
      `await ledger.checkpoint();       // signed note; { ${fieldsOf('manifests/format/checkpoint.ts', 'Checkpoint').join(', ')} }`,
    );
    expect(readme).toContain(`# {${fieldsOf('src/ledger/proofs.ts', 'InclusionProof').join(', ')}} (base64)`);
    expect(readme).toContain(`# {${fieldsOf('src/ledger/proofs.ts', 'ConsistencyProof').join(', ')}}`);
  });
});

describe("docs/AUDIT.md's performance notes", () => {
  it('name how verify hashes small blobs, and up to which size', () => {
    const code = read('manifests/audit/verify-blobs.ts');
    const kib = Number(/const SMALL_BLOB = (\d+) \* 1024;/.exec(code)?.[1]);
    const small = /size > SMALL_BLOB \? [^:]+: (\w+)\(/.exec(code)?.[1];
    expect([kib > 0, small]).toEqual([true, 'digestOf']);
    const said = read('docs/AUDIT.md').replace(/\s+/g, ' ');
    expect(/Blobs [^.]*\./.exec(said)?.[0]).toContain(`Blobs up to ${kib} KiB are hashed synchronously (\`${small}\``);
  });
});

describe("docs/DESIGN.md's key file rule", () => {
  it('refuses the key file modes the signer refuses: any access by group or others', () => {
    expect(read('src/keys/local-signer.ts')).toMatch(/if \(\(st\.mode & 0o077\) !== 0\)/);
    const said = read('docs/DESIGN.md').replace(/\s+/g, ' ');
    expect(/refuse to load a key file ([^)]*)\)/.exec(said)?.[1]).toBe('group or others may read or write');
  });
});

describe("docs/AUDIT.md's audit-ui synopsis", () => {
  it('names every option the command parses', () => {
    const source = read('src/cli/audit-ui.ts');
    const block = /parse\(\s*argv,\s*\{([\s\S]*?)\n {4}\},/.exec(source)?.[1] ?? '';
    const parsed = [...block.matchAll(/^\s+'?([a-z-]+)'?: \{ type:/gm)].map((m) => `--${m[1]}`).sort();
    expect(parsed.length).toBeGreaterThan(5);
    const said = read('docs/AUDIT.md').replace(/\s+/g, ' ');
    const synopsis = /`handoff-ledger audit-ui ([^`]*)`/.exec(said)?.[1] ?? '';
    expect([...new Set(synopsis.match(/--[a-z-]+/g))].sort()).toEqual(parsed);
  });

  // It gave `[--trust FILE]` (repeatable: once per file) and `--since CHECKPOINT` where the help says `FILE`.
  it('is the synopsis the command prints', async () => {
    const { commands } = await import('../src/cli/commands.js');
    const said = read('docs/AUDIT.md').replace(/\s+/g, ' ');
    expect(/`handoff-ledger (audit-ui [^`]*)`/.exec(said)?.[1]).toBe(commands['audit-ui']!.synopsis);
  });
});

describe("src/README.md's ops/ line", () => {
  // It named export, the bundle directory reader, fsck, gc and auditBundle, and not the server audit-ui runs
  // (audit-server.ts) nor the page's module (auditor-page.ts, `handoff-ledger/web`), both in src/ops.
  it('names every module of src/ops (each by its file name, or a `prefix-*.ts` pattern covering it)', () => {
    const line = /^- `ops\/` — (.*(?:\n {2}.*)*)/m.exec(read('src/README.md'))?.[1] ?? '';
    const named = [...line.matchAll(/`([\w.*-]+\.ts)`/g)].map(
      (m) => new RegExp(`^${m[1]!.replace(/\./g, '\\.').replace(/\*/g, '[\\w-]*')}$`),
    );
    const files = readdirSync(new URL('../src/ops/', import.meta.url)).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(5);
    expect(files.filter((f) => !named.some((n) => n.test(f)))).toEqual([]);
  });
});

describe("benchmarks/README.md's list of suites", () => {
  // Its first paragraph listed raw limits, sizes, concurrency, chain verification, RSS and PostgreSQL: not the alone,
  // resume-steps and chain-floor suites of benchmarks/suites/, nor the names `--only` takes.
  const first = read('benchmarks/README.md').split('\n\n')[1]!.replace(/\s+/g, ' ');
  it('names every file of benchmarks/suites/', () => {
    const files = readdirSync(new URL('../benchmarks/suites/', import.meta.url)).filter((f) => f.endsWith('.ts'));
    expect(files.length).toBeGreaterThan(5);
    expect(files.filter((f) => !first.includes(`\`${f}\``))).toEqual([]);
  });
  it('gives the suite names run.ts takes in --only, in its order', () => {
    const suites = /const SUITES = \[([^\]]*)\]/.exec(read('benchmarks/run.ts'))?.[1] ?? '';
    const names = [...suites.matchAll(/'([\w-]+)'/g)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(5);
    expect(/`--only` takes `([\w,-]+)`/.exec(first)?.[1]).toBe(names.join(','));
  });
});

describe("the README's list of the Ledger's members", () => {
  // It named publish … close() and checkpointFailure, but not checkLog, checkpointVerifierKey, keyId, recovery (nor
  // checkpoint, the proofs, or the properties host, root, log, blobs, hashBackend, verifier, telemetry).
  it('is every public member of the Ledger class (not @internal), and names no other', () => {
    const source = ts.createSourceFile('ledger.ts', read('src/ledger/ledger.ts'), ts.ScriptTarget.Latest, true);
    const cls = source.statements.find((s) => ts.isClassDeclaration(s) && s.name?.text === 'Ledger');
    const members = (cls as ts.ClassDeclaration).members
      .filter((m) => m.name && !ts.isConstructorDeclaration(m))
      .filter((m) => !ts.getModifiers(m as ts.HasModifiers)?.some((x) => x.kind === ts.SyntaxKind.PrivateKeyword))
      .filter((m) => !ts.getJSDocTags(m).some((t) => t.tagName.text === 'internal'))
      .map((m) => m.name!.getText(source));
    expect(members.length).toBeGreaterThan(20);
    const list = readme.split('`Ledger` methods:')[1]!.split('`fsck(ledger')[0]!;
    // The names the list gives, outside the parentheses that say what each does.
    let top = list;
    while (/\([^()]+\)/.test(top)) top = top.replace(/\([^()]+\)/g, '');
    const said = [...top.matchAll(/`(\w+)(?:\(\))?`/g)].map((m) => m[1]!);
    expect([...said].sort()).toEqual([...members].sort());
    const recovery = /export interface RecoveryReport \{([^}]*)\}/.exec(read('src/ledger/ledger.ts'))?.[1] ?? '';
    const fields = [...recovery.matchAll(/^ {2}(\w+):/gm)].map((m) => m[1]!);
    expect(list.replace(/\s+/g, ' ')).toContain(`\`recovery\` (what the open found: \`{ ${fields.join(', ')} }\``);
  });
});

describe("the README's word on the Ledger's methods and classes", () => {
  // The list named revokeKey without its parameters: a caller could not tell it takes a time, or in what form.
  it("gives revokeKey's parameters as the method declares them", () => {
    const source = ts.createSourceFile('ledger.ts', read('src/ledger/ledger.ts'), ts.ScriptTarget.Latest, true);
    const cls = source.statements.find((s) => ts.isClassDeclaration(s) && s.name?.text === 'Ledger');
    const method = (cls as ts.ClassDeclaration).members.find(
      (m): m is ts.MethodDeclaration => ts.isMethodDeclaration(m) && m.name.getText(source) === 'revokeKey',
    );
    const params = method!.parameters.map((p) => `${p.name.getText(source)}${p.questionToken ? '?' : ''}`);
    expect(params.length).toBeGreaterThan(0);
    const list = readme.split('`Ledger` methods:')[1]!.split('`fsck(ledger')[0]!;
    expect(list).toContain(`\`revokeKey(${params.join(', ')})\``);
  });

  // The error table named WitnessState.put and WitnessState.open, a class no entry point exports: a user meets
  // `witness serve`, never the class.
  it('names no class (`Class.member`) that no entry point of package.json exports', () => {
    const pkg = JSON.parse(read('package.json')) as { exports: Record<string, string | { default?: string }> };
    const entries = Object.values(pkg.exports)
      .map((e) => (typeof e === 'string' ? e : e.default))
      .filter((e): e is string => e !== undefined && e.startsWith('./dist/') && e.endsWith('.js'))
      .map((e) => e.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
    expect(entries.length).toBeGreaterThan(5);
    const program = ts.createProgram(entries, { noEmit: true, allowJs: false, module: ts.ModuleKind.NodeNext });
    const checker = program.getTypeChecker();
    const exported = new Set<string>();
    for (const entry of entries) {
      const symbol = checker.getSymbolAtLocation(program.getSourceFile(entry)!);
      for (const e of checker.getExportsOfModule(symbol!)) exported.add(e.name);
    }
    expect(exported).toContain('FsBlobStore');
    const classes = new Set<string>();
    for (const dir of ['src', 'store', 'manifests']) {
      for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
        if (!file.endsWith('.ts')) continue;
        for (const m of read(join(dir, file)).matchAll(/^export (?:abstract )?class (\w+)/gm)) classes.add(m[1]!);
      }
    }
    // ARCHITECTURE.md is the contributors' map of the source, internal classes and all; the rest is a user's.
    const docs = [
      readme,
      ...readdirSync('docs')
        .filter((f) => f.endsWith('.md') && f !== 'ARCHITECTURE.md')
        .map((f) => read(join('docs', f))),
    ];
    const named = new Set(docs.flatMap((d) => [...d.matchAll(/`(\w+)\.\w+/g)].map((m) => m[1]!)));
    const unexported = [...named].filter((n) => classes.has(n) && !exported.has(n));
    expect(unexported).toEqual([]);
  });
});

describe("the README's table of openLedger's options", () => {
  // It had no row for blobs, log, fs, levelLog and clock, which openLedger takes (and refuses misspelt).
  it('has a row for every field openLedger reads (OPEN_FIELDS), and none for another', () => {
    const fields = /const OPEN_FIELDS = \[([^\]]*)\]/.exec(read('src/ledger/open.ts'))?.[1] ?? '';
    const code = [...fields.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
    expect(code.length).toBeGreaterThan(15);
    const table = readme.split('`openLedger(options)`:')[1]!.split('\n\n')[1]!;
    const rows = table.split('\n').filter((l) => l.startsWith('| `'));
    const said = rows.flatMap((r) => [...r.split('|')[1]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!));
    expect([...said].sort()).toEqual([...code].sort());
  });

  // Its postgres row gave `{ connectionString }` alone: schema and maxBlobBytes were named nowhere in the README.
  it("gives the postgres option's fields as PostgresBackendOptions has them (hash aside: openLedger's own)", () => {
    const type = /export interface PostgresBackendOptions \{([\s\S]*?)\n\}/.exec(read('src/ledger/postgres.ts'))?.[1];
    const fields = [...(type ?? '').matchAll(/^ {2}(\w+\??):/gm)].map((m) => m[1]!).filter((f) => f !== 'hash?');
    expect(fields.length).toBeGreaterThan(4);
    const row = readme.split('\n').find((l) => l.startsWith('| `postgres` |')) ?? '';
    expect(row).toContain(`\`{ ${fields.join(', ')} }\``);
  });

  // The inlineSummaryBytes row said nothing of the values refused, where the maxSummaryBytes row did: both are checked
  // by one rule (checkByteBound) and refused before anything is made.
  it.each(['maxSummaryBytes', 'inlineSummaryBytes'])(
    'says of %s the values openLedger refuses, as it refuses them',
    async (option) => {
      const row = readme.split('\n').find((l) => l.startsWith(`| \`${option}\` |`)) ?? '';
      expect(row).toContain('a non-negative integer, else `INVALID_ARGUMENT`');
      for (const value of [-1, 1.5, Number.NaN, '1024']) {
        const root = join(tempDir('hl-opt-'), 'root');
        await expect(
          openLedger({ host: 'h', root, [option]: value }),
          `${option}: ${String(value)}`,
        ).rejects.toMatchObject({
          code: 'INVALID_ARGUMENT',
          message: new RegExp(`^${option} must be a non-negative integer`),
        });
        expect(existsSync(root)).toBe(false);
      }
    },
  );
});

describe('the maps of the layers', () => {
  // The README's "Where things live" named manifests/ without its witness/ folder (the tlog-witness request and
  // decision the server and the ledger share).
  const subdirs = (layer: string) =>
    readdirSync(new URL(`../${layer}/`, import.meta.url), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => `${e.name}/`);
  const layers = ['store', 'manifests', 'src'];
  /** A layer's lines in a map: from the line starting with `<layer>/` to the next line starting with a name. */
  const mapOf = (text: string, layer: string) => {
    const lines = text.split('\n');
    const at = lines.findIndex((l) => l.startsWith(`${layer}/ `));
    const end = lines.findIndex((l, i) => i > at && /^\S/.test(l));
    return at < 0 ? '' : lines.slice(at, end < 0 ? undefined : end).join(' ');
  };
  it.each(layers)("the README's and ARCHITECTURE.md's maps name every folder of %s/", (layer) => {
    expect(subdirs(layer).length).toBeGreaterThan(2);
    const where = readme.split('## Where things live')[1]!.split('```')[1]!;
    const architecture = read('docs/ARCHITECTURE.md').split('## Layers')[1]!.split('```')[1]!;
    for (const [doc, text] of [
      ['README', where],
      ['ARCHITECTURE', architecture],
    ] as const) {
      const map = mapOf(text, layer);
      expect(map, doc).not.toBe('');
      expect(
        subdirs(layer).filter((d) => !new RegExp(`(^|[\\s(,])${d}`).test(map)),
        doc,
      ).toEqual([]);
    }
  });
  // Its benchmarks/ line named suites/, report/ and results/, not lib/ (the statistics, the PostgreSQL cluster).
  it("the README's map names every folder of benchmarks/", () => {
    const where = readme.split('## Where things live')[1]!.split('```')[1]!;
    const map = mapOf(where, 'benchmarks');
    expect(subdirs('benchmarks').length).toBeGreaterThan(3);
    expect(subdirs('benchmarks').filter((d) => !new RegExp(`(^|[\\s(,])${d}`).test(map))).toEqual([]);
  });
  // ARCHITECTURE.md's store/ line named blob-store.ts, blocks.ts, abort.ts and errors.ts, not bounded-body.ts (the
  // bounded reader of a chunked body the page and the witness client share); manifests/ and src/ said nothing of
  // their errors.ts (src/'s version.ts neither), nor their READMEs of errors.ts.
  const files = (layer: string) =>
    readdirSync(new URL(`../${layer}/`, import.meta.url), { withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts') && e.name !== 'index.ts')
      .map((e) => e.name);
  it.each(layers)("ARCHITECTURE.md's map and %s/README.md name every file at the top of the layer", (layer) => {
    expect(files(layer).length).toBeGreaterThan(0);
    const architecture = mapOf(read('docs/ARCHITECTURE.md').split('## Layers')[1]!.split('```')[1]!, layer);
    for (const [doc, text] of [
      ['ARCHITECTURE', architecture],
      ['README', read(`${layer}/README.md`)],
    ] as const)
      expect(
        files(layer).filter((f) => !text.includes(`${f}`)),
        doc,
      ).toEqual([]);
  });
  it.each(layers)('%s/README.md names every folder of its layer', (layer) => {
    const own = read(`${layer}/README.md`);
    expect(subdirs(layer).filter((d) => !own.includes(`\`${d}\``))).toEqual([]);
  });
});

describe("the README's maintenance calls", () => {
  // It gave `fsck(ledger)` and `gc(ledger, { graceMs })` and named exportBundle's options nowhere: fsck's checkBlobs
  // (the CLI's --skip-blobs), gc's dryRun and now, export's out, principal, session, withBlobs, since were unsaid.
  const fieldsOf = (file: string, type: string) =>
    [
      ...(new RegExp(`export interface ${type} \\{([\\s\\S]*?)\\n\\}`).exec(read(file))?.[1] ?? '').matchAll(
        /^ {2}(\w+\??):/gm,
      ),
    ].map((m) => m[1]!);
  it.each([
    ['fsck', 'src/ops/maintenance.ts', 'FsckOptions'],
    ['gc', 'src/ops/maintenance.ts', 'GcOptions'],
    ['exportBundle', 'src/ops/export.ts', 'ExportOptions'],
  ])('%s(ledger, …) names every field of its options', (name, file, type) => {
    const fields = fieldsOf(file, type);
    expect(fields.length).toBeGreaterThan(1);
    expect(readme.replace(/\s+/g, ' ')).toContain(`\`${name}(ledger, { ${fields.join(', ')} })\``);
  });
});

describe("the README's CLI and web/README.md's files", () => {
  it('the CLI section lists every command of the help table, and no other', async () => {
    const { commands } = await import('../src/cli/commands.js');
    const block = readme.split('## CLI')[1]!.split('```')[1]!;
    const listed = [...block.matchAll(/^.*?# ([a-z -]+)$/gm)].slice(0, 2).flatMap((m) => m[1]!.trim().split(/\s+/));
    expect(listed.sort()).toEqual(Object.keys(commands).sort());
  });

  it("web/README.md's table names every source file of the page", () => {
    const files = (dir: string): string[] =>
      readdirSync(new URL(`../web/${dir}`, import.meta.url), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(`${dir}${e.name}/`) : [`${dir}${e.name}`],
      );
    const sources = files('').filter((f) => /\.(ts|mjs|html|css)$/.test(f));
    expect(sources.length).toBeGreaterThan(10);
    const table = read('web/README.md').split('## What lives here')[1]!.split('\n## ')[0]!;
    expect(sources.filter((f) => !table.includes(`\`${f}\``))).toEqual([]);
  });

  // The connections the page's Content-Security-Policy allows (web/build.mjs writes it into the page).
  const connect = /"connect-src ([^"]+)"/.exec(read('web/build.mjs'))?.[1];

  it("the README's word on the page's Content-Security-Policy quotes the connections web/build.mjs allows", () => {
    expect(connect).toBeDefined();
    const section = readme.split("### The auditor's page")[1]!.split('\n## ')[0]!.replace(/\s+/g, ' ');
    const said = section.split('Its Content-Security-Policy')[1] ?? '';
    expect(said.split('. ')[0]).toContain(`\`connect-src ${connect}\``);
  });

  it("the page's own word on its requests names the one source its CSP lets it read from, audit-ui's server", () => {
    const header = read('web/index.html').split('<header>')[1]!.split('</header>')[0]!.replace(/\s+/g, ' ');
    expect(header).toContain('Nothing is uploaded');
    if (connect !== "'none'") expect(header).toMatch(/no network requests, save those that read the files .*audit-ui/);
  });
});

describe("SECURITY.md's filesystem rule", () => {
  // It said "group/world-writable roots or key files are refused": a key file group or others may only read (0640,
  // 0604) is refused too, as DESIGN.md says.
  it('names the modes the key file, trust file and store directories are refused for', () => {
    expect(read('src/keys/local-signer.ts')).toMatch(/if \(\(st\.mode & 0o077\) !== 0\)/);
    expect(read('src/keys/keyring.ts')).toMatch(/if \(\(st\.mode & 0o022\) !== 0\)/);
    expect(read('store/fs/safe-dir.ts')).toMatch(/if \(\(st\.mode & 0o022\) !== 0\)/);
    const said = read('SECURITY.md').replace(/\s+/g, ' ');
    const rule = /\*\*Local filesystem tricks\.\*\* (.*?)\. [A-Z]/.exec(said)?.[1] ?? '';
    expect(rule).toContain('store directories and trust.json that group or others may write');
    expect(rule).toContain('key files that group or others may read or write');
  });
});

describe("docs/AUDIT.md's report wording", () => {
  it('names as exported from handoff-ledger/audit only functions that entry exports (describeCoverage too)', async () => {
    const said = read('docs/AUDIT.md').replace(/\s+/g, ' ');
    const sentence = /[^.(;]*are exported from `handoff-ledger\/audit`, for a page[^.]*\./.exec(said)?.[0] ?? '';
    const names = [...sentence.matchAll(/`(describe\w+)`/g)].map((m) => m[1]!);
    expect(names).toEqual(['describeVerdict', 'describeFinding', 'describeCoverage']);
    const audit = (await import('../manifests/audit/index.js')) as Record<string, unknown>;
    for (const name of names) expect(audit[name], name).toBeTypeOf('function');
  });
});

describe("docs/AUDIT.md's memoryBundleReader example", () => {
  it("gives header as bundle.json's text, as MemoryBundleInput takes it, and says so", async () => {
    const said = read('docs/AUDIT.md');
    const call = /memoryBundleReader\(\{ header: (\w+),/.exec(said);
    expect(call?.[1]).toBe('headerText');
    expect(said).toMatch(/\/\/ header: bundle\.json's text as fetched, not a parsed BundleHeader/);
    const { memoryBundleReader } = await import('../manifests/audit/index.js');
    const headerText = '{"format":"handoff-ledger-bundle"}';
    expect(await memoryBundleReader({ header: headerText, manifests: '' }).header()).toBe(headerText);
    expect(read('manifests/audit/bundle.ts')).toMatch(/\* bundle\.json's text as read \(not a parsed `BundleHeader`/);
  });
});

describe("README's npm pack step", () => {
  it('leaves its tarball ignored by git, so it is never committed from the checkout', () => {
    const said = read('README.md');
    const tarball = /npm pack[^\n]*writes (handoff-ledger-<version>\.tgz)/.exec(said)?.[1];
    expect(tarball).toBeDefined();
    const version = (JSON.parse(read('package.json')) as { version: string }).version;
    const name = tarball!.replace('<version>', version);
    const ignored = spawnSync('git', ['check-ignore', '--no-index', '-q', name], {
      cwd: new URL('..', import.meta.url),
    });
    expect(ignored.status, `${name} is not in .gitignore`).toBe(0);
  });
});

describe("the README's colour rule", () => {
  // It said colour is used on a terminal, never with NO_COLOR, and FORCE_COLOR turns it on for a pipe: not that
  // TERM=dumb turns it off on a terminal, nor that FORCE_COLOR=0 or false turns nothing on.
  it('names every setting colours() (src/cli/io.ts) answers to', async () => {
    const { colours } = await import('../src/cli/io.js');
    const painted = (env: Record<string, string>, isTTY: boolean) =>
      colours({ env } as never, { isTTY } as never).good('x') !== 'x';
    expect([painted({}, true), painted({}, false), painted({ TERM: 'dumb' }, true)]).toEqual([true, false, false]);
    expect([painted({ NO_COLOR: '1' }, true), painted({ NO_COLOR: '1', FORCE_COLOR: '1' }, false)]).toEqual([
      false,
      false,
    ]);
    expect([painted({ FORCE_COLOR: '1' }, false), painted({ FORCE_COLOR: '0' }, false)]).toEqual([true, false]);
    expect(painted({ FORCE_COLOR: 'false' }, false)).toBe(false);
    const said = /Colour \(the `verify` and `fsck` verdicts\)[^.]*\./.exec(readme.replace(/\s+/g, ' '))?.[0] ?? '';
    expect(said).toContain('only on a terminal (not with `TERM=dumb`)');
    expect(said).toContain('never when `NO_COLOR` is set to anything non-empty');
    expect(said).toContain('`FORCE_COLOR` (other than `0` or `false`) turns it on for a pipe');
  });
});

describe("the README's npm start", () => {
  // It said the demo signs as host demo-host: so it does only where HANDOFF_LEDGER_HOST is unset or empty.
  it('names the host the demo signs as, as demo.ts picks it', () => {
    expect(read('src/cli/demo.ts')).toContain("values.host ?? (io.env.HANDOFF_LEDGER_HOST || 'demo-host')");
    const said = readme.split('## Two commands')[1]!.split('\n## ')[0]!.replace(/\s+/g, ' ');
    expect(said).toContain('It signs as host `demo-host`, or the one `HANDOFF_LEDGER_HOST` names');
  });
});

describe("the README's CLI section, against the code's lists", () => {
  const cli = readme.split('## CLI')[1]!.split('\n## ')[0]!;

  it('says of every HANDOFF_LEDGER_* variable the code reads that set to "" it counts as unset', () => {
    const files = (dir: string): string[] =>
      readdirSync(new URL(`../${dir}`, import.meta.url), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(`${dir}${e.name}/`) : e.name.endsWith('.ts') ? [`${dir}${e.name}`] : [],
      );
    const code = new Set(
      files('src/').flatMap((f) => [...read(f).matchAll(/env\.HANDOFF_LEDGER_(\w+)/g)].map((m) => m[1]!)),
    );
    expect(code.size).toBeGreaterThan(5);
    const sentence = /counts as unset:([^;]*\));/.exec(cli.replace(/\s+/g, ' '))?.[1] ?? '';
    const said = [...sentence.matchAll(/`(?:HANDOFF_LEDGER)?_([A-Z][A-Z_]*)/g)].map((m) => m[1]!);
    expect([...said].sort()).toEqual([...code].sort());
  });

  it("gives the exit codes the CLI's help gives (EXIT_CODES), in its order", async () => {
    const { EXIT_CODES } = await import('../src/cli/commands.js');
    const code = EXIT_CODES.map((l) => /^(\d+(?: \/ \d+)?) /.exec(l)?.[1]);
    const table = cli.split('| exit | meaning')[1]!.split('\n\n')[0]!;
    const said = [...table.matchAll(/^\| ([\d /]+?) \|/gm)].map((m) => m[1]);
    expect(code.length).toBeGreaterThan(4);
    expect(said).toEqual(code);
  });

  // Exit 2's row named USAGE, IO_FAILED, STORAGE_FAILED, LOCKED and BUNDLE_EXISTS, and of the auditor's other codes
  // only "unreadable bundle or trust file": not WORKER_FAILED, which verify exits 2 with when its threads fail.
  it("names under exit 2 every code reportError (src/cli/io.ts) exits 2 with: the CLI's, the auditor's, USAGE_CODES", () => {
    const io = read('src/cli/io.ts');
    const union = (text: string, type: string) =>
      [
        ...(
          new RegExp(`export type ${type} =([^;]+);`).exec(text.replace(/\/\*[\s\S]*?\*\//g, ''))?.[1] ?? ''
        ).matchAll(/'([A-Z_]+)'/g),
      ].map((m) => m[1]!);
    expect(io).toContain(
      'const couldNotRun = !isHandoffLedgerError(err) || err instanceof AuditError || USAGE_CODES.has(known.code);',
    );
    const usageCodes = [
      ...(/const USAGE_CODES = new Set\(\[([^\]]*)\]\)/.exec(io)?.[1] ?? '').matchAll(/'([A-Z_]+)'/g),
    ].map((m) => m[1]!);
    const code = [
      ...union(io, 'CliErrorCode'),
      ...union(read('manifests/audit/errors.ts'), 'AuditErrorCode'),
      ...usageCodes,
    ];
    expect(code.length).toBeGreaterThan(8);
    const row = cli.split('\n').find((l) => l.startsWith('| 2 |')) ?? '';
    const said = [...row.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
    expect([...new Set(said)].sort()).toEqual([...new Set(code)].sort());
  });
});

describe("the README's IO_FAILED row", () => {
  // Its example, `ENOENT (no such file or directory), open "summary.json"`, was given for the summary publish reads,
  // which publish names in words of its own (`cannot read summary file "…": ENOENT …`): the row quoted a message no
  // command prints for it. Each example is now what the command named beside it prints, the path aside.
  const row = readme.split('\n').find((l) => l.startsWith('| `IO_FAILED` |')) ?? '';
  const dir = () => tempDir();

  it("quotes publish's refusal of a summary file it cannot read as publish words it", async () => {
    const file = join(dir(), 'summary.json');
    const c = captureIo();
    const args = ['publish', '--principal', 'a', '--session', 's', '--run', 'r', '--root', join(dir(), 'store')];
    expect(await main([...args, '--host', 'h', file], c.io)).toBe(2);
    const said = /`(cannot read summary file "summary\.json": [^`]*)`/.exec(row)?.[1];
    expect(said).toBeDefined();
    expect(c.stderr()).toBe(`handoff-ledger: IO_FAILED: ${said!.replace('"summary.json"', `"${file}"`)}\n`);
  });

  it('quotes the errno wording of a file keys export --out cannot write as keys export prints it', async () => {
    const at = ['--root', join(dir(), 'store'), '--host', 'h'];
    expect(await main(['init', ...at], captureIo().io)).toBe(0);
    const out = join(dir(), 'audit', 'trust.json');
    const c = captureIo();
    expect(await main(['keys', 'export', '--out', out, ...at], c.io)).toBe(2);
    const said = /e\.g\. `ENOENT`, what the system says of it and the call's path quoted: `([^`]*)`/.exec(row)?.[1];
    expect(said).toBeDefined();
    expect(c.stderr()).toBe(`handoff-ledger: IO_FAILED: ${said!.replace('"audit/trust.json"', `"${out}"`)}\n`);
  });

  // The section on escaping gave `EISDIR (illegal operation on a directory), read "notes"` for "any other IO_FAILED":
  // a read of a directory carries no path (Node's EISDIR of a read names none), and publish's FILE, the one read that
  // printed so once, words its refusal itself now. A write into a directory does print so.
  it("the escaping section's example of any other IO_FAILED is what keys export --out prints for a directory", async () => {
    const at = ['--root', join(dir(), 'store'), '--host', 'h'];
    expect(await main(['init', ...at], captureIo().io)).toBe(0);
    const out = join(dir(), 'notes');
    mkdirSync(out);
    const c = captureIo();
    expect(await main(['keys', 'export', '--out', out, ...at], c.io)).toBe(2);
    const section = readme.split('Everything the CLI prints for people is escaped')[1]!.replace(/\s+/g, ' ');
    const said = /any other `IO_FAILED` as `([^`]*)`/.exec(section)?.[1];
    expect(said).toBeDefined();
    expect(c.stderr()).toBe(`handoff-ledger: IO_FAILED: ${said!.replace('"notes"', `"${out}"`)}\n`);
  });
});

describe("the README's telemetry tables", () => {
  // Each operation LedgerTelemetry.run wraps is a span and a duration histogram; the table names them all.
  it('name as spans every Operation src/telemetry/telemetry.ts has, and no other', () => {
    const union = /export type Operation = ([^;]+);/.exec(read('src/telemetry/telemetry.ts'))?.[1] ?? '';
    const code = [...union.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
    expect(code.length).toBeGreaterThan(5);
    const row = readme.split('\n').find((l) => l.startsWith('| `handoff_ledger.publish`')) ?? '';
    const said = [...row.split('|')[1]!.matchAll(/`(?:handoff_ledger)?\.(\w+)`/g)].map((m) => m[1]!);
    expect(said).toEqual(code);
  });
});

describe('the formats DESIGN.md and the README give', () => {
  it("DESIGN.md's manifest v1 has the fields manifestSchema has (covers and its digest optional)", async () => {
    const { manifestSchema, coversSchema } = await import('../manifests/format/manifest.js');
    const block = read('docs/DESIGN.md').split('**Manifest v1**')[1]!.split('```')[1]!;
    const said = [...block.matchAll(/"(\w+)"(\??):/g)].map((m) => m[1]! + m[2]!);
    const form = (shape: Record<string, { safeParse: (v: unknown) => { success: boolean } }>) =>
      Object.entries(shape).map(([k, v]) => (v.safeParse(undefined).success ? `${k}?` : k));
    const { summary, covers } = manifestSchema.shape;
    const code = [...Object.keys(manifestSchema.shape), ...Object.keys(summary.shape), ...form(coversSchema.shape)];
    expect(said.length).toBeGreaterThan(15);
    expect([...said].sort()).toEqual([...code].sort());
    expect(covers.safeParse(undefined).success).toBe(true);
    expect(block.split('\n').find((l) => l.includes('"covers"'))).toMatch(/\/\/ optional/);
  });

  it("DESIGN.md's manifest and envelope give the media types the code writes, and its checkpoint the extension line", async () => {
    const { MANIFEST_PAYLOAD_TYPE, SUMMARY_MEDIA_TYPE } = await import('../manifests/format/manifest-core.js');
    const { SESSION_HEADS_EXTENSION } = await import('../manifests/tlog/session-heads.js');
    const design = read('docs/DESIGN.md');
    const manifest = design.split('**Manifest v1**')[1]!.split('```')[1]!;
    expect(manifest).toContain(`"mediaType": "${SUMMARY_MEDIA_TYPE}"`);
    expect(design.split('**Envelope.**')[1]!.split('\n\n')[0]).toContain(`payloadType: "${MANIFEST_PAYLOAD_TYPE}"`);
    expect(design).toContain(`checkpoint extension line \`${SESSION_HEADS_EXTENSION}\``);
    expect(read('docs/ARCHITECTURE.md')).toContain(`the extension line \`${SESSION_HEADS_EXTENSION} <base64>\``);
  });

  it("the README's summary schema (v1) names summarySchema's fields, required and optional, as the schema has them", async () => {
    const { summarySchema } = await import('../manifests/format/summary.js');
    const para = readme.split('### Summary schema (v1)')[1]!.split('\n\n')[1]!.replace(/\s+/g, ' ');
    const [required, rest] = para.split(/ \(required(?:; [^)]*)?\); /);
    const files = /`files` \(`\{ ([^}]*) \}`/.exec(rest ?? '')?.[1];
    const optional = rest?.split(' (optional')[0]!.replace(/ \(`\{[^}]*\}`[^)]*\)/, '');
    const names = (text: string | undefined) => [...(text ?? '').matchAll(/`(\w+)`/g)].map((m) => m[1]!);
    const shape = summarySchema.shape;
    const isOptional = (k: string) => shape[k as keyof typeof shape].safeParse(undefined).success;
    expect(names(required)).toEqual(Object.keys(shape).filter((k) => !isOptional(k)));
    expect(names(optional)).toEqual(Object.keys(shape).filter(isOptional));
    const item = shape.files.unwrap().element.shape;
    expect(files).toBe(
      Object.entries(item)
        .map(([k, v]) => (v.safeParse(undefined).success ? `${k}?` : k))
        .join(', '),
    );
  });

  it('the pin file: DESIGN.md and the README give its slots as checkpoint-pin.ts makes them', async () => {
    const { MIN_SLOT, MAX_SLOT } = await import('../src/ledger/checkpoint-pin.js');
    const magic = /const MAGIC = new TextEncoder\(\)\.encode\('([^']+)'\);/.exec(
      read('src/ledger/checkpoint-pin.ts'),
    )?.[1];
    const [min, max] = [MIN_SLOT / 1024, MAX_SLOT / 1024];
    const design = read('docs/DESIGN.md').replace(/\s+/g, ' ');
    expect(design).toContain(`two fixed-size slots (${min} KiB each, grown to a larger power of two up to ${max} KiB`);
    expect(design).toContain(`a slot is \`${magic}\`, a u64 sequence number, a u32 note length`);
    const layout = readme.split('## On-disk layout (embedded store)')[1]!.split('```')[1]!.replace(/\s+/g, ' ');
    expect(layout).toContain(`two ${min} KiB slots overwritten in place, grown (up to ${max} KiB each)`);
  });
});

describe('the error classes the documents name', () => {
  // One class per layer: the classes that extend HandoffLedgerError, each document naming every one of them.
  it('are every subclass of HandoffLedgerError in store/, manifests/ and src/', () => {
    const files = (dir: string): string[] =>
      readdirSync(new URL(`../${dir}`, import.meta.url), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(`${dir}${e.name}/`) : e.name.endsWith('.ts') ? [`${dir}${e.name}`] : [],
      );
    const code = ['store/', 'manifests/', 'src/']
      .flatMap(files)
      .flatMap((f) => [...read(f).matchAll(/class (\w+) extends HandoffLedgerError\b/g)].map((m) => m[1]!))
      .sort();
    expect(code.length).toBe(4);
    const named = (text: string) => [...text.matchAll(/`(\w+Error)`/g)].map((m) => m[1]!).sort();
    const flat = (path: string) => read(path).replace(/\s+/g, ' ');
    expect(
      named(/\*\*Errors\.\*\* One error class per layer \(([^)]*)\)/.exec(flat('docs/DESIGN.md'))?.[1] ?? ''),
    ).toEqual(code);
    expect(
      named(/one one-line subclass per layer [^:]*: ([^.]*)\./.exec(flat('docs/ARCHITECTURE.md'))?.[1] ?? ''),
    ).toEqual(code);
    expect(
      named(/Every error of the library is a `HandoffLedgerError`: ([^(]*)\(/.exec(flat('README.md'))?.[1] ?? ''),
    ).toEqual(code);
    expect(named(/\*\*Error codes\*\* \(`code` of ([^)]*)\)/.exec(flat('README.md'))?.[1] ?? '')).toEqual(code);
  });
});

describe("the README's bench options", () => {
  // benchmarks/README.md's list of suites is held to run.ts above; the README's own reproduce block gives them too.
  it('are the options run.ts parses, and --only the suites it takes, in its order', () => {
    const run = read('benchmarks/run.ts');
    const parsed = /parseArgs\(\{\s*options: \{([\s\S]*?)\n {4}\},/.exec(run)?.[1] ?? '';
    const options = [...parsed.matchAll(/^\s+(\w+): \{ type:/gm)].map((m) => `--${m[1]}`);
    const suites = [.../const SUITES = \[([^\]]*)\]/.exec(run)![1]!.matchAll(/'([\w-]+)'/g)].map((m) => m[1]!);
    expect([options.length > 3, suites.length > 5]).toEqual([true, true]);
    const block = readme.split('Reproduce:')[1]!.split('```')[1]!;
    const said = [...block.matchAll(/ (--[a-z]+)\b/g)].map((m) => m[1]!);
    expect([...new Set(said)].sort()).toEqual([...options].sort());
    expect(/--only ([\w,-]+),/.exec(block)?.[1]).toBe(suites.join(','));
  });
});

describe('the option objects and Signer the documents spell out', () => {
  /** An interface's members as written: `name`, `name?`, a method as `name(…)`. */
  const members = (file: string, type: string) =>
    [
      ...(new RegExp(`export interface ${type} \\{([\\s\\S]*?)\\n\\}`).exec(read(file))?.[1] ?? '').matchAll(
        /^ {2}(?:readonly )?(\w+)(\??)(\()?/gm,
      ),
    ].map((m) => (m[3] ? `${m[1]}(…)` : `${m[1]}${m[2]}`));
  const row = (name: string) => readme.split('\n').find((l) => l.startsWith(`| \`${name}\` |`)) ?? '';
  const braced = (text: string) =>
    /`\{ ([^`]*) \}`/
      .exec(text)?.[1]!
      .replace(/: Array<.*?>(?=, )/, '')
      .replace(/\(\w+\)/g, '(…)');

  it("openLedger's telemetry and witnesses rows give TelemetryOptions' and WitnessingOptions' fields", () => {
    expect(braced(row('telemetry'))).toBe(members('src/telemetry/telemetry.ts', 'TelemetryOptions').join(', '));
    expect(braced(row('witnesses'))).toBe(members('src/ledger/witnessing.ts', 'WitnessingOptions').join(', '));
  });

  it("the README's signer row and DESIGN.md's keys give the Signer interface's members", () => {
    const code = members('manifests/crypto/envelope.ts', 'Signer').join(', ');
    expect(code).toBe('keyId, publicKey, sign(…)');
    expect(braced(row('signer` / `keyFile'))).toBe(code);
    expect(braced(read('docs/DESIGN.md').split('**Keys and trust.**')[1]!)).toBe(code);
  });
});

describe("the README's version line", () => {
  // It names the version main's builds carry and the last release: package.json's and CHANGELOG.md's newest.
  it("gives package.json's version and CHANGELOG.md's last release", () => {
    const { version } = JSON.parse(read('package.json')) as { version: string };
    const released = /^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$/m.exec(read('CHANGELOG.md'))?.[1];
    expect(released).toBeDefined();
    const said = readme.split('## Install')[1]!.split('\n## ')[0]!.replace(/\s+/g, ' ');
    if (version.includes('-'))
      expect(said).toContain(
        `pre-release version (\`${version}\`, \`handoff-ledger --version\`); ${released} is the last release`,
      );
    else expect(said).toContain(`${released} is the last release`);
  });
});

describe("SECURITY.md's re-check of the store's directories", () => {
  // It said tmp/, blobs-v1/ and blake3/ are checked when a put starts, and "those and both shard directories again"
  // before the shard directories are made and the name linked: tmp/ is not checked again then (the staging file is
  // made by then), the root is, each time (as the directory opened), and quarantine/ went unsaid.
  it('names the directories a put and a read of the filesystem store lstat, and when', async () => {
    const { FsBlobStore } = await import('../store/fs/blob-store.js');
    const { nodeFsOps } = await import('../store/fs/ops.js');
    const { loadHashBackend } = await import('../store/hash/backends.node.js');
    const root = tempDir();
    const events: string[] = [];
    const label = (path: string) =>
      (path.slice(root.length + 1) || 'root')
        .replace(/^tmp\/\w+\.tmp$/, 'staging')
        .replace(/^blobs-v1\/blake3\/\w\w\/\w\w\/\w{64}$/, 'blob')
        .replace(/^blobs-v1\/blake3\/\w\w\/\w\w$/, 'shard2')
        .replace(/^blobs-v1\/blake3\/\w\w$/, 'shard1');
    const fs = {
      ...nodeFsOps,
      lstat: ((path: string, ...rest: unknown[]) => {
        events.push(`lstat ${label(path)}`);
        return (nodeFsOps.lstat as (...a: unknown[]) => unknown)(path, ...rest);
      }) as typeof nodeFsOps.lstat,
      open: (path: string, flags: number, mode?: number) => {
        events.push(`open ${label(path)}`);
        return nodeFsOps.open(path, flags, mode);
      },
      mkdir: (path: string, mode: number) => {
        events.push(`mkdir ${label(path)}`);
        return nodeFsOps.mkdir(path, mode);
      },
    };
    const { store } = await FsBlobStore.open(root, { hash: await loadHashBackend('auto'), fs });
    const lstatsBetween = (from: string, to: string) => {
      const [a, b] = [from === '' ? -1 : events.indexOf(from), events.indexOf(to)];
      expect(b, to).toBeGreaterThan(a);
      return [...new Set(events.slice(a + 1, b).filter((e) => e.startsWith('lstat ')))].sort();
    };
    events.length = 0;
    const { digest } = await store.put(new TextEncoder().encode('a summary too large to be inline '.repeat(100)));
    expect(lstatsBetween('', 'open staging')).toEqual([
      'lstat blobs-v1',
      'lstat blobs-v1/blake3',
      'lstat root',
      'lstat tmp',
    ]);
    expect(lstatsBetween('open staging', 'mkdir shard1')).toEqual([
      'lstat blobs-v1',
      'lstat blobs-v1/blake3',
      'lstat root',
    ]);
    events.length = 0;
    await store.get(digest);
    expect(lstatsBetween('', 'open blob')).toEqual([
      'lstat blobs-v1',
      'lstat blobs-v1/blake3',
      'lstat root',
      'lstat shard1',
      'lstat shard2',
    ]);
    await store.close();
    const said = read('SECURITY.md').replace(/\s+/g, ' ');
    expect(said).toContain('the root, `tmp/`, `blobs-v1/` and `blake3/` when a put starts;');
    expect(said).toContain('the root, `blobs-v1/` and `blake3/` again once its digest is known, just before the shard');
    expect(said).toContain('every directory on the path before a read, stat or gc delete');
  });
});

describe('the BLAKE3 backends the README and the help name', () => {
  // HashBackendName is what loadHashBackend takes and the CLI checks HANDOFF_LEDGER_HASH against; the help line and the
  // README spell the list out.
  it('are HashBackendName, in its order', async () => {
    const union = /export type HashBackendName = ([^;]+);/.exec(read('store/hash/backends.node.ts'))?.[1] ?? '';
    const names = [...union.matchAll(/'(\w+)'/g)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(3);
    const { usage } = await import('../src/cli/commands.js');
    for (const [where, text] of [
      ['help', usage()],
      ['README', readme],
    ] as const)
      expect(/HANDOFF_LEDGER_HASH=([\w|]+)/.exec(text)?.[1], where).toBe(names.join('|'));
    const row = readme.split('\n').find((l) => l.startsWith('| `hash` |')) ?? '';
    const said = [...row.replace(/\([^)]*\)/g, '').matchAll(/`(\w+)`/g)].map((m) => m[1]!);
    expect(said.slice(1)).toEqual(names);
  });
});

describe("the README's PostgreSQL test servers", () => {
  // It said the tests start a cluster "when its binaries are installed", not where they are looked for, nor
  // HANDOFF_LEDGER_PG_BIN, which names the one directory (benchmarks/lib/pg-cluster.ts, test/support/postgres.ts).
  it('says where findPostgresBin looks for initdb and pg_ctl', async () => {
    const { findPostgresBin } = await import('../benchmarks/lib/pg-cluster.js');
    const saved = process.env.HANDOFF_LEDGER_PG_BIN;
    try {
      process.env.HANDOFF_LEDGER_PG_BIN = tempDir();
      expect(findPostgresBin()).toEqual({
        reason: `HANDOFF_LEDGER_PG_BIN=${process.env.HANDOFF_LEDGER_PG_BIN} holds no initdb/pg_ctl`,
      });
    } finally {
      if (saved === undefined) delete process.env.HANDOFF_LEDGER_PG_BIN;
      else process.env.HANDOFF_LEDGER_PG_BIN = saved;
    }
    expect(read('benchmarks/lib/pg-cluster.ts')).toContain("const debian = '/usr/lib/postgresql';");
    const said = readme.replace(/\s+/g, ' ');
    expect(said).toContain(
      '(`initdb`, `pg_ctl`: on `PATH`, else under `/usr/lib/postgresql/*/bin`, newest first; `HANDOFF_LEDGER_PG_BIN=DIR` names the one directory to use)',
    );
  });
});

describe("the README's peer dependencies", () => {
  // The adapters' SDKs and @opentelemetry/api (optional all, the API named apart), with the ranges package.json gives
  // them.
  it('are package.json peerDependencies, each with its range', () => {
    const { peerDependencies, peerDependenciesMeta } = JSON.parse(read('package.json')) as {
      peerDependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    const said = readme.replace(/\s+/g, ' ');
    const api = '@opentelemetry/api';
    expect(Object.keys(peerDependencies).filter((name) => !peerDependenciesMeta[name]?.optional)).toEqual([]);
    const sdks = Object.keys(peerDependencies).filter((name) => name !== api);
    expect(sdks.length).toBeGreaterThan(3);
    const list = said.split('optional peer dependency (install the one you use; nothing else loads it):')[1] ?? '';
    const pairs = [...list.split(' The adapter tests')[0]!.matchAll(/`([^`]+)` (\^\d+(?:\.\d+)*)/g)].map(
      (m) => `${m[1]} ${m[2]}`,
    );
    expect(pairs.sort()).toEqual(sdks.map((name) => `${name} ${peerDependencies[name]}`).sort());
    expect(said).toContain(`\`${api}\` is an optional peer dependency (\`${peerDependencies[api]}\`)`);
  });
});

describe("the README's summary schema", () => {
  const section = readme.split('### Summary schema (v1)')[1]!.split('\n### ')[0]!;

  // An operator with the README alone guessed `"nextSteps": "…"` (SUMMARY_INVALID: expected array): the section
  // names each field's type and shows a summary publish takes.
  it('gives a summary example that validates, holding every required field', () => {
    const example = /```json\n([\s\S]*?)\n```/.exec(section);
    expect(example, 'a ```json example in the section').not.toBeNull();
    const value = JSON.parse(example![1]!) as Record<string, unknown>;
    expect(() => validateSummary(value)).not.toThrow();
    const required = Object.entries(summarySchema.shape)
      .filter(([, field]) => !field.safeParse(undefined).success)
      .map(([name]) => name);
    expect(Object.keys(value).sort()).toEqual(required.sort());
  });

  // `nextSteps` was said "required", and `[]` is taken (the schema sets no least count): an operator wrote a
  // placeholder step. A required field the schema lets be empty is said to be one, and no other.
  it('says which required fields may be empty, as publish takes them', () => {
    const told = section.split('\n\n')[1]!.replace(/\s+/g, ' ').split(' (required')[1]!.split(')')[0]!;
    const said = [...told.matchAll(/`(\w+)` may be empty/g)].map((m) => m[1]);
    // Judged by what publish takes (validateSummary: the schema and the content rules, which refuse a blank task or
    // state), each required field emptied in turn in a summary that is otherwise whole.
    const whole = { task: 'Ship it', state: 'Done', nextSteps: ['Tag the release'] } as Record<string, unknown>;
    const required = Object.entries(summarySchema.shape)
      .filter(([, field]) => !field.safeParse(undefined).success)
      .map(([name]) => name);
    expect(Object.keys(whole).sort()).toEqual([...required].sort());
    const takes = (value: unknown) => {
      try {
        validateSummary(value);
        return true;
      } catch {
        return false;
      }
    };
    const emptyOk = required.filter((name) => takes({ ...whole, [name]: Array.isArray(whole[name]) ? [] : '' }));
    expect(said).toEqual(emptyOk);
    expect(said).toEqual(['nextSteps']);
  });

  it('says which fields are arrays of strings, as the schema has them', () => {
    const arrays = Object.entries(summarySchema.shape)
      .filter(([, field]) => field.safeParse(['x']).success && !field.safeParse('x').success)
      .map(([name]) => name);
    const sentence = /([^.]*) arrays of strings/.exec(section);
    expect(sentence, 'a sentence naming the arrays of strings').not.toBeNull();
    const named = [...sentence![1]!.matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1]);
    expect(named.filter((n) => arrays.includes(n!)).sort()).toEqual(arrays.sort());
  });
});

describe("the README's USAGE row", () => {
  // The CLI names the option an unknown one is a slip of (`--hots`: did you mean '--host'?); the row said only
  // "unknown option". It quotes the message, which must be the one the CLI prints.
  it('gives the did-you-mean hint of an unknown option as the CLI prints it', async () => {
    const row = readme.split('\n').find((l) => l.startsWith('| `USAGE` |'))!;
    const quoted = /`(unknown option "--([a-z-]+)"[^`]*)`/.exec(row);
    expect(quoted, 'the row quotes an unknown-option message').not.toBeNull();
    expect(quoted![1]).toContain('did you mean');
    const c = captureIo();
    expect(await main(['init', `--${quoted![2]!}`, 'x'], c.io)).toBe(2);
    expect(c.stderr()).toBe(`handoff-ledger: USAGE: ${quoted![1]}\n${helpHint('init')}`);
  });
});

describe("the README's offline audit", () => {
  it('gives the code the CLI answers an export --out inside the store root with (USAGE, exit 2), as its table does', () => {
    // test/audit/export.test.ts 'export into the store root' holds the CLI to USAGE; the library's exportBundle
    // answers INVALID_ARGUMENT, which the comment under `handoff-ledger export` said of the command.
    const block = readme.split('## Offline audit')[1]!.split('```')[1]!;
    const line = block.split('\n').find((l) => l.includes('--out outside the store')) ?? '';
    expect(line).toContain('USAGE');
    expect(line).not.toMatch(/inside it is INVALID_ARGUMENT/);
  });
});

describe('the paths and links the documents give', () => {
  // What an adopting engineer or an auditor opens first names files to read next: each must be there.
  const documents = [
    ...readdirSync(new URL('../docs/', import.meta.url)).map((f) => `docs/${f}`),
    ...['src', 'store', 'manifests', 'web', 'benchmarks'].map((layer) => `${layer}/README.md`),
    'README.md',
    'SECURITY.md',
  ];
  const exists = (path: string) => existsSync(new URL(`../${path}`, import.meta.url));

  it('name only files and folders of the repository that exist (a name of it with its extension, or a folder)', () => {
    // A path from the top of the repository, as `manifests/audit/verify-tree.ts` or `test/vectors/cosignature/`: its
    // last part a file name with an extension, or a folder; placeholders (`<hex>`) and patterns (`fsck-*.ts`) aside.
    const named = documents.flatMap((doc) =>
      [...read(doc).matchAll(/(?<![\w./-])((?:src|store|manifests|web|test|benchmarks|docs)\/[\w./-]*[\w/])/g)]
        .map((m) => m[1]!)
        .filter((p) => p.endsWith('/') || /\.\w+$/.test(p.split('/').at(-1)!))
        .map((p) => [doc, p] as const),
    );
    expect(named.length).toBeGreaterThan(100);
    // What a run writes and git ignores (benchmarks/results/quick/) is not in a checkout until then.
    const ignored = (path: string) =>
      spawnSync('git', ['check-ignore', '--no-index', '-q', path], { cwd: new URL('..', import.meta.url) }).status ===
      0;
    expect(named.filter(([, p]) => !exists(p) && !ignored(p))).toEqual([]);
  });

  it('link only to documents and headings that exist', () => {
    const slug = (heading: string) =>
      heading
        .trim()
        .toLowerCase()
        .replace(/[^\w\- ]/g, '')
        .replace(/ /g, '-');
    const headings = (path: string) => new Set([...read(path).matchAll(/^#+ (.*)$/gm)].map((m) => slug(m[1]!)));
    const links = documents.flatMap((doc) =>
      [...read(doc).matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!)
        .filter((l) => !/^https?:/.test(l))
        .map((link) => {
          const [path, anchor] = link.split('#') as [string, string | undefined];
          const target = path === '' ? doc : join(doc, '..', path);
          return [doc, link, target, anchor] as const;
        }),
    );
    expect(links.length).toBeGreaterThan(5);
    expect(
      links.filter(
        ([, , target, anchor]) => !exists(target) || (anchor !== undefined && !headings(target).has(anchor)),
      ),
    ).toEqual([]);
  });

  it('link, in a document the package ships, only to files it ships (the README on the registry, the rest installed)', () => {
    // The README linked the page's screenshot and web/README.md, test/RELIABILITY.md and the benchmarks' results and
    // log, AUDIT.md web/README.md: none is in the tarball, so each link was broken where a user reads the package.
    const pack = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: new URL('..', import.meta.url),
      encoding: 'utf8',
    });
    expect(pack.status, pack.stderr).toBe(0);
    const packed = new Set(
      (JSON.parse(pack.stdout) as Array<{ files: Array<{ path: string }> }>)[0]!.files.map((f) => f.path),
    );
    const shipped = [...packed].filter((path) => path.endsWith('.md'));
    expect(shipped).toEqual(expect.arrayContaining(['README.md', 'SECURITY.md', 'docs/AUDIT.md']));
    const links = shipped.flatMap((doc) =>
      [...read(doc).matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!)
        .filter((link) => !/^[a-z][\w+.-]*:/i.test(link))
        .map((link) => {
          const path = link.split('#')[0]!;
          return [doc, link, path === '' ? doc : join(doc, '..', path)] as const;
        }),
    );
    expect(links.length).toBeGreaterThan(3);
    expect(links.filter(([, , target]) => !packed.has(target))).toEqual([]);
  });

  it('name as a section of a document (`AUDIT.md, "Completeness"`) only a heading or a bold run-in heading of it', () => {
    // benchmarks/README.md sent a reader to ARCHITECTURE.md, "Checkpoints": no section of that page is so named.
    const sections = (path: string) => [
      ...[...read(path).matchAll(/^#+ (.*)$/gm)].map((m) => m[1]!.trim()),
      ...[...read(path).matchAll(/^\s*(?:- )?\*\*([^*]+)\*\*/gm)].map((m) => m[1]!.trim()),
    ];
    const refs = documents.flatMap((doc) =>
      [
        ...read(doc)
          .replace(/\s+/g, ' ')
          .matchAll(/\b((?:[\w./-]*\/)?[A-Z][\w-]*\.md)(?:'s)?,? "([^"]+)"/g),
      ].map((m) => {
        const target = [m[1]!, join(doc, '..', m[1]!), `docs/${m[1]!}`].find(exists) ?? m[1]!;
        return [doc, target, m[2]!] as const;
      }),
    );
    expect(refs.length).toBeGreaterThan(10);
    expect(
      refs.filter(
        ([, target, section]) =>
          !exists(target) ||
          !sections(target).some(
            (s) => s === section || (s.startsWith(section) && /^\W/.test(s.slice(section.length))),
          ),
      ),
    ).toEqual([]);
  });
});

describe('the limits and defaults DESIGN.md, ARCHITECTURE.md and AUDIT.md (and the README) quote', () => {
  // Each sentence that gives a bound or a default is rebuilt from the constant the code holds it in, so a bound changed
  // in the code and not in the document (or the other way round) fails here.
  /** A constant's value as written in `file`: `const NAME = 4 * 1024 ** 3;`, `= 10 * 60_000;`, `= 1 << 16`. */
  const valueOf = (file: string, pattern: string) => {
    const expr = new RegExp(pattern).exec(read(file))?.[1];
    expect(expr, `${pattern} in ${file}`).toBeDefined();
    const product = (text: string) =>
      text
        .replace(/_/g, '')
        .replace(/(\d+)\s*\*\*\s*(\d+)/g, (_, base: string, power: string) => String(Number(base) ** Number(power)))
        .split('*')
        .reduce((a, factor) => a * Number(factor.trim()), 1);
    const shift = /^(\d+) << (\d+)$/.exec(expr!.trim());
    return shift ? Number(shift[1]) * 2 ** Number(shift[2]) : product(expr!);
  };
  const constant = (file: string, name: string) => valueOf(file, `const ${name} = ([^;]+);`);
  const count = (n: number) => n.toLocaleString('en-US');
  const bytes = (n: number) =>
    n % 1024 ** 3 === 0 ? `${n / 1024 ** 3} GiB` : n % 1024 ** 2 === 0 ? `${n / 1024 ** 2} MiB` : `${n / 1024} KiB`;
  const flat = (path: string) => read(path).replace(/\s+/g, ' ');

  it.each([
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `free text of at most ${count(constant('manifests/log/abstract-log.ts', 'MAX_GRANT_BY_UNITS'))} UTF-16 code units, \`MAX_GRANT_BY_UNITS\``,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `at most \`MAX_HEAD_LEAD_MS\` (${constant('src/ledger/ledger.ts', 'MAX_HEAD_LEAD_MS') / 60_000} min) ahead`,
    ],
    [
      'docs/DESIGN.md',
      (): string =>
        `dated at most ${constant('src/ledger/ledger.ts', 'MAX_HEAD_LEAD_MS') / 60_000} min ahead of this host's clock`,
    ],
    [
      'docs/AUDIT.md',
      (): string =>
        `unless that head is dated over ${constant('src/ledger/ledger.ts', 'MAX_HEAD_LEAD_MS') / 60_000} min ahead of its clock`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `a summary of ${bytes(constant('src/summary/summary.ts', 'STREAM_DECODE_FROM'))} or more (\`STREAM_DECODE_FROM\``,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => {
        const external = constant('src/summary/decoder.ts', 'EXTERNAL_TEXT_FROM');
        expect(read('src/summary/decoder.ts')).toContain(
          'const SLICED_TEXT_FROM = Math.ceil(EXTERNAL_TEXT_FROM * 0.9);',
        );
        return `from ${count(Math.ceil(external * 0.9))} bytes (90% of Node's ${count(external)}-byte bound`;
      },
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `Summaries up to \`inlineSummaryBytes\` (default ${bytes(constant('src/ledger/ledger.ts', 'DEFAULT_INLINE_SUMMARY_BYTES'))})`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => `re-signs (at most ${constant('src/ledger/ledger.ts', 'MAX_APPEND_ATTEMPTS')} attempts)`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => `sign again (up to ${constant('src/ledger/ledger.ts', 'MAX_APPEND_ATTEMPTS')} attempts)`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `(\`HeadsNodeCache\`, ${count(valueOf('manifests/log/level/session-heads.ts', 'private readonly limit = ([^,)]+)'))} nodes`,
    ],
    ['docs/ARCHITECTURE.md', () => `(at most ${constant('src/ops/export.ts', 'CUT_ATTEMPTS')} times`],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `the trees its own transactions committed (the last ${constant('manifests/log/pg/log.ts', 'GROWTHS_KEPT')})`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => {
        expect(constant('manifests/log/pg/log.ts', 'APPEND_TRANSACTIONS')).toBe(2);
        return `at most two transactions of appends at once`;
      },
    ],
    ['docs/ARCHITECTURE.md', () => `(\`appendMany\`, up to ${constant('manifests/log/pg/log.ts', 'MAX_BATCH')}, one`],
    [
      'docs/DESIGN.md',
      (): string =>
        `only staging files over ${constant('src/ledger/open.ts', 'STAGING_LEFTOVER_MS') / 60_000} minutes old are removed`,
    ],
    [
      'docs/DESIGN.md',
      (): string =>
        `fields it does not know ignored, up to ${constant('manifests/crypto/envelope.ts', 'MAX_SIGNATURES')} signatures`,
    ],
    [
      'docs/DESIGN.md',
      (): string =>
        `naming no owner, after ${valueOf('src/ledger/checkpoint-pin.ts', "'the pinned checkpoint'[^}]*staleMs: ([\\d_]+)") / 1000} s untouched`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => {
        expect(valueOf('src/ledger/file-lock.ts', 'const staleMs = options.staleMs \\?\\? ([\\d_]+);')).toBe(120_000);
        expect(read('src/keys/keyring.ts')).not.toMatch(/staleMs/);
        return `another host's, or one naming no owner, when it was not touched for two minutes`;
      },
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => {
        expect(valueOf('src/witness/state.ts', 'staleMs: ([\\d_]+)')).toBe(60_000);
        return `naming no owner, after a minute untouched`;
      },
    ],
    // Checked by hand against the code once, then held here (each phrase rebuilt from the constant it quotes).
    [
      'docs/DESIGN.md',
      (): string => `is larger than ${bytes(constant('src/ledger/root-format.ts', 'MAX_ROOT_FORMAT_BYTES'))}`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `LevelDB copies an inline blob of up to ${bytes(constant('manifests/log/level/tables.ts', 'SYNC_READ_MAX_BYTES'))} out synchronously`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `So is a published summary stored inline of up to ${bytes(constant('src/ledger/ledger.ts', 'SYNC_HASH_MAX_BYTES'))}`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `(\`indexedHeads\`, ${count(constant('manifests/log/level/log.ts', 'INDEXED_HEADS_KEPT'))} sessions)`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => `nesting deeper than ${constant('src/summary/decoder.ts', 'MAX_DEPTH')} levels`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `after ${constant('store/pg/db.ts', 'CANCEL_RETRY_FIRST_MS')} ms and then doubling pauses up to ${constant('store/pg/db.ts', 'CANCEL_RETRY_MAX_MS') / 1000} s`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => `not at its ${constant('store/pg/db.ts', 'CONNECT_TIMEOUT_MS') / 1000} s connect timeout`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `Strings of ${count(constant('manifests/encoding/canonical.ts', 'MID_STRING'))} UTF-16 units or more`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `Summaries with ${bytes(constant('src/summary/summary.ts', 'STREAM_SUMMARY_FROM'))} of text or more`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => `a chunk's lines, up to ${count(constant('manifests/audit/verify-line.ts', 'RUN_LINES'))}, in one`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => {
        expect(constant('store/fs/blob-io.ts', 'BLOCKS')).toBe(8);
        return `copied into eight reused ${bytes(constant('store/fs/blob-io.ts', 'BLOCK'))} blocks`;
      },
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => `A flush-behind \`fsync\` starts every ${bytes(constant('store/fs/blob-io.ts', 'FLUSH_BEHIND'))}`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `A \`put\` of one buffer up to ${bytes(constant('store/fs/blob-io.ts', 'FLUSH_BEHIND'))} is one write`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `${bytes(constant('store/fs/blob-io.ts', 'BLOCK'))} blocks on the filesystem, ${bytes(constant('store/pg/blob-store.ts', 'CHUNK'))} rows in PostgreSQL`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string => {
        expect(constant('manifests/audit/line-dispatch.ts', 'BATCHES_PER_WORKER')).toBe(2);
        return `(two in flight per worker)`;
      },
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `at most 2 × \`timeoutMs\` + ${valueOf('src/ledger/witnessing.ts', 'Math\\.min\\(2 \\* timeoutMs \\+ (\\d+), MAX_TIMER_MS\\)') / 1000} s (\`cosignWaitMs\`)`,
    ],
    [
      'docs/ARCHITECTURE.md',
      (): string =>
        `a holder waited for more than ${valueOf('src/ledger/file-lock.ts', 'options\\.waitMs \\?\\? ([\\d_]+)') / 1000} s is \`LOCKED\``,
    ],
    // The README's witnesses row said retries double "up to 60 s": a `retryMs` longer than that is kept (retryCeiling).
    ...(['README.md', 'docs/AUDIT.md'] as const).map(
      (doc) =>
        [
          doc,
          (): string => {
            const first = valueOf('src/ledger/witnessing.ts', 'options\\.retryMs \\?\\? ([\\d_]+);');
            const cap = valueOf('src/ledger/witnessing.ts', 'Math\\.max\\(([\\d_]+), retryMs\\)');
            expect([retryCeiling(first, 0), retryCeiling(first, 20), retryCeiling(5 * cap, 3)]).toEqual([
              first,
              cap,
              5 * cap,
            ]);
            return doc === 'README.md'
              ? `retries from ${first} ms, doubling up to ${cap / 1000} s or to a longer \`retryMs\`, each wait a random time from half of it to all of it`
              : `(${first / 1000} s doubling to ${cap / 1000} s, or to \`retryMs\` when longer, each wait a random time from half of it to all of it`;
          },
        ] as const,
    ),
    // ARCHITECTURE.md said "by default the request deadline, 5 s": a deadline above 5 s is not waited for whole.
    ...(['docs/ARCHITECTURE.md', 'docs/AUDIT.md', 'README.md'] as const).map(
      (doc) =>
        [
          doc,
          (): string => {
            const cap = valueOf(
              'src/ledger/witnessing.ts',
              'options\\.closeWaitMs \\?\\? Math\\.min\\(this\\.timeoutMs, (\\d+)\\)',
            );
            if (doc === 'README.md')
              return `(\`closeWaitMs\`: by default the request deadline, at most ${cap / 1000} s)`;
            return doc === 'docs/AUDIT.md'
              ? `\`closeWaitMs\` to end (default \`timeoutMs\`, at most ${cap / 1000} s;`
              : `up to \`closeWaitMs\` (by default the request deadline, at most ${cap / 1000} s:`;
          },
        ] as const,
    ),
    [
      'docs/AUDIT.md',
      (): string =>
        `keeps at most \`maxFindings\` (default ${count(valueOf('manifests/audit/verify-chain.ts', 'options\\.maxFindings \\?\\? ([\\d_]+)'))})`,
    ],
    [
      'docs/AUDIT.md',
      (): string =>
        `\`--max-bundle-bytes\` (default ${bytes(constant('manifests/audit/auditor-options.ts', 'DEFAULT_MAX_MANIFESTS_BYTES'))})`,
    ],
    [
      'docs/AUDIT.md',
      (): string =>
        `each line split from bytes with a ${bytes(constant('manifests/crypto/envelope.ts', 'MAX_ENVELOPE_BYTES'))} bound`,
    ],
    [
      'docs/AUDIT.md',
      (): string => `the first ${count(constant('manifests/audit/verify-chain.ts', 'MAX_FORK_EVIDENCE'))} forks`,
    ],
    [
      'docs/AUDIT.md',
      (): string =>
        `batches are cut at ${count(valueOf('manifests/audit/verify-chain.ts', 'options\\.batchSize \\?\\? (\\d+)'))} lines or ${bytes(constant('manifests/audit/verify-chain.ts', 'MAX_BATCH_BYTES'))}`,
    ],
    [
      'docs/AUDIT.md',
      (): string =>
        `${bytes(valueOf('src/witness/server.ts', 'options\\.maxBodyBytes \\?\\? ([^;]+);'))} of body (413; \`--max-body-bytes\`) and ${valueOf('src/witness/server.ts', 'options\\.requestTimeoutMs \\?\\? ([^;]+);') / 1000} s for the whole request`,
    ],
    [
      'docs/AUDIT.md',
      (): string => `at most ${valueOf('src/witness/server.ts', 'server\\.maxConnections = (\\d+);')} are open at once`,
    ],
    [
      'docs/AUDIT.md',
      (): string =>
        `a store lists up to ${count(valueOf('manifests/format/trust.ts', 'keys: z\\.array\\(trustedKeySchema\\)\\.max\\(([\\d_]+)\\)'))} of each`,
    ],
  ] as const)('%s: %#', (doc, said) => {
    const sentence = said();
    expect(flat(doc).includes(sentence), `${doc} says "${sentence}"`).toBe(true);
  });
});

describe("docs/AUDIT.md's bundle format", () => {
  const table = read('docs/AUDIT.md').split('## Bundle format, version 1')[1]!.split('\n\n')[1]!;
  const row = (name: string) => table.split('\n').find((l) => l.startsWith(`| \`${name}\``)) ?? '';

  it("names a bundle's files as bundle.ts names them, and no other", async () => {
    const bundle = (await import('../manifests/audit/bundle.js')) as Record<string, unknown>;
    const code = [
      ...['HEADER', 'MANIFESTS', 'CHECKPOINT', 'PROOFS', 'CONSISTENCY', 'HEADS'].map((n) => bundle[`BUNDLE_${n}_FILE`]),
      `${bundle.BUNDLE_BLOB_DIR as string}/<64 hex>`,
    ];
    const said = [...table.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!);
    expect([...said].sort()).toEqual([...code].sort());
  });

  it("gives bundle.json's fields as bundleHeaderSchema has them, which are optional, and its format and version", async () => {
    const { bundleHeaderSchema, BUNDLE_FORMAT, BUNDLE_VERSION } = await import('../manifests/audit/bundle.js');
    type Shape = Record<string, { safeParse: (v: unknown) => { success: boolean }; shape?: Shape }>;
    const form = (shape: Shape): string =>
      Object.entries(shape)
        .map(([k, v]) => {
          if (k === 'format') return `format: "${BUNDLE_FORMAT}"`;
          if (k === 'version') return `version: ${BUNDLE_VERSION}`;
          if (v.shape) return `${k}: { ${form(v.shape)} }`;
          return v.safeParse(undefined).success ? `${k}?` : k;
        })
        .join(', ');
    expect(row('bundle.json')).toContain(`\`{ ${form(bundleHeaderSchema.shape as unknown as Shape)} }\``);
  });

  it("gives a heads.jsonl proof's fields as SessionHeadProof has them", () => {
    const type = /export interface SessionHeadProof \{([\s\S]*?)\n\}/.exec(
      read('manifests/tlog/session-heads.ts'),
    )?.[1];
    const fields = [...(type ?? '').matchAll(/^ {2}(\w+)(\??):/gm)].map((m) => `"${m[1]}"${m[2]}`);
    expect(fields.length).toBeGreaterThan(2);
    expect(row('heads.jsonl')).toContain(`"proof": { ${fields.join(', ')} }`);
  });
});

describe('the LevelDB records and PostgreSQL tables the documents name', () => {
  const documents = [
    ...readdirSync(new URL('../docs/', import.meta.url)).map((f) => `docs/${f}`),
    ...['src', 'store', 'manifests', 'web', 'benchmarks'].map((layer) => `${layer}/README.md`),
  ];
  const text = documents.map(read).join('\n');
  const level = ['log.ts', 'tables.ts', 'tree.ts', 'session-heads.ts']
    .map((f) => read(`manifests/log/level/${f}`))
    .join('\n');

  it('are LevelDB keys the embedded log writes: each prefix, and each whole key named', () => {
    // `k!<keyId>`, `x!<depth>!<prefix hex>`: the part before the first placeholder; `m!origin`, `n!size`: whole.
    const keys = [...new Set([...text.matchAll(/`([a-z]![^`<]*)(?:<[^`]*)?`/g)].map((m) => m[1]!))];
    expect(keys.length).toBeGreaterThan(8);
    expect(keys.filter((key) => !level.includes(`'${key}`) && !level.includes(`\`${key}`))).toEqual([]);
  });

  it('are tables and columns of the PostgreSQL schemas', () => {
    // store/pg/db.ts: the migrations table (`handoff_ledger_migrations`), which `PgDatabase.migrate` makes.
    const schemas = [read('manifests/log/pg/schema.ts'), read('store/pg/blob-store.ts'), read('store/pg/db.ts')].join(
      '\n',
    );
    const tables = new Set(
      [...schemas.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?\{schema\}\.(\w+)/g)].map((m) => m[1]!),
    );
    const columns = new Set(
      [...schemas.matchAll(/^\s+(\w+) (?:text|bigint|integer|smallint|bytea|boolean|timestamptz)\b/gm)].map(
        (m) => m[1]!,
      ),
    );
    expect([tables.size > 8, columns.size > 10]).toEqual([true, true]);
    const flat = text.replace(/\s+/g, ' ');
    // Named as a table (`watermarks` table, table `session_heads`, an `inline_blobs` row, `log_meta`, `signing_keys`:
    // the snake_case names the documents give beside a LevelDB record) or as a column (the `id` column of `entries`).
    const named = [
      ...[...flat.matchAll(/`(\w+)` (?:table|row)\b|\btable `(\w+)`|column of `(\w+)`|, `([a-z]+_[a-z_]+)`[ )]/g)].map(
        (m) => ['table', m[1] ?? m[2] ?? m[3] ?? m[4]] as const,
      ),
      ...[...flat.matchAll(/`(\w+)` column/g)].map((m) => ['column', m[1]] as const),
      ...[...flat.matchAll(/`([a-z]+_[a-z_]+)(?: '[^']*')?`/g)]
        .map((m) => m[1]!)
        .filter(
          (n) => !['application_name', 'pg_cancel_backend', 'outside_allowed_roots', 'submit_handoff'].includes(n),
        )
        .map((n) => ['table', n] as const),
    ];
    expect(named.length).toBeGreaterThan(5);
    expect(named.filter(([kind, name]) => !(kind === 'table' ? tables : columns).has(name!))).toEqual([]);
  });
});

describe('the codes and constants the documents name', () => {
  // A code an operator greps for or an auditor matches on must be one the library gives: a renamed or mistyped code
  // (BLOB_CORRUPT for BLOB_INTEGRITY) in DESIGN.md, ARCHITECTURE.md, AUDIT.md or a layer's README sends them nowhere.
  it("are the library's codes, constants it declares, variables it reads, or the system's and SQL's words", () => {
    const files = (dir: string): string[] =>
      readdirSync(new URL(`../${dir}`, import.meta.url), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(`${dir}${e.name}/`) : e.name.endsWith('.ts') ? [`${dir}${e.name}`] : [],
      );
    const sources = ['store/', 'manifests/', 'src/', 'web/'].flatMap(files).map(read);
    const known = new Set([
      // Codes: every quoted upper-case word of the code (the closed unions, FINDING_CODES' and FSCK_STORE_CODES' keys
      // are each declared so or as a member), constants by their declarations, the variables the CLI reads.
      ...sources.flatMap((s) => [...s.matchAll(/'([A-Z][A-Z0-9_]{3,})'/g)].map((m) => m[1]!)),
      ...sources.flatMap((s) => [...s.matchAll(/^ {2}([A-Z][A-Z0-9_]{3,}):/gm)].map((m) => m[1]!)),
      ...sources.flatMap((s) => [...s.matchAll(/\bconst ([A-Z][A-Z0-9_]{3,})\b/g)].map((m) => m[1]!)),
      ...sources.flatMap((s) => [...s.matchAll(/\benv\.(HANDOFF_LEDGER_\w+)/g)].map((m) => m[1]!)),
      ...['BEGIN', 'COMMIT', 'DELETE', 'O_DSYNC', 'O_NOFOLLOW', 'EEXIST', 'EADDRINUSE', 'RENAME_NOREPLACE'],
    ]);
    const documents = [
      ...readdirSync(new URL('../docs/', import.meta.url)).map((f) => `docs/${f}`),
      ...['src', 'store', 'manifests', 'web'].map((layer) => `${layer}/README.md`),
    ];
    const named = documents.flatMap((doc) =>
      [...read(doc).matchAll(/`([A-Z][A-Z0-9_]{3,})`/g)].map((m) => [doc, m[1]!] as const),
    );
    expect(named.length).toBeGreaterThan(200);
    expect(named.filter(([, name]) => !known.has(name))).toEqual([]);
  });
});

describe("ARCHITECTURE.md's count of shard directory flushes", () => {
  // It said a first-level shard found already there is fsynced with its parent at its first use, "at most 257 flushes
  // in a process's life": each first use flushes two directories (the shard and blobs-v1/blake3/), 256 shards 512.
  it('is what a store flushes at the first use of each first-level shard it finds, times 256 shards', async () => {
    const { FsBlobStore } = await import('../store/fs/blob-store.js');
    const { nodeFsOps } = await import('../store/fs/ops.js');
    const { loadHashBackend } = await import('../store/hash/backends.node.js');
    const hash = await loadHashBackend('auto');
    const root = tempDir();
    const blobs = ['one', 'two', 'three'].map((s) => new TextEncoder().encode(`a blob ${s} `.repeat(50)));
    const first = await FsBlobStore.open(root, { hash });
    const digests = [];
    for (const b of blobs) digests.push((await first.store.put(b)).digest);
    await first.store.close();
    const shards = new Set(digests.map((d) => d.slice(7, 9)));
    expect(shards.size).toBe(blobs.length);
    // A new store on the root (a new process): each blob's first-level shard is found there.
    const synced: string[] = [];
    const fs = { ...nodeFsOps, fsyncDir: (path: string) => (synced.push(path), nodeFsOps.fsyncDir(path)) };
    const again = await FsBlobStore.open(root, { hash, fs });
    synced.length = 0;
    for (const b of [...blobs, ...blobs]) await again.store.put(b);
    await again.store.close();
    const leaf = /\/blobs-v1\/blake3\/\w\w\/\w\w$/;
    const perShard = synced.filter((p) => !leaf.test(p)).length / shards.size;
    expect(perShard).toBe(2);
    const said = read('docs/ARCHITECTURE.md').replace(/\s+/g, ' ');
    expect(/at most ([\d,]+) flushes in a process's life/.exec(said)?.[1]).toBe(
      (perShard * 256).toLocaleString('en-US'),
    );
  });
});

describe("the README's lost checkpoint key file", () => {
  // Walking the key rotation runbook: it said a lost checkpoint key file "is made anew at the next open, by any
  // command", and the daily `fsck` it schedules refused instead (a diagnosing open makes no key): KEY_INVALID.
  const lost = readme.split('A lost checkpoint key file\n')[1]!.split('; the lost key')[0]!.replace(/\s+/g, ' ');
  const cliNote = readme.split("Any open makes the host's *checkpoint* key")[1]!.split(')\n')[0]!.replace(/\s+/g, ' ');

  it('is made anew by any command but fsck, which refuses KEY_INVALID naming the file and makes none', async () => {
    expect(lost).toContain('by any command but `fsck`');
    expect(lost).toContain('`KEY_INVALID` naming the missing file');
    expect(cliNote).toContain("but `fsck`'s");
    expect(cliNote).toContain('`KEY_INVALID` naming the missing file');
    const root = join(tempDir(), 'store');
    const at = ['--root', root, '--host', 'h1'];
    expect(await main(['init', ...at], captureIo().io)).toBe(0);
    const file = readdirSync(join(root, 'keys')).find((f) => f.startsWith('checkpoint-'))!;
    rmSync(join(root, 'keys', file));
    const fsck = captureIo();
    expect(await main(['fsck', ...at], fsck.io)).toBe(1);
    expect(fsck.stderr()).toMatch(
      new RegExp(`^handoff-ledger: KEY_INVALID: this host's checkpoint key file ".*${file}" is missing: `),
    );
    expect(existsSync(join(root, 'keys', file))).toBe(false);
    // The command the README names makes it anew, and fsck then runs.
    const made = captureIo();
    expect(await main(['checkpoint', ...at], made.io)).toBe(0);
    expect(made.stderr()).toContain('checkpoint key file of host "h1" was missing');
    expect(existsSync(join(root, 'keys', file))).toBe(true);
    expect(await main(['fsck', ...at], captureIo().io)).toBe(0);
  });

  it("is, on a restored root, fsck's refusal: what to restore from where, and the command that makes it anew", async () => {
    // fsck's refusal advised `init` or `publish` (a summary published to make a key) and `keys revoke` to end the lost
    // key: an open that makes a checkpoint key ends the lost one's window itself, and a revocation fails the
    // checkpoints of every bundle exported before. The README's words: the file from the newest key backup, or another
    // command first, `handoff-ledger checkpoint`.
    const root = join(tempDir(), 'store');
    const at = ['--root', root, '--host', 'h1'];
    expect(await main(['init', ...at], captureIo().io)).toBe(0);
    const keyBackup = join(tempDir(), 'keys');
    cpSync(join(root, 'keys'), keyBackup, { recursive: true });
    const file = readdirSync(join(root, 'keys')).find((f) => f.startsWith('checkpoint-'))!;
    rmSync(join(root, 'keys', file)); // the root restored, its keys/ from a backup that lacks the checkpoint key
    const fsck = captureIo();
    expect(await main(['fsck', ...at], fsck.io)).toBe(1);
    const said = fsck.stderr();
    expect(said).toContain("restore the file from the newest backup of this root's keys");
    expect(said).toContain('any other command on this root (`handoff-ledger checkpoint`, which publishes nothing)');
    expect(lost).toContain('`handoff-ledger checkpoint`');
    expect(said).not.toMatch(/`init` or `publish`|`keys revoke <keyId>` ends the lost one/);
    cpSync(join(keyBackup, file), join(root, 'keys', file));
    expect(await main(['fsck', ...at], captureIo().io)).toBe(0);
  });
});

describe("the README's root restored with its own keys, from before a rotation", () => {
  // Walking "Backups": such a root signs with the key rotated out again, fsck finds nothing wrong, and the README named
  // `KEY_EXPIRED` alone for the auditors' verify; a manifest it refuses that was a session's head leaves that chain
  // ending before the head the checkpoint commits, which step 10 reports too (docs/AUDIT.md).
  const said = readme
    .split('every trust file exported since refuses (')[1]!
    .split('); with the current ones')[0]!
    .replace(/\s+/g, ' ');
  const named = [...said.matchAll(/`([A-Z][A-Z_]+)`/g)].map((m) => m[1]!).sort();

  it('is KEY_EXPIRED in verify with the current trust file, and the head finding of a full or a filtered bundle', async () => {
    const root = join(tempDir(), 'store');
    const at = ['--root', root, '--host', 'h1'];
    const scope = { principal: 'alice', session: 's1', run: 'r' };
    const publish = async (n: number) => {
      const ledger = await openLedger({ root, host: 'h1' });
      await ledger.publish(scope, { task: `t${n}`, state: 's', nextSteps: [] });
      await ledger.close();
    };
    await publish(0);
    await publish(1);
    const backup = join(tempDir(), 'root-backup');
    cpSync(root, backup, { recursive: true });
    expect(await main(['keys', 'rotate', ...at], captureIo().io)).toBe(0);
    await publish(2);
    const trust = join(tempDir(), 'trust.json');
    expect(await main(['keys', 'export', ...at, '--out', trust], captureIo().io)).toBe(0);
    // Restored whole, keys/ and trust.json of the backup included; a publish signs with the key rotated out.
    rmSync(root, { recursive: true });
    cpSync(backup, root, { recursive: true });
    await publish(3);
    expect(await main(['fsck', ...at], captureIo().io)).toBe(0);
    const codes = async (filter: string[]) => {
      const out = join(tempDir(), 'bundle');
      expect(await main(['export', ...at, '--out', out, ...filter], captureIo().io)).toBe(0);
      const verified = captureIo();
      expect(await main(['verify', out, '--trust', trust, ...filter, '--json'], verified.io)).toBe(1);
      return Object.keys((JSON.parse(verified.stdout()) as { counts: { byCode: object } }).counts.byCode);
    };
    const full = await codes([]);
    const filtered = await codes(['--session', 's1']);
    expect(full.sort()).toEqual(['KEY_EXPIRED', 'SESSION_HEAD_MISMATCH']);
    expect(filtered.sort()).toEqual(['KEY_EXPIRED', 'SESSION_TAIL_MISSING']);
    expect(named).toEqual([...new Set([...full, ...filtered])].sort());
  });
});

describe("the README's telemetry of the CLI", () => {
  // Walking "Telemetry" as an operator: the CLI registers no SDK, and the README did not say how its commands are
  // recorded. The command it shows, with a module that registers an SDK and shuts it down on beforeExit, records them.
  const shown = /`NODE_OPTIONS='--import \.\/otel\.mjs' handoff-ledger ([^`]+)`/.exec(
    readme.split('**Telemetry.**')[1]!.split('| spans |')[0]!.replace(/\s+/g, ' '),
  );

  it('is recorded through an SDK preloaded with NODE_OPTIONS, which the command lets flush on beforeExit', async () => {
    expect(shown, 'the README shows the preload command').not.toBeNull();
    const dir = tempDir();
    const root = join(dir, 'store');
    const ledger = await openLedger({ root, host: 'h1' });
    await ledger.publish({ principal: 'alice', session: 's1', run: 'r' }, { task: 't', state: 's', nextSteps: [] });
    await ledger.close();
    const from = JSON.stringify(new URL('../package.json', import.meta.url).pathname);
    writeFileSync(
      join(dir, 'otel.mjs'),
      `import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
const require = createRequire(${from});
const { trace, metrics } = require('@opentelemetry/api');
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base');
const { MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality } =
  require('@opentelemetry/sdk-metrics');
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
trace.setGlobalTracerProvider(tracerProvider);
const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3600000 });
const meterProvider = new MeterProvider({ readers: [reader] });
metrics.setGlobalMeterProvider(meterProvider);
let done = false;
process.on('beforeExit', async () => {
  if (done) return;
  done = true;
  const names = spans.getFinishedSpans().map((s) => s.name);
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
  const measured = exporter.getMetrics().flatMap((r) => r.scopeMetrics.flatMap((m) => m.metrics.map((x) => x.descriptor.name)));
  writeFileSync('recorded.json', JSON.stringify({ names, measured }));
});
`,
    );
    const args = shown![1]!.split(' ');
    const r = spawnSync(process.execPath, [new URL('../dist/src/cli/main.js', import.meta.url).pathname, ...args], {
      cwd: dir,
      env: {
        ...process.env,
        NODE_OPTIONS: '--import ./otel.mjs',
        HANDOFF_LEDGER_ROOT: root,
        HANDOFF_LEDGER_HOST: 'h1',
      },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const recorded = JSON.parse(readFileSync(join(dir, 'recorded.json'), 'utf8')) as Record<string, string[]>;
    expect(recorded.names).toEqual([`handoff_ledger.${args[0]}`]);
    expect(recorded.measured).toContain(`handoff_ledger.${args[0]}.duration`);
  });
});
