/**
 * Opening a ledger: the options, the default root, and `openLedger`, which composes the stores (embedded
 * LevelDB + filesystem blobs, PostgreSQL, or injected ones), the host key and the trust file into a
 * `Ledger`. Opening is recovery (staging cleared, chain heads checked).
 */
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { lstat, rmdir } from 'node:fs/promises';
import type { BlobStore } from '../../store/blob-store.js';
import { FsBlobStore } from '../../store/fs/blob-store.js';
import { hashBackendNameProblem, loadHashBackend } from '../../store/hash/backends.node.js';
import { ensurePrivateDir, isPathName, refuseNonDirectory } from '../../store/fs/safe-dir.js';
import { findAtomicStagingLeftovers, removeAtomicStagingLeftovers } from '../../store/fs/atomic-file.js';
import { nobleVerifier, type SignatureVerifier } from '../../manifests/crypto/ed25519.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import type { NoteVerifierKey } from '../../manifests/crypto/note.js';
import {
  holdsNoLog,
  LEVEL_LOG_FIELDS,
  LevelManifestLog,
  type LevelManifestLogOptions,
} from '../../manifests/log/level/log.js';
import { randomBytes } from 'node:crypto';
import { checkpointVerifiers, mergeTrust, parseTrustStore } from '../../manifests/format/trust.js';
import { isNewOrigin, isValidOrigin, NEW_ORIGIN_RULE, ORIGIN_RULE } from '../../manifests/format/checkpoint.js';
import { Keyring, listedCheckpointOrigin, refuseMissingKeyFile, refuseNewHostKey } from '../keys/keyring.js';
import { checkSignal, LedgerError, throwIfCancelled, untilCancelled } from '../errors.js';
import { ManifestError } from '../../manifests/errors.js';
import {
  checkBooleanOption,
  isHandoffLedgerError,
  isUint8Array,
  namedCancel,
  readOptionFields,
  escapedText,
  shownValue,
  type NamesEveryField,
  typeWithArticle,
} from '../../store/errors.js';
import { checkByteBound } from '../summary/summary.js';
import { CheckpointGuard, refuseAnotherLogsPin, refuseRootWithoutItsLog, storedOriginDamage } from './checkpoints.js';
import { checkWitnessingOptions, readWitnessingOptions, WitnessPool } from './witnessing.js';
import { readPostgresOptions } from './postgres-options.js';
import { consistencyProof } from './proofs.js';
import { decodeBase64 } from '../../manifests/encoding/base64.js';
import { Ledger } from './ledger.js';
import { parseHost } from './scope.js';
import { checkIdentifierPolicy, checkTelemetryProviders, type TelemetryOptions } from '../telemetry/telemetry.js';
import type { OpenLedgerOptions, ResolvedOpenOptions } from './options.js';
import { printableOnce, quoted, shellWord } from '../../manifests/encoding/printable.js';
import { readRootFormat, writeRootFormat, type RootFormat } from './root-format.js';

export type { OpenLedgerOptions } from './options.js';

/**
 * The store's root when none is given: `$HANDOFF_LEDGER_ROOT` (when set and not empty), else
 * `${XDG_STATE_HOME:-~/.local/state}/handoff-ledger`, read from `env` (`process.env` when absent, `undefined` or `null`).
 * @throws LedgerError `INVALID_ARGUMENT` for an `env` that is no object, or one of those two variables that is set to
 *   something other than text: `null` was a TypeError, a number or a string read as an environment without them (the
 *   home directory's root, whatever the real environment says)
 */
export function defaultRoot(env: NodeJS.ProcessEnv = process.env): string {
  const given = (env ?? process.env) as unknown;
  if (typeof given !== 'object' || given === null)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `defaultRoot: env must be an object of environment variables (process.env), not ${shownValue(given)}`,
    );
  const vars = given as Record<string, unknown>;
  for (const name of ['HANDOFF_LEDGER_ROOT', 'XDG_STATE_HOME'])
    if (vars[name] !== undefined && typeof vars[name] !== 'string')
      throw new LedgerError('INVALID_ARGUMENT', `defaultRoot: env.${name} must be text, not ${shownValue(vars[name])}`);
  env = vars as NodeJS.ProcessEnv;
  if (env.HANDOFF_LEDGER_ROOT) return env.HANDOFF_LEDGER_ROOT;
  const state = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(state, 'handoff-ledger');
}

const VERIFIERS = ['auto', 'node', 'noble'] as const;

/** @throws LedgerError `INVALID_ARGUMENT` for a name that is not `auto`, `node` or `noble` (absent: `auto`) */
function pickVerifier(name: unknown): SignatureVerifier {
  if (name !== undefined && !(VERIFIERS as readonly unknown[]).includes(name))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `verifier: auto, node or noble, not ${typeof name === 'string' ? shownValue(name, 80) : typeWithArticle(name)}`,
    );
  return name === 'noble' ? nobleVerifier : nodeVerifier;
}

/**
 * The origin the log records (its first opener named it) as a valid one: a record changed under the store (a PostgreSQL
 * table edited by hand) is refused before any key is made or listed under it, not a TypeError of the note signer.
 * @throws ManifestError `RECORD_CORRUPT`
 */
function refuseStoredOrigin(origin: string): void {
  const damage = storedOriginDamage(origin);
  if (damage) throw damage;
}

/** Every field of OpenLedgerOptions: `openLedger` reads these once, and a field left out of the list fails to compile. */
export const OPEN_FIELDS = [
  'root',
  'host',
  'signer',
  'keyFile',
  'createHostKey',
  'trust',
  'maxSummaryBytes',
  'inlineSummaryBytes',
  'authorizer',
  'hash',
  'verifier',
  'postgres',
  'blobs',
  'log',
  'fs',
  'levelLog',
  'origin',
  'witnesses',
  'diagnose',
  'clock',
  'telemetry',
  'onNotice',
  'signal',
] as const satisfies ReadonlyArray<keyof OpenLedgerOptions>;
const everyOpenField: NamesEveryField<OpenLedgerOptions, typeof OPEN_FIELDS> = true;
void everyOpenField;
const TELEMETRY_FIELDS = ['tracerProvider', 'meterProvider', 'identifiers'] as const satisfies ReadonlyArray<
  keyof TelemetryOptions
