/**
 * The ledger: composes a BlobStore, a ManifestLog and a host key into publish / resume / history.
 * Comments cite the numbered steps of docs/DESIGN.md's Publish and Resume contracts.
 */
import { digestOf, hashBytes, isDigest, type Digest, type HashBackend } from '../../store/hash/digest.js';
import { errorText, namedCancel, readOptionFields, shownValue, StoreError } from '../../store/errors.js';
import { quoted, shellWord } from '../../manifests/encoding/printable.js';
import type { BlobStore } from '../../store/blob-store.js';
import type { SignatureVerifier } from '../../manifests/crypto/ed25519.js';
import { pae, signEnvelope, serializeEnvelope, type Envelope } from '../../manifests/crypto/envelope.js';
import { decodeBase64 } from '../../manifests/encoding/base64.js';
import { ManifestError } from '../../manifests/errors.js';
import type {
  AppendRequest,
  ChainHead,
  GrantRecord,
  HeadHold,
  HeadWindow,
  LogEntry,
  ManifestLog,
} from '../../manifests/log/log.js';
import {
  coversSchema,
  encodeManifest,
  manifestId,
  manifestSchema,
  MANIFEST_PAYLOAD_TYPE,
  SUMMARY_MEDIA_TYPE,
  type Covers,
  type Manifest,
} from '../../manifests/format/manifest.js';
import { findTrustedKey, type TrustStore } from '../../manifests/format/trust.js';
import { readCanonicalManifest } from '../../manifests/format/manifest-read.js';
import { canonicalManifestText } from '../../manifests/format/manifest-text.js';
import type { VerifiedManifest } from '../../manifests/crypto/verify-manifest.js';
import { ChainChecker, type CheckedEntry } from '../../manifests/chain/checker.js';
import { VerifiedManifestCache } from '../../manifests/crypto/verified-cache.js';
import { headProblems, type HeadProblem } from '../../manifests/chain/head-rules.js';
import { isHandoffLedgerError, LedgerError, throwIfCancelled, untilCancelled } from '../errors.js';
import { authorize, type Action, type Authorizer } from './grants.js';
import {
  parsePublishScope,
  parseScope,
  readScopeOnce,
  refuseOptionsInScope,
  SCOPE_CALLS,
  type PublishScope,
  type Scope,
  type ScopeCall,
} from './scope.js';
import { Keyring } from '../keys/keyring.js';
import { earlierTime, mergeTrust } from '../../manifests/format/trust.js';
import { KeyedMutex, SharedExclusiveLock } from './locks.js';
import { LedgerTelemetry } from '../telemetry/telemetry.js';
import { packageVersion } from '../version.js';
import type { Span } from '@opentelemetry/api';
import { TieredBlobStore } from './blob-tiers.js';
import type { CheckpointGuard, SignedCheckpoint } from './checkpoints.js';
import type { WitnessPool } from './witnessing.js';
import {
  consistencyProof,
  inclusionProof,
  parseManifestId,
  type ConsistencyProof,
  type InclusionProof,
} from './proofs.js';
import type { ResolvedOpenOptions } from './options.js';
import {
  canDecodeStream,
  decodeSummary,
  decodeSummaryStream,
  DEFAULT_MAX_SUMMARY_BYTES,
  prepareSummary,
  STREAM_DECODE_FROM,
  type Summary,
} from '../summary/summary.js';
import { describeZodError } from '../../manifests/format/zod-issue.js';

export interface PublishOptions {
  signal?: AbortSignal | undefined;
  /** The head id the caller expects (null: an empty chain); `CHAIN_CONFLICT` when the head moved. */
  expectedPrev?: Digest | null | undefined;
  covers?: Covers | undefined;
}

export interface Receipt {
  id: Digest;
  seq: number;
  digest: Digest;
  size: number;
  envelope: Envelope;
}

export interface Resumed {
  summary: Summary;
  manifest: Manifest;
  id: Digest;
  seq: number;
}

export interface HistoryEntry {
  id: Digest;
  manifest: Manifest;
  envelope: Envelope;
}

export interface RecoveryReport {
  stagingRemoved: number;
  /** What the log's head check found at open (ManifestLog.checkHeads). */
  headProblems: HeadProblem[];
}

/** Summaries up to this many canonical bytes are stored inline in the manifest log by default. */
export const DEFAULT_INLINE_SUMMARY_BYTES = 64 * 1024;

/** A stored (or, when `inline` is set, about to be appended) summary blob. */
interface SummaryBlob {
  digest: Digest;
  size: number;
  /** The bytes, when they are to be written inline by the append itself. */
  inline?: Uint8Array;
}

/** Attempts at appending after whatever the head is, when other writers keep winning the race. */
const MAX_APPEND_ATTEMPTS = 8;

/**
 * Inline summaries up to this many bytes are hashed in one synchronous call (`digestOf`), larger ones by the store's
 * backend: at 4 KiB the two take about as long, above it the native backend's SIMD is the faster.
 */
const SYNC_HASH_MAX_BYTES = 4096;
/**
 * How far ahead of this host's clock a session's head may be dated and still date the next manifest (5 min): a
 * manifest is never dated before the head it links to (the auditor's `TIME_REVERSED`), so hosts a little apart take
 * turns on one session without a finding. A head dated further ahead is not followed, lest one host's wrong clock
 * date every later manifest of the others (`lastSignedAt` floors them all): the manifest is dated by this clock, a
 * notice says so, and the auditor's finding points at the clocks.
 */
export const MAX_HEAD_LEAD_MS = 5 * 60_000;
/** Sessions whose head's createdAt a ledger remembers (the heads it appended, the ones it read), least recent dropped. */
const HEAD_DATES_KEPT = 1024;

/** An entry this ledger appended: its stored envelope text, its signature (base64), the key that signature is valid under. */
interface OwnSigned {
  id: Digest;
  text: string;
  sig: string;
  publicKey: Uint8Array;
}

function parseCovers(covers: unknown): PublishOptions['covers'] {
  if (covers === undefined) return undefined;
  let parsed: ReturnType<typeof coversSchema.safeParse>;
  try {
    parsed = coversSchema.safeParse(covers);
  } catch (err) {
    // The schema reads each field: a getter or proxy that throws is the caller's bad input, as the summary's is.
    throw new LedgerError('INVALID_ARGUMENT', 'covers: reading it failed (a getter or proxy of it threw: the cause)', {
      cause: err,
    });
  }
  if (!parsed.success) {
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `covers: ${describeZodError(parsed.error, { escaped: true, schema: coversSchema })}`,
    );
  }
  return parsed.data as PublishOptions['covers'];
}

/** `expectedPrev`: absent, `null` (an empty chain) or a manifest id; anything else would read as "the head moved". */
export function parseExpectedPrev(prev: unknown): PublishOptions['expectedPrev'] {
  if (prev === undefined || prev === null || isDigest(prev)) return prev;
  const shown = typeof prev === 'string' ? shownValue(prev, 80) : typeof prev;
  throw new LedgerError('INVALID_ARGUMENT', `expectedPrev: null or a manifest id (blake3:<64 hex>), not ${shown}`);
}

/** The options of grant and revoke, read once (a getter that throws: `INVALID_ARGUMENT`). */
function grantOptions(options: unknown): { by?: unknown } {
  return readOptionFields(options, ['by'], 'grant options', LedgerError);
}

/**
 * After a read's head and entries passed every other check: the session-heads index's word on the head
 * (HeadWindow.index). Judged last, so a head that names a forged or damaged entry keeps that entry's own code; what is
 * left is a head every check passes that the index (whose root the pinned checkpoint signs) does not commit: a head
 * record set back, with its tail and watermark, under the index (`ROLLBACK`), or an index that is not whole on its path
 * (ManifestError `TREE_DAMAGED`, or `RECORD_CORRUPT` for a node that cannot be read: fsck names the record).
 */
function refuseUnindexed(session: string, index: HeadWindow['index']): void {
  if (index === undefined) return;
  if (index.code === 'ROLLBACK') throw new LedgerError('ROLLBACK', `session ${session}: ${index.problem}`);
  throw new ManifestError(index.code, `session ${session}: ${index.problem}`);
}

/**
 * The options of resume and history (`null`: none), the signal read once (a getter that throws: `INVALID_ARGUMENT`);
 * the signal is checked where it is first used (throwIfCancelled).
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function readOptions(
  options: unknown,
  what: string,
  scope: unknown,
  call: ScopeCall,
): { signal?: AbortSignal | undefined } {
  const o = readOptionFields(options, ['signal'], what, LedgerError);
  refuseOptionsInScope(scope, o, call); // a signal given in the scope: refused, not left out
  return o as { signal?: AbortSignal | undefined };
}

/**
 * The options of publish and checkPublish, each field read once and checked: a getter that throws is
 * `INVALID_ARGUMENT`, and a getter is not asked again between the check and the use. The signal is checked where it is
 * first used (throwIfCancelled).
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function parsePublishOptions(options: unknown, scope: unknown, call: ScopeCall): PublishOptions {
  const o = readOptionFields(options, ['signal', 'expectedPrev', 'covers'], 'publish options', LedgerError);
  const covers = parseCovers(o.covers);
  const expectedPrev = parseExpectedPrev(o.expectedPrev);
  // An option given in the scope (`{ ...scope, expectedPrev }`): refused, not left out (a publish without its guard).
  refuseOptionsInScope(scope, o, call);
  return { signal: o.signal as AbortSignal | undefined, expectedPrev, covers };
}

/**
 * `CHAIN_CONFLICT`: the session's head is not the `expectedPrev` the caller built on. The message names the head found
 * and what to do: another run published in the session, so a context built on the old head is stale.
 */
function headMoved(
  session: string,
  expectedPrev: Digest | null,
  head: { id: Digest; seq: number } | undefined,
  cause?: unknown,
): LedgerError {
  // The stored head's id as the log holds it: a manifest id as it is, anything else (a hand edit) quoted as data.
  const found = head ? `${isDigest(head.id) ? head.id : shownValue(head.id)} at seq ${head.seq}` : 'an empty chain';
  return new LedgerError(
    'CHAIN_CONFLICT',
    `session ${session}: the head moved (expected ${expectedPrev ?? 'an empty chain'}, found ${found}): another run ` +
      'published in it since; resume the session and go on from its head (the next expectedPrev is the id resume ' +
      'returns)',
    cause === undefined ? undefined : { cause },
  );
}

/**
 * `CHAIN_CONFLICT` of a publish whose append the log refused (another process or host committed on the head first):
 * without `expectedPrev`, at each of its `attempts`; with it, where no moved head can be named (`headMoved` names
 * one). `lost`, the log's last refusal (a ManifestError), is the cause: a publish's CHAIN_CONFLICT is the ledger's
 * error, with or without `expectedPrev`. Nothing was published.
 */
