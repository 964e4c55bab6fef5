/**
 * Values a message quotes that the library did not choose (a stored origin record, what a model adapter returned or
 * threw, a request's purpose, what a command threw): named through shownValue or errorText, so none can turn the
 * coded refusal into a TypeError (an object whose toString throws), put megabytes into a message, or leave a control
 * character raw in it that JSON.stringify leaves (DEL, C1 such as the one-byte CSI, bidirectional overrides).
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { shownValue } from '../store/errors.js';
import { invalidIdMessage } from '../manifests/format/id-pattern.js';
import { storedOriginDamage } from '../src/ledger/checkpoints.js';
import { extractSummary } from '../src/compaction/tool.js';
import { compactionOnly } from '../src/adapters/shared.js';
import { reportInternalError } from '../src/cli/io.js';
import { compact, openLedger, type ModelAdapter, type ModelRequest, type ModelResponse } from '../src/index.js';
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { signNote, type NoteSigner } from '../manifests/crypto/note.js';
import { join } from 'node:path';
import { LevelManifestLog } from '../manifests/log/level/log.js';
import { parseIdPositionRecord, parseInlineKey, parsePositionKey } from '../manifests/log/level/records.js';
import { fsck, gc, parseDuration } from '../src/ops/maintenance.js';
import { withFileLock } from '../src/ledger/file-lock.js';
import { parseManifestId } from '../src/ledger/proofs.js';
import { parseExpectedPrev } from '../src/ledger/ledger.js';
import { checkWitnessingOptions } from '../src/ledger/witnessing.js';
import { parseWitnessLogs } from '../src/witness/logs.js';
import { originHash, WitnessState } from '../src/witness/state.js';
import { hashBackendNameProblem } from '../store/hash/backends.node.js';
import pgLib from 'pg';
import { describePostgres } from './support/postgres.js';
import { sampleSummary, tempDir } from './support/tmp.js';
import { embeddedNamedAsBefore } from './tlog/ledger-support.js';

/** Throws as it is made text: `String(x)` and `${x}` of it threw. */
const untextable = {
  toString(): string {
    throw new Error('no text');
  },
};
/** What a terminal acts on that JSON.stringify leaves raw: the one-byte CSI, DEL, a right-to-left override. */
const ACTING = '\u009b2J\u007f\u202e';
const raw = /[\u007f-\u009f\u202e]/;

const thrown = (call: () => unknown): unknown => {
  try {
    call();
  } catch (err) {
    return err;
  }
  return undefined;
};

describe('shownValue', () => {
  it('leaves nothing a terminal acts on raw in a quoted string, which still reads back as JSON', () => {
    const shown = shownValue(`a${ACTING}b`);
    expect(shown).not.toMatch(raw);
    expect(shown).toBe('"a\\u009b2J\\u007f\\u202eb"');
    expect(JSON.parse(shown)).toBe(`a${ACTING}b`);
    // An astral format character (a tag) is escaped as its surrogate pair.
    expect(JSON.parse(shownValue('\u{e0041}'))).toBe('\u{e0041}');
    expect(shownValue('\u{e0041}')).toBe('"\\udb40\\udc41"');
  });
});

describe('an id that is not one, quoted in INVALID_ID', () => {
  it('leaves nothing raw that JSON.stringify leaves, in the rule and in every refusal that names it', async () => {
    const id = `s${ACTING}`;
    // JSON.stringify alone left the one-byte CSI, DEL and a right-to-left override raw in the caller's message.
    const message = invalidIdMessage('session', id);
    expect(message).not.toMatch(raw);
    expect(message).toBe(
      'session "s\\u009b2J\\u007f\\u202e" is not a valid id (1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric)',
    );
    expect(invalidIdMessage('run', 7)).toMatch(/^run number is not a valid id/); // no string: named by its type
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      const err = (await ledger.resume({ principal: 'alice', session: id }).catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ name: 'LedgerError', code: 'INVALID_ID' });
      expect(err.message).not.toMatch(raw);
      expect(err.message).toContain('"s\\u009b2J');
    } finally {
      await ledger.close();
    }
  });
});

