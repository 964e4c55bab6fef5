/**
 * Submitting checkpoints to witnesses (C2SP tlog-witness add-checkpoint) and keeping their cosignatures.
 * Each new checkpoint goes to every configured witness in the background, with a consistency proof from the
 * size that witness last cosigned (learned from its answers: a 200 for a size, or a 409 naming its size).
 * Nothing here can block or fail a publish: every request has a deadline, a witness that is down is retried
 * later with backoff, and `checkpoint()` waits for one round at most. Closing gives the round under way (a publish
 * just made) `closeWaitMs` to end, so that a process that closes right after a publish still submits it, and says
 * which witnesses have not cosigned the newest checkpoint when it closes.
 *
 * Beside the pinned checkpoint (`<root>/checkpoints/<blake3(origin)>.*`, each written atomically) are kept the
 * cosignatures of the newest checkpoint (`.cosigned.note`), so an export after a restart still carries them
 * while the tree has not moved, and the size each witness last cosigned (`.witnesses.json`), so that after a
 * restart the first submission already carries the proof from that size (no 409 round trip) and a witness that
 * was down meanwhile is caught up from it. A size read from disk is a hint: a witness that answers otherwise
 * (409) is believed. A witness ahead of the checkpoint submitted is given the log's current tree when the log has
 * grown that far (another process of a shared log got there first); one that names less than it cosigned before went
 * backwards, and is said to have. What befalls a witness is said once for a checkpoint size, however many rounds hear
 * it (`said`): a refusal, and a request that got no answer (unreachable, no usable answer, the deadline), whose kind alone
 * counts, not the error's words; a witness said to be down that cosigns again is said to answer again.
 */
import { readFile } from 'node:fs/promises';
import { checkCosignatures, parseCosignerKey, type CosignerKey } from '../../manifests/crypto/cosignature.js';
import { nodeVerifier } from '../../manifests/crypto/ed25519.node.js';
import { isValidKeyName, MAX_SIGNATURES, openNote, type NoteVerifierKey } from '../../manifests/crypto/note.js';
import { decodeBase64 } from '../../manifests/encoding/base64.js';
import { printable } from '../../manifests/encoding/printable.js';
import { formatAddCheckpoint } from '../../manifests/witness/add-checkpoint.js';
import { writeFileAtomic } from '../../store/fs/atomic-file.js';
import type { SignedCheckpoint } from './checkpoints.js';
import { LedgerError, untilCancelled } from '../errors.js';
import { MAX_TIMER_MS } from '../../store/abort.js';
import { readBodyUpTo } from '../../store/bounded-body.js';
import { errorText, readOptionFields, shownValue, type NamesEveryField } from '../../store/errors.js';

/** A witness to submit to: its URL prefix, and optionally its verifier key (then only its valid cosignatures are kept). */
export interface WitnessEndpoint {
  url: string;
  vkey?: string | undefined;
}

export interface WitnessingOptions {
  /**
   * The witnesses: endpoints, or text `URL` or `URL#VKEY` (the verifier key in the place of the fragment, which a
   * URL never sends to a server). A witness without a verifier key is trusted to return its own lines only: its
   * lines are kept without a signature check, but never in place of a line that verifies under another witness's
   * pinned key, and only those that leave the checkpoint readable (a valid key name, a canonical cosignature, at
   * most 100 signature lines in all, the note opening under the checkpoint keys).
   */
  witnesses: Array<string | WitnessEndpoint>;
  /** Deadline of each request to a witness (default 5000 ms; 1 to 2^31 − 1, the longest timer Node keeps). */
  timeoutMs?: number | undefined;
  /**
   * First retry delay after a failed round (default 1000 ms, doubling up to 60 s, or up to itself when longer; 1 to
   * 2^31 − 1). Each wait is jittered: a random time from half of it to all of it (`retryDelay`).
   */
  retryMs?: number | undefined;
  /**
   * How long the ledger's `close()` waits for a submission still under way (the newest checkpoint on its way to the
   * witnesses, as after a publish just made) before it cuts it: default `timeoutMs`, at most 5000 ms; 0 to 2^31 − 1
   * (0: no wait). A close with nothing under way does not wait; one that leaves a witness without a cosignature of
   * the newest checkpoint says so through onNotice (the next publish, checkpoint or export submits it).
   */
  closeWaitMs?: number | undefined;
}

/**
 * The longest wait before the retry after `failures` failed rounds in a row (0: the first): `retryMs` doubling up to
 * 60 s, or up to `retryMs` itself when that is longer (a retry asked for every 5 minutes is not made every minute).
 */
export function retryCeiling(retryMs: number, failures: number): number {
  return Math.min(Math.max(60_000, retryMs), retryMs * 2 ** Math.min(failures, 16));
}

/**
 * The wait before the retry after `failures` failed rounds in a row: `retryCeiling`'s with equal jitter, a random time
 * from half of it to all of it, rounded up to a whole millisecond. Ledgers whose witness went down together (one witness, many
 * stores) retry spread over that span, not in lockstep at each doubling; none retries later than the schedule, nor
 * sooner than half of it. `random` (default Math.random) answers in [0, 1), as Math.random does.
 */
export function retryDelay(retryMs: number, failures: number, random: () => number = Math.random): number {
  const half = retryCeiling(retryMs, failures) / 2;
  // A random source that answers outside [0, 1) (a test's, a bug) is held to it: the wait stays in its bounds.
  const r = Math.min(Math.max(random(), 0), 1 - Number.EPSILON);
  return Math.ceil(half + (Number.isNaN(r) ? 0 : r) * half);
}

