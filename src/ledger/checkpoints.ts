/**
 * Rollback and fork detection with checkpoints. The ledger pins the newest checkpoint it has signed or
 * verified in its own root, outside the database (`<root>/checkpoints/<blake3(origin)>.pin`, two slots
 * overwritten in place, one fdatasync per pin: checkpoint-pin.ts), and accepts the log's current tree only
 * when it extends the pinned one: a smaller tree is `ROLLBACK`, another root at the same size or a failed
 * consistency proof is `FORK`. An attacker who rewrites the whole database, watermarks included, cannot
 * produce a consistency proof from a tree that is not a prefix of the new one.
 */
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { digestOf } from '../../store/hash/digest.js';
import { ensurePrivateDir, refuseNonDirectory } from '../../store/fs/safe-dir.js';
import { CheckpointPinFile, readPinOf } from './checkpoint-pin.js';
import { openNote, signNote, type NoteSigner, type NoteVerifierKey } from '../../manifests/crypto/note.js';
import {
  formatCheckpoint,
  isValidOrigin,
  ORIGIN_RULE,
  parseCheckpoint,
  type Checkpoint,
} from '../../manifests/format/checkpoint.js';
import { EMPTY_ROOT, equalBytes, verifyConsistency } from '../../manifests/tlog/merkle.js';
import { consistencyRanges, hashRanges, type TreeHead } from '../../manifests/tlog/tree.js';
import { SESSION_HEADS_EXTENSION, sessionHeadsLine } from '../../manifests/tlog/session-heads.js';
import type { LogTreeHead, ManifestLog } from '../../manifests/log/log.js';
import { holdsNoLog } from '../../manifests/log/level/log.js';
import { LedgerError } from '../errors.js';
import { errorText, escapedText, shownValue } from '../../store/errors.js';
import { quoted } from '../../manifests/encoding/printable.js';
import { isTreeDamage, ManifestError } from '../../manifests/errors.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';

export interface SignedCheckpoint {
  /** The signed note: checkpoint body, blank line, signature line(s). */
  note: string;
  checkpoint: Checkpoint;
}

/** The hex BLAKE3 of an origin: the name of its log's files in `<root>/checkpoints/`. */
function originHash(origin: string): string {
  return digestOf(new TextEncoder().encode(origin)).slice(7);
}

/** Text from a file as a message quotes it: its first 300 characters (`…` when cut). */
const cut = (text: string) => (text.length > 300 ? `${text.slice(0, 300)}…` : text);

/** `<root>/checkpoints/<blake3(origin)>`: a log's pin is `<stem>.pin`; its witnesses' files go beside it. */
function pinStem(root: string, origin: string): string {
  return join(root, 'checkpoints', originHash(origin));
}

/** A pin (`.pin`) or a 0.1.0 pin (`.note`) of some log: the file name is the hex BLAKE3 of its origin. */
const PIN_NAME = /^([0-9a-f]{64})\.(?:pin|note)$/;

/**
 * The log's stored checkpoint origin judged as an origin (`isValidOrigin`): a record changed under the store (a
 * PostgreSQL table edited by hand, a LevelDB value) is `RECORD_CORRUPT` naming it, for the open to refuse before any key
 * is made or listed under it (not a TypeError of the note signer) and for fsck to report.
 */
export function storedOriginDamage(origin: unknown): ManifestError | undefined {
  if (typeof origin === 'string' && isValidOrigin(origin)) return undefined;
  return new ManifestError(
    'RECORD_CORRUPT',
    `the log's checkpoint origin record ${shownValue(origin, 300)} is not a valid origin (${ORIGIN_RULE}): restore it`,
  );
}

/**
 * One root pins one log. A pin in `<root>/checkpoints/` under another origin's name means the log being opened is
 * not the one this root pinned: its origin record was deleted or changed (a rewritten database would otherwise be
 * given a fresh origin, a fresh pin, and no rollback check), or the root is being used with a second log. Checked at
 * open before anything is written under the log's origin (a missing origin record, its trusted checkpoint key, its
 * pin). With `create: false` (an embedded open looking before it makes its store) a missing directory is not made.
 * @throws LedgerError `FORK`; StoreError `UNSAFE_PATH` (the checkpoints directory)
 */
export async function refuseAnotherLogsPin(
  root: string,
  origin: string,
  { create = true, postgres = false }: { create?: boolean; postgres?: boolean } = {},
): Promise<void> {
  const dir = join(root, 'checkpoints');
  // Without `create`, only a look: a root without the directory pins nothing, and nothing is made to find that out.
  if (create) await ensurePrivateDir(dir, 'UNSAFE_PATH');
  else if ((await refuseNonDirectory(dir, 'UNSAFE_PATH')) === undefined) return;
  const names = await readdir(dir);
  // Judged only for a refusal's message: whether a PostgreSQL open's root holds an embedded store's log.
  const levelDir = join(root, 'manifests-v1');
  const embedded = async () =>
    postgres && (await refuseNonDirectory(levelDir, 'UNSAFE_PATH').catch(() => undefined)) !== undefined
      ? !(await holdsNoLog(levelDir).catch(() => true))
      : false;
  try {
    refusePinsOfAnotherLog(dir, names, origin);
  } catch (err) {
    if (await embedded()) refusePinsOfAnotherLog(dir, names, origin, { embeddedLog: levelDir });
    throw err;
  }
}

