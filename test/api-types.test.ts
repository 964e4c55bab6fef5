/**
 * The types of the public API are importable by name: every option, parameter and result type of an exported
 * function or class that a caller may have to write down is exported by an entry point of package.json, not
 * reachable only through `Parameters<>` or `ReturnType<>`. Checked twice: `tsc --noEmit -p .` checks that each name
 * below imports from its entry point's source and is the very type the function takes or gives (`Same`); the test
 * checks that the built declarations of each entry point (dist/, what a user's compiler reads) export the names.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import type {
  createWorkerLineVerifier,
  fsck,
  FsckOptions,
  gc,
  GcOptions,
  openBundleDir,
  OpenBundleOptions,
  ValidatedSummary,
  validateSummary,
  WorkerLineVerifierOptions,
} from '../src/index.js';
import type { BlobStore, DeleteOptions, FsBlobStore, FsRecoveryReport } from '../store/index.js';
import type {
  HeadsNode,
  HeadWindow,
  InlineBlobTable,
  InlineDeleteOptions,
  LogTreeHead,
  ManifestLog,
  NodePath,
  SigningKeyRecord,
  SigningKeyTable,
} from '../manifests/index.js';
import type {
  AuditCoverage,
  CompletenessCoverage,
  CoverageHints,
  describeCoverage,
  describeVerdict,
  inlineLineVerifier,
  LineVerifyContext,
  memoryBundleReader,
  MemoryBundleInput,
  VerdictPaint,
} from '../manifests/audit/index.js';

/** True when A and B are the same type (not merely assignable either way). */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Holds<T extends true> = T;
type HeadNodes = NonNullable<ManifestLog['sessionHeadNodes']>;

/** Each exported name is the type the API uses where a caller meets it. */
export type NamedAsUsed = [
  Holds<Same<FsckOptions, NonNullable<Parameters<typeof fsck>[1]>>>,
  Holds<Same<GcOptions, Parameters<typeof gc>[1]>>,
  Holds<Same<OpenBundleOptions, NonNullable<Parameters<typeof openBundleDir>[1]>>>,
  Holds<Same<ValidatedSummary, ReturnType<typeof validateSummary>>>,
  Holds<Same<WorkerLineVerifierOptions, Parameters<typeof createWorkerLineVerifier>[0]>>,
  Holds<Same<DeleteOptions, NonNullable<Parameters<BlobStore['delete']>[1]>>>,
  Holds<Same<FsRecoveryReport, Awaited<ReturnType<typeof FsBlobStore.open>>['recovery']>>,
  Holds<Same<InlineDeleteOptions, NonNullable<Parameters<InlineBlobTable['delete']>[1]>>>,
  Holds<Same<HeadWindow, Awaited<ReturnType<ManifestLog['headWindow']>>>>,
  Holds<Same<LogTreeHead, Awaited<ReturnType<ManifestLog['treeHead']>>>>,
  Holds<Same<SigningKeyTable, ManifestLog['signingKeys']>>,
  Holds<Same<SigningKeyRecord, NonNullable<Awaited<ReturnType<SigningKeyTable['get']>>>>>,
  Holds<Same<NodePath, Parameters<HeadNodes>[0][number]>>,
  Holds<Same<HeadsNode, NonNullable<Awaited<ReturnType<HeadNodes>>[number]>>>,
  Holds<Same<LineVerifyContext, Parameters<typeof inlineLineVerifier>[0]>>,
  Holds<Same<VerdictPaint, NonNullable<Parameters<typeof describeVerdict>[1]>>>,
  Holds<Same<CompletenessCoverage, AuditCoverage['completeness']>>,
  Holds<Same<CoverageHints, NonNullable<Parameters<typeof describeCoverage>[1]>>>,
  Holds<Same<MemoryBundleInput, Parameters<typeof memoryBundleReader>[0]>>,
];

/** The names above, by the entry point that exports them. */
const NAMED: Record<string, string[]> = {
  '.': [
    'FsckOptions',
    'GcOptions',
    'OpenBundleOptions',
    'ValidatedSummary',
    'WorkerLineVerifierOptions',
    // Named before, and still: what the functions above take and give besides.
    'FsckReport',
    'GcReport',
  ],
  './store': ['DeleteOptions', 'FsRecoveryReport', 'BlobStore'],
  './manifests': [
    'HeadWindow',
    'HeadsNode',
    'LogTreeHead',
    'NodePath',
    'SigningKeyRecord',
    'SigningKeyTable',
    'ManifestLog',
    'InlineDeleteOptions',
  ],
  './audit': [
    'CompletenessCoverage',
    'LineVerifyContext',
    'MemoryBundleInput',
    'VerdictPaint',
    'CoverageHints',
    'AuditCoverage',
    'LineVerifier',
  ],
};

