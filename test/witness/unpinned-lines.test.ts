/**
 * A witness given by URL alone (no verifier key) cannot make the ledger's checkpoint unreadable: a note reader (ours,
 * Go's note.Open) refuses the whole note for one signature line under an invalid key name, or for more than 100
 * lines, and an auditor would lose every check the checkpoint carries (CHECKPOINT_INVALID). Such lines are left out
 * of what the ledger keeps, saves, restores and exports; the witness's valid line is kept.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosignCheckpoint, cosignerKeyHash, encodeCosignerKey } from '../../manifests/crypto/cosignature.js';
import { openNote, parseVerifierKey } from '../../manifests/crypto/note.js';
import { encodeBase64 } from '../../manifests/encoding/base64.js';
import { openLedger } from '../../src/ledger/open.js';
import { main } from '../../src/cli/main.js';
import { captureIo } from '../support/capture-io.js';
import { sampleSummary } from '../support/tmp.js';
import { answeringWitness, noteSigner } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'hl-unpinned-lines-'));
const scope = { principal: 'alice', session: 's1', run: 'r1' };
const GOOD = 'witness.example/good';
const good = noteSigner(GOOD, new Uint8Array(32).fill(21));
const goodKey = encodeCosignerKey(GOOD, good.publicKey);

/** 76 bytes of the shape of a cosignature under `name` (key hash first), junk after it. */
function junkLine(name: string): string {
  const body = new Uint8Array(76).fill(7);
  new DataView(body.buffer).setUint32(0, cosignerKeyHash(name, good.publicKey));
  return `\u2014 ${name} ${encodeBase64(body)}\n`;
}
/** Lines a note reader refuses: a name with `+`, with a C0 control, with U+0085 (a Unicode space to Go). */
const BREAKING = [junkLine('evil+witness'), junkLine('evil\u0001witness'), junkLine('evil\u0085witness')];

let witness: Awaited<ReturnType<typeof answeringWitness>>;
let url: string;
/** `<root>/checkpoints/<blake3(origin)>`: the pin's name without `.pin`; the witnesses' files go beside it. */
const stemOf = (root: string) =>
  join(
    root,
    'checkpoints',
    readdirSync(join(root, 'checkpoints'))
      .find((f) => f.endsWith('.pin'))!
      .slice(0, -4),
  );
const sigLines = (note: string) =>
  note
    .slice(note.lastIndexOf('\n\n') + 2)
    .split('\n')
    .filter(Boolean);

beforeAll(async () => {
  // A witness answering its own valid cosignature and, after it, lines that break any note they are added to.
  witness = await answeringWitness(
    async (text) => (await cosignCheckpoint(text, good, 1_700_000_000)) + BREAKING.join(''),
  );
  url = witness.url;
});
afterAll(async () => {
  await witness.close();
  rmSync(base, { recursive: true, force: true });
});

describe('lines of a witness without a pinned key', () => {
  it('that would break the note are left out: the export verifies, with the witness’s valid cosignature', async () => {
    const root = join(base, 'store');
    const ledger = await openLedger({
      root,
      host: 'host-u',
      origin: 'example.com/unpinned-lines',
      witnesses: { witnesses: [url], timeoutMs: 2000, retryMs: 60_000 },
      onNotice: () => {},
    });
    try {
      await ledger.publish(scope, sampleSummary('witnessed by URL alone'));
      const cp = await ledger.checkpoint();
      const keys = [parseVerifierKey(ledger.checkpointVerifierKey)];
      expect(() => openNote(cp.note, keys)).not.toThrow();
      expect(sigLines(cp.note).map((l) => l.split(' ')[1])).toEqual(['example.com/unpinned-lines', GOOD]);
    } finally {
      await ledger.close();
    }
    // What was saved for a restart holds no such line either.
    const saved = readFileSync(`${stemOf(root)}.cosigned.note`, 'utf8');
    for (const line of BREAKING) expect(saved).not.toContain(line);

    const env = { HANDOFF_LEDGER_WITNESSES: url };
    const cli = async (argv: string[]) => {
      const c = captureIo({ env });
      const code = await main(argv, c.io);
      return { code, stdout: c.stdout(), stderr: c.stderr() };
    };
    const store = ['--root', root, '--host', 'host-u'];
    const out = join(base, 'bundle');
    const trust = join(base, 'trust.json');
    const witnessKeys = join(base, 'witnesses.txt');
    writeFileSync(witnessKeys, `${goodKey}\n`);
    expect((await cli(['export', ...store, '--out', out])).code).toBe(0);
    expect((await cli(['keys', 'export', ...store, '--out', trust])).code).toBe(0);
    const verify = await cli([
      'verify',
      out,
      '--trust',
      trust,
      '--witness-keys',
      witnessKeys,
      '--quorum',
      '1',
      '--json',
    ]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    const report = JSON.parse(verify.stdout) as {
      findings: unknown[];
      checkpoint: { witnesses: { signedBy: Array<{ witness: string }> } };
    };
    expect(report.findings).toEqual([]);
    expect(report.checkpoint.witnesses.signedBy.map((s) => s.witness.split('+')[0])).toEqual([GOOD]);
  });

  it('restored from .cosigned.note are checked again: a planted breaking line, and lines past 100, are left out', async () => {
    const root = join(base, 'restored');
    const origin = 'example.com/unpinned-restored';
    const first = await openLedger({ root, host: 'host-r', origin });
    let note: string;
    let keys: ReturnType<typeof parseVerifierKey>[];
    try {
      await first.publish(scope, sampleSummary('saved, then tampered with'));
      note = (await first.checkpoint()).note;
      keys = [parseVerifierKey(first.checkpointVerifierKey)];
    } finally {
      await first.close();
    }
    // A file an older version wrote (or anyone who can write the root): the breaking lines, then 150 lines of the
    // shape of cosignatures, each under a name of its own.
    const many = Array.from({ length: 150 }, (_, i) => junkLine(`witness.example/w${i}`));
    writeFileSync(`${stemOf(root)}.cosigned.note`, note + BREAKING.join('') + many.join(''));
    const down = await openLedger({
      root,
      host: 'host-r',
      witnesses: { witnesses: ['http://127.0.0.1:1'], timeoutMs: 500, retryMs: 60_000 },
      onNotice: () => {},
    });
    try {
      const cp = await down.checkpoint();
      expect(() => openNote(cp.note, keys)).not.toThrow();
      for (const line of BREAKING) expect(cp.note).not.toContain(line);
      expect(sigLines(cp.note)).toHaveLength(100);
    } finally {
      await down.close();
    }
  });
});