>;
const everyTelemetryField: NamesEveryField<TelemetryOptions, typeof TELEMETRY_FIELDS> = true;
void everyTelemetryField;

/** Whether `dir` is a store's root: it holds trust.json and keys/ (an embedded store, or a PostgreSQL host's root). */
async function isStoreRoot(dir: string): Promise<boolean> {
  const [trust, keys] = await Promise.all(
    [join(dir, 'trust.json'), join(dir, 'keys')].map((p) => lstat(p).catch(() => undefined)),
  );
  return trust?.isFile() === true && keys?.isDirectory() === true;
}

/**
 * A root that is no store yet (no trust.json) inside another store's root is refused before anything is made: a
 * `--root` one level too deep (`<store>/manifests-v1`, `<store>/keys`) made a new store there, whose publish
 * succeeded into a log nobody reads, inside the other store's own directories.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
async function refuseRootInsideStore(root: string): Promise<void> {
  const abs = resolve(root);
  if ((await lstat(join(abs, 'trust.json')).catch(() => undefined)) !== undefined) return;
  for (let dir = dirname(abs); ; dir = dirname(dir)) {
    if (await isStoreRoot(dir))
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `root ${quoted(root)} is inside the store at ${quoted(dir)}, and no store itself: a store is never made inside another (give --root ${shellWord(dir)} for that store)`,
      );
    if (dirname(dir) === dir) return;
  }
}

/**
 * The clock every time this ledger writes is read from (a manifest's createdAt, a key's window, a grant's time): one
 * that answers anything but a valid Date is refused where it is asked, not a TypeError or RangeError of toISOString.
 * @throws LedgerError `INVALID_ARGUMENT` (from the clock it returns)
 */
function checkedClock(clock: (() => Date) | undefined): () => Date {
  if (clock === undefined) return () => new Date();
  return () => {
    const now: unknown = clock();
    if (!(now instanceof Date) || !Number.isFinite(now.getTime()))
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `the clock option must return a valid Date (as \`() => new Date()\` does), and it returned ${clockValue(now)}`,
      );
    return now;
  };
}

/** What a clock returned, for its refusal: an invalid Date as such, a primitive with its type and value (shortened). */
function clockValue(now: unknown): string {
  if (now instanceof Date) return 'an invalid Date (its time is NaN)';
  if (['string', 'number', 'bigint', 'boolean'].includes(typeof now)) return `the ${typeof now} ${shownValue(now)}`;
  return shownValue(now);
}

/**
 * `root`, `keyFile` and `signer` as their types say, before anything is written: an empty root or key file path would
 * name the working directory, one with a NUL no file at all, a signer without `sign` would fail as a TypeError at its
 * first use.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function checkKeyOptions(options: ResolvedOpenOptions): void {
  const path = (name: string, value: unknown) => {
    if (value === undefined || isPathName(value)) return;
    // A NUL names no file: Node's fs refused it with a plain TypeError (ERR_INVALID_ARG_VALUE) once the open began.
    throw new LedgerError(
      'INVALID_ARGUMENT',
      typeof value === 'string' && value !== ''
        ? `${name} must be a path without NUL characters`
        : `${name} must be a non-empty path`,
    );
  };
  path('root', options.root);
  path('keyFile', options.keyFile);
  // Its fields read for the check only (a getter that throws: INVALID_ARGUMENT naming it); the signer itself is used as
  // given, its `sign` called on it. It is no options object: a KMS signer's class may have fields of its own.
  const given: unknown = options.signer;
  const signer =
    typeof given === 'object' && given !== null
      ? readOptionFields(given, ['keyId', 'publicKey', 'sign'], 'signer', LedgerError, 'allowed')
      : (given as undefined);
  // `null` is no signer (the key file), as it was before the shape was checked: `signer: kms ? … : null` (made
  // `undefined`, as every null option is, before this check).
  if (
    signer !== undefined &&
    (typeof signer !== 'object' ||
      typeof signer.keyId !== 'string' ||
      !isUint8Array(signer.publicKey) ||
      typeof signer.sign !== 'function')
  )
    throw new LedgerError(
      'INVALID_ARGUMENT',
      'signer must be { keyId: string, publicKey: Uint8Array, sign(message): Uint8Array | Promise<Uint8Array> }',
    );
}

/**
 * Whether the embedded log's directory holds no log yet: it is missing, or holds no LevelDB database (no CURRENT and no
 * data: an empty directory a stopped creation left), which `LevelManifestLog.open` would make afresh.
 * @throws StoreError `UNSAFE_PATH` when it is a file or a link; ManifestError `STORAGE_FAILED` when it cannot be read
 */
async function noEmbeddedLog(levelDir: string): Promise<boolean> {
  return (await refuseNonDirectory(levelDir, 'UNSAFE_PATH')) === undefined || (await holdsNoLog(levelDir));
}

