/** The options of `openLedger` (a module of its own so that the ledger and its opener do not import each other). */
import type { BlobStore } from '../../store/blob-store.js';
import type { FsOps } from '../../store/fs/ops.js';
import type { HashBackendName } from '../../store/hash/backends.node.js';
import type { Signer } from '../../manifests/crypto/envelope.js';
import type { LevelManifestLogOptions } from '../../manifests/log/level/log.js';
import type { ManifestLog } from '../../manifests/log/log.js';
import type { TrustStore } from '../../manifests/format/trust.js';
import type { Authorizer } from './grants.js';
import type { WitnessingOptions } from './witnessing.js';
import type { PostgresBackendOptions } from './postgres.js';
import type { TelemetryOptions } from '../telemetry/telemetry.js';

/**
 * The options of `openLedger`. Every option but `host` may be `null`, which is the option left out (its default), as
 * `undefined` is: `keyFile: args.key ?? null`, `telemetry: null` (the global API, as when left out), `root: null` (the
 * default root below). Any other value not of its type is refused (`INVALID_ARGUMENT`, naming the option; `trust`:
 * `TRUST_INVALID`, as `parseTrustStore` refuses it).
 * @example
 * ```ts
 * import { openLedger } from 'handoff-ledger';
 * // Settings a deployment may leave out: null is the option's default.
 * const config = JSON.parse(process.env.LEDGER_CONFIG ?? '{}') as { keyFile?: string; root?: string };
 * const ledger = await openLedger({ host: 'build-01', keyFile: config.keyFile ?? null, root: config.root ?? null });
 * await ledger.close();
 * ```
 */
