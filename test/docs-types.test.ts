/**
 * The documentation's TypeScript examples type-check as a user's code: every ```ts block of README.md and of docs/*.md,
 * and every JSDoc `@example` of src/, store/ and manifests/ (what an editor shows a user on hover), is compiled as a
 * module of its own under `strict`, `noUncheckedIndexedAccess` and `exactOptionalPropertyTypes`, with `moduleResolution`
 * `nodenext` and `bundler`, by the repo's own `typescript`. docs-examples.test.ts runs the README's blocks but under
 * `@ts-nocheck`, and docs-imports.test.ts and test/package/ compile their imports only: a renamed option or a changed
 * return type left a block that no longer compiles for its reader. Its `handoff-ledger…` imports resolve (tsconfig
 * `paths`) to the source of the entry points package.json `exports` names, so no build is needed. What a block leaves
 * to the reader (a ledger, a scope, a model, texts) is declared before it, typed from the library's exported types
 * (never `any`), so a change of those types reaches the block. One program per resolution holds every block; only the
 * blocks are checked.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROOT, sourceOf } from './support/entry-source.js';

interface Block {
  doc: string; // README.md, docs/AUDIT.md
  line: number; // the doc's line of the block's first line (1-based)
  first: string; // its first line: how it is named here
  code: string;
}

const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));

function blocksOf(doc: string, text = readFileSync(join(ROOT, doc), 'utf8')): Block[] {
  return [...text.matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```/gm)].map((m) => ({
    doc,
    line: text.slice(0, m.index).split('\n').length + 1,
    first: m[1]!.split('\n')[0]!,
    code: m[1]!,
  }));
}

/** The source directories whose JSDoc `@example`s are a user's code too (what an editor shows on hover). */
const SOURCE_DIRS = ['src', 'store', 'manifests'];

/**
 * Every JSDoc `@example` of the source as a block: its ` * ` prefixes removed, a ```ts fence around it (the page's has
 * one) left out as an empty line, so a diagnostic's line is the source file's.
 */