/**
 * Opens a ledger. Opening is recovery: staging files of interrupted writes are cleared (an open to diagnose leaves
 * them, naming them in a notice) and every chain head is checked against its entries (`ledger.recovery` reports both).
 * @throws ManifestError `LOCKED` when another process has the embedded store open.
 * @throws LedgerError `FORMAT_UNSUPPORTED` for a root whose format marker (`format.json`) names a higher layout version
 *   or another format, `RECORD_CORRUPT` for one that is damaged (not a regular file, over 4 KiB, not the marker's JSON):
 *   refused before anything under the root is written or opened, diagnosing or not. With `postgres`, StoreError /
 *   ManifestError `FORMAT_UNSUPPORTED` for a schema a newer handoff-ledger migrated (or holding a known version under
 *   another name): nothing in the database migrated or written, diagnosing or not.
 * @throws LedgerError `INVALID_ARGUMENT` for an `inlineSummaryBytes` or `maxSummaryBytes` that is not a non-negative
 *   integer, a `verifier` that is not `auto`, `node` or `noble`, a `hash` that is not `auto`, `native`, `wasm` or
 *   `noble`, an `authorizer` that is not a function, a `root` or `keyFile` that is not a non-empty string (or holds a NUL), a
 *   `signer` without `keyId`, `publicKey` and `sign`, `witnesses` without a `witnesses` list or with a witness that is
 *   not an http(s) URL, an invalid `origin` (for a log not named yet, also one the CLI would print escaped:
 *   `isNewOrigin`), or a `telemetry` option that is not an object or whose
 *   `identifiers.hashKey` is not 32 bytes, or that names a `tracerProvider` or `meterProvider` while
 *   `@opentelemetry/api` (an optional peer) is not installed, a `clock` or `onNotice` that is not a function, a `createHostKey` or
 *   `diagnose` that is not a boolean, a `log`, `blobs`, `fs` or `levelLog` that is not
 *   an object, a `signal` that is not an AbortSignal, or an
 *   options field that throws as it is read (nothing is written). `null` is no such value: for every option but `host`
 *   it is the option left out (its default), as `undefined` is.
 * @throws LedgerError `CANCELLED` once `signal` aborts (nothing made when it had before the call), with what the open
 *   had opened closed again: at its next step, within the steps that go over many items (the blob store's and the
 *   root's staging leftovers, the head check over every chain: those removed or checked stay so), or in a wait (a
 *   signer's test signature, PostgreSQL connecting or migrating, the trust lock, a shared root's pin lock, the trust
 *   lock again where a shared root's pin was signed by a key a rotation elsewhere made).
 * @throws ManifestError `TRUST_INVALID` for a `trust` option that is not a valid trust store, `KEY_INVALID` for a
 *   witness's verifier key that does not parse (nothing is written).
 * @throws LedgerError `KEY_INVALID` for a `keyFile` that does not exist (none staged beside it by a rotation) or is no
 *   key, `KEY_FILE_UNSAFE` for one others can read (nothing is written).
 */
export async function openLedger(given: OpenLedgerOptions): Promise<Ledger> {
  try {
    return await openLedgerOnce(given);
  } catch (err) {
    throw namedCancel(err, 'openLedger'); // `operation cancelled` of a wait that does not know the call, named
  }
}

/**
 * What `openLedger` judges of its options before it looks at the root or makes anything: each field read once, the
 * host, the values and shapes of the options (the witnesses' URLs and keys, the origin's form, the trust store, …).
 * Returns the options as read (what is checked is what is used), the host and the signature verifier.
 * @throws LedgerError `INVALID_ARGUMENT`, `INVALID_ID`; ManifestError `TRUST_INVALID`, `KEY_INVALID` (as `openLedger`)
 */