function racesLost(session: string, lost: unknown, attempts: number, expectedPrev?: Digest | null): LedgerError {
  const message =
    expectedPrev === undefined
      ? `session ${session}: another writer's append came first at each of ${attempts} attempts (each read the head again and signed again); nothing was published: publish again`
      : `session ${session}: the log refused the append on ${expectedPrev ?? 'an empty chain'} (another writer's append came first), and no other head can be named now; nothing was published: resume the session and go on from its head`;
  return new LedgerError('CHAIN_CONFLICT', message, { cause: lost });
}

/**
 * A lower layer's `CANCELLED` as the ledger's, its cause the signal's reason as every other `CANCELLED` of the ledger
 * has it (a Harness tells its `AbortSignal.timeout` from its user's stop by `err.cause`): it was the lower layer's error,
 * whose own cause the reason was, wherever the abort came in the blob's write or the append.
 */
function toLedgerCancel(err: unknown, signal: AbortSignal | undefined): unknown {
  if (isHandoffLedgerError(err) && err.code === 'CANCELLED' && !(err instanceof LedgerError))
    return new LedgerError('CANCELLED', 'publish cancelled', { cause: signal?.aborted ? signal.reason : err.cause });
  return err;
}

/**
 * A rejection handler of a Ledger method that takes a signal: a `CANCELLED` that says only `operation cancelled` (a
 * wait in a store or a lock, which does not know the call) names the method it ended, `resume cancelled`.
 */
function cancelledAs(method: string): (err: unknown) => never {
  return (err) => {
    throw namedCancel(err, method);
  };
}

/** An append refused because another process closed the signing key's window after this one signed. */
class KeyWindowClosed {
  constructor(readonly error: ManifestError) {}
}

/** What resume refuses a head for by its key (verify-manifest.ts, judged at the manifest's own createdAt). */
const HEAD_KEY_REFUSALS: ReadonlySet<string> = new Set(['KEY_REVOKED', 'KEY_EXPIRED', 'KEY_UNTRUSTED']);

/**
 * A publish refused because the session's head is one resume refuses for its key (`err`, its verification): the
 * handoff it would append would not resume either (resume verifies the entry before the head), so nothing is
 * appended and the caller is told to go on in a new session. The same code as resume's.
 */
function headRefusal(session: string, head: ChainHead, err: ManifestError): ManifestError {
  const what =
    err.code === 'KEY_REVOKED'
      ? 'a revoked key'
      : err.code === 'KEY_UNTRUSTED'
        ? "a key this ledger's trust does not list"
        : "a key outside its window in this ledger's trust";
  const todo =
    err.code === 'KEY_REVOKED'
      ? 'continue in a new session (README, "Key rotation runbook", step 4)'
      : err.code === 'KEY_UNTRUSTED'
        ? "trust the signing host's keys (the `trust` option, HANDOFF_LEDGER_TRUST), or continue in a new session"
        : 'check the trust store against the log (fsck), or continue in a new session';
  return new ManifestError(
    err.code,
    `session ${session}: its head (seq ${head.seq}) is signed by ${what} (${err.message}): resume refuses that head, and would refuse a handoff published on it too, so nothing was published; ${todo}`,
    { cause: err },
  );
}

const payloadEncoder = new TextEncoder();

/** Members of a manifest and of its summary: a manifest with any other member is left to the generic path. */
const MANIFEST_MEMBERS = 11;
const SUMMARY_MEMBERS = 3;

/**
 * The payload bytes of a manifest this ledger is about to sign. The writer never signs what its own verifier would
 * refuse: that would brick the chain head. The verifiers' fast reader (manifests/format/manifest-read.ts) accepts
 * exactly the canonical text of a schema-valid manifest, so a payload it reads needs nothing more; anything else
 * goes through the schema, as the verifiers' slow path does. The text is written member by member
 * (`canonicalManifestText`, equal to the generic canonical encoding for every manifest the schema accepts), for a
 * manifest with exactly the schema's members (covers, when present, is the strict schema's output); any other goes
 * the generic way, as before.
 * @throws LedgerError `INVALID_ARGUMENT` for a manifest the schema refuses
 */
export function checkedPayload(manifest: Manifest): Uint8Array {
  if (
    Object.keys(manifest).length === MANIFEST_MEMBERS + (manifest.covers === undefined ? 0 : 1) &&
    Object.keys(manifest.summary ?? {}).length === SUMMARY_MEMBERS &&
    (manifest.covers === undefined ||
      (Object.getPrototypeOf(manifest.covers) === Object.prototype &&
        Object.keys(manifest.covers).length === (manifest.covers.transcriptDigest === undefined ? 1 : 2)))
  ) {
    const text = canonicalManifestText(manifest);
    if (readCanonicalManifest(text)) return payloadEncoder.encode(text);
  }
  let payload: Uint8Array | undefined;
  try {
    payload = encodeManifest(manifest);
  } catch {
    payload = undefined; // the schema says why, below
  }
  if (payload && readCanonicalManifest(payloadDecoder.decode(payload))) return payload;
  const checked = manifestSchema.safeParse(manifest);
  if (!checked.success)
    throw new LedgerError(
      'INVALID_ARGUMENT',
      `refusing to sign an invalid manifest: ${describeZodError(checked.error, { escaped: true })}`,
    );
  return payload ?? encodeManifest(manifest);
}

const payloadDecoder = new TextDecoder();

/**
 * Refuses an envelope whose signature does not verify under `publicKey` (the key trust.json lists for its signer):
 * nothing is appended, so the head stays one that resume verifies.
 * @throws LedgerError `KEY_INVALID`
 */
function refuseUnverifiable(
  envelope: Envelope,
  payload: Uint8Array,
  publicKey: Uint8Array,
  verifier: SignatureVerifier,
): void {
  const { keyid, sig } = envelope.signatures[0]!;
  const signature = decodeBase64(sig);
  if (!signature || !verifier.verify(signature, pae(envelope.payloadType, payload), publicKey))
    throw new LedgerError(
      'KEY_INVALID',
      `the signer's signature does not verify under the public key trust.json lists for key ${shownValue(keyid, Infinity)} (a KMS key that moved on to another version?): nothing was published; sign with that key, or give the new key a keyId of its own`,
    );
}

/** Marks the calls a maintenance pass makes of the ledger on its way (see `Ledger.tracked`). */
const DURING_MAINTENANCE = Symbol('during maintenance');

export class Ledger {
  readonly host: string;
  readonly root: string;
  readonly log: ManifestLog;
  readonly blobs: BlobStore;
  readonly recovery: RecoveryReport;
  readonly hashBackend: HashBackend;
  readonly verifier: SignatureVerifier;
  /** Spans and metrics of this ledger's operations (see TelemetryOptions). */
  readonly telemetry: LedgerTelemetry;
  private readonly keyring: Keyring;
  private readonly checkpoints: CheckpointGuard;
  private readonly witnesses: WitnessPool | undefined;
  private readonly extraTrust: TrustStore | undefined;
  private readonly maxSummaryBytes: number;
  private readonly inlineSummaryBytes: number;
  private readonly authorizer: Authorizer | undefined;
  private readonly clock: () => Date;
  private readonly notice: (message: string) => void;
  private readonly chains = new KeyedMutex();
  /** Shared by every commit (authorize → sign → append); exclusive for key rotation and principal-wide revocation. */
  private readonly signing = new SharedExclusiveLock();
  /** The latest createdAt this ledger has signed: later manifests are never dated earlier, and rotation waits past it. */
  private lastSignedAt: string | undefined;
  private readonly keyRecordDamage: { keyId: string; error: ManifestError } | undefined;
  private readonly watermarks = new Map<string, number>();
  private closed = false;
  /** Calls of this ledger's API not yet settled (`close` waits for them). */
  private inFlight = 0;
  private closing: Promise<void> | undefined;
  private drained: Array<() => void> = [];
  /**
   * The merged trust, with the keyring generation it was built from: rebuilt whenever the keyring's trust changed,
   * at once (a rotation or revocation that has written its trust but not yet returned is the trust judged by, as the
   * generation that verdicts are remembered under says).
   */
  private trustCache: { generation: number; trust: TrustStore } | undefined;
  /** Verdicts on stored envelopes, valid for the current trust store (a new one starts them afresh). */
  private readonly verified = new VerifiedManifestCache();
  /**
   * The createdAt of sessions' heads this ledger appended or read and judged (`headDate`), by session, with the
   * keyring generation they were judged under: a rotation or revocation since (any change of the keys) has them
   * judged again.
   */
  private readonly headDates = new Map<string, { id: Digest; createdAt: string; generation: number }>();

  /**
   * By session, the entries this ledger last appended to it (its head, and the one before when this ledger appended
   * that too): the exact stored text, its signature and the key it is valid under. A resume that reads one of them
   * hands it to the verified-manifest cache (`rememberSigned`), which then checks all but that signature's curve
   * arithmetic. Kept for as many sessions as `headDates`, least recent dropped; a publish costs one map entry.
   */
  private readonly ownSigned = new Map<string, { head: OwnSigned; before: OwnSigned | undefined }>();

  /**
   * @internal use openLedger
   * @throws LedgerError `INVALID_ARGUMENT` when called other than by openLedger
   */
  constructor(init: {
    host: string;
    root: string;
    log: ManifestLog;
    blobs: BlobStore;
    keyring: Keyring;
    checkpoints: CheckpointGuard;
    witnesses?: WitnessPool | undefined;
    recovery: RecoveryReport;
    hashBackend: HashBackend;
    verifier: SignatureVerifier;
    /** Where notices go: `options.onNotice`, or console.warn (decided once, by openLedger). */
    notice: (message: string) => void;
    options: ResolvedOpenOptions;
    /** The newest createdAt the log holds for the current key (earlier runs, other processes). */
    lastSignedAt?: string | undefined;
    /** The current key's log record, damaged (a diagnosing open goes on for fsck): that key signs nothing. */
    keyRecordDamage?: { keyId: string; error: ManifestError } | undefined;
  }) {
    // Exported for `instanceof` and its type; made by openLedger only. `new Ledger({})` from a caller was a TypeError
    // of whichever field came first.
    let made = false;
    try {
      made = typeof init === 'object' && init !== null && init.keyring instanceof Keyring;
    } catch {
      // a proxy or getter of the caller's: not openLedger's init either
    }
    if (!made)
      throw new LedgerError('INVALID_ARGUMENT', 'a Ledger is not constructed: open one with openLedger(options)');
    this.lastSignedAt = init.lastSignedAt;
    this.keyRecordDamage = init.keyRecordDamage;
    this.host = init.host;
    this.root = init.root;
    this.log = init.log;
    // Inline blobs are readable whatever the threshold: an earlier opening may have written some.
    this.blobs = init.log.inlineBlobs
      ? new TieredBlobStore(init.blobs, init.log.inlineBlobs, init.hashBackend)
      : init.blobs;
    this.keyring = init.keyring;
    this.checkpoints = init.checkpoints;
    this.witnesses = init.witnesses;
    // A witness ahead of the checkpoint submitted (another process of a shared log got it further) is given the log's
    // current tree, read as gc's check reads it: checked against the pin and pinned.
    this.witnesses?.follow(() => this.checkLog());
    this.recovery = init.recovery;
    this.hashBackend = init.hashBackend;
    this.verifier = init.verifier;
    this.extraTrust = init.options.trust;
    this.maxSummaryBytes = init.options.maxSummaryBytes ?? DEFAULT_MAX_SUMMARY_BYTES;
    this.inlineSummaryBytes = init.log.inlineBlobs
      ? (init.options.inlineSummaryBytes ?? DEFAULT_INLINE_SUMMARY_BYTES)
      : -1;
    this.authorizer = init.options.authorizer;
    this.clock = init.options.clock ?? (() => new Date());
    this.notice = init.notice;
    this.telemetry = new LedgerTelemetry(init.options.telemetry, packageVersion());
  }