describe('a stored origin record that is no origin', () => {
  it('is RECORD_CORRUPT whatever it holds: an object that cannot be made text, control characters, megabytes', () => {
    // String(origin) threw the object's error in place of RECORD_CORRUPT.
    expect(storedOriginDamage(untextable)).toMatchObject({ code: 'RECORD_CORRUPT', message: /record an object is/ });
    const hostile = storedOriginDamage(`${ACTING}${'x'.repeat(1_000_000)}`)!;
    expect(hostile.code).toBe('RECORD_CORRUPT');
    expect(hostile.message).not.toMatch(raw);
    expect(hostile.message.length).toBeLessThan(1000);
    expect(storedOriginDamage(undefined)?.message).toMatch(/record undefined is not/);
  });
});

describe('what a model adapter returns or throws', () => {
  it('a response that is no object is SUMMARY_EMPTY naming it shortened and escaped', () => {
    // The message held the whole string (a megabyte here) as it came.
    const err = thrown(() => extractSummary(`${ACTING}${'y'.repeat(1_000_000)}` as never)) as Error;
    expect(err).toMatchObject({ code: 'SUMMARY_EMPTY' });
    expect(err.message.length).toBeLessThan(200);
    expect(err.message).not.toMatch(raw);
    expect((thrown(() => extractSummary(undefined as never)) as Error).message).toBe(
      'the model adapter returned no response (undefined)',
    );
  });

  it("a refusal's words, another tool's name and a finish reason outside the type: bounded, escaped, coded", () => {
    const hostile = `${ACTING}${'w'.repeat(1_000_000)}`;
    // The words of a refusal, a tool's name and an adapter's own finish reason are the provider's text: JSON.stringify
    // left the one-byte CSI, DEL and a right-to-left override raw, and the name and the reason went in whole.
    const refused = thrown(() => extractSummary({ finishReason: 'refusal', refusal: hostile })) as Error;
    expect(refused).toMatchObject({ code: 'MODEL_REFUSED' });
    expect(refused.message).not.toMatch(raw);
    expect(refused.message.length).toBeLessThan(400);
    expect(refused.message).toContain('"\\u009b2J\\u007f\\u202ew');
    const other = thrown(() =>
      extractSummary({ finishReason: 'tool_calls', toolCalls: [{ id: 'c1', name: hostile, input: {} }] }),
    ) as Error;
    expect(other).toMatchObject({ code: 'SUMMARY_INVALID' });
    expect(other.message).not.toMatch(raw);
    expect(other.message.length).toBeLessThan(300);
    for (const finishReason of [hostile, Symbol('stop'), untextable, 7]) {
      const err = thrown(() => extractSummary({ finishReason } as never)) as Error;
      expect(err, typeof finishReason).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INCOMPLETE' });
      expect(err.message).not.toMatch(raw);
      expect(err.message.length).toBeLessThan(200);
    }
    // The reasons of the type are named as they are, as before.
    expect((thrown(() => extractSummary({ finishReason: 'length' })) as Error).message).toBe(
      'the model did not finish its summary (finish reason length)',
    );
    expect((thrown(() => extractSummary({ finishReason: 'refusal', refusal: 'No.' })) as Error).message).toBe(
      'the model refused to write the summary: "No."',
    );
  });

  it("a summary key the model wrote, quoted in compact's SUMMARY_INVALID: escaped, nothing published", async () => {
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      const scope = { principal: 'alice', session: 's1', run: 'r1' };
      const key = `\u001b]0;owned\u0007${ACTING}`;
      const model: ModelAdapter = async () => ({
        finishReason: 'stop',
        text: JSON.stringify({ task: 't', state: 's', nextSteps: [], [key]: 1 }),
      });
      const err = (await compact({ ledger, scope, model, transcript: [{ role: 'user', content: 'hi' }] }).catch(
        (e: unknown) => e,
      )) as Error;
      expect(err).toMatchObject({ name: 'LedgerError', code: 'SUMMARY_INVALID' });
      expect(err.message).toMatch(/unknown field/);
      expect(err.message).not.toMatch(/[\u0000-\u001f]/);
      expect(err.message).not.toMatch(raw);
      expect(await ledger.resume(scope)).toBeUndefined();
    } finally {
      await ledger.close();
    }
  });

  it('an error that is no Error, and cannot be made text, is MODEL_FAILED all the same', async () => {
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      const scope = { principal: 'alice', session: 's1', run: 'r1' };
      // `String(err)` threw the object's own error out of compact, uncoded.
      const failing: ModelAdapter = async () => Promise.reject(untextable);
      const err = await compact({ ledger, scope, model: failing, transcript: [{ role: 'user', content: 'hi' }] }).catch(
        (e: unknown) => e,
      );
      expect(err).toMatchObject({ code: 'MODEL_FAILED', message: 'the model adapter failed: an object' });
      expect((err as Error).cause).toBe(untextable);
      // The SDK's words with the reason it keeps in its cause, bounded.
      const sdk: ModelAdapter = async (): Promise<ModelResponse> => {
        throw new Error('Connection error.', { cause: new Error(`fetch failed ${'z'.repeat(100_000)}`) });
      };
      const long = (await compact({ ledger, scope, model: sdk, transcript: [{ role: 'user', content: 'hi' }] }).catch(
        (e: unknown) => e,
      )) as Error;
      expect(long).toMatchObject({ code: 'MODEL_FAILED' });
      expect(long.message.startsWith('the model adapter failed: Connection error.: fetch failed zzz')).toBe(true);
      expect(long.message.length).toBeLessThan(1100);
    } finally {
      await ledger.close();
    }
  });

  it("the provider's error text in MODEL_FAILED: nothing a terminal acts on left raw, its words still there", async () => {
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      const scope = { principal: 'alice', session: 's1', run: 'r1' };
      // A provider's error quoting what it was sent (a transcript's text) or a body a proxy returned: ESC and BEL
      // (an OSC that retitles the terminal), the one-byte CSI, DEL, a right-to-left override, a line break.
      const words = `bad request: \u001b]0;owned\u0007${ACTING}\nsecond line`;
      const sdk: ModelAdapter = async (): Promise<ModelResponse> => {
        throw new Error('400 status code', { cause: new Error(words) });
      };
      const err = (await compact({ ledger, scope, model: sdk, transcript: [{ role: 'user', content: 'hi' }] }).catch(
        (e: unknown) => e,
      )) as Error;
      expect(err).toMatchObject({ name: 'LedgerError', code: 'MODEL_FAILED' });
      expect(err.message).not.toMatch(/[\u0000-\u001f]/);
      expect(err.message).not.toMatch(raw);
      expect(err.message).toBe(
        'the model adapter failed: 400 status code: bad request: \\u001b]0;owned\\u0007\\u009b2J\\u007f\\u202e\\u000asecond line',
      );
      // The provider's error itself is the cause, as it was.
      expect((err.cause as Error).cause).toMatchObject({ message: words });
      expect(await ledger.resume(scope)).toBeUndefined();
    } finally {
      await ledger.close();
    }
  });

  it("an injected signer's keyId that is no string by the time a refusal names it: the coded refusal all the same", async () => {
    // openLedger checks keyId is a string; the signer is the caller's object, read again after (a getter).
    const signerWith = (later: unknown, sign: () => Uint8Array) => {
      let reads = 0;
      return {
        get keyId(): unknown {
          return reads++ === 0 ? 'ed25519:kms' : later;
        },
        publicKey: new Uint8Array(32).fill(1),
        sign,
      };
    };
    const failing = () => {
      throw new Error('KMS unreachable');
    };
    const wrong = () => new Uint8Array(64);
    for (const later of [10n, untextable, Symbol('k')]) {
      for (const [sign, code] of [
        [failing, 'SIGNER_FAILED'],
        [wrong, 'KEY_INVALID'],
      ] as const) {
        const err = await openLedger({
          host: 'h',
          root: tempDir(),
          onNotice: () => {},
          signer: signerWith(later, sign) as never,
        }).catch((e: unknown) => e);
        expect(err, `${code} ${typeof later}`).toMatchObject({ name: 'LedgerError', code });
        expect((err as Error).message).toContain(`key ${shownValue(later)}`);
      }
    }
  });

  it("an adapter's request of another purpose is INVALID_ARGUMENT, whatever the purpose is", () => {
    const request = (purpose: unknown) => ({ purpose }) as unknown as ModelRequest;
    // String(purpose) threw the object's error.
    expect(thrown(() => compactionOnly('x', request(untextable)))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: /, not an object$/,
    });
    const err = thrown(() => compactionOnly('x', request(ACTING))) as Error;
    expect(err).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(err.message).not.toMatch(raw);
  });
});