/**
 * `FORK` when the listing `names` of `dir` (a root's checkpoints/) holds a pin of a log other than `origin`. With
 * `noLog` (the embedded log's directory, found holding no log), the open was about to start a new log beside the
 * pinned one: most likely a root PostgreSQL processes share, opened without --postgres, which the message says
 * (moving the pin aside would then open a second, empty log on that root).
 */
function refusePinsOfAnotherLog(
  dir: string,
  names: readonly string[],
  origin: string,
  { noLog, embeddedLog }: { noLog?: string; embeddedLog?: string } = {},
): void {
  const own = originHash(origin);
  const other = names.find((name) => {
    const stem = PIN_NAME.exec(name)?.[1];
    return stem !== undefined && stem !== own;
  });
  if (other === undefined) return;
  // A PostgreSQL open of an embedded store's root (HANDOFF_LEDGER_POSTGRES left set for another store): the pin is
  // the embedded log's, which is there; moving the pin aside would take its protection from that store.
  if (embeddedLog !== undefined)
    throw new LedgerError(
      'FORK',
      `this root pins another log (${quoted(join(dir, other))}): it holds an embedded store (${quoted(embeddedLog)}), opened here ` +
        `with PostgreSQL, whose log is named ${quoted(origin)}; an embedded store is opened without --postgres ` +
        '(unset HANDOFF_LEDGER_POSTGRES), and a PostgreSQL store is given a root of its own',
    );
  if (noLog !== undefined)
    throw new LedgerError(
      'FORK',
      `this root pins another log (${quoted(join(dir, other))}) and holds no embedded log (${quoted(noLog)}), so this open would ` +
        `start a new one, named ${quoted(origin)}: a root PostgreSQL processes share is opened with --postgres ` +
        'or HANDOFF_LEDGER_POSTGRES (openLedger: postgres); a store whose log is lost is restored from its backup',
    );
  throw new LedgerError(
    'FORK',
    `this root pins another log (${quoted(join(dir, other))}), not the log named ${quoted(origin)}: the log's ` +
      'origin record was deleted or changed, or the root is used with a second log (one root serves one log; if ' +
      'the pinned log is gone on purpose, move that pin aside)',
  );
}

/**
 * Before an embedded open makes its LevelDB log, which it finds missing (a root PostgreSQL processes share, opened
 * without `--postgres`; or a store whose log was deleted): the log it would make is empty and named `origin` (no
 * origin record to read), so a pin of another log is `FORK` (`refuseAnotherLogsPin`), and a pin of this origin at a
 * tree of 1 or more entries `ROLLBACK`, as the open would find them only after making the log and the blob store.
 * The pin's size is read unverified (from the slot file, or else from a 0.1.0 `.note`): a pin that does not decode is
 * left to the open, which judges it as ever. With `diagnose` (fsck) every pin of this origin is refused: such an
 * open must write nothing to the root it diagnoses, and the log it would make to go on is not the log the pin is of,
 * so there is nothing to check against it — `ROLLBACK` as above, or `NOT_FOUND` for a pin at size 0 or one that cannot
 * be read (the reason in the message). Nothing is made, not even `checkpoints/`.
 * @returns whether the root pins a log at all (the open then does not take the root for its own)
 * @throws LedgerError `FORK`, `ROLLBACK`; with `diagnose` also `NOT_FOUND`; StoreError `UNSAFE_PATH` (the checkpoints
 *   directory)
 */