function readOpenOptions(given: OpenLedgerOptions): {
  options: ResolvedOpenOptions;
  host: string;
  verifier: SignatureVerifier;
} {
  if (typeof given !== 'object' || given === null)
    throw new LedgerError('INVALID_ARGUMENT', 'openLedger needs an options object with at least a host');
  // Each field read once, here (a getter or proxy that throws: INVALID_ARGUMENT naming it, before anything is written),
  // and what is checked is what is used.
  given = readOptionFields(given, OPEN_FIELDS, 'openLedger options', LedgerError) as OpenLedgerOptions;
  const host = parseHost(given.host);
  // `null` is the option left out (its default), for every option but `host`, as `undefined` is, everywhere below
  // (`signer: kms ? … : null`, `maxSummaryBytes: config.max ?? null`): one rule, not one per option (some took it as
  // none, others refused it as no value of their type).
  const nulls = OPEN_FIELDS.filter(
    (name) => name !== 'host' && (given as unknown as Record<string, unknown>)[name] === null,
  );
  const plain: ResolvedOpenOptions =
    nulls.length === 0
      ? (given as ResolvedOpenOptions)
      : { ...(given as ResolvedOpenOptions), ...Object.fromEntries(nulls.map((name) => [name, undefined])) };
  // Further trusted keys are checked like a trust file: a window time that does not parse would compare as no bound.
  const trusted = plain.trust === undefined ? plain : { ...plain, trust: parseTrustStore(plain.trust) };
  // The option objects inside (witnesses and their endpoints, postgres, telemetry) read once as well: a getter or proxy
  // that throws there is INVALID_ARGUMENT naming it, before anything is written, and what is checked is what is used.
  const options: ResolvedOpenOptions = {
    ...trusted,
    ...(trusted.witnesses !== undefined ? { witnesses: readWitnessingOptions(trusted.witnesses) } : {}),
    ...(trusted.postgres ? { postgres: readPostgresOptions(trusted.postgres) } : {}),
    ...(typeof trusted.levelLog === 'object'
      ? {
          levelLog: readOptionFields(
            trusted.levelLog,
            // The log's open takes the open's own signal, not one of its own.
            LEVEL_LOG_FIELDS.filter((name) => name !== 'signal'),
            'levelLog options',
            LedgerError,
          ) as LevelManifestLogOptions,
        }
      : {}),
    ...(typeof trusted.telemetry === 'object'
      ? {
          telemetry: readOptionFields(
            trusted.telemetry,
            TELEMETRY_FIELDS,
            'telemetry options',
            LedgerError,
          ) as TelemetryOptions,
        }
      : {}),
  };
  checkByteBound('inlineSummaryBytes', options.inlineSummaryBytes);
  checkByteBound('maxSummaryBytes', options.maxSummaryBytes);
  checkBooleanOption(options.createHostKey, 'createHostKey', LedgerError);
  checkBooleanOption(options.diagnose, 'diagnose', LedgerError);
  const verifier = pickVerifier(options.verifier);
  const hashProblem = hashBackendNameProblem(options.hash);
  if (hashProblem) throw new LedgerError('INVALID_ARGUMENT', hashProblem);
  // Refused before anything is written (the Ledger is built last, after the store, its keys and trust.json exist).
  if (options.authorizer !== undefined && typeof options.authorizer !== 'function')
    throw new LedgerError(
      'INVALID_ARGUMENT',
      'authorizer must be a function ({ principal, session, action }) => boolean',
    );
  checkKeyOptions(options);
  checkSignal(options.signal);
  // Each endpoint too (its URL, its verifier key), as the pool will take it: a refused open makes no host key.
  if (options.witnesses) checkWitnessingOptions(options.witnesses);
  if (options.origin !== undefined && !isValidOrigin(options.origin))
    throw new LedgerError('INVALID_ARGUMENT', `origin: ${ORIGIN_RULE} (e.g. example.com/log1)`);
  if (options.telemetry !== undefined && typeof options.telemetry !== 'object')
    throw new LedgerError('INVALID_ARGUMENT', 'telemetry must be an object of TelemetryOptions');
  checkIdentifierPolicy(options.telemetry?.identifiers ?? 'omit');
  // A tracer or meter provider while @opentelemetry/api (an optional peer) is not installed: refused, naming it.
  checkTelemetryProviders(options.telemetry);
  // The ledger's hash backend (`hash`) is the one its PostgreSQL blob store hashes with: one given inside `postgres` (not
  // an option of openLedger's `postgres`) was taken and replaced by it, unchecked, whatever it named.
  if ((options.postgres as { hash?: unknown } | undefined)?.hash !== undefined)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      "postgres.hash is not an option of openLedger's postgres: the ledger's `hash` is the one its blob store uses",
    );
  // PostgreSQL holds both halves of a shared store: with a log or blobs of the caller's, the other half would
  // silently be a private one under root, and each host would write chains of its own.
  if (options.postgres && (options.log || options.blobs))
    throw new LedgerError(
      'INVALID_ARGUMENT',
      'postgres opens both the log and the blobs; pass either postgres, or log and blobs of your own',
    );
  // Injected backends and fault-injection hooks are objects (null: none): anything else was a TypeError once the root
  // was made (log, fs), or ignored (levelLog), or a blob store that failed at its first use.
  for (const name of ['log', 'blobs', 'fs', 'levelLog'] as const)
    if (options[name] !== undefined && typeof options[name] !== 'object')
      throw new LedgerError('INVALID_ARGUMENT', `${name} must be an object, not ${shownValue(options[name])}`);
  for (const name of ['clock', 'onNotice'] as const)
    if (options[name] !== undefined && typeof options[name] !== 'function')
      throw new LedgerError('INVALID_ARGUMENT', `${name} must be a function`);
  return { options, host, verifier };
}

/**
 * What `openLedger` would refuse `given` for that can be known without opening or making anything, judged as the open
 * judges it, by the same steps in the same order (`refuseBeforeMaking`): every option's value and shape
 * (`readOpenOptions`), the root's own refusals (a root that is no directory, of a layout this version does not read,
 * or inside another store: each a look, read-only), a host key the open may not make, an origin that may name no new
 * log (`isNewOrigin`) given for an embedded store that holds no log yet, a key file that is not there and PostgreSQL
 * options it cannot use (a connection string that is no postgresql:// URL). Only the look that needs a connection is
 * left to the open: a PostgreSQL log's stored origin. The CLI's `publish` calls it before it reads its summary, so
 * that a summary piped to an open refused anyway is not taken in vain.
 * @throws as `openLedger` does for these
 */
export async function checkOpenOptions(given: OpenLedgerOptions): Promise<void> {
  const { options, host } = readOpenOptions(given);
  await refuseBeforeMaking(options, host, options.root ?? defaultRoot(), { connect: false });
}

/**
 * The refusals `openLedger` makes after reading its options and before it makes or opens anything, in its order; and
 * `checkOpenOptions`'s, which are the same without the one look that needs a connection (`connect: false`: a PostgreSQL
 * log's stored origin). Returns the root's format marker, as read.
 * @throws as `openLedger` does for these
 */
