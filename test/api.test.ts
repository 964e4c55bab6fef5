/**
 * The public surface: each entry point of package.json `exports` exists in the build and exports exactly these
 * runtime names (types are pinned by the compiler for whoever imports them). Adding a name is a deliberate act:
 * change this list with it. Importing an entry point has no side effects: no output, no files, no open handles.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tempDir } from './support/tmp.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  exports: Record<string, string | { types: string; default: string }>;
};

const SURFACE: Record<string, string[]> = {
  '.': [
    'AuditError',
    'DEFAULT_COMPACTION_INSTRUCTIONS',
    'DEFAULT_COMPACTION_RATIO',
    'DEFAULT_MAX_SUMMARY_BYTES',
    'FSCK_STORE_CODES',
    'HANDOFF_CONTEXT_FOOTER',
    'HANDOFF_CONTEXT_HEADER',
    'HandoffLedgerError',
    'Ledger',
    'LedgerError',
    'LedgerTelemetry',
    'LocalSigner',
    'ManifestError',
    'NOT_RUN_RESULT',
    'SUBMIT_HANDOFF',
    'SUMMARY_SCHEMA_FORMS',
    'StoreError',
    'auditBundle',
    'compact',
    'compactionRequest',
    'createWorkerLineVerifier',
    'defaultRoot',
    'exportBundle',
    'extractSummary',
    'fsck',
    'gc',
    'generateJwk',
    'handoffResponseFormat',
    'isHandoffLedgerError',
    'loadKeyFile',
    'normalizeStrictSummary',
    'nodeVerifier',
    'openBundleDir',
    'openLedger',
    'openPostgresBackends',
    'parseDuration',
    'resumeContext',
    'shouldCompact',
    'submitHandoffTool',
    'summaryJsonSchema',
    'summarySchema',
    'summarySchemaFor',
    'validateSummary',
  ],
  './store': [
    'AbstractBlobStore',
    'FsBlobStore',
    'HandoffLedgerError',
    'PgBlobStore',
    'StoreError',
    'digestHex',
    'digestOf',
    'formatDigest',
    'isDigest',
    'isHandoffLedgerError',
    'loadHashBackend',
  ],
  './manifests': [
    'AbstractManifestLog',
    'checkpointVerifiers',
    'encodeVerifierKey',
    'formatCheckpoint',
    'noteKeyHash',
    'openNote',
    'parseCheckpoint',
    'parseVerifierKey',
    'signNote',
    'ID_PATTERN',
    'LevelManifestLog',
    'MANIFEST_PAYLOAD_TYPE',
    'ManifestError',
    'PgManifestLog',
    'SUMMARY_MEDIA_TYPE',
    'canonicalBytes',
    'canonicalize',
    'emptyTrustStore',
    'encodeManifest',
    'findTrustedKey',
    'isValidId',
    'keyIdOf',
    'manifestId',
    'nobleVerifier',
    'nodeVerifier',
    'pae',
    'parseEnvelope',
    'mergeTrust',
    'parseTrustStore',
    'trustDigest',
    'serializeEnvelope',
    'signEnvelope',
    'verifyManifestEnvelope',
  ],
  './adapters/openai': ['openaiAdapter'],
  './adapters/anthropic': ['anthropicAdapter', 'anthropicSubmitHandoffTool'],
  './adapters/gemini': ['geminiAdapter'],
  './adapters/ai-sdk': ['aiSdkAdapter'],
  './web': ['auditorPagePath', 'readAuditorPage'],
  './audit': [
    'CHECKPOINT_FINDING_CODES',
    'checkCosignatures',
    'parseCosignerKey',
    'parseWitnessKeys',
    'witnessDigest',
    'EMPTY_ROOT',
    'checkpointVerifiers',
    'leafHash',
    'nodeHash',
    'openNote',
    'parseCheckpoint',
    'parseVerifierKey',
    'rootFromInclusionProof',
    'verifyConsistency',
    'verifyInclusion',
    'sessionHeadsRoot',
    'verifySessionHead',
    'AuditError',
    'BUNDLE_FORMAT',
    'BUNDLE_VERSION',
    'FINDING_CODES',
    'MAX_LINE_BYTES',
    'createWebCryptoLineVerifier',
    'describeCoverage',
    'describeFinding',
    'describeVerdict',
    'inlineLineVerifier',
    'memoryBundleReader',
    'nobleVerifier',
    'parseBundleHeader',
    'mergeTrust',
    'parseTrustStore',
    'trustDigest',
    'storedSummaryProblem',
    'verifyBundle',
    'verifyChain',
  ],
};

const codeEntries = Object.entries(pkg.exports).filter(
  (e): e is [string, { types: string; default: string }] => typeof e[1] === 'object',
);

describe('the public API', () => {
  it('pins every code entry point of package.json', () => {
    expect(codeEntries.map(([name]) => name).sort()).toEqual(Object.keys(SURFACE).sort());
  });

  it.each(codeEntries)('%s: its built module and types exist', (_name, target) => {
    expect(existsSync(join(ROOT, target.default)), target.default).toBe(true);
    expect(existsSync(join(ROOT, target.types)), target.types).toBe(true);
  });

  it.each(codeEntries)('%s exports exactly the pinned names', async (name, target) => {
    const mod = (await import(pathToFileURL(join(ROOT, target.default)).href)) as Record<string, unknown>;
    expect(Object.keys(mod).sort()).toEqual([...SURFACE[name]!].sort());
  });

  it('one error base: every layer error is a HandoffLedgerError', async () => {
    const { AuditError, HandoffLedgerError, LedgerError, ManifestError, StoreError, isHandoffLedgerError } =
      await import('../src/index.js');
    for (const err of [
      new StoreError('BLOB_NOT_FOUND', 'x'),
      new ManifestError('LOCKED', 'x'),
      new LedgerError('ROLLBACK', 'x'),
      new AuditError('BUNDLE_IO', 'x'),
    ]) {
      expect(err).toBeInstanceOf(HandoffLedgerError);
      expect(isHandoffLedgerError(err)).toBe(true);
      expect(err.name).toBe(err.constructor.name);
    }
    expect(isHandoffLedgerError(new Error('x'))).toBe(false);
  });

  it.each(codeEntries)(
    '%s: importing it prints nothing, writes no file and leaves nothing running',
    (_name, target) => {
      const home = tempDir();
      const url = pathToFileURL(join(ROOT, target.default)).href;
      // A timeout kills the child: it would mean a timer or handle kept the process alive after the import.
      const child = spawnSync(
        process.execPath,
        ['--input-type=module', '-e', `await import(${JSON.stringify(url)});`],
        {
          env: { PATH: process.env.PATH, HOME: home, XDG_STATE_HOME: join(home, 'state'), TMPDIR: home },
          encoding: 'utf8',
          timeout: 20_000,
        },
      );
      expect(child.error).toBeUndefined();
      expect([child.status, child.stdout, child.stderr]).toEqual([0, '', '']);
      expect(readdirSync(home)).toEqual([]);
    },
  );

  it('importing the package does not load the PostgreSQL client (openPostgresBackends loads it when called)', () => {
    const url = pathToFileURL(join(ROOT, 'dist/src/index.js')).href;
    const script = `
      import { createRequire } from 'node:module';
      const { openPostgresBackends } = await import(${JSON.stringify(url)});
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((k) => /node_modules[\\/]pg[\\/]/.test(k));
      const before = loaded();
      // No server at this address: the call fails, after loading the client.
      await openPostgresBackends({ connectionString: 'postgresql://nobody@127.0.0.1:1/none' }).catch(() => {});
      console.log(JSON.stringify([before, loaded()]));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(child.stderr).toBe('');
    expect(JSON.parse(child.stdout)).toEqual([false, true]);
  });
});