export async function refuseRootWithoutItsLog(
  root: string,
  origin: string,
  { diagnose = false }: { diagnose?: boolean } = {},
): Promise<boolean> {
  const dir = join(root, 'checkpoints');
  if ((await refuseNonDirectory(dir, 'UNSAFE_PATH')) === undefined) return false;
  const names = await readdir(dir);
  if (!names.some((name) => PIN_NAME.test(name))) return false;
  refusePinsOfAnotherLog(dir, names, origin, { noLog: join(root, 'manifests-v1') });
  const stem = pinStem(root, origin);
  // What fsck reports in place of a log it could not check: the pin without its log.
  const noLogToDiagnose = (pinPath: string, what: string, cause?: unknown) =>
    new LedgerError(
      'NOT_FOUND',
      `this root pins the log named ${quoted(origin)} (${quoted(pinPath)}, ${what}) but holds no embedded log ` +
        `(${quoted(join(root, 'manifests-v1'))}) to check against it, and a diagnosing open makes none (it writes nothing ` +
        'to the root it diagnoses): a root PostgreSQL processes share is checked with --postgres or ' +
        'HANDOFF_LEDGER_POSTGRES; a store whose log is lost is restored from its backup',
      { cause },
    );
  let pinPath: string;
  let pinned: string;
  let size: number;
  try {
    ({ path: pinPath, note: pinned } = await readPinOf(stem));
    size = parseCheckpoint(pinned.slice(0, pinned.indexOf('\n\n') + 1)).size;
  } catch (err) {
    if (!diagnose) return true;
    // The pin file there is, for the message: the slot file, or else the previous version's `.note`.
    const named = (await lstat(`${stem}.pin`).catch(() => undefined)) ? `${stem}.pin` : `${stem}.note`;
    throw noLogToDiagnose(named, `which could not be read: ${errorText(err)}`, err);
  }
  if (size > 0) {
    const reason = `the tree has 0 entries, ${size} were pinned`;
    throw new LedgerError(
      'ROLLBACK',
      `the log is not an extension of the pinned checkpoint: ${reason} (this root holds no embedded log, ` +
        `${join(root, 'manifests-v1')}: a root PostgreSQL processes share is opened with --postgres or ` +
        'HANDOFF_LEDGER_POSTGRES; a store whose log is lost is restored from its backup)',
      {
        evidence: {
          pinned,
          current: formatCheckpoint({ origin, size: 0, root: EMPTY_ROOT, extensions: [] }),
          reason,
        },
      },
    );
  }
  if (diagnose) throw noLogToDiagnose(pinPath, 'a tree of 0 entries');
  return true;
}

/**
 * Whether a running check read the log's tree, once it has judged it (its verdict); a refusal rejects its run without
 * a verdict, and whichever settles first answers.
 */
function readVerdict(running: { run: Promise<unknown>; verdict: Promise<boolean> }): Promise<boolean> {
  return Promise.race([running.verdict, running.run.then(() => true)]);
}

/** The public key of `keys` that signed an opened note (the first of them that did). */
function signerOf(
  opened: { sigs: ReadonlyArray<{ name: string; keyHash: number }> },
  keys: NoteVerifierKey[],
): Uint8Array | undefined {
  return keys.find((k) => opened.sigs.some((s) => s.name === k.name && s.keyHash === k.keyHash))?.publicKey;
}

export class CheckpointGuard {
  private pinned: SignedCheckpoint | undefined;
  /** The public key that signed the pinned note: a note of another key (rotated, revoked) is signed again. */
  private pinnedBy: Uint8Array | undefined;
  private inflight: Promise<unknown> = Promise.resolve();
  private waiting: Promise<SignedCheckpoint> | undefined;
  /**
   * Whether the waiting check reads the log's tree: only while every call it answers is a sync after this process's
   * own append (`afterOwnAppend`), it may take the tree those appends committed (ManifestLog.ownGrowth) instead, one
   * that holds the largest position they appended at (undefined: it reads).
   */
  private waitingOwn: { holds: number } | undefined;
  /**
   * The check that has started and not yet ended, and its verdict: resolved once the log is known to extend the pin,
   * with whether the tree judged was read from the log (false: the tree of this process's own append, `ownGrowth`,
   * which says nothing of what others did to the log since: a check before an append then reads for itself).
   */
  private checking: { run: Promise<SignedCheckpoint>; verdict: Promise<boolean> } | undefined;
  /** A check's judgement without a pin, running (`judgeShared`): the checks that arrive meanwhile share it. */
  private judging: Promise<unknown> | undefined;
  /** A rollback or fork, once seen, is reported by every later call: the log cannot be trusted again. */
  private failure: LedgerError | undefined;
  /**
   * Notes signed for the trees the log's last batches are committing, signed while those batches were being synced
   * (ManifestLog.onCommitting), newest last: `advance` takes one only for exactly its checkpoint text, by the current
   * key.
   */
  private readonly prepared: Array<{ text: string; signer: NoteSigner; note: Promise<string> }> = [];
  /** Set once the open's check has run: a damaged session-heads root refuses checks from then on, not the open. */
  private opened = false;
  /** The open's signal while the open's own check runs (`open`): it ends that check's wait for the pin's lock. */
  private openSignal: AbortSignal | undefined;
  /** Removes this guard's listener from the log (close; an open that failed after the guard was made). */
  private stopListening: (() => void) | undefined;