/**
 * Checks the witnessing options' delays: milliseconds from 1 to 2^31 − 1 (a timer beyond fires at once, so a deadline
 * of a month would abort every request after 1 ms; 0, a negative number or NaN would too).
 * @throws LedgerError `INVALID_ARGUMENT`
 */
function checkWitnessingDelays(options: WitnessingOptions): void {
  for (const [name, value, least] of [
    ['timeoutMs', options.timeoutMs, 1],
    ['retryMs', options.retryMs, 1],
    // 0: close() cuts a submission under way at once.
    ['closeWaitMs', options.closeWaitMs, 0],
  ] as const)
    // null: the default, as every option's null is undefined (`?? default` below)
    if (value != null && !(typeof value === 'number' && value >= least && value <= MAX_TIMER_MS))
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `witnesses.${name} must be a number of milliseconds from ${least} to ${MAX_TIMER_MS}, got ${shownValue(value)}`,
      );
}

/**
 * Checks the witnessing options, delays and endpoints, and returns each witness's URL and key: what openLedger checks
 * before it writes anything, and the pool then takes.
 * @throws LedgerError `INVALID_ARGUMENT` (a bad URL, a delay out of range), ManifestError `KEY_INVALID` (a bad verifier
 *   key)
 */
const WITNESSING_FIELDS = ['witnesses', 'timeoutMs', 'retryMs', 'closeWaitMs'] as const satisfies ReadonlyArray<
  keyof WitnessingOptions
>;
const everyWitnessingField: NamesEveryField<WitnessingOptions, typeof WITNESSING_FIELDS> = true;
void everyWitnessingField;

/**
 * The `witnesses` option of `openLedger` read once into plain objects, its list and each endpoint's `url` and `vkey`
 * included: a getter or a proxy that throws as it is read is `INVALID_ARGUMENT` naming it (with the failure as the
 * cause), not an uncoded error of the open, and what is checked is what the witness pool then uses.
 * @throws LedgerError `INVALID_ARGUMENT`
 */
export function readWitnessingOptions(given: unknown): WitnessingOptions {
  const shape = (what = '') =>
    new LedgerError('INVALID_ARGUMENT', `witnesses must be { witnesses: [...] } (WitnessingOptions)${what}`);
  if (typeof given !== 'object' || given === null) throw shape();
  // The list itself given in place of the object that holds it: said so, not as an unknown option "0".
  if (Array.isArray(given)) throw shape(', not an array');
  const options = readOptionFields(given, WITNESSING_FIELDS, 'witnesses options', LedgerError);
  let list: unknown[];
  try {
    if (!Array.isArray(options.witnesses)) throw shape();
    list = Array.from(options.witnesses as unknown[]);
  } catch (err) {
    if (err instanceof LedgerError) throw err;
    throw new LedgerError('INVALID_ARGUMENT', 'witnesses options: reading its witnesses list failed', { cause: err });
  }
  const witnesses = list.map((w, i) =>
    typeof w === 'object' && w !== null ? readOptionFields(w, ['url', 'vkey'], `witness ${i}`, LedgerError) : w,
  );
  return { ...(options as Omit<WitnessingOptions, 'witnesses'>), witnesses } as WitnessingOptions;
}