describe("the CLI's report of an internal error", () => {
  it('names a thrown value that cannot be made text, where it threw in the handler', () => {
    let text = '';
    const stderr = new Writable({
      write(chunk: Buffer, _e, done) {
        text += chunk.toString();
        done();
      },
    });
    expect(reportInternalError(untextable, { stdout: stderr, stderr, env: {} })).toBe(70);
    expect(text).toBe('handoff-ledger: internal error: an object\n');
  });
});

describe('a stored record quoted in a refusal', () => {
  it("gc's RECORD_CORRUPT naming a head record's session or an entry's: nothing a terminal acts on left raw", async () => {
    const bad = `s${ACTING}`;
    const root = tempDir();
    const ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    try {
      const { id } = await ledger.publish({ principal: 'alice', session: 's1', run: 'r1' }, sampleSummary(1));
      const db = (ledger.log as LevelManifestLog).raw;
      // A head record keyed by no session id (written behind the log's back): JSON.stringify left its C1, DEL and
      // right-to-left override raw in gc's refusal.
      await db.put(`h!${bad}`, JSON.stringify({ session: bad, seq: 0, id, owner: 'alice' }));
      const head = (await gc(ledger, { graceMs: 0 }).catch((e: unknown) => e)) as Error;
      expect(head).toMatchObject({ name: 'LedgerError', code: 'RECORD_CORRUPT' });
      expect(head.message).toMatch(/^gc removes nothing: the head record of session "s\\u009b2J\\u007f\\u202e" names/);
      expect(head.message).not.toMatch(raw);
      // fsck's finding on the same record, as quoted.
      const findings = (await fsck(ledger)).findings.filter((f) => f.message.includes('head record of session'));
      expect(findings).toEqual([
        {
          code: 'RECORD_CORRUPT',
          session: bad,
          message:
            'manifest log head record of session "s\\u009b2J\\u007f\\u202e" is corrupt: its session is not a valid id',
        },
      ]);
      await db.del(`h!${bad}`);
      // Position 0 leads to an entry of that session whose manifest cannot be read.
      const key = `e!${bad}!000000000000`;
      await db.put('p!0000000000000000', key);
      await db.put(key, JSON.stringify({ position: 0, session: bad, seq: 0, id, principal: 'alice', envelope: '' }));
      const entry = (await gc(ledger, { graceMs: 0 }).catch((e: unknown) => e)) as Error;
      expect(entry).toMatchObject({ name: 'LedgerError', code: 'RECORD_CORRUPT' });
      expect(entry.message).toMatch(
        /^gc removes nothing: the manifest at "s\\u009b2J\\u007f\\u202e" seq 0 cannot be read/,
      );
      expect(entry.message).not.toMatch(raw);
    } finally {
      await ledger.close();
    }
  });

  it("the embedded log's RECORD_CORRUPT naming a record's key that is no key of its kind", () => {
    // JSON.stringify quoted the key and left its C1, DEL and right-to-left override raw.
    for (const call of [
      () => parseIdPositionRecord(`i!x${ACTING}`, '0'),
      () => parseInlineKey(`t!${ACTING}`),
      () => parsePositionKey(`p!${ACTING}`),
    ]) {
      const err = thrown(call) as Error;
      expect(err).toMatchObject({ name: 'ManifestError', code: 'RECORD_CORRUPT' });
      expect(err.message).toMatch(
        /^manifest log record "[itp]!(x)?\\u009b2J\\u007f\\u202e" is corrupt: not the key of/,
      );
    }
  });

  it("the embedded log's RECORD_CORRUPT naming the key of a grant record a listing reads: escaped, not quoted", async () => {
    const ledger = await openLedger({ host: 'h', root: tempDir(), onNotice: () => {} });
    try {
      // A grant record under a key a hand edit made: the key went into the refusal as it was.
      await (ledger.log as LevelManifestLog).raw.put(`g!alice${ACTING}!s1`, 'not json');
      const err = (await ledger.log.grants.list().catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ name: 'ManifestError', code: 'RECORD_CORRUPT' });
      expect(err.message).toBe('manifest log record g!alice\\u009b2J\\u007f\\u202e!s1 is corrupt: not JSON');
    } finally {
      await ledger.close();
    }
  });

  it("an open's origin other than the stored one, where the log was named before the rule: the names escaped", async () => {
    const root = tempDir();
    // A name the rule refuses a new log, legal in a C2SP key name: one given before it opens as ever.
    await embeddedNamedAsBefore(root, `example.com/${ACTING}`);
    const err = (await openLedger({ root, host: 'h', origin: 'example.com/other', onNotice: () => {} }).catch(
      (e: unknown) => e,
    )) as Error;
    expect(err).toMatchObject({ name: 'LedgerError', code: 'INVALID_ARGUMENT' });
    // The stored name went into the message as it was.
    expect(err.message).toBe(
      "this store's checkpoint origin is example.com/\\u009b2J\\u007f\\u202e, not example.com/other",
    );
  });

  it('FORK naming a log named before the rule, whose root pins another log: the name escaped', async () => {
    const root = tempDir();
    await embeddedNamedAsBefore(root, `example.com/${ACTING}`);
    // A pin of another log (its file name is its origin's hash): the open refuses before writing under its own.
    mkdirSync(join(root, 'checkpoints'), { recursive: true });
    writeFileSync(join(root, 'checkpoints', `${'0'.repeat(64)}.pin`), '');
    const err = (await openLedger({ root, host: 'h', onNotice: () => {} }).catch((e: unknown) => e)) as Error;
    expect(err).toMatchObject({ name: 'LedgerError', code: 'FORK' });
    // JSON.stringify left the log's C1, DEL and right-to-left override raw.
    expect(err.message).toContain('not the log named "example.com/\\u009b2J\\u007f\\u202e"');
    expect(err.message).not.toMatch(raw);
  });

  it("FORK naming the origin a pin file copied under this log's name carries: escaped", async () => {
    const root = tempDir();
    const ledger = await openLedger({ root, host: 'h', onNotice: () => {} });
    const current = await ledger.checkpoint();
    // A pin whose body names another log, signed by a key of this one's name (a pin file copied under another origin's
    // name carries any text the note's origin line may hold): its origin went into the refusal as it was.
    const signer = (ledger as unknown as { keyring: { checkpointSigner: NoteSigner } }).keyring.checkpointSigner;
    const body = current.note.slice(0, current.note.indexOf('\n\n') + 1);
    const other = `example.com/${ACTING}${body.slice(body.indexOf('\n'))}`;
    await ledger.close();
    const pin = readdirSync(join(root, 'checkpoints')).find((n) => n.endsWith('.pin'))!;
    rmSync(join(root, 'checkpoints', pin));
    writeFileSync(join(root, 'checkpoints', pin.replace(/\.pin$/, '.note')), await signNote(other, [signer]));
    const err = (await openLedger({ root, host: 'h', onNotice: () => {} }).catch((e: unknown) => e)) as Error;
    expect(err).toMatchObject({ name: 'LedgerError', code: 'FORK' });
    expect(err.message).toContain('pins origin example.com/\\u009b2J\\u007f\\u202e, not ');
    expect(err.message).not.toMatch(raw);
    // An origin line of kilobytes (the pin holds up to 64 KiB) is cut.
    const long = `example.com/${'x'.repeat(10_000)}${body.slice(body.indexOf('\n'))}`;
    writeFileSync(join(root, 'checkpoints', pin.replace(/\.pin$/, '.note')), await signNote(long, [signer]));
    const cutErr = (await openLedger({ root, host: 'h', onNotice: () => {} }).catch((e: unknown) => e)) as Error;
    expect(cutErr).toMatchObject({ name: 'LedgerError', code: 'FORK' });
    expect(cutErr.message.length).toBeLessThan(1000);
  });

  it("a lock file's host in LOCKED: escaped", async () => {
    const path = join(tempDir(), 'trust.json');
    // A fresh lock of another machine: waited for, never taken over before its age (waitMs 0: LOCKED at once).
    writeFileSync(`${path}.lock`, JSON.stringify({ pid: 1, host: `other${ACTING}`, nonce: 'n' }));
    const err = (await withFileLock(path, 'trust.json', async () => 'ran', { waitMs: 0 }).catch(
      (e: unknown) => e,
    )) as Error;
    expect(err).toMatchObject({ name: 'LedgerError', code: 'LOCKED' });
    expect(err.message).toContain('pid 1 on "other\\u009b2J\\u007f\\u202e"');
    expect(err.message).not.toMatch(raw);
  });

  it("a witness's stored tree that is damaged, named by its log's origin: escaped", async () => {
    const dir = join(tempDir(), 'state');
    const state = await WitnessState.open(dir);
    try {
      const origin = `example.com/log${ACTING}`;
      mkdirSync(join(dir, 'logs'), { recursive: true });
      writeFileSync(join(dir, 'logs', `${originHash(origin)}.json`), 'null\n');
      const err = (await state.get(origin).catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ code: 'RECORD_CORRUPT' });
      expect(err.message).not.toMatch(raw);
    } finally {
      await state.close();
    }
  });

  it("a witness state's key record naming another key: WITNESS_KEY_MISMATCH with that key escaped", async () => {
    const dir = join(tempDir(), 'state');
    mkdirSync(dir, { recursive: true });
    // witness.json is a file on disk: the key it names went into the refusal as it was.
    writeFileSync(join(dir, 'witness.json'), JSON.stringify({ version: 1, vkey: `w+00000000+${ACTING}` }));
    const err = (await WitnessState.open(dir, 'w+11111111+AAAA').catch((e: unknown) => e)) as Error;
    expect(err).toMatchObject({ name: 'LedgerError', code: 'WITNESS_KEY_MISMATCH' });
    expect(err.message).toContain('the witness key "w+00000000+\\u009b2J\\u007f\\u202e", not of w+11111111+AAAA');
    expect(err.message).not.toMatch(raw);
  });

  it("resume's, history's and fsck's refusal of an entry stored with another principal: the stored one escaped", async () => {
    const root = tempDir();
    const scope = { principal: 'alice', session: 's1', run: 'r1' };
    let ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    await ledger.publish(scope, sampleSummary(0));
    await ledger.publish(scope, sampleSummary(1));
    const entry = await ledger.log.entry('s1', 1);
    await ledger.close();
    // The entry's principal column, edited behind the log's back: JSON.stringify left its one-byte CSI, DEL and
    // right-to-left override raw in the refusal, and all of its length.
    const stored = `mallory${ACTING}${'x'.repeat(2000)}`;
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    await log.raw.put('e!s1!000000000001', JSON.stringify({ ...entry!, principal: stored }));
    await log.close();
    ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    try {
      for (const refusal of [() => ledger.resume(scope), () => ledger.history(scope)]) {
        const err = (await refusal().catch((e: unknown) => e)) as Error;
        expect(err).toMatchObject({ name: 'LedgerError', code: 'CHAIN_BROKEN' });
        expect(err.message).toContain('the entry records principal "mallory\\u009b2J\\u007f\\u202exxx');
        expect(err.message).not.toMatch(raw);
        expect(err.message.length).toBeLessThan(300);
      }
      const [finding] = (await fsck(ledger)).findings.filter((f) => f.code === 'PRINCIPAL_MISMATCH');
      expect(finding!.message).toContain('principal "mallory\\u009b2J');
      expect(finding!.message).not.toMatch(raw);
      expect(finding!.message.length).toBeLessThan(300);
    } finally {
      await ledger.close();
    }
  });

  it("resume's SCOPE_MISMATCH for an entry a log of the caller's serves under another session: that session escaped", async () => {
    const root = tempDir();
    const scope = { principal: 'alice', session: 's1', run: 'r1' };
    const log = await LevelManifestLog.open(join(tempDir(), 'log'));
    const ledger = await openLedger({ host: 'h', root, log, onNotice: () => {} });
    try {
      await ledger.publish(scope, sampleSummary(0));
      // The entry at the head as a log of the caller's may serve it: stored under another session. The refusal named
      // the signed manifest's session (the one asked for), not the one the entry is stored under.
      const headWindow = log.headWindow.bind(log);
      log.headWindow = async (session: string) => {
        const w = await headWindow(session);
        return { ...w, entryAtHead: w.entryAtHead && { ...w.entryAtHead, session: `other${ACTING}` } };
      };
      const err = (await ledger.resume(scope).catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ name: 'LedgerError', code: 'SCOPE_MISMATCH' });
      expect(err.message).toBe('session s1 seq 0: the entry is stored under session "other\\u009b2J\\u007f\\u202e"');
    } finally {
      await ledger.close();
      await log.close();
    }
  });

  it("resume's and history's PAYLOAD_TYPE naming a stored envelope's payload type: escaped", async () => {
    const root = tempDir();
    const scope = { principal: 'alice', session: 's1', run: 'r1' };
    let ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    await ledger.publish(scope, sampleSummary(0));
    const entry = await ledger.log.entry('s1', 0);
    await ledger.close();
    // The envelope's payload type, edited behind the log's back: JSON.stringify left its one-byte CSI, DEL and
    // right-to-left override raw in the refusal.
    const envelope = { ...JSON.parse(entry!.envelope), payloadType: `t${ACTING}` };
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    await log.raw.put('e!s1!000000000000', JSON.stringify({ ...entry!, envelope: JSON.stringify(envelope) }));
    await log.close();
    ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    try {
      for (const refusal of [() => ledger.resume(scope), () => ledger.history(scope)]) {
        const err = (await refusal().catch((e: unknown) => e)) as Error;
        expect(err).toMatchObject({ name: 'ManifestError', code: 'PAYLOAD_TYPE' });
        expect(err.message).toContain('payload type "t\\u009b2J\\u007f\\u202e" is not ');
        expect(err.message).not.toMatch(raw);
      }
    } finally {
      await ledger.close();
    }
  });

  it("publish's CHAIN_CONFLICT naming a stored head whose id is no manifest id: escaped", async () => {
    const root = tempDir();
    const scope = { principal: 'alice', session: 's1', run: 'r1' };
    let ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    const { id } = await ledger.publish(scope, sampleSummary(0));
    await ledger.close();
    // The head record, edited behind the log's back: its id went into the refusal as it was.
    const log = await LevelManifestLog.open(join(root, 'manifests-v1'));
    await log.raw.put('h!s1', JSON.stringify({ session: 's1', seq: 0, id: `x${ACTING}`, owner: 'alice' }));
    await log.close();
    ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    try {
      for (const refusal of [
        () => ledger.checkPublish(scope, { expectedPrev: id }),
        () => ledger.publish(scope, sampleSummary(1), { expectedPrev: id }),
      ]) {
        const err = (await refusal().catch((e: unknown) => e)) as Error;
        expect(err).toMatchObject({ code: 'CHAIN_CONFLICT' });
        expect(err.message).toContain('found "x\\u009b2J\\u007f\\u202e" at seq 0');
        expect(err.message).not.toMatch(raw);
      }
    } finally {
      await ledger.close();
    }
  });

  it('an origin a log refuses to be named: escaped', async () => {
    const log = await LevelManifestLog.open(join(tempDir(), 'log'));
    try {
      const err = (await log.origin(`o${ACTING}`).catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ name: 'ManifestError', code: 'INVALID_ARGUMENT' });
      expect(err.message).not.toMatch(raw);
    } finally {
      await log.close();
    }
  });
});