  private constructor(
    private readonly log: ManifestLog,
    readonly origin: string,
    private readonly signer: () => NoteSigner,
    private readonly pin: CheckpointPinFile,
    /** `<root>/checkpoints/<blake3(origin)>`: the pin is `<stem>.pin`; the witnesses' files go beside it. */
    readonly stem: string,
    /**
     * The store's checkpoint keys trusted now (they change with a rotation or revocation, here or in another
     * process): a pin another process wrote counts only when one of them signed it.
     */
    private readonly verifiers: () => NoteVerifierKey[],
  ) {}

  /**
   * Loads the pinned checkpoint (verified with the store's checkpoint keys) and checks the log against it.
   * A store of the previous version keeps its pin in `<stem>.note`: it is read, verified, and moved into the slot file.
   * @throws LedgerError `ROLLBACK`, `FORK`, `KEY_FILE_UNSAFE`, `RECORD_CORRUPT` (no intact slot); ManifestError
   *   `NOTE_*`, `CHECKPOINT_INVALID`
   */
  static async open(init: {
    root: string;
    log: ManifestLog;
    origin: string;
    signer: () => NoteSigner;
    /** The checkpoint keys trusted now: asked again at each use, for they change with rotations and revocations. */
    verifiers: () => NoteVerifierKey[];
    /**
     * What the pin in this root is read back with at open: `verifiers` and the store's revoked checkpoint keys.
     * A pin the ledger wrote itself before its key was revoked still says how large the tree was (a revoked key
     * is not trusted to speak to others; whoever can write the pin file can remove it anyway); it is pinned
     * again with the current key right after.
     */
    pinVerifiers?: NoteVerifierKey[];
    /**
     * Keep a rollback or fork found at open instead of throwing it (`failed`): every later check still refuses with
     * it, and fsck can report it (`OpenLedgerOptions.diagnose`).
     */
    diagnose?: boolean;
    /**
     * A damaged record a diagnosing open went on with (the log's origin record, `origin` then being the name trust.json
     * lists the checkpoint key under): the log is judged against the pin without signing or pinning anything, and
     * every later check and write refuses with this damage (`damagedAtOpen`), a rollback or fork found first.
     */
    refusing?: ManifestError;
    /**
     * Other processes may pin in this root though the log is exclusive (an embedded log made in a root that pinned a
     * log before it: the root PostgreSQL processes share): the pin is then written as a shared root's is.
     */
    sharedRoot?: boolean;
    /**
     * The open's signal (`openLedger({ signal })`): it ends the open's wait for a shared pin's lock that another
     * process holds (`CANCELLED`, nothing pinned); the guard keeps it no longer than the open.
     */
    signal?: AbortSignal | undefined;
  }): Promise<CheckpointGuard> {
    // A diagnosing open (fsck) writes nothing to the root it diagnoses: it makes no checkpoints/ (a pin written later,
    // by a publish of such a ledger, makes it then), moves no 0.1.0 pin into a slot file, and pins nothing at open.
    const diagnosing = init.diagnose === true;
    if (diagnosing) await refuseNonDirectory(join(init.root, 'checkpoints'), 'UNSAFE_PATH');
    else await ensurePrivateDir(join(init.root, 'checkpoints'), 'UNSAFE_PATH');
    const stem = pinStem(init.root, init.origin);
    // A log only this process writes (the embedded store's lock), in a root no other process pins in, pins on a kept
    // O_DSYNC handle, no re-read; otherwise the slots are re-read and written under `<pin>.lock`.
    const exclusive = init.log.exclusive === true && init.sharedRoot !== true;
    const { file, note, legacy } = await CheckpointPinFile.open(stem, { exclusive, readOnly: diagnosing });
    const guard = new CheckpointGuard(init.log, init.origin, init.signer, file, stem, init.verifiers);
    guard.openSignal = init.signal;
    try {
      if (note !== undefined) {
        const keys = init.pinVerifiers ?? init.verifiers();
        const opened = openNote(note, keys);
        const checkpoint = parseCheckpoint(opened.text);
        // The pinned origin is the file's text (any a note's origin line holds), the log's one named before the rule
        // may hold what a terminal acts on too: both escaped, as every other refusal naming an origin has them (the
        // file's cut: no origin is longer than 256 characters, a note's line may be).
        if (checkpoint.origin !== init.origin)
          throw new LedgerError(
            'FORK',
            `${stem} pins origin ${escapedText(cut(checkpoint.origin))}, not ${escapedText(init.origin)}`,
          );
        guard.pinned = { note, checkpoint };
        guard.pinnedBy = signerOf(opened, keys);
        // The previous version's file, verified: from now on the slot file alone is the pin (read in place to diagnose).
        if (legacy && !diagnosing) await file.migrate(note, init.signal);
      }
      if (init.refusing) {
        try {
          await guard.judge();
        } catch (err) {
          // As below: a rollback or fork is kept (fsck's PIN_MISMATCH), a tree that cannot be read is fsck's to name.
          if (!(err === guard.failure || isTreeDamage(err))) throw err;
        }
        guard.damagedAtOpen = init.refusing;
        guard.refusing = init.refusing;
      } else
        try {
          // To diagnose, the log is judged against the pin as a check would judge it, and nothing is signed or pinned.
          if (diagnosing) await guard.judge();
          else await guard.sync();
        } catch (err) {
          // Only the verdict the guard recorded (a rollback or fork of this log) is kept, and a tree the log cannot
          // fold a root from (a node on its right edge missing or malformed): fsck names the record, and every later
          // check meets the same damage (appends, resume). Anything else still throws.
          if (!(init.diagnose && (err === guard.failure || isTreeDamage(err)))) throw err;
          // Kept for the writes that do not read the tree (grants, keys): they refuse with it, as with a rollback.
          if (isTreeDamage(err)) guard.damagedAtOpen = err;
        }
      guard.opened = true;
    } catch (err) {
      await guard.close().catch(() => {}); // its pin file, if an exclusive pin opened it
      throw err;
    } finally {
      // The open's signal ends the open's pin alone: a later check's pin (a publish's) is not ended by it.
      guard.openSignal = undefined;
    }
    // Listening from here on: a guard that failed to open leaves nothing on the log.
    guard.stopListening = init.log.onCommitting?.((head) => guard.prepare(head));
    return guard;
  }