/** How the tests read the built declarations: as a Node ESM caller (nodenext) would, checking nothing else. */
const PACKAGE_TYPES: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  types: ['node'],
  skipLibCheck: true,
  noEmit: true,
};
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { types: string; default: string }>;
};

describe('the public types', () => {
  it('are exported by name from the built declarations of their entry points', () => {
    const files = Object.keys(NAMED).map((entry) => {
      const target = pkg.exports[entry];
      if (typeof target !== 'object') throw new Error(`package.json exports has no ${entry}`);
      return join(ROOT, target.types);
    });
    const program = ts.createProgram(files, PACKAGE_TYPES);
    const checker = program.getTypeChecker();
    const exported = Object.fromEntries(
      Object.keys(NAMED).map((entry, i) => {
        const source = program.getSourceFile(files[i]!);
        const module = source && checker.getSymbolAtLocation(source);
        if (!module) throw new Error(`${files[i]} is not a module (is dist/ built?)`);
        return [entry, checker.getExportsOfModule(module).map((s) => s.name)];
      }),
    );
    for (const [entry, names] of Object.entries(NAMED)) {
      expect(
        names.filter((name) => !exported[entry]!.includes(name)),
        entry,
      ).toEqual([]);
    }
  });

  // The list above is kept by hand; this walk finds what it misses. From every declaration an entry point exports, it
  // follows each type named in a public or protected member (what a caller or a subclass writes down), and every
  // interface, type alias, class or enum of the package it reaches must be exported by some entry point. Found
  // unexported before: IdPositionRecord (ManifestLog.idPositions), BatchOp (the levelLog option's writeBatch),
  // CutBackFacts (AbstractManifestLog._cutBackFacts), HashBackendLoaders (loadHashBackend), Subtle
  // (createWebCryptoLineVerifier): a custom log, a fault-injecting writeBatch or a test's loaders could not be typed.
  it('include every named type reachable from an entry point (a member of an exported union aside)', () => {
    // Parts of a union exported whole (FsckFindingCode): a caller writes the union, never a part.
    const UNION_PARTS = new Set(['FsckAuditCode', 'FsckStoreCode', 'ManifestRuleCode']);
    const entries = Object.entries(pkg.exports).filter(([e]) => !e.endsWith('.json'));
    const files = entries.map(([, t]) => join(ROOT, (t as { types: string }).types));
    const program = ts.createProgram(files, PACKAGE_TYPES);
    const checker = program.getTypeChecker();
    const dist = join(ROOT, 'dist') + '/';
    const exported = new Set<ts.Declaration>();
    for (const file of files) {
      const module = checker.getSymbolAtLocation(program.getSourceFile(file)!);
      if (!module) throw new Error(`${file} is not a module (is dist/ built?)`);
      for (const s of checker.getExportsOfModule(module)) {
        const target = s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
        for (const d of target.declarations ?? []) exported.add(d);
      }
    }
    const seen = new Set<ts.Node>();
    const missing = new Set<string>();
    const hidden = (n: ts.Node) =>
      (ts.canHaveModifiers(n) && ts.getModifiers(n)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)) ||
      ts.getJSDocTags(n).some((t) => t.tagName.text === 'internal');
    const visitDeclaration = (d: ts.Declaration) => {
      if (seen.has(d) || !d.getSourceFile().fileName.startsWith(dist)) return;
      seen.add(d);
      const named =
        ts.isInterfaceDeclaration(d) ||
        ts.isTypeAliasDeclaration(d) ||
        ts.isClassDeclaration(d) ||
        ts.isEnumDeclaration(d);
      if (named && !exported.has(d) && d.name && !UNION_PARTS.has(d.name.text)) missing.add(d.name.text);
      ts.forEachChild(d, (c) => {
        // What a class implements is on the class itself: a caller never names it.
        const implemented = ts.isHeritageClause(c) && c.token === ts.SyntaxKind.ImplementsKeyword;
        if (!hidden(c) && !implemented) visitNode(c);
      });
    };
    const visitNode = (node: ts.Node): void => {
      const name = ts.isTypeReferenceNode(node)
        ? node.typeName
        : ts.isExpressionWithTypeArguments(node)
          ? node.expression
          : ts.isTypeQueryNode(node)
            ? node.exprName
            : undefined;
      if (name) {
        let symbol = checker.getSymbolAtLocation(name);
        if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
        for (const d of symbol?.declarations ?? []) visitDeclaration(d);
      }
      ts.forEachChild(node, visitNode);
    };
    for (const d of exported) visitDeclaration(d);
    expect([...missing].sort()).toEqual([]);
  });

  // isHandoffLedgerError narrowed to the base class, whose code is a string: a misspelt code compiled, and a Harness's
  // handling by code (the contract) got no help from its types. It narrows to the four layers' classes now.
  it("narrows isHandoffLedgerError's code to the layers' codes: a misspelt code does not compile, every layer's does", () => {
    const dir = mkdtempSync(join(tmpdir(), 'hl-codes-'));
    try {
      const file = join(dir, 'codes.ts');
      const lines = [
        `import { isHandoffLedgerError, type HandoffLedgerErrorCode } from ${JSON.stringify(join(ROOT, 'dist/src/index.js'))};`,
        'export function handle(err: unknown): number {',
        '  if (!isHandoffLedgerError(err)) return 0;',
        '  const code: HandoffLedgerErrorCode = err.code;',
        "  if (code === 'CHAIN_CONFLICT' || code === 'BLOB_INTEGRITY' || code === 'SIGNATURE_INVALID') return 1;",
        "  if (err.code === 'BUNDLE_EXISTS') return 2;",
        "  if (err.code === 'CHAIN_CONFLICTS') return 3;",
        '  return 4;',
        '}',
      ];
      writeFileSync(file, lines.join('\n') + '\n');
      const program = ts.createProgram([file], { ...PACKAGE_TYPES, strict: true });
      const found = ts.getPreEmitDiagnostics(program).map((d) => ({
        line: d.file ? d.file.getLineAndCharacterOfPosition(d.start!).line + 1 : 0,
        code: d.code,
      }));
      // TS2367: "This comparison appears to be unintentional because the types … have no overlap", on line 7 only.
      expect(found).toEqual([{ line: 7, code: 2367 }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the adapters' built declarations, compiled as a strict project without skipLibCheck", () => {
  const ADAPTERS = ['openai', 'anthropic', 'gemini', 'ai-sdk'];
  const HIDDEN = `${sep}node_modules${sep}@types${sep}json-schema`;
  /**
   * The program a user's `tsc` builds over the four adapters' declarations with `strict` on and `skipLibCheck` off;
   * `withJsonSchemaTypes: false` is a project that did not install `@types/json-schema` (this repository has it, as a
   * dev dependency of the ai SDK's packages, so the host hides it).
   */
  const options: ts.CompilerOptions = { ...PACKAGE_TYPES, skipLibCheck: false, strict: true };
  /** The files both programs read, parsed once (the SDKs' declarations are large). */
  const parsed = new Map<string, ts.SourceFile | undefined>();
  function program(withJsonSchemaTypes: boolean): ts.Program {
    const host = ts.createCompilerHost(options);
    const { getSourceFile } = host;
    host.getSourceFile = (path, ...rest) => {
      if (!parsed.has(path)) parsed.set(path, getSourceFile.call(host, path, ...rest));
      return parsed.get(path);
    };
    if (!withJsonSchemaTypes) {
      const hidden = (path: string) => resolve(path).includes(HIDDEN);
      const { fileExists, directoryExists, readFile } = host;
      host.fileExists = (path) => !hidden(path) && fileExists.call(host, path);
      host.directoryExists = (path) => !hidden(path) && (directoryExists?.call(host, path) ?? true);
      host.readFile = (path) => (hidden(path) ? undefined : readFile.call(host, path));
    }
    const files = ADAPTERS.map((name) => join(ROOT, `dist/src/adapters/${name}.d.ts`));
    return ts.createProgram(files, options, host);
  }
  /** A file's own diagnostics: checked one file at a time (checking the SDKs' whole declarations is slow). */
  const diagnosticsOf = (p: ts.Program, file: ts.SourceFile) =>
    [...p.getSyntacticDiagnostics(file), ...p.getSemanticDiagnostics(file)].map((d) => ({
      code: d.code,
      text: ts.flattenDiagnosticMessageText(d.messageText, '\n').slice(0, 120),
    }));
  const provider = (p: ts.Program) =>
    p.getSourceFiles().find((f) => f.fileName.endsWith('/@ai-sdk/provider/dist/index.d.ts'));

  it(
    "needs no @types/json-schema for the library's own declarations; the ai SDK's need it (README says so)",
    { timeout: 180_000 },
    () => {
      const without = program(false);
      const ours = without.getSourceFiles().filter((f) => f.fileName.startsWith(join(ROOT, 'dist') + sep));
      expect(ours.map((f) => f.fileName)).toEqual(
        expect.arrayContaining(ADAPTERS.map((name) => join(ROOT, `dist/src/adapters/${name}.d.ts`))),
      );
      for (const file of ours) expect(diagnosticsOf(without, file), file.fileName).toEqual([]);
      // What README's adapter section tells an adopter of aiSdkAdapter: the ai SDK's provider declarations (which `ai`
      // and every `@ai-sdk/*` provider load) import `json-schema`, whose types they do not depend on: TS7016 there.
      const found = diagnosticsOf(without, provider(without)!);
      expect(found.length).toBeGreaterThan(0);
      for (const d of found) expect(d).toEqual({ code: 7016, text: expect.stringContaining("module 'json-schema'") });
      // With @types/json-schema installed, the same declarations compile.
      const withTypes = program(true);
      expect(diagnosticsOf(withTypes, provider(withTypes)!)).toEqual([]);
    },
  );
});