describe("a caller's argument quoted in a refusal", () => {
  it('a manifest id, an expectedPrev, a duration, a hash backend, a verifier, a witness URL, a logs file origin', async () => {
    const hostile = `x${ACTING}`;
    const messages: string[] = [
      (thrown(() => parseManifestId(hostile)) as Error).message,
      (thrown(() => parseExpectedPrev(hostile)) as Error).message,
      (thrown(() => parseDuration(hostile)) as Error).message,

      hashBackendNameProblem(hostile)!,
      ((await openLedger({ host: 'h', root: tempDir(), verifier: hostile as never }).catch((e: unknown) => e)) as Error)
        .message,
      ...['nope', 'ftp://w.example/', 'https://w.example/?q=1'].map(
        (url) =>
          (thrown(() => checkWitnessingOptions({ witnesses: [{ url: `${url}${ACTING}` }] } as never)) as Error).message,
      ),
      (thrown(() => checkWitnessingOptions({ witnesses: [{ url: `https://w.example/#${ACTING}` }] } as never)) as Error)
        .message,
      (
        thrown(() =>
          parseWitnessLogs(
            JSON.stringify({ logs: [{ origin: hostile, keys: Array.from({ length: 257 }, () => 'k') }] }),
          ),
        ) as Error
      ).message,
    ];
    for (const message of messages) {
      expect(message).toContain('\\u009b2J\\u007f\\u202e');
      expect(message).not.toMatch(raw);
    }
    // A duration too long to be one, between blanks parseDuration trims: the byte-order mark and the line separator
    // JSON.stringify leaves raw are escaped too.
    const long = (thrown(() => parseDuration(`\ufeff${'9'.repeat(400)}\u2028`)) as Error).message;
    expect(long).toMatch(/^not a duration: "\\ufeff9{400}\\u2028" is too long/);
  });

  it('null for an id or a hash backend is named null, not "object" (its typeof)', async () => {
    // `principal: user.id ?? null` is refused INVALID_ID: "principal object is not a valid id" named a value not given.
    const root = tempDir();
    const ledger = await openLedger({ host: 'h', root, onNotice: () => {} });
    try {
      await expect(ledger.resume({ principal: null, session: 's' } as never)).rejects.toMatchObject({
        code: 'INVALID_ID',
        message: 'principal null is not a valid id (1-128 chars of [A-Za-z0-9._:@-], starting alphanumeric)',
      });
    } finally {
      await ledger.close();
    }
    // (openLedger's `hash: null` and `verifier: null` are the options left out, as every null of its options but host:
    // test/odd-inputs.test.ts.) A value of another type is refused naming its type, null as null.
    expect(hashBackendNameProblem(null)).toBe('unknown BLAKE3 backend null (auto, native, wasm or noble)');
    const parent = tempDir();
    for (const [options, message] of [
      [{ hash: {} }, 'unknown BLAKE3 backend object (auto, native, wasm or noble)'],
      [{ verifier: {} }, 'verifier: auto, node or noble, not an object'],
    ] as const)
      await expect(openLedger({ host: 'h', root: join(parent, 'store'), ...options } as never)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message,
      });
    expect(readdirSync(parent)).toEqual([]);
    // Another type is named by it, as before.
    expect(hashBackendNameProblem(5)).toBe('unknown BLAKE3 backend number (auto, native, wasm or noble)');
  });
});