  /** Every key this ledger trusts: its own trust file plus the keys passed in `trust`. */
  trustStore(): TrustStore {
    return structuredClone(this.trust());
  }

  /**
   * The merged trust store, built once per keyring generation: a verdict remembered under a generation (headDates) is
   * always one judged under that generation's trust.
   */
  private trust(): TrustStore {
    const generation = this.keyring.generation;
    if (this.trustCache?.generation !== generation)
      this.trustCache = { generation, trust: mergeTrust(this.keyring.trustStore(), this.extraTrust) };
    return this.trustCache.trust;
  }

  /**
   * This store's own trust file as it is on disk now (re-read: another process sharing the root may have rotated),
   * without the keys passed in `trust`: what fsck holds the log's key records against.
   * @throws LedgerError `CLOSED`, and as the keys' load at open: `KEY_FILE_UNSAFE`, `KEY_INVALID`, `SIGNER_FAILED`,
   *   `LOCKED` (the trust lock held too long); ManifestError `TRUST_INVALID`; StoreError `STORAGE_FAILED`
   */
  async storeTrust(): Promise<TrustStore> {
    return this.tracked(DURING_MAINTENANCE, async () => {
      await this.reloadKeys();
      return this.keyring.trustStore();
    });
  }

  get keyId(): string {
    return this.keyring.signer.keyId;
  }

  private assertOpen(): void {
    if (this.closed) throw new LedgerError('CLOSED', 'the ledger is closed');
  }

  /**
   * The rollback or fork this ledger has seen (at open, with `diagnose`, or since): every operation that checks the
   * log refuses with it. `undefined` while the log extends the pinned checkpoint.
   */
  get checkpointFailure(): LedgerError | undefined {
    return this.checkpoints.failed;
  }

  /**
   * No rollback or fork seen, no tree damage kept by a diagnosing open: what writes to grants and keys require (reads
   * check the tree themselves). Open is checked once, when a call is admitted (`tracked`): an admitted call that
   * waited for a lock still runs.
   */
  private assertSound(): void {
    if (this.checkpoints.failed) throw this.checkpoints.failed;
    // A tree the diagnosing open could not read: fsck may look, nothing may write.
    if (this.checkpoints.damagedAtOpen) throw this.checkpoints.damagedAtOpen;
  }

  /** The head a publish builds on: the log's own view for appends where it has one (ManifestLog.appendHead). */
  private appendHead(session: string): Promise<ChainHead | undefined> {
    return this.log.appendHead ? this.log.appendHead(session) : this.log.head(session);
  }

  private authorize(scope: Scope, action: Action, head?: ChainHead | null | Promise<ChainHead | null>): Promise<void> {
    return authorize(this.log, this.authorizer, scope.principal, scope.session, action, head);
  }

  /**
   * Authorization judged on the head of the very window a read then returns or walks to. A damaged entry fails
   * the window, not the head: it is then judged on the head read alone, so a refused caller learns nothing of the
   * entries either.
   */
  private authorizeOn(scope: Scope, action: Action, window: Promise<HeadWindow>): Promise<void> {
    return this.authorize(
      scope,
      action,
      window.then(
        (w) => w.head ?? null,
        async () => (await this.log.head(scope.session)) ?? null,
      ),
    );
  }

  /**
   * Publishes a compaction summary: validates it, stores it as a blob, and appends a signed manifest
   * to the session's chain. Nothing is visible until the append commits; any failure or cancellation
   * before that leaves no manifest and the previous head intact.
   * @throws LedgerError `INVALID_ID`, `INVALID_ARGUMENT` (covers, expectedPrev, signal, an options field that throws as it is read, or a scope that carries one of the options: `{ ...scope, expectedPrev }`, whose guard would be left out), `UNAUTHORIZED`, `REVOKED`, `SUMMARY_*`, `CHAIN_CONFLICT` (the head is not `expectedPrev`; or another writer's append won the race at every attempt, the log's refusal the cause: with PostgreSQL, which holds the head for a retry, only
   *   when it could hold none: a new chain, a pool of fewer than 4 connections, or as many heads held as its pool allows), `ROLLBACK` (the chain was cut back: not retryable), `FORK` (the log does not extend its pinned checkpoint), `KEY_INVALID` (an injected signer's signature does not verify under its listed key), `SIGNER_FAILED` (an injected signer threw; its error is the cause), `CANCELLED`, `CLOSED`;
   *   ManifestError `KEY_INVALID` (an injected signer's answer is no 64-byte `Uint8Array`), `KEY_REVOKED`, `KEY_EXPIRED`, `KEY_UNTRUSTED` (the host key signs nothing: rotate it; or the session's
   *   head is signed by a key resume refuses it for, at its createdAt: the handoff would not resume either), `TREE_DAMAGED` / `RECORD_CORRUPT` (as `checkPublish`);
   *   StoreError / ManifestError `STORAGE_FAILED`
   */
  async publish(scope: PublishScope, summary: unknown, options: PublishOptions = {}): Promise<Receipt> {
    // Its ids read once, for the span and the operation alike.
    const read = readScopeOnce(scope, true, SCOPE_CALLS.publish) as PublishScope;
    // The span outside the operation: a call refused CLOSED is a failure recorded like any other.
    return this.telemetry.run(
      'publish',
      { scope: read, host: this.host },
      (span) => this.tracked(() => this.publishTraced(read, summary, options, span)).catch(cancelledAs('publish')),
      (r) => ({ bytes: r.size, attributes: { 'handoff_ledger.seq': r.seq } }),
    );
  }

  private async publishTraced(scope: PublishScope, summary: unknown, given: unknown, span: Span): Promise<Receipt> {
    // Publish step 1: validate ids and options (`null` options too: none); authorize.
    const s = parsePublishScope(scope);
    const options = parsePublishOptions(given, scope, SCOPE_CALLS.publish);
    const { signal, covers } = options;
    throwIfCancelled(signal);
    // Reads that a busy PostgreSQL pool can hold: an abort ends the wait for them (as it ends the append's).
    // With expectedPrev, a head that is already another is CHAIN_CONFLICT here, as the commit would refuse it, before
    // the summary is stored (its blob would be left for gc); after authorization, so a refused caller learns nothing.
    await untilCancelled(
      this.appendHead(s.session).then(async (head) => {
        await this.authorize(s, 'publish', head ?? null);
        if (options.expectedPrev !== undefined && (head?.id ?? null) !== options.expectedPrev) {
          // A log rolled back or forked since the open is that (ROLLBACK, FORK: not retryable), as checkPublish and
          // the commit judge it first; only a log that extends its pin is a head that moved.
          await this.checkpoints.verify();
          throw headMoved(s.session, options.expectedPrev, head);
        }
        // trust.json as it is now in a root other processes share, head or none: a revocation of the host key another
        // process recorded from a time still ahead closes the key's window in the log only there, so the log alone
        // would let it sign until then (signingKey refuses a key with a revocation recorded, whatever the clock says).
        await this.freshTrust();
        // The head it would link to, judged for its key as resume will judge it once it is the entry before the new
        // head (KEY_REVOKED and the like), before the summary is stored; the commit judges the head it links to again
        // (remembered: no read when it is this one and the keys are unchanged).
        if (head) await this.headDate(s.session, head, false);
        // A revoked host key signs nothing, whenever: refused here, before the summary is stored (its blob would be
        // left for gc), by the commit's own rule. Only that refusal: one a rotation in another process may end (a
        // window closed, its new key not yet loaded) is the commit's to judge, under the signing lock, after a reload.
        this.refuseRevokedSigner();
      }),
      signal,
    );
    // Publish step 2: validate the summary (schema, non-empty, UTF-8, size, not incomplete).
    const { source } = prepareSummary(summary, this.maxSummaryBytes, this.inlineSummaryBytes);
    // Publish step 3: encode canonically → put the blob durably (blob durable before manifest), or, for a
    // small summary, hand its bytes to the append, which commits them with the manifest (one durable write).
    const blob = await this.storeSummary(source, signal);
    // Publish step 4: under the chain's lock (a cancellation while another publish of the chain holds it ends the wait).
    return this.chains.run(
      s.session,
      async () => {
        // Another process or host (PostgreSQL) may win the append between our head read and our commit.
        // Without expectedPrev the caller asked for "after whatever is there": read the head again and re-sign.
        // A lost race (not the first attempt's) is retried on a held head where the log can hold one: another
        // process that keeps appending to the session cannot win every time (the first attempt holds nothing, so
        // the common, uncontended publish waits for nobody).
        let hold = false;
        for (let attempt = 1; ; attempt++) {
          try {
            return await this.signing.shared(() => this.commit(s, blob, covers, options, hold), signal);
          } catch (err) {
            if (err instanceof KeyWindowClosed) {
              // Another process rotated or revoked this key after we signed: take its keys and sign again (its
              // trust file may lag the log by a moment, hence the pause).
              if (attempt >= MAX_APPEND_ATTEMPTS) throw err.error;
              await new Promise((r) => setTimeout(r, 5 * attempt));
              // The publish's signal ends the load's wait for the trust lock (another process's rotation under way).
              throwIfCancelled(signal);
              await this.reloadKeys(signal);
              continue;
            }
            const lostRace = err instanceof ManifestError && err.code === 'CHAIN_CONFLICT';
            // With expectedPrev, a race lost between the head's read and the commit is the head that moved, told as
            // the check before it tells it (the head found, and what to do), not as the log's refusal of the append.
            if (lostRace && options.expectedPrev !== undefined)
              throw await this.movedInRace(s.session, options.expectedPrev, err);
            if (!lostRace) throw err;
            // Every attempt lost: the ledger's CHAIN_CONFLICT, as with expectedPrev, the log's refusal its cause.
            if (attempt >= MAX_APPEND_ATTEMPTS) throw racesLost(s.session, err, attempt);
            this.telemetry.chainConflictRetry(span);
            hold = true;
          }
        }
      },
      signal,
    );
  }