export function checkWitnessingOptions(
  options: WitnessingOptions,
): Array<{ url: string; key: CosignerKey | undefined }> {
  checkWitnessingDelays(options);
  return options.witnesses.map((w) => {
    const e = typeof w === 'string' ? endpointOf(w) : w;
    if (typeof e?.url !== 'string' || e.url.includes('#'))
      throw new LedgerError('INVALID_ARGUMENT', `witness ${shownValue(e?.url, 200)}: a URL, or URL#VKEY as text`);
    let url: URL;
    try {
      url = new URL(e.url);
    } catch (err) {
      throw new LedgerError('INVALID_ARGUMENT', `witness URL ${shownValue(e.url, 200)} is not a URL`, { cause: err });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new LedgerError('INVALID_ARGUMENT', `witness URL ${shownValue(e.url, 200)}: http or https only`);
    // `add-checkpoint` goes after the URL's path (C2SP tlog-witness: the URL is a prefix): a query would take it in.
    if (e.url.includes('?'))
      throw new LedgerError(
        'INVALID_ARGUMENT',
        `witness URL ${shownValue(e.url, 200)}: no query (add-checkpoint is appended to its path)`,
      );
    return { url: e.url.replace(/\/+$/, ''), key: e.vkey !== undefined ? parseCosignerKey(e.vkey) : undefined };
  });
}

interface Witness {
  url: string;
  key: CosignerKey | undefined;
  /**
   * Which configured witness this is: its URL and pinned key (name and key hash). One URL may serve several keys (C2SP
   * tlog-witness answers "cosignatures from the witness key(s)"), pinned as entries of their own: each keeps its own
   * lines. (Sizes are the URL's: one server holds one tree of the log.)
   */
  id: string;
  /** The size this witness last cosigned, as far as we know (undefined: ask it). */
  size: number | undefined;
  /** `size` was read from `.witnesses.json` and the witness has not confirmed it in this run. */
  fromDisk: boolean;
  /**
   * The largest size this witness answered 200 for (cosigned) of this log, kept in `.witnesses.json`: a witness never
   * goes back, so a 409 naming less means it lost or rolled back its state (or another witness answers at its URL).
   */
  cosignedSize: number | undefined;
  /**
   * The size this witness last said it holds when that was larger than this log (`ranAhead`): not believed for the
   * next round (`size` is cleared), but what the closing notice says it holds. Cleared by its next answer.
   */
  ahead?: number | undefined;
  /** The log's size when `ahead` was said: its current tree, read then, smaller than the witness's. */
  aheadOfLog?: number | undefined;
}

/**
 * `.witnesses.json`: `{ version: 1, sizes: { <witness URL>: <size it holds> }, cosigned: { <witness URL>: <largest
 * size it cosigned> } }` (`cosigned` is absent from the files of earlier versions, which ignore it).
 */
function parseSizes(text: string): { sizes: Map<string, number>; cosigned: Map<string, number> } {
  const v = JSON.parse(text) as { version?: unknown; sizes?: unknown; cosigned?: unknown };
  const isMap = (m: unknown) => typeof m === 'object' && m !== null && !Array.isArray(m);
  if (v?.version !== 1 || !isMap(v.sizes)) throw new Error('not a version 1 witness size file');
  const read = (m: unknown) => {
    const sizes = new Map<string, number>();
    if (isMap(m))
      for (const [url, size] of Object.entries(m as Record<string, unknown>))
        if (Number.isSafeInteger(size) && (size as number) >= 0) sizes.set(url, size as number);
    return sizes;
  };
  return { sizes: read(v.sizes), cosigned: read(v.cosigned) };
}

/** A signed note's text, without its signature lines: what names the checkpoint its cosignatures are for. */
function noteText(note: string): string {
  return note.slice(0, note.lastIndexOf('\n\n') + 1);
}

/**
 * How long `cosign` (`Ledger.checkpoint()`: the CLI's `checkpoint` and `export`) waits for the witnesses at most: a
 * witness may be asked twice in a round, each request given `timeoutMs` (the first with the size the pool believes,
 * the second with the size a 409 names), and 1 s of slack (the proofs a round computes, the files it writes); at most
 * 2^31 − 1 ms, the longest timer Node keeps. The note is then returned with the cosignatures that came. A round still
 * under way is given `closeWaitMs` more by the ledger's close (the CLI: `timeoutMs` again), then cut: the witnesses
 * hold a CLI `checkpoint` or `export` 3 × `timeoutMs` + 1 s at most. Stated in `checkpoint --help` and README
 * (test/cli-help.test.ts holds the help to it).
 */
export function cosignWaitMs(timeoutMs: number): number {
  return Math.min(2 * timeoutMs + 1000, MAX_TIMER_MS);
}

/** A signature line of the shape of an Ed25519 cosignature/v1 (key hash, timestamp, signature: 76 bytes). */
const COSIGNATURE_LINE = /^\u2014 (\S+) ([A-Za-z0-9+/]+=*)$/;
const MAX_LINES_PER_WITNESS = 8;

export class WitnessPool {
  private readonly witnesses: Witness[];
  private readonly timeoutMs: number;
  private readonly retryMs: number;
  private readonly closeWaitMs: number;
  /** Witnesses whose request the close cut (no answer within closeWaitMs): said so in the closing notice. */
  private readonly cut = new Set<string>();
  /**
   * What was last said of each witness URL: the size of the checkpoint it was said for, and what it was (a refusal's
   * notice, or the kind of a request that got no answer). The same thing of the same checkpoint size is said once,
   * however many rounds hear it (a publish's, then `checkpoint()`'s, the retries): a witness that stays down is said
   * down once per checkpoint, at the rate of publishes, not once a retry. A new size, another answer or kind of
   * failure, or the same one after the witness cosigned meanwhile is said again.
   */
  private readonly said = new Map<string, { size: number; what: string; unanswered: boolean }>();
  /**
   * The failure to read the log's current tree last said (`size`: of the checkpoint submitted, `kind`: the error's
   * code): said once per checkpoint size and kind, until a read succeeds.
   */
  private treeUnreadSaid: { size: number; kind: string } | undefined;
  private target: SignedCheckpoint | undefined;
  /** Cosignature lines for the checkpoint `text`, per witness (its `id`), and the lines restored from disk (`saved:<line>`). */
  private cosigned: { text: string; lines: Map<string, string> } | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private failures = 0;
  private retry: NodeJS.Timeout | undefined;
  private readonly abort = new AbortController();
  private closed = false;
  /** The sizes last written to `.witnesses.json` (a round writes the file only when they changed). */
  private savedSizes = '';
  /**
   * The log's current tree, checked and pinned (the ledger's `checkLog`): asked when a witness holds a larger tree than
   * the checkpoint submitted, which in a root several processes share is another process's newer checkpoint.
   */
  private current: (() => Promise<SignedCheckpoint>) | undefined;
  /** Whether other processes may append to the log (`open`'s `shared`). */
  private shared = false;
  /** This round's answer of `current`: one question per round, however many witnesses are ahead. */
  private latest: Promise<SignedCheckpoint | undefined> | undefined;

  private constructor(
    options: WitnessingOptions,
    private readonly path: string,
    private readonly sizesPath: string,
    private readonly proof: (oldSize: number, size: number, signal: AbortSignal) => Promise<Uint8Array[]>,
    private readonly notice: (message: string) => void,
    private readonly checkpointKeys: () => NoteVerifierKey[],
  ) {
    this.witnesses = checkWitnessingOptions(options).map((w) => ({
      ...w,
      id: w.key ? `${w.url}#${w.key.name}+${hex8(w.key.keyHash)}` : w.url,
      size: undefined,
      fromDisk: false,
      cosignedSize: undefined,
    }));
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.retryMs = options.retryMs ?? 1000;
    this.closeWaitMs = options.closeWaitMs ?? Math.min(this.timeoutMs, 5000);
  }

  /**
   * @throws LedgerError `INVALID_ARGUMENT` (a bad URL, a delay out of range), ManifestError `KEY_INVALID` (a bad
   *   verifier key)
   */
  static async open(init: {
    options: WitnessingOptions;
    /** `<root>/checkpoints/<blake3(origin)>`, the pinned checkpoint's stem; cosignatures are kept next to it. */
    checkpointStem: string;
    /**
     * The consistency proof from `oldSize` to `size`. `signal` aborts when the pool is cut at its close: the pool
     * stops waiting for the proof then (as for a request), and what the call still does is dropped unobserved.
     */
    proof: (oldSize: number, size: number, signal: AbortSignal) => Promise<Uint8Array[]>;
    notice: (message: string) => void;
    /**
     * Every checkpoint key an auditor may open the note with (this store's, of any origin, revoked ones too): a
     * witness's line is kept only while the checkpoint with all the lines kept still opens under them.
     */
    checkpointKeys: () => NoteVerifierKey[];
    /**
     * Whether other processes may append to the log (PostgreSQL: the log is not `exclusive`). Else the newest
     * checkpoint this pool submitted is the log's size, and a witness that holds more holds more than the log.
     */
    shared?: boolean;
  }): Promise<WitnessPool> {
    const path = `${init.checkpointStem}.cosigned.note`;
    const sizesPath = `${init.checkpointStem}.witnesses.json`;
    // A witness's answer, an error's message and the file read are data: escaped here, so that every receiver of the
    // ledger's notices (console.warn by default, not only the CLI) gets text that cannot act on a terminal.
    const notice = (message: string) => init.notice(printable(message));
    const pool = new WitnessPool(init.options, path, sizesPath, init.proof, notice, init.checkpointKeys);
    pool.shared = init.shared === true;
    const sizesText = await readFile(sizesPath, 'utf8').catch(() => undefined);
    if (sizesText !== undefined) {
      try {
        const { sizes, cosigned } = parseSizes(sizesText);
        for (const w of pool.witnesses) {
          const size = sizes.get(w.url);
          if (size !== undefined) Object.assign(w, { size, fromDisk: true });
          w.cosignedSize = cosigned.get(w.url);
        }
        pool.savedSizes = pool.sizesText();
      } catch (err) {
        // Only a hint: without it each witness names its size in a 409, as on a first run.
        notice(`witnesses: ignoring ${sizesPath}: ${errorText(err)}`);
      }
    }
    const saved = await readFile(path, 'utf8').catch(() => undefined);
    const split = saved?.lastIndexOf('\n\n') ?? -1;
    if (saved !== undefined && split > 0) {
      const lines = new Map<string, string>();
      // Which witness gave which line is not kept on disk: the lines are restored under their names. They pass the
      // checks of a witness's answer again (gathered()): a file an older version wrote may hold a line that breaks the note.
      for (const line of saved.slice(split + 2).split('\n'))
        if (isCosignatureLine(line)) lines.set(`saved:${line}`, `${line}\n`);
      pool.cosigned = { text: saved.slice(0, split + 1), lines };
    }
    return pool;
  }

  /**
   * How the pool reads the log's current tree (the ledger's `checkLog`, set once the ledger exists): when a witness
   * holds a larger tree than the checkpoint submitted, the current one is submitted instead if the log has grown
   * that far (another process sharing the log got there first); only a log that truly is smaller is said to be.
   */
  follow(current: () => Promise<SignedCheckpoint>): void {
    this.current = current;
  }

  /** Submits `cp` (the newest checkpoint) to every witness in the background; never throws, never waits. */
  submit(cp: SignedCheckpoint): void {
    if (this.closed) return;
    this.target = cp;
    if (this.running) {
      this.again = true;
      return;
    }
    // `rounds` clears `running` itself, in the step that finds no newer checkpoint: a submit after that step starts
    // rounds of its own, one before it is taken by this loop (none falls between).
    this.running = this.rounds();
  }

  /**
   * `cp` with the cosignatures gathered for it, after one submission round at most (each request bounded
   * by the timeout): a witness that is down only leaves its cosignature out.
   */
  async cosign(cp: SignedCheckpoint): Promise<SignedCheckpoint> {
    this.submit(cp);
    // One round is bounded by the request deadline (two requests per witness); steady publishing could
    // chain rounds, so the wait is bounded too.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.running,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, cosignWaitMs(this.timeoutMs)))),
    ]);
    clearTimeout(timer);
    const text = noteText(cp.note);
    if (this.cosigned?.text !== text) return cp;
    return { ...cp, note: cp.note + this.gathered(cp.note).join('') };
  }

  /**
   * Stops the pool: no checkpoint is taken from now on, no retry is made. A round under way (the newest checkpoint on
   * its way to the witnesses: a publish just made, whose process is about to exit) is given `closeWaitMs` to end, the
   * rounds it chains (a newer checkpoint submitted meanwhile) included; then what is left is cut. A close with no
   * round under way does not wait: a checkpoint whose round has ended without a witness's cosignature (down, refused:
   * said then) is not asked again. Should a witness be left without a cosignature of the newest checkpoint, it is
   * said once, with the size each such witness holds: `.witnesses.json` keeps it, and the next publish, checkpoint or
   * export with these witnesses submits the log's newest tree from it.
   */
  close(): Promise<void> {
    // Every call gets the one closing (and the one notice).
    this.closing ??= this.closeOnce();
    return this.closing;
  }

  private closing: Promise<void> | undefined;

  private async closeOnce(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const running = this.running;
    if (running && this.closeWaitMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([running, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.closeWaitMs)))]);
      clearTimeout(timer);
    }
    this.abort.abort();
    await this.running?.catch(() => {});
    this.sayUncosigned();
  }

  /**
   * At close: the witnesses without a cosignature of the newest checkpoint submitted, the size each holds, and what the
   * next submission does with each. A witness behind the checkpoint (or of a size not yet known) is caught up from the
   * size it holds. One that holds a larger tree than the log (the log's tree read smaller, or, where no other process
   * appends to the log, larger than this checkpoint) cosigns nothing until the log extends its tree: after a restore
   * from a backup older than it, never (README, Witnesses after a restore). One that holds more than this checkpoint of
   * a log other processes share, the log's tree not read before the close, is either: caught up if another process
   * has published that far, refusing if the log is smaller.
   */
  private sayUncosigned(): void {
    const cp = this.target;
    if (!cp) return;
    const text = noteText(cp.note);
    const lines = this.cosigned?.text === text ? this.cosigned.lines : undefined;
    const behind = this.witnesses.filter((w) => !lines?.has(w.id));
    if (behind.length === 0) return;
    const size = cp.checkpoint.size;
    const said = new Set<'behind' | 'larger' | 'unread'>();
    const named = behind.map((w) => {
      const why = this.cut.has(w.id)
        ? this.closeWaitMs > 0
          ? `no answer within the ${this.closeWaitMs} ms close() waited; `
          : 'not waited for; '
        : '';
      // A witness said to hold a larger tree than this log's is said to hold it here too, not to be unknown.
      if (w.ahead !== undefined || (w.size !== undefined && w.size > size && !this.shared)) {
        said.add('larger');
        const held = w.ahead ?? w.size!;
        return `${w.url} (${why}it holds a tree of ${held} entries, larger than this log's ${w.ahead !== undefined ? (w.aheadOfLog ?? size) : size})`;
      }
      if (w.size !== undefined && w.size > size) {
        said.add('unread');
        return `${w.url} (${why}it holds size ${w.size}, larger than this checkpoint; the log's current size was not read before the close)`;
      }
      said.add('behind');
      return `${w.url} (${why}${w.size !== undefined ? `it holds size ${w.size}` : 'its size not yet known'})`;
    });
    const then = [
      "the next publish, checkpoint or export with these witnesses submits the log's newest tree to each, from the size it holds",
    ];
    if (said.has('larger'))
      then.push(
        "a witness that holds a larger tree than the log's cosigns none of it until the log extends that tree, which a log restored from a backup older than that tree never does (README, Witnesses after a restore)",
      );
    if (said.has('unread'))
      then.push(
        "one that holds more than this checkpoint cosigns the log's tree if another process of this shared log has published that far, and none of it if the log is smaller (restored from a backup older than that tree)",
      );
    this.notice(
      `witnesses: closing with the checkpoint of size ${size} not cosigned by ${named.join(', ')}; ${then.join('; ')}`,
    );
  }

  /**
   * One round, then one more for each checkpoint submitted while one ran. `running` is cleared in the very step that
   * finds none (this `finally`, run with the loop's last test, no await between): a submit is either taken by this loop
   * or starts rounds of its own.
   */
  private async rounds(): Promise<void> {
    try {
      do {
        this.again = false;
        this.latest = undefined;
        const cp = this.target!;
        const text = noteText(cp.note);
        if (this.cosigned?.text !== text) this.cosigned = { text, lines: new Map() };
        const outcomes = await Promise.all(this.witnesses.map((w) => this.submitTo(w, cp, text)));
        await this.save(cp).catch((err: unknown) =>
          this.notice(`witnesses: cannot keep the cosigned checkpoint: ${errorText(err)}`),
        );
        await this.saveSizes().catch((err: unknown) =>
          this.notice(`witnesses: cannot keep the witnesses' sizes: ${errorText(err)}`),
        );
        if (outcomes.every(Boolean)) this.failures = 0;
        else if (!this.closed && !this.again) this.scheduleRetry();
        // A newer checkpoint submitted meanwhile: its round, unless the pool is cut (a closing pool's wait gives the
        // newest checkpoint its round).
      } while (this.again && !this.abort.signal.aborted);
    } finally {
      this.running = undefined;
    }
  }

  private scheduleRetry(): void {
    clearTimeout(this.retry);
    const delay = retryDelay(this.retryMs, this.failures++);
    // A timer that never keeps the process alive: a retry is a courtesy, not a duty.
    this.retry = setTimeout(() => this.target && this.submit(this.target), delay);
    this.retry.unref();
  }

  /** One witness, until it cosigned `cp` or refused it; true when it holds a cosignature of `cp`. */
  private async submitTo(w: Witness, cp: SignedCheckpoint, text: string): Promise<boolean> {
    if (this.cosigned?.lines.has(w.id)) return true;
    const size = cp.checkpoint.size;
    // Two tries: one with the size we believe, one with the size a 409 tells.
    for (let attempt = 0; attempt < 2; attempt++) {
      const old = w.size ?? 0;
      if (old > size && w.fromDisk) {
        // A size kept from an earlier run that this log never reached: ask the witness instead.
        Object.assign(w, { size: undefined, fromDisk: false });
        attempt--;
        continue;
      }
      if (old > size) return this.ranAhead(w, old, size);
      // The proof is the log's to make, before the request: its failure (a damaged tree, a database that does not
      // answer) is the log's, said as such and never as the witness's, and the time it takes (a large tree, a slow
      // database) is not taken from the deadline the witness is given to answer in. The pool's close cuts the wait for
      // it as it cuts a request: a close does not wait for a proof past its closeWaitMs.
      let proof: Uint8Array[];
      try {
        proof =
          old === 0 || old === size
            ? []
            : await untilCancelled(this.proof(old, size, this.abort.signal), this.abort.signal);
      } catch (err) {
        if (this.abort.signal.aborted) this.cut.add(w.id);
        else this.proofFailed(w, old, size, err);
        return false;
      }
      // Closed while the proof was made: cut, as a request would have been.
      if (this.abort.signal.aborted) {
        this.cut.add(w.id);
        return false;
      }
      let res: Response;
      let body: string;
      // The request's own deadline, and the pool's close: whichever comes first.
      const deadline = new AbortController();
      const timer = setTimeout(
        () => deadline.abort(new Error(`no answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      const onClose = () => deadline.abort(new Error('the ledger closed'));
      this.abort.signal.addEventListener('abort', onClose);
      try {
        res = await fetch(`${w.url}/add-checkpoint`, {
          method: 'POST',
          body: formatAddCheckpoint({ oldSize: old, proof, note: cp.note }),
          signal: deadline.signal,
          redirect: 'error',
        });
        body = await boundedText(res, MAX_ANSWER_BYTES);
      } catch (err) {
        // Cut by the close (its wait over, or none): said once, in the closing notice. Any other failure, while the
        // pool is open or closing, is said now.
        // fetch's own words ("fetch failed", "terminated") say nothing: errorText adds the cause it keeps (a connection
        // refused, a redirect, bytes that are no HTTP, a body cut short). What happened is said: "unreachable" only of a
        // witness no connection reached.
        if (this.abort.signal.aborted) this.cut.add(w.id);
        else if (deadline.signal.aborted)
          this.unanswered(w, size, 'deadline', `witness ${w.url} sent no complete answer within ${this.timeoutMs} ms`);
        else if (unreached(err))
          this.unanswered(w, size, 'unreachable', `witness ${w.url} is unreachable: ${errorText(err, 200)}`);
        else this.unanswered(w, size, 'unusable', `witness ${w.url} gave no usable answer: ${errorText(err, 200)}`);
        return false;
      } finally {
        clearTimeout(timer);
        this.abort.signal.removeEventListener('abort', onClose);
      }
      // A size past 2^53 − 1 is no size of a log (Number() would read another one): a refusal like any other, below.
      const held = /^(0|[1-9][0-9]{0,15})\n$/.test(body) ? Number(body.trim()) : NaN;
      // An answer: what it said of a larger tree before is superseded (ranAhead says it again if it still holds one).
      Object.assign(w, { ahead: undefined, aheadOfLog: undefined });
      if (res.status === 409 && Number.isSafeInteger(held)) {
        Object.assign(w, { size: held, fromDisk: false });
        // Below a size it cosigned of this log: a witness never goes back, so this one lost or rolled back its state
        // (or another witness answers at its URL). Said, and not taken as progress: the witness is left out of this
        // round (the largest size it cosigned is kept, so that it is said again of a newer checkpoint should it still be
        // behind), and the next round catches it up from the size it named.
        if (w.cosignedSize !== undefined && held < w.cosignedSize) {
          this.refused(
            w,
            size,
            `witness ${w.url} went backwards: it cosigned a tree of ${w.cosignedSize} entries of this log and now holds ${held} (its state was lost or rolled back, or another witness answers at its URL); it is left out of this round`,
          );
          return false;
        }
        // The size we sent, refused: the witness holds another tree at this size (the log was rewritten).
        if (held === old) {
          this.refused(w, size, `witness ${w.url} holds another tree of ${held} entries than this log's`);
          return false;
        }
        if (held > size) return this.ranAhead(w, held, size);
        continue;
      }
      if (res.status !== 200) {
        // The witness's words are data: shortened here, escaped by the pool's notice (see open).
        // 403: no key of the log the witness knows signed it, what every `keys rotate` brings until the witness is told,
        // and every host of a shared store whose own checkpoint key the witness was never given (each host signs).
        const hint =
          res.status === 403
            ? " (the witness lists no key of this log that signed it: add this host's `keys vkey` to its logs.json and restart it; after `keys rotate`, the new one; each host of a shared store signs with its own)"
            : '';
        // An empty body adds nothing after the status (it left a space at the end of the notice).
        const words = body.trim().slice(0, 200);
        this.refused(
          w,
          size,
          `witness ${w.url} refused the checkpoint of size ${size}: ${res.status}${words ? ` ${words}` : ''}${hint}`,
        );
        return false;
      }
      const lines = this.acceptLines(w, text, body);
      if (lines.length === 0) {
        this.refused(w, size, `witness ${w.url} answered without a cosignature we can use`);
        return false;
      }
      Object.assign(w, { size, fromDisk: false, cosignedSize: Math.max(w.cosignedSize ?? 0, size) });
      this.cosigned?.lines.set(w.id, lines.join(''));
      // It cosigned: a refusal or failure after this one is said again, whatever it repeats. A witness last said to be
      // down is said to answer again: else the last line of it an operator reads says it is down.
      if (this.said.get(w.url)?.unanswered)
        this.notice(`witness ${w.url} answers again: it cosigned the checkpoint of size ${size}`);
      this.said.delete(w.url);
      return true;
    }
    return false;
  }

  /**
   * Says that witness `w` refused the checkpoint of `size` (a refusing status, another or a larger tree, a size below
   * one it cosigned, an answer without a usable cosignature), unless it is the very refusal last said of its URL for
   * that size: a publish's round and the `checkpoint()` (export) after it, or a retry, that hear it again say nothing
   * new, and an operator reading the notices twice would count two witnesses or two checkpoints refused.
   */
  private refused(w: Witness, size: number, message: string): void {
    this.say(w, size, message, message, false);
  }

  /**
   * Says that a request to witness `w` for the checkpoint of `size` got no answer (`kind`: unreachable, no usable
   * answer, the deadline), unless that kind was the last thing said of its URL for that size: a witness that is down
   * is said down when it fails for a checkpoint, and again for a new checkpoint or a failure of another kind, not by
   * each retry (once a minute while it stays down). The kind is compared, not the message, whose error text varies
   * (an address, an errno, the cause fetch keeps).
   */
  private unanswered(w: Witness, size: number, kind: 'deadline' | 'unreachable' | 'unusable', message: string): void {
    this.say(w, size, kind, message, true);
  }

  /**
   * Says that the log could not make the consistency proof from `old` to `size` that witness `w` needs: once for the
   * checkpoint and the error's code (its message may vary), as a refusal is; the witness was not asked.
   */
  private proofFailed(w: Witness, old: number, size: number, err: unknown): void {
    let code: unknown;
    try {
      code = (err as { code?: unknown } | null | undefined)?.code;
    } catch {
      // A code getter that throws: no code.
    }
    this.say(
      w,
      size,
      `proof ${typeof code === 'string' ? code : ''}`,
      `witnesses: cannot make the consistency proof from size ${old} to ${size} for witness ${w.url} (the log's failure, not the witness's; it was not asked): ${errorText(err, 200)}`,
      false,
    );
  }

  private say(w: Witness, size: number, what: string, message: string, unanswered: boolean): void {
    const last = this.said.get(w.url);
    if (last?.size === size && last.what === what && last.unanswered === unanswered) return;
    this.said.set(w.url, { size, what, unanswered });
    this.notice(message);
  }

  /**
   * A witness holds `held` entries, more than the checkpoint submitted (`size`). In a root several processes share, the
   * log may be that large: another process's checkpoint got there first. The log's current tree is read once per
   * round: if it has grown past the target it becomes the target (when it reaches `held`, the next round submits it
   * at once, from `held`), and only when it is smaller than `held` is the witness said to hold a larger tree than this
   * log's (then the retry, with its backoff, submits it).
   */
  private async ranAhead(w: Witness, held: number, size: number): Promise<boolean> {
    const latest = await this.latestTree(size);
    // Unread (a failure said by latestTree, or the ledger closing): nothing is known of the log's size, nor said.
    if (this.current && latest === undefined) {
      Object.assign(w, { size: held, fromDisk: false });
      return false;
    }
    const now = latest?.checkpoint.size ?? size;
    // The newer tree is the one to submit from now on (a retry included)...
    const newer = latest !== undefined && now > size && now > (this.target?.checkpoint.size ?? 0);
    if (newer) this.target = latest;
    if (now >= held) {
      // ...at once when the witness can take it.
      if (newer) this.again = true;
      Object.assign(w, { size: held, fromDisk: false });
      return false;
    }
    this.refused(w, size, `witness ${w.url} holds a tree of ${held} entries, larger than this log's ${now}`);
    // Believed for this round only: the next one asks again, so a witness that was reset or misconfigured
    // for a while is caught up once it answers otherwise. The closing notice still says the size it named.
    Object.assign(w, { size: undefined, fromDisk: false, ahead: held, aheadOfLog: now });
    return false;
  }

  /**
   * The log's current tree (one read per round), or undefined when it cannot be read (said) or is not followed. A
   * failure is said once for the checkpoint submitted (`size`) and the error's code, however many rounds need the
   * tree (its message may vary: a path, an errno); again for a new checkpoint, another code, or after a read succeeded.
   */
  private latestTree(size: number): Promise<SignedCheckpoint | undefined> {
    const current = this.current;
    if (!current) return Promise.resolve(undefined);
    this.latest ??= current().then(
      (cp) => {
        this.treeUnreadSaid = undefined;
        return cp;
      },
      (err: unknown) => {
        let code: unknown;
        try {
          code = (err as { code?: unknown } | null | undefined)?.code;
        } catch {
          // A code getter that throws: no code.
        }
        const kind = typeof code === 'string' ? code : '';
        // A ledger closing refuses (CLOSED): nothing to say.
        if (this.closed || kind === 'CLOSED') return undefined;
        if (this.treeUnreadSaid?.size !== size || this.treeUnreadSaid.kind !== kind) {
          this.treeUnreadSaid = { size, kind };
          this.notice(`witnesses: cannot read the log's current tree: ${errorText(err)}`);
        }
        return undefined;
      },
    );
    return this.latest;
  }

  /**
   * The answer's cosignature lines worth keeping: valid under the witness's key when we know it; without one, lines of
   * a cosignature's shape under a valid key name (gathered() checks that they leave the note readable).
   */
  private acceptLines(w: Witness, text: string, body: string): string[] {
    const lines = body
      .split('\n')
      .filter(isCosignatureLine)
      .slice(0, MAX_LINES_PER_WITNESS)
      .map((l) => `${l}\n`);
    if (!w.key) return lines;
    return lines.filter((l) => checkCosignatures(`${text}\n${l}`, [w.key!]).valid.length === 1);
  }

  /**
   * One line per witness key (name and key hash): one witness is one vote however many lines it has. A witness
   * without a pinned key can answer any line under any name, so its lines never stand beside or in place of a
   * line that verifies under a pinned key, and a line under a pinned witness's name and key hash that does not
   * verify under that key is dropped: else one bad witness could replace a good cosignature with junk, and an
   * auditor who pins the good witness would see it as a bad signature. Between lines of equal standing the
   * first wins, in the order the witnesses are configured, then the lines saved by an earlier run.
   *
   * Nor can such a witness make the note unreadable (a note reader, ours or Go's note.Open, refuses the whole note
   * for one bad line, and an auditor would lose every check the checkpoint carries): a line is kept only under a valid
   * key name with a canonical 76-byte signature, never under the name and key hash of a checkpoint key (a reader
   * would check it as the log's signature), and no more lines than a note may carry (MAX_SIGNATURES, the log's own
   * included; verified lines first). Should `note` with the lines kept still not open under the checkpoint keys,
   * only the lines that verify under a pinned key are kept.
   */
  private gathered(note: string): string[] {
    const cosigned = this.cosigned;
    if (!cosigned) return [];
    const checkpointKeys = this.checkpointKeys();
    const pinned = this.witnesses.flatMap((w) => (w.key ? [w.key] : []));
    const sources = [
      ...this.witnesses.map((w) => w.id),
      ...[...cosigned.lines.keys()].filter((k) => k.startsWith('saved:')),
    ];
    const byKey = new Map<string, { line: string; verified: boolean }>();
    for (const source of sources)
      for (const line of (cosigned.lines.get(source) ?? '').split('\n').filter(Boolean)) {
        const m = COSIGNATURE_LINE.exec(line);
        const sig = m && isValidKeyName(m[1]!) ? decodeBase64(m[2]!) : undefined;
        if (!m || sig?.length !== 76) continue;
        const name = m[1]!;
        const keyHash = new DataView(sig.buffer, sig.byteOffset).getUint32(0);
        if (checkpointKeys.some((k) => k.name === name && k.keyHash === keyHash)) continue;
        const named = pinned.some((k) => k.name === name && k.keyHash === keyHash);
        const verified = named && checkCosignatures(`${cosigned.text}\n${line}\n`, pinned).valid.length === 1;
        if (named && !verified) continue;
        const id = `${name}+${keyHash}`;
        const held = byKey.get(id);
        if (held && (held.verified || !verified)) continue;
        byKey.set(id, { line: `${line}\n`, verified });
      }
    const kept = [...byKey.values()];
    const room = MAX_SIGNATURES - (note.slice(note.lastIndexOf('\n\n') + 2).match(/\n/g)?.length ?? 0);
    let unverifiedRoom = room - kept.filter((v) => v.verified).length;
    const capped = kept.filter((v) => v.verified || unverifiedRoom-- > 0).slice(0, Math.max(0, room));
    const lines = capped.map((v) => v.line);
    if (lines.length === 0 || opens(note + lines.join(''), checkpointKeys)) return lines;
    return capped.filter((v) => v.verified).map((v) => v.line);
  }

  private sizesText(): string {
    const sizes: Record<string, number> = {};
    const cosigned: Record<string, number> = {};
    for (const w of this.witnesses) {
      if (w.size !== undefined) sizes[w.url] = w.size;
      if (w.cosignedSize !== undefined) cosigned[w.url] = w.cosignedSize;
    }
    return `${JSON.stringify({ version: 1, sizes, cosigned }, null, 2)}\n`;
  }

  private async saveSizes(): Promise<void> {
    const text = this.sizesText();
    if (text === this.savedSizes) return;
    await writeFileAtomic(this.sizesPath, text, 0o600);
    this.savedSizes = text;
  }

  private async save(cp: SignedCheckpoint): Promise<void> {
    const lines = this.gathered(cp.note);
    if (lines.length === 0) return;
    await writeFileAtomic(this.path, cp.note + lines.join(''), 0o600);
  }
}