describePostgres('PostgreSQL rows quoted in RECORD_CORRUPT', (pg) => {
  it("a grant's principal and session, which grants.list() reads from every row: escaped", async () => {
    const schema = 'message_values';
    const ledger = await openLedger({
      host: 'h',
      root: tempDir(),
      postgres: { connectionString: pg.connectionString, schema },
      onNotice: () => {},
    });
    const client = new pgLib.Client({ connectionString: pg.connectionString });
    await client.connect();
    try {
      const hostile = `k${ACTING}`;
      // A row written behind the library's back, with a time that is none: JSON.stringify left the one-byte CSI, DEL
      // and a right-to-left override of its principal and session raw in the refusal.
      await client.query(
        `INSERT INTO "${schema}".grants (principal, session, state, at, by) VALUES ($1, $1, 'granted', 'yesterday', NULL)`,
        [hostile],
      );
      const err = (await ledger.log.grants.list().catch((e: unknown) => e)) as Error;
      expect(err).toMatchObject({ name: 'ManifestError', code: 'RECORD_CORRUPT' });
      expect(err.message).toBe(
        'manifest log record grants["k\\u009b2J\\u007f\\u202e", "k\\u009b2J\\u007f\\u202e"] is corrupt: at is not a date',
      );
    } finally {
      await client.end();
      await ledger.close();
    }
  });
});