  /**
   * A publish with `expectedPrev` whose append the log refused (`lost`, CHAIN_CONFLICT: another process or host
   * committed on the head first): `headMoved` naming the head now, `lost` its cause; `racesLost` when the head cannot
   * be read or is still `expectedPrev` (no head moved to name).
   */
  private async movedInRace(session: string, expectedPrev: Digest | null, lost: ManifestError): Promise<Error> {
    let head: ChainHead | undefined;
    try {
      head = await this.appendHead(session);
    } catch {
      return racesLost(session, lost, 1, expectedPrev);
    }
    return (head?.id ?? null) === expectedPrev
      ? racesLost(session, lost, 1, expectedPrev)
      : headMoved(session, expectedPrev, head, lost);
  }

  /**
   * What `publish(scope, summary, options)` would refuse before it looks at the summary, checked without publishing
   * (publish step 1, and the head against `expectedPrev`): the scope, `covers` and `expectedPrev`, authorization of
   * `publish` on the session's current head (the grant table and the `authorizer`), and, with `expectedPrev`, that
   * the head is still it; that the log's tree extends the pinned checkpoint, judged as the commit judges it before its
   * append (CheckpointGuard.verify: nothing signed or pinned); that the head is one resume accepts for its key (not
   * revoked, expired or untrusted at its createdAt, under trust.json as it is now: resume verifies it as the entry
   * before the next handoff); and that the host key would sign now (not revoked, inside its window); and that the
   * log's append would not refuse the session whatever it holds (a tree found damaged, a chain cut back, the session's
   * path in the session-heads index not whole). `compact` calls it before it asks the model, so a transcript whose
   * summary publish would refuse is never sent to the provider. Passing promises nothing: publish checks all of it
   * again (a revocation or another publish may come in between).
   * @throws LedgerError `INVALID_ID`, `INVALID_ARGUMENT` (covers, expectedPrev, signal, or one of them in the scope, as
   *   publish), `UNAUTHORIZED`, `REVOKED`,
   *   `CHAIN_CONFLICT` (the head is not `expectedPrev`), `ROLLBACK` / `FORK` (seen before, or found now), `CANCELLED`,
   *   `CLOSED`; ManifestError `KEY_REVOKED`, `KEY_EXPIRED`, `KEY_UNTRUSTED` (the host key would not sign, or the head's
   *   key is one resume refuses it for),
   *   `RECORD_CORRUPT` (its log record), `TREE_DAMAGED` / `RECORD_CORRUPT` kept by a diagnosing open or met by the
   *   check of the tree, `TREE_DAMAGED` the log's appends refuse, `ROLLBACK` for a chain cut back that the append would
   *   refuse, `TREE_DAMAGED` / `RECORD_CORRUPT` for the session's path in the session-heads index not whole, as the
   *   append's index update refuses it (ManifestLog.sessionAppendRefusal); StoreError / ManifestError `STORAGE_FAILED`
   */
  async checkPublish(scope: PublishScope, options: PublishOptions = {}): Promise<void> {
    // Its own span and metrics (`check_publish`): a compaction refused here is counted, as its publish would be.
    const read = readScopeOnce(scope, true, SCOPE_CALLS.checkPublish) as PublishScope; // its ids read once, for the span and the check alike
    return this.telemetry.run('check_publish', { scope: read, host: this.host }, () =>
      this.checkPublishTracked(read, options).catch(cancelledAs('checkPublish')),
    );
  }

  private async checkPublishTracked(scope: PublishScope, options: PublishOptions): Promise<void> {
    return this.tracked(async () => {
      const s = parsePublishScope(scope);
      const { signal, expectedPrev } = parsePublishOptions(options, scope, SCOPE_CALLS.checkPublish); // `null` options too, as publish takes them
      throwIfCancelled(signal);
      const head = await untilCancelled(this.appendHead(s.session), signal);
      // Authorization first, as publish authorizes: a caller without the right learns nothing of the head, and is
      // answered UNAUTHORIZED as publish answers it, a rollback or fork recorded or not.
      await untilCancelled(this.authorize(s, 'publish', head ?? null), signal);
      this.assertSound();
      // The commit's check of the log against the pinned checkpoint, by the same rule, signing and pinning nothing: a
      // tree rolled back, forked or damaged since the open is refused here, before the model is asked, with the code
      // the commit would refuse it with.
      await untilCancelled(this.checkpoints.verify(), signal);
      if (expectedPrev !== undefined && (head?.id ?? null) !== expectedPrev)
        throw headMoved(s.session, expectedPrev, head);
      // The host key that would sign it: a revoked or expired key refuses every publish, so the model is not asked.
      // On the signing lock's shared side, as publish's commit: a rotation or revocation of this process is not seen
      // half done (the log's window closed, its new keys not yet written), and no reload of the keys here takes back
      // the keys it writes.
      // Dated as the commit would date it: not before the head it would link to (a head another host dated ahead).
      // And the head judged for its key as resume judges it (KEY_REVOKED and the like: a handoff on it would not
      // resume), with trust.json as it is now in a root other processes share, as resume reads it; on a new session too,
      // for the host key's own judgment below (a revocation another process recorded from a time still ahead).
      await untilCancelled(this.freshTrust(), signal);
      const after = head ? await untilCancelled(this.headDate(s.session, head, false), signal) : undefined;
      await this.signing.shared(async () => {
        try {
          await this.checkSigningKey(signal, after);
        } catch (err) {
          if (!(err instanceof KeyWindowClosed)) throw err;
          // As publish does: another process may have rotated the key meanwhile; its keys are taken and looked at again
          // (awaited, not raced against the signal: a reload left running would end outside the lock; the signal ends
          // its own wait for the trust lock, never a load under it).
          await this.reloadKeys(signal);
          try {
            await this.checkSigningKey(signal, after);
          } catch (again) {
            throw again instanceof KeyWindowClosed ? again.error : again;
          }
        }
      }, signal);
      // What the append itself refuses whatever it holds, by its own rule and as the commit passes it on: a tree or
      // index record found damaged at open (TREE_DAMAGED), this session's chain cut back (ROLLBACK), this session's path
      // in the session-heads index not whole (TREE_DAMAGED, RECORD_CORRUPT: in the words of the append's index update).
      const refused = this.log.sessionAppendRefusal
        ? await untilCancelled(this.log.sessionAppendRefusal(s.session), signal)
        : this.log.appendRefusal?.();
      if (refused?.code === 'ROLLBACK') throw new LedgerError(refused.code, refused.message, { cause: refused });
      if (refused) throw refused;
    });
  }

  /**
   * What publish's commit and its append judge of the host key, without signing: trusted, not revoked, and its window
   * not closed in the log (a rotation or revocation, here or in another process, closes it there first).
   * @throws as `signingKey`; KeyWindowClosed for a window the log closed
   */
  private async checkSigningKey(signal: AbortSignal | undefined, after: string | undefined): Promise<void> {
    const { createdAt } = this.signingKey(after);
    const keyId = this.keyring.signer.keyId;
    const rec = await untilCancelled(this.log.signingKeys.get(keyId), signal);
    if (rec?.closedAt !== undefined && createdAt >= rec.closedAt)
      throw new KeyWindowClosed(
        new ManifestError(
          'KEY_EXPIRED',
          `key ${quoted(keyId)} of host ${quoted(this.host)}: its window closed at ${rec.closedAt} (rotated or revoked); ${this.keyring.signingAdvice()}`,
        ),
      );
  }

  /**
   * Publish step 3. A large summary is encoded as the store writes it; the store measures it against
   * the same limit. A small one is only hashed here: the append writes it inline.
   */
  private async storeSummary(
    source: Uint8Array | AsyncIterable<Uint8Array>,
    signal?: AbortSignal,
  ): Promise<SummaryBlob> {
    if (source instanceof Uint8Array && source.length <= this.inlineSummaryBytes) {
      throwIfCancelled(signal);
      // Up to a few KiB, in one synchronous call (`digestOf`: WebAssembly, checked against the reference before use,
      // as verify hashes small blobs): ~2 µs at 1 KiB where a hasher of the backend took ~6 (native: an object, three
      // calls across N-API and a copy) and a turn of the microtask queue. Every backend gives the same digest.
      const digest =
        source.length <= SYNC_HASH_MAX_BYTES ? digestOf(source) : await hashBytes(source, this.hashBackend);
      return { digest, size: source.length, inline: source };
    }
    return this.blobs.put(source, { signal, maxBytes: this.maxSummaryBytes }).catch((err) => {
      if (err instanceof StoreError && err.code === 'BLOB_TOO_LARGE') {
        throw new LedgerError('SUMMARY_TOO_LARGE', `the summary is too large to store: ${err.message}`, { cause: err });
      }
      throw toLedgerCancel(err, signal);
    });
  }

  /**
   * `signingKey`'s `KEY_REVOKED`, alone: the host key has a revocation recorded in trust.json (no later answer signs
   * with it). Its other refusals are left to the commit (they may end: a rotation in another process, half seen).
   * @throws ManifestError `KEY_REVOKED`
   */
  private refuseRevokedSigner(): void {
    try {
      this.signingKey();
    } catch (err) {
      if (err instanceof ManifestError && err.code === 'KEY_REVOKED') throw err;
    }
  }

  /**
   * The time a manifest signed now carries and the trusted public key of the host key that would sign it. A clock
   * that steps back must not date a manifest before one already signed here, nor before its key's window; a
   * rotated-out or revoked key must not sign: its manifests would never verify.
   * @throws ManifestError `KEY_REVOKED`, `KEY_UNTRUSTED`, `RECORD_CORRUPT` (its log record, at a diagnosing open);
   *   KeyWindowClosed (`KEY_EXPIRED`: another process may be mid-rotation, its trust file written and its new key file
   *   not yet: look again)
   */
  private signingKey(after?: string): { createdAt: string; publicKey: Uint8Array } {
    const signer = this.keyring.signer;
    // Its record may hold the window a rotation closed, and its newest signed time: unknown, nothing is signed.
    if (this.keyRecordDamage?.keyId === signer.keyId) throw this.keyRecordDamage.error;
    let createdAt = this.clock().toISOString();
    for (const floor of [this.lastSignedAt, this.keyring.signsFrom(), after])
      if (floor !== undefined && Date.parse(floor) > Date.parse(createdAt)) createdAt = floor;
    const usable = findTrustedKey(this.trust(), this.host, signer.keyId, createdAt);
    // A revoked key signs nothing new, whatever time the clock gives: a clock stepped back before the revocation
    // would otherwise date a fresh manifest inside the key's window, and it would verify.
    if (usable.ok && usable.key.revokedAt !== undefined)
      throw new ManifestError(
        'KEY_REVOKED',
        `key ${quoted(signer.keyId)} of host ${quoted(this.host)} is revoked (from ${usable.key.revokedAt}) and signs no new manifest; rotate the host key`,
      );
    if (!usable.ok) {
      const err = new ManifestError(usable.code, `${usable.message}; ${this.keyring.signingAdvice()}`);
      if (usable.code === 'KEY_EXPIRED') throw new KeyWindowClosed(err);
      throw err;
    }
    return { createdAt, publicKey: usable.publicKey };
  }