const hex8 = (n: number) => n.toString(16).padStart(8, '0');

/** `URL` or `URL#VKEY` as an endpoint. */
function endpointOf(text: string): WitnessEndpoint {
  const hash = text.indexOf('#');
  return hash < 0 ? { url: text } : { url: text.slice(0, hash), vkey: text.slice(hash + 1) };
}

/** What is read of a witness's answer: cosignature lines and a size fit in far less. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * A cosignature/v1 line: a signature line under a valid key name (no Unicode space, `+` or C0 control) whose signature
 * is the 76 bytes of one (key hash, timestamp, Ed25519) in canonical base64. The log's own signature line (68 bytes) is
 * not one, so a saved note's signature block does not restore it twice.
 */
function isCosignatureLine(line: string): boolean {
  const m = COSIGNATURE_LINE.exec(line);
  return m !== null && isValidKeyName(m[1]!) && decodeBase64(m[2]!)?.length === 76;
}

/** Codes of a connection that was never made (a name that does not resolve, an address nothing answers at). */
const UNREACHED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * Whether a request failed before a connection was made: fetch's "fetch failed" with a cause of a connect or name
 * lookup (its syscall, or its code: a name whose every address refused is an AggregateError with the code alone).
 * Anything else (a redirect, bytes that are no HTTP, a body cut short, a TLS failure) reached the witness.
 */
function unreached(err: unknown): boolean {
  const cause = (err as { cause?: unknown } | undefined)?.cause as { code?: unknown; syscall?: unknown } | undefined;
  return (
    (typeof cause?.code === 'string' && UNREACHED.has(cause.code)) ||
    cause?.syscall === 'connect' ||
    cause?.syscall === 'getaddrinfo'
  );
}

/** Whether a signed note opens under `keys` as an auditor's reader opens it. */
function opens(note: string, keys: NoteVerifierKey[]): boolean {
  try {
    openNote(note, keys, nodeVerifier);
    return true;
  } catch {
    return false;
  }
}

/**
 * The first `max` bytes of a response body as text; the rest is never read (the stream is cancelled), so a witness
 * that sends without end costs `max` bytes of memory, not all it sent before the deadline.
 */
async function boundedText(res: Response, max: number): Promise<string> {
  const { bytes } = await readBodyUpTo(res.body, max);
  // A byte order mark is kept: an answer that begins with one is not the body tlog-witness spells, and its first line
  // is no cosignature line (nor a 409's size).
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
}