  /** The rollback or fork this guard has seen, if any: the ledger refuses its operations from then on. */
  get failed(): LedgerError | undefined {
    return this.failure;
  }

  /** The damaged record a diagnosing open went on with (`refusing`): every check refuses with it, nothing is pinned. */
  private refusing: ManifestError | undefined;

  /** The tree damage a diagnosing open went on with (`TREE_DAMAGED`, `RECORD_CORRUPT`): no write may pass by it. */
  damagedAtOpen: ManifestError | undefined;

  /**
   * Checks the log's current tree against the pinned checkpoint and pins (signed) the current one. Calls
   * that arrive while a check runs share the next one: one tree read, one signature, one fsynced write.
   * `afterOwnAppend` (a publish's sync once its append committed, at that position): where the log knows a tree its
   * own appends committed that holds that position, grown from the pinned one (ManifestLog.ownGrowth: a shared log
   * whose transactions read the tree they grow under its lock), that tree is judged and pinned without reading the
   * log's tree again; else the tree is read. A tree other writers grew since is read by the next check.
   */
  sync(options: { afterOwnAppend?: number } = {}): Promise<SignedCheckpoint> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.refusing) return Promise.reject(this.refusing);
    const at = options.afterOwnAppend;
    if (this.waiting) {
      // Every call the waiting check answers must be one it may answer so: a reading call makes it read.
      if (at === undefined) this.waitingOwn = undefined;
      else if (this.waitingOwn) this.waitingOwn.holds = Math.max(this.waitingOwn.holds, at);
      return this.waiting;
    }
    this.waitingOwn = at === undefined ? undefined : { holds: at };
    let checked!: (read: boolean) => void;
    const verdict = new Promise<boolean>((resolve) => (checked = resolve));
    const run: Promise<SignedCheckpoint> = this.inflight
      .catch(() => {})
      .then(() => {
        const own = this.waitingOwn;
        this.waiting = undefined;
        this.waitingOwn = undefined;
        this.checking = { run, verdict };
        return this.advance(checked, own);
      })
      .finally(() => {
        if (this.checking?.run === run) this.checking = undefined;
      });
    this.waiting = run;
    this.inflight = run;
    return run;
  }

  /**
   * Checks the log against the pinned checkpoint before an append. A check already running answers this call as
   * soon as it has found that the log extends the pinned checkpoint (it read the tree a moment ago, while this call
   * was on its way), without waiting for it to sign and pin: so one group's append overlaps the previous group's
   * pin. Nothing is acknowledged on this answer: a publish is acknowledged after `sync()` following its append.
   */
  check(): Promise<unknown> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.refusing) return Promise.reject(this.refusing);
    const running = this.checking;
    if (!running) return this.sync();
    // A refusal rejects `run` without reaching the verdict: whichever settles first answers. One that judged its own
    // append's tree read nothing of what others did to the log since: this check then reads and judges, as `verify`
    // does (the sync after this append pins), sharing that with the checks that arrive while it reads. A rollback or
    // fork recorded meanwhile (the running check's pin found one) is the answer either way.
    return readVerdict(running)
      .then((read) => (read ? undefined : this.judgeShared()))
      .then(() => {
        if (this.failure) throw this.failure;
      });
  }

  /** `judge()` (reading), shared by the calls that arrive while one runs. */
  private judgeShared(): Promise<unknown> {
    this.judging ??= this.judge().finally(() => (this.judging = undefined));
    return this.judging;
  }

  /**
   * Judges the log's tree as `check` does, without signing or pinning anything: what publish's check before its append
   * would refuse, refused now (Ledger.checkPublish, which `compact` calls before it asks the model). A check already
   * running answers as it answers `check`. A rollback or fork found is recorded as a pinning check records it (every
   * later call refuses with it); nothing is written.
   * @throws LedgerError `ROLLBACK`, `FORK`; ManifestError `TREE_DAMAGED` / `RECORD_CORRUPT` (a tree that cannot be
   *   read), `STORAGE_FAILED`, `LOCKED` (PostgreSQL: a read that waited for a lock past lock_timeout)
   */
  async verify(): Promise<void> {
    if (this.failure) throw this.failure;
    if (this.refusing) throw this.refusing;
    const running = this.checking;
    if (!running) await this.judge();
    else if (!(await readVerdict(running))) await this.judgeShared();
    if (this.failure) throw this.failure;
  }

  private async advance(
    checked: (read: boolean) => void,
    own: { holds: number } | undefined,
  ): Promise<SignedCheckpoint> {
    const judged = await this.judge(own);
    // The pin judged against: this process's own, or a larger one another process of this root pinned (adopted).
    this.pinned = judged.pinned;
    this.pinnedBy = judged.pinnedBy;
    checked(judged.read);
    if (judged.stands) return judged.stands;
    const { checkpoint, signer } = judged;
    // Signed by the signer judged above, and recorded as that one: a rotation landing meanwhile shows at the next check.
    const note = await this.noteOf(checkpoint, signer);
    // Pinned before it is returned: a caller never sees a checkpoint this ledger could forget (and a publish is
    // not acknowledged before the tree holding it is pinned: Ledger.commit awaits this). Where other processes pin
    // too (PostgreSQL), a larger tree one of them pinned meanwhile stays: it holds this tree, or the next check of any
    // process (each starts from the newest pin on file) finds the fork; another root at this size is refused.
    await this.pin.write(note, (pinned) => this.pinsLargerTree(pinned, checkpoint), this.openSignal);
    this.pinned = { note, checkpoint };
    this.pinnedBy = signer.publicKey;
    return this.pinned;
  }

  /**
   * The one rule of `advance` (which then signs and pins) and `verify` (which stops here): reads the log's tree and,
   * where other processes of this root pin too, the newest pin on file, and judges the tree against the pinned
   * checkpoint. Changes nothing but the refusal it records (`refuse`): the pin it judged against is returned, for
   * `advance` to adopt.
   * `own` (a sync after this process's own appends): the tree the log's own appends committed, when it holds
   * `own.holds` and the log knows it grew that tree from the pin (ManifestLog.ownGrowth), is judged instead of the tree
   * read from the log.
   * @returns the pin judged against; `stands` when that pinned note is the current tree's (nothing to sign), else the
   *   checkpoint to sign and the signer judged
   * @throws as `verify`
   */
  private async judge(own?: { holds: number }): Promise<{
    pinned: SignedCheckpoint | undefined;
    pinnedBy: Uint8Array | undefined;
    stands?: SignedCheckpoint;
    checkpoint: Checkpoint;
    signer: NoteSigner;
    /** The tree judged was read from the log (not the tree of this process's own append). */
    read: boolean;
  }> {
    // A pin other processes of this root write too (PostgreSQL): the newest one on file may be theirs, of a larger
    // tree. Read before the log, so that its entries, committed before it was pinned, are in the tree read next.
    const elsewhere = this.pin.shared ? await this.pinnedElsewhere() : undefined;
    const mine = this.pinned;
    // The tree the log's own appends committed, grown from every pin judged here (then it extends them: no proof to
    // read); else the log's tree, read.
    const grewOwn = own === undefined ? undefined : this.log.ownGrowth?.();
    const grown = (c: Checkpoint | undefined) => c !== undefined && grewOwn!.grewFrom(c.size, c.root);
    const owned =
      grewOwn !== undefined &&
      grewOwn.head.size > own!.holds &&
      (mine !== undefined || elsewhere !== undefined) &&
      (mine === undefined || grown(mine.checkpoint)) &&
      (elsewhere === undefined || grown(elsewhere.pinned.checkpoint));
    const head = owned ? grewOwn.head : await this.log.treeHead();
    // The tree this process pinned must be in the log's tree too (with the one on file, checked below): a process
    // that went on from a database restored behind the other's pin would otherwise sign a fork over it.
    if (
      elsewhere &&
      mine &&
      !owned &&
      !(mine.checkpoint.size === head.size && equalBytes(mine.checkpoint.root, head.root))
    )
      await this.demandConsistency(mine, head);
    const pinned = elsewhere ? elsewhere.pinned : mine;
    const pinnedBy = elsewhere ? elsewhere.by : this.pinnedBy;
    const checkpoint = this.checkpointOf(head);
    const sameTree =
      pinned !== undefined && pinned.checkpoint.size === head.size && equalBytes(pinned.checkpoint.root, head.root);
    // A checkpoint pinned before the index existed is re-signed with the line at the same tree, and so is one
    // signed by a key no longer the current one (a rotation; the revocation that may follow it), at once: the
    // note handed out and exported is always one the trust file still vouches for.
    const signer = this.signer();
    const judged = { pinned, pinnedBy, checkpoint, signer, read: !owned };
    // The same tree with another session-heads root: the index was rewritten under the log (heads change only with
    // an append). Signing it would hand out two completeness claims for one tree, and witnesses cosign both (a
    // cosignature says nothing of extension lines): refused as a fork of the pinned checkpoint.
    const headsLine = (c: Checkpoint) => c.extensions.find((l) => l.startsWith(`${SESSION_HEADS_EXTENSION} `));
    if (sameTree) {
      const [was, now] = [headsLine(pinned.checkpoint), headsLine(checkpoint)];
      if (was !== undefined && now !== undefined && was !== now)
        this.refuse(
          'FORK',
          `the session-heads index is not the one pinned with this tree of ${head.size} entries (rewritten under the log)`,
          { pinned: pinned.note, current: formatCheckpoint(checkpoint), reason: 'another session-heads root' },
        );
      // The index cannot give its root (a damaged root record) while the pinned checkpoint of this very tree carries
      // one: the pinned note stands. Re-signed without the line, it would be replaced, and the next root at this size
      // (a forged record, say) would meet no line to be compared with.
      if (was !== undefined && now === undefined) {
        // At open it stands whoever signed it: the store opens, fsck reports the damage, appends are refused.
        if (!this.opened || (pinnedBy !== undefined && equalBytes(pinnedBy, signer.publicKey)))
          return { ...judged, stands: pinned };
        throw new ManifestError(
          'TREE_DAMAGED',
          `the session-heads index cannot give its root, and the checkpoint pinned with this tree of ${head.size} entries carries one that a checkpoint signed by the current key would lose: repair the index (fsck reports it), then check again`,
        );
      }
    }
    if (
      sameTree &&
      pinned.checkpoint.extensions.join('\n') === checkpoint.extensions.join('\n') &&
      pinnedBy !== undefined &&
      equalBytes(pinnedBy, signer.publicKey)
    )
      return { ...judged, stands: pinned };
    // A log that grew this tree itself from the pinned one, as its only writer, needs no proof read back from storage
    // (the embedded store after its own appends); any other tree must prove that it extends the pin.
    if (pinned && !sameTree && !owned && !this.log.grewFrom?.(pinned.checkpoint.size, pinned.checkpoint.root))
      await this.demandConsistency(pinned, head);
    return judged;
  }

  /**
   * Signs the checkpoint of a tree a batch is committing while the batch is synced. Nothing pins or returns the note
   * until `advance` finds the log's committed tree to be that one (a failed batch leaves it unused).
   */
  private prepare(head: LogTreeHead): void {
    if (this.failure) return;
    const text = formatCheckpoint(this.checkpointOf(head));
    const signer = this.signer();
    const note = signNote(text, [signer]);
    note.catch(() => {}); // a failure meets the caller that uses the note, if any
    this.prepared.push({ text, signer, note });
    if (this.prepared.length > 2) this.prepared.shift();
  }

  /**
   * The checkpoint of a tree head. The session-heads root rides along as an extension line: the note signature (and
   * every witness cosignature) covers it. The log computes it from the same committed state as the tree.
   */
  private checkpointOf(head: LogTreeHead): Checkpoint {
    const extensions = head.sessionHeads ? [sessionHeadsLine(head.sessionHeads)] : [];
    return { origin: this.origin, size: head.size, root: head.root, extensions };
  }

  /** The signed note of `checkpoint`: the one signed ahead for exactly this text by the current key, else signed now. */
  private noteOf(checkpoint: Checkpoint, signer: NoteSigner): Promise<string> {
    const text = formatCheckpoint(checkpoint);
    const ahead = this.prepared.find(
      (p) => p.text === text && p.signer.name === signer.name && equalBytes(p.signer.publicKey, signer.publicKey),
    );
    const now = () => signNote(text, [signer]);
    // A signature that failed ahead is tried again here, as it would have been without the head start.
    return ahead ? ahead.note.catch(now) : now();
  }

  /**
   * A pin found on file (another process of this root may have written it) as this log's checkpoint, verified with
   * the checkpoint keys trusted now, with the key that signed it; undefined when it is not one (not verifiable, or of
   * another origin). One with as many entries as `against` and another root is a fork (another history of the same
   * size signed by this store's key): refused, never pinned over.
   */
  private pinOnFile(
    note: string,
    against: { note?: string; checkpoint: Checkpoint } | undefined,
  ): { checkpoint: Checkpoint; by: Uint8Array | undefined } | undefined {
    let found: { checkpoint: Checkpoint; by: Uint8Array | undefined };
    try {
      const keys = this.verifiers();
      const opened = openNote(note, keys, nodeVerifier);
      found = { checkpoint: parseCheckpoint(opened.text), by: signerOf(opened, keys) };
    } catch {
      return undefined;
    }
    const { checkpoint } = found;
    if (checkpoint.origin !== this.origin) return undefined;
    if (against && checkpoint.size === against.checkpoint.size && !equalBytes(checkpoint.root, against.checkpoint.root))
      this.refuse('FORK', `another process of this root pinned another root at the size ${checkpoint.size}`, {
        pinned: note,
        current: against.note ?? formatCheckpoint(against.checkpoint),
        reason: 'another root pinned at this size',
      });
    return found;
  }

  /** True when `note`, the pin on file, is this log's checkpoint of more entries than `checkpoint` (`pinOnFile`). */
  private pinsLargerTree(note: string, checkpoint: Checkpoint): boolean {
    const other = this.pinOnFile(note, { checkpoint });
    return other !== undefined && other.checkpoint.size > checkpoint.size; // one not verifiable is pinned over
  }

  /**
   * The pin another process of this root wrote, when it is newer than this process's: a verified checkpoint of this
   * log of more entries (the same tree signed otherwise is left alone: this process's own stands). Another root at
   * the size this process pinned is a fork. A note the current checkpoint keys do not verify is left alone (written
   * over later).
   */
  private async pinnedElsewhere(): Promise<{ pinned: SignedCheckpoint; by: Uint8Array | undefined } | undefined> {
    const note = await this.pin.readNewest();
    const mine = this.pinned;
    if (note === undefined || note === mine?.note) return undefined;
    const found = this.pinOnFile(note, mine);
    if (found === undefined || (mine !== undefined && found.checkpoint.size <= mine.checkpoint.size)) return undefined;
    return { pinned: { note, checkpoint: found.checkpoint }, by: found.by };
  }

  /** Closes the pin file a ledger of an embedded store keeps open, once a pin in flight has ended. */
  async close(): Promise<void> {
    this.stopListening?.();
    await this.inflight.catch(() => {});
    await this.pin.close();
  }

  /** Records the refusal every later call meets (`failed`), and throws it. */
  private refuse(
    code: 'ROLLBACK' | 'FORK',
    message: string,
    evidence: { pinned: string; current: string; reason: string },
  ): never {
    this.failure = new LedgerError(code, message, { evidence });
    throw this.failure;
  }

  private async demandConsistency(pinned: SignedCheckpoint, head: TreeHead): Promise<void> {
    const old = pinned.checkpoint;
    const refuse = (code: 'ROLLBACK' | 'FORK', reason: string, advice = ''): never => {
      const current = formatCheckpoint({ origin: this.origin, size: head.size, root: head.root, extensions: [] });
      return this.refuse(code, `the log is not an extension of the pinned checkpoint: ${reason}${advice}`, {
        pinned: pinned.note,
        current,
        reason,
      });
    };
    // What the operator of a store restored from a backup (or failed over to a replica behind) meets first: said here,
    // for every command of every host refuses with it until the pin is put back or moved aside (README "Backups").
    if (head.size < old.size)
      refuse(
        'ROLLBACK',
        `the tree has ${head.size} entries, ${old.size} were pinned`,
        ` (${quoted(`${this.stem}.pin`)}): entries the log held are gone. A store restored from a backup: put back this root's checkpoints/ from the same backup, or, without a copy, move the pin aside (README "Backups"); otherwise keep the pin as evidence and run fsck`,
      );
    if (head.size === old.size) refuse('FORK', `another root at the pinned size ${old.size}`);
    // Every tree extends the empty one.
    if (old.size === 0) return;
    let proof: Uint8Array[];
    try {
      proof = await hashRanges(consistencyRanges(old.size, head.size), (ids) => this.log.treeNodes(ids));
    } catch (err) {
      // Only nodes that are missing or damaged in a log that answers mean there is no proof (TREE_DAMAGED,
      // RECORD_CORRUPT). Any other failure proves nothing either way — a database that cannot be reached right now
      // (STORAGE_FAILED: a restart, a dropped connection), a lock another connection held past lock_timeout (LOCKED,
      // PostgreSQL: VACUUM FULL or LOCK TABLE of the tree's table), a bug —: the call fails with it, no fork is
      // recorded, and the next one asks again.
      if (!isTreeDamage(err)) throw err;
      return refuse('FORK', `no consistency proof from size ${old.size}: ${(err as Error).message}`);
    }
    const result = verifyConsistency(old.size, head.size, proof, old.root, head.root);
    if (!result.ok) refuse('FORK', `the consistency proof from size ${old.size} fails: ${result.reason}`);
  }
}