  /**
   * Judges the head a publish would link to and returns its createdAt, the date the next manifest of its session must
   * not precede. The head is refused (`headRefusal`) when resume would refuse it for its key (`KEY_REVOKED`,
   * `KEY_EXPIRED`, `KEY_UNTRUSTED` at its own createdAt, under the trust this ledger holds): once the next handoff is
   * appended, resume verifies this head as the entry before it, and would refuse that handoff too. A head this ledger
   * appended, or read and judged, under the keys it holds now (the keyring's generation: a rotation, a revocation, a
   * reload of the keys changes it) is not read again; any other is read from the log and verified (through the
   * verified-manifest cache). An entry that does not verify for another reason (damage: a bad signature, a manifest
   * that does not parse), or cannot be read, dates nothing and is not refused here: resume and fsck report it, and the
   * append judges the store as ever. Undefined, with a notice (publish's; checkPublish passes `notify` false), for a
   * head dated more than MAX_HEAD_LEAD_MS ahead of this host's clock.
   * @throws ManifestError `KEY_REVOKED`, `KEY_EXPIRED`, `KEY_UNTRUSTED` (the head's key, as resume judges it)
   */
  private async headDate(session: string, head: ChainHead, notify = true): Promise<string | undefined> {
    const known = this.headDates.get(session);
    let createdAt = known?.id === head.id && known.generation === this.keyring.generation ? known.createdAt : undefined;
    if (createdAt === undefined) {
      let entry: LogEntry | undefined;
      try {
        entry = await this.log.entry(session, head.seq);
      } catch {
        return undefined;
      }
      if (entry?.id !== head.id) return undefined;
      // The generation the verdict holds for, taken with the trust it is judged under (nothing awaited between).
      let generation = this.keyring.generation;
      // The head's date, or the refusal resume would make of it (any other failure dates nothing: undefined).
      const judge = (): string | ManifestError | undefined => {
        try {
          return this.verified.verify(entry.envelope, { trust: this.trust(), verifier: this.verifier }).manifest
            .createdAt;
        } catch (err) {
          return err instanceof ManifestError && HEAD_KEY_REFUSALS.has(err.code) ? err : undefined;
        }
      };
      let judged = judge();
      // A head another process of this root appended after this one last read trust.json, signed with a key it has
      // rotated to (the commit reads the head again: one appended since publish judged the head before it): judged
      // again under trust.json as it is now, as resume would read it, before it is refused.
      if (
        judged instanceof ManifestError &&
        this.log.exclusive !== true &&
        (this.keysStale || (await this.keyring.changedOnDisk()))
      ) {
        await this.freshTrust();
        generation = this.keyring.generation;
        judged = judge();
      }
      if (judged instanceof ManifestError) throw headRefusal(session, head, judged);
      if (judged === undefined) return undefined;
      createdAt = judged;
      this.rememberHeadDate(session, head.id, createdAt, generation);
    }
    const lead = Date.parse(createdAt) - this.clock().getTime();
    if (lead <= MAX_HEAD_LEAD_MS) return createdAt;
    // This key signed as late already (its own head, a clock stepped back since): that floor dates the manifest.
    if (this.lastSignedAt !== undefined && Date.parse(this.lastSignedAt) >= Date.parse(createdAt)) return undefined;
    if (notify)
      this.notice(
        `publish: session ${session}'s head (seq ${head.seq}) is dated ${createdAt}, ${lead} ms after this host's clock: this manifest is dated by the clock (an auditor will see TIME_REVERSED); check the hosts' clocks`,
      );
    return undefined;
  }

  private rememberHeadDate(session: string, id: Digest, createdAt: string, generation: number): void {
    this.headDates.delete(session);
    this.headDates.set(session, { id, createdAt, generation });
    if (this.headDates.size > HEAD_DATES_KEPT) this.headDates.delete(this.headDates.keys().next().value!);
  }

  /** Publish step 4 under the chain lock: the point of no return, then build, sign and append one manifest. */
  private async commit(
    s: PublishScope,
    blob: SummaryBlob,
    covers: PublishOptions['covers'],
    options: PublishOptions,
    hold: boolean,
  ): Promise<Receipt> {
    if (!hold || !this.log.holdHead) return this.commitOn(s, blob, covers, options, undefined);
    // The head held from its read to the append (ManifestLog.holdHead); none to hold: as without.
    const held = await untilCancelled(this.log.holdHead(s.session, { signal: options.signal }), options.signal);
    try {
      return await this.commitOn(s, blob, covers, options, held);
    } finally {
      await held?.release();
    }
  }

  /** `commit` on the head `held` (a held head), or on the one it reads. */
  private async commitOn(
    s: PublishScope,
    blob: SummaryBlob,
    covers: PublishOptions['covers'],
    options: PublishOptions,
    held: HeadHold | undefined,
  ): Promise<Receipt> {
    const { signal } = options;
    // Point of no return: re-check cancellation and authorization.
    throwIfCancelled(signal);
    // Never append to a log that does not extend the pinned checkpoint (rolled back or forked). The check goes out
    // beside the head's and the grants' reads (a shared log's round trips overlap); its refusal is the answer before
    // theirs, as if it had come first. One known already asks nothing more (the authorizer included).
    if (this.checkpoints.failed) throw this.checkpoints.failed;
    const checked = untilCancelled(this.checkpoints.check(), signal);
    checked.catch(() => {}); // awaited below, on every path
    // One head serves the authorization (its owner) and the manifest (its seq and prev): the one the append checks.
    let head: ChainHead | undefined;
    try {
      head = held ? held.head : await untilCancelled(this.appendHead(s.session), signal);
      await untilCancelled(this.authorize(s, 'publish', head ?? null), signal);
    } catch (err) {
      await checked;
      throw err;
    }
    await checked;
    if (options.expectedPrev !== undefined && (head?.id ?? null) !== options.expectedPrev)
      throw headMoved(s.session, options.expectedPrev, head);
    // Never dated before the head it links to (another host's clock may be ahead of this one's).
    const after = head ? await untilCancelled(this.headDate(s.session, head), signal) : undefined;
    const signer = this.keyring.signer;
    // The keys this manifest is signed under (signingKey judges the key by them): the head it makes needs no judging
    // again while they are the keys this ledger holds.
    const generation = this.keyring.generation;
    const { createdAt, publicKey } = this.signingKey(after);
    const manifest: Manifest = {
      v: 1,
      kind: 'compaction',
      host: this.host,
      principal: s.principal,
      session: s.session,
      run: s.run,
      seq: head ? head.seq + 1 : 0,
      prev: head ? head.id : null,
      summary: { digest: blob.digest, size: blob.size, mediaType: SUMMARY_MEDIA_TYPE },
      ...(covers ? { covers } : {}),
      createdAt,
      keyId: signer.keyId,
    };
    const payload = checkedPayload(manifest);
    this.lastSignedAt = createdAt;
    const id = manifestId(payload);
    // An injected signer (a KMS) that never answers must not hold the chain's lock past the caller's abort.
    const envelope = await untilCancelled(signEnvelope(MANIFEST_PAYLOAD_TYPE, payload, signer), signal);
    // An injected signer was checked at open, but a KMS alias can be pointed at another key version since: a
    // signature that does not verify under the key trust.json lists for it would make a head nobody can resume.
    if (this.keyring.signerInjected) refuseUnverifiable(envelope, payload, publicKey, this.verifier);
    throwIfCancelled(signal);
    const stored = serializeEnvelope(envelope);
    let appended: LogEntry | undefined;
    try {
      // The append answers the signal until it commits (PostgreSQL: until COMMIT is sent, a lock wait included).
      const request: AppendRequest = {
        session: s.session,
        principal: s.principal,
        seq: manifest.seq,
        prev: manifest.prev,
        id,
        envelope: stored,
        ...(blob.inline ? { blob: { digest: blob.digest, bytes: blob.inline } } : {}),
        signed: { keyId: signer.keyId, createdAt },
      };
      appended = await (held ? held.append(request) : this.log.append(request, { signal }));
    } catch (err) {
      if (err instanceof ManifestError && err.code === 'KEY_EXPIRED') throw new KeyWindowClosed(err);
      if (err instanceof ManifestError && (err.code === 'REVOKED' || err.code === 'ROLLBACK'))
        throw new LedgerError(err.code, err.message, { cause: err });
      throw toLedgerCancel(err, signal);
    }
    // Publish step 5: committed. Nothing after this point may turn the publish into a failure.
    this.rememberHeadDate(s.session, id, createdAt, generation);
    // The signature is this process's own, over these very bytes, valid under the signer's key (an injected signer's
    // was verified above): a resume of this head checks all else, not the signature again (VerifiedManifestCache).
    const own: OwnSigned = {
      id,
      text: stored,
      sig: envelope.signatures[0]!.sig,
      publicKey: this.keyring.signerInjected ? publicKey : signer.publicKey,
    };
    const last = this.ownSigned.get(s.session);
    this.ownSigned.delete(s.session);
    this.ownSigned.set(s.session, { head: own, before: last?.head.id === manifest.prev ? last.head : undefined });
    if (this.ownSigned.size > HEAD_DATES_KEPT) this.ownSigned.delete(this.ownSigned.keys().next().value!);
    // (The log raised the persisted watermark in the append itself.)
    this.watermarks.set(s.session, Math.max(this.watermarks.get(s.session) ?? -1, manifest.seq));
    // The new tree is signed and pinned (group commits share one checkpoint). A rollback or fork found
    // here stays with the guard, which refuses every later operation. A pin that fails (its file, its
    // signature) does not fail the publish: the manifest is durable, and an error would invite the same
    // summary again. It is said through onNotice; the next operation's check pins before it goes on.
    // Witnesses are asked in the background: a publish never waits for them.
    let cp: SignedCheckpoint | undefined;
    try {
      // The tree this append committed may be pinned unread where the log knows it (a log of the caller's that answers
      // no entry, against its contract, has its tree read: nothing here may fail a committed publish).
      const position = (appended as Partial<LogEntry> | undefined)?.position;
      cp = await this.checkpoints.sync(typeof position === 'number' ? { afterOwnAppend: position } : {});
    } catch (err) {
      const why = errorText(err);
      try {
        this.notice(
          `publish: session ${s.session} seq ${manifest.seq} is committed, but no checkpoint holding it is pinned yet (${why}); the next operation pins it or refuses`,
        );
      } catch {
        // a notice that fails is not the publish's failure
      }
    }
    try {
      if (cp) this.witnesses?.submit(cp);
    } catch {
      // witnesses are asked in the background; their failures are theirs
    }
    return { id, seq: manifest.seq, digest: blob.digest, size: blob.size, envelope };
  }