async function refuseBeforeMaking(
  options: ResolvedOpenOptions,
  host: string,
  root: string,
  { signal, connect }: { signal?: AbortSignal; connect: boolean },
): Promise<RootFormat> {
  throwIfCancelled(signal);
  // Before anything is written: an open that may not make this host a key finds that out with the store untouched.
  // A root that is a file or a link is UNSAFE_ROOT for every command, not a storage failure of the first read under it.
  await refuseNonDirectory(root, 'UNSAFE_ROOT');
  // The root's format marker, read before anything under the root is written or opened (no LevelDB open, no key made):
  // a root of a layout this version does not read (a newer one, another format) or with a damaged marker is refused
  // here, diagnosing or not. None (a store made before the marker, or no store yet): layout version 1, marked below.
  const rootFormat = await readRootFormat(root);
  await refuseRootInsideStore(root);
  if (options.createHostKey === false && !options.signer && options.keyFile === undefined)
    await refuseNewHostKey(root, host);
  // An origin the CLI would print escaped names no new log (isNewOrigin): an embedded log not made yet is one (its
  // directory missing, or holding no log: noEmbeddedLog), and so is a PostgreSQL log that records no origin (its
  // schema not made yet, or its log not named: looked up on a connection of its own, making nothing), refused here
  // with nothing written (no root, no schema), diagnosing or not. A log that has a name keeps it (one named before the
  // rule opens with it as ever); a log of the caller's without one is refused as it is asked to store the name
  // (ManifestLog.origin). After the refusal that says more: no store there, for a command that makes none.
  // A PostgreSQL log that records a valid origin other than the one asked for is refused on the same look, before the
  // root directory is made (as the open below would refuse it, after making it). A stored origin that is no valid one
  // is left to the open, which refuses it or (diagnosing) goes on under the name trust.json lists. The look judges the
  // schema's versions before it reads anything else there, as the open below does: a schema a newer handoff-ledger
  // migrated is FORMAT_UNSUPPORTED, not judged by an origin read from tables this version may not know the layout of.
  if (options.origin !== undefined && !options.log && options.postgres) {
    const { refuseUnusableOptions, storedPostgresOrigin } = await import('./pg-backend.js');
    // The look's first step, which needs no connection (a check without one stops after it): options it cannot use.
    refuseUnusableOptions(options.postgres);
    if (connect) {
      // A connection of its own, closed by the look itself whenever it ends; the open's signal cancels its statement
      // (a wait for a lock a migration holds, say) and ends the connection, one still being made (a server that does
      // not answer) included: the open answers at the abort, and the look ends behind it.
      const stored = await untilCancelled(storedPostgresOrigin(options.postgres, signal), signal);
      if (stored === undefined && !isNewOrigin(options.origin))
        throw new LedgerError('INVALID_ARGUMENT', `origin: ${NEW_ORIGIN_RULE}`);
      if (stored !== undefined && storedOriginDamage(stored) === undefined && stored !== options.origin)
        throw originMismatch(stored, options.origin);
    }
  } else if (
    options.origin !== undefined &&
    !isNewOrigin(options.origin) &&
    !options.log &&
    (await noEmbeddedLog(join(root, 'manifests-v1')))
  )
    throw new LedgerError('INVALID_ARGUMENT', `origin: ${NEW_ORIGIN_RULE}`);
  // A key file of the caller's that is not there (nor staged by a rotation) is refused before the store is made.
  if (!options.signer && options.keyFile !== undefined) await refuseMissingKeyFile(options.keyFile);
  // PostgreSQL options it cannot use (a connection string that is no postgresql:// URL, a bad schema name) likewise.
  if (options.postgres && !options.log && !options.blobs)
    (await import('./pg-backend.js')).refuseUnusableOptions(options.postgres);
  return rootFormat;
}