export interface OpenLedgerOptions {
  /**
   * Store directory; default `$HANDOFF_LEDGER_ROOT` (set to `""`: as if unset), else
   * `${XDG_STATE_HOME:-~/.local/state}/handoff-ledger`.
   */
  root?: string | null | undefined;
  /** This host's id: bound into every manifest it signs. */
  host: string;
  /** An injected signer (KMS/HSM); default: the store's key file for this host, generated on first open. */
  signer?: Signer | null | undefined;
  /** Path of a private JWK key file to sign with instead of the store's own. */
  keyFile?: string | null | undefined;
  /**
   * Whether an open may make this host a signing key when the root has none for it (its first open; default true).
   * False: `KEY_INVALID` naming the hosts with keys here, and no host key made or listed (a key file trust.json does not
   * list is refused too): what the CLI's commands other than `init` and `publish` open with, for a mistyped or missing
   * `--host` must not add a trusted key. Ignored with `signer` or `keyFile`.
   */
  createHostKey?: boolean | null | undefined;
  /** Further trusted keys (other hosts sharing a PostgreSQL store). The store's own trust file is always used. */
  trust?: TrustStore | null | undefined;
  /** Largest accepted summary, in canonical bytes (default 1 MiB). */
  maxSummaryBytes?: number | null | undefined;
  /**
   * Summaries up to this many canonical bytes (default 64 KiB) are stored inline in the manifest log, in the
   * same durable write as their manifest: one sync instead of three. `0` stores every summary as a blob file
   * (or blob row). Ignored with an injected log that cannot hold blobs.
   */
  inlineSummaryBytes?: number | null | undefined;
  authorizer?: Authorizer | null | undefined;
  /** BLAKE3 backend: `auto` (native, else WASM, else noble; a fallback is reported once), `native`, `wasm`, `noble`. */
  hash?: HashBackendName | null | undefined;
  /** Ed25519 verification backend: `auto` (node:crypto), `node`, `noble`. */
  verifier?: 'auto' | 'node' | 'noble' | null | undefined;
  /**
   * Share one store between processes and hosts: blobs and manifests in PostgreSQL. `root` then holds
   * only this host's key and trust file.
   */
  postgres?: Omit<PostgresBackendOptions, 'hash'> | null | undefined;
  /** Injected backends (tests, custom stores). Default: filesystem blobs + LevelDB log under `root`. */
  blobs?: BlobStore | null | undefined;
  log?: ManifestLog | null | undefined;
  /** Filesystem operations of the embedded blob store (fault injection). */
  fs?: FsOps | null | undefined;
  /** LevelDB log options (fault injection): `writeBatch`; the log's open takes the open's own `signal`. */
  levelLog?: Omit<LevelManifestLogOptions, 'signal'> | null | undefined;
  /**
   * The log's checkpoint origin (C2SP tlog-checkpoint: a unique name such as `example.com/handoffs`). The
   * first opener of a store sets it (default `handoff-ledger.local/<random>`); a different one later is refused. A
   * new log's name holds no character the CLI prints escaped (a bidi or format character such as U+202E, a backslash:
   * `INVALID_ARGUMENT`); a stored name that does (a log named before that rule) still opens.
   */
  origin?: string | null | undefined;
  /**
   * Witnesses (C2SP tlog-witness) to submit every new checkpoint to, in the background; `checkpoint()`
   * (and so `export`) returns the checkpoint with the cosignatures gathered for it. A witness that is down
   * never blocks or fails a publish: it is retried and caught up from the size it last cosigned. `close()` gives a
   * submission under way `closeWaitMs` to end (a process that closes right after a publish still submits it), and
   * says which witnesses it leaves without a cosignature of the newest checkpoint.
   */
  witnesses?: WitnessingOptions | null | undefined;
  /**
   * Opens a store whose log does not extend the checkpoint its root pinned (`ROLLBACK`, `FORK`) instead of refusing:
   * the refusal is kept (`Ledger.checkpointFailure`), every operation that checks the log still refuses with it,
   * and `fsck` reports it beside whatever else it finds. What `handoff-ledger fsck` opens with. Default false. It
   * writes nothing to a root it could not diagnose: one that pins this log but holds no embedded log is refused
   * (`ROLLBACK`; `NOT_FOUND` for a pin at size 0 or one that cannot be read) before any log is made. A log whose
   * origin record is not a valid origin is opened under the name the root's trust.json lists this host's checkpoint
   * key under, writing no origin, pin or key (a key file missing, or staged by a rotation, refuses it): every check
   * and write refuses with the damage (`RECORD_CORRUPT`), which `fsck` reports; a root that lists no such name is
   * refused with it. It looks and does not change: no staging file of an interrupted write is removed (the blob
   * store's in `tmp/` included) and no blob an interrupted gc left in `gc-aside/` is linked back (a notice names
   * them), no missing `checkpoints/` is made, no key nor a missing `keys/` is made (a key file it would make, the host's
   * or the checkpoint key, refuses it `KEY_INVALID`), a 0.1.0 pin (`<hash>.note`) is read in place, nothing is signed or
   * pinned at open. LevelDB's own files and an older store's migrations are written as at any open.
   */
  diagnose?: boolean | null | undefined;
  /** Clock for `createdAt` (tests). */
  clock?: (() => Date) | null | undefined;
  /**
   * OpenTelemetry: spans and metrics through the global API (a no-op unless the application registers an
   * SDK), or through the providers given here. Principal and session ids are left out unless asked for.
   */
  telemetry?: TelemetryOptions | null | undefined;
  /**
   * Receives one-line notices: backend fallbacks, a publish whose manifest is committed but whose checkpoint
   * pin failed (the next operation pins it), key files and windows found at open, and witnesses that refuse or
   * cannot be reached. Each is one line and terminal-safe: what it quotes (a path, an error message, what a witness
   * answered) is escaped as the CLI prints data (`printable`, manifests/encoding/printable.ts). Default: console.warn.
   * One that throws fails nothing (its error is dropped): a notice never decides an operation's outcome.
   */
  onNotice?: ((message: string) => void) | null | undefined;
  /**
   * Ends the open once it aborts: `CANCELLED` (LedgerError, the signal's reason as its cause), with whatever the open
   * had opened closed again (the embedded log and its lock, PostgreSQL's pool, a connection it is still making closed
   * at the abort, not at its connect timeout), so a later open works. It ends the waits an open may hang in: an
   * injected signer's test signature, the PostgreSQL backend's connection and migrations, the look at a PostgreSQL
   * log's stored origin an open given `origin` makes first (its statement cancelled, its connection ended), the wait
   * for the trust lock (`trust.json.lock`) another process holds, and, at the open of a root other processes pin in
   * too (PostgreSQL's), the wait for the pin's lock (`checkpoints/<hash>.pin.lock`) another process's pin holds; elsewhere it is looked at between the open's steps,
   * and within those over many items (staging leftovers, the blobs a stopped gc held aside, the head check, and the
   * embedded log's index build and tree backfill of a store an older version wrote), each item done whole or left for
   * the next open. LevelDB's own open is one native call it cannot interrupt: the signal is looked at right after it,
   * and the log closed again (LevelManifestLogOptions.signal). Only the open's: the ledger does not keep it (each
   * operation takes a signal of its own). Not an AbortSignal: `INVALID_ARGUMENT`.
   */
  signal?: AbortSignal | null | undefined;
}

/** The options as `openLedger` reads them once `null` was made the option left out: no field is `null`. */
export type ResolvedOpenOptions = { [K in keyof OpenLedgerOptions]: Exclude<OpenLedgerOptions[K], null> };