  /**
   * Turns the chain checker's verdict on one entry into the ledger's refusal: the manifest's own error,
   * `SCOPE_MISMATCH` for an entry of another session, `CHAIN_BROKEN` for any other broken rule. Time
   * running backwards is the auditor's and fsck's finding, not a reason to refuse a verified chain.
   */
  private accept(session: string, seq: number, checked: CheckedEntry): VerifiedManifest {
    // A key the trust does not list is most often another host's of a shared store whose keys this one was not
    // given: said where, and what to do, as publish says it of a head so signed.
    if (checked.error?.code === 'KEY_UNTRUSTED')
      throw new ManifestError(
        'KEY_UNTRUSTED',
        `session ${session} seq ${seq}: ${checked.error.message}: trust its host's keys (the \`trust\` option, HANDOFF_LEDGER_TRUST: that host's \`keys export\`)`,
        { cause: checked.error },
      );
    if (checked.error) throw checked.error;
    const broken = checked.findings.find((f) => f.code !== 'TIME_REVERSED');
    if (broken?.code === 'SCOPE_MISMATCH')
      throw new LedgerError('SCOPE_MISMATCH', `session ${session} seq ${seq}: ${broken.message}`);
    if (broken) throw new LedgerError('CHAIN_BROKEN', `session ${session} seq ${seq}: ${broken.message}`);
    return checked.verified!;
  }

  private checker(session: string, startsAt = 0): ChainChecker {
    return new ChainChecker(session, { trust: this.trust(), verifier: this.verifier, cache: this.verified }, startsAt);
  }

  /**
   * Reads a session's head and refuses it unless it passes the head rules, with this process's own
   * watermark too: not below the highest seq ever verified or published here, nothing beyond it, and
   * naming a stored entry with its id. Returns the head, that entry and the entry before it, all read in one
   * round from one committed state (`ManifestLog.headWindow`), and the watermark the log holds.
   */
  private async readHead(
    session: string,
    window: Promise<HeadWindow> = this.log.headWindow(session),
    // What this process knew when the read began: a publish that commits meanwhile may be past the read's state.
    knownBefore = this.watermarks.get(session) ?? -1,
  ): Promise<
    | {
        head: ChainHead;
        entry: LogEntry;
        prev: LogEntry | undefined;
        stored: number;
        index: HeadWindow['index'];
      }
    | undefined
  > {
    const facts = await window;
    const known = Math.max(knownBefore, facts.watermark ?? -1);
    const [problem] = headProblems({ ...facts, watermark: known < 0 ? undefined : known });
    if (problem) {
      throw new LedgerError(
        problem.code === 'ROLLBACK' ? 'ROLLBACK' : 'CHAIN_BROKEN',
        `session ${session}: ${problem.problem}`,
      );
    }
    return (
      facts.head && {
        head: facts.head,
        entry: facts.entryAtHead!,
        prev: facts.entryBeforeHead,
        stored: facts.watermark ?? -1,
        index: facts.index,
      }
    );
  }

  /**
   * Returns the latest verified summary of a session, or `undefined` when it has none. Verifies the
   * signature (trusted key for the host at its time), the scope, the link to the previous entry and
   * the blob's digest and size before any summary byte is returned; also that the session-heads index (whose root the
   * pinned checkpoint signs) commits this head: on the embedded store at the session's first read in this process, on
   * PostgreSQL at every read.
   * @throws LedgerError `INVALID_ID`, `INVALID_ARGUMENT` (a signal that is none, an options field that throws as it
   *   is read, or a scope that carries a signal: it goes in the options), `CANCELLED`, `CLOSED`, `ROLLBACK`, `SCOPE_MISMATCH`, `CHAIN_BROKEN`, `UNAUTHORIZED`, `REVOKED`;
   *   ManifestError `SIGNATURE_INVALID`, `KEY_UNTRUSTED`, `KEY_EXPIRED`, `KEY_REVOKED`, `MANIFEST_INVALID`,
   *   `TREE_DAMAGED` / `RECORD_CORRUPT` (the session-heads index on the session's path is not whole or cannot be read,
   *   so the head cannot be held to it);
   *   StoreError `BLOB_INTEGRITY`, `BLOB_NOT_FOUND`
   */
  async resume(scope: Scope, options: { signal?: AbortSignal | undefined } = {}): Promise<Resumed | undefined> {
    const read = readScopeOnce(scope, false, SCOPE_CALLS.resume) as Scope; // its ids read once, for the span and the operation alike
    return this.telemetry.run(
      'resume',
      { scope: read, host: this.host },
      () => this.tracked(() => this.resumeTraced(read, options)).catch(cancelledAs('resume')),
      (r) => ({
        attributes: { 'handoff_ledger.found': r !== undefined, ...(r ? { 'handoff_ledger.seq': r.seq } : {}) },
        ...(r ? { bytes: r.manifest.summary.size } : {}),
      }),
    );
  }

  private async resumeTraced(scope: Scope, given: unknown): Promise<Resumed | undefined> {
    const s = parseScope(scope);
    const options = readOptions(given, 'resume options', scope, SCOPE_CALLS.resume);
    throwIfCancelled(options.signal);
    // One round of reads (the head, the entries at, after and before it, the watermark) serves authorization
    // and the head rules; the grants and the checkpoint check go out beside it: a small resume is a round trip
    // or two to the log, not its CPU. Nothing is returned unless all pass, and authorization is judged first,
    // so a refused caller learns nothing of the log.
    const knownBefore = this.watermarks.get(s.session) ?? -1;
    const window = this.log.headWindow(s.session);
    const authorized = this.authorizeOn(s, 'resume', window);
    // The keys before the checkpoint it signs: never one signed with a key another process of this root revoked.
    const trusted = this.freshTrust();
    const checked = trusted.then(() => this.checkpoints.sync());
    const reading = this.readHead(s.session, window, knownBefore);
    for (const p of [window, checked, reading, trusted]) p.catch(() => {}); // awaited below, after authorization
    // Each wait ends at an abort (an authorizer or a log read that never answers must not hold the caller, nor close).
    await untilCancelled(authorized, options.signal);
    await untilCancelled(checked, options.signal);
    const read = await untilCancelled(reading, options.signal);
    await trusted;
    if (!read) {
      // No head: none unless the index commits one (the session's records removed under it).
      refuseUnindexed(s.session, (await window).index);
      return undefined;
    }
    const { head, entry, prev } = read;
    // Entries this ledger appended and signed itself, read back as it stored them: their signatures are its own.
    const own = this.ownSigned.get(s.session);
    for (const mine of own ? [own.head, own.before] : [])
      if (mine && (mine.text === entry.envelope || mine.text === prev?.envelope))
        this.verified.rememberSigned(mine.text, mine.sig, mine.publicKey);
    // The head's entry and the one before it, through the same chain rules as history and fsck.
    const checker = this.checker(s.session, Math.max(head.seq - 1, 0));
    if (head.seq > 0) {
      if (!prev) throw new LedgerError('CHAIN_BROKEN', `session ${s.session}: seq ${head.seq - 1} is missing`);
      this.accept(s.session, prev.seq, checker.check(prev));
    }
    const { manifest, id } = this.accept(s.session, head.seq, checker.check(entry));
    throwIfCancelled(options.signal);
    const summary = await this.readSummary(manifest.summary, options.signal);
    refuseUnindexed(s.session, read.index);
    this.watermarks.set(s.session, Math.max(this.watermarks.get(s.session) ?? -1, head.seq));
    // The log's watermark was read with the head: raised only when below (a no-op write is a round trip).
    if (read.stored < head.seq) await this.log.setWatermark(s.session, head.seq).catch(() => {});
    return { summary, manifest, id, seq: head.seq };
  }

  /**
   * The summary a manifest names, verified against its digest and size: decoded as it is read from
   * STREAM_DECODE_FROM (128 KiB) on, else read whole and parsed.
   */
  private async readSummary(ref: { digest: Digest; size: number }, signal?: AbortSignal): Promise<Summary> {
    try {
      return await this.readSummaryOf(ref, signal);
    } catch (err) {
      // Read with a limit of at least the signed size: a stored blob over it is not the one the manifest names.
      if (err instanceof StoreError && err.code === 'BLOB_TOO_LARGE')
        throw new StoreError(
          'BLOB_INTEGRITY',
          `summary ${ref.digest} is larger than the manifest's ${ref.size} bytes`,
          {
            cause: err,
          },
        );
      throw err;
    }
  }

  private async readSummaryOf(ref: { digest: Digest; size: number }, signal?: AbortSignal): Promise<Summary> {
    const get = { signal, maxBytes: Math.max(this.maxSummaryBytes, ref.size) };
    if (ref.size >= STREAM_DECODE_FROM && canDecodeStream()) {
      const what = `summary ${ref.digest}`;
      // The decoder sizes its buffer by the manifest's claim. Within the limit every summary may reach, that
      // buffer is one the ledger accepts anyway, and the stream's total is held to the claim (BLOB_INTEGRITY).
      if (ref.size <= this.maxSummaryBytes)
        return decodeSummaryStream(this.blobs.chunks(ref.digest, get), ref.size, what);
      // Beyond it, the claim is held to the stored size before the first chunk reaches the decoder. The stat
      // runs while the stream opens the blob, not before (a round of calls less).
      const sized = this.blobs.stat(ref.digest).then((stored) => {
        if (stored && stored.size !== ref.size) {
          throw new StoreError(
            'BLOB_INTEGRITY',
            `summary ${ref.digest} is ${stored.size} bytes, the manifest says ${ref.size}`,
          );
        }
      });
      sized.catch(() => {}); // awaited before the first chunk is used
      return decodeSummaryStream(afterCheck(sized, this.blobs.chunks(ref.digest, get)), ref.size, what);
    }
    const bytes = await this.blobs.get(ref.digest, get);
    if (bytes.length !== ref.size) {
      throw new StoreError(
        'BLOB_INTEGRITY',
        `summary ${ref.digest} is ${bytes.length} bytes, the manifest says ${ref.size}`,
      );
    }
    return decodeSummary(bytes);
  }