function examplesOf(file: string, text = readFileSync(join(ROOT, file), 'utf8')): Block[] {
  return [...text.matchAll(/@example\n((?: \*(?! @)(?: .*)?\n)+?) \*(?:\/| @)/g)].map((m) => {
    const code = m[1]!.replace(/^ \* ?/gm, '').replace(/^```.*$/gm, '');
    return {
      doc: file,
      line: text.slice(0, m.index).split('\n').length + 1,
      first: code.split('\n').find((l) => l.trim() !== '')!,
      code,
    };
  });
}

const SOURCES = SOURCE_DIRS.flatMap((dir) =>
  readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => `${dir}/${f}`)
    .sort(),
);

/**
 * What a block leaves to the reader, each name declared as the reader has it: the library's values imported, its
 * types reached through `__hl` (so a block's own imports of the same names do not clash), the SDK's through `__OpenAI`.
 */
const READER: Record<string, string> = {
  // values of handoff-ledger an earlier block imported
  openLedger: "import { openLedger } from 'handoff-ledger';",
  compact: "import { compact } from 'handoff-ledger';",
  summarySchemaFor: "import { summarySchemaFor } from 'handoff-ledger';",
  normalizeStrictSummary: "import { normalizeStrictSummary } from 'handoff-ledger';",
  // what the Harness has
  ledger: 'declare const ledger: __hl.Ledger;',
  scope: 'declare const scope: __hl.PublishScope;',
  model: 'declare const model: __hl.ModelAdapter;',
  transcript: 'declare const transcript: __hl.ModelMessage[];',
  head: "declare const head: __hl.Receipt['id'] | null;",
  receipt: 'declare const receipt: __hl.Receipt;',
  signal: 'declare const signal: AbortSignal;',
  usedTokens: 'declare const usedTokens: number;',
  contextWindow: 'declare const contextWindow: number;',
  oldSize: 'declare const oldSize: number;',
  apiKey: 'declare const apiKey: string;',
  client: 'declare const client: __OpenAI;',
  messages: 'declare const messages: __OpenAI.ChatCompletionMessageParam[];',
  // an auditor's fetched texts
  hostAKeysText: 'declare const hostAKeysText: string;',
  hostBKeysText: 'declare const hostBKeysText: string;',
  checkpointText: 'declare const checkpointText: string;',
  proofsText: 'declare const proofsText: string;',
  headsText: 'declare const headsText: string;',
  headerText: 'declare const headerText: string;',
  fetchedText: 'declare const fetchedText: string;',
  envelopeLines: 'declare const envelopeLines: string[];',
  // what a JSDoc example takes from the library, the SDKs, or its caller
  shouldCompact: "import { shouldCompact } from 'handoff-ledger';",
  resumeContext: "import { resumeContext } from 'handoff-ledger';",
  ModelMessage: "import type { ModelMessage } from 'handoff-ledger';",
  openaiAdapter: "import { openaiAdapter } from 'handoff-ledger/adapters/openai';",
  anthropicAdapter: "import { anthropicAdapter } from 'handoff-ledger/adapters/anthropic';",
  geminiAdapter: "import { geminiAdapter } from 'handoff-ledger/adapters/gemini';",
  aiSdkAdapter: "import { aiSdkAdapter } from 'handoff-ledger/adapters/ai-sdk';",
  verifyBundle: "import { verifyBundle } from 'handoff-ledger/audit';",
  memoryBundleReader: "import { memoryBundleReader } from 'handoff-ledger/audit';",
  parseTrustStore: "import { parseTrustStore } from 'handoff-ledger/audit';",
  OpenAI: "import OpenAI from 'openai';",
  Anthropic: "import Anthropic from '@anthropic-ai/sdk';",
  GoogleGenAI: "import { GoogleGenAI } from '@google/genai';",
  principal: 'declare const principal: string;',
  session: 'declare const session: string;',
  newTurns: 'declare const newTurns: __hl.ModelMessage[];',
  description: 'declare const description: string;',
  res: "declare const res: import('node:http').ServerResponse;",
  text: 'declare const text: string;',
  json: 'declare const json: string;',
};

/** The names each block leaves to the reader, by doc and first line; a block not named here is given nothing. */
const GIVEN: Record<string, Record<string, string[]>> = {
  'README.md': {
    "import { shouldCompact, compact, resumeContext } from 'handoff-ledger';": [
      'ledger',
      'scope',
      'model',
      'signal',
      'usedTokens',
      'contextWindow',
    ],
    "import OpenAI from 'openai';": ['compact', 'ledger', 'scope', 'transcript', 'head', 'apiKey'],
    "import { compact } from 'handoff-ledger';": ['ledger', 'scope', 'transcript', 'head', 'apiKey'],
    'const completion = await client.chat.completions.create({': [
      'client',
      'messages',
      'ledger',
      'scope',
      'head',
      'summarySchemaFor',
      'normalizeStrictSummary',
    ],
    'const { note, checkpoint } = await ledger.checkpoint();       // signed note; { origin, size, root, extensions }':
      ['ledger', 'receipt', 'oldSize'],
    "import { readFileSync } from 'node:fs';": ['openLedger'],
  },
  'src/ops/auditor-page.ts': { "import { auditorPagePath, readAuditorPage } from 'handoff-ledger/web';": ['res'] },
  'src/ledger/options.ts': { "import { openLedger } from 'handoff-ledger';": [] },
  'src/compaction/should-compact.ts': {
    'shouldCompact({ usedTokens: 140_000, contextWindow: 200_000 }); // true': ['shouldCompact'],
  },
  'src/compaction/compact.ts': {
    "const system: ModelMessage = { role: 'system', content: 'You are a coding assistant.' };": [
      'ModelMessage',
      'shouldCompact',
      'compact',
      'resumeContext',
      'ledger',
      'scope',
      'model',
      'signal',
      'usedTokens',
      'contextWindow',
    ],
  },
  'src/compaction/resume-context.ts': {
    'const resumed = await ledger.resume({ principal, session });': [
      'resumeContext',
      'ledger',
      'principal',
      'session',
      'newTurns',
    ],
  },
  'src/summary/schema-forms.ts': {
    "const tool = { name: 'submit_handoff', description, input_schema: summarySchemaFor('anthropic') };": [
      'summarySchemaFor',
      'description',
    ],
  },
  'src/adapters/openai.ts': {
    "const model = openaiAdapter({ client: new OpenAI(), model: 'gpt-5-mini' });": [
      'openaiAdapter',
      'OpenAI',
      'compact',
      'ledger',
      'scope',
      'transcript',
    ],
  },
  'src/adapters/anthropic.ts': {
    "const model = anthropicAdapter({ client: new Anthropic(), model: 'claude-sonnet-4-6' });": [
      'anthropicAdapter',
      'Anthropic',
      'compact',
      'ledger',
      'scope',
      'transcript',
    ],
  },
  'src/adapters/gemini.ts': {
    "const model = geminiAdapter({ client: new GoogleGenAI({ apiKey }), model: 'gemini-2.5-flash' });": [
      'geminiAdapter',
      'GoogleGenAI',
      'apiKey',
      'compact',
      'ledger',
      'scope',
      'transcript',
    ],
  },
  'src/adapters/ai-sdk.ts': {
    "import { openai } from '@ai-sdk/openai';": ['aiSdkAdapter', 'compact', 'ledger', 'scope', 'transcript'],
  },
  'manifests/audit/index.ts': {
    "// A trust file that lists checkpoint keys (keys export writes them) expects the bundle's checkpoint.note: without":
      ['verifyBundle', 'memoryBundleReader', 'parseTrustStore', 'checkpointText', 'text', 'json'],
  },
  'docs/AUDIT.md': {
    "import { verifyBundle, verifyChain, memoryBundleReader, mergeTrust, parseTrustStore } from 'handoff-ledger/audit';":
      [
        'hostAKeysText',
        'hostBKeysText',
        'checkpointText',
        'proofsText',
        'headsText',
        'headerText',
        'fetchedText',
        'envelopeLines',
      ],
  },
};

function preludeOf(names: string[]): string {
  return [
    "import type * as __hl from 'handoff-ledger';",
    "import type __OpenAI from 'openai';",
    ...names.map((name) => {
      const declared = READER[name];
      if (declared === undefined) throw new Error(`no declaration of ${name} for the reader`);
      return declared;
    }),
  ].join('\n');
}

/** A block as a module of its own, in the checkout (so `openai` and the others resolve from its node_modules). */
interface Unit {
  block: Block;
  file: string;
  text: string;
  preludeLines: number;
}

function unitOf(block: Block, name: string): Unit {
  const prelude = preludeOf(GIVEN[block.doc]?.[block.first] ?? []);
  return {
    block,
    file: join(ROOT, `.docs-types-${name}.ts`),
    text: `${prelude}\n${block.code}\nexport {};\n`,
    preludeLines: prelude.split('\n').length,
  };
}

/**
 * A user's settings: strict, ES modules, Node's types; `handoff-ledger…` onto the entry points' source. With
 * `noUncheckedIndexedAccess` too (this repo's own, and in the strictest presets users start from): the Chat Completions
 * block destructured `completion.choices[0]`, which such a project refuses (TS2339 on `Choice | undefined`). And with
 * `exactOptionalPropertyTypes` (in those presets too): the adapter over fetch returned `text: message.content ??
 * undefined`, which a `text?: string` refused (TS2322), and passed fetch `signal: request.signal`, possibly undefined
 * where fetch takes `AbortSignal | null` (TS2379); test/package/ holds every optional property to taking `undefined`.
 */
function optionsFor(resolution: 'nodenext' | 'bundler', specifiers: string[]): ts.CompilerOptions {
  return {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts'], // Node 20's
    types: ['node'],
    skipLibCheck: true,
    noEmit: true,
    ...(resolution === 'nodenext'
      ? { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext }
      : { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler }),
    paths: Object.fromEntries(specifiers.map((s) => [s, [sourceOf(s)]])),
  };
}

/** What is wrong with a block, one line per diagnostic: the doc, its first line, where and what tsc says. */
function failuresOf(program: ts.Program, unit: Unit, resolution: string): string[] {
  const source = program.getSourceFile(unit.file)!;
  const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
  return diagnostics.map((d) => {
    const at = d.start === undefined ? undefined : source.getLineAndCharacterOfPosition(d.start).line;
    const where =
      at === undefined
        ? ''
        : at < unit.preludeLines
          ? ' (in what the test declares for it)'
          : ` at ${unit.block.doc}:${unit.block.line + at - unit.preludeLines}`;
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    // a name the doc leaves to the reader: declared for it in GIVEN
    const hint = d.code === 2304 ? ' (left to the reader? name it in GIVEN of test/docs-types.test.ts)' : '';
    return `${unit.block.doc} block "${unit.block.first}" (${resolution})${where}: TS${d.code} ${message}${hint}`;
  });
}

/** The `handoff-ledger…` specifiers the units import. */
function specifiersOf(units: Unit[]): string[] {
  return [...new Set(units.flatMap((u) => [...u.text.matchAll(/from\s+'(handoff-ledger[^']*)'/g)].map((m) => m[1]!)))];
}

/** One program over the given units; every file else comes from the disk. */
function check(units: Unit[], resolution: 'nodenext' | 'bundler') {
  const options = optionsFor(resolution, specifiersOf(units));
  const byFile = new Map(units.map((u) => [u.file, u]));
  const host = ts.createCompilerHost(options, true);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (f) => byFile.has(f) || fileExists.call(host, f);
  host.readFile = (f) => byFile.get(f)?.text ?? readFile.call(host, f);
  host.getSourceFile = (f, language, ...rest) => {
    const unit = byFile.get(f);
    return unit ? ts.createSourceFile(f, unit.text, language, true) : getSourceFile.call(host, f, language, ...rest);
  };
  const program = ts.createProgram({ rootNames: [...byFile.keys()], options, host });
  const general = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()].map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  );
  return { program, general, failures: (unit: Unit) => failuresOf(program, unit, resolution) };
}

const blocks = [...DOCS.flatMap((doc) => blocksOf(doc)), ...SOURCES.flatMap((file) => examplesOf(file))];
const examples = blocks.filter((b) => !b.doc.endsWith('.md'));
const units = blocks.map((b, i) => unitOf(b, `${b.doc.replace(/\W/g, '-')}-${i}`));

// A copy of a block with a misspelt option, and one reading a field the library's type does not have: both must fail.
const LIBRARY = "import { openLedger, summaryJsonSchema } from 'handoff-ledger';";
const HARNESS = "import { shouldCompact, compact, resumeContext } from 'handoff-ledger';";
function mutant(first: string, from: string, to: string, name: string): Unit {
  const block = blocks.find((b) => b.doc === 'README.md' && b.first === first);
  if (!block || !block.code.includes(from)) throw new Error(`README.md has no block "${first}" with ${from}`);
  return unitOf({ ...block, code: block.code.replace(from, to) }, name);
}
const misspelt = mutant(LIBRARY, "openLedger({ host: 'harness-eu-1' })", "openLedger({ hots: 'harness-eu-1' })", 'm1');
const misread = mutant(HARNESS, 'resumed?.id ?? null', 'resumed?.digest ?? null', 'm2');
// And a JSDoc example's: an adapter option misspelt.
const OPENAI_EXAMPLE = "const model = openaiAdapter({ client: new OpenAI(), model: 'gpt-5-mini' });";
const exampleMisspelt = (() => {
  const block = examples.find((b) => b.doc === 'src/adapters/openai.ts' && b.first === OPENAI_EXAMPLE);
  if (!block) throw new Error(`src/adapters/openai.ts has no @example "${OPENAI_EXAMPLE}"`);
  return unitOf({ ...block, code: block.code.replace("model: 'gpt-5-mini'", "modle: 'gpt-5-mini'") }, 'm3');
})();

describe("the docs' TypeScript blocks", () => {
  it("are found: the README's seven and docs/AUDIT.md's, each given only names declared for the reader", () => {
    expect(blocks.filter((b) => b.doc === 'README.md').length).toBeGreaterThanOrEqual(7);
    expect(blocks.filter((b) => b.doc === 'docs/AUDIT.md').length).toBeGreaterThanOrEqual(1);
    // every block named in GIVEN is there (a block's first line changed is renamed here, or this fails)
    const named = Object.entries(GIVEN).flatMap(([doc, byFirst]) =>
      Object.keys(byFirst).map((first) => ({ doc, first })),
    );
    for (const { doc, first } of named)
      expect(
        blocks.filter((b) => b.doc === doc && b.first === first),
        `one ${doc} block begins ${first}`,
      ).toHaveLength(1);
  });

  // The source's JSDoc @examples were run (two of them, docs-examples.test.ts) but never compiled: one reading a field
  // or passing an option the library no longer has showed on hover as if it worked.
  it('include every JSDoc @example of src/, store/ and manifests/, each named in GIVEN', () => {
    const files = SOURCES.filter((f) => /@example\n/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(files.length).toBeGreaterThanOrEqual(10);
    expect([...new Set(examples.map((b) => b.doc))]).toEqual(files);
    for (const b of examples) expect(GIVEN[b.doc]?.[b.first], `${b.doc} @example "${b.first}"`).toBeDefined();
  });

  describe.each(['nodenext', 'bundler'] as const)('under strict, moduleResolution %s', (resolution) => {
    let checked: ReturnType<typeof check>;
    beforeAll(() => {
      checked = check([...units, misspelt, misread, exampleMisspelt], resolution);
    });

    it("compile as a user compiles them, their imports resolved to the entry points' source", () => {
      expect(checked.general).toEqual([]);
      // the entry points' source, never a build's declarations (the package resolving its own name to dist/)
      for (const specifier of specifiersOf(units))
        expect(checked.program.getSourceFile(sourceOf(specifier)), specifier).toBeDefined();
      expect(checked.program.getSourceFiles().filter((f) => f.fileName.startsWith(join(ROOT, 'dist')))).toEqual([]);
      expect(units.flatMap((u) => checked.failures(u))).toEqual([]);
    });

    it('fail, naming the doc, the block and the diagnostic, where an option is misspelt or a field misread', () => {
      const [option] = checked.failures(misspelt);
      expect(option).toMatch(/^README\.md block "import \{ openLedger, summaryJsonSchema \} from 'handoff-ledger';" /);
      expect(option).toMatch(/ at README\.md:\d+: TS\d+ .*'hots'/);
      const [field] = checked.failures(misread);
      expect(field).toMatch(/^README\.md block "import \{ shouldCompact, compact, resumeContext \}/);
      expect(field).toMatch(/ at README\.md:\d+: TS2339 Property 'digest' does not exist on type 'Resumed'/);
      const [example] = checked.failures(exampleMisspelt);
      expect(example).toMatch(/^src\/adapters\/openai\.ts block "const model = openaiAdapter\(/);
      expect(example).toMatch(/ at src\/adapters\/openai\.ts:\d+: TS\d+ .*'modle'/);
    });
  });
});