async function openLedgerOnce(given: OpenLedgerOptions): Promise<Ledger> {
  const { options, host, verifier } = readOpenOptions(given);
  const root = options.root ?? defaultRoot();
  const clock = checkedClock(options.clock);
  // One sink for every notice of this ledger: the hash backend's, the keyring's, the witnesses' and the Ledger's own.
  // A notice names paths, key ids and error messages, whatever they hold: it reaches the sink (a terminal, by default)
  // terminal-safe and on one line, escaped as everything printed is; one that already is passes as it is.
  const sink: (message: string) => void = options.onNotice ?? ((m: string) => console.warn(m));
  // A notice tells; it decides nothing. A sink that throws (the caller's onNotice) fails no operation: its error is
  // dropped here, where it became a witness round's rejection that nothing awaits (after a publish had returned: an
  // unhandled rejection, which ends a Node process), a checkpoint() refused, a close() that left the log open.
  const notice = (m: string) => {
    try {
      sink(printableOnce(m));
    } catch {
      // the sink's failure is its own
    }
  };
  // The open's signal: an open aborted already makes nothing; one aborted later ends at its next step or at the wait it
  // is in (untilCancelled), closing what it opened (below).
  const signal = options.signal;
  const rootFormat = await refuseBeforeMaking(options, host, root, { signal, connect: true });
  throwIfCancelled(signal);
  // Whether this open makes the root: one it made is removed again (while still empty) when PostgreSQL cannot be opened,
  // as a refused open leaves the root as it found it (a role that does not exist left an empty root behind).
  const rootWasThere = (await refuseNonDirectory(root, 'UNSAFE_ROOT')) !== undefined;
  await ensurePrivateDir(root, 'UNSAFE_ROOT');
  const hashBackend = await loadHashBackend(options.hash ?? 'auto', notice);
  // The log is opened first: an embedded log's lock must be held before every staging file is cleared, or a second
  // process would delete the first one's in-flight writes; a root other processes share loses only old ones
  // (`sharedRoot`, below).
  let log = options.log;
  let pgBlobs: BlobStore | undefined;
  if (options.postgres && !log && !options.blobs) {
    // Loaded only when asked for, so the embedded store never loads the PostgreSQL client.
    const { openPostgresBackends } = await import('./pg-backend.js');
    const opening = openPostgresBackends(
      { ...options.postgres, hash: hashBackend, maxBlobBytes: options.postgres.maxBlobBytes },
      signal,
    );
    try {
      ({ log, blobs: pgBlobs } = await untilCancelled(opening, signal));
    } catch (err) {
      // Aborted: the open's waits for a connection, the migrations and the log's backfills take the signal (each
      // rolled back, the pool ended; a connection still being made, to a server that does not answer, closed at the
      // abort). The open's answer does not wait for that: its pool is ended once it has opened or failed.
      if (signal?.aborted)
        void opening.then(
          ({ log: l, blobs: b }) => Promise.all([l.close(), b.close()]).catch(() => {}),
          () => {},
        );
      if (!rootWasThere) await rmdir(root).catch(() => {});
      throw err;
    }
  }
  throwIfCancelled(signal);
  // The name a log that has none yet is given (the first opener names it), fixed before the look below.
  const freshName = options.origin ?? `handoff-ledger.local/${randomBytes(16).toString('hex')}`;
  // Set when this open makes the embedded log in a root that pins a log already: the root is not taken for its own.
  let madeOnPinnedRoot = false;
  if (!log) {
    const levelDir = join(root, 'manifests-v1');
    // An embedded log not made yet (its directory missing, or holding no log: noEmbeddedLog) holds no origin record:
    // it would be an empty log named `freshName`, and a pin in this root of another log (FORK) or of a larger tree
    // (ROLLBACK) is found before the log and the blob store are made, which would otherwise stay behind (a refused
    // open leaves the root as it found it). The case is a root PostgreSQL processes share, opened by a command run
    // without --postgres. An open to diagnose (fsck) is refused on any pin of this log (NOT_FOUND where the pin alone
    // is no ROLLBACK): it makes no log, for it writes nothing to the root it diagnoses. Refused only if the log is still missing after the look: one another opener made
    // meanwhile holds the name to judge by, below.
    if (await noEmbeddedLog(levelDir)) {
      try {
        madeOnPinnedRoot = await refuseRootWithoutItsLog(root, freshName, { diagnose: options.diagnose === true });
      } catch (err) {
        if (!(err instanceof LedgerError && ['FORK', 'ROLLBACK', 'NOT_FOUND'].includes(err.code))) throw err;
        if (await noEmbeddedLog(levelDir)) throw err;
        madeOnPinnedRoot = true;
      }
    }
    // LevelDB follows a planted symlink: check the directory like every other one in the store.
    throwIfCancelled(signal);
    await ensurePrivateDir(levelDir, 'UNSAFE_PATH');
    // The signal is looked at right after LevelDB's own open, which cannot be interrupted, and within the steps over
    // many items of a store an older version wrote (LevelManifestLogOptions.signal): the log is closed again at it.
    log = await LevelManifestLog.open(join(root, 'manifests-v1'), { ...options.levelLog, signal }).catch(
      (err: unknown) => {
        if (signal?.aborted && isHandoffLedgerError(err) && err.code === 'CANCELLED') throwIfCancelled(signal);
        throw err;
      },
    );
  }
  let witnesses: WitnessPool | undefined;
  let checkpoints: CheckpointGuard | undefined;
  // Whether other processes may write this root while this ledger is open: a log that is not exclusive (PostgreSQL's,
  // a caller's), or an embedded log made in a root that pinned a log before it (the root PostgreSQL processes share;
  // LevelDB's lock is on this open's own log, not on the root). Such a root's staging files may be their writes in
  // flight, and its pin is theirs too.
  const sharedRoot = log.exclusive !== true || madeOnPinnedRoot;
  try {
    throwIfCancelled(signal);
    let stagingRemoved = 0;
    let blobLeftovers: { staging: string[]; aside: string[] } | undefined;
    let blobs = options.blobs ?? pgBlobs;
    if (!blobs) {
      const opened = await FsBlobStore.open(root, {
        hash: hashBackend,
        fs: options.fs,
        ...(sharedRoot ? { keepStagingMs: STAGING_LEFTOVER_MS } : {}),
        // A diagnosing open (fsck) writes nothing to the root: the blob store's leftovers are named below instead.
        leaveLeftovers: options.diagnose === true,
        // Looked at between its staging files: a root with many leftovers stops promptly.
        signal,
      });
      blobs = opened.store;
      stagingRemoved = opened.recovery.stagingRemoved;
      blobLeftovers = opened.recovery.leftInPlace;
    }
    throwIfCancelled(signal);
    // Looked at between chains (PostgreSQL: between pages of them): a store of many chains stops promptly.
    const headProblems = await log.checkHeads({ signal });
    // The first opener names the log; every later opener, on any host, signs under that name.
    const stored = await log.origin();
    // A stored origin that is no valid one: refused, unless the open is to diagnose (fsck), which goes on, writing
    // nothing, under the name this root's trust.json lists its checkpoint key under (the log's name when the record
    // was intact): the keyring then lists no key anew, and the pin is judged without pinning anything (every check
    // and write refuses with the damage). A root that lists no such name gives nothing to go on without listing a key
    // under a made-up one: still refused (fsck cannot run before the record is restored).
    const originDamage = stored === undefined ? undefined : storedOriginDamage(stored);
    let listed: string | undefined;
    if (originDamage) {
      if (options.diagnose !== true) throw originDamage;
      listed = await listedCheckpointOrigin(root, host);
      if (listed === undefined || !isValidOrigin(listed)) throw originDamage;
    }
    const named = listed ?? stored ?? freshName;
    // A log with no name yet (PostgreSQL's, a log of the caller's) is not given one the CLI would print escaped.
    if (stored === undefined && !isNewOrigin(named))
      throw new LedgerError('INVALID_ARGUMENT', `origin: ${NEW_ORIGIN_RULE}`);
    if (options.origin !== undefined && named !== options.origin) throw originMismatch(named, options.origin);
    // Before the keyring lists a checkpoint key under this origin, and before a missing origin record is written (a
    // refused open leaves the store as it found it): a pin of another origin in this root is a FORK.
    await refuseAnotherLogsPin(root, named, {
      create: originDamage === undefined && options.diagnose !== true,
      postgres: Boolean(options.postgres),
    });
    const origin = listed ?? stored ?? (await log.origin(named));
    if (origin !== named) {
      refuseStoredOrigin(origin);
      // Another host of a shared store named the log meanwhile: its name is judged as the stored one is.
      if (options.origin !== undefined) throw originMismatch(origin, options.origin);
      await refuseAnotherLogsPin(root, origin, {
        create: options.diagnose !== true,
        postgres: Boolean(options.postgres),
      });
    }
    // Staging files of trust.json, key files, the pin and the lock files of a shared root that a crash left beside
    // their targets (the next write picks a new name, so nothing else would ever remove one; in keys/ one may hold a
    // private key). With the root to itself (the embedded log's lock) every one is a leftover; a shared root's may be
    // another process's write in flight, so there only old ones go, as in a root that pinned a log before this open
    // made its embedded log (an open of a pin at size 0: the root may be one PostgreSQL processes share, and
    // LevelDB's lock is on a log of this open's own, not on the root). Only once the root is known to pin
    // this log: an embedded open of a root PostgreSQL processes share (a command run without --postgres) is refused
    // above (FORK, ROLLBACK) without touching their writes in flight.
    // A diagnosing open (fsck) removes none: it writes nothing to the root it diagnoses, and names those it found.
    const stagingDirs = [root, join(root, 'keys'), join(root, 'checkpoints')];
    const stagingBefore = sharedRoot ? Date.now() - STAGING_LEFTOVER_MS : Infinity;
    if (options.diagnose === true) {
      const left = [
        ...(await findAtomicStagingLeftovers(stagingDirs, stagingBefore, signal)),
        ...(blobLeftovers?.staging ?? []),
      ];
      const aside = blobLeftovers?.aside ?? [];
      if (aside.length > 0)
        notice(
          `a diagnosing open (fsck) left ${aside.length === 1 ? '1 blob' : `${aside.length} blobs`} an interrupted gc held aside in place (${aside.join(', ')}): reads find ${aside.length === 1 ? 'it' : 'them'} there, and the next open that is not diagnosing links ${aside.length === 1 ? 'it' : 'them'} back at ${aside.length === 1 ? 'its path' : 'their paths'}`,
        );
      if (left.length > 0)
        notice(
          `a diagnosing open (fsck) left ${left.length === 1 ? '1 staging file' : `${left.length} staging files`} of interrupted writes in place (${left.join(', ')}): the next open that is not diagnosing removes ${left.length === 1 ? 'it' : 'them'}`,
        );
    } else stagingRemoved += await removeAtomicStagingLeftovers(stagingDirs, stagingBefore, signal);
    throwIfCancelled(signal);
    const keyring = await Keyring.open(
      {
        root,
        host,
        signer: options.signer,
        keyFile: options.keyFile,
        clock,
        origin,
        signedBefore: async (keyId) => (await log.signingKeys.get(keyId)) !== undefined,
        closedInLog: async (keyId) => (await log.signingKeys.get(keyId))?.closedAt,
        notice,
        createHostKey: options.createHostKey,
        // A diagnosing open of a store whose origin record is damaged writes no key and lists none under the name it
        // took from trust.json: a key file missing or not listed there refuses it with the record's damage.
        writeNothing: originDamage,
        // A diagnosing open leaves a stopped rotation's staged key files where they are, named below.
        leaveStaged: options.diagnose === true,
        // And makes no missing keys/ nor a key: a key file it would make is refused (KEY_INVALID), naming it.
        makeNoKeys: options.diagnose === true,
        storeSignedNothing: async () => {
          for await (const _ of log.signingKeys.keyIds()) return false;
          for await (const _ of log.entries()) return false;
          return true;
        },
      },
      // An injected signer's test signature ends at the abort (a KMS that never answers).
      signal,
    );
    throwIfCancelled(signal);
    const stagedKeys = keyring.stagedLeft;
    if (stagedKeys.length > 0)
      notice(
        `a diagnosing open (fsck) left ${stagedKeys.length === 1 ? '1 key file' : `${stagedKeys.length} key files`} a rotation that stopped staged in place (${stagedKeys.join(', ')}): it reads the keys trust.json lists, and the next open that is not diagnosing moves ${stagedKeys.length === 1 ? 'it' : 'them'} into place or removes ${stagedKeys.length === 1 ? 'it' : 'them'}`,
      );
    // Open = recovery: the log must extend the newest checkpoint this ledger pinned.
    let verifiers: { generation: number; keys: NoteVerifierKey[] } | undefined;
    let allCheckpointKeys: { generation: number; keys: NoteVerifierKey[] } | undefined;
    const openGuard = () =>
      CheckpointGuard.open({
        root,
        log,
        origin,
        signer: () => keyring.checkpointSigner,
        verifiers: () => {
          // Derived again only after the keyring's trust changed (a rotation or revocation, here or elsewhere).
          if (verifiers?.generation !== keyring.generation)
            verifiers = {
              generation: keyring.generation,
              keys: checkpointVerifiers(mergeTrust(keyring.trustStore(), options.trust), origin),
            };
          return verifiers.keys;
        },
        pinVerifiers: checkpointVerifiers(mergeTrust(keyring.trustStore(), options.trust), origin, {
          withRevoked: true,
        }),
        diagnose: options.diagnose === true,
        refusing: originDamage,
        sharedRoot,
        // The pin's lock at a shared root's open: another process's pin holds it (LOCKED after 30 s).
        signal,
      });
    throwIfCancelled(signal);
    try {
      checkpoints = await openGuard();
    } catch (err) {
      // A process sharing this root rotated between the reads of trust.json and of the pin, and pinned with its new
      // checkpoint key: once its rotation has ended (the trust lock), the keys read again know that signer. A pin
      // unverified under an unchanged trust.json stays refused.
      const unverified = err instanceof ManifestError && err.code === 'NOTE_UNVERIFIED';
      if (!unverified || log.exclusive === true || !(await keyring.changedOnDisk())) throw err;
      // The open's signal ends this wait for the rotation, as it ends the others.
      await keyring.exclusive(async () => {}, signal);
      checkpoints = await openGuard();
    }
    throwIfCancelled(signal);
    witnesses =
      options.witnesses && options.witnesses.witnesses.length > 0
        ? await WitnessPool.open({
            options: options.witnesses,
            checkpointStem: checkpoints.stem,
            // No read started once the pool is cut (its close): one under way is left to end, unobserved.
            proof: async (oldSize, size, cut) => {
              throwIfCancelled(cut);
              return (await consistencyProof(log, size, oldSize, size)).proof.map((h) => decodeBase64(h)!);
            },
            notice,
            // Other processes may append to the log: a witness ahead of this process's checkpoint may not be ahead of the log.
            shared: log.exclusive !== true,
            // What an auditor may open the exported checkpoint with: every checkpoint key this store lists.
            checkpointKeys: () => {
              if (allCheckpointKeys?.generation !== keyring.generation)
                allCheckpointKeys = {
                  generation: keyring.generation,
                  keys: checkpointVerifiers(mergeTrust(keyring.trustStore(), options.trust), undefined, {
                    withRevoked: true,
                  }),
                };
              return allCheckpointKeys.keys;
            },
          })
        : undefined;
    // A clock that stepped back since the last run must not date a manifest before one this key signed.
    let signed: Awaited<ReturnType<typeof log.signingKeys.get>>;
    let keyRecordDamage: { keyId: string; error: ManifestError } | undefined;
    try {
      signed = await log.signingKeys.get(keyring.signer.keyId);
    } catch (err) {
      // This key's record is damaged: fsck's diagnosing open goes on so that it can name it. The key signs nothing
      // (publish and checkPublish refuse with the damage): its window may have been closed in that record.
      if (!(options.diagnose === true && err instanceof ManifestError && err.code === 'RECORD_CORRUPT')) throw err;
      keyRecordDamage = { keyId: keyring.signer.keyId, error: err };
    }
    throwIfCancelled(signal);
    // The log closed this key's window where trust.json does not end it. A rotation or revocation of another process
    // sharing this root holds the trust lock from its step in the log until trust.json is written: judged again under
    // that lock (which waits for one under way, and settles the key files of one that stopped), with the keys read again
    // there, it is that of one that stopped, or of another host's listing of this key. A diagnosing open (fsck) takes no
    // lock (it writes nothing), and fsck reports the mismatch (KEY_WINDOW_MISMATCH).
    const windowLeftOpen = () =>
      signed?.closedAt !== undefined && keyring.windowEnd(keyring.signer.keyId) === undefined;
    let lockHeld = false;
    if (windowLeftOpen() && options.diagnose !== true)
      try {
        signed = await keyring.exclusive(() => log.signingKeys.get(keyring.signer.keyId), signal);
      } catch (err) {
        if (!(err instanceof LedgerError && err.code === 'LOCKED')) throw err;
        lockHeld = true;
      }
    if (windowLeftOpen()) {
      const keyId = keyring.signer.keyId;
      const otherHost = keyring.windowEnds(keyId).find((l) => l.host !== host && l.end === signed!.closedAt);
      const rerun = `run again (\`keys revoke ${shellWord(keyId)}\` for a revocation, then \`keys rotate\`; \`keys rotate\` for a rotation)`;
      // Why the two disagree, and until when publish is refused: the first case that holds.
      const cause = (): [why: string, until: string] => {
        if (lockHeld)
          return [
            "another process has held trust.json's lock for longer than this open waits: a rotation or revocation under way",
            `that process has written trust.json, or, should it have stopped, the command is ${rerun}`,
          ];
        // A diagnosing open takes no lock: on a shared log (PostgreSQL), another process's rotation may be between its
        // step in the log and its write of trust.json. An exclusive log (embedded) is this process's alone while open:
        // no other process has one under way, and the open judges as an ordinary one does.
        if (options.diagnose === true && log.exclusive !== true)
          return [
            'a rotation or revocation stopped after its step in the log, or, as fsck takes no lock, one is under way',
            `the command that stopped is ${rerun}`,
          ];
        if (otherHost !== undefined)
          return [
            `host ${quoted(otherHost.host)}, which trust.json lists this key for too, rotated or revoked it there`,
            `this host runs \`keys rotate\` (\`keys revoke ${shellWord(keyId)}\` first if the key is compromised)`,
          ];
        return ['a rotation or revocation stopped after its step in the log', `the command that stopped is ${rerun}`];
      };
      const [why, until] = cause();
      notice(
        `the log closed the window of key ${quoted(keyId)} at ${signed!.closedAt} but trust.json does not end it (${why}): publish is refused (KEY_EXPIRED) until ${until}`,
      );
    }
    // A root without its format marker (a new one, or one made before the marker) gets it once the open has found
    // everything in order, so a refused open leaves the root as it found it; a diagnosing open (fsck) writes none.
    if (!rootFormat.present && options.diagnose !== true) {
      throwIfCancelled(signal);
      await writeRootFormat(root);
    }
    return new Ledger({
      witnesses,
      lastSignedAt: signed?.lastSignedAt,
      keyRecordDamage,
      host,
      root,
      log,
      blobs,
      keyring,
      checkpoints,
      recovery: { stagingRemoved, headProblems },
      hashBackend,
      verifier,
      notice,
      // The signal is the open's: the ledger keeps none.
      options: { ...options, clock, signal: undefined },
    });
  } catch (err) {
    // The guard's listener on the log and its pin file go with it (a log passed in outlives this open).
    await witnesses?.close().catch(() => {});
    await checkpoints?.close().catch(() => {});
    if (!options.log) await log.close().catch(() => {});
    if (pgBlobs) await pgBlobs.close().catch(() => {});
    // A step's own CANCELLED (the blob store's recovery, the head check, the staging cleanup: a StoreError or
    // ManifestError) is the open's, as every other one it ends with.
    if (signal?.aborted && isHandoffLedgerError(err) && err.code === 'CANCELLED') throwIfCancelled(signal);
    throw err;
  }
}

/** An open asked for origin `asked` of a log named `stored` (the PostgreSQL look, the open's judgment, a race). */
function originMismatch(stored: string, asked: string): LedgerError {
  // A log named before the rule (isNewOrigin) may hold what a terminal acts on (a C1 control, DEL, a bidi override):
  // escaped, as an origin the caller gives may hold it too.
  return new LedgerError(
    'INVALID_ARGUMENT',
    `this store's checkpoint origin is ${escapedText(stored)}, not ${escapedText(asked)}`,
  );
}

/** A staging file (of `writeFileAtomic`, or of a blob) older than this in a shared root is a crash's leftover. */
const STAGING_LEFTOVER_MS = 10 * 60_000;