  /**
   * The session's verified chain, oldest first. Every entry's signature, scope and link are checked.
   * @throws as `resume` (a chain that does not end at its head: `CHAIN_BROKEN`)
   */
  async history(scope: Scope, options: { signal?: AbortSignal | undefined } = {}): Promise<HistoryEntry[]> {
    const read = readScopeOnce(scope, false, SCOPE_CALLS.history) as Scope; // its ids read once, for the span and the operation alike
    return this.telemetry.run(
      'history',
      { scope: read, host: this.host },
      () => this.tracked(() => this.historyTraced(read, options)).catch(cancelledAs('history')),
      (entries) => ({ attributes: { 'handoff_ledger.manifests': entries.length } }),
    );
  }

  private async historyTraced(scope: Scope, given: unknown): Promise<HistoryEntry[]> {
    const s = parseScope(scope);
    const { signal } = readOptions(given, 'history options', scope, SCOPE_CALLS.history);
    throwIfCancelled(signal);
    // Authorized on the very head it then walks to, as resume is: a first publish of the session that commits
    // between an authorization on "no head yet" and a later head read must not reach a caller without rights.
    const knownBefore = this.watermarks.get(s.session) ?? -1;
    const window = this.log.headWindow(s.session);
    window.catch(() => {}); // awaited below, after authorization
    // Each wait ends at an abort, as resume's do.
    await untilCancelled(this.authorizeOn(s, 'history', window), signal);
    // Keys first: a checkpoint is never signed with a key another process of this root has revoked meanwhile.
    await untilCancelled(this.freshTrust(), signal);
    await untilCancelled(this.checkpoints.sync(), signal);
    const read = await untilCancelled(this.readHead(s.session, window, knownBefore), signal);
    const head = read?.head;
    const out: HistoryEntry[] = [];
    if (!head) {
      refuseUnindexed(s.session, (await window).index); // as resume: none, unless the index commits a head
      return out;
    }
    const checker = this.checker(s.session);
    for await (const entry of this.log.chain(s.session)) {
      throwIfCancelled(signal);
      if (entry.seq > head.seq) break;
      const v = this.accept(s.session, entry.seq, checker.check(entry));
      out.push({ id: v.id, manifest: v.manifest, envelope: v.envelope });
    }
    if (out.length !== head.seq + 1 || out[head.seq]?.id !== head.id) {
      throw new LedgerError('CHAIN_BROKEN', `session ${s.session}: the chain does not end at its head`);
    }
    refuseUnindexed(s.session, read.index);
    return out;
  }

  /**
   * The log's latest checkpoint, signed by this host's checkpoint key, after checking that the log extends
   * the one pinned before.
   * @throws LedgerError `ROLLBACK`, `FORK`, `CLOSED`, `LOCKED` (another process of a shared root held the pin's lock
   *   over 30 s); ManifestError `TREE_DAMAGED` / `RECORD_CORRUPT` (a tree that cannot be read, or kept by a diagnosing
   *   open), `KEY_REVOKED` (a checkpoint key trust.json lists as revoked), `LOCKED` (PostgreSQL); StoreError /
   *   ManifestError `STORAGE_FAILED`
   */
  async checkpoint(): Promise<SignedCheckpoint> {
    return this.tracked(DURING_MAINTENANCE, async () => {
      await this.freshTrust(); // never signed with a checkpoint key another process of this root revoked
      const cp = await this.checkpoints.sync();
      // With witnesses: the note carries the cosignatures gathered for this very tree (one bounded round).
      return this.witnesses ? this.witnesses.cosign(cp) : cp;
    });
  }

  /**
   * Checks that the log extends the pinned checkpoint and pins the current one, without a witness round (gc's check
   * before it collects).
   * @throws as `checkpoint`
   */
  async checkLog(): Promise<SignedCheckpoint> {
    return this.tracked(DURING_MAINTENANCE, async () => {
      await this.freshTrust();
      return this.checkpoints.sync();
    });
  }

  /** The note verifier key (`<origin>+<hash>+<key>`) of this host's current checkpoint key. */
  get checkpointVerifierKey(): string {
    return this.keyring.checkpointVerifierKey;
  }

  /**
   * RFC 6962 inclusion proof of a manifest in the tree of `size` entries (default, or `null`: the latest checkpoint).
   * @throws LedgerError `INVALID_ID` (`id` is not a manifest id), `NOT_FOUND`, `INVALID_ARGUMENT` (a size out of range,
   *   an options field that throws as it is read), `ROLLBACK`, `FORK`, `CLOSED`,
   *   `RECORD_CORRUPT` (the log's position record for the id leads to another manifest); ManifestError
   *   `RECORD_CORRUPT` (that record cannot be parsed); the checkpoint's other codes (as `checkpoint`)
   */
  async inclusionProof(id: Digest, options: { size?: number | null | undefined } = {}): Promise<InclusionProof> {
    return this.tracked(async () => {
      parseManifestId(id);
      const { size } = readOptionFields(options, ['size'], 'inclusion proof options', LedgerError);
      await this.freshTrust();
      // `null` is no size (the latest), as `null` is "none" for every option.
      const at = (size ?? undefined) as number | undefined;
      return inclusionProof(this.log, (await this.checkpoints.sync()).checkpoint.size, id, at);
    });
  }

  /**
   * RFC 6962 consistency proof from the tree of `oldSize` entries to that of `size` (default, or `null`: latest).
   * @throws LedgerError `INVALID_ARGUMENT` (a size out of range, no old size, an options field that throws as it is
   *   read), `ROLLBACK`, `FORK`, `CLOSED`; the checkpoint's other codes (as `checkpoint`)
   */
  async consistencyProof(
    oldSize: number,
    options: { size?: number | null | undefined } = {},
  ): Promise<ConsistencyProof> {
    return this.tracked(async () => {
      const { size } = readOptionFields(options, ['size'], 'consistency proof options', LedgerError);
      await this.freshTrust();
      return consistencyProof(
        this.log,
        (await this.checkpoints.sync()).checkpoint.size,
        oldSize,
        (size ?? undefined) as number | undefined, // `null`: the latest, as for inclusionProof
      );
    });
  }

  /**
   * Grants `principal` access to `session` (or lifts a principal-wide revocation with `'*'`). Durable.
   * @throws LedgerError `INVALID_ID`, `INVALID_ARGUMENT` (an options field that throws as it is read), `CLOSED`,
   *   `ROLLBACK` / `FORK` (seen before: no grant is written past them); ManifestError `INVALID_ARGUMENT` (a `by` the
   *   grant table refuses), `TREE_DAMAGED` / `RECORD_CORRUPT` (kept by a diagnosing open), `LOCKED` (PostgreSQL),
   *   `STORAGE_FAILED`
   */
  async grant(principal: string, session: string, options: { by?: string | undefined } = {}): Promise<GrantRecord> {
    return this.tracked(async () => {
      return this.setGrant(principal, session, 'granted', grantOptions(options).by);
    });
  }

  /**
   * Revokes `principal`'s access to `session` (`'*'`: everywhere). Deletes nothing; durable; immediate.
   * @throws as `grant`
   */
  async revoke(principal: string, session: string, options: { by?: string | undefined } = {}): Promise<GrantRecord> {
    return this.tracked(async () => {
      // Taken under the chain lock so that no publish of this session is between its commit-point check and its append;
      // principal-wide, under the signing lock's exclusive side, which waits for every commit in flight.
      const { by } = grantOptions(options);
      if (session === '*') return this.signing.exclusive(() => this.setGrant(principal, session, 'revoked', by));
      return this.chains.run(session, () => this.setGrant(principal, session, 'revoked', by));
    });
  }

  /**
   * The grant table's records, all or those of a principal and/or session.
   * @throws LedgerError `INVALID_ARGUMENT` (a filter that is neither an object nor null, a field that throws as it
   *   is read), `INVALID_ID` (the grant table's refusals, as the ledger's), `CLOSED`, `ROLLBACK` / `FORK` (as `grant`);
   *   ManifestError `STORAGE_FAILED`
   */
  async grants(filter: { principal?: string | undefined; session?: string | undefined } = {}): Promise<GrantRecord[]> {
    return this.tracked(async () => {
      this.assertSound();
      // `null`: none, as for every option. The log's grant table reads each field once and checks it: a filter that is
      // not an object (a principal's name given as the filter) or a field that throws as it is read, INVALID_ARGUMENT.
      // Its refusal of the filter is the ledger's (LedgerError, as grant and revoke refuse a bad id), not the log's.
      return await this.log.grants.list(filter ?? {}).catch((err: unknown) => {
        if (err instanceof ManifestError && (err.code === 'INVALID_ID' || err.code === 'INVALID_ARGUMENT'))
          throw new LedgerError(err.code, err.message, { cause: err });
        throw err;
      });
    });
  }

  private async setGrant(
    principal: string,
    session: string,
    state: 'granted' | 'revoked',
    by: unknown,
  ): Promise<GrantRecord> {
    this.assertSound();
    parseScope({ principal, session: session === '*' ? 'all' : session });
    const record = { principal, session, state, at: this.clock().toISOString(), ...(by ? { by } : {}) } as GrantRecord;
    await this.log.grants.put(record);
    return record;
  }

  /**
   * Rotates this host's key (see Keyring.rotate); later manifests are signed with the new key. Waits for
   * publishes in flight, and ends the old key's window after the last manifest it signed.
   * @throws LedgerError `CLOSED`, `ROLLBACK` / `FORK` (as `grant`), `KEY_INVALID` (an injected signer: rotate it where
   *   it lives), `LOCKED` (another process held `trust.json.lock` over 30 s), and as the keys' load at open
   *   (`KEY_FILE_UNSAFE`, `KEY_INVALID`, `SIGNER_FAILED`); StoreError `STORAGE_FAILED` (a key file or trust.json that
   *   cannot be written); ManifestError `STORAGE_FAILED`, `LOCKED` (the log's key record)
   */
  async rotateKey(): Promise<string> {
    return this.tracked(async () => {
      this.assertSound();
      return this.signing.exclusive(async () => {
        // Under the trust lock, with the keys read again under it: another process sharing this root that
        // rotates at the same time does so before or after this rotation, never over it.
        return await this.keyring.exclusive(async () => {
          this.keyring.assertRotatable();
          const old = this.keyring.signer.keyId;
          // The window end is chosen under the log's append order: after every createdAt the key signed in any
          // process or earlier run (the log keeps the newest), and appends dated at or after it are refused.
          let at = '';
          await this.log.signingKeys.close(old, (record) => {
            const end = this.keyring.windowEndAfter([record?.lastSignedAt, this.lastSignedAt]);
            // A window a revocation closed earlier stays closed there: rotating never moves its end later.
            const closed = closedNoLater(record, end);
            // One the log closed that trust.json does not end there (a rotation or revocation that stopped after
            // this step): trust.json ends it there too and the new key starts there, so the two agree.
            at = closed !== end && this.keyring.windowEnd(old) !== closed ? closed : end;
            return closed;
          });
          return (await this.keyring.rotate(at)).keyId;
        });
      });
    });
  }

  /**
   * Revokes a key from `at` (default now). Returns the revocation time that holds: a key revoked before keeps its
   * earlier time. Every listing of the key's public key is revoked with it, also one under another key id (only an
   * older version listed a key so), and the log closes that id's window too, no later than the revocation.
   * @throws LedgerError `INVALID_ARGUMENT` (a key id that is no string, an `at` that is not an ISO-8601 UTC time with
   *   milliseconds), `KEY_INVALID` (a key id trust.json does not list), and as `rotateKey` (LedgerError `CLOSED`,
   *   `ROLLBACK` / `FORK`, `LOCKED`; StoreError / ManifestError `STORAGE_FAILED`, …)
   */
  async revokeKey(keyId: string, at?: string): Promise<string> {
    return this.tracked(async () => {
      this.assertSound();
      // Exclusive: no publish signs against the trust list this revocation is replacing.
      return this.signing.exclusive(async () => {
        return await this.keyring.exclusive(async () => {
          let from = this.keyring.checkRevocation(keyId, at);
          // In the log first: from then on no process appends a manifest of this key dated at or after `from`.
          if (this.keyring.isManifestKey(keyId)) {
            const closed = await this.log.signingKeys.close(keyId, (record) => closedNoLater(record, from));
            // Closed earlier where trust.json does not end it (a revocation or rotation that stopped after this
            // step): revoked from there, so the log and trust.json agree. The revocation ends every listing of the key
            // (one per host it is listed for), and the log keeps one window for it: each listing must end there.
            if (closed !== from && this.keyring.windowEnds(keyId).some((l) => l.end !== closed)) from = closed;
          }
          // The same public key under another key id (an older version listed it so): the revocation ends those
          // listings too, so the log closes their windows as well, each no later than `from`.
          for (const other of this.keyring.sameKeyIds(keyId))
            await this.log.signingKeys.close(other, (record) => closedNoLater(record, from));
          return this.keyring.revoke(keyId, from);
        });
      });
    });
  }

  /**
   * Closes `keyId`'s window in the log where trust.json already ends it (its `notAfter`, or `revokedAt` when
   * earlier), and changes nothing else: trust.json, the key files and the checkpoint keys stay as they are. What a
   * store restored from before the key's rotation or revocation lacks (fsck: `KEY_WINDOW_MISMATCH`, the log has not
   * closed it, or closed it later): from then on no process appends a manifest of that key dated at or after that end.
   * A window only closes earlier: one the log closed before trust.json's end stays where it is, and is refused.
   * Resolves to `{ at, changed }`: the window end the log now holds, and whether this call moved it there (`false`:
   * the log had already closed the window at that end; nothing changed).
   * @throws LedgerError `INVALID_ARGUMENT` (a key id that is no string; a key trust.json holds current, whose window
   *   `keys rotate` or `keys revoke` ends; one the log closed before trust.json ends it: a revocation that stopped,
   *   which `keys revoke` run again finishes), `KEY_INVALID` (a key trust.json does not list as a signing key),
   *   `CLOSED`, `ROLLBACK` / `FORK` (as `grant`), `LOCKED` (another process held `trust.json.lock` over 30 s);
   *   ManifestError `STORAGE_FAILED`, `LOCKED` (the log's key record)
   */
  async closeKeyWindow(keyId: string): Promise<{ at: string; changed: boolean }> {
    return this.tracked(async () => {
      this.assertSound();
      if (typeof keyId !== 'string')
        throw new LedgerError('INVALID_ARGUMENT', `a key id is a string (keys list), not ${shownValue(keyId)}`);
      return this.signing.exclusive(async () => {
        // Under the trust lock, with trust.json read again under it: the end is the one trust.json holds now.
        return await this.keyring.exclusive(async () => {
          if (!this.keyring.isManifestKey(keyId))
            throw new LedgerError('KEY_INVALID', `trust.json lists no signing key ${shownValue(keyId)}`);
          // The log keeps one window per key id; trust.json one per listing (a key listed for several hosts): a
          // listing held current refuses (closing the log would stop that host's publishes), else the earliest end.
          const listings = this.keyring.windowEnds(keyId);
          const current = listings.find((l) => l.end === undefined);
          if (current !== undefined)
            throw new LedgerError(
              'INVALID_ARGUMENT',
              `trust.json holds key ${quoted(keyId)} current (no notAfter, no revokedAt)${listings.length > 1 ? ` in its listing for host ${shownValue(current.host)}` : ''}: \`keys rotate\` or \`keys revoke\` ends its window, in the log and in trust.json; nothing was changed`,
            );
          const end = listings.map((l) => l.end!).reduce((a, b) => earlierTime(a, b));
          // Where the log held the window as the close read its record (under the key's lock): already at `end`,
          // nothing moved.
          let before: string | undefined;
          const closed = await this.log.signingKeys.close(keyId, (record) => {
            before = record?.closedAt;
            return closedNoLater(record, end);
          });
          if (closed !== end)
            throw new LedgerError(
              'INVALID_ARGUMENT',
              `the log closed the window of key ${quoted(keyId)} at ${closed}, before trust.json ends it (${end}): a revocation that stopped after closing it in the log, or a trust.json from before a revocation; run it again (\`keys revoke ${shellWord(keyId)}\`), which ends the key in trust.json where the log closed it; nothing was changed`,
            );
          return { at: closed, changed: before !== closed };
        });
      });
    });
  }

  /** A read could not load the key files again (`freshTrust`): they are loaded again at the next read. */
  private keysStale = false;

  /**
   * Before a read judges signatures: in a root other processes share (PostgreSQL), trust.json as it is now, so a
   * key another process revoked stops verifying here too. An embedded store's root is this process's alone.
   */
  private async freshTrust(): Promise<void> {
    if (this.log.exclusive === true) return;
    if (!this.keysStale && !(await this.keyring.changedOnDisk())) return;
    // The key files too, so this process signs with the keys a finished rotation left. One under way does not show
    // half done: it holds the trust lock until its staged key files are in place, and a load that meets them waits
    // for it (`settleStaged`). A load that refuses (KEY_INVALID: a trust.json that no longer lists this process's
    // key, an injected signer that stopped verifying; SIGNER_FAILED: one that cannot sign now, a KMS unreachable) does
    // not fail the read, which signs nothing: then trust.json alone, and the keys at a later read.
    try {
      await this.keyring.reload({ unlessChanged: true });
      this.keysStale = false;
    } catch (err) {
      if (!(err instanceof LedgerError && (err.code === 'KEY_INVALID' || err.code === 'SIGNER_FAILED'))) throw err;
      await this.keyring.reloadTrust();
      this.keysStale = true;
    }
  }

  /**
   * Re-reads the key file and trust file (another process sharing this root rotated or revoked). `signal` (an
   * operation's) ends its wait for the trust lock: LedgerError `CANCELLED`.
   */
  private async reloadKeys(signal?: AbortSignal): Promise<void> {
    await this.keyring.reload({ signal });
  }

  /**
   * Closes the ledger: calls made from now on are refused (`CLOSED`); calls in flight finish first (each with its own
   * outcome), then the witnesses, the log, the blob store and the pin are closed. A witness submission under way (a
   * publish just made) is given `witnesses.closeWaitMs` to end first (default the request deadline, at most 5 s; no
   * wait when none is under way), and a witness left without a cosignature of the newest checkpoint is said through
   * onNotice. gc, fsck and export running on this ledger, admitted before the close, are waited for too (they complete).
   */
  close(): Promise<void> {
    // Every call gets the one closing: a second close() resolves when the ledger is closed, not before.
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private async closeOnce(): Promise<void> {
    this.closed = true;
    while (this.inFlight > 0) await new Promise<void>((resolve) => this.drained.push(resolve));
    // The pool's close fails only where the caller's onNotice throws as it is told which witnesses were left without
    // a cosignature: that is the sink's failure, not the close's, and the stores are closed all the same (it left the
    // log open, its lock held, and the root could not be opened again in this process).
    await this.witnesses?.close().catch(() => {});
    await Promise.all([this.log.close(), this.blobs.close(), this.checkpoints.close()]);
  }

  /**
   * @internal Runs a maintenance pass over this ledger's stores (fsck, gc, export) as one of its operations: `CLOSED`
   * once the ledger is closing, and `close()` waits for it, so a pass never reads a store closed under it.
   */
  maintenance<T>(call: () => Promise<T>): Promise<T> {
    return this.tracked(async () => {
      this.maintaining++;
      try {
        return await call();
      } finally {
        this.maintaining--;
      }
    });
  }

  /** Maintenance passes under way (`maintenance`): the short calls they make of this ledger are let in while it closes. */
  private maintaining = 0;

  /**
   * Runs a call of this ledger's API: refused once the ledger is closing, and counted until it settles. A call marked
   * `DURING_MAINTENANCE` (a checkpoint, the trust file: what export, fsck and gc ask of the ledger on their way) is let
   * in while a maintenance pass admitted before the close is still under way, which close() waits for anyway: a pass
   * admitted is not refused half way.
   */
  private async tracked<T>(call: () => Promise<T>): Promise<T>;
  private async tracked<T>(during: typeof DURING_MAINTENANCE, call: () => Promise<T>): Promise<T>;
  private async tracked<T>(
    first: typeof DURING_MAINTENANCE | (() => Promise<T>),
    second?: () => Promise<T>,
  ): Promise<T> {
    const call = typeof first === 'function' ? first : second!;
    if (!(first === DURING_MAINTENANCE && this.maintaining > 0)) this.assertOpen();
    this.inFlight++;
    try {
      return await call();
    } finally {
      if (--this.inFlight === 0) for (const resolve of this.drained.splice(0)) resolve();
    }
  }
}

export { ManifestError };

/** The chunks of `stream`, none of them before `check` passed (its failure is the stream's). */
async function* afterCheck(check: Promise<void>, stream: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  let checked = false;
  for await (const chunk of stream) {
    if (!checked) {
      await check;
      checked = true;
    }
    yield chunk;
  }
  if (!checked) await check;
}

/** Where a key's window closes when asked to close at `at`: never later than where the log closed it before. */
function closedNoLater(record: { closedAt?: string } | undefined, at: string): string {
  return record?.closedAt !== undefined && record.closedAt < at ? record.closedAt : at;
}
